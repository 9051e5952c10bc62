"""The fused recurrent-cell primitives (``hybridfw.ops.rnn_ops``): values against numpy,
gradients against float64 finite differences, the refused double backward, shape/dtype
inference, and static programs (forward and ``hf.static.gradients``) against eager.

The layers built on them (``nn.LSTM``, ``nn.GRU``, the cells) are tested in
``tests/nn/test_rnn.py``.
"""
from __future__ import annotations

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.ops import rnn_ops as R
from hybridfw.ops.registry import TensorMeta, apply

S = hf.static


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def np_lstm_cell(gates, c):
    i, f, g, o = np.split(gates, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


def np_gru_cell(gi, gh, h):
    ir, iz, in_ = np.split(gi, 3, axis=-1)
    hr, hz, hn = np.split(gh, 3, axis=-1)
    r, z = sigmoid(ir + hr), sigmoid(iz + hz)
    n = np.tanh(in_ + r * hn)
    return (1 - z) * n + z * h


def rand(*shape, dtype=hf.float64, scale=2.0, seed=0):
    rng = np.random.default_rng(seed)
    return hf.tensor(scale * rng.standard_normal(shape), dtype=dtype, requires_grad=True)


@pytest.mark.parametrize("dtype", [hf.float32, hf.float64])
@pytest.mark.parametrize("lead", [(3,), (2, 3), ()])
def test_lstm_cell_forward_matches_numpy(dtype, lead):
    gates, c = rand(*lead, 20, dtype=dtype, seed=1), rand(*lead, 5, dtype=dtype, seed=2)
    hc = apply(R.lstm_cell, gates, c)
    assert hc.shape == (7,) + lead + (5,) and hc.dtype is dtype
    h_ref, c_ref = np_lstm_cell(gates.detach().numpy().astype(np.float64),
                                c.detach().numpy().astype(np.float64))
    tol = 1e-6 if dtype is hf.float32 else 1e-13
    np.testing.assert_allclose(hc[0].detach().numpy(), h_ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(hc[1].detach().numpy(), c_ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [hf.float32, hf.float64])
def test_gru_cell_forward_matches_numpy(dtype):
    gi, gh, h = rand(4, 15, dtype=dtype, seed=1), rand(4, 15, dtype=dtype, seed=2), \
        rand(4, 5, dtype=dtype, seed=3)
    out = apply(R.gru_cell, gi, gh, h)
    assert out.shape == (4, 5) and out.dtype is dtype
    ref = np_gru_cell(*(t.detach().numpy().astype(np.float64) for t in (gi, gh, h)))
    tol = 1e-6 if dtype is hf.float32 else 1e-13
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=tol, atol=tol)


def test_cells_are_finite_at_extreme_preactivations():
    gates = hf.tensor([[-1e4, 1e4, -1e4, 1e4], [1e4, -1e4, 1e4, -1e4]], requires_grad=True)
    c = hf.tensor([[1.0], [2.0]], requires_grad=True)
    hc = apply(R.lstm_cell, gates, c)
    hc.sum().backward()
    for t in (hc, gates.grad, c.grad):
        assert np.isfinite(t.detach().numpy()).all()
    gi = hf.tensor([[-1e4, 1e4, 1e4]], requires_grad=True)
    out = apply(R.gru_cell, gi, gi * 1.0, hf.tensor([[0.5]]))
    out.sum().backward()
    assert np.isfinite(out.detach().numpy()).all() and np.isfinite(gi.grad.numpy()).all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lstm_cell_gradients_match_finite_differences(seed):
    gates, c = rand(3, 16, seed=seed), rand(3, 4, seed=seed + 10)
    assert hf.autograd.gradcheck(lambda g, c: apply(R.lstm_cell, g, c), [gates, c], seed=seed)
    # each output alone too (h, c and the saved activations take different paths)
    for k in range(7):
        assert hf.autograd.gradcheck(lambda g, c, k=k: apply(R.lstm_cell, g, c)[k], [gates, c],
                                     seed=seed)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gru_cell_gradients_match_finite_differences(seed):
    gi, gh, h = rand(3, 12, seed=seed), rand(3, 12, seed=seed + 10), rand(3, 4, seed=seed + 20)
    assert hf.autograd.gradcheck(lambda *a: apply(R.gru_cell, *a), [gi, gh, h], seed=seed)


def test_gradients_only_for_the_inputs_asked():
    gi, gh, h = rand(2, 6, seed=1), rand(2, 6, seed=2), rand(2, 2, seed=3)
    (g_h,) = hf.autograd.grad(apply(R.gru_cell, gi, gh, h).sum(), [h])
    ref_z = sigmoid(gi.detach().numpy()[:, 2:4] + gh.detach().numpy()[:, 2:4])
    np.testing.assert_allclose(g_h.numpy(), ref_z, rtol=1e-13)


def test_double_backward_is_refused_clearly():
    gates, c = rand(2, 8), rand(2, 2, seed=1)
    (gg,) = hf.autograd.grad(apply(R.lstm_cell, gates, c).sum(), [gates], create_graph=True)
    with pytest.raises(RuntimeError, match="double backward through lstm_cell is not supported"):
        gg.sum().backward()
    gi, gh, h = rand(2, 6), rand(2, 6, seed=1), rand(2, 2, seed=2)
    (g_h,) = hf.autograd.grad(apply(R.gru_cell, gi, gh, h).sum(), [h], create_graph=True)
    with pytest.raises(RuntimeError, match="double backward through gru_cell is not supported"):
        hf.autograd.grad(g_h.sum(), [gi])


def test_inference_validates_shapes_and_dtypes():
    f32, f64 = hf.float32, hf.float64
    assert R.lstm_cell.infer(TensorMeta((-1, 8), f32), TensorMeta((-1, 2), f32)) == \
        ((7, -1, 2), f32, None)
    assert R.gru_cell.infer(TensorMeta((-1, 6), f32), TensorMeta((-1, 6), f32),
                            TensorMeta((-1, 2), f32))[0] == (-1, 2)
    with pytest.raises(ValueError, match="lstm_cell: expected gates of shape"):
        R.lstm_cell.infer(TensorMeta((3, 7), f32), TensorMeta((3, 2), f32))
    with pytest.raises(ValueError, match=r"lstm_cell: expected c_prev of shape \(3, 2\)"):
        R.lstm_cell.infer(TensorMeta((3, 8), f32), TensorMeta((3, 3), f32))
    with pytest.raises(ValueError, match=r"gru_cell: expected gh of shape \(3, 6\)"):
        R.gru_cell.infer(TensorMeta((3, 6), f32), TensorMeta((3, 8), f32),
                         TensorMeta((3, 2), f32))
    with pytest.raises(TypeError, match="lstm_cell: inputs must share one dtype"):
        R.lstm_cell.infer(TensorMeta((3, 8), f32), TensorMeta((3, 2), f64))
    with pytest.raises(TypeError, match="gru_cell: expected a floating-point tensor"):
        R.gru_cell.infer(TensorMeta((3, 6), hf.int64), TensorMeta((3, 6), hf.int64),
                         TensorMeta((3, 2), hf.int64))


# ---- static programs -------------------------------------------------------------------------
def _lstm_step(x, h, c, w_ih, w_hh, b):
    gates = x @ w_ih.T + h @ w_hh.T + b
    hc = apply(R.lstm_cell, gates, c)
    return hc[0], hc[1]


def test_static_lstm_step_and_gradients_equal_eager():
    rng = np.random.default_rng(0)
    n, i, hid = 3, 4, 5
    w_ih, w_hh, b = (hf.nn.Parameter(hf.tensor(rng.standard_normal(s), dtype=hf.float64))
                     for s in ((4 * hid, i), (4 * hid, hid), (4 * hid,)))
    feed = {"x": rng.standard_normal((n, i)), "h": rng.standard_normal((n, hid)),
            "c": rng.standard_normal((n, hid))}
    prog = S.Program()
    with S.program_guard(prog):
        x, h, c = (S.data(k, list(v.shape), "float64") for k, v in feed.items())
        h1, c1 = _lstm_step(x, h, c, w_ih, w_hh, b)
        h2, c2 = _lstm_step(x, h1, c1, w_ih, w_hh, b)  # two steps: gradient flows through c
        loss = (h2 * h2).sum() + (c2 * 0.5).sum()
        grads = S.gradients(loss, [w_ih, w_hh, b, x, h, c])
    S.verify(prog)
    exe = S.Executor(debug_poison=True)
    static = exe.run(prog, feed=feed, fetch_list=[h2, c2] + grads, return_numpy=True)

    xe, he, ce = (hf.tensor(v, dtype=hf.float64, requires_grad=True) for v in feed.values())
    h1e, c1e = _lstm_step(xe, he, ce, w_ih, w_hh, b)
    h2e, c2e = _lstm_step(xe, h1e, c1e, w_ih, w_hh, b)
    loss_e = (h2e * h2e).sum() + (c2e * 0.5).sum()
    eager = [h2e, c2e] + list(hf.autograd.grad(loss_e, [w_ih, w_hh, b, xe, he, ce]))
    for s, e in zip(static, eager):
        np.testing.assert_allclose(s, e.detach().numpy(), rtol=1e-12, atol=1e-13)


def test_static_gru_layer_gradients_equal_eager():
    hf.manual_seed(0)
    gru = hf.nn.GRU(3, 4, dtype=hf.float64)
    params = list(gru.parameters())
    xv = np.random.default_rng(1).standard_normal((5, 2, 3))
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [5, 2, 3], "float64")
        out, h = gru(x)
        loss = (out * out).sum() + h.sum()
        grads = S.gradients(loss, params + [x])
    static = S.Executor().run(prog, feed={"x": xv}, fetch_list=[out] + grads,
                              return_numpy=True)
    xe = hf.tensor(xv, requires_grad=True)
    out_e, h_e = gru(xe)
    eager = [out_e] + list(hf.autograd.grad((out_e * out_e).sum() + h_e.sum(), params + [xe]))
    for s, e in zip(static, eager):
        np.testing.assert_allclose(s, e.detach().numpy(), rtol=1e-12, atol=1e-13)
