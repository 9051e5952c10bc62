"""batch_projections: with a second stream, an unrolled loop's input projections x[t] @ W are
computed in pieces of consecutive steps ahead of the loop (the first step keeps its own
product), each step reading a row slice of its piece; values equal the unrewritten program's and a numpy recurrence."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.static import streams
from hybridfw.static.passes import batch_projections

RNG = np.random.default_rng(5)
T, B, I, H = 12, 4, 3, 5


@pytest.fixture
def second_stream(monkeypatch):
    before = streams.get_num_interop_threads()
    monkeypatch.setattr(streams, "MIN_MACS", 1)  # these products are tiny
    monkeypatch.setattr(streams, "blas_threads", lambda: 1)  # cores to spare for the worker
    monkeypatch.setattr(streams.os, "cpu_count", lambda: 2)
    streams.set_num_interop_threads(2)
    yield
    streams.set_num_interop_threads(before)


def _rnn(steps=range(T)):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [T, B, I], "float64")
        w = hf.static.data("w", [I, H], "float64")
        u = hf.static.data("u", [H, H], "float64")
        h0 = hf.static.data("h0", [B, H], "float64")
        h = (h0 * 2.0).tanh()  # work before the loop
        for t in steps:
            h = (x[t] @ w + h @ u).tanh()
    feed = {"x": RNG.standard_normal((T, B, I)), "w": RNG.standard_normal((I, H)),
            "u": RNG.standard_normal((H, H)) * 0.5, "h0": RNG.standard_normal((B, H))}
    want = np.tanh(feed["h0"] * 2)
    for t in steps:
        want = np.tanh(feed["x"][t] @ feed["w"] + want @ feed["u"])
    return prog, h, feed, want


def _run(prog, y, feed):
    return hf.static.Executor().run(prog, feed=feed, fetch_list=[y.name], return_numpy=True)[0]


def test_projections_come_in_pieces_ahead_of_the_loop_the_first_step_its_own(second_stream,
                                                                             apply_pass):
    prog, h, feed, want = _rnn()
    out = apply_pass(batch_projections.run, prog, [h])
    ops = out.global_block().ops
    products = [op for op in ops if op.type == "matmul" and op.inputs[1] == "w"]
    rows = {op.outputs[0]: op for op in ops}
    pieces = [p for p in products if rows[p.inputs[0]].type == "reshape"]
    # the first step keeps its product; the 11 others: min(CHUNKS, 11 // MIN_TERMS) = 3
    # pieces of sizes differing by one at most (4, 4, 3: none smaller than the rest need be)
    assert len(products) == 4 and len(pieces) == 3, out
    own = next(p for p in products if p not in pieces)
    assert rows[own.inputs[0]].type == "getitem" and \
        rows[own.inputs[0]].attrs["spec"] == (("int", 0),), out
    start = {p: rows[rows[p.inputs[0]].inputs[0]].attrs["spec"][0][1] for p in pieces}
    size = {p: rows[p.inputs[0]].attrs["shape"][0] // B for p in pieces}
    assert sorted(start.values()) == [1, 5, 9] and sorted(size.values()) == [3, 4, 4], out
    recurrent = [i for i, op in enumerate(ops) if op.type == "matmul" and op.inputs[1] == "u"]
    before_loop = next(i for i, op in enumerate(ops) if op.type in ("mul", "tanh"))
    assert all(ops.index(p) < before_loop for p in pieces), out  # ahead of everything
    assert ops.index(own) < recurrent[0], out
    slices = [op for op in ops if op.type == "getitem" and op.inputs[0] in
              {p.outputs[0] for p in pieces}]
    assert len(slices) == T - 1
    steps = [op for op in ops if op.type == "getitem" and op.attrs["spec"][0][0] == "int"]
    assert steps == [rows[own.inputs[0]]], out  # each other x[t] went with its product
    np.testing.assert_allclose(_run(out, h, feed), want, rtol=1e-12)
    np.testing.assert_allclose(_run(out, h, feed), _run(prog, h, feed), rtol=1e-12)


def test_balanced_pieces():
    assert batch_projections.balanced(1, 49, 6) == [(1, 10), (10, 18), (18, 26), (26, 34),
                                                    (34, 42), (42, 50)]
    assert batch_projections.balanced(0, 6, 3) == [(0, 2), (2, 4), (4, 6)]
    assert batch_projections.balanced(3, 5, 1) == [(3, 8)]


def test_one_thread_or_small_products_change_nothing(monkeypatch, apply_pass):
    prog, h, _, _ = _rnn()
    monkeypatch.setattr(streams, "blas_threads", lambda: 1)
    monkeypatch.setattr(streams.os, "cpu_count", lambda: 2)
    before = streams.get_num_interop_threads()
    try:
        streams.set_num_interop_threads(2)  # but the products are far below the minimum
        assert str(apply_pass(batch_projections.run, prog, [h])) == str(prog)
        monkeypatch.setattr(streams, "MIN_MACS", 1)
        streams.set_num_interop_threads(1)
        assert str(apply_pass(batch_projections.run, prog, [h])) == str(prog)
    finally:
        streams.set_num_interop_threads(before)


@pytest.mark.parametrize("steps", [[t for t in range(T) if t != 5], [0, 1, 2, 3, 3, 4]],
                         ids=["a step missing", "a step twice"])
def test_steps_that_are_not_each_step_once_are_left_alone(second_stream, apply_pass, steps):
    prog, h, feed, want = _rnn(steps)
    out = apply_pass(batch_projections.run, prog, [h])
    assert not any(op.type == "reshape" for op in out.global_block().ops), out
    np.testing.assert_allclose(_run(out, h, feed), want, rtol=1e-12)
