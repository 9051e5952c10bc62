"""The ``hf.`` function forms of tensor math (``hf.exp(x)`` == ``x.exp()``), with PyTorch's
argument names. Composites come from ``composite``; the rest apply one primitive."""
from __future__ import annotations

from . import composite as C
from . import elementwise as E
from .composite import (abs, all, any, argmax, argmin, bmm, broadcast_to, cat, chunk, clamp,
                        cumprod, cumsum, dot, einsum, flatten, gather, index_select, logsumexp,
                        masked_fill, matmul, max, maximum, mean, min, minimum, mm, mv, narrow,
                        nonzero, outer, permute, pow, prod, reshape, round, split, squeeze, stack,
                        std, sum, transpose, unsqueeze, var, where)
from .composite_compare import (clamp_max, clamp_min, count_nonzero, isclose, logical_and,
                                logical_or, logical_xor, nan_to_num)
from .composite_math import (addcdiv, addcmul, bernoulli, diff, div, fmod, hypot, lerp,
                             logaddexp, meshgrid, normal, repeat_interleave, true_divide)
from .composite_math import scaled_other as _scaled_other
from .composite_distance import cdist, cosine_similarity, pairwise_distance
from .composite_more import (addbmm, addmm, addmv, addr, aminmax, argwhere, baddbmm, cross,
                             index_add, logit, nanmean, rot90, take_along_dim, tensor_split,
                             tensordot, tril_indices, triu_indices, xlogy)
from .composite_matrix import diag, diagonal, norm, trace
from .composite_extra import (broadcast_shapes, broadcast_tensors, flip, fmax, fmin,
                              masked_select, movedim, nansum, roll, scatter, scatter_add,
                              std_mean, swapaxes, tile, tril, triu, unbind, var_mean)
from ..dtypes import DType, as_dtype
from ..dtypes import promote_types as _promote_types
from ..dtypes import result_type as _result_type
from .registry import apply
from .search import (bincount, bucketize, cummax, cummin, isin, kthvalue, searchsorted,
                     unique)
from .sorting import argsort, median, msort, nanquantile, quantile, randperm, sort, topk

__all__ = ["abs", "all", "any", "argmax", "argmin", "broadcast_to", "cat", "chunk", "clamp",
           "clip", "cumprod", "cumsum", "einsum", "flatten", "gather", "index_select", "logsumexp",
           "masked_fill", "matmul",
           "max", "maximum", "mean", "min", "minimum", "narrow", "permute", "pow", "prod",
           "reshape", "split", "squeeze", "stack", "std", "sum", "transpose", "unsqueeze", "var",
           "where", "exp", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
           "relu", "neg", "sign", "floor", "ceil", "round", "isnan", "isinf", "isfinite", "add",
           "sub", "mul", "div", "square", "concat", "amax", "amin", "logical_not", "eq", "ne",
           "lt", "le", "gt", "ge", "expand", "concatenate", "softmax", "log_softmax", "is_tensor",
           "numel", "allclose", "equal", "is_floating_point", "unflatten", "floor_divide",
           "remainder", "nonzero",
           "mm", "bmm", "mv", "dot", "outer", "reciprocal", "log2", "log10", "exp2", "expm1",
           "tan", "atan", "asin", "acos", "sinh", "cosh", "trunc", "frac", "erf",
           "broadcast_shapes", "broadcast_tensors", "flip", "fmax", "fmin", "masked_select",
           "movedim", "nansum", "roll", "swapaxes", "tile", "tril", "triu", "unbind",
           "clamp_max", "clamp_min", "count_nonzero", "isclose", "logical_and", "logical_or",
           "logical_xor", "nan_to_num", "clone", "t", "argsort", "msort", "randperm", "sort",
           "topk", "diag", "diagonal", "norm", "trace", "addcdiv", "addcmul", "bernoulli",
           "diff", "fmod", "hypot", "lerp", "logaddexp", "meshgrid", "normal",
           "repeat_interleave", "atan2", "arctan2", "divide", "true_divide",
           "scatter", "scatter_add", "median", "var_mean", "std_mean", "result_type",
           "promote_types", "quantile", "nanquantile", "cdist", "cosine_similarity",
           "pairwise_distance", "addmm", "aminmax", "argwhere", "baddbmm", "index_add", "logit",
           "rot90", "tril_indices", "triu_indices", "xlogy", "bincount", "bucketize", "cummax",
           "cummin", "isin", "kthvalue", "searchsorted", "unique", "addbmm", "addmv", "addr",
           "take_along_dim", "tensor_split", "tensordot", "nanmean", "cross"]

clip = clamp
concat = concatenate = cat
expand = C.expand


def _unary(op, name):
    def fn(input):  # noqa: A002 - PyTorch's argument name
        return apply(op, input)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name} (see ``Tensor.{name}``)."
    return fn


exp = _unary(E.exp, "exp")
log = _unary(E.log, "log")
log1p = _unary(E.log1p, "log1p")
sqrt = _unary(E.sqrt, "sqrt")
rsqrt = _unary(E.rsqrt, "rsqrt")
sin = _unary(E.sin, "sin")
cos = _unary(E.cos, "cos")
tanh = _unary(E.tanh, "tanh")
sigmoid = _unary(E.sigmoid, "sigmoid")
relu = _unary(E.relu, "relu")
neg = _unary(E.neg, "neg")
sign = _unary(E.sign, "sign")
floor = _unary(E.floor, "floor")
ceil = _unary(E.ceil, "ceil")
isnan = _unary(E.isnan, "isnan")
isinf = _unary(E.isinf, "isinf")
isfinite = _unary(E.isfinite, "isfinite")
log2 = _unary(E.log2, "log2")
log10 = _unary(E.log10, "log10")
exp2 = _unary(E.exp2, "exp2")
expm1 = _unary(E.expm1, "expm1")
tan = _unary(E.tan, "tan")
atan = _unary(E.atan, "atan")
asin = _unary(E.asin, "asin")
acos = _unary(E.acos, "acos")
sinh = _unary(E.sinh, "sinh")
cosh = _unary(E.cosh, "cosh")
trunc = _unary(E.trunc, "trunc")


def frac(input):  # noqa: A002
    return input.frac()


def erf(input):  # noqa: A002
    return input.erf()


def _binary(op, name):
    def fn(input, other):  # noqa: A002
        return apply(op, input, other)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name} with broadcasting."
    return fn


def add(input, other, *, alpha=1):  # noqa: A002
    """``input + alpha * other`` with broadcasting."""
    return apply(E.add, input, _scaled_other("add", input, other, alpha))


def sub(input, other, *, alpha=1):  # noqa: A002
    """``input - alpha * other`` with broadcasting."""
    return apply(E.sub, input, _scaled_other("sub", input, other, alpha))


mul = _binary(E.mul, "mul")
divide = div
floor_divide = _binary(E.floor_divide, "floor_divide")
remainder = _binary(E.remainder, "remainder")
atan2 = arctan2 = _binary(E.atan2, "atan2")
eq = _binary(E.eq, "eq")
ne = _binary(E.ne, "ne")
lt = _binary(E.lt, "lt")
le = _binary(E.le, "le")
gt = _binary(E.gt, "gt")
ge = _binary(E.ge, "ge")


def reciprocal(input):  # noqa: A002
    return apply(E.div, 1.0, input)


def square(input):  # noqa: A002
    return input.square()


def amax(input, dim=None, keepdim=False):  # noqa: A002
    return input.amax(dim, keepdim)


def amin(input, dim=None, keepdim=False):  # noqa: A002
    return input.amin(dim, keepdim)


def logical_not(input):  # noqa: A002
    return input.logical_not()


def softmax(input, dim, dtype=None):  # noqa: A002
    return input.softmax(dim, dtype)


def log_softmax(input, dim, dtype=None):  # noqa: A002
    return input.log_softmax(dim, dtype)


def is_tensor(obj) -> bool:
    """True for hybridfw tensors (eager Tensors and static Variables)."""
    from .registry import TensorLike  # noqa: PLC0415
    return isinstance(obj, TensorLike)


def numel(input) -> int:  # noqa: A002
    return input.numel()


def allclose(input, other, rtol: float = 1e-5, atol: float = 1e-8,  # noqa: A002
             equal_nan: bool = False) -> bool:
    """Whether :func:`isclose` holds everywhere (a Python bool)."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def clone(input):  # noqa: A002
    """A copy with its own storage (differentiable), as ``input.clone()``."""
    return input.clone()


def t(input):  # noqa: A002
    """The transpose of a matrix (a tensor of 0 or 1 dims as it is), as ``input.t()``."""
    return input.t()


def equal(input, other) -> bool:  # noqa: A002
    """Same shape and the same elements."""
    return input.equal(other)


def is_floating_point(input) -> bool:  # noqa: A002
    """Whether ``input``'s dtype is a floating-point one, as ``input.is_floating_point()``."""
    return input.is_floating_point()


def unflatten(input, dim: int, sizes):  # noqa: A002
    """``input`` with ``dim`` split into ``sizes``, as ``input.unflatten(dim, sizes)``."""
    return C.unflatten(input, dim, sizes)


def result_type(tensor, other) -> DType:
    """The dtype an arithmetic op on ``tensor`` and ``other`` (tensors or Python numbers)
    gives, by PyTorch's promotion rules.

    >>> hf.result_type(hf.tensor([1, 2]), 1.0)
    hybridfw.float32
    """
    return _result_type(tensor, other)


def promote_types(type1, type2) -> DType:
    """The smallest dtype both ``type1`` and ``type2`` convert to (PyTorch's rules).

    >>> hf.promote_types(hf.int32, hf.float16)
    hybridfw.float16
    """
    return _promote_types(as_dtype(type1), as_dtype(type2))
