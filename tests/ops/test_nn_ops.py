"""The neural-network primitives themselves (``hybridfw.ops.nn_ops``, ``conv``, ``pooling``):
kernel accuracy over many geometries, adjoint identities between each op and its gradient
primitives, static shape inference with unknown dims, and CUDA == CPU.

The public functions built on them are tested in ``tests/nn/test_functional.py``.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.dtypes import float32, int64
from hybridfw.ops import conv as CV
from hybridfw.ops import nn_ops as N
from hybridfw.ops import pooling as P
from hybridfw.ops.registry import TensorMeta, apply


def to_numpy(t):
    return np.asarray(t.detach().numpy())


def conv_loops(x, w, stride, padding, dilation, groups):
    """Direct convolution, one output pixel at a time (padding as ((t, b), (l, r)))."""
    x = np.pad(x, ((0, 0), (0, 0)) + padding)
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    for oc in range(o):
        g = oc // (o // groups)
        for i in range(oh):
            for j in range(ow):
                patch = x[:, g * cg:(g + 1) * cg, i * sh:i * sh + dh * (kh - 1) + 1:dh,
                          j * sw:j * sw + dw * (kw - 1) + 1:dw]
                out[:, oc, i, j] = np.sum(patch * w[oc], axis=(1, 2, 3))
    return out


def _geometries():
    rng = np.random.default_rng(7)
    out = []
    for _ in range(24):
        groups = int(rng.choice([1, 2, 3]))
        c, o = groups * int(rng.integers(1, 3)), groups * int(rng.integers(1, 3))
        kh, kw = (int(k) for k in rng.integers(1, 4, 2))
        stride = tuple(int(s) for s in rng.integers(1, 3, 2))
        dilation = tuple(int(d) for d in rng.integers(1, 3, 2))
        padding = tuple(tuple(int(p) for p in rng.integers(0, 3, 2)) for _ in range(2))
        h = int(rng.integers(dilation[0] * (kh - 1) + 1, 7))
        w = int(rng.integers(1, 6))
        w = max(w, dilation[1] * (kw - 1) + 1 - sum(padding[1]))
        out.append(((2, c, h, w), (o, c // groups, kh, kw), stride, padding, dilation, groups))
    return out


@pytest.mark.parametrize("geometry", _geometries(), ids=lambda g: str(g).replace(" ", ""))
def test_conv2d_kernels_match_loops_and_are_adjoint(geometry):
    """conv2d vs explicit loops; input/weight gradient kernels are exact adjoints of it:
    <conv(x, w), g> == <x, input_grad(g, w)> == <w, weight_grad(x, g)>."""
    xs, ws, stride, padding, dilation, groups = geometry
    rng = np.random.default_rng(abs(hash(geometry)) % 2 ** 32)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    attrs = CV.conv_attrs(stride, padding, dilation, groups)
    y = to_numpy(apply(N.conv2d, hf.tensor(x), hf.tensor(w), **attrs))
    np.testing.assert_allclose(y, conv_loops(x, w, stride, padding, dilation, groups),
                               rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(y.shape)
    gx = to_numpy(apply(N.conv2d_input_grad, hf.tensor(g), hf.tensor(w), input_size=xs[2:],
                        **attrs))
    gw = to_numpy(apply(N.conv2d_weight_grad, hf.tensor(x), hf.tensor(g), kernel_size=ws[2:],
                        **attrs))
    assert gx.shape == xs and gw.shape == ws
    inner = float(np.sum(y * g))
    assert math.isclose(inner, float(np.sum(x * gx)), rel_tol=1e-10, abs_tol=1e-10)
    assert math.isclose(inner, float(np.sum(w * gw)), rel_tol=1e-10, abs_tol=1e-10)


def test_conv2d_float32_matches_float64():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 4, 9, 10)), rng.standard_normal((6, 4, 3, 3))
    attrs = CV.conv_attrs(1, 1, 1, 1)
    y64 = to_numpy(apply(N.conv2d, hf.tensor(x), hf.tensor(w), **attrs))
    y32 = apply(N.conv2d, hf.tensor(x.astype(np.float32)), hf.tensor(w.astype(np.float32)),
                **attrs)
    assert y32.dtype == hf.float32
    np.testing.assert_allclose(to_numpy(y32), y64, rtol=1e-4, atol=1e-4)


def test_conv2d_third_order():
    """Each gradient rule is differentiable again (rules are written with the other ops)."""
    rng = np.random.default_rng(1)
    x = hf.tensor(rng.standard_normal((1, 2, 5, 4)), requires_grad=True)
    w = hf.tensor(rng.standard_normal((3, 2, 2, 3)), requires_grad=True)
    attrs = CV.conv_attrs((2, 1), 1, (1, 2), 1)
    y = apply(N.conv2d, x, w, **attrs)
    (gx,) = hf.autograd.grad((y * y).sum(), [x], create_graph=True)
    (gw,) = hf.autograd.grad((gx * gx).sum(), [w], create_graph=True)
    (gx2,) = hf.autograd.grad((gw * gw).sum(), [x])
    assert gx2.shape == x.shape and np.all(np.isfinite(to_numpy(gx2)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv2d_output_owns_contiguous_memory(dtype):
    y = apply(N.conv2d, hf.randn(2, 3, 6, 6, dtype=dtype), hf.randn(4, 3, 3, 3, dtype=dtype),
              **CV.conv_attrs(1, 1, 1, 1))
    assert y._data.flags.c_contiguous and y._data.base is None


# ============================================================================= static inference
def test_static_shape_inference_with_unknown_dims():
    x = TensorMeta((-1, 3, -1, 8), float32)
    w = TensorMeta((4, 3, 3, 3), float32)
    shape, dtype, _ = N.conv2d.infer(x, w, **CV.conv_attrs(2, 1, 1, 1))
    assert shape == (-1, 4, -1, 4) and dtype is float32
    shape, _, _ = P.max_pool2d.infer(x, ceil_mode=True, **P.pool_attrs("max_pool2d", 3, 2, 1))
    assert shape == (-1, 3, -1, 5)  # ceil((8 + 2 - 3) / 2) + 1
    assert N.max_pool2d_indices.infer(x, ceil_mode=False,
                                      **P.pool_attrs("m", 2))[1] is int64
    shape, _, _ = N.softmax.infer(x, dim=1)
    assert shape == x.shape
    shape, _, _ = N.pad_constant.infer(x, pad=(1, 2, 3, 4), value=0.0)
    assert shape == (-1, 3, -1, 11)
    with pytest.raises(ValueError, match="conv2d.*channels"):
        N.conv2d.infer(TensorMeta((-1, 2, 8, 8), float32), w, **CV.conv_attrs())


# ============================================================================= pooling kernels
def test_max_pool_scatter_paths_agree():
    """The overlapping (accumulating) and the disjoint (assigning) scatter give one result when
    the indices do not repeat."""
    rng = np.random.default_rng(2)
    x = hf.tensor(rng.permutation(2 * 3 * 8 * 8).reshape(2, 3, 8, 8).astype(np.float64))
    attrs = dict(P.pool_attrs("max_pool2d", 2), ceil_mode=False)
    idx = apply(N.max_pool2d_indices, x, **attrs)
    g = hf.tensor(rng.standard_normal((2, 3, 4, 4)))
    a = apply(P.max_pool2d_backward, g, idx, input_shape=(2, 3, 8, 8), overlapping=False)
    b = apply(P.max_pool2d_backward, g, idx, input_shape=(2, 3, 8, 8), overlapping=True)
    np.testing.assert_array_equal(to_numpy(a), to_numpy(b))


@pytest.mark.parametrize("k, s, p, ceil, include", [
    ((2, 2), (2, 2), (0, 0), False, True), ((3, 3), (2, 2), (1, 1), True, True),
    ((3, 2), (1, 2), (1, 1), True, False), ((2, 3), (3, 2), (1, 0), False, False)])
def test_avg_pool_kernels_are_adjoint(k, s, p, ceil, include):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 7, 6))
    attrs = {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": ceil,
             "count_include_pad": include, "divisor_override": None}
    y = to_numpy(apply(N.avg_pool2d, hf.tensor(x), **attrs))
    g = rng.standard_normal(y.shape)
    gx = to_numpy(apply(P.avg_pool2d_backward, hf.tensor(g), input_shape=x.shape, **attrs))
    assert math.isclose(float(np.sum(y * g)), float(np.sum(x * gx)), rel_tol=1e-12)


@pytest.mark.parametrize("size", [(1, 1), (3, 2), (4, 5), (7, 6)])
def test_adaptive_avg_pool_kernels_are_adjoint(size):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 7, 6))
    y = to_numpy(apply(N.adaptive_avg_pool2d, hf.tensor(x), output_size=size))
    g = rng.standard_normal(y.shape)
    gx = to_numpy(apply(P.adaptive_avg_pool2d_backward, hf.tensor(g), input_shape=x.shape))
    assert math.isclose(float(np.sum(y * g)), float(np.sum(x * gx)), rel_tol=1e-12)


# ============================================================================= erf, softmax, pad
def test_erf_accuracy():
    v = np.concatenate([np.linspace(-7, 7, 20001), [0.0, -0.0, 1e-300, -1e-20, 0.46875, 4.0,
                                                    26.0, -40.0, np.inf, -np.inf]])
    ref = np.array([math.erf(a) for a in v])
    got = to_numpy(apply(N.erf, hf.tensor(v)))
    assert np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300)) < 2e-15
    got32 = apply(N.erf, hf.tensor(v.astype(np.float32)))
    assert got32.dtype == hf.float32
    ref32 = np.array([math.erf(a) for a in v.astype(np.float32).astype(np.float64)])
    assert np.max(np.abs(to_numpy(got32) - ref32) / np.maximum(np.abs(ref32), 1e-30)) < 4e-7
    assert apply(N.erf, hf.tensor([0.5], dtype="float16")).dtype == hf.float16
    assert math.isnan(apply(N.erf, hf.tensor([math.nan])).item())


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_erf_of_integers_and_bools_is_float32(dtype):
    """Integer and bool inputs give float32, as PyTorch (they raised TypeError)."""
    a = np.array([[-3, 0, 1], [2, 1, 0]]).astype(dtype)
    out = hf.from_numpy(a).erf()
    assert out.dtype is hf.float32
    want = np.array([math.erf(v) for v in a.astype(np.float64).ravel()]).reshape(a.shape)
    np.testing.assert_allclose(to_numpy(out), want, rtol=1e-6)
    torch = pytest.importorskip("torch")
    ref = torch.erf(torch.from_numpy(a))
    assert ref.dtype == torch.float32
    np.testing.assert_allclose(to_numpy(out), ref.numpy(), rtol=1e-6)


def test_softmax_rows_with_infinities():
    x = hf.tensor([[-math.inf, 0.0, 1.0], [0.0, 0.0, 0.0]])
    out = to_numpy(apply(N.softmax, x, dim=1))
    np.testing.assert_allclose(out[0], [0.0, 1 / (1 + math.e), math.e / (1 + math.e)],
                               rtol=1e-6)
    np.testing.assert_allclose(out[1], [1 / 3] * 3, rtol=1e-6)
    assert to_numpy(apply(N.log_softmax, x, dim=1))[0, 0] == -math.inf


def test_pad_constant_crops_and_its_gradient_slices_back():
    x = hf.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    y = apply(N.pad_constant, x, pad=(1, -2, -1, 2), value=9.0)
    np.testing.assert_array_equal(to_numpy(y), [[9, 4, 5], [9, 8, 9], [9, 9, 9], [9, 9, 9]])
    (y * hf.tensor(np.arange(12.0).reshape(4, 3))).sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), [[0, 0, 0, 0], [1, 2, 0, 0], [4, 5, 0, 0]])


def test_nll_and_embedding_pairs_are_adjoint():
    rng = np.random.default_rng(5)
    t = hf.tensor([[2, -100], [0, 1]])
    lp = rng.standard_normal((2, 3, 2))
    g = rng.standard_normal((2, 2))
    fwd = to_numpy(apply(N.nll_loss, hf.tensor(lp), t, ignore_index=-100))
    back = to_numpy(apply(N.nll_loss_backward, hf.tensor(g), t, ignore_index=-100,
                          num_classes=3))
    assert math.isclose(float(np.sum(fwd * g)), float(np.sum(lp * back)), rel_tol=1e-12)
    w = rng.standard_normal((5, 3))
    idx = hf.tensor([[1, 4, 1], [0, 4, 2]])
    rows = to_numpy(apply(N.embedding, hf.tensor(w), idx, padding_idx=None))
    gr = rng.standard_normal(rows.shape)
    table = to_numpy(apply(N.embedding_backward, hf.tensor(gr), idx, num_weights=5,
                           padding_idx=None))
    assert math.isclose(float(np.sum(rows * gr)), float(np.sum(w * table)), rel_tol=1e-12)


# ============================================================================= CUDA == CPU
GPU_TARGET = np.random.default_rng(8).integers(0, 4, (4, 5, 6))
GPU_CASES = {
    "conv2d": lambda F, x: F.conv2d(x, x[:3, :, :3, :3], padding=1, stride=(1, 2)),
    "conv2d_groups": lambda F, x: F.conv2d(x, x[:4, :2, :2, :3], groups=2, dilation=2),
    "max_pool2d": lambda F, x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
    "avg_pool2d": lambda F, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    "adaptive_avg_pool2d": lambda F, x: F.adaptive_avg_pool2d(x, (3, 2)),
    "softmax": lambda F, x: F.softmax(x, 1),
    "log_softmax": lambda F, x: F.log_softmax(x, -1),
    "gelu": lambda F, x: F.gelu(x),
    "cross_entropy": lambda F, x: F.cross_entropy(x, hf.tensor(GPU_TARGET, device=x.device),
                                                  label_smoothing=0.1),
    "pad_reflect": lambda F, x: F.pad(x, (1, 2, 2, 1), mode="reflect"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(GPU_CASES))
def test_gpu_matches_cpu(name):
    if not hf.cuda.is_available():
        pytest.skip("CUDA is not available")
    import hybridfw.nn.functional as F
    x = np.random.default_rng(6).standard_normal((4, 4, 5, 6))
    results = []
    for device in ("cpu", "cuda"):
        t = hf.tensor(x, device=device, requires_grad=True)
        out = GPU_CASES[name](F, t)
        out.sum().backward()
        results.append((to_numpy(out.cpu()), to_numpy(t.grad.cpu())))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)



@pytest.mark.parametrize("pool", ["max", "avg", "adaptive"])
def test_pooling_gradients_with_a_batch_dim_known_only_at_run_time(pool):
    import hybridfw.nn.functional as F
    fn = {"max": lambda t: F.max_pool2d(t, 2), "avg": lambda t: F.avg_pool2d(t, 2),
          "adaptive": lambda t: F.adaptive_avg_pool2d(t, 1)}[pool]
    w = hf.tensor(np.random.default_rng(0).normal(size=(1, 2, 4, 4)), requires_grad=True)
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, 2, 4, 4], "float64")
        (gw,) = hf.static.gradients([(fn(x * w) * fn(x * w)).sum()], [w])
    xv = np.random.default_rng(1).normal(size=(3, 2, 4, 4))
    got = hf.static.Executor().run(prog, feed={"x": xv}, fetch_list=[gw])[0]
    w2 = hf.tensor(w.detach().numpy(), requires_grad=True)
    (fn(hf.tensor(xv) * w2) * fn(hf.tensor(xv) * w2)).sum().backward()
    np.testing.assert_allclose(got.numpy(), w2.grad.numpy(), rtol=1e-12)
