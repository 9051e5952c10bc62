"""``hf.nn.functional`` against independent numpy references, from one table.

Every row is one use of a functional (fn), its numpy reference (ref, fed float64 copies; conv
and pooling references are explicit loops over output pixels), its inputs and what to check.
From the table:

1. ``test_forward``          values, shape, dtype in float32 and float64;
2. ``test_shape_inference``  the static ``infer`` of every op run (forward and backward) agrees
                             with what the kernel produced;
3. ``test_grad``             float64 gradient vs central finite differences along a random
                             direction (all differentiable inputs at once);
4. ``test_grad_second_order`` double backward vs finite differences of the first gradient;
5. ``test_torch_oracle``     rows with a ``torch_fn`` vs PyTorch, values and gradients
                             (skipped without torch).

Behaviour that a table row cannot express (random masks, in-place running statistics,
stability at +-1e4, error messages) has its own tests below the table.
"""
from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

import hybridfw as hf
import hybridfw.nn.functional as F
from hybridfw.dygraph.eager import EagerInterpreter

F32, F64 = "float32", "float64"


# ============================================================================= table machinery
class Inp:
    """A generated float input: ``real`` (normal), ``positive``, ``prob`` (in (0.05, 0.95)),
    ``distinct`` (a shuffled grid, so no two elements tie: max pooling)."""

    differentiable = True

    def __init__(self, shape, domain="real"):
        self.shape, self.domain = tuple(shape), domain


class Fixed:
    """A fixed array (targets, indices, class weights, running stats): not differentiated."""

    differentiable = False

    def __init__(self, value, dtype=None):
        self.value = np.asarray(value, dtype=dtype)


class Row:
    def __init__(self, name, fn, ref, inputs, *, order=1, grad=True, fd=True,
                 tol32=(1e-5, 1e-5), gtol=(1e-6, 1e-7), torch_fn=None):
        self.name, self.fn, self.ref, self.inputs = name, fn, ref, list(inputs)
        self.grad = grad
        self.fd = fd and grad  # False: the gradient is a convention (checked against PyTorch)
        self.order = order if self.fd else 0
        self.tol32 = tol32
        self.gtol = gtol
        self.torch_fn = torch_fn

    def __repr__(self):
        return f"Row({self.name})"


def rng_for(*parts):
    return np.random.default_rng(zlib.crc32("/".join(map(str, parts)).encode()))


def make_array(spec, dtype, rng):
    if isinstance(spec, Fixed):
        v = spec.value.copy()
        return v.astype(dtype) if v.dtype.kind == "f" else v
    shape = spec.shape
    if spec.domain == "real":
        a = rng.standard_normal(shape)
    elif spec.domain == "positive":
        a = rng.uniform(0.5, 2.0, shape)
    elif spec.domain == "prob":
        a = rng.uniform(0.05, 0.95, shape)
    elif spec.domain == "distinct":
        n = int(np.prod(shape))
        a = (rng.permutation(n) / n * 4 - 2).reshape(shape)
    else:
        raise ValueError(spec.domain)
    return np.asarray(a, dtype=dtype)


def dtype_name(t):
    return str(t.dtype).replace("hybridfw.", "")


def to_numpy(t):
    return np.asarray(t.detach().numpy())


def as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


# ============================================================================= references
def conv_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Direct convolution; padding is an int, a pair or ((top, bottom), (left, right))."""
    s = (stride, stride) if isinstance(stride, int) else stride
    d = (dilation, dilation) if isinstance(dilation, int) else dilation
    if isinstance(padding, int):
        padding = (padding, padding)
    if isinstance(padding[0], int):
        padding = ((padding[0], padding[0]), (padding[1], padding[1]))
    x = np.pad(x, ((0, 0), (0, 0)) + tuple(padding))
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (wd - d[1] * (kw - 1) - 1) // s[1] + 1
    out = np.zeros((n, o, oh, ow))
    per_group = o // groups
    for oc in range(o):
        g = oc // per_group
        for i in range(oh):
            for j in range(ow):
                patch = x[:, g * cg:(g + 1) * cg, i * s[0]:i * s[0] + d[0] * (kh - 1) + 1:d[0],
                          j * s[1]:j * s[1] + d[1] * (kw - 1) + 1:d[1]]
                out[:, oc, i, j] = np.sum(patch * w[oc], axis=(1, 2, 3))
    if b is not None:
        out += b[None, :, None, None]
    return out


def conv_transpose_ref(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1,
                       dilation=1):
    """Direct transposed convolution: each input pixel scatters its kernel-weighted copy."""
    s, p, e, d = ((v, v) if isinstance(v, int) else v
                  for v in (stride, padding, output_padding, dilation))
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    full = np.zeros((n, og * groups, (h - 1) * s[0] + d[0] * (kh - 1) + 1 + e[0],
                     (wd - 1) * s[1] + d[1] * (kw - 1) + 1 + e[1]))
    cg = c // groups
    for ic in range(c):
        g = ic // cg
        for i in range(h):
            for j in range(wd):
                for u in range(kh):
                    for v in range(kw):
                        full[:, g * og:(g + 1) * og, i * s[0] + u * d[0], j * s[1] + v * d[1]] \
                            += x[:, ic, i, j, None] * w[ic, :, u, v]
    out = full[:, :, p[0]:full.shape[2] - p[0], p[1]:full.shape[3] - p[1]]
    if b is not None:
        out = out + b[None, :, None, None]
    return out


def interpolate_ref(x, out_hw, mode, align_corners=False, steps=None):
    """Explicit loop over output pixels; ``steps`` (source step per output step) default to
    in/out. Nearest: source ``floor(i * step)`` ('nearest-exact': ``(i + 0.5) * step``);
    bilinear: the 2x2 neighbours of the source point, weighted by distance."""
    n, c, h, w = x.shape
    steps = steps or (h / out_hw[0], w / out_hw[1])

    def source(i, n_in, n_out, step):
        if mode == "nearest":
            return min(math.floor(i * step), n_in - 1)
        if mode == "nearest-exact":
            return min(math.floor((i + 0.5) * step), n_in - 1)
        if align_corners:
            return i * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        return max((i + 0.5) * step - 0.5, 0.0)

    out = np.zeros((n, c) + tuple(out_hw))
    for i in range(out_hw[0]):
        for j in range(out_hw[1]):
            si, sj = source(i, h, out_hw[0], steps[0]), source(j, w, out_hw[1], steps[1])
            if mode != "bilinear":
                out[:, :, i, j] = x[:, :, si, sj]
                continue
            i0, j0 = min(int(si), h - 1), min(int(sj), w - 1)
            i1, j1 = min(i0 + 1, h - 1), min(j0 + 1, w - 1)
            a, b = si - i0, sj - j0
            out[:, :, i, j] = ((1 - a) * ((1 - b) * x[:, :, i0, j0] + b * x[:, :, i0, j1])
                               + a * ((1 - b) * x[:, :, i1, j0] + b * x[:, :, i1, j1]))
    return out


def _pool_len(n, k, s, p, d, ceil):
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    return out


def gn_ref(x, groups, eps):
    g = x.reshape(x.shape[0], groups, -1)
    out = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)
    return out.reshape(x.shape)


def max_pool_ref(x, k, s, p=(0, 0), d=(1, 1), ceil=False):
    n, c, h, w = x.shape
    oh, ow = _pool_len(h, k[0], s[0], p[0], d[0], ceil), _pool_len(w, k[1], s[1], p[1], d[1], ceil)
    out = np.full((n, c, oh, ow), -np.inf)
    for i in range(oh):
        for j in range(ow):
            for a in range(k[0]):
                for b in range(k[1]):
                    r, q = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + b * d[1]
                    if 0 <= r < h and 0 <= q < w:
                        out[:, :, i, j] = np.maximum(out[:, :, i, j], x[:, :, r, q])
    return out


def avg_pool_ref(x, k, s, p=(0, 0), ceil=False, count_include_pad=True, divisor=None):
    n, c, h, w = x.shape
    oh, ow = _pool_len(h, k[0], s[0], p[0], 1, ceil), _pool_len(w, k[1], s[1], p[1], 1, ceil)
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, q0 = i * s[0] - p[0], j * s[1] - p[1]
            r1, q1 = min(r0 + k[0], h + p[0]), min(q0 + k[1], w + p[1])
            size = (r1 - r0) * (q1 - q0)
            r0, q0, r1, q1 = max(r0, 0), max(q0, 0), min(r1, h), min(q1, w)
            total = x[:, :, r0:r1, q0:q1].sum(axis=(2, 3))
            div = divisor or (size if count_include_pad else (r1 - r0) * (q1 - q0))
            out[:, :, i, j] = total / div
    return out


def adaptive_ref(x, size):
    n, c, h, w = x.shape
    out = np.zeros((n, c) + tuple(size))
    for i in range(size[0]):
        for j in range(size[1]):
            r0, r1 = (i * h) // size[0], -(-((i + 1) * h) // size[0])
            q0, q1 = (j * w) // size[1], -(-((j + 1) * w) // size[1])
            out[:, :, i, j] = x[:, :, r0:r1, q0:q1].mean(axis=(2, 3))
    return out


def log_softmax_ref(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def softmax_ref(x, axis):
    return np.exp(log_softmax_ref(x, axis))


_erf = np.vectorize(math.erf)


def reduce_ref(loss, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction](loss)


def nll_ref(logp, t, weight=None, ignore_index=-100, reduction="mean"):
    lp = np.moveaxis(logp, 1, -1)
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    picked = np.take_along_axis(lp, safe[..., None], -1)[..., 0]
    w = (weight[safe] if weight is not None else np.ones(picked.shape)) * valid
    loss = -picked * w
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / w.sum()


def ce_ref(x, t, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """PyTorch's documented cross_entropy, written out in numpy."""
    logp = log_softmax_ref(x, 1)
    c = x.shape[1]
    if t.dtype.kind == "f":  # class probabilities
        t = t * (1 - label_smoothing) + label_smoothing / c
        w = np.ones(c) if weight is None else weight
        per = -(np.moveaxis(logp * t, 1, -1) * w).sum(-1)
        if reduction == "mean":
            return per.sum() / per.size
        return reduce_ref(per, reduction)
    loss = nll_ref(logp, t, weight, ignore_index, reduction)
    if label_smoothing == 0:
        return loss
    valid = t != ignore_index
    w = np.ones(c) if weight is None else weight
    smooth = -(np.moveaxis(logp, 1, -1) * w).sum(-1) * valid
    if reduction == "mean":
        denom = valid.sum() if weight is None else (weight[np.where(valid, t, 0)] * valid).sum()
        smooth = smooth.sum() / denom
    elif reduction == "sum":
        smooth = smooth.sum()
    return (1 - label_smoothing) * loss + label_smoothing / c * smooth


def bn_ref(x, mean=None, var=None, w=None, b=None, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if mean is None:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
    out = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if w is not None:
        out = out * w.reshape(shape) + b.reshape(shape)
    return out


def ln_ref(x, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    out = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    return out if w is None else out * w + b


def bce_ref(x, y, w=None, reduction="mean"):
    loss = -(y * np.maximum(np.log(x), -100) + (1 - y) * np.maximum(np.log(1 - x), -100))
    return reduce_ref(loss if w is None else loss * w, reduction)


def bce_logits_ref(x, y, w=None, pos_weight=None, reduction="mean"):
    p = 1 / (1 + np.exp(-x))
    pw = 1.0 if pos_weight is None else pos_weight
    loss = -(pw * y * np.log(p) + (1 - y) * np.log(1 - p))
    return reduce_ref(loss if w is None else loss * w, reduction)


def torch_fns():
    import torch
    return torch, torch.nn.functional


# ============================================================================= the table
X4 = Inp((2, 3, 7, 6))
TARGET = Fixed([0, 2, 1, 2, 0], "int64")
TARGET_IGN = Fixed([0, -100, 1, 2, -100], "int64")
TARGET_IGN7 = Fixed([0, 7, 1, 2, 7], "int64")
CLASS_W = Fixed([0.2, 1.5, 0.7])
TARGET_4D = Fixed([[[0, 1, 3], [2, -100, 1]], [[3, 3, 0], [-100, 1, 2]]], "int64")
EMB_IDX = Fixed([[1, 3, 0], [3, 3, 2]], "int64")
RUNNING = Fixed(np.zeros(3)), Fixed(np.ones(3))


def _tf():
    return torch_fns()[1]


OPS = [
    # ------------------------------------------------------------------ activations
    Row("relu", F.relu, lambda x: np.maximum(x, 0), [Inp((3, 5))]),
    Row("leaky_relu", F.leaky_relu, lambda x: np.where(x > 0, x, 0.01 * x), [Inp((3, 5))]),
    Row("leaky_relu_slope", lambda x: F.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x),
        [Inp((3, 5))], torch_fn=lambda x: _tf().leaky_relu(x, 0.2)),
    Row("elu", lambda x: F.elu(x, 0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x)),
        [Inp((3, 5))], torch_fn=lambda x: _tf().elu(x, 0.5)),
    Row("softplus", lambda x: F.softplus(x, beta=2.0, threshold=1.0),
        lambda x: np.where(2 * x > 1, x, np.log1p(np.exp(2 * x)) / 2), [Inp((3, 5))],
        torch_fn=lambda x: _tf().softplus(x, beta=2.0, threshold=1.0)),
    Row("hardtanh", lambda x: F.hardtanh(x, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7),
        [Inp((3, 5))], torch_fn=lambda x: _tf().hardtanh(x, -0.5, 0.7)),
    Row("relu6", lambda x: F.relu6(x * 5), lambda x: np.clip(x * 5, 0, 6), [Inp((3, 5))],
        torch_fn=lambda x: _tf().relu6(x * 5)),
    Row("gelu", F.gelu, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), [Inp((3, 5))],
        order=2, torch_fn=lambda x: _tf().gelu(x)),
    Row("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"),
        lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
        [Inp((3, 5))], order=2, torch_fn=lambda x: _tf().gelu(x, approximate="tanh")),
    Row("silu", F.silu, lambda x: x / (1 + np.exp(-x)), [Inp((3, 5))], order=2),
    Row("tanh", F.tanh, np.tanh, [Inp((3, 5))]),
    Row("sigmoid", F.sigmoid, lambda x: 1 / (1 + np.exp(-x)), [Inp((3, 5))]),
    Row("logsigmoid", F.logsigmoid, lambda x: -np.log1p(np.exp(-x)), [Inp((3, 5))], order=2),
    Row("softmax", lambda x: F.softmax(x, dim=1), lambda x: softmax_ref(x, 1), [Inp((3, 5, 2))],
        order=2),
    Row("softmax_dim0", lambda x: F.softmax(x, 0), lambda x: softmax_ref(x, 0), [Inp((4, 3))],
        order=2),
    Row("softmax_last", lambda x: F.softmax(x, -1), lambda x: softmax_ref(x, -1),
        [Inp((2, 3, 4))], order=2),
    Row("log_softmax", lambda x: F.log_softmax(x, dim=-1), lambda x: log_softmax_ref(x, -1),
        [Inp((3, 5))], order=2),
    Row("log_softmax_dim1", lambda x: F.log_softmax(x, 1), lambda x: log_softmax_ref(x, 1),
        [Inp((2, 4, 3))], order=2),
    # ------------------------------------------------------------------ interpolate
    Row("interpolate_nearest_scale2", lambda x: F.interpolate(x, scale_factor=2),
        lambda x: np.repeat(np.repeat(x, 2, axis=2), 2, axis=3), [Inp((2, 3, 4, 5))],
        torch_fn=lambda x: _tf().interpolate(x, scale_factor=2)),
    Row("interpolate_nearest_size", lambda x: F.interpolate(x, size=(4, 9)),
        lambda x: interpolate_ref(x, (4, 9), "nearest"), [X4],
        torch_fn=lambda x: _tf().interpolate(x, size=(4, 9))),
    Row("interpolate_nearest_exact", lambda x: F.interpolate(x, size=(5, 4), mode="nearest-exact"),
        lambda x: interpolate_ref(x, (5, 4), "nearest-exact"), [X4],
        torch_fn=lambda x: _tf().interpolate(x, size=(5, 4), mode="nearest-exact")),
    Row("interpolate_bilinear", lambda x: F.interpolate(x, size=(9, 4), mode="bilinear"),
        lambda x: interpolate_ref(x, (9, 4), "bilinear"), [X4], order=2,
        torch_fn=lambda x: _tf().interpolate(x, size=(9, 4), mode="bilinear")),
    Row("interpolate_bilinear_align_corners",
        lambda x: F.interpolate(x, size=(10, 3), mode="bilinear", align_corners=True),
        lambda x: interpolate_ref(x, (10, 3), "bilinear", align_corners=True), [X4],
        torch_fn=lambda x: _tf().interpolate(x, size=(10, 3), mode="bilinear",
                                             align_corners=True)),
    Row("interpolate_bilinear_scale_factor",  # the source step is 1/scale_factor, not in/out
        lambda x: F.interpolate(x, scale_factor=(1.5, 0.6), mode="bilinear"),
        lambda x: interpolate_ref(x, (10, 3), "bilinear", steps=(1 / 1.5, 1 / 0.6)), [X4],
        torch_fn=lambda x: _tf().interpolate(x, scale_factor=(1.5, 0.6), mode="bilinear")),
    Row("interpolate_bilinear_recompute_scale_factor",
        lambda x: F.interpolate(x, scale_factor=(1.5, 0.6), mode="bilinear",
                                recompute_scale_factor=True),
        lambda x: interpolate_ref(x, (10, 3), "bilinear"), [X4],
        torch_fn=lambda x: _tf().interpolate(x, scale_factor=(1.5, 0.6), mode="bilinear",
                                             recompute_scale_factor=True)),
    # ------------------------------------------------------------------ linear
    Row("linear", F.linear, lambda x, w, b: x @ w.T + b, [Inp((4, 3)), Inp((5, 3)), Inp((5,))],
        order=2),
    Row("linear_3d_nobias", lambda x, w: F.linear(x, w), lambda x, w: x @ w.T,
        [Inp((2, 4, 3)), Inp((5, 3))], order=2),
    # ------------------------------------------------------------------ conv2d
    Row("conv2d_pad1", lambda x, w, b: F.conv2d(x, w, b, padding=1),
        lambda x, w, b: conv_ref(x, w, b, padding=1), [X4, Inp((4, 3, 3, 3)), Inp((4,))],
        order=2, torch_fn=lambda x, w, b: _tf().conv2d(x, w, b, padding=1)),
    Row("conv1d", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=2, dilation=2, groups=2),
        lambda x, w, b: conv_ref(x[:, :, None], w[:, :, None], b, stride=(1, 2),
                                 padding=(0, 2), dilation=(1, 2), groups=2)[:, :, 0],
        [Inp((2, 4, 9)), Inp((6, 2, 3)), Inp((6,))], order=2,
        torch_fn=lambda x, w, b: _tf().conv1d(x, w, b, stride=2, padding=2, dilation=2,
                                              groups=2)),
    Row("conv1d_same_unbatched", lambda x, w: F.conv1d(x, w, padding="same", dilation=3),
        lambda x, w: conv_ref(x[None, :, None], w[:, :, None], padding=((0, 0), (4, 5)),
                              dilation=(1, 3))[0, :, 0],  # 'same': 9 pads, 4 left, 5 right
        [Inp((3, 8)), Inp((4, 3, 4))],
        torch_fn=lambda x, w: _tf().conv1d(x, w, padding="same", dilation=3)),
    Row("conv2d_stride_dilation", lambda x, w: F.conv2d(x, w, stride=2, padding=(1, 2),
                                                        dilation=(2, 1)),
        lambda x, w: conv_ref(x, w, stride=2, padding=(1, 2), dilation=(2, 1)),
        [X4, Inp((4, 3, 2, 3))], order=2,
        torch_fn=lambda x, w: _tf().conv2d(x, w, stride=2, padding=(1, 2), dilation=(2, 1))),
    Row("conv2d_groups", lambda x, w, b: F.conv2d(x, w, b, stride=(1, 2), groups=2),
        lambda x, w, b: conv_ref(x, w, b, stride=(1, 2), groups=2),
        [Inp((2, 4, 5, 6)), Inp((6, 2, 3, 2)), Inp((6,))], order=2),
    Row("conv2d_depthwise_dilated", lambda x, w: F.conv2d(x, w, padding=2, dilation=2,
                                                          groups=3),
        lambda x, w: conv_ref(x, w, padding=2, dilation=2, groups=3), [X4, Inp((3, 1, 3, 3))],
        order=2),
    Row("conv2d_same_even", lambda x, w: F.conv2d(x, w, padding="same", dilation=(1, 3)),
        lambda x, w: conv_ref(x, w, padding=((1, 2), (3, 3)), dilation=(1, 3)),
        [X4, Inp((2, 3, 4, 3))], torch_fn=lambda x, w: _tf().conv2d(x, w, padding="same",
                                                                    dilation=(1, 3))),
    Row("conv_transpose2d", lambda x, w, b: F.conv_transpose2d(x, w, b),
        lambda x, w, b: conv_transpose_ref(x, w, b), [X4, Inp((3, 4, 3, 2)), Inp((4,))],
        order=2, torch_fn=lambda x, w, b: _tf().conv_transpose2d(x, w, b)),
    Row("conv_transpose2d_stride_output_padding",
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 3), padding=(1, 2),
                                           output_padding=(1, 2)),
        lambda x, w, b: conv_transpose_ref(x, w, b, (2, 3), (1, 2), (1, 2)),
        [X4, Inp((3, 2, 3, 4)), Inp((2,))], order=2,
        torch_fn=lambda x, w, b: _tf().conv_transpose2d(x, w, b, stride=(2, 3), padding=(1, 2),
                                                        output_padding=(1, 2))),
    Row("conv_transpose2d_groups_dilation",
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=3, padding=2, output_padding=2,
                                           groups=2, dilation=2),
        lambda x, w, b: conv_transpose_ref(x, w, b, 3, 2, 2, 2, 2),
        [Inp((2, 4, 3, 4)), Inp((4, 3, 3, 2)), Inp((6,))], order=2,
        torch_fn=lambda x, w, b: _tf().conv_transpose2d(x, w, b, stride=3, padding=2,
                                                        output_padding=2, groups=2,
                                                        dilation=2)),
    Row("conv_transpose2d_output_padding_past_reach",  # e > padding: zero rows at the end
        lambda x, w: F.conv_transpose2d(x, w, output_padding=(1, 2), dilation=3),
        lambda x, w: conv_transpose_ref(x, w, output_padding=(1, 2), dilation=3),
        [X4, Inp((3, 2, 2, 2))],
        torch_fn=lambda x, w: _tf().conv_transpose2d(x, w, output_padding=(1, 2), dilation=3)),
    Row("conv_transpose2d_depthwise_unbatched",
        lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, groups=3),
        lambda x, w: conv_transpose_ref(x[None], w, stride=2, padding=1, groups=3)[0],
        [Inp((3, 4, 5)), Inp((3, 1, 3, 3))], order=2,
        torch_fn=lambda x, w: _tf().conv_transpose2d(x, w, stride=2, padding=1, groups=3)),
    Row("conv2d_valid_1x1", lambda x, w: F.conv2d(x, w, padding="valid"),
        lambda x, w: conv_ref(x, w), [X4, Inp((5, 3, 1, 1))]),
    Row("conv2d_unbatched", lambda x, w: F.conv2d(x, w, padding=1),
        lambda x, w: conv_ref(x[None], w, padding=1)[0], [Inp((3, 5, 4)), Inp((2, 3, 3, 3))]),
    # ------------------------------------------------------------------ pooling
    Row("max_pool2d", lambda x: F.max_pool2d(x, 2), lambda x: max_pool_ref(x, (2, 2), (2, 2)),
        [Inp((2, 3, 6, 5), "distinct")], torch_fn=lambda x: _tf().max_pool2d(x, 2)),
    Row("max_pool2d_overlap_pad", lambda x: F.max_pool2d(x, 3, 1, 1) ** 2,
        lambda x: max_pool_ref(x, (3, 3), (1, 1), (1, 1)) ** 2, [Inp((2, 2, 5, 6), "distinct")],
        order=2, torch_fn=lambda x: _tf().max_pool2d(x, 3, 1, 1) ** 2),
    Row("max_pool2d_ceil_dilation", lambda x: F.max_pool2d(x, (2, 3), (2, 2), (1, 0), (2, 1),
                                                           ceil_mode=True),
        lambda x: max_pool_ref(x, (2, 3), (2, 2), (1, 0), (2, 1), ceil=True),
        [Inp((2, 2, 7, 8), "distinct")],
        torch_fn=lambda x: _tf().max_pool2d(x, (2, 3), (2, 2), (1, 0), (2, 1), ceil_mode=True)),
    Row("max_pool1d", lambda x: F.max_pool1d(x, 3, 2, 1, 2, ceil_mode=True),
        lambda x: max_pool_ref(x[:, :, None], (1, 3), (1, 2), (0, 1), (1, 2), ceil=True)[:, :, 0],
        [Inp((2, 3, 12), "distinct")],
        torch_fn=lambda x: _tf().max_pool1d(x, 3, 2, 1, 2, ceil_mode=True)),
    Row("avg_pool1d_exclude_pad", lambda x: F.avg_pool1d(x, 3, 2, 1, True, False),
        lambda x: avg_pool_ref(x[:, :, None], (1, 3), (1, 2), (0, 1), ceil=True,
                               count_include_pad=False)[:, :, 0], [Inp((2, 3, 10))],
        torch_fn=lambda x: _tf().avg_pool1d(x, 3, 2, 1, True, False)),
    Row("adaptive_avg_pool1d_unbatched", lambda x: F.adaptive_avg_pool1d(x, 4),
        lambda x: adaptive_ref(x[None, :, None], (1, 4))[0, :, 0], [Inp((3, 10))],
        torch_fn=lambda x: _tf().adaptive_avg_pool1d(x, 4)),
    Row("avg_pool2d", lambda x: F.avg_pool2d(x, 2) ** 2,
        lambda x: avg_pool_ref(x, (2, 2), (2, 2)) ** 2, [Inp((2, 3, 6, 5))], order=2),
    Row("avg_pool2d_pad_ceil", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
        lambda x: avg_pool_ref(x, (3, 3), (2, 2), (1, 1), ceil=True), [Inp((2, 2, 6, 7))],
        torch_fn=lambda x: _tf().avg_pool2d(x, 3, 2, 1, ceil_mode=True)),
    Row("avg_pool2d_exclude_pad", lambda x: F.avg_pool2d(x, (3, 2), (2, 1), (1, 1), True, False),
        lambda x: avg_pool_ref(x, (3, 2), (2, 1), (1, 1), True, False), [Inp((2, 2, 6, 5))],
        torch_fn=lambda x: _tf().avg_pool2d(x, (3, 2), (2, 1), (1, 1), True, False)),
    Row("avg_pool2d_divisor", lambda x: F.avg_pool2d(x, 2, 1, divisor_override=3),
        lambda x: avg_pool_ref(x, (2, 2), (1, 1), divisor=3), [Inp((1, 2, 4, 5))]),
    Row("adaptive_avg_pool2d_divisible", lambda x: F.adaptive_avg_pool2d(x, (3, 2)) ** 2,
        lambda x: adaptive_ref(x, (3, 2)) ** 2, [Inp((2, 3, 6, 4))], order=2),
    Row("adaptive_avg_pool2d_general", lambda x: F.adaptive_avg_pool2d(x, (4, 3)) ** 2,
        lambda x: adaptive_ref(x, (4, 3)) ** 2, [Inp((2, 2, 7, 5))], order=2,
        torch_fn=lambda x: _tf().adaptive_avg_pool2d(x, (4, 3)) ** 2),
    Row("adaptive_avg_pool2d_none", lambda x: F.adaptive_avg_pool2d(x, (None, 1)),
        lambda x: adaptive_ref(x, (5, 1)), [Inp((1, 2, 5, 3))]),
    # ------------------------------------------------------------------ normalization
    Row("batch_norm_train", lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, True),
        lambda x, w, b, rm, rv: bn_ref(x, w=w, b=b),
        [Inp((4, 3, 2, 3)), Inp((3,)), Inp((3,)), *RUNNING], order=2,
        torch_fn=lambda x, w, b, rm, rv: _tf().batch_norm(x, rm.clone(), rv.clone(), w, b,
                                                          True)),
    Row("batch_norm_1d_no_stats", lambda x: F.batch_norm(x, None, None, training=True),
        lambda x: bn_ref(x), [Inp((5, 3))], order=2),
    Row("batch_norm_eval", lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, False),
        lambda x, w, b, rm, rv: bn_ref(x, rm, rv, w, b),
        [Inp((4, 3, 5)), Inp((3,)), Inp((3,)), Fixed([0.1, -0.2, 0.3]),
         Fixed([0.5, 1.5, 2.0])]),
    Row("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b, eps=1e-3),
        lambda x, w, b: gn_ref(x, 2, 1e-3) * w[None, :, None] + b[None, :, None],
        [Inp((3, 4, 5)), Inp((4,)), Inp((4,))], order=2,
        torch_fn=lambda x, w, b: _tf().group_norm(x, 2, w, b, eps=1e-3)),
    Row("layer_norm", lambda x, w, b: F.layer_norm(x, (4,), w, b),
        lambda x, w, b: ln_ref(x, 1, w, b), [Inp((2, 3, 4)), Inp((4,)), Inp((4,))], order=2),
    Row("layer_norm_2d_noaffine", lambda x: F.layer_norm(x, [3, 4]), lambda x: ln_ref(x, 2),
        [Inp((2, 3, 4))], order=2),
    # ------------------------------------------------------------------ embedding, pad, one_hot
    Row("embedding", lambda w, i: F.embedding(i, w) ** 2, lambda w, i: w[i] ** 2,
        [Inp((4, 3)), EMB_IDX], order=2),
    # the padding row's gradient is zero by definition, not the derivative: no finite differences
    Row("embedding_padding_idx", lambda w, i: F.embedding(i, w, padding_idx=3) ** 2,
        lambda w, i: w[i] ** 2, [Inp((4, 3)), EMB_IDX], fd=False,
        torch_fn=lambda w, i: _tf().embedding(i, w, padding_idx=3) ** 2),
    # gradient rows divided by their lookup counts: a convention, not the derivative
    Row("embedding_scale_grad_by_freq",
        lambda w, i: F.embedding(i, w, padding_idx=3, scale_grad_by_freq=True) ** 2,
        lambda w, i: w[i] ** 2, [Inp((4, 3)), EMB_IDX], fd=False,
        torch_fn=lambda w, i: _tf().embedding(i, w, padding_idx=3,
                                              scale_grad_by_freq=True) ** 2),
    Row("pad_constant", lambda x: F.pad(x, (1, 2, 0, 1), value=0.5) ** 2,
        lambda x: np.pad(x, ((0, 0), (0, 1), (1, 2)), constant_values=0.5) ** 2,
        [Inp((2, 3, 4))], order=2),
    Row("pad_constant_crop", lambda x: F.pad(x, (-1, 2, 1, -2)),
        lambda x: np.pad(x, ((0, 0), (1, 0), (0, 2)))[:, :-2, 1:], [Inp((2, 4, 5))]),
    Row("pad_reflect", lambda x: F.pad(x, (2, 1, 1, 3), mode="reflect"),
        lambda x: np.pad(x, ((0, 0), (0, 0), (1, 3), (2, 1)), mode="reflect"),
        [Inp((1, 2, 4, 5))]),
    Row("pad_replicate", lambda x: F.pad(x, (2, 1), mode="replicate"),
        lambda x: np.pad(x, ((0, 0), (0, 0), (2, 1)), mode="edge"), [Inp((2, 3, 4))]),
    Row("pad_circular", lambda x: F.pad(x, (1, 2, 2, 1), mode="circular"),
        lambda x: np.pad(x, ((0, 0), (0, 0), (2, 1), (1, 2)), mode="wrap"),
        [Inp((1, 2, 3, 4))], torch_fn=lambda x: _tf().pad(x, (1, 2, 2, 1), mode="circular")),
    # as PyTorch: replicate wider than the dim, negative pads crop (circular crops first)
    Row("pad_replicate_wide_crop", lambda x: F.pad(x, (6, -1), mode="replicate"),
        lambda x: np.pad(x, ((0, 0), (0, 0), (6, 0)), mode="edge")[..., :-1],
        [Inp((2, 3, 4))]),
    Row("pad_reflect_crop", lambda x: F.pad(x, (-1, 3, 2, -1), mode="reflect"),
        lambda x: np.pad(x, ((0, 0), (0, 0), (2, 0), (0, 3)), mode="reflect")[:, :, :-1, 1:],
        [Inp((1, 2, 4, 5))]),
    Row("pad_circular_crop", lambda x: F.pad(x, (-1, 2), mode="circular"),
        lambda x: np.pad(x[..., 1:], ((0, 0), (0, 0), (0, 2)), mode="wrap"),
        [Inp((2, 3, 4))], torch_fn=lambda x: _tf().pad(x, (-1, 2), mode="circular")),
    Row("one_hot", lambda i: F.one_hot(i, 5), lambda i: np.eye(5, dtype=np.int64)[i],
        [Fixed([[0, 4], [2, 2]], "int64")], grad=False),
    # ------------------------------------------------------------------ losses
    Row("cross_entropy", lambda x, t: F.cross_entropy(x, t), ce_ref, [Inp((5, 3)), TARGET],
        order=2, torch_fn=lambda x, t: _tf().cross_entropy(x, t)),
    Row("cross_entropy_weight_ignore", lambda x, t, w: F.cross_entropy(x, t, w),
        lambda x, t, w: ce_ref(x, t, w), [Inp((5, 3)), TARGET_IGN, CLASS_W], order=2,
        torch_fn=lambda x, t, w: _tf().cross_entropy(x, t, w)),
    Row("cross_entropy_smoothing", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.2),
        lambda x, t: ce_ref(x, t, label_smoothing=0.2), [Inp((5, 3)), TARGET_IGN],
        torch_fn=lambda x, t: _tf().cross_entropy(x, t, label_smoothing=0.2)),
    Row("cross_entropy_all_options",
        lambda x, t, w: F.cross_entropy(x, t, w, ignore_index=7, label_smoothing=0.3),
        lambda x, t, w: ce_ref(x, t, w, 7, label_smoothing=0.3), [Inp((5, 3)), TARGET_IGN7,
                                                                   CLASS_W], order=2,
        torch_fn=lambda x, t, w: _tf().cross_entropy(x, t, w, ignore_index=7,
                                                     label_smoothing=0.3)),
    Row("cross_entropy_sum_smoothing_weight",
        lambda x, t, w: F.cross_entropy(x, t, w, reduction="sum", label_smoothing=0.1),
        lambda x, t, w: ce_ref(x, t, w, reduction="sum", label_smoothing=0.1),
        [Inp((5, 3)), TARGET_IGN, CLASS_W],
        torch_fn=lambda x, t, w: _tf().cross_entropy(x, t, w, reduction="sum",
                                                     label_smoothing=0.1)),
    Row("cross_entropy_none_4d", lambda x, t: F.cross_entropy(x, t, reduction="none",
                                                              label_smoothing=0.1),
        lambda x, t: ce_ref(x, t, reduction="none", label_smoothing=0.1),
        [Inp((2, 4, 2, 3)), TARGET_4D],
        torch_fn=lambda x, t: _tf().cross_entropy(x, t, reduction="none", label_smoothing=0.1)),
    Row("cross_entropy_mean_4d_weight", lambda x, t, w: F.cross_entropy(x, t, w),
        lambda x, t, w: ce_ref(x, t, w), [Inp((2, 4, 2, 3)), TARGET_4D,
                                          Fixed([1.0, 0.5, 2.0, 0.25])]),
    Row("cross_entropy_unbatched", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
        lambda x, t: ce_ref(x[None], t[None], label_smoothing=0.1), [Inp((4,)),
                                                                     Fixed(2, "int64")]),
    Row("cross_entropy_probs", lambda x, p, w: F.cross_entropy(x, p, w, label_smoothing=0.25),
        lambda x, p, w: ce_ref(x, p, w, label_smoothing=0.25),
        [Inp((4, 3)), Fixed([[0.2, 0.3, 0.5], [1, 0, 0], [0, 0.5, 0.5], [0.1, 0.1, 0.8]]),
         CLASS_W], order=2,
        torch_fn=lambda x, p, w: _tf().cross_entropy(x, p, w, label_smoothing=0.25)),
    Row("cross_entropy_probs_none_grad_target",
        lambda x, p: F.cross_entropy(x, p, reduction="none"),
        lambda x, p: ce_ref(x, p, reduction="none"), [Inp((3, 4, 2)), Inp((3, 4, 2), "prob")]),
    Row("nll_loss", lambda x, t, w: F.nll_loss(F.log_softmax(x, 1), t, w),
        lambda x, t, w: nll_ref(log_softmax_ref(x, 1), t, w), [Inp((5, 3)), TARGET_IGN, CLASS_W],
        order=2),
    Row("nll_loss_sum_ignore", lambda x, t: F.nll_loss(x, t, ignore_index=1, reduction="sum"),
        lambda x, t: nll_ref(x, t, None, 1, "sum"), [Inp((5, 3)), TARGET],
        torch_fn=lambda x, t: _tf().nll_loss(x, t, ignore_index=1, reduction="sum")),
    Row("nll_loss_none", lambda x, t: F.nll_loss(x, t, reduction="none"),
        lambda x, t: nll_ref(x, t, reduction="none"), [Inp((5, 3)), TARGET_IGN]),
    Row("mse_loss", F.mse_loss, lambda x, y: np.mean((x - y) ** 2), [Inp((3, 4)), Inp((3, 4))],
        order=2),
    Row("mse_loss_weighted_sum", lambda x, y, w: F.mse_loss(x, y, reduction="sum", weight=w),
        lambda x, y, w: np.sum(w * (x - y) ** 2), [Inp((3, 4)), Inp((3, 4)),
                                                    Inp((3, 4), "positive")]),
    Row("l1_loss", lambda x, y: F.l1_loss(x, y, reduction="none"), lambda x, y: np.abs(x - y),
        [Inp((3, 4)), Inp((3, 4))]),
    Row("l1_loss_weighted_mean", lambda x, y, w: F.l1_loss(x, y, weight=w),
        lambda x, y, w: np.sum(w * np.abs(x - y)) / np.sum(w),
        [Inp((3, 4)), Inp((3, 4)), Fixed(np.arange(1.0, 13.0).reshape(3, 4))]),
    Row("smooth_l1_loss", lambda x, y: F.smooth_l1_loss(x, y, reduction="none", beta=0.5),
        lambda x, y: np.where(np.abs(x - y) < 0.5, (x - y) ** 2, np.abs(x - y) - 0.25),
        [Inp((3, 4)), Inp((3, 4))],
        torch_fn=lambda x, y: _tf().smooth_l1_loss(x, y, reduction="none", beta=0.5)),
    Row("huber_loss_weighted", lambda x, y, w: F.huber_loss(x, y, delta=0.7, weight=w),
        lambda x, y, w: np.mean(w * np.where(np.abs(x - y) < 0.7, 0.5 * (x - y) ** 2,
                                             0.7 * (np.abs(x - y) - 0.35))),
        [Inp((3, 4)), Inp((3, 4)), Fixed(np.arange(1.0, 13.0).reshape(3, 4))],
        torch_fn=lambda x, y, w: _tf().huber_loss(x, y, delta=0.7, weight=w)),
    Row("kl_div_batchmean", lambda x, t: F.kl_div(x, t, reduction="batchmean"),
        lambda x, t: np.sum(t * (np.log(t) - x)) / 3, [Inp((3, 4)), Inp((3, 4), "prob")],
        torch_fn=lambda x, t: _tf().kl_div(x, t, reduction="batchmean")),
    Row("kl_div_log_target", lambda x, t: F.kl_div(x, t, reduction="sum", log_target=True),
        lambda x, t: np.sum(np.exp(t) * (t - x)), [Inp((3, 4)), Inp((3, 4))], order=2,
        torch_fn=lambda x, t: _tf().kl_div(x, t, reduction="sum", log_target=True)),
    Row("normalize", lambda x: F.normalize(x, dim=-1),
        lambda x: x / np.sqrt(np.sum(x * x, -1, keepdims=True)), [Inp((3, 4))], order=2,
        torch_fn=lambda x: _tf().normalize(x, dim=-1)),
    Row("binary_cross_entropy", F.binary_cross_entropy, bce_ref,
        [Inp((3, 4), "prob"), Inp((3, 4), "prob")], order=2,
        torch_fn=lambda x, y: _tf().binary_cross_entropy(x, y)),
    Row("binary_cross_entropy_weight_sum",
        lambda x, y, w: F.binary_cross_entropy(x, y, w, reduction="sum"),
        lambda x, y, w: bce_ref(x, y, w, "sum"), [Inp((3, 4), "prob"), Inp((3, 4), "prob"),
                                                   Inp((4,), "positive")]),
    Row("bce_with_logits", F.binary_cross_entropy_with_logits, bce_logits_ref,
        [Inp((3, 4)), Inp((3, 4), "prob")], order=2,
        torch_fn=lambda x, y: _tf().binary_cross_entropy_with_logits(x, y)),
    Row("bce_with_logits_pos_weight",
        lambda x, y, w, pw: F.binary_cross_entropy_with_logits(x, y, w, reduction="none",
                                                               pos_weight=pw),
        lambda x, y, w, pw: bce_logits_ref(x, y, w, pw, "none"),
        [Inp((3, 4)), Inp((3, 4), "prob"), Inp((3, 1), "positive"), Inp((4,), "positive")],
        order=2),
    Row("bce_with_logits_pos_weight_mean",  # PyTorch differentiates neither weight
        lambda x, y, w, pw: F.binary_cross_entropy_with_logits(x, y, w, pos_weight=pw),
        lambda x, y, w, pw: bce_logits_ref(x, y, w, pw),
        [Inp((3, 4)), Inp((3, 4), "prob"), Fixed([[0.5], [2.0], [1.0]]),
         Fixed([0.5, 1.0, 3.0, 2.0])],
        torch_fn=lambda x, y, w, pw: _tf().binary_cross_entropy_with_logits(x, y, w,
                                                                            pos_weight=pw)),
]
_names = [r.name for r in OPS]
assert len(set(_names)) == len(_names), "row names must be unique"


# ============================================================================= 1. forward
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in OPS])
def test_forward(row, dtype):
    rng = rng_for(row.name, "fwd")
    arrays = [make_array(s, dtype, rng) for s in row.inputs]
    out = row.fn(*[hf.tensor(a) for a in arrays])
    ref = np.asarray(row.ref(*[a.astype(np.float64) if a.dtype.kind == "f" else a
                               for a in arrays]))
    assert tuple(out.shape) == ref.shape
    got = to_numpy(out)
    if ref.dtype.kind == "f":
        assert dtype_name(out) == dtype
        rtol, atol = row.tol32 if dtype == F32 else (1e-10, 1e-12)
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)
    else:
        assert dtype_name(out) == str(ref.dtype)
        np.testing.assert_array_equal(got, ref)


# ============================================================================= 2. shape inference
@pytest.fixture
def infer_log(monkeypatch):
    log = []
    original = EagerInterpreter.apply

    def recording_apply(self, op, args, attrs):
        try:
            inferred = op.infer(*args, **attrs)
        except Exception:  # noqa: BLE001 - list args: the interpreter converts and recurses
            inferred = None
        out = original(self, op, args, attrs)
        if inferred is not None:
            log.append((op.name, tuple(inferred[0]), inferred[1], tuple(out.shape), out.dtype))
        return out

    monkeypatch.setattr(EagerInterpreter, "apply", recording_apply)
    return log


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in OPS])
def test_shape_inference(row, infer_log):
    rng = rng_for(row.name, "infer")
    ts = [hf.tensor(make_array(s, F64, rng)) for s in row.inputs]
    diff = [t for t, s in zip(ts, row.inputs) if s.differentiable]
    for t in diff if row.grad else ():
        t.requires_grad_()
    out = row.fn(*ts)
    if row.grad:
        hf.autograd.grad((out * 1.5).sum(), diff, allow_unused=True)
    bad = [f"{name}: infer {ishape} {idt}, actual {oshape} {odt}"
           for name, ishape, idt, oshape, odt in infer_log if (ishape, idt) != (oshape, odt)]
    assert infer_log and not bad, "\n".join(bad)


# ============================================================================= 3. gradients
EPS = 1e-6
GRAD_ROWS = [r for r in OPS if r.fd]


def _grad_setup(row, tag):
    rng = rng_for(row.name, tag)
    arrays = [make_array(s, F64, rng) for s in row.inputs]
    diff = [i for i, s in enumerate(row.inputs) if s.differentiable]
    with hf.no_grad():
        shape = row.fn(*[hf.tensor(a) for a in arrays]).shape
    return arrays, diff, np.asarray(rng.standard_normal(shape)), rng


def _grads(row, arrays, diff, weight, create_graph=False):
    ts = [hf.tensor(a) for a in arrays]
    xs = [ts[i].requires_grad_() for i in diff]
    loss = (row.fn(*ts) * hf.tensor(weight)).sum()
    return xs, list(hf.autograd.grad(loss, xs, create_graph=create_graph, allow_unused=True))


def _objective(row, arrays, weight):
    with hf.no_grad():
        return float(np.sum(to_numpy(row.fn(*[hf.tensor(a) for a in arrays])) * weight))


def _shifted(arrays, diff, vs, s):
    out = list(arrays)
    for i, v in zip(diff, vs):
        out[i] = arrays[i] + s * v
    return out


def _close(a, n, rtol, atol):
    return abs(a - n) <= atol + rtol * max(abs(a), abs(n), 1.0)


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in GRAD_ROWS])
def test_grad(row):
    arrays, diff, weight, rng = _grad_setup(row, "grad")
    xs, gs = _grads(row, arrays, diff, weight)
    for x, g in zip(xs, gs):
        assert g is not None and g.shape == x.shape and dtype_name(g) == F64
    vs = [rng.standard_normal(arrays[i].shape) for i in diff]
    analytic = sum(float(np.sum(to_numpy(g) * v)) for g, v in zip(gs, vs))
    numeric = (_objective(row, _shifted(arrays, diff, vs, EPS), weight)
               - _objective(row, _shifted(arrays, diff, vs, -EPS), weight)) / (2 * EPS)
    assert _close(analytic, numeric, *row.gtol), f"{analytic!r} vs finite differences {numeric!r}"


ORDER2_ROWS = [r for r in OPS if r.order >= 2]


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in ORDER2_ROWS])
def test_grad_second_order(row):
    arrays, diff, weight, rng = _grad_setup(row, "grad2")
    us = [rng.standard_normal(arrays[i].shape) for i in diff]
    vs = [rng.standard_normal(arrays[i].shape) for i in diff]

    def projected(arrs):  # sum_i <grad_i(x), u_i>
        _, gs = _grads(row, arrs, diff, weight)
        return sum(float(np.sum(to_numpy(g) * u)) for g, u in zip(gs, us))

    xs, gs = _grads(row, arrays, diff, weight, create_graph=True)
    terms = [(g * hf.tensor(u)).sum() for g, u in zip(gs, us) if g.requires_grad]
    hs = hf.autograd.grad(sum(terms[1:], terms[0]), xs, allow_unused=True) if terms else []
    analytic = sum(0.0 if h is None else float(np.sum(to_numpy(h) * v)) for h, v in zip(hs, vs))
    numeric = (projected(_shifted(arrays, diff, vs, EPS))
               - projected(_shifted(arrays, diff, vs, -EPS))) / (2 * EPS)
    rtol, atol = row.gtol
    assert _close(analytic, numeric, rtol * 10, atol * 10), \
        f"second order: {analytic!r} vs finite differences {numeric!r}"


# ============================================================================= 4. PyTorch oracle
TORCH_ROWS = [r for r in OPS if r.torch_fn is not None]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in TORCH_ROWS])
def test_torch_oracle(row):
    torch = pytest.importorskip("torch")
    arrays, diff, weight, _ = _grad_setup(row, "torch")
    _, gs = _grads(row, arrays, diff, weight)
    with hf.no_grad():
        out = to_numpy(row.fn(*[hf.tensor(a) for a in arrays]))
    tts = [torch.tensor(a) for a in arrays]
    for i in diff:
        tts[i].requires_grad_()
    tout = row.torch_fn(*tts)
    np.testing.assert_allclose(out, tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    tgs = torch.autograd.grad((tout * torch.tensor(weight)).sum(), [tts[i] for i in diff])
    for g, tg in zip(gs, tgs):
        np.testing.assert_allclose(to_numpy(g), tg.numpy(), rtol=1e-9, atol=1e-12)


# ============================================================================= dropout
def test_dropout_mask_scale_and_seed():
    x = hf.ones(200, 50, requires_grad=True)
    hf.manual_seed(3)
    y = F.dropout(x, 0.3)
    hf.manual_seed(3)
    y2 = F.dropout(x, 0.3)
    out = to_numpy(y)
    np.testing.assert_array_equal(out, to_numpy(y2))
    kept = out != 0
    np.testing.assert_allclose(out[kept], 1 / 0.7, rtol=1e-6)
    assert abs(1 - kept.mean() - 0.3) < 0.02
    y.sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), out)  # d/dx (x * mask) = mask


def test_dropout_eval_identity_and_extremes():
    x = hf.randn(4, 5)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    np.testing.assert_array_equal(to_numpy(F.dropout(x, 1.0)), np.zeros((4, 5)))
    y = hf.ones(100, dtype="float64")
    out = F.dropout(y, 0.5, inplace=True)
    assert out is y and set(np.unique(to_numpy(y))) <= {0.0, 2.0}
    with pytest.raises(ValueError, match="dropout"):
        F.dropout(x, 1.5)


def test_dropout_keeps_dtype():
    assert F.dropout(hf.ones(8, dtype="float64"), 0.5).dtype == hf.float64
    assert F.dropout(hf.ones(8, dtype="float16"), 0.5).dtype == hf.float16


# ============================================================================= batch_norm state
def test_batch_norm_updates_running_stats_like_pytorch():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 3, 2, 2)) * 2 + 1
    rm, rv = hf.zeros(3, dtype="float64"), hf.ones(3, dtype="float64")
    xt = hf.tensor(x, requires_grad=True)
    F.batch_norm(xt, rm, rv, training=True, momentum=0.2)
    mean, var_unbiased = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3), ddof=1)
    np.testing.assert_allclose(to_numpy(rm), 0.2 * mean, rtol=1e-12)
    np.testing.assert_allclose(to_numpy(rv), 0.8 + 0.2 * var_unbiased, rtol=1e-12)
    assert not rm.requires_grad and rm.grad_fn is None  # updated without recording a graph
    # eval mode then normalizes with exactly those statistics
    out = F.batch_norm(hf.tensor(x), rm, rv, training=False)
    np.testing.assert_allclose(to_numpy(out), bn_ref(x, to_numpy(rm), to_numpy(rv)), rtol=1e-10)


def test_batch_norm_running_stats_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 4, 3))
    rm, rv = hf.tensor(np.full(4, 0.5)), hf.tensor(np.full(4, 2.0))
    trm, trv = torch.full((4,), 0.5, dtype=torch.float64), torch.full((4,), 2.0,
                                                                        dtype=torch.float64)
    for _ in range(3):
        F.batch_norm(hf.tensor(x), rm, rv, training=True, momentum=0.3)
        torch.nn.functional.batch_norm(torch.tensor(x), trm, trv, training=True, momentum=0.3)
    np.testing.assert_allclose(to_numpy(rm), trm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(to_numpy(rv), trv.numpy(), rtol=1e-12)


def test_batch_norm_needs_more_than_one_value_per_channel():
    with pytest.raises(ValueError, match="batch_norm.*more than 1 value"):
        F.batch_norm(hf.randn(1, 3), None, None, training=True)
    with pytest.raises(ValueError, match="batch_norm.*running_mean"):
        F.batch_norm(hf.randn(2, 3), None, None, training=False)


# ============================================================================= stability
BIG = np.array([[1e4, -1e4, 0.0], [-1e4, 1e4, 1e4], [0.0, 0.0, -1e4]])


def _finite_loss_and_grad(fn, x):
    t = hf.tensor(x, requires_grad=True)
    loss = fn(t)
    loss.sum().backward()
    assert np.all(np.isfinite(to_numpy(loss))), to_numpy(loss)
    assert np.all(np.isfinite(to_numpy(t.grad))), to_numpy(t.grad)
    return to_numpy(loss), to_numpy(t.grad)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_extreme_logits_stay_finite(dtype):
    x = BIG.astype(dtype)
    target = hf.tensor([1, 0, 2])
    out, _ = _finite_loss_and_grad(lambda t: F.log_softmax(t, 1), x)
    np.testing.assert_allclose(out[1], [-2e4 - math.log(2), -math.log(2), -math.log(2)],
                               rtol=1e-6)
    _finite_loss_and_grad(lambda t: F.softmax(t, 1), x)
    loss, _ = _finite_loss_and_grad(lambda t: F.cross_entropy(t, target), x)
    np.testing.assert_allclose(loss, (5e4 + 2 * math.log(2)) / 3, rtol=1e-6)
    _finite_loss_and_grad(lambda t: F.cross_entropy(t, target, label_smoothing=0.1,
                                                    reduction="sum"), x)
    probs = hf.tensor(np.full((3, 3), 1 / 3).astype(dtype))
    _finite_loss_and_grad(lambda t: F.cross_entropy(t, probs), x)
    y = hf.tensor(np.array([[1.0, 0.0, 0.5]] * 3).astype(dtype))
    loss, _ = _finite_loss_and_grad(lambda t: F.binary_cross_entropy_with_logits(
        t, y, reduction="none", pos_weight=hf.tensor(np.full(3, 2.0).astype(dtype))), x)
    assert loss[0, 0] == 0 and loss[0, 1] == 0  # confident and right
    np.testing.assert_allclose(loss[1, 0], 2e4, rtol=1e-6)  # confident and wrong: linear
    _finite_loss_and_grad(F.logsigmoid, x)


def test_binary_cross_entropy_at_zero_and_one():
    x = hf.tensor([0.0, 1.0, 0.0, 1.0], dtype="float64", requires_grad=True)
    y = hf.tensor([0.0, 1.0, 1.0, 0.0], dtype="float64")
    loss = F.binary_cross_entropy(x, y, reduction="none")
    np.testing.assert_array_equal(to_numpy(loss), [0.0, 0.0, 100.0, 100.0])
    loss.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [0.0, 0.0, -1e12, 1e12])  # PyTorch's clamp


# ============================================================================= misc semantics
def test_max_pool2d_return_indices_ties_and_nans_follow_pytorch():
    torch = pytest.importorskip("torch")
    ties = np.array([[[[1.0, 3.0, 3.0, 0.0], [3.0, 2.0, 1.0, 3.0], [0.0, 0.0, 5.0, 5.0],
                       [5.0, 5.0, 1.0, 1.0]]]])
    nans = np.array([[[[1.0, math.nan, 3.0, math.nan], [math.nan, 2.0, 5.0, 1.0],
                       [0.0, 1.0, 2.0, 3.0], [4.0, math.nan, math.nan, -math.inf]]]])
    cases = ((2,), (3, 1, 1), ((2, 3), (1, 2), (1, 1), 1, True), (2, 1))
    for x, args in [(x, a) for x in (ties, nans) for a in cases]:
        xt = hf.tensor(x, requires_grad=True)
        out, idx = F.max_pool2d(xt, *args, return_indices=True)
        tx = torch.tensor(x, requires_grad=True)
        tout, tidx = torch.nn.functional.max_pool2d(tx, *args, return_indices=True)
        np.testing.assert_array_equal(to_numpy(idx), tidx.numpy())
        np.testing.assert_array_equal(to_numpy(out), tout.detach().numpy())
        assert idx.dtype == hf.int64
        out.sum().backward()
        tout.sum().backward()
        np.testing.assert_array_equal(to_numpy(xt.grad), tx.grad.numpy())


def test_max_pool2d_with_minus_inf_never_picks_padding():
    x = hf.tensor(np.full((1, 1, 3, 3), -np.inf), requires_grad=True)
    out, idx = F.max_pool2d(x, 3, 1, 1, return_indices=True)
    assert to_numpy(idx).min() >= 0 and to_numpy(idx)[0, 0, 0, 0] == 0
    out.sum().backward()
    assert to_numpy(x.grad).sum() == 9


def test_unbatched_pooling_and_one_hot_inference():
    x = hf.randn(3, 6, 6)
    assert F.max_pool2d(x, 2).shape == (3, 3, 3)
    assert F.avg_pool2d(x, 3).shape == (3, 2, 2)
    assert F.adaptive_avg_pool2d(x, 1).shape == (3, 1, 1)
    oh = F.one_hot(hf.tensor([2, 0, 1]))
    assert oh.dtype == hf.int64
    np.testing.assert_array_equal(to_numpy(oh), np.eye(3, dtype=np.int64)[[2, 0, 1]])


def test_embedding_max_norm_renormalizes_rows_in_place():
    w = hf.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]], dtype="float64")
    out = F.embedding(hf.tensor([0, 1, 0]), w, max_norm=1.0)
    np.testing.assert_allclose(to_numpy(w)[0], [0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(to_numpy(w)[1], [0.3, 0.4])
    np.testing.assert_allclose(to_numpy(w)[2], [6.0, 8.0])  # not looked up: untouched
    np.testing.assert_allclose(to_numpy(out)[2], [0.6, 0.8], rtol=1e-6)


@pytest.mark.parametrize("norm_type", [math.inf, -math.inf, 0.0, 1.0, 3.0])
def test_embedding_max_norm_any_norm_type(norm_type):
    """Rows looked up whose norm_type-norm exceeds max_norm are scaled in place by
    max_norm / (norm + 1e-7), for every norm type (inf was never applied)."""
    table = np.array([[3.0, -4.0, 0.0], [0.3, 0.4, 0.1], [6.0, 8.0, 1.0], [0.5, -2.5, 0.2]])
    idx = np.array([[0, 1], [0, 3]])
    ref = table.copy()
    for r in np.unique(idx):
        a = np.abs(ref[r])
        norm = {math.inf: a.max(), -math.inf: a.min(), 0.0: np.count_nonzero(a)}.get(
            norm_type, (a ** norm_type).sum() ** (1 / norm_type) if norm_type else 0)
        if norm > 1.5:
            ref[r] *= 1.5 / (norm + 1e-7)
    w = hf.tensor(table.copy())
    out = F.embedding(hf.tensor(idx), w, max_norm=1.5, norm_type=norm_type)
    np.testing.assert_allclose(to_numpy(w), ref, rtol=1e-12)
    np.testing.assert_allclose(to_numpy(out), ref[idx], rtol=1e-12)
    if norm_type == math.inf:
        assert not np.allclose(ref, table)  # the inf-norm rows 0 and 3 were rescaled
    torch = pytest.importorskip("torch")
    tw = torch.tensor(table.copy())
    tout = torch.nn.functional.embedding(torch.tensor(idx), tw, max_norm=1.5,
                                         norm_type=norm_type)
    np.testing.assert_allclose(to_numpy(w), tw.numpy(), rtol=1e-12)
    np.testing.assert_allclose(to_numpy(out), tout.numpy(), rtol=1e-12)


def test_embedding_max_norm_inf_module_static_matches_eager():
    table = np.array([[3.0, -4.0], [0.3, 0.4], [0.5, -2.5]])
    eager = hf.nn.Embedding(3, 2, max_norm=1.0, norm_type=math.inf,
                            _weight=hf.tensor(table.copy()))
    static = hf.jit.to_static(hf.nn.Embedding(3, 2, max_norm=1.0, norm_type=math.inf,
                                              _weight=hf.tensor(table.copy())))
    idx = hf.tensor([0, 2, 0])
    np.testing.assert_allclose(to_numpy(static(idx)), to_numpy(eager(idx)), rtol=1e-12)
    np.testing.assert_allclose(to_numpy(static.weight), to_numpy(eager.weight), rtol=1e-12)
    np.testing.assert_allclose(to_numpy(eager.weight)[[0, 2]],
                               table[[0, 2]] / (np.abs(table[[0, 2]]).max(1, keepdims=True)
                                                + 1e-7))


def test_embedding_scale_grad_by_freq_divides_by_counts():
    idx = np.array([[1, 3, 1], [1, 0, 3]])
    g = np.arange(1.0, 25.0).reshape(2, 3, 4)
    counts = np.bincount(idx.ravel(), minlength=5)
    expected = np.zeros((5, 4))
    np.add.at(expected, idx.ravel(), g.reshape(-1, 4) / counts[idx.ravel()][:, None])
    emb = hf.nn.Embedding(5, 4, scale_grad_by_freq=True, dtype="float64")
    w = emb.weight
    (emb(hf.tensor(idx)) * hf.tensor(g)).sum().backward()
    np.testing.assert_allclose(to_numpy(w.grad), expected, rtol=1e-12)
    assert not np.allclose(expected[1], g.reshape(-1, 4)[[0, 2, 3]].sum(0))  # really scaled
    # double backward: d(sum(c * grad_w)) / d(upstream g) = c[idx] / counts[idx]
    c = np.random.default_rng(3).standard_normal((5, 4))
    gt = hf.tensor(g, requires_grad=True)
    out = F.embedding(hf.tensor(idx), w, scale_grad_by_freq=True)
    (gw,) = hf.autograd.grad((out * gt).sum(), [w], create_graph=True)
    (gw * hf.tensor(c)).sum().backward()
    np.testing.assert_allclose(to_numpy(gt.grad), c[idx] / counts[idx][..., None], rtol=1e-12)
    # to_static: the same gradient in a static program
    static = hf.jit.to_static(hf.nn.Embedding(5, 4, scale_grad_by_freq=True,
                                              dtype="float64"))
    (static(hf.tensor(idx)) * hf.tensor(g)).sum().backward()
    np.testing.assert_allclose(to_numpy(static.weight.grad), expected, rtol=1e-12)


def test_embedding_padding_idx_gets_no_gradient():
    w = hf.randn(4, 3, requires_grad=True)
    F.embedding(hf.tensor([[1, 3], [3, 0]]), w, padding_idx=-1).sum().backward()
    np.testing.assert_array_equal(to_numpy(w.grad), [[1] * 3, [1] * 3, [0] * 3, [0] * 3])


def test_softmax_implicit_dim_warns_like_pytorch():
    with pytest.warns(UserWarning, match="implicit dimension"):
        out = F.softmax(hf.randn(2, 3))
    np.testing.assert_allclose(to_numpy(out).sum(axis=1), 1.0, rtol=1e-6)


def test_cross_entropy_all_ignored_mean_is_nan():
    with np.errstate(invalid="ignore"):
        loss = F.cross_entropy(hf.randn(2, 3), hf.tensor([-100, -100]))
    assert math.isnan(loss.item())


# ============================================================================= errors
def _raises(exc, fn, *fragments):
    with pytest.raises(exc) as info:
        fn()
    for f in fragments:
        assert f in str(info.value), f"{f!r} not in {str(info.value)!r}"


def test_conv2d_errors_name_function_and_shapes():
    x = hf.randn(2, 3, 8, 8)
    _raises(ValueError, lambda: F.conv2d(x, hf.randn(4, 2, 3, 3)), "conv2d", "(2, 3, 8, 8)",
            "(4, 2, 3, 3)", "3 channels")
    _raises(ValueError, lambda: F.conv2d(x, hf.randn(5, 1, 3, 3), groups=3), "conv2d",
            "divisible by groups=3")
    _raises(ValueError, lambda: F.conv2d(x, hf.randn(4, 3, 9, 9)), "conv2d", "(9, 9)")
    _raises(ValueError, lambda: F.conv2d(hf.randn(8, 8), hf.randn(4, 3, 3, 3)), "conv2d",
            "(8, 8)")
    _raises(ValueError, lambda: F.conv2d(x, hf.randn(4, 3, 3, 3), hf.randn(3)), "conv2d",
            "bias", "(3,)")
    _raises(TypeError, lambda: F.conv2d(x, hf.randn(4, 3, 3, 3, dtype="float64")), "conv2d",
            "float32", "float64")
    _raises(ValueError, lambda: F.conv2d(x, hf.randn(4, 3, 2, 2), stride=2, padding="same"),
            "conv2d", "same")
    _raises(ValueError, lambda: F.conv2d(x, hf.randn(4, 3, 3, 3), padding=-1), "conv2d",
            "padding")


def test_conv_transpose2d_errors_name_function_and_values():
    x = hf.randn(2, 3, 5, 5)
    _raises(ValueError, lambda: F.conv_transpose2d(x, hf.randn(4, 2, 3, 3)), "conv_transpose2d",
            "3 channels", "(4, 2, 3, 3)")
    _raises(ValueError, lambda: F.conv_transpose2d(x, hf.randn(3, 2, 3, 3), groups=2),
            "conv_transpose2d", "divisible by groups=2")
    _raises(ValueError, lambda: F.conv_transpose2d(x, hf.randn(3, 2, 3, 3), stride=2,
                                                   output_padding=2),
            "conv_transpose2d", "output_padding (2, 2)", "stride (2, 2)")
    _raises(ValueError, lambda: F.conv_transpose2d(x, hf.randn(3, 2, 3, 3), padding=4),
            "conv_transpose2d", "(2, 3, 5, 5)", "size -1")
    _raises(ValueError, lambda: F.conv_transpose2d(x, hf.randn(3, 2, 3, 3), hf.randn(3)),
            "conv_transpose2d", "bias", "(2,)", "(3,)")
    _raises(ValueError, lambda: F.conv_transpose2d(x, hf.randn(3, 2, 3)), "conv_transpose2d",
            "4-D weight")
    _raises(TypeError, lambda: F.conv_transpose2d(x, hf.randn(3, 2, 3, 3, dtype="float64")),
            "conv_transpose2d", "float32", "float64")


def test_interpolate_errors_name_function_and_values():
    x = hf.randn(1, 2, 4, 4)
    _raises(ValueError, lambda: F.interpolate(x), "interpolate", "exactly one of size")
    _raises(ValueError, lambda: F.interpolate(x, size=2, scale_factor=2), "interpolate",
            "exactly one of size")
    _raises(ValueError, lambda: F.interpolate(x, size=(2, 3, 4)), "interpolate", "(2, 3, 4)")
    _raises(ValueError, lambda: F.interpolate(x, scale_factor=0.1), "interpolate", "empty",
            "(0, 0)")
    _raises(ValueError, lambda: F.interpolate(x, size=3, mode="bicubic"), "interpolate",
            "'bicubic'")
    _raises(ValueError, lambda: F.interpolate(x, size=3, align_corners=True), "interpolate",
            "align_corners", "'nearest'")
    _raises(ValueError, lambda: F.interpolate(x[0], size=3), "interpolate", "(2, 4, 4)")
    _raises(TypeError, lambda: F.interpolate(hf.ones(1, 1, 2, 2, dtype="int64"), size=3),
            "interpolate", "int64")


def test_interpolate_output_is_new_and_keeps_dtype():
    x = hf.randn(1, 2, 3, 3, dtype="float64")
    same = F.interpolate(x, size=3)
    same.add_(1.0)  # a new tensor, as PyTorch's, even when no resizing happens
    np.testing.assert_allclose(to_numpy(same), to_numpy(x) + 1.0)
    assert dtype_name(F.interpolate(x, scale_factor=2, mode="bilinear")) == F64
    half = F.interpolate(hf.ones(1, 1, 2, 2, dtype="float16"), size=3, mode="bilinear")
    assert dtype_name(half) == "float16" and to_numpy(half).tolist() == [[[[1.0] * 3] * 3]]


def test_linear_and_norm_errors():
    _raises(ValueError, lambda: F.linear(hf.randn(2, 3), hf.randn(4, 5)), "linear", "(2, 3)",
            "(4, 5)")
    _raises(TypeError, lambda: F.linear(hf.randn(2, 3), hf.randn(4, 3, dtype="float64")),
            "linear", "float32", "float64")
    _raises(ValueError, lambda: F.layer_norm(hf.randn(2, 3), (4,)), "layer_norm", "(4,)",
            "(2, 3)")
    _raises(ValueError, lambda: F.batch_norm(hf.randn(4, 3), hf.zeros(2), hf.ones(2)),
            "batch_norm", "running_mean", "(3,)")


def test_pooling_errors():
    x = hf.randn(1, 2, 4, 4)
    _raises(ValueError, lambda: F.max_pool2d(x, 2, padding=2), "max_pool2d", "half")
    _raises(ValueError, lambda: F.max_pool2d(x, 7), "max_pool2d", "(1, 2, 4, 4)")
    _raises(ValueError, lambda: F.avg_pool2d(hf.randn(4, 4), 2), "avg_pool2d", "(4, 4)")
    _raises(TypeError, lambda: F.max_pool2d(hf.ones(1, 1, 4, 4, dtype="int64"), 2),
            "max_pool2d", "int64")


def test_loss_errors():
    x = hf.randn(4, 3)
    _raises(ValueError, lambda: F.cross_entropy(x, hf.tensor([0, 1])), "cross_entropy",
            "(4, 3)", "(2,)")
    _raises(ValueError, lambda: F.cross_entropy(x, hf.tensor([0, 1, 2, 0]), reduction="avg"),
            "cross_entropy", "'avg'")
    _raises(ValueError, lambda: F.cross_entropy(x, hf.tensor([0, 1, 2, 0]),
                                                label_smoothing=1.5), "cross_entropy")
    _raises(ValueError, lambda: F.cross_entropy(x, hf.tensor([0, 1, 2, 0]), hf.ones(4)),
            "cross_entropy", "weight", "(4,)")
    _raises(ValueError, lambda: F.cross_entropy(x, hf.rand(4, 2)), "cross_entropy", "(4, 2)")
    _raises(IndexError, lambda: F.cross_entropy(x, hf.tensor([0, 3, 1, 1])), "out of bounds")
    _raises(IndexError, lambda: F.nll_loss(x, hf.tensor([0, -2, 1, 1])), "out of bounds")
    _raises(TypeError, lambda: F.nll_loss(x, hf.tensor([0.0, 1.0, 1.0, 1.0])), "nll_loss",
            "integer")
    _raises(ValueError, lambda: F.smooth_l1_loss(x, x, beta=-1.0), "smooth_l1_loss", "-1.0")
    _raises(ValueError, lambda: F.huber_loss(x, x, delta=0.0), "huber_loss", "0.0")
    for fn in (F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss, F.kl_div,
               F.binary_cross_entropy_with_logits):
        _raises(ValueError, lambda fn=fn: fn(x, x, reduction="mean_sum"), fn.__name__,
                "reduction")
    _raises(ValueError, lambda: F.binary_cross_entropy(hf.rand(4, 3), hf.rand(4, 1)),
            "binary_cross_entropy", "(4, 1)", "(4, 3)")
    _raises(ValueError, lambda: F.binary_cross_entropy(x, hf.rand(4, 3)),
            "binary_cross_entropy", "between 0 and 1")
    _raises(ValueError, lambda: F.binary_cross_entropy_with_logits(x, hf.rand(3)),
            "binary_cross_entropy_with_logits", "(3,)")
    with pytest.warns(UserWarning, match="mse_loss"):
        _raises(ValueError, lambda: F.mse_loss(x, hf.randn(5)), "mse_loss", "(4, 3)", "(5,)")


def test_misc_errors():
    _raises(ValueError, lambda: F.gelu(hf.randn(3), approximate="fast"), "gelu", "'fast'")
    _raises(TypeError, lambda: F.softmax(hf.tensor([1, 2]), 0), "softmax", "int64")
    _raises(IndexError, lambda: F.embedding(hf.tensor([0, 5]), hf.randn(4, 3)), "embedding",
            "out of range")
    _raises(ValueError, lambda: F.embedding(hf.tensor([0]), hf.randn(4, 3), padding_idx=4),
            "embedding", "padding_idx")
    _raises(ValueError, lambda: F.one_hot(hf.tensor([0, 3]), 3), "one_hot", "num_classes")
    _raises(ValueError, lambda: F.pad(hf.randn(2, 3), (3, 0), mode="reflect"), "pad",
            "reflect")
    _raises(ValueError, lambda: F.pad(hf.randn(2, 3), (1, 2, 3)), "pad", "even")
    _raises(ValueError, lambda: F.pad(hf.randn(2, 3), (1, 1), mode="wrap"), "pad", "'wrap'")


def test_pad_modes_refuse_what_pytorch_refuses():
    x = hf.ones(2, 3, 4)
    with pytest.raises(ValueError, match="reflect padding .* less than the dim's size 4"):
        F.pad(x, (4, 0), mode="reflect")
    with pytest.raises(ValueError, match="circular padding .* more than once"):
        F.pad(x, (0, 5), mode="circular")
    for mode in ("replicate", "reflect"):
        with pytest.raises(ValueError, match="leaves 0 elements"):
            F.pad(x, (-3, -1), mode=mode)
    assert F.pad(x, (-3, -1), mode="circular").shape == (2, 3, 0)
    # replicate repeats the edge any number of times; a crop past one side keeps the other's
    y = hf.tensor(np.arange(4.0, dtype=np.float32).reshape(1, 1, 4))
    assert F.pad(y, (5, 5), mode="replicate").tolist() == [[[0.0] * 6 + [1, 2] + [3.0] * 6]]
    assert F.pad(y, (-4, 1), mode="replicate").tolist() == [[[3.0]]]
    assert F.pad(y, (-4, 1), mode="reflect").tolist() == [[[2.0]]]


def test_norm_layers_keep_float16_and_refuse_mixed_dtypes():
    # as PyTorch: float16 input with float32 parameters computes in float32 and returns
    # float16; float64 input with float32 parameters is refused (it silently gave float64)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float16)
    ln, bn = hf.nn.LayerNorm(4), hf.nn.BatchNorm1d(4)
    for layer, ref in ((ln, (x - x.mean(1, keepdims=True, dtype=np.float32))
                        / np.sqrt(x.var(1, keepdims=True, dtype=np.float32) + 1e-5)),
                       (bn, (x - x.mean(0, dtype=np.float32))
                        / np.sqrt(x.var(0, dtype=np.float32) + 1e-5))):
        out = layer(hf.tensor(x))
        assert out.dtype == hf.float16
        np.testing.assert_allclose(out.detach().numpy().astype(np.float32), ref, atol=4e-3)
        with pytest.raises(TypeError, match="mixed dtypes: input hybridfw.float64"):
            layer(hf.tensor(x.astype(np.float64)))
        with pytest.raises(TypeError, match="floating-point input"):
            layer(hf.tensor(x.astype(np.int64)))
    assert bn.running_mean.dtype == hf.float32


# ============================================================================= package layout
def test_functional_is_a_package_of_small_modules_reexporting_every_old_name():
    import importlib
    import inspect
    import pkgutil
    modules = sorted(m.name for m in pkgutil.iter_modules(F.__path__))
    assert modules == ["activations", "attention", "convolution", "losses", "normalization",
                       "padding", "pooling", "sparse"]
    for name in modules:  # STYLE.md: files stay small
        module = importlib.import_module(f"hybridfw.nn.functional.{name}")
        assert len(inspect.getsource(module).splitlines()) < 600, name
    # every name the single-file module showed (functions, the private helpers other modules
    # use as F._name, and its imports), still reachable as F.<name>
    old = """C E I K L M N R S _SQRT_2_OVER_PI _SQRT_HALF _as_batch _batched _broadcast_target _cast
        _check_class_weight _check_norm_dtypes _check_param _conv_padding
        _cross_entropy_probabilities _pad_index _pool1d_input _reduce _reduction
        _renormalize_rows _same_dtype _same_shape_target _single _softmax_dim _target_weights
        _unbatched _weighted adaptive_avg_pool1d adaptive_avg_pool2d annotations apply
        apply_inplace as_dtype avg_pool1d avg_pool2d batch_norm binary_cross_entropy
        binary_cross_entropy_with_logits broadcast_shapes conv1d conv2d conv_attrs
        conv_transpose2d cross_entropy dropout dropout2d elu embedding gelu group_norm hardtanh
        huber_loss int64 interpolate is_recomputing kl_div l1_loss layer_norm leaky_relu linear
        log_softmax logsigmoid math max_pool1d max_pool2d mse_loss nll_loss no_grad normalize
        normalize_dim one_hot pad pair pool_attrs rand_like relu relu6 sigmoid silu
        smooth_l1_loss softmax softplus tanh warnings""".split()
    assert [n for n in old if not hasattr(F, n)] == []
    for name in F.__all__:
        fn = getattr(F, name)
        assert callable(fn) and not inspect.ismodule(fn), name
    from hybridfw.nn.functional import cross_entropy, relu
    from hybridfw.nn.functional.activations import relu as relu_def
    from hybridfw.nn.functional.losses import cross_entropy as cross_entropy_def
    assert relu is relu_def is F.relu and cross_entropy is cross_entropy_def
    assert F._single("Conv1d", "stride", (2,)) == 2


def test_a_bias_of_another_dtype_or_shape_is_refused_by_linear_and_convolutions():
    # it was added with type promotion (a float64 bias made the float32 layer's output float64)
    # or failed inside 'add'; PyTorch refuses both
    x, w = hf.randn(2, 3), hf.randn(4, 3)
    _raises(TypeError, lambda: F.linear(x, w, hf.randn(4, dtype="float64")), "linear", "bias",
            "float32", "float64")
    _raises(ValueError, lambda: F.linear(x, w, hf.randn(5)), "linear", "bias", "(5,)",
            "(2, 4)")
    _raises(ValueError, lambda: F.linear(x, w, hf.randn(3, 2, 4)), "linear", "bias")
    assert F.linear(x, w, hf.randn(1)).shape == (2, 4)    # broadcast as torch's addmm does
    assert F.linear(x, w, hf.randn(2, 4)).shape == (2, 4)
    image = hf.randn(1, 3, 5, 5)
    _raises(TypeError, lambda: F.conv2d(image, hf.randn(2, 3, 3, 3), hf.randn(2).double()),
            "conv2d", "bias", "float64")
    _raises(TypeError, lambda: F.conv_transpose2d(image, hf.randn(3, 2, 3, 3),
                                                  hf.randn(2).double()),
            "conv_transpose2d", "bias", "float64")


@pytest.mark.parametrize("bad", [2.0, -0.5])
def test_binary_cross_entropy_refuses_a_target_outside_0_1(bad):
    # PyTorch: "all elements of target should be between 0 and 1"; it gave a finite loss
    target = hf.tensor([0.0, 1.0, bad, 0.25])
    _raises(ValueError, lambda: F.binary_cross_entropy(hf.full((4,), 0.5), target),
            "binary_cross_entropy", "target", "between 0 and 1")
    assert F.binary_cross_entropy(hf.full((4,), 0.5), hf.tensor([0.0, 1.0, 0.5, 0.25])).item() \
        == pytest.approx(np.log(2.0))


@pytest.mark.parametrize("fn", [F.binary_cross_entropy, F.binary_cross_entropy_with_logits])
def test_binary_losses_check_their_weights_against_the_input(fn):
    # a weight that broadcast the loss to a bigger shape was taken (PyTorch refuses it), one
    # that did not broadcast failed inside 'mul', and a float64 weight made the loss float64
    # (PyTorch computes in the input's dtype)
    x, y = hf.rand(4, 3) * 0.8 + 0.1, hf.rand(4, 3)
    _raises(ValueError, lambda: fn(x, y, weight=hf.ones(2, 4, 3)), fn.__name__, "weight",
            "(2, 4, 3)", "(4, 3)")
    _raises(ValueError, lambda: fn(x, y, weight=hf.ones(4)), fn.__name__, "weight", "(4,)")
    loss = fn(x, y, weight=hf.full((4, 1), 2.0, dtype="float64"), reduction="none")
    assert loss.dtype is hf.float32
    np.testing.assert_allclose(loss.numpy(), 2 * fn(x, y, reduction="none").numpy(), rtol=1e-6)


def test_pos_weight_must_broadcast_to_the_input():
    x, y = hf.randn(4, 3), hf.rand(4, 3)
    _raises(ValueError, lambda: F.binary_cross_entropy_with_logits(x, y, pos_weight=hf.ones(4)),
            "binary_cross_entropy_with_logits", "pos_weight", "(4,)", "(4, 3)")


def test_a_numpy_array_or_list_given_to_a_layer_is_named_as_not_a_tensor():
    # PyTorch: "linear(): argument 'input' must be Tensor, not numpy.ndarray"; here Linear said
    # "must have the same dtype, got float32 and hybridfw.float32", a list raised AttributeError
    # and cross_entropy's numpy target AttributeError: 'Int64DType' ... 'is_floating_point'
    a = np.ones((2, 3), np.float32)
    for call, name in ((lambda: hf.nn.Linear(3, 2)(a), "linear"),
                       (lambda: F.linear([[1.0, 2.0, 3.0]], hf.ones(2, 3)), "linear"),
                       (lambda: hf.nn.Linear(3, 2)([[1.0, 2.0, 3.0]]), "linear"),
                       (lambda: hf.nn.Conv2d(1, 1, 3)(np.ones((1, 1, 5, 5), np.float32)),
                        "conv2d"),
                       (lambda: F.cross_entropy(hf.randn(2, 3), np.array([0, 1])),
                        "cross_entropy"),
                       (lambda: F.nll_loss(np.zeros((2, 3), np.float32), hf.tensor([0, 1])),
                        "nll_loss"),
                       (lambda: hf.nn.LSTM(3, 2)(a[None]), "LSTM"),
                       (lambda: hf.nn.BatchNorm1d(3)(a), "batch_norm"),
                       (lambda: hf.nn.LayerNorm(3)(a), "layer_norm"),
                       (lambda: hf.nn.Flatten()(a), "Flatten"),
                       (lambda: hf.nn.MultiheadAttention(3, 1)(a[None], a[None], a[None]),
                        "MultiheadAttention")):
        with pytest.raises(TypeError) as info:
            call()
        text = str(info.value)
        assert text.startswith(f"{name}: ") and "must be a tensor, got" in text, text
        assert "hf.tensor" in text


def test_elementwise_ops_take_a_numpy_array_as_hf_exp_does():
    # F.relu(array) crashed with AttributeError: 'Float32DType' object has no attribute 'np'
    a = np.array([[-1.0, 2.0]], np.float32)
    out = F.relu(a)
    assert isinstance(out, hf.Tensor) and out.dtype is hf.float32
    np.testing.assert_array_equal(out.numpy(), [[0.0, 2.0]])
    np.testing.assert_array_equal(hf.sigmoid(np.zeros(2)).numpy(), [0.5, 0.5])
