"""glibc malloc tuning (hybridfw.static.allocator): once set, a run that allocates and frees the
same arrays again touches no new pages; HYBRIDFW_MALLOC_TUNING=0 leaves malloc alone."""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent("""
    import resource, sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from hybridfw.static import allocator

    def rounds(n):  # what a plan's run does: arrays allocated, filled, freed
        for _ in range(n):
            arrays = [np.empty(16384, np.float32) for _ in range(40)]
            for a in arrays:
                a.fill(1)
            del arrays

    tuned = allocator.tune()
    rounds(3)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    rounds(50)
    print(tuned, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def _run(env_value=None):
    env = dict(os.environ)
    env.pop("HYBRIDFW_MALLOC_TUNING", None)
    if env_value is not None:
        env["HYBRIDFW_MALLOC_TUNING"] = env_value
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(root=ROOT)], env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout.split()
    return out[0] == "True", int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc only")
def test_tuned_malloc_keeps_freed_pages_for_the_next_run():
    tuned, faults = _run()
    if not tuned:
        pytest.skip("not glibc")
    assert faults == 0


def test_the_environment_variable_turns_it_off():
    tuned, _ = _run("0")
    assert tuned is False


def test_a_cpu_plan_tunes_malloc():
    import numpy as np

    import hybridfw as hf
    from hybridfw.static import allocator
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        y = hf.static.data("x", [4]) * 2.0
    hf.static.Executor().run(prog, feed={"x": np.ones(4, np.float32)}, fetch_list=[y])
    assert allocator._state is not None  # decided (True on glibc, False elsewhere or when off)
