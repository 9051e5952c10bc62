"""Neural-network primitives: softmax/log_softmax, erf, log_sigmoid, hardtanh, constant padding,
the pieces of the classification losses (class pick, binary cross-entropy), embedding, one_hot.

Importing this module also registers the convolution (``conv``) and pooling (``pooling``)
primitives. ``hybridfw.nn.functional`` builds the public PyTorch-style functions on these.

Each op here is a primitive (rather than a composite) for a reason: numerical stability
(softmax, log_softmax, log_sigmoid, binary_cross_entropy keep finite values *and* gradients at
extreme inputs), a function numpy lacks (erf), or a scatter/gather pair whose two halves are each
other's gradient (pad_constant, nll_loss, embedding), or a gradient that must stay an op of the
input for higher-order gradients (hardtanh, as PyTorch's hardtanh_backward).
"""
from __future__ import annotations

import contextlib
import math

from ..dtypes import float32, int64
from . import composite as C
from . import elementwise as E
from . import reduction as R
from .conv import conv2d, conv2d_input_grad, conv2d_weight_grad
from .factories import ones_like
from .infer import check_float, float_result, normalize_dim
from .pooling import adaptive_avg_pool2d, avg_pool2d, max_pool2d, max_pool2d_indices
from ..backend import add_at
from .lowering_rules import elementwise_rule
from .registry import OnnxNotExportable, apply, onnx_rules, register

__all__ = ["softmax", "log_softmax", "log_sigmoid", "hardtanh", "hardtanh_backward", "erf",
           "pad_constant", "nll_loss", "nll_loss_backward", "binary_cross_entropy", "embedding",
           "embedding_backward", "one_hot", "conv2d", "conv2d_input_grad", "conv2d_weight_grad",
           "max_pool2d", "max_pool2d_indices", "avg_pool2d", "adaptive_avg_pool2d"]


# --------------------------------------------------------------------------- softmax
def _softmax_infer(name):
    def infer(a, *, dim):
        check_float(name, a)
        normalize_dim(name, dim, a.ndim)
        return a.shape, a.dtype, None
    return infer


def _shifted(xp, a, dim):
    """``a - max(a, dim)``: the largest element becomes 0, so exp cannot overflow."""
    if a.ndim == 0:
        return a - a
    return a - a.max(axis=dim, keepdims=True)


def _softmax_kernel(xp, a, *, dim):
    if a.size == 0:  # nothing to normalize (an empty dim has no max to shift by)
        return a.copy()
    e = xp.exp(_shifted(xp, a, dim))
    e /= e.sum(axis=dim if a.ndim else None, keepdims=True)
    return e


def _log_softmax_kernel(xp, a, *, dim):
    if a.size == 0:
        return a.copy()
    s = _shifted(xp, a, dim)
    s -= xp.log(xp.exp(s).sum(axis=dim if a.ndim else None, keepdims=True))
    return s


def _softmax_grad(g, out, a, *, dim):
    return out * (g - apply(R.sum_, g * out, dim=dim, keepdim=True))


def _log_softmax_grad(g, out, a, *, dim):
    return g - apply(E.exp, out) * apply(R.sum_, g, dim=dim, keepdim=True)


softmax = register("softmax", infer=_softmax_infer("softmax"), kernel=_softmax_kernel,
                   save_output=True, vjp=(_softmax_grad,),
                   doc="exp(x) / sum(exp(x), dim), computed as exp(x - max) for stability.")
log_softmax = register("log_softmax", infer=_softmax_infer("log_softmax"),
                       kernel=_log_softmax_kernel, save_output=True, vjp=(_log_softmax_grad,),
                       doc="x - logsumexp(x, dim), finite wherever x is.")


# --------------------------------------------------------------------------- log_sigmoid
def _float_unary_infer(name):
    def infer(a):
        check_float(name, a)
        return a.shape, a.dtype, None
    return infer


def _log_sigmoid_kernel(xp, a):
    # log(1/(1+exp(-a))) = min(a, 0) - log1p(exp(-|a|)): no overflow for any finite a
    out = xp.minimum(a, 0)
    out -= xp.log1p(xp.exp(-xp.abs(a)))
    return out


log_sigmoid = register("log_sigmoid", infer=_float_unary_infer("log_sigmoid"),
                       kernel=_log_sigmoid_kernel, save=(0,),
                       vjp=(lambda g, out, a: g * apply(E.sigmoid, -a),),
                       doc="log(sigmoid(x)), stable; its derivative is sigmoid(-x).")


# --------------------------------------------------------------------------- hardtanh
# A primitive (not where/clamp composed) so that its gradient is an op of the input, as
# PyTorch's hardtanh_backward: the second gradient of hardtanh(x) * x then stays connected to
# x (with a zero derivative), and a third gradient is zeros rather than an error.
def _hardtanh_infer(a, *, min_val, max_val):
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val "
                         f"({max_val})")
    return E._clamp_infer(a, min=min_val, max=max_val)


def _hardtanh_kernel(xp, a, *, min_val, max_val, out=None):
    return xp.clip(a, min_val, max_val, out=out)


def _hardtanh_backward_kernel(xp, g, a, *, min_val, max_val):
    # as PyTorch, the gradient flows only strictly inside: 0 at the bounds too
    return xp.multiply(g, (a > min_val) & (a < max_val))


def _hardtanh_backward_lower(ctx, g, a, *, min_val, max_val):
    return (f"({g} * (({a} > {ctx.const(min_val)}) & ({a} < {ctx.const(max_val)})))")


hardtanh = register(
    "hardtanh", infer=_hardtanh_infer, kernel=_hardtanh_kernel, supports_out=True,
    lower=elementwise_rule(lambda ctx, a, *, min_val, max_val:
                           E._clamp_lower(ctx, a, min=min_val, max=max_val)),
    save=(0,), vjp=(lambda g, out, a, **bounds: apply(hardtanh_backward, g, a, **bounds),),
    doc="``a`` clipped to ``[min_val, max_val]``; its gradient is ``hardtanh_backward``.")


def _hardtanh_backward_infer(g, a, *, min_val, max_val):
    return E._arith_infer("hardtanh_backward")(g, a)


hardtanh_backward = register(
    "hardtanh_backward", infer=_hardtanh_backward_infer, kernel=_hardtanh_backward_kernel,
    lower=elementwise_rule(_hardtanh_backward_lower), save=(1,),
    vjp=(lambda gg, out, g, a, **bounds: apply(hardtanh_backward, gg, a, **bounds),
         lambda gg, out, g, a, **bounds: a * 0),  # (zero, but an op of a: see hardtanh)
    doc="``g`` where ``min_val < a < max_val``, else 0: hardtanh's gradient.")


# --------------------------------------------------------------------------- erf
# float64: W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp.
# 23 (1969) 631-638 (Netlib SPECFUN CALERF): three rational approximations, relative error below
# 1e-16 -- float64 erf, and finite-difference checks of gelu, are exact to rounding.
_ERF_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
          3.20937758913846947e03, 1.85777706184603153e-1)
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
          2.84423683343917062e03)
_ERF_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
          2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
          2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)
_ERF_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
          1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
          3.43936767414372164e03, 1.23033935480374942e03)
_ERF_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
          1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)
_ERF_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1,
          6.05183413124413191e-2, 2.33520497626869185e-3)
_SQRT_PI_INV = 5.6418958354775628695e-1

# float32 (float16 is evaluated in float32): one rational function, about 4x cheaper than the
# three of Cody's. erf(x) = x P(x^2) / Q(x^2) on |x| <= 4 (erf(+-4) rounds to +-1 in float32),
# coefficients from our own fit (Lawson-weighted linearized least squares of erf(x)/x in x^2 on
# [0, 4]): relative error 3e-8 in exact arithmetic, at most 3.5e-7 (~6 ulp) evaluated in float32.
# All coefficients are positive, so the Horner sums never cancel.
_ERF32_P = (1.1283791432248576e+00, 1.9263961131385687e-01, 5.2986589033805799e-02,
            3.8463409715047154e-03, 2.8404338085899976e-04, 1.9973778801908098e-06)
_ERF32_Q = (1.0, 5.0405506218690932e-01, 1.1498006185796623e-01, 1.5132162355128138e-02,
            1.1772233991758844e-03, 3.7503641109109028e-05)


def _rational(z, num, den, lead, n):
    """Cody's Horner loop: (lead*z^n + num[0] z^(n-1) ... + num[n]) / (z^n + ... + den[n])."""
    xnum = lead * z
    xden = z
    for i in range(n - 1):
        xnum = (xnum + num[i]) * z
        xden = (xden + den[i]) * z
    return (xnum + num[n - 1]) / (xden + den[n - 1])


def _erfc_scaled_exp(xp, y, r):
    """exp(-y^2) * r, with y^2 split as in CALERF so the exponent keeps full precision."""
    ysq = xp.trunc(y * 16) / 16
    delta = (y - ysq) * (y + ysq)
    return xp.exp(-ysq * ysq) * xp.exp(-delta) * r


def _erf_float64(xp, x):
    y = xp.abs(x)
    small = xp.minimum(y, 0.46875)
    z = small * small
    near = x * _rational(z, _ERF_A[:4], _ERF_B, _ERF_A[4], 4)  # erf for |x| <= 0.46875
    mid = xp.clip(y, 0.46875, 4.0)
    erfc_mid = _erfc_scaled_exp(xp, mid, _rational(mid, _ERF_C[:8], _ERF_D, _ERF_C[8], 8))
    # erfc(10) ~ 2e-45: clipping there keeps inf finite and erf(|x| >= 10) exactly 1
    far = xp.clip(y, 4.0, 10.0)
    z = 1 / (far * far)
    r = z * _rational(z, _ERF_P[:5], _ERF_Q, _ERF_P[5], 5)
    erfc_far = _erfc_scaled_exp(xp, far, (_SQRT_PI_INV - r) / far)
    tail = 1 - xp.where(y <= 4.0, erfc_mid, erfc_far)
    return xp.where(y <= 0.46875, near, xp.where(x < 0, -tail, tail))


def _horner(z, coefficients):
    """sum_k c_k z^k, in place after the first product."""
    out = z * coefficients[-1]
    for k in range(len(coefficients) - 2, -1, -1):
        out += coefficients[k]
        if k:
            out *= z
    return out


def _erf_float32(xp, x):
    x = xp.clip(x, -4.0, 4.0)
    z = x * x
    out = _horner(z, _ERF32_P)
    out *= x
    out /= _horner(z, _ERF32_Q)
    return out


def _erf_kernel(xp, a):
    if a.dtype.itemsize >= 8:
        return _erf_float64(xp, a)
    return _erf_float32(xp, a.astype(float32.np, copy=False)).astype(a.dtype, copy=False)


def _erf_infer(a):
    dt = float_result(a.dtype)  # integer and bool inputs compute in float32, as in PyTorch
    return a.shape, dt, (None if dt is a.dtype else dt)


_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)
erf = register("erf", infer=_erf_infer, kernel=_erf_kernel, save=(0,),
               vjp=(lambda g, out, a: g * _TWO_OVER_SQRT_PI * apply(E.exp, -(a * a)),),
               doc="The error function: ~1e-16 relative in float64, ~6 ulp in float32.")


# --------------------------------------------------------------------------- pad_constant
def _pad_shape(x, pad):
    if len(pad) % 2 or len(pad) > 2 * x.ndim:
        raise ValueError(f"pad: the pad tuple must have an even length of at most 2 * ndim = "
                         f"{2 * x.ndim}, got {len(pad)} for input of shape {tuple(x.shape)}")
    shape = list(x.shape)
    for k in range(len(pad) // 2):
        d = x.ndim - 1 - k
        if shape[d] != -1:
            shape[d] += pad[2 * k] + pad[2 * k + 1]
            if shape[d] < 0:
                raise ValueError(f"pad: padding {tuple(pad)} makes dim {d} of input shape "
                                 f"{tuple(x.shape)} negative")
    return tuple(shape)


def _pad_infer(x, *, pad, value):
    return _pad_shape(x, pad), x.dtype, None


def _pad_kernel(xp, x, *, pad, value):
    out = xp.full(_pad_shape(x, pad), value, dtype=x.dtype)
    src, dst = [slice(None)] * x.ndim, [slice(None)] * x.ndim
    for k in range(len(pad) // 2):
        d = x.ndim - 1 - k
        before, after = pad[2 * k], pad[2 * k + 1]
        # negative padding crops: start reading (or stop) inside the input
        src[d] = slice(max(-before, 0), x.shape[d] - max(-after, 0))
        dst[d] = slice(max(before, 0), out.shape[d] - max(after, 0))
    out[tuple(dst)] = x[tuple(src)]
    return out


pad_constant = register(
    "pad_constant", infer=_pad_infer, kernel=_pad_kernel,
    vjp=(lambda g, out, x, *, pad, value: apply(pad_constant, g, pad=tuple(-p for p in pad),
                                                value=0),),
    doc="Constant padding, PyTorch's pad order (last dim first); negative pads crop.")


# --------------------------------------------------------------------------- class pick (nll)
def _check_target(name, logp, target):
    if target.dtype.category != 1:
        raise TypeError(f"{name}: expected an integer class-index target, got dtype "
                        f"{target.dtype}")
    expected = (logp.shape[0],) + tuple(logp.shape[2:])
    if logp.ndim < 2 or (tuple(target.shape) != expected and -1 not in target.shape + expected):
        raise ValueError(f"{name}: expected target of shape {expected} for input of shape "
                         f"{tuple(logp.shape)} (N, C, d1, ...), got {tuple(target.shape)}")


def _nll_infer(logp, target, *, ignore_index):
    check_float("nll_loss", logp)
    _check_target("nll_loss", logp, target)
    return tuple(target.shape), logp.dtype, None


def _class_positions(xp, target, ignore_index, num_classes):
    """Index arrays of (n, target[n, d..], d..) and the non-ignored mask; checks the range."""
    valid = target != ignore_index
    picked = xp.where(valid, target, 0)
    bad = picked[(picked < 0) | (picked >= num_classes)]
    if bad.size:
        raise IndexError(f"nll_loss: target {int(bad[0])} is out of bounds for "
                         f"{num_classes} classes")
    grids = list(xp.ogrid[tuple(slice(0, s) for s in target.shape)])
    return (grids[0], picked, *grids[1:]), valid


def _nll_kernel(xp, logp, target, *, ignore_index):
    index, valid = _class_positions(xp, target, ignore_index, logp.shape[1])
    return xp.where(valid, -logp[index], 0).astype(logp.dtype, copy=False)


def _nll_backward_infer(g, target, *, ignore_index, num_classes):
    return (g.shape[0], num_classes) + tuple(g.shape[1:]), g.dtype, None


def _nll_backward_kernel(xp, g, target, *, ignore_index, num_classes):
    index, valid = _class_positions(xp, target, ignore_index, num_classes)
    out = xp.zeros((g.shape[0], num_classes) + g.shape[1:], dtype=g.dtype)
    out[index] = xp.where(valid, -g, 0)  # one class per position: no repeated index
    return out


nll_loss = register(
    "nll_loss", infer=_nll_infer, kernel=_nll_kernel, save=(1,),
    vjp=(lambda g, out, logp, target, *, ignore_index:
         apply(nll_loss_backward, g, target, ignore_index=ignore_index,
               num_classes=logp.shape[1]), None),
    doc="Per-position -input[n, target[n, ...], ...] (0 where target == ignore_index).")
nll_loss_backward = register(
    "nll_loss_backward", infer=_nll_backward_infer, kernel=_nll_backward_kernel, save=(1,),
    vjp=(lambda gg, out, g, target, *, ignore_index, num_classes:
         apply(nll_loss, gg, target, ignore_index=ignore_index), None),
    doc="The adjoint of nll_loss: -g scattered to each position's target class.")


# --------------------------------------------------------------------------- binary CE
def _bce_infer(x, y):
    check_float("binary_cross_entropy", x, y)
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"binary_cross_entropy: target shape {tuple(y.shape)} must equal the "
                         f"input shape {tuple(x.shape)}")
    if x.dtype is not y.dtype:
        raise TypeError(f"binary_cross_entropy: input and target dtypes differ ({x.dtype} and "
                        f"{y.dtype})")
    return x.shape, x.dtype, None


def _ignore_divide(xp):
    """numpy warns on log(0) = -inf (wanted here); cupy never warns."""
    errstate = getattr(xp, "errstate", None)
    return errstate(divide="ignore") if errstate is not None else contextlib.nullcontext()


def _bce_kernel(xp, x, y):
    if not bool(((x >= 0) & (x <= 1)).all()):
        raise ValueError("binary_cross_entropy: all elements of input should be between 0 and 1")
    if not bool(((y >= 0) & (y <= 1)).all()):
        raise ValueError("binary_cross_entropy: all elements of target should be between 0 and "
                         "1 (probabilities; for logits or other labels see "
                         "binary_cross_entropy_with_logits / cross_entropy)")
    # PyTorch clamps each log at -100, so x = 0 or 1 gives a finite loss
    with _ignore_divide(xp):
        log_x, log_1mx = xp.log(x), xp.log1p(-x)
    return (y - 1) * xp.maximum(log_1mx, -100) - y * xp.maximum(log_x, -100)


def _bce_grad_input(g, out, x, y):
    # PyTorch's formula: the denominator is clamped, so x = 0 or 1 gives a finite gradient
    return g * (x - y) / apply(E.clamp, (1 - x) * x, min=1e-12)


def _bce_grad_target(g, out, x, y):
    return g * (apply(E.clamp, apply(E.log1p, -x), min=-100)
                - apply(E.clamp, apply(E.log, x), min=-100))


binary_cross_entropy = register(
    "binary_cross_entropy", infer=_bce_infer, kernel=_bce_kernel, save=(0, 1),
    vjp=(_bce_grad_input, _bce_grad_target),
    doc="Elementwise -(y log x + (1 - y) log(1 - x)), each log clamped at -100.")


# --------------------------------------------------------------------------- embedding
def _embedding_infer(weight, indices, *, padding_idx, scale_grad_by_freq=False):
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got "
                         f"shape {tuple(weight.shape)}")
    if indices.dtype.category != 1:
        raise TypeError(f"embedding: indices must be an integer tensor, got dtype "
                        f"{indices.dtype}")
    return tuple(indices.shape) + (weight.shape[1],), weight.dtype, None


def _check_rows(xp, indices, n):
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= n):
        raise IndexError(f"embedding: index out of range for a table of {n} rows (got indices "
                         f"in [{int(indices.min())}, {int(indices.max())}])")


def _embedding_kernel(xp, weight, indices, *, padding_idx, scale_grad_by_freq=False):
    _check_rows(xp, indices, weight.shape[0])
    return xp.take(weight, indices, axis=0)


def _embedding_backward_infer(g, indices, *, num_weights, padding_idx, scale_grad_by_freq=False):
    return (num_weights, g.shape[-1]), g.dtype, None


def _embedding_backward_kernel(xp, g, indices, *, num_weights, padding_idx,
                               scale_grad_by_freq=False):
    rows = indices.reshape(-1)
    grads = g.reshape(rows.shape[0], g.shape[-1])  # (not -1: no indices leave no rows)
    if scale_grad_by_freq:  # each row's gradient over the number of times it was looked up
        counts = xp.bincount(rows, minlength=num_weights).astype(g.dtype)
        grads = grads / counts[rows][:, None]
    if padding_idx is not None:  # the padding row gets no gradient
        keep = rows != padding_idx
        rows, grads = rows[keep], grads[keep]
    out = xp.zeros((num_weights, g.shape[-1]), dtype=g.dtype)
    add_at(xp, out, rows, grads)  # repeated indices accumulate
    return out


def _lookup_counts(indices, num_weights, dtype):
    """How often each position's index occurs in ``indices``, shaped ``indices.shape + (1,)``."""
    ones = ones_like(C.unsqueeze(indices, -1), dtype=dtype)
    table = apply(embedding_backward, ones, indices, num_weights=num_weights, padding_idx=None)
    return apply(embedding, table, indices, padding_idx=None)


def _embedding_backward_grad(gg, out, g, indices, *, num_weights, padding_idx,
                             scale_grad_by_freq=False):
    rows = apply(embedding, gg, indices, padding_idx=padding_idx)
    if scale_grad_by_freq:
        rows = rows / _lookup_counts(indices, num_weights, gg.dtype)
    if padding_idx is None:
        return rows
    return apply(E.where, C.unsqueeze(indices == padding_idx, -1), 0.0, rows)


embedding = register(
    "embedding", infer=_embedding_infer, kernel=_embedding_kernel, save=(1,),
    vjp=(lambda g, out, weight, indices, *, padding_idx, scale_grad_by_freq=False:
         apply(embedding_backward, g, indices, num_weights=weight.shape[0],
               padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq), None),
    doc="Rows of a table: weight[indices]; the padding_idx row receives no gradient, and with "
        "scale_grad_by_freq each row's gradient is divided by its number of lookups.")
embedding_backward = register(
    "embedding_backward", infer=_embedding_backward_infer, kernel=_embedding_backward_kernel,
    save=(1,), vjp=(_embedding_backward_grad, None),
    doc="Sum each index's gradient row into a (num_weights, dim) table (each row divided by its "
        "index's count with scale_grad_by_freq).")


# --------------------------------------------------------------------------- one_hot
def _one_hot_infer(x, *, num_classes):
    if x.dtype.category != 1:
        raise TypeError(f"one_hot: expected an integer tensor, got dtype {x.dtype}")
    if not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"one_hot: num_classes must be a positive int, got {num_classes!r}")
    return tuple(x.shape) + (num_classes,), int64, None


def _one_hot_kernel(xp, x, *, num_classes):
    if x.size and int(x.min()) < 0:
        raise ValueError("one_hot: class values must be non-negative")
    if x.size and int(x.max()) >= num_classes:
        raise ValueError(f"one_hot: class values must be smaller than num_classes="
                         f"{num_classes}, got {int(x.max())}")
    return (x[..., None] == xp.arange(num_classes)).astype("int64")


one_hot = register("one_hot", infer=_one_hot_infer, kernel=_one_hot_kernel,
                   doc="int64 one-hot encoding along a new last dim.")


# ---- ONNX lowering rules (hybridfw.onnx) ----------------------------------------------------
def _onnx_softmax(op_type):
    def rule(ctx, a, *, dim):
        x = ctx.operand(0, ctx.out.dtype)
        if ctx.metas[0].ndim == 0:  # one element: softmax 1, log_softmax 0
            return ctx.reshape(ctx.node(op_type, [ctx.reshape(x, [1])], axis=0), [])
        return ctx.node(op_type, [x], axis=dim)
    return rule


def _onnx_log_sigmoid(ctx, a):
    dt = ctx.out.dtype
    x = ctx.operand(0, dt)
    soft = ctx.node("Log", [ctx.node("Add", [ctx.const(1, dt), ctx.node(
        "Exp", [ctx.node("Neg", [ctx.node("Abs", [x])])])])])
    return ctx.node("Sub", [ctx.node("Min", [x, ctx.const(0, dt)]), soft])


def _onnx_hardtanh(ctx, a, *, min_val, max_val):
    return E._onnx_clamp(ctx, a, min=min_val, max=max_val)


def _onnx_pad(ctx, x, *, pad, value):
    ndim = ctx.metas[0].ndim
    begin, end = [0] * ndim, [0] * ndim
    for k in range(len(pad) // 2):
        begin[ndim - 1 - k], end[ndim - 1 - k] = pad[2 * k], pad[2 * k + 1]
    return ctx.node("Pad", [x, ctx.ints(begin + end), ctx.const(value, ctx.out.dtype)])


def _onnx_nll(ctx, logp, target, *, ignore_index):
    dt = ctx.out.dtype
    index = ctx.cast(target, ctx.metas[1].dtype, "int64")
    valid = ctx.node("Not", [ctx.node("Equal", [index, ctx.const(ignore_index, "int64")])])
    picked = ctx.node("Where", [valid, index, ctx.const(0, "int64")])
    taken = ctx.node("GatherElements", [logp, ctx.node("Unsqueeze", [picked, ctx.ints([1])])],
                     axis=1)
    loss = ctx.node("Neg", [ctx.node("Squeeze", [taken, ctx.ints([1])])])
    return ctx.node("Where", [valid, loss, ctx.const(0, dt)])


def _onnx_bce(ctx, x, y):
    dt = ctx.out.dtype
    p, t = ctx.operand(0, dt), ctx.operand(1, dt)
    floor = ctx.const(-100, dt)
    log_p = ctx.node("Max", [ctx.node("Log", [p]), floor])
    log_q = ctx.node("Max", [ctx.node("Log", [ctx.node("Sub", [ctx.const(1, dt), p])]), floor])
    return ctx.node("Sub", [ctx.node("Mul", [ctx.node("Sub", [t, ctx.const(1, dt)]), log_q]),
                            ctx.node("Mul", [t, log_p])])


def _onnx_embedding(ctx, weight, indices, *, padding_idx, scale_grad_by_freq=False):
    return ctx.node("Gather", [weight, ctx.cast(indices, ctx.metas[1].dtype, "int64")], axis=0)


def _onnx_one_hot(ctx, x, *, num_classes):
    import numpy as np
    index = ctx.node("Unsqueeze", [ctx.cast(x, ctx.metas[0].dtype, "int64"), ctx.ints([-1])])
    hits = ctx.node("Equal", [index, ctx.const(np.arange(num_classes, dtype=np.int64))])
    return ctx.node("Cast", [hits], to=ctx.elem_type("int64"))


_NN_BACKWARD = OnnxNotExportable("a gradient op (backward only); an exported model is "
                                 "inference only")

onnx_rules(softmax=_onnx_softmax("Softmax"), log_softmax=_onnx_softmax("LogSoftmax"),
           log_sigmoid=_onnx_log_sigmoid, erf="Erf", pad_constant=_onnx_pad, nll_loss=_onnx_nll,
           binary_cross_entropy=_onnx_bce, embedding=_onnx_embedding, one_hot=_onnx_one_hot,
           nll_loss_backward=_NN_BACKWARD, embedding_backward=_NN_BACKWARD,
           hardtanh=_onnx_hardtanh, hardtanh_backward=_NN_BACKWARD)
