"""batch_matmul: a sum of a_k^T @ b_k (a weight's gradient over unrolled steps) becomes one
concat-concat-matmul; values equal the unrewritten program's and an independent numpy sum."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.static.passes import batch_matmul, optimize

RNG = np.random.default_rng(3)


def _count(program, op_type):
    return sum(op.type == op_type for op in program.global_block().ops)


def _products(k, a_shape=(4, 3), b_shape=(4, 5), dtype="float64"):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        a = [hf.static.data(f"a{i}", list(a_shape), dtype) for i in range(k)]
        b = [hf.static.data(f"b{i}", list(b_shape), dtype) for i in range(k)]
        y = a[0].T @ b[0]
        for i in range(1, k):
            y = y + a[i].T @ b[i]
    feed = {f"a{i}": RNG.standard_normal(a_shape).astype(dtype) for i in range(k)}
    feed.update({f"b{i}": RNG.standard_normal(b_shape).astype(dtype) for i in range(k)})
    expected = sum(feed[f"a{i}"].T @ feed[f"b{i}"] for i in range(k))
    return prog, y, feed, expected


def _run(prog, fetch, feed):
    return hf.static.Executor().run(prog, feed=feed, fetch_list=fetch, return_numpy=True)


@pytest.mark.parametrize("k", [3, 7])
def test_sum_of_transposed_products_becomes_one_matmul(k):
    prog, y, feed, expected = _products(k)
    out = batch_matmul.run(prog, fetch=[y])
    assert _count(out, "matmul") == 1 and _count(out, "concat") == 2
    assert _count(out, "add") == 0 and _count(prog, "matmul") == k  # the input is untouched
    (got,) = _run(out, [y.name], feed)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    (unrewritten,) = _run(prog, [y.name], feed)
    np.testing.assert_allclose(got, unrewritten, rtol=1e-12)


def test_two_terms_and_fetched_inner_sums_are_left_alone():
    prog, y, feed, _ = _products(2)
    assert _count(batch_matmul.run(prog, fetch=[y]), "matmul") == 2  # below MIN_TERMS
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        a = [hf.static.data(f"a{i}", [4, 3], "float64") for i in range(4)]
        b = [hf.static.data(f"b{i}", [4, 5], "float64") for i in range(4)]
        inner = a[0].T @ b[0] + a[1].T @ b[1] + a[2].T @ b[2]
        y = inner + a[3].T @ b[3]
    out = batch_matmul.run(prog, fetch=[y, inner])  # inner is fetched: not erasable
    assert _count(out, "add") >= 1 and _count(out, "matmul") >= 2
    (got_y, got_inner) = _run(out, [y.name, inner.name],
                              {**{f"a{i}": np.ones((4, 3)) for i in range(4)},
                               **{f"b{i}": np.ones((4, 5)) for i in range(4)}})
    np.testing.assert_allclose(got_y, np.full((3, 5), 16.0))
    np.testing.assert_allclose(got_inner, np.full((3, 5), 12.0))


def test_mismatched_shapes_or_a_plain_product_are_left_alone():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        a = [hf.static.data(f"a{i}", [4 + (i == 2), 3], "float64") for i in range(3)]
        b = [hf.static.data(f"b{i}", [4 + (i == 2), 5], "float64") for i in range(3)]
        y = a[0].T @ b[0] + a[1].T @ b[1] + a[2].T @ b[2]   # a_2 has 5 rows
        c = hf.static.data("c", [3, 4], "float64")
        z = c @ b[0] + a[0].T @ b[0] + a[1].T @ b[1]        # one term is not a^T b
    out = batch_matmul.run(prog, fetch=[y, z])
    assert _count(out, "concat") == 0 and _count(out, "matmul") == 6


def test_unrolled_rnn_weight_gradient_through_to_static():
    """A tanh RNN over 6 steps: the recurrent weight's gradient is batched, equal to the
    program optimized without the pass and to eager autograd."""
    x = hf.tensor(RNG.standard_normal((6, 4, 3)).astype(np.float32))
    w0 = RNG.uniform(-0.5, 0.5, (3, 5)).astype(np.float32)
    u0 = RNG.uniform(-0.5, 0.5, (5, 5)).astype(np.float32)

    def rnn(x, w, u):
        h = (x[0] @ w).tanh()
        for t in range(1, 6):
            h = (x[t] @ w + h @ u).tanh()
        return h

    static = hf.jit.to_static(rnn)
    grads = []
    for fn in (rnn, static):
        w = hf.tensor(w0, requires_grad=True)
        u = hf.tensor(u0, requires_grad=True)
        fn(x, w, u).sum().backward()
        grads.append((w.grad.numpy(), u.grad.numpy()))
    for eager, compiled in zip(*grads):
        np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-6)
    # the backward: one product per step for dh (5), one batched product per weight (2), not
    # one per step and weight (5 + 6 + 5); w's sum has one term more than u's (step 0), which
    # reads u's stack of the step gradients and adds that term's own product (1)
    backward = static.get_concrete_program(x, w, u).backward_program
    assert _count(backward, "matmul") == 8, backward
    assert _count(backward, "concat") == 3


def test_pass_in_the_pipeline_and_disable():
    prog, y, feed, expected = _products(4, dtype="float32")
    on = optimize(prog, fetch=[y])
    off = optimize(prog, fetch=[y], disable=("batch_matmul",))
    assert _count(on, "matmul") == 1 and _count(off, "matmul") == 4
    (a,) = _run(on, [y.name], feed)
    (b,) = _run(off, [y.name], feed)
    np.testing.assert_allclose(a, b, rtol=1e-5)
    np.testing.assert_allclose(a, expected, rtol=1e-5)


def _shared(k, form, a_shape=(4, 3), b_shape=(4, 5)):
    """dw = sum_k a_k^T @ g_k and db = sum_k of the column sums of g_k: ``plain`` sum(g, 0),
    ``keepdim`` sum(g, 0, keepdim) (a (1, n) result) or ``reshaped`` reshape(sum(g, 0,
    keepdim), (n,)), as autodiff writes it."""
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        a = [hf.static.data(f"a{i}", list(a_shape), "float64") for i in range(k)]
        g = [hf.static.data(f"g{i}", list(b_shape), "float64") for i in range(k)]

        def term(v):
            if form == "plain":
                return v.sum(dim=0)
            if form == "keepdim":
                return v.sum(dim=0, keepdim=True)
            return v.sum(dim=(0,), keepdim=True).reshape(b_shape[1])
        db = term(g[0])
        for i in range(1, k):
            db = db + term(g[i])
        dw = a[0].T @ g[0]
        for i in range(1, k):
            dw = dw + a[i].T @ g[i]
    feed = {f"a{i}": RNG.standard_normal(a_shape) for i in range(k)}
    feed.update({f"g{i}": RNG.standard_normal(b_shape) for i in range(k)})
    expected = (sum(feed[f"a{i}"].T @ feed[f"g{i}"] for i in range(k)),
                sum(feed[f"g{i}"].sum(axis=0, keepdims=form == "keepdim") for i in range(k)))
    return prog, (dw, db), feed, expected


@pytest.mark.parametrize("form", ["plain", "keepdim", "reshaped"])
def test_column_sums_of_a_stacked_product_share_its_stack(form):
    """A weight's and a bias's gradient over the same per-step gradients g_k (a linear layer
    at every step): the bias's is one column sum of the stack the product builds (built once)."""
    prog, (dw, db), feed, (want_dw, want_db) = _shared(5, form)
    out = batch_matmul.run(prog, fetch=[dw, db])
    assert _count(out, "concat") == 2 and _count(out, "matmul") == 1 and _count(out, "sum") == 1
    assert _count(out, "add") == 0 and _count(out, "reshape") == 0
    assert _count(prog, "sum") == 5  # the input is untouched
    got_dw, got_db = _run(out, [dw.name, db.name], feed)
    np.testing.assert_allclose(got_dw, want_dw, rtol=1e-12)
    assert got_db.shape == want_db.shape
    np.testing.assert_allclose(got_db, want_db, rtol=1e-12)


def test_column_sums_alone_are_left_alone():
    """Without a product stacking the same values, a stack would cost more than it saves."""
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        g = [hf.static.data(f"g{i}", [4, 5], "float64") for i in range(4)]
        db = g[0].sum(dim=0) + g[1].sum(dim=0) + g[2].sum(dim=0) + g[3].sum(dim=0)
    out = batch_matmul.run(prog, fetch=[db])
    assert _count(out, "concat") == 0 and _count(out, "sum") == 4


def test_sums_over_other_dims_or_with_other_terms_are_left_alone():
    """With the g_k stacked for a product, sums that are not all column sums of them stay."""
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        a = [hf.static.data(f"a{i}", [4, 3], "float64") for i in range(3)]
        g = [hf.static.data(f"g{i}", [4, 4], "float64") for i in range(3)]
        dw = a[0].T @ g[0] + a[1].T @ g[1] + a[2].T @ g[2]
        rows = g[0].sum(dim=1) + g[1].sum(dim=1) + g[2].sum(dim=1)  # not column sums
        mixed = g[0].sum(dim=0) + g[1].sum(dim=0) + (g[2].T @ g[2])[0]  # one term is no sum
    out = batch_matmul.run(prog, fetch=[dw, rows, mixed])
    assert _count(out, "concat") == 2 and _count(out, "sum") == 5
    feed = {**{f"a{i}": RNG.standard_normal((4, 3)) for i in range(3)},
            **{f"g{i}": RNG.standard_normal((4, 4)) for i in range(3)}}
    names = [dw.name, rows.name, mixed.name]
    for got, want in zip(_run(out, names, feed), _run(prog, names, feed)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_unrolled_rnn_with_bias_through_to_static():
    """A tanh RNN with a bias over 6 steps: the bias gradient is one column sum of the stacked
    step gradients (shared with the recurrent weight's product), equal to eager autograd."""
    x = hf.tensor(RNG.standard_normal((6, 4, 3)).astype(np.float32))
    start = [RNG.uniform(-0.5, 0.5, s).astype(np.float32) for s in ((3, 5), (5, 5), (5,))]

    def rnn(x, w, u, b):
        h = (x[0] @ w + b).tanh() * 0.0
        for t in range(6):
            h = (x[t] @ w + h @ u + b).tanh()
        return h

    static = hf.jit.to_static(rnn)
    grads = []
    for fn in (rnn, static):
        params = [hf.tensor(v, requires_grad=True) for v in start]
        fn(x, *params).sum().backward()
        grads.append([p.grad.numpy() for p in params])
    for eager, compiled in zip(*grads):
        np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-6)
    backward = static.get_concrete_program(x, *params).backward_program
    sums = [op for op in backward.global_block().ops if op.type == "sum"]
    assert len(sums) == 1, backward  # not one per step


def _lstm_inputs(k):
    """Inside a program guard: k + 1 inputs x_i, k states h_i and k + 1 gate gradients g_i."""
    x = [hf.static.data(f"x{i}", [4, 3], "float64") for i in range(k + 1)]
    h = [hf.static.data(f"h{i}", [4, 6], "float64") for i in range(k)]
    g = [hf.static.data(f"g{i}", [4, 5], "float64") for i in range(k + 1)]
    return x, h, g


@pytest.mark.parametrize("where", ["after", "before"])
def test_a_sum_with_extra_terms_reads_the_stack_another_product_builds(where):
    """dw_hh = sum_k h_k^T g_k and dw_ih = the same g_k against x_k, plus one more term (an
    LSTM's input weight also computes the initial state): dw_ih reads dw_hh's stack of the g_k
    and adds its extra product, rather than copy every g_k into a second stack."""
    k = 5
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x, h, g = _lstm_inputs(k)
        dw_hh = h[0].T @ g[0]
        for i in range(1, k):
            dw_hh = dw_hh + h[i].T @ g[i]
        terms = [x[i].T @ g[i] for i in range(k + 1)]
        if where == "before":  # the extra term first
            terms = terms[-1:] + terms[:-1]
        dw_ih = terms[0]
        for term in terms[1:]:
            dw_ih = dw_ih + term
    feed = {**{f"x{i}": RNG.standard_normal((4, 3)) for i in range(k + 1)},
            **{f"h{i}": RNG.standard_normal((4, 6)) for i in range(k)},
            **{f"g{i}": RNG.standard_normal((4, 5)) for i in range(k + 1)}}
    out = batch_matmul.run(prog, fetch=[dw_hh, dw_ih])
    concats = [op for op in out.global_block().ops if op.type == "concat"]
    assert len(concats) == 3, out  # the g_k, the h_k, the x_k: the g_k once
    assert sum(len(op.inputs) == k for op in concats) == 3
    assert _count(out, "matmul") == 3 and _count(out, "add") == 1
    got_hh, got_ih = _run(out, [dw_hh.name, dw_ih.name], feed)
    np.testing.assert_allclose(got_hh, sum(feed[f"h{i}"].T @ feed[f"g{i}"] for i in range(k)),
                               rtol=1e-12)
    np.testing.assert_allclose(got_ih, sum(feed[f"x{i}"].T @ feed[f"g{i}"]
                                           for i in range(k + 1)), rtol=1e-12)


def test_too_many_extra_terms_get_a_stack_of_their_own():
    """More than MAX_EXTRA terms beyond the shared stack: a second stack is cheaper than that
    many separate products."""
    k, more = 4, batch_matmul.MAX_EXTRA + 1
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = [hf.static.data(f"x{i}", [4, 3], "float64") for i in range(k + more)]
        h = [hf.static.data(f"h{i}", [4, 6], "float64") for i in range(k)]
        g = [hf.static.data(f"g{i}", [4, 5], "float64") for i in range(k + more)]
        dw_hh = h[0].T @ g[0]
        for i in range(1, k):
            dw_hh = dw_hh + h[i].T @ g[i]
        dw_ih = x[0].T @ g[0]
        for i in range(1, k + more):
            dw_ih = dw_ih + x[i].T @ g[i]
    out = batch_matmul.run(prog, fetch=[dw_hh, dw_ih])
    assert _count(out, "concat") == 4 and _count(out, "matmul") == 2 and _count(out, "add") == 0


@pytest.fixture
def second_stream(monkeypatch):
    """A second stream, with the worker's minimum product size lowered to these small tests."""
    from hybridfw.static import streams
    before = streams.get_num_interop_threads()
    monkeypatch.setattr(streams, "MIN_MACS", 1)
    monkeypatch.setattr(streams, "blas_threads", lambda: 1)  # cores to spare for the worker
    monkeypatch.setattr(streams.os, "cpu_count", lambda: 2)
    streams.set_num_interop_threads(2)
    yield streams
    streams.set_num_interop_threads(before)


def _stepped(k, a_shape=(4, 3), b_shape=(4, 5)):
    """dw = sum_i a_i^T g_i and db = sum_i colsum(g_i), with g_i = tanh(z_i * 2) computed in
    order (as a backward pass makes its step gradients one after the other)."""
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        a = [hf.static.data(f"a{i}", list(a_shape), "float64") for i in range(k)]
        z = [hf.static.data(f"z{i}", list(b_shape), "float64") for i in range(k)]
        g = [(z[i] * 2.0).tanh() for i in range(k)]
        dw = a[0].T @ g[0]
        db = g[0].sum(dim=0)
        for i in range(1, k):
            dw = dw + a[i].T @ g[i]
            db = db + g[i].sum(dim=0)
    feed = {**{f"a{i}": RNG.standard_normal(a_shape) for i in range(k)},
            **{f"z{i}": RNG.standard_normal(b_shape) for i in range(k)}}
    gs = [np.tanh(feed[f"z{i}"] * 2) for i in range(k)]
    want = (sum(feed[f"a{i}"].T @ gs[i] for i in range(k)), sum(g.sum(axis=0) for g in gs))
    return prog, (dw, db), feed, want, g


def test_with_a_second_stream_stacks_come_in_pieces_each_right_after_its_values(second_stream):
    k = 12  # pieces: min(CHUNKS, 12 // MIN_TERMS) = 4, of 3 steps each
    prog, (dw, db), feed, (want_dw, want_db), g = _stepped(k)
    out = batch_matmul.run(prog, fetch=[dw, db])
    ops = out.global_block().ops
    position = {name: i for i, op in enumerate(ops) for name in op.outputs}
    g_pieces = [op for op in ops if op.type == "concat" and op.inputs[0] in
                {v.name for v in g}]
    assert [len(op.inputs) for op in g_pieces] == [3, 3, 3, 3], out
    assert _count(out, "matmul") == 4 and _count(out, "sum") == 4, out  # one of each per piece
    for piece in g_pieces:  # right after its last value, before the next step's
        last = max(position[name] for name in piece.inputs)
        here = ops.index(piece)
        assert all(op.type in ("concat", "permute", "matmul", "sum")
                   for op in ops[last + 1:here]), out
        later = [position[v.name] for v in g if position[v.name] > last]
        assert not later or here < min(later), out
    got_dw, got_db = _run(out, [dw.name, db.name], feed)
    np.testing.assert_allclose(got_dw, want_dw, rtol=1e-12)
    np.testing.assert_allclose(got_db, want_db, rtol=1e-12)


def test_one_thread_keeps_one_stack(second_stream):
    second_stream.set_num_interop_threads(1)
    prog, (dw, db), feed, (want_dw, _), _ = _stepped(12)
    out = batch_matmul.run(prog, fetch=[dw, db])
    assert _count(out, "matmul") == 1 and _count(out, "concat") == 2 and _count(out, "sum") == 1
    np.testing.assert_allclose(_run(out, [dw.name], feed)[0], want_dw, rtol=1e-12)


def test_small_products_keep_one_stack_even_with_a_second_stream(monkeypatch):
    from hybridfw.static import streams
    monkeypatch.setattr(streams, "blas_threads", lambda: 1)
    monkeypatch.setattr(streams.os, "cpu_count", lambda: 2)
    before = streams.get_num_interop_threads()
    streams.set_num_interop_threads(2)
    try:
        prog, (dw, db), _, _, _ = _stepped(12)  # far below the worker's minimum size
        assert _count(batch_matmul.run(prog, fetch=[dw, db]), "matmul") == 1
    finally:
        streams.set_num_interop_threads(before)


def test_pieces_are_shared_by_the_products_stacking_the_same_values(second_stream):
    """The LSTM shape with a second stream: dw_ih (one extra term) reads dw_hh's pieces of the
    g_k, cut at the same places; every g_k is copied once."""
    k = 9
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x, h, g = _lstm_inputs(k)
        dw_hh = h[0].T @ g[0]
        dw_ih = x[0].T @ g[0]
        for i in range(1, k):
            dw_hh = dw_hh + h[i].T @ g[i]
            dw_ih = dw_ih + x[i].T @ g[i]
        dw_ih = dw_ih + x[k].T @ g[k]
    feed = {**{f"x{i}": RNG.standard_normal((4, 3)) for i in range(k + 1)},
            **{f"h{i}": RNG.standard_normal((4, 6)) for i in range(k)},
            **{f"g{i}": RNG.standard_normal((4, 5)) for i in range(k + 1)}}
    out = batch_matmul.run(prog, fetch=[dw_hh, dw_ih])
    g_names = {f"g{i}" for i in range(k + 1)}
    copied = [n for op in out.global_block().ops if op.type == "concat"
              for n in op.inputs if n in g_names]
    assert sorted(copied) == sorted(f"g{i}" for i in range(k)), out
    got = _run(out, [dw_hh.name, dw_ih.name], feed)
    want_hh = sum(feed[f"h{i}"].T @ feed[f"g{i}"] for i in range(k))
    want_ih = sum(feed[f"x{i}"].T @ feed[f"g{i}"] for i in range(k + 1))
    np.testing.assert_allclose(got[0], want_hh, rtol=1e-12)
    np.testing.assert_allclose(got[1], want_ih, rtol=1e-12)


def test_place_early_moves_up_to_the_last_definition_but_not_above_an_effect():
    """place_early (the pieces' placement): an operator goes right after the last operator
    defining one of its inputs, and never above an operator with side effects."""
    from hybridfw.static.passes.analysis import place_early
    count = hf.tensor(0)
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3], "float32")
        a = x * 2.0
        b = (a + 1.0).exp()
        _ = count.add_(1)          # assign_param: a side effect
        c = (b * 3.0).tanh()
        d = a - 1.0                # reads a only
        e = b + 2.0                # reads b only
    ops = prog.global_block().ops
    kinds = [op.type for op in ops]
    assert "assign_param" in kinds
    moved = [op for op in ops if op.outputs and op.outputs[0] in (d.name, e.name)]
    out = place_early(prog.global_block(), list(ops), {id(op) for op in moved})
    position = {id(op): i for i, op in enumerate(out)}
    effect = next(i for i, op in enumerate(out) if op.type == "assign_param")
    for op in moved:  # both would fit right after a / b, which come before the effect
        assert position[id(op)] == effect + 1 + moved.index(op), [o.type for o in out]
    without = [op for op in ops if op.type != "assign_param"]
    out = place_early(prog.global_block(), without, {id(op) for op in moved})
    names = [o.outputs[0] for o in out]
    assert names.index(d.name) == names.index(a.name) + 1
    assert names.index(e.name) == names.index(b.name) + 1
    assert sorted(map(id, out)) == sorted(map(id, without))


def test_a_bias_sum_met_before_the_product_shares_its_pieces(second_stream):
    """A bias's column sum whose root comes before the weight's (as an LSTM's backward writes
    them) is cut into the product's pieces and reads them: each g_k is copied once (it was
    copied twice: once into one whole stack for the sum, once into the product's pieces)."""
    k = 12
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        a = [hf.static.data(f"a{i}", [4, 3], "float64") for i in range(k)]
        z = [hf.static.data(f"z{i}", [4, 5], "float64") for i in range(k)]
        g = [(z[i] * 2.0).tanh() for i in range(k)]
        db = g[0].sum(dim=0)
        dw = a[0].T @ g[0]
        for i in range(1, k):
            db = db + g[i].sum(dim=0)
        for i in range(1, k):
            dw = dw + a[i].T @ g[i]
    feed = {**{f"a{i}": RNG.standard_normal((4, 3)) for i in range(k)},
            **{f"z{i}": RNG.standard_normal((4, 5)) for i in range(k)}}
    out = batch_matmul.run(prog, fetch=[dw, db])
    g_names = {v.name for v in g}
    copied = [n for op in out.global_block().ops if op.type == "concat"
              for n in op.inputs if n in g_names]
    assert sorted(copied) == sorted(g_names), out
    assert _count(out, "sum") == _count(out, "matmul") == 4, out
    gs = [np.tanh(feed[f"z{i}"] * 2) for i in range(k)]
    got_dw, got_db = _run(out, [dw.name, db.name], feed)
    np.testing.assert_allclose(got_dw, sum(feed[f"a{i}"].T @ gs[i] for i in range(k)),
                               rtol=1e-12)
    np.testing.assert_allclose(got_db, sum(x.sum(axis=0) for x in gs), rtol=1e-12)
