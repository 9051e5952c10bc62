"""Regions, tiering, the disk cache across processes, training programs and the fallback."""
from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.static import Executor, Program, data, program_guard
from hybridfw.static import lowering

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _mixed_program():
    """Lowerable ops, then softmax (no lowering rule), then lowerable ops again."""
    prog = Program()
    with program_guard(prog):
        x = data("x", [4, 8])
        a = (x * 2.0 + 1.0).tanh() - x
        s = hf.nn.functional.softmax(a, dim=1)
        y = (s * 3.0 + a).relu().sum(dim=1)
    return prog, y


def test_mixed_program_compiles_around_the_unlowerable_op(need_numba):
    prog, y = _mixed_program()
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    # independent reference in numpy
    a = np.tanh(x * 2 + 1) - x
    e = np.exp(a - a.max(axis=1, keepdims=True))
    s = e / e.sum(axis=1, keepdims=True)
    ref = np.maximum(s * 3 + a, 0).sum(axis=1)
    exe = Executor(backend="compiled")
    got = exe.run(prog, feed={"x": x}, fetch_list=[y], return_numpy=True)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    interpreted = Executor().run(prog, feed={"x": x}, fetch_list=[y], return_numpy=True)[0]
    np.testing.assert_allclose(got, interpreted, rtol=1e-6)
    lowered = exe.compile(prog, feed={"x": x}, fetch_list=[y]).lowering
    assert len(lowered.regions) == 2, lowered.report()
    reasons = {op.type: reason for _, op, reason in lowered.left_out}
    assert "softmax" in reasons and "no lowering rule" in reasons["softmax"]
    source = exe.compile(prog, feed={"x": x}, fetch_list=[y]).source
    assert source.count("_region_") == 2  # the plan calls both regions around softmax


def test_tiering_compiles_after_k_runs(need_numba):
    prog, y = _mixed_program()
    x = np.ones((4, 8), np.float32)
    exe = Executor(backend="auto", tier_after=3, tier_background=False)
    results = []
    for _ in range(5):
        results.append(exe.run(prog, feed={"x": x}, fetch_list=[y], return_numpy=True)[0])
        plan = exe.compile(prog, feed={"x": x}, fetch_list=[y])
        results[-1] = (results[-1], plan.lowering is not None)
    # runs 1-3 are interpreted; the 4th compiles the regions first
    assert [compiled for _, compiled in results] == [False, False, False, True, True]
    for value, _ in results[1:]:
        np.testing.assert_allclose(value, results[0][0], rtol=1e-6)


def test_to_static_auto_keeps_the_first_call_interpreted(need_numba):
    @hf.jit.to_static(tier_after=2)
    def f(x):
        while x.sum() < 100.0:
            x = x * 2.0 + 1.0
        return x
    x = hf.ones(4)
    first = f(x).numpy()
    assert "interpreted so far" in f.compile_report()
    for _ in range(3):
        np.testing.assert_allclose(f(x).numpy(), first, rtol=1e-6)
    assert f.finish_tiering(timeout=120)  # compiled in the background meanwhile
    np.testing.assert_allclose(f(x).numpy(), first, rtol=1e-6)
    assert "1 compiled region(s)" in f.compile_report()
    np.testing.assert_array_equal(first, [31.0] * 4)  # 1 -> 3 -> 7 -> 15 -> 31 (sum 124)


def test_background_tiering_never_blocks_a_run(need_numba, monkeypatch):
    """The run reaching tier_after returns on the interpreted plan while a thread compiles
    (made slow here); later runs switch to the compiled plan once it is ready."""
    import threading

    from hybridfw.static import executor as executor_module
    prog, y = _mixed_program()
    x = np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32)
    release = threading.Event()
    real = executor_module._compile_program

    def slow(*args, **kwargs):
        if kwargs.get("lower"):
            assert release.wait(60)
        return real(*args, **kwargs)
    monkeypatch.setattr(executor_module, "_compile_program", slow)
    exe = Executor(backend="auto", tier_after=2, tier_background=True)
    results = [exe.run(prog, feed={"x": x}, fetch_list=[y], return_numpy=True)[0]
               for _ in range(4)]  # the 3rd run starts the compile; none waits for it
    plan = exe.compile(prog, feed={"x": x}, fetch_list=[y])
    assert plan.lowering is None and not exe.finish_tiering(timeout=0.01)
    release.set()
    assert exe.finish_tiering(timeout=60)
    results.append(exe.run(prog, feed={"x": x}, fetch_list=[y], return_numpy=True)[0])
    lowering = exe.compile(prog, feed={"x": x}, fetch_list=[y]).lowering
    assert lowering.regions, lowering.report()
    for value in results[1:]:
        np.testing.assert_allclose(value, results[0], rtol=1e-6)


def test_a_second_program_with_the_same_regions_reuses_them(need_numba):
    """Same generated module, same numba dispatcher: compiled once, used by both (it used to
    fail with 'compilation disabled' and run interpreted)."""
    x = np.random.default_rng(4).standard_normal((4, 8)).astype(np.float32)
    values = []
    for _ in range(2):
        prog, y = _mixed_program()
        exe = Executor(backend="compiled")
        values.append(exe.run(prog, feed={"x": x}, fetch_list=[y], return_numpy=True)[0])
        lowering = exe.compile(prog, feed={"x": x}, fetch_list=[y]).lowering
        assert len(lowering.regions) == 2, lowering.report()
    np.testing.assert_array_equal(values[0], values[1])


def test_backend_is_validated():
    with pytest.raises(ValueError, match="backend"):
        hf.jit.to_static(lambda x: x, backend="fast")
    with pytest.raises(ValueError, match="backend"):
        Executor(backend="jit")


class TinyCellLoop(hf.nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = hf.nn.LSTMCell(3, 5)
        self.w = hf.nn.Parameter(hf.tensor(np.linspace(-1, 1, 5).astype(np.float32)))

    def forward(self, x):
        h = hf.zeros(x.shape[1], 5)
        c = hf.zeros(x.shape[1], 5)
        for t in range(2):
            h, c = self.cell(x[t], (h, c))
            h = (h * self.w + 0.5).tanh() * 0.9 - h
        return h


def test_training_forward_and_backward_regions(need_numba):
    x = hf.tensor(np.random.default_rng(1).standard_normal((2, 2, 3)).astype(np.float32))
    grads = {}
    for backend in ("interpreted", "compiled"):
        hf.manual_seed(0)
        model = hf.jit.to_static(TinyCellLoop(), backend=backend)
        model(x).sum().backward()
        grads[backend] = [p.grad.numpy() for p in model.parameters()]
        if backend == "compiled":
            report = model.forward.compile_report()
    forward, backward = report.split("backward program:")
    assert "0 compiled region(s)" not in forward and "0 compiled region(s)" not in backward, \
        report
    for a, b in zip(grads["interpreted"], grads["compiled"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7)
    # the eager model as an independent oracle
    hf.manual_seed(0)
    eager = TinyCellLoop()
    eager(x).sum().backward()
    for p, b in zip(eager.parameters(), grads["compiled"]):
        np.testing.assert_allclose(b, p.grad.numpy(), rtol=1e-4, atol=1e-6)


_CHILD = textwrap.dedent("""
    import json, time
    import hybridfw as hf

    @hf.jit.to_static(backend="compiled")
    def collatz(n):
        steps = n * 0
        while n != 1:
            if n % 2 == 0:
                n = n // 2
            else:
                n = 3 * n + 1
            steps = steps + 1
        return steps

    start = time.perf_counter()
    value = collatz(hf.tensor(27, dtype="int32")).item()
    entry = collatz._last
    plan = [c for c in entry.executor._cache.values() if c.lowering is not None][0]
    print(json.dumps({"value": value, "stats": plan.lowering.stats(),
                      "seconds": time.perf_counter() - start}))
""")


def _child(cache: str, script: str) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT, HYBRIDFW_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, script], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_disk_cache_spares_a_new_process_the_compilation(tmp_path, need_numba):
    script = tmp_path / "child.py"  # the converter reads the function's source from a file
    script.write_text(_CHILD)
    cache = tmp_path / "cache"
    first = _child(str(cache), str(script))
    second = _child(str(cache), str(script))
    assert first["value"] == second["value"] == 111
    assert first["stats"]["region_0"]["cache_misses"] == 1
    assert second["stats"]["region_0"] == {"cache_hits": 1, "cache_misses": 0, "signatures": 1}
    assert any(name.endswith(".py") for name in os.listdir(cache))


def _small_chain(t):
    return (t * 2.0).tanh() + t


def test_fallback_without_numba(monkeypatch, caplog):
    monkeypatch.setenv(lowering.NUMBA_ENV_VAR, "0")
    monkeypatch.setitem(lowering._state, "announced", False)
    prog, y = _mixed_program()
    x = np.ones((4, 8), np.float32)
    with caplog.at_level(logging.INFO, logger="hybridfw.lowering"):
        exe = Executor(backend="compiled")
        got = exe.run(prog, feed={"x": x}, fetch_list=[y], return_numpy=True)[0]
        exe.run(prog, feed={"x": x * 2}, fetch_list=[y], return_numpy=True)
        f = hf.jit.to_static(_small_chain, backend="compiled")
        f(hf.ones(3))
    messages = [r.getMessage() for r in caplog.records if r.name == "hybridfw.lowering"]
    assert len(messages) == 1 and "HYBRIDFW_NUMBA=0" in messages[0], messages
    assert exe.compile(prog, feed={"x": x}, fetch_list=[y]).lowering is None
    expected = Executor().run(prog, feed={"x": x}, fetch_list=[y], return_numpy=True)[0]
    np.testing.assert_array_equal(got, expected)
    assert "HYBRIDFW_NUMBA=0" in f.compile_report()


def test_fallback_when_numba_cannot_be_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba now raises ImportError
    monkeypatch.setattr(lowering, "_state", {"announced": True})
    assert not lowering.available()
    assert "cannot be imported" in lowering.unavailable_reason()
    prog, y = _mixed_program()
    x = np.ones((4, 8), np.float32)
    exe = Executor(backend="compiled")
    assert exe.compile(prog, feed={"x": x}, fetch_list=[y]).lowering is None


def test_a_cache_directory_others_can_write_is_not_used(tmp_path, monkeypatch):
    """numba reads back a pickled index from the cache directory, and the generated modules are
    imported from it: a directory someone else could write to is replaced by a private one."""
    from hybridfw.static.lowering import cache
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(shared))
    assert cache.cache_dir() != str(shared)
    private = tmp_path / "private"
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(private))
    assert cache.cache_dir() == str(private)
    assert private.stat().st_mode & 0o777 == 0o700


_EXITING_CHILD = textwrap.dedent("""
    import numpy as np
    import hybridfw as hf

    @hf.jit.to_static(tier_after=1)
    def f(x):
        return ((x * 2.0 + 1.0).tanh() * 3.0).sigmoid() - x

    x = hf.tensor(np.ones(8, np.float32))
    for _ in range(3):
        f(x)  # the 2nd call starts the background compile; nothing waits for it here
    print("exiting", flush=True)
""")


def test_exit_waits_for_a_background_compile(need_numba, tmp_path):
    """A script ending while numba compiles in the background exits cleanly, after the
    compilation (its numba cache is complete for the next process)."""
    script = tmp_path / "exiting.py"
    script.write_text(_EXITING_CHILD)
    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=ROOT, HYBRIDFW_CACHE_DIR=str(cache))
    env.pop("HYBRIDFW_TIER_BACKGROUND", None)  # the default: in the background
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "exiting"
    index = list(cache.rglob("*.nbi"))
    assert index, sorted(p.name for p in cache.rglob("*"))  # numba's cache index was written


def test_cache_directory_keeps_the_most_recently_used_modules(tmp_path):
    from hybridfw.static.lowering import cache
    pycache = tmp_path / "__pycache__"
    pycache.mkdir()
    for k in range(20):
        stem = f"hf_{k:024x}"
        for path in (tmp_path / f"{stem}.py", pycache / f"{stem}.region_0-9.py311.nbi",
                     pycache / f"{stem}.region_0-9.py311.1.nbc",
                     pycache / f"{stem}.cpython-311.pyc"):
            path.write_text("x")
            os.utime(path, (1000 + k, 1000 + k))  # module k used at time 1000 + k
    (tmp_path / "other.py").write_text("not ours")
    kept_old = f"hf_{0:024x}.py"
    removed = cache.prune(str(tmp_path), max_modules=8, keep=(kept_old,))
    left = sorted(p.name for p in tmp_path.glob("hf_*.py"))
    # down to 3/4 of 8 = 6, the newest (14..19), plus the one asked to keep
    assert left == sorted([kept_old] + [f"hf_{k:024x}.py" for k in range(14, 20)])
    assert removed == 13
    stems = {name[:-3] for name in left}
    assert {p.name.split(".", 1)[0] for p in pycache.iterdir()} == stems
    assert (tmp_path / "other.py").exists()
    assert cache.prune(str(tmp_path), max_modules=8) == 0  # within bounds now


def test_region_values_take_no_arena_space_and_are_not_copied(need_numba):
    """A region returns new arrays: its outputs live on the heap (no copy into the arena) and
    the values inside it are never materialized, so they are not planned at all."""
    prog, y = _mixed_program()
    x = np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32)
    interpreted = Executor().compile(prog, feed={"x": x}, fetch_list=[y])
    compiled = Executor(backend="compiled").compile(prog, feed={"x": x}, fetch_list=[y])
    # no region output copied into an arena view (an op's own result still may be)
    assert not re.search(r"_copyto\(_buf_(\w+), \1\)", compiled.source), compiled.source
    produced = {n for r in compiled.lowering.regions for op in r.ops for n in op.outputs}
    assert produced and not produced & set(compiled.memory.offsets)
    assert compiled.memory.arena_bytes < interpreted.memory.arena_bytes
    got = Executor(backend="compiled").run(prog, feed={"x": x}, fetch_list=[y],
                                           return_numpy=True)[0]
    want = Executor().run(prog, feed={"x": x}, fetch_list=[y], return_numpy=True)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_training_calls_reuse_both_plans_without_a_lookup(need_numba, monkeypatch):
    """Once tiering is done, a training step runs the forward and the backward plan straight
    from their own slots: the executor's cache lookup (feed dict, key) is not repeated."""
    x = hf.tensor(np.random.default_rng(3).standard_normal((2, 2, 3)).astype(np.float32))
    hf.manual_seed(0)
    model = hf.jit.to_static(TinyCellLoop(), backend="compiled")
    model(x).sum().backward()
    expected = [p.grad.numpy().copy() for p in model.parameters()]
    executor = model.forward._last.executor
    lookups = []
    original = executor._lookup
    monkeypatch.setattr(executor, "_lookup", lambda *a, **k: lookups.append(1) or original(*a, **k))
    for _ in range(3):
        model.zero_grad()
        model(x).sum().backward()
        for p, e in zip(model.parameters(), expected):
            np.testing.assert_array_equal(p.grad.numpy(), e)
    assert lookups == []


def test_a_fetched_0d_region_result_is_returned_without_a_copy(need_numba):
    """A 0-d result leaves the region boxed in an array made for it: the plan returns that
    array as is (no copy), and each run gets its own."""
    prog = Program()
    with program_guard(prog):
        n = data("n", [], "int64")
        (_, total) = hf.static.nn.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + i),
                                             [n * 0, n * 0])
    exe = Executor(backend="compiled")
    plan = exe.compile(prog, feed={"n": np.array(5)}, fetch_list=[total])
    assert plan.lowering.regions, plan.lowering.report()
    assert plan.source.splitlines()[-1].strip() == f"return ({total.name},)", plan.source
    first = exe.run(prog, feed={"n": np.array(5)}, fetch_list=[total], return_numpy=True)[0]
    second = exe.run(prog, feed={"n": np.array(7)}, fetch_list=[total], return_numpy=True)[0]
    assert first == 10 and second == 21 and not np.shares_memory(first, second)


def test_plans_call_the_compiled_overload_and_the_check_mode_the_dispatcher(need_numba,
                                                                           monkeypatch):
    """A plan calls each region's one compiled overload directly (its entry point: no typing
    of the arguments per call); with HYBRIDFW_CHECK_REGIONS=1 it calls numba's dispatcher,
    which rejects an argument of another dtype instead of reading its bytes."""
    prog, y = _mixed_program()
    x = np.random.default_rng(4).standard_normal((4, 8)).astype(np.float32)
    want = Executor().run(prog, feed={"x": x}, fetch_list=[y], return_numpy=True)[0]
    monkeypatch.delenv(lowering.CHECK_ENV_VAR, raising=False)
    plan = Executor(backend="compiled").compile(prog, feed={"x": x}, fetch_list=[y])
    called = [plan.function.__globals__["_" + r.name] for r in plan.lowering.regions]
    dispatchers = [plan.lowering.functions[r.name] for r in plan.lowering.regions]
    assert called == [next(iter(d.overloads.values())).entry_point for d in dispatchers]
    np.testing.assert_allclose(plan.function(x)[0], want, rtol=1e-6)
    monkeypatch.setenv(lowering.CHECK_ENV_VAR, "1")
    checked = Executor(backend="compiled").compile(prog, feed={"x": x}, fetch_list=[y])
    first = checked.lowering.regions[0].name
    assert checked.function.__globals__["_" + first] is checked.lowering.functions[first]
    np.testing.assert_allclose(checked.function(x)[0], want, rtol=1e-6)
    with pytest.raises(TypeError):  # float64 where the region was compiled for float32
        checked.function(x.astype(np.float64))


def test_concats_that_only_copy_earlier_values_stay_numpy_calls(need_numba):
    """A concat ending a region that copies values made before the region (a stack of step
    gradients) and a run of views and concats alone stay numpy calls: compiling them saves
    nothing and makes one more distinct region to compile. A concat of values its own region
    computes (an LSTM's gate gradients) stays in the region."""
    prog = Program()
    with program_guard(prog):
        x, z = data("x", [4, 8]), data("z", [4, 8])
        early = (z * 3.0).exp()
        hf.nn.functional.softmax(z, dim=1)   # splits the block: `early` is made before
        inside = hf.cat([(x * 2.0).tanh(), (x + 1.0).sigmoid()], dim=1)   # stays compiled
        stacked = hf.cat([inside * 0.5, early], dim=1)   # reads `early`: a numpy concat
        hf.nn.functional.softmax(x, dim=1)   # ends that run
        copies = hf.cat([x[1:3], z[0:2]], dim=0)         # views and a concat only
    rng = np.random.default_rng(2)
    feed = {"x": rng.standard_normal((4, 8)).astype(np.float32),
            "z": rng.standard_normal((4, 8)).astype(np.float32)}
    exe = Executor(backend="compiled")
    fetch = [inside, stacked, copies]
    got = exe.run(prog, feed=feed, fetch_list=fetch, return_numpy=True)
    x_, z_ = feed["x"], feed["z"]
    want_inside = np.concatenate([np.tanh(x_ * 2), 1 / (1 + np.exp(-(x_ + 1)))], axis=1)
    np.testing.assert_allclose(got[0], want_inside, rtol=1e-6)
    np.testing.assert_allclose(got[1], np.concatenate([want_inside * 0.5, np.exp(z_ * 3)], 1),
                               rtol=1e-6)
    np.testing.assert_array_equal(got[2], np.concatenate([x_[1:3], z_[0:2]], axis=0))
    lowered = exe.compile(prog, feed=feed, fetch_list=fetch).lowering
    reasons = {op.outputs[0]: reason for _, op, reason in lowered.left_out}
    assert "copies values made before it" in reasons[stacked.name], lowered.report()
    assert "only views and copies" in reasons[copies.name], lowered.report()
    in_regions = {n for region in lowered.regions for op in region.ops for n in op.outputs}
    assert inside.name in in_regions, lowered.report()
