"""Compiled vs interpreted over the converter's control-flow cases, and the W5 Collatz loop.

Two in five data-dependent cases of ``tests/converter/test_conversion_cases.py`` (if/elif,
while, for over tensors, break/continue, nested loops...) run converted with ``backend='compiled'`` and
with ``backend='interpreted'`` on the same inputs; results must agree (floats within 1e-6
relative, everything else exactly). Most of them must actually contain a compiled ``while`` or
``cond`` region (the rest report why not).
"""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import hybridfw as hf

_PATH = pathlib.Path(__file__).parents[1] / "converter" / "test_conversion_cases.py"


def _cases_module():
    spec = importlib.util.spec_from_file_location("_codegen_conversion_cases", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _same(a, b, label):
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), label
        for x, y in zip(a, b):
            _same(x, y, label)
        return
    if isinstance(a, dict):
        assert a.keys() == b.keys(), label
        for k in a:
            _same(a[k], b[k], label)
        return
    if isinstance(a, hf.Tensor):
        x, y = a.numpy(), b.numpy()
        assert x.dtype == y.dtype and x.shape == y.shape, label
        if x.dtype.kind == "f":
            np.testing.assert_allclose(y, x, rtol=1e-6, atol=1e-12, err_msg=label)
        else:
            np.testing.assert_array_equal(y, x, err_msg=label)
        return
    assert a == b, label


def _compiled_kinds(f) -> set:
    entry = f._last
    kinds = set()
    for plan in entry.executor._cache.values():
        if plan.lowering is not None:
            for region in plan.lowering.regions:
                kinds.update(op.type for op in region.ops)
    return kinds


@pytest.mark.parametrize("chunk", [0, 1])
def test_conversion_cases_compiled_equal_interpreted(chunk, need_numba):
    """Two fifths of the data-dependent cases (numba compiles each program in about 0.3 s), in
    two chunks that pytest-xdist can run side by side."""
    module = _cases_module()
    dynamic = [c for c in module.CASES if c.dyn and c.fn.__name__ not in module.HANGS]
    assert len(dynamic) >= 30
    dynamic = dynamic[chunk::5]
    with_loops = 0
    for case in dynamic:
        interpreted = hf.jit.to_static(case.fn, backend="interpreted")
        compiled = hf.jit.to_static(case.fn, backend="compiled")
        for args in case.inputs:
            with np.errstate(all="ignore"):
                expected = interpreted(*module.to_hf(args))
                got = compiled(*module.to_hf(args))
            _same(expected, got, f"{case.fn.__name__}{module.signature(args)}")
        if _compiled_kinds(compiled) & {"while", "cond"}:
            with_loops += 1
    assert with_loops >= len(dynamic) // 2, f"{with_loops} of {len(dynamic)}"


def collatz(n):
    steps = n * 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps = steps + 1
    return steps


def _collatz_reference(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_collatz_is_one_compiled_loop(dtype, need_numba):
    f = hf.jit.to_static(collatz, backend="compiled")
    for start in (27, 1, 97, 871):
        got = f(hf.tensor(start, dtype=dtype))
        assert got.dtype == hf.as_dtype(dtype) and got.item() == _collatz_reference(start)
    report = f.compile_report()
    assert "1 compiled region(s)" in report and "while" in report, report
    assert "interpreted:" not in report, report


def grow(x, limit: float):
    while x.sum() < limit:
        if x.mean() < 1.0:
            x = x + 0.1
        else:
            x = x * 1.05
    return x


def test_array_loop_with_reduction_matches(need_numba):
    x = hf.tensor(np.linspace(0.0, 0.5, 16, dtype=np.float32))
    expected = hf.jit.to_static(grow, backend="interpreted")(x, 1000.0).numpy()
    f = hf.jit.to_static(grow, backend="compiled")
    np.testing.assert_allclose(f(x, 1000.0).numpy(), expected, rtol=1e-6)
    assert "while" in f.compile_report()


def _rnn(x, w, u, n):
    h = (x[0] @ w).tanh()
    t = n * 0 + 1
    while t < n:  # a data-dependent loop: its backward reads one record per iteration
        h = (x[t] @ w + h @ u).tanh()
        t = t + 1
    return h


@pytest.mark.parametrize("steps", [6, 1])  # 1: the loop body never runs, no records
def test_training_through_a_while_loop_compiles_forward_and_backward(need_numba, steps):
    """The differentiated while (it records x[t], h... per iteration) compiles whole, x[t]
    with a 0-d index tensor included, and so does its while_grad (reading the records in
    their stacked form); gradients equal the interpreter's and eager autograd's."""
    rng = np.random.default_rng(8)
    x = hf.tensor(rng.standard_normal((6, 4, 3)).astype(np.float32))
    w0 = rng.uniform(-0.5, 0.5, (3, 5)).astype(np.float32)
    u0 = rng.uniform(-0.5, 0.5, (5, 5)).astype(np.float32)
    results = {}
    for backend in ("eager", "interpreted", "compiled"):
        w, u = hf.tensor(w0, requires_grad=True), hf.tensor(u0, requires_grad=True)
        fn = _rnn if backend == "eager" else hf.jit.to_static(_rnn, backend=backend)
        out = fn(x, w, u, hf.tensor(steps))
        out.sum().backward()
        grads = [np.zeros_like(v) if p.grad is None else p.grad.numpy()  # u unused at 1 step
                 for p, v in ((w, w0), (u, u0))]
        results[backend] = (out.detach().numpy(), *grads)
        if backend == "compiled":
            assert "while" in _compiled_kinds(fn), fn.compile_report()
            forward, backward = fn.compile_report().split("backward program:")
            assert "interpreted:" not in forward, forward  # the whole forward is one region
            assert "while_grad" in backward and "interpreted:" not in backward, backward
    for got, want in zip(results["compiled"], results["interpreted"]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    for got, want in zip(results["compiled"], results["eager"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_an_index_tensor_out_of_range_raises_in_a_compiled_loop(need_numba):
    def f(x, n):
        t = n * 0
        s = x[0] * 0.0
        while t < n:
            s = s + x[t]  # t reaches 3 == len(x) when n = 4
            t = t + 1
        return s
    x = hf.tensor(np.arange(6, dtype=np.float32).reshape(3, 2))
    for backend in ("interpreted", "compiled"):
        g = hf.jit.to_static(f, backend=backend)
        np.testing.assert_array_equal(g(x, hf.tensor(3)).numpy(), [6.0, 9.0])
        with pytest.raises(IndexError):
            g(x, hf.tensor(4))
    assert "while" in _compiled_kinds(g), g.compile_report()


def _rnn_program(steps):
    """A static program: an RNN over a data-dependent ``while`` and its gradients (the
    loop and its while_grad in one program), float64."""
    S = hf.static
    hf.manual_seed(4)
    w = (hf.randn(3, 4, dtype=hf.float64) * 0.5).requires_grad_(True)
    u = (hf.randn(4, 4, dtype=hf.float64) * 0.5).requires_grad_(True)
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [6, 2, 3], "float64")
        n = S.data("n", [], "int64")
        h0 = S.data("h0", [2, 4], "float64")
        _, h = S.nn.while_loop(lambda t, h: t < n,
                               lambda t, h: (t + 1, hf.tanh(x[t] @ w + h @ u)), [0, h0 * 1.5])
        loss = (h * h).sum()
        grads = S.gradients(loss, [w, u, h0])
    return prog, [loss, *grads]


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_a_while_and_its_gradient_in_one_program_compile_together(need_numba, steps):
    """One program with the loop and its while_grad: the region hands the stacked records from
    one to the other (never leaving numba); results equal the interpreter's."""
    prog, fetch = _rnn_program(steps)
    rng = np.random.default_rng(5)
    feed = {"x": rng.standard_normal((6, 2, 3)), "n": np.array(steps),
            "h0": rng.standard_normal((2, 4))}
    want = hf.static.Executor().run(prog, feed=feed, fetch_list=fetch, return_numpy=True)
    exe = hf.static.Executor(backend="compiled")
    got = exe.run(prog, feed=feed, fetch_list=fetch, return_numpy=True)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    regions = exe.compile(prog, feed=feed, fetch_list=fetch).lowering.regions
    together = [r for r in regions if {"while", "while_grad"} <= {op.type for op in r.ops}]
    assert together, [r.describe() for r in regions]


def test_a_compiled_backward_reads_the_records_of_an_interpreted_forward(need_numba,
                                                                        monkeypatch):
    """When the forward loop stays interpreted (its records a list of tuples), the compiled
    while_grad gets them stacked by the executor; gradients equal the interpreter's."""
    from hybridfw.static.lowering import emit

    def refuse(self, op):
        raise emit.Unsupported("kept interpreted by the test")
    monkeypatch.setattr(emit.RegionEmitter, "_while", refuse)
    rng = np.random.default_rng(9)
    x = hf.tensor(rng.standard_normal((6, 4, 3)).astype(np.float32))
    w0 = rng.uniform(-0.5, 0.5, (3, 5)).astype(np.float32)
    u0 = rng.uniform(-0.5, 0.5, (5, 5)).astype(np.float32)
    grads = {}
    for backend in ("interpreted", "compiled"):
        w, u = hf.tensor(w0, requires_grad=True), hf.tensor(u0, requires_grad=True)
        fn = hf.jit.to_static(_rnn, backend=backend)
        fn(x, w, u, hf.tensor(5)).sum().backward()
        grads[backend] = (w.grad.numpy(), u.grad.numpy())
    kinds = _compiled_kinds(fn)
    assert "while_grad" in kinds and "while" not in kinds, fn.compile_report()
    for got, want in zip(grads["compiled"], grads["interpreted"]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def _rescaled(x, n):
    t = n * 0
    y = x
    while t < n:
        s = (y * y).sum()  # a 0-d value the backward of the product reads: a scalar record
        y = y * s * 0.1 + x
        t = t + 1
    return y


def test_a_loop_recording_0d_values_trains_compiled(need_numba):
    x0 = np.array([[0.5, -1.0, 0.25], [1.5, 0.75, -0.5]], np.float32)
    results = {}
    for backend in ("eager", "interpreted", "compiled"):
        x = hf.tensor(x0, requires_grad=True)
        fn = _rescaled if backend == "eager" else hf.jit.to_static(_rescaled, backend=backend)
        out = fn(x, hf.tensor(3))
        (out * out).sum().backward()
        results[backend] = (out.detach().numpy(), x.grad.numpy())
    kinds = _compiled_kinds(fn)
    assert {"while", "while_grad"} <= kinds, fn.compile_report()
    for got, want in zip(results["compiled"], results["interpreted"]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    for got, want in zip(results["compiled"], results["eager"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
