"""MultiheadAttention and TransformerEncoderLayer against numpy references written here;
gradients by float64 finite differences; PyTorch as an extra oracle when installed."""
from __future__ import annotations

import math

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn


def npy(t):
    return t.detach().numpy()


def check_grads(fn, tensors, seed=0, eps=1e-6, rtol=1e-6):
    """Autograd vs a central difference along one random direction (float64 leaves)."""
    assert hf.autograd.gradcheck(lambda *_: fn(), tensors, seed=seed, eps=eps, rtol=rtol)


# ---- numpy reference ----------------------------------------------------------------------------
def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_mha(mha, q, k, v, attn_mask=None, key_padding_mask=None):
    """Batch-major (N, L, E) multi-head attention; returns (output, per-head weights)."""
    p = {name: npy(t) for name, t in mha.named_parameters()}
    e, heads = mha.embed_dim, mha.num_heads
    hd = e // heads
    w, b = p["in_proj_weight"], p["in_proj_bias"]
    n, tgt, src = q.shape[0], q.shape[1], k.shape[1]
    qp = (q @ w[:e].T + b[:e]).reshape(n, tgt, heads, hd).transpose(0, 2, 1, 3)
    kp = (k @ w[e:2 * e].T + b[e:2 * e]).reshape(n, src, heads, hd).transpose(0, 2, 1, 3)
    vp = (v @ w[2 * e:].T + b[2 * e:]).reshape(n, src, heads, hd).transpose(0, 2, 1, 3)
    scores = qp @ kp.transpose(0, 1, 3, 2) / math.sqrt(hd)
    for mask in (attn_mask, key_padding_mask):
        if mask is None:
            continue
        if mask is key_padding_mask:
            mask = mask[:, None, None, :]
        elif mask.ndim == 3:
            mask = mask.reshape(n, heads, tgt, src)
        scores = np.where(mask, -np.inf, scores) if mask.dtype == bool else scores + mask
    weights = np_softmax(scores)
    out = (weights @ vp).transpose(0, 2, 1, 3).reshape(n, tgt, e)
    return out @ p["out_proj.weight"].T + p["out_proj.bias"], weights


def np_layer_norm(x, w, b, eps=1e-5):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def randomize(module, seed):
    """Give every parameter (zero biases included) random values, so the test sees them."""
    rng = np.random.default_rng(seed)
    with hf.no_grad():
        for p in module.parameters():
            p.copy_(hf.tensor(rng.standard_normal(p.shape) * 0.3))
    return module


# ---- MultiheadAttention -------------------------------------------------------------------------
def test_parameters_follow_pytorch():
    mha = nn.MultiheadAttention(8, 2)
    assert [(n, p.shape) for n, p in mha.named_parameters()] == [
        ("in_proj_weight", (24, 8)), ("in_proj_bias", (24,)), ("out_proj.weight", (8, 8)),
        ("out_proj.bias", (8,))]
    kv = nn.MultiheadAttention(8, 2, kdim=3, vdim=5, bias=False)
    assert [(n, p.shape) for n, p in kv.named_parameters()] == [
        ("q_proj_weight", (8, 8)), ("k_proj_weight", (8, 3)), ("v_proj_weight", (8, 5)),
        ("out_proj.weight", (8, 8))]
    with pytest.raises(ValueError, match="divisible by num_heads"):
        nn.MultiheadAttention(10, 3)


@pytest.mark.parametrize("batch_first", [False, True])
def test_attention_against_numpy_with_masks(batch_first):
    mha = randomize(nn.MultiheadAttention(8, 2, batch_first=batch_first).double(), 0)
    rng = np.random.default_rng(1)
    n, tgt, src = 3, 4, 5
    q, k, v = (rng.standard_normal((n, length, 8)) for length in (tgt, src, src))
    bool_mask = rng.random((tgt, src)) < 0.3
    bool_mask[:, 0] = False
    padding = rng.random((n, src)) < 0.3
    padding[:, 1] = False
    float_mask = rng.standard_normal((n * 2, tgt, src))

    def run(**masks):
        args = [hf.tensor(a if batch_first else a.transpose(1, 0, 2)) for a in (q, k, v)]
        return mha(*args, **{key: hf.tensor(m) for key, m in masks.items()})

    for masks in ({}, {"attn_mask": bool_mask}, {"key_padding_mask": padding},
                  {"attn_mask": float_mask, "key_padding_mask": padding},
                  {"attn_mask": np.where(bool_mask, -np.inf, 0.0)}):
        ref_out, ref_w = np_mha(mha, q, k, v, **masks)
        out, weights = run(**masks)
        got = npy(out) if batch_first else npy(out).transpose(1, 0, 2)
        np.testing.assert_allclose(got, ref_out, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(npy(weights), ref_w.mean(1), rtol=1e-10, atol=1e-12)
    out, weights = run(attn_mask=bool_mask, average_attn_weights=False)
    np.testing.assert_allclose(npy(weights), np_mha(mha, q, k, v, bool_mask)[1], rtol=1e-10,
                               atol=1e-12)
    assert run(need_weights=False)[1] is None


def test_self_attention_unbatched_and_causal():
    mha = randomize(nn.MultiheadAttention(6, 3).double(), 2)
    x = np.random.default_rng(3).standard_normal((5, 6))
    xt = hf.tensor(x)
    out, weights = mha(xt, xt, xt)
    ref_out, ref_w = np_mha(mha, x[None], x[None], x[None])
    np.testing.assert_allclose(npy(out), ref_out[0], rtol=1e-10, atol=1e-12)
    assert weights.shape == (5, 5)
    causal = np.triu(np.ones((5, 5), bool), 1)
    with pytest.raises(RuntimeError, match=r"^Need attn_mask if specifying the is_causal hint"
                       r" \(MultiheadAttention.*hf.ones\(5, 5, dtype=hf.bool\).triu\(1\)"):
        mha(xt, xt, xt, is_causal=True)
    out, weights = mha(xt, xt, xt, attn_mask=hf.tensor(causal), is_causal=True)
    np.testing.assert_allclose(npy(out), np_mha(mha, x[None], x[None], x[None], causal)[0][0],
                               rtol=1e-10, atol=1e-12)
    assert np.all(npy(weights)[causal] == 0)


def test_attention_gradients_with_masks():
    mha = randomize(nn.MultiheadAttention(4, 2).double(), 4)
    rng = np.random.default_rng(5)
    q = hf.tensor(rng.standard_normal((3, 2, 4)), requires_grad=True)
    kv = hf.tensor(rng.standard_normal((4, 2, 4)), requires_grad=True)
    mask = hf.tensor(np.array([[False, True, False, False]] * 3))
    padding = hf.tensor(np.array([[False, False, False, True], [False, False, False, False]]))
    additive = hf.tensor(rng.standard_normal((4, 3, 4)))
    check_grads(lambda: mha(q, kv, kv, key_padding_mask=padding, attn_mask=mask)[0],
                [q, kv, *mha.parameters()])
    # the weights depend on q and k only: not on the value or output projections
    check_grads(lambda: mha(q, kv, kv, attn_mask=additive)[1],
                [q, kv, mha.in_proj_weight, mha.in_proj_bias])


def test_attention_dropout_and_errors():
    mha = nn.MultiheadAttention(8, 2, dropout=0.5)
    x = hf.randn(4, 2, 8)
    mha.eval()
    np.testing.assert_array_equal(npy(mha(x, x, x)[0]), npy(mha(x, x, x)[0]))
    mha.train()
    hf.manual_seed(0)
    assert not np.allclose(npy(mha(x, x, x)[1]), npy(mha.eval()(x, x, x)[1]))
    with pytest.raises(ValueError, match=r"MultiheadAttention.*attn_mask.*\(3, 3\).*\(4, 4\)"):
        mha(x, x, x, attn_mask=hf.zeros(3, 3, dtype=hf.bool))
    with pytest.raises(ValueError, match=r"key_padding_mask.*\(2, 4\).*\(4, 2\)"):
        mha(x, x, x, key_padding_mask=hf.zeros(4, 2, dtype=hf.bool))
    with pytest.raises(TypeError, match="attn_mask"):
        mha(x, x, x, attn_mask=hf.zeros(4, 4, dtype=hf.int64))
    with pytest.raises(ValueError, match=r"query with last dim 8.*\(4, 2, 6\)"):
        mha(hf.randn(4, 2, 6), x, x)
    with pytest.raises(ValueError, match="batch sizes"):
        mha(x, hf.randn(4, 3, 8), hf.randn(4, 3, 8))
    with pytest.raises(TypeError, match=r"MultiheadAttention: key has dtype .*float64.*float32"):
        mha(x, x.double(), x)


# ---- TransformerEncoderLayer --------------------------------------------------------------------
def np_encoder_layer(layer, x, attn_mask=None, key_padding_mask=None, gelu=False):
    """Batch-major reference of PyTorch's TransformerEncoderLayer in eval mode."""
    p = {name: npy(t) for name, t in layer.named_parameters()}

    def sa(h):
        return np_mha(layer.self_attn, h, h, h, attn_mask, key_padding_mask)[0]

    def ff(h):
        pre = h @ p["linear1.weight"].T + p["linear1.bias"]
        act = np.maximum(pre, 0) if not gelu else \
            0.5 * pre * (1 + np.vectorize(math.erf)(pre / math.sqrt(2)))
        return act @ p["linear2.weight"].T + p["linear2.bias"]

    def norm1(h):
        return np_layer_norm(h, p["norm1.weight"], p["norm1.bias"])

    def norm2(h):
        return np_layer_norm(h, p["norm2.weight"], p["norm2.bias"])

    if layer.norm_first:
        x = x + sa(norm1(x))
        return x + ff(norm2(x))
    x = norm1(x + sa(x))
    return norm2(x + ff(x))


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_against_numpy(norm_first):
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, norm_first=norm_first,
                                       batch_first=True).double()
    randomize(layer, 6).eval()
    names = [n for n, _ in layer.named_children()]
    assert names == ["self_attn", "linear1", "dropout", "linear2", "norm1", "norm2", "dropout1",
                     "dropout2"]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 5, 8))
    padding = np.array([[False] * 5, [False, False, False, True, True]])
    mask = np.triu(np.ones((5, 5), bool), 1)
    out = layer(hf.tensor(x), src_mask=hf.tensor(mask), src_key_padding_mask=hf.tensor(padding))
    np.testing.assert_allclose(npy(out), np_encoder_layer(layer, x, mask, padding), rtol=1e-10,
                               atol=1e-12)
    gelu = randomize(nn.TransformerEncoderLayer(8, 2, 16, activation="gelu",
                                                norm_first=norm_first).double(), 8).eval()
    out = gelu(hf.tensor(x.transpose(1, 0, 2)))
    np.testing.assert_allclose(npy(out).transpose(1, 0, 2), np_encoder_layer(gelu, x, gelu=True),
                               rtol=1e-9, atol=1e-10)


def test_encoder_layer_dropout_modes_and_stack():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.3)
    x = hf.randn(5, 2, 8)
    layer.eval()
    np.testing.assert_array_equal(npy(layer(x)), npy(layer(x)))
    layer.train()
    assert not np.allclose(npy(layer(x)), npy(layer(x)))
    stack = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(8))
    names = [n for n, _ in stack.named_parameters()]
    assert names[0] == "layers.0.self_attn.in_proj_weight" and names[-1] == "norm.bias"
    assert stack.layers[0].linear1.weight is not stack.layers[1].linear1.weight
    assert stack.eval()(x).shape == (5, 2, 8)
    with pytest.raises(ValueError, match="activation"):
        nn.TransformerEncoderLayer(8, 2, activation="swish")


# ---- PyTorch as an extra oracle ----------------------------------------------------------------
def _load_from_torch(module, tmodule):
    module.load_state_dict({k: v.detach().numpy() for k, v in tmodule.state_dict().items()})


def test_attention_matches_torch_with_masks():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    rng = np.random.default_rng(9)
    for kwargs in ({}, {"batch_first": True}, {"kdim": 3, "vdim": 5}, {"add_bias_kv": True},
                   {"add_zero_attn": True, "bias": False}):
        tm = torch.nn.MultiheadAttention(8, 2, **kwargs)
        m = nn.MultiheadAttention(8, 2, **kwargs)
        _load_from_torch(m, tm)
        shape = (3, 4) if kwargs.get("batch_first") else (4, 3)
        kshape = (3, 5) if kwargs.get("batch_first") else (5, 3)
        q = rng.standard_normal((*shape, 8)).astype(np.float32)
        k = rng.standard_normal((*kshape, kwargs.get("kdim", 8))).astype(np.float32)
        v = rng.standard_normal((*kshape, kwargs.get("vdim", 8))).astype(np.float32)
        mask = rng.random((4, 5)) < 0.3
        mask[:, 0] = False
        padding = rng.random((3, 5)) < 0.3
        padding[:, 0] = False
        for masks in ({}, {"attn_mask": mask, "key_padding_mask": padding},
                      {"attn_mask": rng.standard_normal((6, 4, 5)).astype(np.float32)}):
            for average in (True, False):
                tout, tw = tm(*(torch.from_numpy(a) for a in (q, k, v)),
                              average_attn_weights=average,
                              **{key: torch.from_numpy(a) for key, a in masks.items()})
                out, w = m(*(hf.tensor(a) for a in (q, k, v)), average_attn_weights=average,
                           **{key: hf.tensor(a) for key, a in masks.items()})
                np.testing.assert_allclose(npy(out), tout.detach().numpy(), atol=1e-5)
                np.testing.assert_allclose(npy(w), tw.detach().numpy(), atol=1e-6)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch(norm_first):
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    for activation, batch_first in (("relu", False), ("gelu", True)):
        tm = torch.nn.TransformerEncoderLayer(8, 2, 16, activation=activation,
                                              batch_first=batch_first, norm_first=norm_first)
        m = nn.TransformerEncoderLayer(8, 2, 16, activation=activation, batch_first=batch_first,
                                       norm_first=norm_first)
        _load_from_torch(m, tm)
        tm.eval()
        m.eval()
        rng = np.random.default_rng(10)
        x = rng.standard_normal((2, 5, 8) if batch_first else (5, 2, 8)).astype(np.float32)
        padding = np.array([[False] * 5, [False, False, True, True, True]])
        mask = np.triu(np.ones((5, 5), bool), 1)
        with torch.no_grad():
            tout = tm(torch.from_numpy(x), src_mask=torch.from_numpy(mask),
                      src_key_padding_mask=torch.from_numpy(padding))
        out = m(hf.tensor(x), src_mask=hf.tensor(mask), src_key_padding_mask=hf.tensor(padding))
        np.testing.assert_allclose(npy(out), tout.numpy(), atol=1e-5)
        # training-mode gradients (dropout off so both sides agree)
        tm.train()
        m.train()
        for mod in (tm, m):
            for sub in mod.modules():
                if type(sub).__name__ == "Dropout":
                    sub.p = 0.0
            mod.self_attn.dropout = 0.0
        tout = tm(torch.from_numpy(x))
        out = m(hf.tensor(x))
        np.testing.assert_allclose(npy(out), tout.detach().numpy(), atol=1e-5)
        tout.sum().backward()
        out.sum().backward()
        for (name, p), (tname, tp) in zip(m.named_parameters(), tm.named_parameters()):
            assert name == tname
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), atol=1e-4, rtol=1e-4)


# ---- fully masked query rows ---------------------------------------------------------------------
def _fully_masked_cases():
    """(attn_mask, key_padding_mask) pairs, (L, S) = (4, 4), N = 2, each with query rows whose
    keys are all masked: every key padded for batch element 0; causal + key 0 padded (query 0
    of batch element 0 sees nothing); a float -inf row of attn_mask."""
    causal = np.triu(np.ones((4, 4), bool), 1)
    float_mask = np.zeros((4, 4))
    float_mask[2] = -np.inf
    return [(None, np.array([[True] * 4, [False, True, False, False]])),
            (causal, np.array([[True, False, False, False], [False] * 4])),
            (float_mask, None)]


@pytest.mark.parametrize("case", range(3))
def test_attention_fully_masked_rows_without_weights_are_bias(case):
    """need_weights=False: a query that may attend to no key contributes zeros (its output is
    out_proj's bias, as PyTorch's fused path), finite gradients and no numpy warning;
    need_weights=True keeps PyTorch's NaN for that row."""
    attn_mask, padding = _fully_masked_cases()[case]
    mha = randomize(nn.MultiheadAttention(8, 2, batch_first=True).double(), 11)
    x = np.random.default_rng(12).standard_normal((2, 4, 8))
    masks = {key: hf.tensor(m) for key, m in (("attn_mask", attn_mask),
                                              ("key_padding_mask", padding)) if m is not None}
    scores_masked = np.zeros((2, 4, 4), bool)
    if attn_mask is not None:
        scores_masked |= np.isneginf(attn_mask) if attn_mask.dtype != bool else attn_mask
    if padding is not None:
        scores_masked |= padding[:, None, :]
    dead = scores_masked.all(-1)  # (N, L) queries with no key left
    assert dead.any() and not dead.all()
    xt = hf.tensor(x, requires_grad=True)
    with np.errstate(all="raise"):
        out, weights = mha(xt, xt, xt, need_weights=False, **masks)
    assert weights is None
    got = npy(out)
    bias = npy(mha.out_proj.bias)
    np.testing.assert_allclose(got[dead], np.broadcast_to(bias, got[dead].shape), rtol=1e-12)
    # the other rows: the numpy reference (its NaN rows are exactly the dead ones)
    with np.errstate(all="ignore"):
        ref_out, _ = np_mha(mha, x, x, x, attn_mask, padding)
    assert np.isnan(ref_out[dead]).all()
    np.testing.assert_allclose(got[~dead], ref_out[~dead], rtol=1e-10, atol=1e-12)
    with np.errstate(all="raise"):
        out.sum().backward()
    grads = [npy(xt.grad)] + [npy(p.grad) for p in mha.parameters()]
    assert all(np.isfinite(g).all() for g in grads)
    check_grads(lambda: mha(xt, xt, xt, need_weights=False, **masks)[0],
                [xt, *mha.parameters()])
    # need_weights=True: NaN rows, as PyTorch
    with np.errstate(all="ignore"):
        out_w, weights = mha(xt, xt, xt, **masks)
    assert np.isnan(npy(out_w)[dead]).all() and np.isnan(npy(weights)[dead]).all()
    np.testing.assert_allclose(npy(out_w)[~dead], ref_out[~dead], rtol=1e-10, atol=1e-12)
    # eager == static
    def attend(a):
        return mha(a, a, a, need_weights=False, **masks)[0]

    static = hf.jit.to_static(attend)
    np.testing.assert_allclose(npy(static(hf.tensor(x))), got, rtol=1e-12, atol=1e-14)


def _grads_match_torch(out, tout, x, tx, module, tmodule, rtol, atol):
    """Backward of out.sum() on both sides: the input's and every parameter's gradient agree
    (then cleared, for the next case)."""
    tout.sum().backward()
    out.sum().backward()
    np.testing.assert_allclose(npy(x.grad), tx.grad.numpy(), rtol=rtol, atol=atol)
    for (name, p), (_, tp) in zip(module.named_parameters(), tmodule.named_parameters()):
        np.testing.assert_allclose(npy(p.grad), tp.grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=name)
        p.grad = None
        tp.grad = None


@pytest.mark.parametrize("train", [True, False])
def test_fully_masked_rows_match_torch(train):
    torch = pytest.importorskip("torch")
    torch.manual_seed(3)
    tm = torch.nn.MultiheadAttention(8, 2, dropout=0.0).double()
    m = nn.MultiheadAttention(8, 2).double()
    _load_from_torch(m, tm)
    with torch.no_grad():  # non-zero biases, so the fully masked rows show out_proj's bias
        for p in (tm.in_proj_bias, tm.out_proj.bias):
            p.normal_()
    _load_from_torch(m, tm)
    tm.train(train)
    m.train(train)
    x = np.random.default_rng(13).standard_normal((4, 2, 8))
    for attn_mask, padding in _fully_masked_cases():
        tmasks = {key: torch.from_numpy(a) for key, a in (("attn_mask", attn_mask),
                                                          ("key_padding_mask", padding))
                  if a is not None}
        tx = torch.tensor(x, requires_grad=True)
        tout, _ = tm(tx, tx, tx, need_weights=False, **tmasks)
        xt = hf.tensor(x, requires_grad=True)
        out, _ = m(xt, xt, xt, need_weights=False,
                   **{key: hf.tensor(a.numpy()) for key, a in tmasks.items()})
        np.testing.assert_allclose(npy(out), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
        _grads_match_torch(out, tout, xt, tx, m, tm, rtol=1e-9, atol=1e-12)
        with torch.no_grad():
            tw_out, tw = tm(tx, tx, tx, **tmasks)
        with np.errstate(all="ignore"):
            w_out, w = m(xt, xt, xt, **{key: hf.tensor(a.numpy()) for key, a in tmasks.items()})
        np.testing.assert_array_equal(np.isnan(npy(w_out)), np.isnan(tw_out.numpy()))
        np.testing.assert_allclose(npy(w), tw.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("train", [True, False])
def test_encoder_layer_causal_and_padding_matches_torch(train):
    """TransformerEncoderLayer always takes the need_weights=False path: query 0 of a sequence
    whose key 0 is padded, under a causal mask, sees no key (PyTorch: zeros, not NaN)."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(4)
    tm = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).double()
    m = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).double()
    with torch.no_grad():
        for p in (tm.self_attn.in_proj_bias, tm.self_attn.out_proj.bias):
            p.normal_()
    _load_from_torch(m, tm)
    tm.train(train)
    m.train(train)
    x = np.random.default_rng(14).standard_normal((2, 5, 8))
    causal = np.triu(np.ones((5, 5), bool), 1)
    padding = np.array([[True, False, False, True, False], [False] * 5])
    tx = torch.tensor(x, requires_grad=True)
    tout = tm(tx, src_mask=torch.from_numpy(causal), src_key_padding_mask=torch.from_numpy(padding))
    xt = hf.tensor(x, requires_grad=True)
    with np.errstate(all="raise"):
        out = m(xt, src_mask=hf.tensor(causal), src_key_padding_mask=hf.tensor(padding))
    assert np.isfinite(npy(out)).all()
    np.testing.assert_allclose(npy(out), tout.detach().numpy(), rtol=1e-9, atol=1e-11)
    if train:
        _grads_match_torch(out, tout, xt, tx, m, tm, rtol=1e-8, atol=1e-10)
    static = hf.jit.to_static(m)
    np.testing.assert_allclose(
        npy(static(hf.tensor(x), src_mask=hf.tensor(causal),
                   src_key_padding_mask=hf.tensor(padding))), npy(out), rtol=1e-12, atol=1e-13)


def test_is_causal_needs_a_mask_as_torch():
    """is_causal=True without attn_mask / src_mask raises PyTorch's RuntimeError, for the
    attention, the encoder layer (either mode, with or without padding) and the encoder."""
    x = hf.randn(4, 2, 8)
    pad = hf.zeros(2, 4, dtype=hf.bool)
    layer = nn.TransformerEncoderLayer(8, 2, 16)
    calls = [lambda: nn.MultiheadAttention(8, 2)(x, x, x, is_causal=True, need_weights=False),
             lambda: layer(x, is_causal=True), lambda: layer(x, src_key_padding_mask=pad,
                                                               is_causal=True),
             lambda: layer.eval()(x, is_causal=True),
             lambda: nn.TransformerEncoder(layer, 2)(x, is_causal=True)]
    for call in calls:
        with pytest.raises(RuntimeError, match="^Need attn_mask if specifying the is_causal hint"):
            call()
    mask = hf.ones(4, 4, dtype=hf.bool).triu(1)
    np.testing.assert_array_equal(npy(layer(x, src_mask=mask, is_causal=True)),
                                  npy(layer(x, src_mask=mask)))
    torch = pytest.importorskip("torch")
    tx = torch.randn(4, 2, 8)
    for tcall in (lambda: torch.nn.MultiheadAttention(8, 2)(tx, tx, tx, is_causal=True),
                  lambda: torch.nn.TransformerEncoderLayer(8, 2, 16)(tx, is_causal=True)):
        with pytest.raises(RuntimeError, match="^Need attn_mask if specifying the is_causal hint"):
            tcall()
