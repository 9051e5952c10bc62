"""Compiled matmul through numpy's own BLAS (``hybridfw.static.lowering.blas``): results against
numpy for edge shapes and both float dtypes, transposed operands, the ``np.dot`` fallback when no
BLAS is found, numba's disk cache across processes (the BLAS functions are linked by symbol name,
not baked in), and a while-loop LSTM compiled vs interpreted."""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.static import Executor, Program, data, program_guard

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNG = np.random.default_rng(11)
TOLERANCE = {"float32": 1e-5, "float64": 1e-12}
# (m, k, n): a row, a column, k = 1, non-square, 1 x 1 and zero-size dims
SHAPES = [(1, 7, 9), (9, 7, 1), (6, 1, 8), (6, 10, 4), (1, 1, 1), (16, 32, 24), (3, 0, 4),
          (0, 3, 4), (3, 4, 0)]


@pytest.fixture
def need_blas(need_numba):
    from hybridfw.static.lowering import blas
    if not blas.available:
        pytest.skip("numpy's BLAS was not found: matmul lowers to np.dot")
    return blas


def _lowered(prog, feeds, fetch):
    exe = Executor(backend="compiled")
    got = exe.run(prog, feed=feeds, fetch_list=fetch, return_numpy=True)
    return got, exe.compile(prog, feed=feeds, fetch_list=fetch).lowering


def _matmul_program(pairs, transform=lambda a, b: (a, b)):
    """One program computing ``transform(a, b) -> a @ b`` (times 1, so the matmul is inside a
    region with another operator) per pair of arrays."""
    prog = Program()
    feeds, fetch = {}, []
    with program_guard(prog):
        for i, (a, b) in enumerate(pairs):
            x = data(f"a{i}", list(a.shape), str(a.dtype))
            y = data(f"b{i}", list(b.shape), str(b.dtype))
            feeds[f"a{i}"], feeds[f"b{i}"] = a, b
            fetch.append(hf.matmul(*transform(x, y)) * 1.0)
    return prog, feeds, fetch


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gemm_helper_matches_numpy(dtype, need_blas):
    import numba
    gemm = numba.njit(lambda a, b: need_blas.gemm(a, b))
    for m, k, n in SHAPES:
        a = RNG.standard_normal((m, k)).astype(dtype)
        b = RNG.standard_normal((k, n)).astype(dtype)
        got = gemm(a, b)
        assert got.dtype == a.dtype and got.shape == (m, n) and got.flags.c_contiguous
        np.testing.assert_allclose(got, a @ b, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype],
                                   err_msg=f"{(m, k, n)}")
    with pytest.raises(ValueError, match="inner dimensions"):
        gemm(np.ones((2, 3), dtype), np.ones((4, 2), dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gemm_helper_reads_transposed_operands_in_place(dtype, need_blas):
    import numba
    gemm = numba.njit(lambda a, b, ta, tb: need_blas.gemm(a, b, ta, tb))
    for m, k, n in SHAPES:
        a = RNG.standard_normal((m, k)).astype(dtype)
        b = RNG.standard_normal((k, n)).astype(dtype)
        at, bt = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
        for x, y, ta, tb in ((at, b, True, False), (a, bt, False, True), (at, bt, True, True)):
            got = gemm(x, y, ta, tb)
            assert got.shape == (m, n) and got.flags.c_contiguous
            np.testing.assert_allclose(got, a @ b, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype],
                                       err_msg=f"{(m, k, n)} transposed {ta, tb}")
    with pytest.raises(ValueError, match="inner dimensions"):
        gemm(np.ones((3, 2), dtype), np.ones((4, 2), dtype), True, False)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_matmul_matches_numpy(dtype, need_blas):
    pairs = [(RNG.standard_normal((m, k)).astype(dtype), RNG.standard_normal((k, n)).astype(dtype))
             for m, k, n in SHAPES]
    prog, feeds, fetch = _matmul_program(pairs)
    got, lowered = _lowered(prog, feeds, fetch)
    assert not [op.type for _, op, _ in lowered.left_out if op.type == "matmul"], \
        lowered.report()
    assert lowered.source.count("_hf_gemm(") == len(pairs) and "np.dot" not in lowered.source
    for g, (a, b) in zip(got, pairs):
        assert g.dtype == a.dtype and g.shape == (a.shape[0], b.shape[1])
        np.testing.assert_allclose(g, a @ b, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype],
                                   err_msg=f"{a.shape} @ {b.shape}")


def test_transposed_operands_in_a_region(need_blas):
    """Transposed operands reach BLAS as the arrays they view, with the transpose flags: no
    copy of either."""
    pairs = [(RNG.standard_normal((7, 5)).astype("float32"),
              RNG.standard_normal((9, 7)).astype("float32"))]
    prog, feeds, fetch = _matmul_program(pairs, lambda a, b: (a.permute(1, 0),
                                                              b.permute(1, 0)))
    got, lowered = _lowered(prog, feeds, fetch)
    assert "_hf_gemm(np.ascontiguousarray(p0), np.ascontiguousarray(p1), True, True)" in \
        lowered.source, lowered.source
    assert not lowered.left_out, lowered.report()
    a, b = pairs[0]
    np.testing.assert_allclose(got[0], a.T @ b.T, rtol=1e-5, atol=1e-6)


def test_without_blas_the_region_writes_np_dot(need_numba, monkeypatch):
    from hybridfw.static.lowering import blas
    monkeypatch.setattr(blas, "available", False)
    pairs = [(RNG.standard_normal((4, 6)).astype("float64"),
              RNG.standard_normal((6, 3)).astype("float64"))]
    prog, feeds, fetch = _matmul_program(pairs)
    got, lowered = _lowered(prog, feeds, fetch)
    assert "np.dot(" in lowered.source and "_hf_gemm(" not in lowered.source, lowered.source
    a, b = pairs[0]  # compiled (numba's np.dot, with SciPy) or interpreted: numpy's result
    np.testing.assert_allclose(got[0], a @ b, rtol=1e-12)


def _rnn(x, w, u, n):
    h = (x[0] @ w).tanh()
    t = n * 0 + 1
    while t < n:
        h = (x[t] @ w + h @ u).tanh()
        t = t + 1
    return h


_CHILD = textwrap.dedent("""
    import json
    import numpy as np
    import hybridfw as hf
    from test_blas_child_rnn import _rnn

    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 4, 3)).astype(np.float32)
    w = rng.uniform(-0.5, 0.5, (3, 6)).astype(np.float32)
    u = rng.uniform(-0.5, 0.5, (6, 6)).astype(np.float32)
    f = hf.jit.to_static(_rnn, backend="compiled")
    value = f(hf.tensor(x), hf.tensor(w), hf.tensor(u), hf.tensor(5)).numpy()
    h = np.tanh(x[0] @ w)
    for t in range(1, 5):
        h = np.tanh(x[t] @ w + h @ u)
    plan = [c for c in f._last.executor._cache.values() if c.lowering is not None][0]
    print(json.dumps({"value": value.tolist(), "error": float(np.abs(value - h).max()),
                      "gemm": plan.lowering.source.count("_hf_gemm("),
                      "stats": plan.lowering.stats()}))
""")


def _child(cache, script) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, str(script.parent)]),
               HYBRIDFW_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_new_process_loads_the_blas_region_from_numbas_cache(tmp_path, need_blas):
    """The BLAS functions are called by a symbol name each process registers with LLVM, so
    numba caches the region and a second process links it without compiling."""
    import inspect
    (tmp_path / "test_blas_child_rnn.py").write_text(inspect.getsource(_rnn))
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    cache = tmp_path / "cache"
    first = _child(cache, script)
    second = _child(cache, script)
    assert first["gemm"] >= 2 and first["error"] < 1e-5
    assert second["value"] == first["value"]
    assert first["stats"] and all(s["cache_misses"] == 1 and s["cache_hits"] == 0
                                  for s in first["stats"].values()), first["stats"]
    assert all(s == {"cache_hits": 1, "cache_misses": 0, "signatures": 1}
               for s in second["stats"].values()), second["stats"]


def _slice_gradient_cases():
    path = pathlib.Path(__file__).parents[1] / "static" / "passes" / "test_slice_gradients.py"
    spec = importlib.util.spec_from_file_location("_codegen_blas_lstm_cell", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_CELLS = _slice_gradient_cases()


def _lstm(x, w_ih, w_hh, bias, n):
    """The slice-gradient tests' LSTM cell (loaded by path) over a tensor-bound while loop."""
    hidden = w_hh.shape[0]
    h = (x[0] @ w_ih)[:, :hidden] * 0.0
    c = h
    t = n * 0
    while t < n:
        h, c = _CELLS._cell(x[t], h, c, w_ih, w_hh, bias)
        t = t + 1
    return h


def test_while_loop_lstm_compiled_equals_interpreted(need_blas):
    """Matmuls inside a differentiated while loop: the forward loop is one compiled region
    calling BLAS; output and gradients equal the interpreter's."""
    steps, batch, inputs, hidden = 5, 4, 8, 16
    rng = np.random.default_rng(5)
    x = hf.tensor(rng.standard_normal((steps, batch, inputs)).astype(np.float32))
    init = [rng.uniform(-0.3, 0.3, shape).astype(np.float32)
            for shape in ((inputs, 4 * hidden), (hidden, 4 * hidden), (4 * hidden,))]
    results = {}
    for backend in ("interpreted", "compiled"):
        weights = [hf.tensor(v, requires_grad=True) for v in init]
        fn = hf.jit.to_static(_lstm, backend=backend)
        out = fn(x, *weights, hf.tensor(steps))
        out.sum().backward()
        results[backend] = [out.detach().numpy()] + [w.grad.numpy() for w in weights]
        if backend == "compiled":
            sources = [plan.lowering.source for plan in fn._last.executor._cache.values()
                       if plan.lowering is not None]
            assert any("while True" in s and "_hf_gemm(" in s for s in sources), \
                fn.compile_report()
            # the backward loop's dgates @ w_hh.T reads one contiguous transpose, copied once
            # at the region's start (BLAS ran the transposed right operand ~35% slower)
            hoisted = [m.group(1) for s in sources
                       for m in re.finditer(r"(tr\d+) = np\.ascontiguousarray\(p\d+\.T\)", s)]
            assert hoisted and any(f", {h}, False, False)" in s for h in hoisted
                                   for s in sources), sources
            # the weight gradients summed over the steps add each step's product in place
            assert sum(s.count("_hf_gemm_add(") for s in sources) == 2, sources
            forward = fn.compile_report().split("backward program:")[0]
            assert "interpreted:" not in forward, forward
    for got, want in zip(results["compiled"], results["interpreted"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_gemm_add_accumulates_in_place(need_blas):
    """``gemm_add(a, b, c, ta, tb)`` adds op(a) @ op(b) into ``c`` (every transpose pairing,
    both float dtypes, an empty inner dim adding nothing)."""
    import numba

    @numba.njit
    def add(a, b, c, ta, tb):
        need_blas.gemm_add(a, b, c, ta, tb)

    for dtype in ("float32", "float64"):
        for ta in (False, True):
            for tb in (False, True):
                a = RNG.standard_normal((5, 3) if ta else (3, 5)).astype(dtype)
                b = RNG.standard_normal((4, 5) if tb else (5, 4)).astype(dtype)
                c = RNG.standard_normal((3, 4)).astype(dtype)
                want = c + (a.T if ta else a) @ (b.T if tb else b)
                add(a, b, c, ta, tb)
                np.testing.assert_allclose(c, want, rtol=TOLERANCE[dtype] * 10)
    c = np.ones((3, 4), np.float32)
    add(np.ones((3, 0), np.float32), np.ones((0, 4), np.float32), c, False, False)
    np.testing.assert_array_equal(c, np.ones((3, 4), np.float32))
