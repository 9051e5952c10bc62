"""Reduction primitives: sum, amax/amin, argmax/argmin, prod, cumsum.

``dim`` is None (all dims), an int, or a tuple; the public wrappers pass it on as given and
``infer`` validates it. Integer and bool sums accumulate in int64, float16 sums and cumulative
sums in float32 (the result cast back to float16), as in PyTorch.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import int64
from . import shape_ops
from .elementwise import eq, where
from .indexing import getitem
from .infer import normalize_dim, normalize_dims
from .lowering_rules import array_rule
from .registry import OnnxNotExportable, apply, onnx_rules, register


def _reduced_shape(shape, dims, keepdim):
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def _axis(dim, ndim):
    """numpy's axis argument for a validated ``dim`` (None means all; on a 0-d array, dim 0 or
    -1 names no real dim: nothing is reduced)."""
    if dim is None:
        return None
    if not ndim:
        return ()
    if isinstance(dim, int):
        return dim
    return tuple(dim)


def expand_reduced(g, shape, dim, keepdim):
    """Broadcast a reduction's gradient (or output) back to the input's ``shape``."""
    if not keepdim:
        dims = normalize_dims("expand_reduced", dim, len(shape))
        g = shape_ops.insert_unit_dims(g, tuple(sorted(dims)))
    return apply(shape_ops.broadcast_to, g, shape=tuple(shape))


def _sum_infer(a, *, dim=None, keepdim=False):
    dims = normalize_dims("sum", dim, a.ndim)
    dt = a.dtype if a.dtype.is_floating_point else int64
    return _reduced_shape(a.shape, dims, keepdim), dt, None


def _accumulate_dtype(a):
    """The dtype a sum of ``a`` accumulates in: its own for float32/64, float32 for float16
    (2048 + 1 is 2048 in float16), int64 for integers and bools."""
    if a.dtype.kind == "f":
        return "float32" if a.dtype.itemsize == 2 else None
    return "int64"


def _sum_kernel(xp, a, *, dim=None, keepdim=False, out=None):
    dt = _accumulate_dtype(a)
    if dt == "float32":  # float16: accumulate in float32, hand back float16
        total = xp.sum(a, axis=_axis(dim, a.ndim), keepdims=keepdim, dtype=dt)
        if out is None:
            return total.astype(a.dtype)
        out[...] = total
        return out
    if xp is np:  # the ufunc method directly: np.sum adds microseconds of wrapping per call
        return np.add.reduce(a, axis=_axis(dim, a.ndim), keepdims=keepdim, dtype=dt, out=out)
    return xp.sum(a, axis=_axis(dim, a.ndim), keepdims=keepdim, dtype=dt, out=out)


def _sum_lower(ctx, a, *, dim=None, keepdim=False):
    """A loop adding the elements in the result dtype (int64 for integers, as the kernel)."""
    dims = normalize_dims("sum", dim, len(ctx.shapes[0]))
    return ctx.reduce(0, dims, keepdim, start=0, combine=lambda acc, x: f"{acc} + {x}")


sum_ = register("sum", infer=_sum_infer, kernel=_sum_kernel, lower=array_rule(_sum_lower),
                supports_out=True, vjp=(lambda g, out, a, *, dim=None, keepdim=False:
                     expand_reduced(g, a.shape, dim, keepdim),))


def _minmax_infer(name):
    def infer(a, *, dim=None, keepdim=False):
        dims = normalize_dims(name, dim, a.ndim)
        for d in dims:
            if a.shape[d] == 0:
                raise ValueError(f"{name}: cannot reduce over dim {d} of size 0 "
                                 f"(shape {a.shape})")
        return _reduced_shape(a.shape, dims, keepdim), a.dtype, None
    return infer


def _extreme_grad(g, out, a, *, dim=None, keepdim=False):
    # Ties share the gradient evenly (PyTorch's amax/amin and full max()/min()).
    mask = apply(eq, a, expand_reduced(out, a.shape, dim, keepdim))
    count = apply(sum_, mask, dim=dim, keepdim=True)
    return expand_reduced(g, a.shape, dim, keepdim) * mask / count


amax = register("amax", infer=_minmax_infer("amax"),
                kernel=lambda xp, a, *, dim=None, keepdim=False:
                xp.amax(a, axis=_axis(dim, a.ndim), keepdims=keepdim),
                save=(0,), save_output=True, vjp=(_extreme_grad,))
amin = register("amin", infer=_minmax_infer("amin"),
                kernel=lambda xp, a, *, dim=None, keepdim=False:
                xp.amin(a, axis=_axis(dim, a.ndim), keepdims=keepdim),
                save=(0,), save_output=True, vjp=(_extreme_grad,))


def _arg_infer(name):
    def infer(a, *, dim=None, keepdim=False):
        if dim is None:
            if a.ndim and 0 in a.shape:
                raise ValueError(f"{name}: cannot reduce an empty tensor of shape {a.shape}")
            return ((1,) * a.ndim if keepdim else ()), int64, None
        d = normalize_dim(name, dim, a.ndim)
        if a.ndim and a.shape[d] == 0:
            raise ValueError(f"{name}: cannot reduce over dim {d} of size 0 (shape {a.shape})")
        return _reduced_shape(a.shape, (d,) if a.ndim else (), keepdim), int64, None
    return infer


def _arg_kernel(fname):
    def kernel(xp, a, *, dim=None, keepdim=False):
        if dim is None:
            r = getattr(xp, fname)(a.reshape(-1))
            return r.reshape((1,) * a.ndim) if keepdim else r
        if a.ndim == 0:
            return xp.zeros((), dtype="int64")
        return getattr(xp, fname)(a, axis=dim, keepdims=keepdim).astype("int64", copy=False)
    return kernel


argmax = register("argmax", infer=_arg_infer("argmax"), kernel=_arg_kernel("argmax"))
argmin = register("argmin", infer=_arg_infer("argmin"), kernel=_arg_kernel("argmin"))


def _prod_infer(a, *, dim=None, keepdim=False):
    shape, dt, _ = _sum_infer(a, dim=dim, keepdim=keepdim)
    return shape, dt, None


def _prod_kernel(xp, a, *, dim=None, keepdim=False):
    dt = None if a.dtype.kind == "f" else "int64"
    return xp.prod(a, axis=_axis(dim, a.ndim), keepdims=keepdim, dtype=dt)


def _exclusive_prod_infer(a, *, dim=None):
    return a.shape, a.dtype, None


def _exclusive_prod_kernel(xp, a, *, dim=None):
    """For each element, the product of the others in its reduction group (zeros handled)."""
    if a.size == 0:
        return xp.zeros_like(a)
    if a.ndim == 0:  # the product of no other element (ascontiguousarray below makes 1 dim)
        return xp.ones_like(a)
    dims = normalize_dims("prod", dim, a.ndim)
    rest = [i for i in range(a.ndim) if i not in dims]
    moved = xp.transpose(a, rest + list(dims))
    lead = moved.shape[:len(rest)]
    flat = moved.reshape(lead + (-1,))
    ones = xp.ones(lead + (1,), dtype=a.dtype)
    left = xp.concatenate([ones, xp.cumprod(flat[..., :-1], axis=-1)], axis=-1)
    right = xp.cumprod(flat[..., ::-1][..., :-1], axis=-1)[..., ::-1]
    right = xp.concatenate([right, ones], axis=-1)
    result = (left * right).reshape(moved.shape)
    inverse = [0] * a.ndim
    for pos, axis in enumerate(rest + list(dims)):
        inverse[axis] = pos
    return xp.ascontiguousarray(xp.transpose(result, inverse))


def _exclusive_prod_grad(g, out, a, *, dim=None):
    """Within a reduction group of n elements, ``d excl_k / d a_j`` is the product of the
    elements other than ``j`` and ``k`` (0 for ``j == k``), so ``grad_j = sum_k g_k E[j, k]``
    with ``E`` the exclusive products of the group with element ``j`` set to 1 (row ``j``),
    diagonal zeroed: zeros in ``a`` need no division. It costs an (n, n) matrix per group."""
    from .creation import eye
    from .shape_ops import _inverse_permutation, permute, reshape
    shape = tuple(a.shape)
    if any(not isinstance(s, int) or s < 0 for s in shape):
        raise RuntimeError("prod: double backward through a product over dims whose sizes are "
                           f"known only at run time (shape {shape}) is not supported")
    dims = normalize_dims("prod", dim, len(shape))
    rest = [i for i in range(len(shape)) if i not in dims]
    order = tuple(rest + list(dims))
    lead = tuple(shape[i] for i in rest)
    n = 1
    for d in dims:
        n *= shape[d]
    if n <= 1:  # the product of no other element is 1: no dependence on a
        return g * 0.0
    flat_a = apply(reshape, apply(permute, a, dims=order), shape=lead + (1, n))
    flat_g = apply(reshape, apply(permute, g, dims=order), shape=lead + (1, n))
    identity = apply(eye, n=n, m=n, dtype=a.dtype, device=str(g.device))
    off = 1.0 - identity
    others = apply(exclusive_prod, flat_a * off + identity, dim=len(lead) + 1) * off
    grad = apply(sum_, others * flat_g, dim=(len(lead) + 1,), keepdim=False)
    grad = apply(reshape, grad, shape=tuple(shape[i] for i in order))
    return apply(permute, grad, dims=_inverse_permutation(order))


# The product of the other elements, prod's gradient; its own gradient (prod's double backward)
# is written in these same ops, so every order works.
exclusive_prod = register("exclusive_prod", infer=_exclusive_prod_infer,
                          kernel=_exclusive_prod_kernel, save=(0,), vjp=(_exclusive_prod_grad,))

prod = register("prod", infer=_prod_infer, kernel=_prod_kernel, save=(0,),
                vjp=(lambda g, out, a, *, dim=None, keepdim=False:
                     expand_reduced(g, a.shape, dim, keepdim) * apply(exclusive_prod, a, dim=dim),))


def _cumulative_infer(name):
    def infer(a, *, dim):
        normalize_dim(name, dim, a.ndim)
        dt = a.dtype if a.dtype.is_floating_point else int64
        return a.shape, dt, None
    return infer


def _cumulative_kernel(fname):
    """``xp.cumsum``/``xp.cumprod`` along ``dim``: integers and bools give int64, floats
    accumulate in float64 and keep their dtype (as PyTorch's CPU kernels: a float32 running
    sum of 10**5 times 0.1 drifts by over 1 otherwise)."""
    def kernel(xp, a, *, dim):
        result = a.dtype if a.dtype.kind == "f" else "int64"
        if a.ndim == 0:
            return a.astype(result)
        accumulate = "float64" if a.dtype.kind == "f" else "int64"
        return getattr(xp, fname)(a, axis=dim, dtype=accumulate).astype(result, copy=False)
    kernel.__name__ = f"{fname}_kernel"
    return kernel


def _cumsum_grad(g, out, a, *, dim):
    # reverse cumulative sum: total - prefix + self
    return apply(sum_, g, dim=dim, keepdim=True) - apply(cumsum, g, dim=dim) + g


cumsum = register("cumsum", infer=_cumulative_infer("cumsum"),
                  kernel=_cumulative_kernel("cumsum"), vjp=(_cumsum_grad,))


def _cumprod_grad(g, out, a, *, dim, depth=2):
    """PyTorch's rule, zeros included. Along ``dim``, before the first zero of ``a`` the
    gradient is the reverse cumulative sum of ``g * out`` over ``a``; at the first zero it is
    that sum for ``a`` with that zero made 1 (its factor left out); past it, that zero times
    this same rule for ``a`` with the zero made 1: 0, written so that its own derivative (the
    second one) is right. ``depth`` bounds that nesting (two zeros per slice are enough for
    exact second derivatives; past the last nesting the gradient is the constant 0)."""
    if a.ndim == 0:
        return g

    # summed from the end (as PyTorch), not as total - prefix: that cancels badly where the
    # later products are tiny next to the earlier ones
    reverse = (("slice", None, None, None),) * (dim % a.ndim) + (("slice", None, None, -1),)

    def reverse_cumsum(v):
        flipped = apply(getitem, v, spec=reverse)
        return apply(getitem, apply(cumsum, flipped, dim=dim), spec=reverse)

    zero = apply(eq, a, 0)
    zeros_so_far = apply(cumsum, zero, dim=dim)
    first_zero = zero & apply(eq, zeros_so_far, 1)
    before = reverse_cumsum(g * out) / apply(where, zero, 1, a)
    without_first = apply(where, first_zero, 1, a)
    out_without_first = apply(cumprod, without_first, dim=dim)
    at_first = reverse_cumsum(g * out_without_first)
    past = 0
    if depth:
        first_value = apply(sum_, apply(where, first_zero, a, 0), dim=dim, keepdim=True)
        past = first_value * _cumprod_grad(g, out_without_first, without_first, dim=dim,
                                           depth=depth - 1)
    return apply(where, apply(eq, zeros_so_far, 0), before,
                 apply(where, first_zero, at_first, past))


cumprod = register("cumprod", infer=_cumulative_infer("cumprod"),
                   kernel=_cumulative_kernel("cumprod"), save=(0,), save_output=True,
                   vjp=(_cumprod_grad,))


def _dim_numel_infer(a, *, dim=None):
    normalize_dims("dim_numel", dim, a.ndim)
    return (), int64, None


def _dim_numel_kernel(xp, a, *, dim=None):
    n = 1
    for d in normalize_dims("dim_numel", dim, a.ndim):
        n *= a.shape[d]
    return xp.asarray(n, dtype="int64")


# The number of elements over ``dim`` as a 0-d tensor, read from the run-time shape: what mean
# and var divide by when a static program only knows a reduced dim as -1.
dim_numel = register("dim_numel", infer=_dim_numel_infer, kernel=_dim_numel_kernel)

__all__ = ["sum_", "amax", "amin", "argmax", "argmin", "prod", "cumsum", "cumprod",
           "expand_reduced",
           "exclusive_prod", "dim_numel"]


# ---- ONNX lowering rules (hybridfw.onnx) ----------------------------------------------------
def _onnx_reduce(op_type):
    """ReduceSum/Max/Min/Prod over ``dim`` (None: all dims), integers accumulated in int64."""
    def rule(ctx, a, *, dim=None, keepdim=False):
        meta = ctx.metas[0]
        x = ctx.operand(0, ctx.out.dtype)
        if meta.ndim == 0:
            return ctx.node("Identity", [x])
        dims = normalize_dims(op_type, dim, meta.ndim)
        if not dims:  # dim=(): nothing to reduce
            return ctx.node("Identity", [x])
        return ctx.node(op_type, [x, ctx.ints(dims)], keepdims=int(bool(keepdim)))
    return rule


def _onnx_arg(op_type):
    def rule(ctx, a, *, dim=None, keepdim=False):
        meta = ctx.metas[0]
        if meta.ndim == 0:
            return ctx.const(0, "int64")
        if dim is None:
            flat = ctx.node(op_type, [ctx.reshape(a, [-1])], axis=0, keepdims=0)
            return ctx.reshape(flat, [1] * meta.ndim) if keepdim else flat
        return ctx.node(op_type, [a], axis=dim % meta.ndim, keepdims=int(bool(keepdim)))
    return rule


def _onnx_cumsum(ctx, a, *, dim):
    x = ctx.operand(0, ctx.out.dtype)
    if ctx.metas[0].ndim == 0:
        return ctx.node("Identity", [x])
    return ctx.node("CumSum", [x, ctx.const(dim, "int64")])


def _onnx_cumprod(ctx, a, *, dim):
    """ONNX has no CumProd: exp of the CumSum of log|a|, with the sign from a CumSum counting
    negative factors and zeros kept by a CumSum counting zeros."""
    dt = ctx.out.dtype
    x = ctx.operand(0, dt)
    if ctx.metas[0].ndim == 0:
        return ctx.node("Identity", [x])
    axis = ctx.const(dim, "int64")

    def count(mask):
        return ctx.node("CumSum", [ctx.cast(mask, "bool", "int64"), axis])

    zero = ctx.const(0, dt)
    zeros = count(ctx.node("Equal", [x, zero]))
    negatives = count(ctx.node("Less", [x, zero]))
    magnitude = ctx.node("Exp", [ctx.node("CumSum", [
        ctx.node("Log", [ctx.node("Abs", [ctx.cast(x, dt, "float64")])]), axis])])
    if not dt.is_floating_point:  # whole numbers: undo exp/log rounding before the cast
        magnitude = ctx.node("Round", [magnitude])
    magnitude = ctx.cast(magnitude, "float64", dt)
    odd = ctx.node("Equal", [ctx.node("Mod", [negatives, ctx.const(2, "int64")]),
                             ctx.const(1, "int64")])
    signed = ctx.node("Where", [odd, ctx.node("Neg", [magnitude]), magnitude])
    return ctx.node("Where", [ctx.node("Greater", [zeros, ctx.const(0, "int64")]), zero,
                              signed])


def _onnx_dim_numel(ctx, a, *, dim=None):
    meta = ctx.metas[0]
    dims = normalize_dims("dim_numel", dim, meta.ndim)
    sizes = [meta.shape[d] for d in dims]
    if -1 not in sizes:
        return ctx.const(int(np.prod(sizes, dtype=np.int64)), "int64")
    picked = ctx.node("Gather", [ctx.shape_of(a), ctx.ints(dims)], axis=0)
    return ctx.node("ReduceProd", [picked], keepdims=0)


onnx_rules(sum=_onnx_reduce("ReduceSum"), amax=_onnx_reduce("ReduceMax"),
           amin=_onnx_reduce("ReduceMin"), prod=_onnx_reduce("ReduceProd"),
           argmax=_onnx_arg("ArgMax"), argmin=_onnx_arg("ArgMin"), cumsum=_onnx_cumsum,
           cumprod=_onnx_cumprod, dim_numel=_onnx_dim_numel,
           exclusive_prod=OnnxNotExportable("a gradient helper of prod (backward only); an "
                                            "exported model is inference only"))
