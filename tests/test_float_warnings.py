"""hybridfw's kernels give inf/nan as PyTorch does, without numpy's RuntimeWarnings (eager and
in static plans); numpy called by the user still warns. Run in fresh processes: the filter is set
when hybridfw is imported, and pytest's own per-test filters would take precedence here."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

EAGER = """
import numpy as np, hybridfw as hf
x = hf.tensor([0.0, 1.0, -1.0])
def f(x):
    return (x / 0).log(), (x * 1000).exp(), x.sqrt()
for fn in (f, hf.jit.to_static(f)):
    logs, exps, roots = fn(x)
    np.testing.assert_array_equal(logs.numpy(), [np.nan, np.inf, np.nan])
    np.testing.assert_array_equal(exps.numpy(), [1.0, np.inf, 0.0])
    np.testing.assert_array_equal(roots.numpy(), [0.0, 1.0, np.nan])
"""


@pytest.mark.parametrize("code, warns", [
    (EAGER, False),
    ("import hybridfw as hf, numpy as np; np.log(np.zeros(1))", True),
], ids=["hybridfw kernels", "numpy directly"])
def test_in_a_fresh_process(code, warns, tmp_path):
    script = tmp_path / "script.py"  # (to_static reads the function's source from its file)
    script.write_text(code)
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p))
    result = subprocess.run([sys.executable, "-W", "default", str(script)], capture_output=True,
                            text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert ("RuntimeWarning" in result.stderr) is warns, result.stderr
