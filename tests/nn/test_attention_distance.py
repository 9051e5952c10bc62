"""F.scaled_dot_product_attention, F.cosine_similarity, F.pairwise_distance and hf.cdist
against PyTorch: values, dtypes, shapes and gradients, eagerly and under ``hf.jit.to_static``
(forward and backward); errors for bad inputs."""
import math

import numpy as np
import pytest

import hybridfw as hf
import hybridfw.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(0)
Q = RNG.standard_normal((2, 3, 4, 8))
K = RNG.standard_normal((2, 3, 5, 8))
V = RNG.standard_normal((2, 3, 5, 6))
BOOL_MASK = RNG.random((4, 5)) > 0.5
BOOL_MASK[1] = False  # a query that may attend nothing: zeros, as PyTorch
FLOAT_MASK = RNG.standard_normal((3, 4, 5))
FLOAT_MASK[0, 2] = -math.inf
X1 = RNG.standard_normal((3, 30, 4))
X2 = RNG.standard_normal((40, 4))


def _compare(call, arrays, fixed=(), static=True, rtol=1e-10):
    """``call(lib, *tensors, *fixed)`` with torch and hybridfw (float64 inputs): values, dtype,
    shape and the gradients of ``(out * weights).sum()`` agree, eagerly and (``static``)
    through ``hf.jit.to_static``."""
    weights = RNG.standard_normal(call(torch, *[torch.tensor(a) for a in arrays],
                                       *[torch.tensor(f) for f in fixed]).shape)
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    expected = call(torch, *ts, *[torch.tensor(f) for f in fixed])
    (expected * torch.tensor(weights)).sum().backward()

    def ours(*tensors):
        return call(hf, *tensors)

    runs = [ours] + ([hf.jit.to_static(ours)] if static else [])
    for run in runs:
        hs = [hf.tensor(a, requires_grad=True) for a in arrays]
        got = run(*hs, *[hf.tensor(f) for f in fixed])
        assert got.shape == tuple(expected.shape)
        assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=rtol,
                                   atol=1e-12)
        (got * hf.tensor(weights)).sum().backward()
        for h, t in zip(hs, ts):
            np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-12)


def _functional(lib):
    return lib.nn.functional


@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}, {"scale": 0.3}])
def test_sdpa(kwargs):
    _compare(lambda lib, q, k, v: _functional(lib).scaled_dot_product_attention(
        q, k, v, **kwargs), [Q, K, V], static=not kwargs)


@pytest.mark.parametrize("mask", [BOOL_MASK, FLOAT_MASK], ids=["bool", "float"])
def test_sdpa_masks(mask):
    _compare(lambda lib, q, k, v, m: _functional(lib).scaled_dot_product_attention(
        q, k, v, attn_mask=m), [Q, K, V], fixed=[mask])


def test_sdpa_shapes_and_dtypes():
    # 2-D and 5-D inputs, batch dims broadcast, float32, causal with L != S
    q, k, v = Q[0, 0].astype(np.float32), K[0, 0].astype(np.float32), V[0, 0]
    got = F.scaled_dot_product_attention(hf.tensor(q), hf.tensor(k), hf.tensor(v, "float32"),
                                         is_causal=True)
    want = TF.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k),
                                           torch.tensor(v, dtype=torch.float32), is_causal=True)
    assert got.dtype is hf.float32 and got.shape == (4, 6)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    q5 = Q.reshape(2, 3, 1, 4, 8)
    got = F.scaled_dot_product_attention(hf.tensor(q5), hf.tensor(K[0]), hf.tensor(V[0]))
    want = TF.scaled_dot_product_attention(torch.tensor(q5), torch.tensor(K[0]),
                                           torch.tensor(V[0]))
    assert got.shape == tuple(want.shape) == (2, 3, 3, 4, 6)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10)


def test_sdpa_grouped_query_heads():
    k, v = K[:, :1], V[:, :1]
    got = F.scaled_dot_product_attention(hf.tensor(Q), hf.tensor(k), hf.tensor(v),
                                         enable_gqa=True)
    want = TF.scaled_dot_product_attention(torch.tensor(Q), torch.tensor(k), torch.tensor(v),
                                           enable_gqa=True)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10)


def test_sdpa_dropout_scales_kept_weights():
    hf.manual_seed(0)
    q = hf.zeros(1, 2000, 1)
    v = hf.ones(1, 4, 1)
    out = F.scaled_dot_product_attention(q, hf.zeros(1, 4, 1), v, dropout_p=0.5)
    # each row: the mean of four weights 0.25 each kept (times 2) or dropped
    values = np.unique(np.round(out.numpy(), 6))
    assert set(values) <= {0.0, 0.5, 1.0, 1.5, 2.0}
    assert abs(out.numpy().mean() - 1.0) < 0.05


def test_sdpa_errors():
    q, k, v = hf.tensor(Q), hf.tensor(K), hf.tensor(V)
    sdpa = F.scaled_dot_product_attention
    with pytest.raises(TypeError, match="same dtype"):
        sdpa(q, k.float(), v)
    with pytest.raises(ValueError, match="last dim"):
        sdpa(q, k[..., :3], v)
    with pytest.raises(ValueError, match="number of positions"):
        sdpa(q, k, v[..., :4, :])
    with pytest.raises(ValueError, match="at least 2 dims"):
        sdpa(q[0, 0, 0], k[0, 0, 0], v[0, 0, 0])
    with pytest.raises(TypeError, match="attn_mask"):
        sdpa(q, k, v, attn_mask=hf.tensor(BOOL_MASK).int())
    with pytest.raises(ValueError, match="is_causal"):
        sdpa(q, k, v, attn_mask=hf.tensor(BOOL_MASK), is_causal=True)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, math.inf])
def test_cdist(p):
    # 30 and 40 rows: p=2 takes PyTorch's matrix-product path; a slice of them the direct one
    _compare(lambda lib, a, b: lib.cdist(a, b, p), [X1, X2], rtol=1e-9)
    _compare(lambda lib, a, b: lib.cdist(a, b, p), [X1[:, :5], X2[:7]], static=False)


def test_cdist_zero_distance_gradient_is_zero():
    x = hf.tensor(X2[:3], requires_grad=True)
    for mode in ("use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
        hf.cdist(x, x, compute_mode=mode).sum().backward()
        assert np.isfinite(x.grad.numpy()).all()
        x.grad = None
    assert hf.cdist(hf.tensor(X2[:3]), hf.tensor(X2[:3]), 0).numpy().diagonal().tolist() == \
        [0.0] * 3


def test_cdist_errors():
    with pytest.raises(TypeError, match="floating-point"):
        hf.cdist(hf.tensor([[1, 2]]), hf.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="columns"):
        hf.cdist(hf.tensor(X1), hf.tensor(X2[:, :3]))
    with pytest.raises(ValueError, match="at least 2 dims"):
        hf.cdist(hf.tensor(X2[0]), hf.tensor(X2))
    with pytest.raises(ValueError, match="non-negative"):
        hf.cdist(hf.tensor(X2), hf.tensor(X2), -1.0)


@pytest.mark.parametrize("dim", [1, -1, 0])
def test_cosine_similarity(dim):
    _compare(lambda lib, a, b: lib.nn.functional.cosine_similarity(a, b, dim=dim),
             [X1, X2[:30]], static=dim == -1)
    _compare(lambda lib, a, b: lib.cosine_similarity(a, b, dim, 1e-3),
             [X1[:, :4] * 1e-4, X2[:4]], static=False)


def test_cosine_similarity_dtypes_and_errors():
    a = hf.tensor([[3, 4]])
    got = F.cosine_similarity(a, hf.tensor([[3.0, 4.0]]))
    assert got.dtype is hf.float32 and got.tolist() == pytest.approx([1.0])
    with pytest.raises(TypeError, match="floating-point"):
        F.cosine_similarity(a, a)
    with pytest.raises(ValueError):
        F.cosine_similarity(hf.tensor(X1), hf.tensor(X2))


@pytest.mark.parametrize("p, keepdim", [(2.0, False), (1.0, True), (3.0, False)])
def test_pairwise_distance(p, keepdim):
    _compare(lambda lib, a, b: lib.nn.functional.pairwise_distance(a, b, p, keepdim=keepdim),
             [X1, X2[:30]], static=p == 2.0)
    _compare(lambda lib, a, b: lib.pairwise_distance(a, b, p, 0.1), [X2[0], X2[1]],
             static=False)
    ints = F.pairwise_distance(hf.tensor([[1, 2]]), hf.tensor([[1, 3]]))
    assert ints.dtype is hf.float32 and ints.tolist() == pytest.approx([1.0 - 1e-6])


def test_to_static_with_run_time_sizes():
    # InputSpec None dims: one program serves every batch and sequence length
    spec = [hf.jit.InputSpec([None, None, 8], "float64")]

    def f(q):
        return F.scaled_dot_product_attention(q, q * 2, q, is_causal=True) + \
            hf.cdist(q, q * 2 + 1).sum(-1, keepdim=True) + \
            F.cosine_similarity(q, q + 1, -1)[..., None]

    g = hf.jit.to_static(f, input_spec=spec)
    for shape in ((2, 5, 8), (1, 3, 8)):
        q = hf.tensor(RNG.standard_normal(shape))
        # (cdist takes the matrix-product path for sizes known only at run time: rounding)
        np.testing.assert_allclose(g(q).numpy(), f(q).numpy(), rtol=1e-9)


def test_onnx_export(tmp_path):
    ort = pytest.importorskip("onnxruntime")

    def f(x):
        a = F.scaled_dot_product_attention(x, x, x * 2, is_causal=True)
        return (F.mish(a) + F.hardswish(a) + F.selu(a) + F.softmin(a, -1)).sum(-1) + \
            F.cosine_similarity(x, x + 1, -1) + F.pairwise_distance(x, x * 2) + \
            hf.cdist(x, x + 1).sum(-1)

    path = str(tmp_path / "attention.onnx")
    hf.onnx.export(f, path, input_spec=[hf.jit.InputSpec([2, None, 8])])
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    x = Q[0].astype(np.float32)[:2]
    (got,) = session.run(None, {session.get_inputs()[0].name: x})
    np.testing.assert_allclose(got, f(hf.tensor(x)).numpy(), rtol=1e-4, atol=1e-4)
