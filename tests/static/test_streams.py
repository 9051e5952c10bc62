"""The second CPU stream (hybridfw.static.streams): the worker runs jobs in order and hands back
their results and errors; plan_async picks the products worth overlapping; a compiled plan that
launches them gives bitwise the one-thread results, and keeps their operands' memory alive until
it waits for them."""
import os
import threading
import time

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.static import streams

RNG = np.random.default_rng(11)


@pytest.fixture
def threads(monkeypatch):
    """Set the interop threads; BLAS taken as one thread (cores to spare for the worker)."""
    before = streams.get_num_interop_threads()
    monkeypatch.setattr(streams, "blas_threads", lambda: 1)
    monkeypatch.setattr(streams.os, "cpu_count", lambda: 2)
    yield streams.set_num_interop_threads
    streams.set_num_interop_threads(before)


def test_jobs_run_in_order_and_return_their_results():
    seen = []
    jobs = [streams.submit(lambda k=k: seen.append(k) or k * k) for k in range(20)]
    assert [job.result() for job in jobs] == [k * k for k in range(20)]
    assert seen == list(range(20))
    assert streams.submit(threading.get_ident).result() != threading.get_ident()


def test_an_error_comes_out_where_the_result_is_waited_for():
    job = streams.submit(lambda: np.ones((2, 3)) @ np.ones((4, 5)))
    with pytest.raises(ValueError, match="matmul"):
        job.result()
    assert streams.submit(lambda: 7).result() == 7  # the worker goes on


def test_drain_waits_for_every_job_submitted():
    done = []
    for _ in range(3):
        streams.submit(lambda: (time.sleep(0.02), done.append(1)))
    streams.drain()
    assert len(done) == 3


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_makes_its_own_worker():
    assert streams.submit(lambda: 1).result() == 1  # the parent has a worker
    pid = os.fork()
    if pid == 0:  # the child: the parent's worker thread does not exist here
        try:
            ok = streams.submit(lambda: 41 + 1).result() == 42
        finally:
            os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_set_num_interop_threads_refuses_what_is_not_a_positive_int(bad, threads):
    with pytest.raises(ValueError, match="set_num_interop_threads"):
        hf.set_num_interop_threads(bad)


def test_the_setting_is_the_public_one(threads):
    hf.set_num_interop_threads(1)
    assert hf.get_num_interop_threads() == 1 == streams.get_num_interop_threads()


def _two_products(n=256):
    """y = relu(a @ b) + (c @ d) * 2 with a and b computed in the program (arena values)."""
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        p, q, c, d = (hf.static.data(name, [n, n]) for name in "pqcd")
        a, b = p * 2.0, q + 1.0
        first = a @ b
        other = (c @ d) * 2.0
        fill = (c * 3.0 + d).tanh() * other   # arena values made while the product runs
        y = first.relu() + fill
    feed = {name: RNG.standard_normal((n, n)).astype(np.float32) for name in "pqcd"}
    return prog, y, feed


def _compile(prog, feed, y, **options):
    return hf.static.Executor(**options).compile(prog, feed=feed, fetch_list=[y])


def test_one_product_goes_to_the_worker_and_its_operands_stay_live(threads):
    prog, y, feed = _two_products()
    threads(2)
    plan = _compile(prog, feed, y)
    assert len(plan.asyncs) == 1, plan.source
    (i, anchor), = plan.asyncs.items()
    op = prog.global_block().ops[i]
    assert op.type == "matmul" and anchor > i + 1
    assert "_submit(lambda" in plan.source and ".result()" in plan.source
    memory = plan.memory
    for name in op.inputs:  # no operator before the anchor may reuse an operand's memory
        buf = memory.buffer_of[memory.root(name)]
        assert memory.buffer_end[buf] >= anchor
    threads(1)
    serial = _compile(prog, feed, y)
    assert serial.asyncs == {} and "_submit" not in serial.source
    arrays = [feed[name] for name in prog.feeds]
    expected = serial(arrays)[0]
    for _ in range(3):
        np.testing.assert_array_equal(plan(arrays)[0], expected)  # the same BLAS calls
    want = np.maximum((feed["p"] * 2) @ (feed["q"] + 1), 0) + \
        np.tanh(feed["c"] * 3 + feed["d"]) * (feed["c"] @ feed["d"]) * 2
    np.testing.assert_allclose(expected, want, rtol=1e-4, atol=1e-3)


def test_poisoned_arena_shows_no_read_after_free(threads):
    """Dead arena regions filled with NaN as soon as they die: an operand freed before the
    worker read it would make NaNs."""
    prog, y, feed = _two_products()
    threads(2)
    plan = _compile(prog, feed, y, debug_poison=True)
    assert plan.asyncs
    arrays = [feed[name] for name in prog.feeds]
    threads(1)
    expected = _compile(prog, feed, y)(arrays)[0]
    for _ in range(3):
        got = plan(arrays)[0]
        assert np.isfinite(got).all()
        np.testing.assert_array_equal(got, expected)


def test_small_products_and_products_read_at_once_stay_in_place(threads):
    threads(2)
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        a, b = hf.static.data("a", [16, 16]), hf.static.data("b", [512, 512])
        small = (a @ a).tanh() + 1.0             # too small to hand over
        at_once = (b @ b).relu()                 # its reader comes right after it
    feed = {"a": np.ones((16, 16), np.float32), "b": np.ones((512, 512), np.float32)}
    plan = hf.static.Executor().compile(prog, feed=feed, fetch_list=[small, at_once])
    assert plan.asyncs == {}


@pytest.mark.parametrize("loop", [False, True])
def test_plan_async_keeps_windows_free_of_control_flow(threads, loop):
    """A product whose reader comes after a control-flow operator runs in place (a loop body
    may reuse what the window holds); without the loop, the same product is handed over."""
    threads(2)

    def f(a, e, n):
        y = a @ a
        if loop:
            i = n * 0
            while i < n:
                i = i + 1
        else:
            i = n
        work = ((e * 2.0).tanh() * 3.0).sum()  # enough to cover the product
        return y + i + work

    static = hf.jit.to_static(f)
    a = hf.tensor(RNG.standard_normal((256, 256)).astype(np.float32))
    e = hf.tensor(RNG.standard_normal((1024, 1024)).astype(np.float32))
    n = hf.tensor(3)
    out = static(a, e, n)
    want = a.numpy() @ a.numpy() + 3 + (np.tanh(e.numpy() * 2) * 3).sum()
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-2)
    entry = static.get_concrete_program(a, e, n)
    plans = [p for p in entry.executor._cache.values() if p.program is entry.program]
    assert plans
    assert all((p.asyncs == {}) == loop for p in plans), [p.source for p in plans]


def test_an_unrolled_lstm_trains_the_same_with_a_second_stream(threads, monkeypatch):
    """W4's shape, small: with a second stream its input projections come in pieces and its
    weight gradients in pieces of the stacked step gradients, run on the worker; the gradients
    equal eager autograd's and the one-thread program's."""
    monkeypatch.setattr(streams, "MIN_MACS", 1 << 12)  # these products are small
    steps, batch, inputs, hidden = 12, 8, 16, 32

    def lstm(x, w_ih, w_hh, bias):
        h = (x[0] @ w_ih * 0.0)[:, :hidden]
        c = h
        for t in range(steps):
            gates = x[t] @ w_ih + h @ w_hh + bias
            i, f = gates[:, :hidden].sigmoid(), gates[:, hidden:2 * hidden].sigmoid()
            g, o = gates[:, 2 * hidden:3 * hidden].tanh(), gates[:, 3 * hidden:].sigmoid()
            c = f * c + i * g
            h = o * c.tanh()
        return h

    x = hf.tensor(RNG.standard_normal((steps, batch, inputs)).astype(np.float32))
    start = [RNG.uniform(-0.3, 0.3, s).astype(np.float32)
             for s in ((inputs, 4 * hidden), (hidden, 4 * hidden), (4 * hidden,))]
    grads, entries = {}, {}
    for label, n, fn in (("eager", 1, lstm), ("one", 1, None), ("two", 2, None)):
        threads(n)
        def fresh(x, w_ih, w_hh, bias):  # a new function: its own programs
            return lstm(x, w_ih, w_hh, bias)
        f = fn or hf.jit.to_static(fresh)
        params = [hf.tensor(v, requires_grad=True) for v in start]
        for _ in range(2):  # the second call runs the cached plans
            for p in params:
                p.grad = None
            f(x, *params).sum().backward()
        grads[label] = [p.grad.numpy() for p in params]
        if fn is None:
            entries[label] = f.get_concrete_program(x, *params)
    for label in ("one", "two"):
        for got, want in zip(grads[label], grads["eager"]):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for got, want in zip(grads["two"], grads["one"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    two, one = entries["two"], entries["one"]
    for entry, handed in ((two, True), (one, False)):
        for program in (entry.program, entry.backward_program):
            plans = [p for p in entry.executor._cache.values() if p.program is program]
            assert plans and all(bool(p.asyncs) == handed for p in plans)
    concats = [op for op in two.backward_program.global_block().ops if op.type == "concat"]
    assert len(concats) > 3  # pieces, not one stack per side


def test_no_worker_while_blas_spreads_over_the_cores(threads, monkeypatch):
    """Two BLAS calls at once need twice the cores one takes: with BLAS on every core, plans
    keep one thread (and one stack), whatever the interop setting."""
    threads(2)
    assert streams.active()
    monkeypatch.setattr(streams, "blas_threads", lambda: 2)  # both cores of a 2-core machine
    assert not streams.active()
    prog, y, feed = _two_products()
    assert _compile(prog, feed, y).asyncs == {}
    monkeypatch.setattr(streams.os, "cpu_count", lambda: 4)
    assert streams.active()
    assert _compile(prog, feed, y).asyncs


def test_blas_threads_asks_the_library_else_the_environment(monkeypatch):
    assert isinstance(streams.blas_threads(), int) and streams.blas_threads() >= 1
    monkeypatch.setattr(streams, "_blas_getter", [None])  # a BLAS that cannot be asked
    for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert streams.blas_threads() == 3
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert streams.blas_threads() == 1
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(streams.os, "cpu_count", lambda: 6)
    assert streams.blas_threads() == 6  # unknown: every core


def test_a_product_read_only_at_the_end_is_waited_for_once_done_and_frees_its_operands(threads):
    """Weight-gradient-like products (fetched, read by nothing else) are waited for where the
    main thread is predicted to have covered them, not at the plan's end: their operands'
    memory (values the plan makes) is reused from there, so the arena is smaller; the results
    are bitwise the one-thread plan's, and a poisoned run shows no read after free."""
    n = 256
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        a, g, e = hf.static.data("a", [n, n]), hf.static.data("g", [n, n]), \
            hf.static.data("e", [1024, 1024])
        products = []
        for _ in range(4):
            g = (g * 0.5).tanh() + 1.0           # made here: arena memory
            products.append(a @ g)               # fetched only: first read "at the end"
            g = g * 2.0
            e = ((e * 0.5).tanh() * 1.5).sin()   # main-thread work covering the product
        rest = g.sum() + e.sum()
    feed = {"a": RNG.standard_normal((n, n)).astype(np.float32),
            "g": RNG.standard_normal((n, n)).astype(np.float32),
            "e": RNG.standard_normal((1024, 1024)).astype(np.float32)}
    fetch = products + [rest]
    threads(2)
    plan = hf.static.Executor(debug_poison=True).compile(prog, feed=feed, fetch_list=fetch)
    assert len(plan.asyncs) == 4, plan.source
    ops = prog.global_block().ops
    early = [(i, anchor) for i, anchor in plan.asyncs.items() if anchor < len(ops)]
    assert len(early) >= 3, plan.asyncs
    memory = plan.memory
    for i, anchor in early:
        assert anchor > i + 1
        operand = memory.root(ops[i].inputs[1])
        assert memory.buffer_end[memory.buffer_of[operand]] < len(ops)
    threads(1)
    serial = hf.static.Executor().compile(prog, feed=feed, fetch_list=fetch)
    assert serial.asyncs == {}
    arrays = [feed[name] for name in prog.feeds]
    expected = serial(arrays)
    for _ in range(3):
        for got, want in zip(plan(arrays), expected):
            np.testing.assert_array_equal(got, want)
