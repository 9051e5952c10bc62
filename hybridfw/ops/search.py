"""Searching and counting with PyTorch's names: ``searchsorted bucketize bincount unique isin
cummax cummin kthvalue``.

Four primitives, none with a gradient (they give indices and counts):
``searchsorted_indices`` (insertion points into sorted rows), ``bincount`` (occurrences, or
summed weights, of each non-negative integer), ``unique_inverse_indices`` (for each element,
or slice along a dim, the rank of its value among the distinct ones) and
``cumulative_extreme_indices`` (where the running max/min was taken). The rest are
compositions: values come from ``gather``/``index_select`` by those indices, so ``cummax``,
``cummin`` and ``kthvalue`` values are differentiable and everything runs in static programs.
"""
from __future__ import annotations

from collections import namedtuple

from ..dtypes import bool_, float32, float64, int32, int64, result_type
from . import composite as C
from . import elementwise as E
from .factories import zeros_like
from .infer import normalize_dim
from .registry import OnnxNotExportable, TensorLike, apply, onnx_rules, register
from .sorting import _stable_argsort, argsort, checked_k, sort

__all__ = ["searchsorted", "bucketize", "bincount", "unique", "isin", "cummax", "cummin",
           "kthvalue", "CummaxResult", "CumminResult", "KthvalueResult"]

CummaxResult = namedtuple("cummax", ["values", "indices"])
CumminResult = namedtuple("cummin", ["values", "indices"])
KthvalueResult = namedtuple("kthvalue", ["values", "indices"])


# ---- searchsorted_indices -------------------------------------------------------------------
def _searchsorted_infer(sorted_sequence, values, *, right):
    s, v = sorted_sequence, values
    if s.ndim == 0:
        raise ValueError("searchsorted: sorted_sequence must have at least 1 dim, got a 0-d "
                         "tensor")
    if s.ndim > 1 and (v.ndim != s.ndim or any(
            a != b and -1 not in (a, b) for a, b in zip(s.shape[:-1], v.shape[:-1]))):
        raise ValueError(f"searchsorted: sorted_sequence of shape {tuple(s.shape)} must be 1-d "
                         f"or share all but its last dim with values, got values of shape "
                         f"{tuple(v.shape)}")
    if s.dtype is bool_ or v.dtype is bool_:
        raise TypeError(f"searchsorted: bool tensors are not supported (got {s.dtype} and "
                        f"{v.dtype})")
    return v.shape, int64, result_type(s, v)


def _searchsorted_kernel(xp, sorted_sequence, values, *, right):
    s, v = sorted_sequence, values
    if s.ndim == 1:
        return xp.searchsorted(s, v, side="right" if right else "left").astype("int64")
    # Rows at once: sort each row of sequence and values merged (values first for left, so a
    # value precedes equal sequence elements; last for right). A value's position in the
    # merged order minus its rank among the values is the number of sequence elements before it.
    n, m = s.shape[-1], v.shape[-1]
    merged = xp.concatenate([s, v] if right else [v, s], axis=-1)
    position = _stable_argsort(xp, _stable_argsort(xp, merged, -1), -1)
    position = position[..., n:] if right else position[..., :m]
    rank = _stable_argsort(xp, _stable_argsort(xp, v, -1), -1)
    return (position - rank).astype("int64")


searchsorted_indices = register(
    "searchsorted_indices", infer=_searchsorted_infer, kernel=_searchsorted_kernel,
    doc="insertion points of values into the sorted last dim of sorted_sequence")


# ---- bincount -------------------------------------------------------------------------------
def _bincount_infer(input, weights=None, *, minlength):  # noqa: A002
    if input.dtype.is_floating_point or input.dtype is bool_:
        raise TypeError(f"bincount: expects a tensor of non-negative integers, got dtype "
                        f"{input.dtype}")
    if input.ndim != 1:
        raise ValueError(f"bincount: expects a 1-d tensor, got shape {tuple(input.shape)}")
    if weights is None:
        return (-1,), int64, None
    if weights.shape != input.shape:
        raise ValueError(f"bincount: weights of shape {tuple(weights.shape)} must have the "
                         f"input's shape {tuple(input.shape)}")
    return (-1,), (weights.dtype if weights.dtype in (float32, float64) else float64), None


def _bincount_kernel(xp, input, weights=None, *, minlength):  # noqa: A002
    if input.size and int(input.min()) < 0:
        raise ValueError("bincount: the input holds a negative value; it counts non-negative "
                         "integers only")
    if weights is None:
        return xp.bincount(input, minlength=minlength).astype("int64")
    out = xp.bincount(input, weights.astype("float64"), minlength=minlength)
    return out.astype(weights.dtype if weights.dtype.kind == "f" and
                      weights.dtype.itemsize >= 4 else "float64")


bincount_op = register("bincount", infer=_bincount_infer, kernel=_bincount_kernel,
                       doc="occurrences (or summed weights) of each non-negative integer")


def _onnx_bincount(ctx, x, weights=None, *, minlength):
    index = ctx.cast(x, ctx.metas[0].dtype, "int64")
    top = ctx.node("ReduceMax", [index], keepdims=1)  # (1,)
    size = ctx.node("Max", [ctx.node("Add", [top, ctx.ints([1])]), ctx.ints([minlength])])
    dtype = ctx.out.dtype
    zeros = ctx.node("ConstantOfShape", [size], value=_onnx_scalar(0, dtype))
    updates = (ctx.node("ConstantOfShape", [ctx.shape_of(index)], value=_onnx_scalar(1, dtype))
               if weights is None else ctx.cast(weights, ctx.metas[1].dtype, dtype))
    return ctx.node("ScatterElements", [zeros, index, updates], axis=0, reduction="add")


def _onnx_scalar(value, dtype):
    import numpy as np
    from onnx import numpy_helper
    return numpy_helper.from_array(np.asarray([value], dtype=dtype.np))


# ---- unique_inverse_indices -----------------------------------------------------------------
def _unique_infer(input, *, dim):  # noqa: A002
    if dim is None:
        return input.shape, int64, None
    d = normalize_dim("unique", dim, input.ndim)
    return ((input.shape[d] if input.ndim else 1),), int64, None


def _unique_kernel(xp, input, *, dim):  # noqa: A002
    if dim is None:
        # every NaN is a value of its own, as in PyTorch (numpy merges them by default)
        nan_rule = {"equal_nan": False} if xp.__name__ == "numpy" else {}
        inverse = xp.unique(input.reshape(-1), return_inverse=True, **nan_rule)[1]
        return inverse.reshape(input.shape).astype("int64")
    if input.ndim == 0:
        return xp.zeros((1,), dtype="int64")
    rows = xp.moveaxis(input, dim, 0)
    rows = rows.reshape(rows.shape[0], -1)
    if rows.shape[0] == 0:
        return xp.zeros((0,), dtype="int64")
    return xp.unique(rows, axis=0, return_inverse=True)[1].reshape(-1).astype("int64")


unique_inverse_indices = register(
    "unique_inverse_indices", infer=_unique_infer, kernel=_unique_kernel,
    doc="for each element (or slice along dim) the rank of its value among the distinct ones")


def _onnx_unique(ctx, x, *, dim):
    if dim is None:
        flat = ctx.reshape(x, [-1])
        inverse = ctx.node("Unique", [flat], outputs=4, sorted=1)[2]
        return ctx.node("Reshape", [inverse, ctx.shape_of(x)])
    return ctx.node("Unique", [x], outputs=4, sorted=1, axis=dim)[2]


# ---- cumulative_extreme_indices -------------------------------------------------------------
def _extreme_infer(input, *, dim, largest):  # noqa: A002
    normalize_dim("cummax" if largest else "cummin", dim, input.ndim)
    return input.shape, int64, None


def _running(xp, combine, a):
    """The inclusive scan of ``a`` along its last dim by the associative ``combine(earlier,
    later)``, in log2(n) vectorized steps (numpy and cupy alike)."""
    a = a.copy()
    step = 1
    while step < a.shape[-1]:
        a[..., step:] = combine(a[..., :-step], a[..., step:])
        step *= 2
    return a


def _extreme_kernel(xp, input, *, dim, largest):  # noqa: A002
    if input.ndim == 0:
        return xp.zeros((), dtype="int64")
    a = xp.moveaxis(input, dim, -1)
    # PyTorch's rule: the later element takes over when it is NaN, or when neither is NaN and
    # it is >= (cummax) / <= (cummin) the running extreme
    extreme = _running(xp, xp.maximum if largest else xp.minimum, a)  # (NaN propagates)
    hit = a == extreme
    if a.dtype.kind == "f":
        hit |= xp.isnan(a)
    positions = xp.broadcast_to(xp.arange(a.shape[-1], dtype="int64"), a.shape)
    taken = _running(xp, xp.maximum, xp.where(hit, positions, 0))
    return xp.ascontiguousarray(xp.moveaxis(taken, -1, dim))


cumulative_extreme_indices = register(
    "cumulative_extreme_indices", infer=_extreme_infer, kernel=_extreme_kernel,
    doc="where the running max (largest) or min along dim was taken (cummax/cummin)")

onnx_rules(bincount=_onnx_bincount, unique_inverse_indices=_onnx_unique,
           searchsorted_indices=OnnxNotExportable(
               "ONNX has no searchsorted; compare against the boundaries and sum instead "
               "((values.unsqueeze(-1) > boundaries).sum(-1))"),
           cumulative_extreme_indices=OnnxNotExportable(
               "ONNX has no running max/min (cummax/cummin); export a model without them"))


# ---- the functions ----------------------------------------------------------------------------
def _as_tensor_like(x, like):
    if isinstance(x, TensorLike):
        return x
    from .factories import full  # noqa: PLC0415
    return full((), x, dtype=result_type(x), device=like.device)


def searchsorted(sorted_sequence, input, *, out_int32: bool = False,  # noqa: A002
                 right: bool = False, side: str | None = None, sorter=None):
    """For each value of ``input``, the index where it would be inserted into the sorted last
    dim of ``sorted_sequence`` (1-d, or with ``input``'s leading dims) keeping it sorted: the
    first such index, or with ``right=True`` (``side='right'``) the last. int64, or int32 with
    ``out_int32``; ``sorter`` gives the order that sorts an unsorted sequence.

    >>> hf.searchsorted(hf.tensor([1, 3, 5]), hf.tensor([3, 6])).tolist()
    [1, 3]
    """
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("searchsorted: side='left' and right=True contradict each other")
        right = side == "right"
    s = sorted_sequence
    if sorter is not None:
        s = C.gather(s, -1, sorter)
    out = apply(searchsorted_indices, s, _as_tensor_like(input, s), right=bool(right))
    return out.astype(int32) if out_int32 else out


def bucketize(input, boundaries, *, out_int32: bool = False, right: bool = False):  # noqa: A002
    """The bucket of each value of ``input`` among the sorted 1-d ``boundaries``: the index
    ``i`` with ``boundaries[i-1] < x <= boundaries[i]`` (``right=True``: ``boundaries[i-1] <=
    x < boundaries[i]``).

    >>> hf.bucketize(hf.tensor([1, 4, 9]), hf.tensor([1, 5])).tolist()
    [0, 1, 2]
    """
    if boundaries.ndim != 1:
        raise ValueError(f"bucketize: boundaries must be 1-d, got shape "
                         f"{tuple(boundaries.shape)}")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def bincount(input, weights=None, minlength: int = 0):  # noqa: A002
    """How often each value ``0 .. max(input)`` occurs in the 1-d non-negative integer
    ``input`` (at least ``minlength`` entries); with ``weights``, their sums instead (float64
    unless the weights are float32).

    >>> hf.bincount(hf.tensor([2, 0, 2])).tolist()
    [1, 0, 2]
    """
    if not isinstance(minlength, int) or minlength < 0:
        raise ValueError(f"bincount: minlength must be a non-negative int, got {minlength!r}")
    if weights is None:
        return apply(bincount_op, input, minlength=minlength)
    return apply(bincount_op, input, weights, minlength=minlength)


def unique(input, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None):
    """The distinct values of ``input`` (``dim=None``: flattened; else the distinct slices
    along ``dim``), in ascending order (``sorted=False`` gives them sorted too), and with
    ``return_inverse``/``return_counts`` the index of each element's value among them and how
    often each occurs, as a tuple, as PyTorch's.

    >>> hf.unique(hf.tensor([3, 1, 3]), return_counts=True)[1].tolist()
    [1, 2]
    """
    x = input
    d = None if dim is None else normalize_dim("unique", dim, x.ndim)
    inverse = apply(unique_inverse_indices, x, dim=d)
    flat_inverse = C.reshape(inverse, -1)
    counts = bincount(flat_inverse)
    # the first element holding each distinct value: its run starts where the counts before sum
    order = argsort(flat_inverse)
    first = C.index_select(order, 0, C.cumsum(counts, 0) - counts)
    if d is None:
        values = C.index_select(C.reshape(x, -1), 0, first)
    elif x.ndim == 0:
        values = x
    else:
        values = C.index_select(x, d, first)
    if not (return_inverse or return_counts):
        return values
    return (values,) + ((inverse,) if return_inverse else ()) + \
        ((counts,) if return_counts else ())


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False):
    """A bool tensor of ``elements``' shape: whether each element occurs in
    ``test_elements`` (either may be a number); ``invert`` negates it.

    >>> hf.isin(hf.tensor([1, 2, 3]), hf.tensor([3, 1])).tolist()
    [True, False, True]
    """
    if not isinstance(elements, TensorLike) and not isinstance(test_elements, TensorLike):
        raise TypeError("isin: elements or test_elements must be a tensor")
    like = elements if isinstance(elements, TensorLike) else test_elements
    elements = _as_tensor_like(elements, like)
    test = C.reshape(_as_tensor_like(test_elements, like), -1)
    dtype = result_type(elements, test)
    elements, test = elements.astype(dtype), test.astype(dtype)
    if test.shape[0] == 0:
        found = zeros_like(elements, dtype=bool_)
    else:
        ordered = sort(test).values
        last = C._dim_count(test, 0) - 1  # (a 0-d tensor where the size is a run-time one)
        at = apply(E.minimum, searchsorted(ordered, C.reshape(elements, -1)), last)
        found = C.reshape(C.index_select(ordered, 0, at) == C.reshape(elements, -1),
                          *elements.shape)
    return apply(E.bitwise_not, found) if invert else found


def _cumulative_extreme(name, result, input, dim, largest):  # noqa: A002
    d = normalize_dim(name, dim, input.ndim)
    indices = apply(cumulative_extreme_indices, input, dim=d, largest=largest)
    if input.ndim == 0:
        return result(C.reshape(input, ()), indices)
    return result(C.gather(input, d, indices), indices)


def cummax(input, dim: int):  # noqa: A002
    """``(values, indices)``: the running maximum along ``dim`` and where it was taken (the
    latest position among equal values; NaN propagates), a named tuple as PyTorch's;
    ``values`` is differentiable.

    >>> hf.cummax(hf.tensor([1, 3, 2]), 0).values.tolist()
    [1, 3, 3]
    """
    return _cumulative_extreme("cummax", CummaxResult, input, dim, True)


def cummin(input, dim: int):  # noqa: A002
    """``(values, indices)``: the running minimum along ``dim`` (see :func:`cummax`)."""
    return _cumulative_extreme("cummin", CumminResult, input, dim, False)


def kthvalue(input, k: int, dim: int = -1, keepdim: bool = False):  # noqa: A002
    """``(values, indices)`` of the ``k``-th smallest element along ``dim`` (``k`` from 1), a
    named tuple as PyTorch's; ``values`` is differentiable.

    >>> hf.kthvalue(hf.tensor([3.0, 1.0, 2.0]), 2).values.item()
    2.0
    """
    x = input
    d = checked_k("kthvalue", x, k, dim, 1, IndexError)
    if x.ndim == 0:
        return KthvalueResult(C.reshape(x, ()), argsort(x))
    indices = C.narrow(argsort(x, d), d, k - 1, 1)
    values = C.gather(x, d, indices)
    if not keepdim:  # (indexing, not squeeze: the dim may be known only at run time)
        at = (slice(None),) * d + (0,)
        values, indices = values[at], indices[at]
    return KthvalueResult(values, indices)
