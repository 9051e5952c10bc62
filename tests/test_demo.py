"""The main demo (README's first command): the digits CNN reaches >= 97% eagerly and converted
with ``hf.jit.to_static``; the saved weights and the ``hf.jit.save`` export (loaded in a fresh
process) score the same."""
import re

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("tqdm")


def _accuracy(lines, prefix):
    found = [float(m.group(1)) for line in lines if line.startswith(prefix)
             for m in [re.search(r"test accuracy (\d\.\d{4})$", line)] if m]
    assert len(found) == 1, (prefix, lines)
    return found[0]


def test_digits_demo_eager_and_static(tmp_path, capsys):
    from hybridfw.demo import main

    path = tmp_path / "digits.hf"
    result = main(["--save", str(path), "--no-progress"])
    lines = capsys.readouterr().out.splitlines()

    eager = _accuracy(lines, "eager: trained in")
    assert eager >= 0.97, lines
    assert _accuracy(lines, "reloaded into a fresh model:") == eager
    assert path.exists()

    static = _accuracy(lines, "to_static: trained in")
    assert static >= 0.97, lines
    assert _accuracy(lines, "reloaded with hf.jit.load in a fresh process:") == static
    assert result["exported_accuracy"] == result["static_accuracy"]
    assert any(re.match(r"median step time: eager [\d.]+ ms/step \| to_static [\d.]+ ms/step",
                        line) for line in lines), lines
    # 1,437 training images in batches of 64: full batches, then one of 29 each epoch; the
    # first step of each shape converts and compiles (and is left out of the median)
    assert len(result["static_compile_steps_ms"]) == 2
