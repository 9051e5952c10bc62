"""Slice gradients: sums of getitem_backward that tile a tensor become one concat; gradients
equal those of the program without the pass and an independent numpy computation."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.ops.indexing import getitem_backward
from hybridfw.ops.registry import apply
from hybridfw.static.passes import PASSES, optimize, slice_gradients

RNG = np.random.default_rng(0)


def _count(program, op_type):
    return sum(op.type == op_type for block in program.blocks for op in block.ops)


def _slice_gradient_program(shape, indices):
    """d/dx of sum_k sin((k + 1) * exp(x)[indices[k]]), as a program and its numpy value."""
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", list(shape), "float64")
        y = x.exp()
        loss = sum(((y[index] * (k + 1.0)).sin()).sum() for k, index in enumerate(indices))
        (dx,) = hf.static.gradients(loss, [x])
    value = RNG.standard_normal(shape)
    y = np.exp(value)
    dy = np.zeros(shape)
    for k, index in enumerate(indices):
        dy[index] += np.cos(y[index] * (k + 1.0)) * (k + 1.0)
    return prog, dx, {"x": value}, dy * y


def _gradients(prog, dx, feed, disable=()):
    out = optimize(prog, fetch=[dx], disable=disable)
    (value,) = hf.static.Executor().run(out, feed=feed, fetch_list=[dx.name], return_numpy=True)
    return out, value


def _check(shape, indices, rewritten):
    prog, dx, feed, want = _slice_gradient_program(shape, indices)
    on, got = _gradients(prog, dx, feed)
    off, got_off = _gradients(prog, dx, feed, disable=("slice_gradients",))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got, got_off)
    assert got.dtype == got_off.dtype == np.float64
    assert _count(off, "getitem_backward") == len(indices)
    if rewritten:
        assert _count(on, "getitem_backward") == 0 and _count(on, "concat") == 1
    else:
        assert str(on) == str(off)
    return on



@pytest.mark.parametrize("shape, indices, dim", [
    ((5, 3), [np.s_[:2], np.s_[2:]], 0),                                      # 2 pieces
    ((6, 2, 3), [np.s_[1:-2], np.s_[:1], np.s_[-2:]], 0),                       # 3, negative
    ((3, 8), [np.s_[:, :2], np.s_[:, 2:5], np.s_[:, 5:7], np.s_[:, 7:]], 1),    # 4 pieces
    ((2, 2, 3), [np.s_[..., 1:], np.s_[..., :1]], 2),                           # ellipsis
    ((4, 9), [np.s_[:, 6:100], np.s_[:, 0:3:1], np.s_[:, 3:6]], 1),             # clipped, step 1
])
def test_tiling_slices_become_one_concat(shape, indices, dim):
    on = _check(shape, indices, rewritten=True)
    (concat,) = [op for op in on.global_block().ops if op.type == "concat"]
    assert concat.attrs["dim"] == dim


@pytest.mark.parametrize("shape, indices, reshapes", [
    ((2, 3), [np.s_[0], np.s_[1]], 2),                       # ints along dim 0
    ((2, 3), [np.s_[1], np.s_[-2]], 2),                      # negative int, out of order
    ((4, 3), [np.s_[:, 0], np.s_[:, 2], np.s_[:, 1]], 3),    # ints along dim 1
    ((3, 5), [np.s_[0], np.s_[1:]], 1),                      # an int and a slice
])
def test_int_indices_are_reshaped_then_concatenated(shape, indices, reshapes):
    on = _check(shape, indices, rewritten=True)
    assert _count(on, "reshape") == reshapes


@pytest.mark.parametrize("shape, indices", [
    ((3, 8), [np.s_[:, :2], np.s_[:, 4:]]),                # a gap
    ((3, 8), [np.s_[:, :5], np.s_[:, 3:]]),                # overlapping
    ((3, 8), [np.s_[:, 4:], np.s_[:, :4], np.s_[:, :4]]),  # the same slice twice
    ((4, 4), [np.s_[:2, :2], np.s_[2:, :2], np.s_[:, 2:]]),  # regions vary along two dims
    ((4, 4), [np.s_[::2], np.s_[1::2]]),                   # step 2
    ((3, 4), [np.s_[:, :2], np.s_[:, 2:], np.s_[1]]),      # covering, plus an overlapping int
])
def test_other_sums_are_left_alone(shape, indices):
    _check(shape, indices, rewritten=False)


def test_a_tiling_part_of_a_larger_sum_becomes_a_concat():
    # the autodiff adds the pieces' gradients last piece first: (g2 + g1) + g0, where g2 and
    # g1 tile x; the whole sum overlaps (g0 and g1 are the same slice)
    prog, dx, feed, want = _slice_gradient_program((3, 8), [np.s_[:, :4], np.s_[:, :4],
                                                            np.s_[:, 4:]])
    on, got = _gradients(prog, dx, feed)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert _count(on, "getitem_backward") == 1 and _count(on, "concat") == 1


def _manual_sum(shared, fetch_inner=False):
    """Four slice gradients of g (3, 8) summed as ((g0 + g1) + g2) + g3; ``shared`` says which
    intermediate also has another reader ('inner' sum, 'leaf', or None)."""
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        g = hf.static.data("g", [3, 8], "float64")
        bounds = [(0, 2), (2, 4), (4, 6), (6, 8)]
        terms = [apply(getitem_backward, g[:, a:b] * float(k + 1),
                       spec=(("slice", None, None, None), ("slice", a, b, None)), shape=(3, 8))
                 for k, (a, b) in enumerate(bounds)]
        inner = terms[0] + terms[1]
        total = (inner + terms[2]) + terms[3]
        fetch = [total]
        if shared == "inner":
            fetch.append(inner * 2.0)
        elif shared == "leaf":
            fetch.append(terms[2].exp())
        if fetch_inner:
            fetch.append(inner)
    return prog, fetch


def _manual_want(g):
    return g * np.repeat([1.0, 2.0, 3.0, 4.0], 2)


def test_the_manual_sum_is_rewritten(apply_pass, same_results):
    prog, fetch = _manual_sum(None)
    out = apply_pass(slice_gradients.run, prog, fetch)
    assert _count(prog, "getitem_backward") == 4 and _count(out, "getitem_backward") == 0
    assert [op.type for op in out.global_block().ops][-1] == "concat"
    assert _count(out, "add") == 0
    feed = {"g": RNG.standard_normal((3, 8))}
    (got,) = same_results(prog, out, feed, fetch)
    np.testing.assert_allclose(got, _manual_want(feed["g"]), rtol=1e-15)


@pytest.mark.parametrize("shared, fetch_inner", [("inner", False), ("leaf", False),
                                                 (None, True)])
def test_sums_whose_parts_are_read_elsewhere_are_left_alone(apply_pass, same_results, shared,
                                                            fetch_inner):
    prog, fetch = _manual_sum(shared, fetch_inner)
    out = apply_pass(slice_gradients.run, prog, fetch)
    assert str(out) == str(prog)
    feed = {"g": RNG.standard_normal((3, 8))}
    got = same_results(prog, out, feed, fetch)
    np.testing.assert_allclose(got[0], _manual_want(feed["g"]), rtol=1e-15)


def test_terms_of_different_dtypes_are_left_alone(apply_pass, same_results):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        a = hf.static.data("a", [3, 2], "float32")
        b = hf.static.data("b", [3, 2], "float64")
        full = (("slice", None, None, None),)
        y = apply(getitem_backward, a, spec=full + (("slice", None, 2, None),), shape=(3, 4)) + \
            apply(getitem_backward, b, spec=full + (("slice", 2, None, None),), shape=(3, 4))
    out = apply_pass(slice_gradients.run, prog, [y])
    assert str(out) == str(prog)
    feed = {"a": RNG.standard_normal((3, 2)).astype(np.float32),
            "b": RNG.standard_normal((3, 2))}
    (got,) = same_results(prog, out, feed, [y])
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, np.concatenate([feed["a"], feed["b"]], axis=1))


def _cell(x_t, h, c, w_ih, w_hh, bias):
    """A hand-written LSTM cell (gates i, f, g, o): the new ``(h, c)``."""
    hidden = w_hh.shape[0]
    gates = x_t @ w_ih + h @ w_hh + bias
    i = gates[:, :hidden].sigmoid()
    f = gates[:, hidden:2 * hidden].sigmoid()
    g = gates[:, 2 * hidden:3 * hidden].tanh()
    o = gates[:, 3 * hidden:].sigmoid()
    c = f * c + i * g
    return o * c.tanh(), c


def _lstm(x, w_ih, w_hh, bias):
    hidden = w_hh.shape[0]
    h = (x[0] @ w_ih * 0.0)[:, :hidden]
    c = h
    for t in range(x.shape[0]):
        h, c = _cell(x[t], h, c, w_ih, w_hh, bias)
    return h


def _lstm_gradients(x, weights, monkeypatch, enabled):
    import hybridfw.static.passes as passes
    kept = tuple(p for p in PASSES if enabled or p.name != "slice_gradients")
    outputs = {}

    def spy(program, fetch=None):
        # counted before the run: inside optimize the pass rewrites its private copy in place
        outputs["before"] = _count(program, "getitem_backward")
        result = slice_gradients.run(program, fetch)
        outputs["after"] = {kind: _count(result, kind) for kind in ("getitem_backward", "concat")}
        return result
    kept = tuple(passes.Pass(p.name, spy, p.why) if p.name == "slice_gradients" else p
                 for p in kept)
    with monkeypatch.context() as patch:
        patch.setattr(passes, "PASSES", kept)
        params = [hf.tensor(w, requires_grad=True) for w in weights]
        f = hf.jit.to_static(_lstm, backend="interpreted")
        (f(hf.tensor(x), *params) ** 2).sum().backward()
    return [p.grad.numpy() for p in params], outputs


def test_an_lstm_has_the_same_gradients_with_and_without_the_pass(monkeypatch):
    steps, batch, inputs, hidden = 3, 2, 3, 4
    x = RNG.standard_normal((steps, batch, inputs))
    weights = [RNG.uniform(-0.5, 0.5, s) for s in ((inputs, 4 * hidden), (hidden, 4 * hidden),
                                                   (4 * hidden,))]
    on, seen = _lstm_gradients(x, weights, monkeypatch, enabled=True)
    off, unseen = _lstm_gradients(x, weights, monkeypatch, enabled=False)
    assert not unseen
    assert seen["before"] == 4 * steps + 1
    assert seen["after"]["getitem_backward"] == 1  # h's first slice has no partner
    assert seen["after"]["concat"] == steps
    for a, b in zip(on, off):
        assert a.dtype == b.dtype == np.float64
        np.testing.assert_array_equal(a, b)
    # and both are the gradient: central differences on a few weights
    eager = [hf.tensor(w, requires_grad=True) for w in weights]
    (_lstm(hf.tensor(x), *eager) ** 2).sum().backward()
    for a, e in zip(on, eager):
        np.testing.assert_allclose(a, e.grad.numpy(), rtol=1e-10, atol=1e-12)
    w_hh = weights[1]
    for index in [(0, 0), (1, 5), (3, 15)]:
        step = np.zeros_like(w_hh)
        step[index] = 1e-6
        up = (_lstm(hf.tensor(x), *map(hf.tensor, (weights[0], w_hh + step, weights[2])))
              ** 2).sum().item()
        down = (_lstm(hf.tensor(x), *map(hf.tensor, (weights[0], w_hh - step, weights[2])))
                ** 2).sum().item()
        assert on[1][index] == pytest.approx((up - down) / 2e-6, rel=1e-6, abs=1e-9)
