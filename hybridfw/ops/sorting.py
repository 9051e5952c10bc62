"""Sorting with PyTorch's names: ``sort argsort topk msort median quantile nanquantile`` and
``randperm``.

One primitive, ``argsort`` (the order of the elements along a dim: stable, NaN sorting as the
largest value, as PyTorch), carries no gradient; values come from ``gather`` by those
indices, so they get gradients (and run in static programs) without a rule of their own.
"""
from __future__ import annotations

from collections import namedtuple

from ..dtypes import as_dtype, bool_, float64, int64
from . import composite as C
from . import creation as K
from . import composite_math as A
from . import elementwise as E
from . import reduction as R
from .factories import _dev, drawing
from .infer import normalize_dim
from .registry import TensorLike, apply, onnx_rules, register

__all__ = ["argsort_op", "sort", "argsort", "topk", "msort", "randperm", "median", "quantile",
           "nanquantile", "SortResult", "TopKResult", "MedianResult"]

SortResult = namedtuple("sort", ["values", "indices"])
TopKResult = namedtuple("topk", ["values", "indices"])
MedianResult = namedtuple("median", ["values", "indices"])


def _argsort_infer(a, *, dim, descending):
    normalize_dim("argsort", dim, a.ndim)
    return a.shape, int64, None


def _stable_argsort(xp, a, axis):
    # numpy needs kind="stable" for ties in order; cupy's sort is a stable radix sort already
    if xp.__name__ == "numpy":
        return xp.argsort(a, axis=axis, kind="stable")
    return xp.argsort(a, axis=axis)


def _argsort_kernel(xp, a, *, dim, descending):
    if a.ndim == 0:
        return xp.zeros((), dtype="int64")
    if not descending:  # NaNs sort last, as the largest values (numpy and cupy alike)
        return _stable_argsort(xp, a, dim).astype("int64", copy=False)
    # Descending and stable without negating (wrong for unsigned, bools and NaN): sort the
    # reversed data ascending (ties then in reversed order), reverse that order and map the
    # positions back: largest (NaN) first, ties in their original order.
    dim %= a.ndim  # (a negative dim would reverse another axis below)
    n = a.shape[dim]
    reverse = (slice(None),) * dim + (slice(None, None, -1),)
    order = _stable_argsort(xp, a[reverse], dim)[reverse]
    return (n - 1 - order).astype("int64", copy=False)


argsort_op = register("argsort", infer=_argsort_infer, kernel=_argsort_kernel,
                      doc="indices that sort the input along dim (stable, NaN largest)")


def _onnx_argsort(ctx, a, *, dim, descending):
    meta = ctx.metas[0]
    x = ctx.operand(0, "int32") if meta.dtype is bool_ else a
    if meta.ndim == 0:
        return ctx.const(0, "int64")
    axis = dim % meta.ndim
    k = ctx.node("Shape", [x], start=axis, end=axis + 1)
    _, indices = ctx.node("TopK", [x, k], outputs=2, axis=axis, largest=int(descending),
                          sorted=1)
    return indices


onnx_rules(argsort=_onnx_argsort)


def argsort(input, dim: int = -1, descending: bool = False, stable: bool = False):  # noqa: A002
    """The int64 indices that sort ``input`` along ``dim`` (always stable; NaN sorts as the
    largest value).

    >>> hf.argsort(hf.tensor([3, 1, 2])).tolist()
    [1, 2, 0]
    """
    return apply(argsort_op, input, dim=normalize_dim("argsort", dim, input.ndim),
                 descending=bool(descending))


def sort(input, dim: int = -1, descending: bool = False, stable: bool = False):  # noqa: A002
    """``(values, indices)`` of ``input`` sorted along ``dim``, a named tuple as PyTorch's;
    ``values`` is differentiable (a gather by ``indices``).

    >>> hf.sort(hf.tensor([3.0, 1.0, 2.0]), descending=True).values.tolist()
    [3.0, 2.0, 1.0]
    """
    indices = argsort(input, dim, descending, stable)
    if input.ndim == 0:
        return SortResult(C.reshape(input, ()), indices)
    return SortResult(C.gather(input, dim, indices), indices)


def msort(input):  # noqa: A002
    """``input`` sorted along dim 0 (the values of ``sort(input, dim=0)``)."""
    return sort(input, dim=0).values


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A002
    """``(values, indices)`` of the ``k`` largest (``largest=False``: smallest) elements
    along ``dim``, a named tuple as PyTorch's, always in sorted order. Equal values come lowest
    index first (PyTorch's CPU order among them is its partial sort's, unspecified).

    >>> hf.topk(hf.tensor([1.0, 5.0, 3.0]), 2).indices.tolist()
    [1, 2]
    """
    x = input
    d = checked_k("topk", x, k, dim, 0, ValueError)
    indices = argsort(x, d, descending=largest)
    if x.ndim == 0:
        return TopKResult(C.reshape(x, ()), indices)
    indices = C.narrow(indices, d, 0, k)
    return TopKResult(C.gather(x, d, indices), indices)


def randperm(n: int, *, generator=None, dtype=None, device=None):
    """A random permutation of ``0 .. n-1`` (int64 unless ``dtype``), from the generator
    ``hf.manual_seed`` seeds (or ``generator``, an ``hf.Generator``).

    >>> sorted(hf.randperm(4).tolist())
    [0, 1, 2, 3]
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"randperm: n must be a non-negative int, got {n!r}")
    with drawing(generator, device, "randperm"):
        keys = apply(K.uniform, shape=(n,), low=0.0, high=1.0, dtype=float64,
                     device=_dev(device))
    perm = argsort(keys)
    dt = int64 if dtype is None else as_dtype(dtype)
    return perm if dt is int64 else perm.astype(dt)


def median(input, dim=None, keepdim: bool = False):  # noqa: A002
    """The median, the lower of the two middle values for an even count (as PyTorch); NaN
    where the values hold a NaN. Without ``dim``, over all elements (a 0-d tensor); with
    ``dim``, a ``(values, indices)`` named tuple along it. Differentiable in ``values``.

    >>> hf.median(hf.tensor([4.0, 1.0, 3.0, 2.0])).item()
    2.0
    >>> hf.tensor([[1.0, 5.0, 3.0]]).median(dim=1).indices.tolist()
    [2]
    """
    x = input
    if dim is None:
        return median(C.reshape(x, -1), 0).values.reshape(())
    d = normalize_dim("median", dim, x.ndim)
    if x.ndim == 0:
        return MedianResult(x, argsort(x, d))  # its one element, at index 0
    n = x.shape[d]
    if n == 0:
        raise IndexError(f"median: dim {dim} of the input of shape {tuple(x.shape)} is empty")
    if n == -1:
        raise ValueError(f"median: the size of dim {dim} is only known when the program runs; "
                         "median needs it when the program is built")
    ordered = sort(x, d)
    # NaN sorts last: a slice holding one takes its last position, as PyTorch propagates NaN
    has_nan = C.any(x != x, d, keepdim=True)
    pick = C.where(has_nan, n - 1, (n - 1) // 2)
    values = C.gather(ordered.values, d, pick)
    indices = C.gather(ordered.indices, d, pick)
    if not keepdim:
        values, indices = C.squeeze(values, d), C.squeeze(indices, d)
    return MedianResult(values, indices)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name, input, q, dim, keepdim, interpolation, ignore_nan):  # noqa: A002
    """PyTorch's quantile: the sorted values along the reduced dim (moved last), ranks
    ``q * (count - 1)`` into them, and the values at the ranks below and above, interpolated;
    differentiable in the values picked (gathers and a lerp)."""
    x = input
    if x.dtype.name not in ("float32", "float64"):
        raise TypeError(f"{name}: input must be float32 or float64, got dtype {x.dtype}")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{name}: interpolation must be one of {_INTERPOLATIONS}, got "
                         f"{interpolation!r}")
    if isinstance(q, TensorLike):
        if q.ndim > 1:
            raise ValueError(f"{name}: q must be a scalar or a 1-D tensor, got shape "
                             f"{tuple(q.shape)}")
        if q.dtype is not x.dtype:
            raise TypeError(f"{name}: q must have the input's dtype {x.dtype}, got {q.dtype}")
        values = getattr(q, "_data", None)  # (an eager tensor's array; a program value has none)
        if values is not None and not bool(((values >= 0) & (values <= 1)).all()):
            raise ValueError(f"{name}: q values must be in the range [0, 1]")
        scalar_q = q.ndim == 0
    else:
        if not 0 <= q <= 1:
            raise ValueError(f"{name}: q must be in the range [0, 1], got {q}")
        q = apply(K.full, shape=(), value=float(q), dtype=x.dtype, device=str(x.device))
        scalar_q = True
    if dim is None:  # over all elements: (1,) * ndim with the elements last
        x = C.reshape(x, (1,) * x.ndim + (-1,))
    else:  # the reduced dim swapped with a new last one
        d = normalize_dim(name, dim, x.ndim)
        x = C.transpose(C.unsqueeze(x, -1), d, -1)
    if x.shape[-1] == 0:
        raise ValueError(f"{name}: input of shape {tuple(input.shape)} must be non-empty "
                         f"along the reduced dim")
    ordered = sort(x, -1).values  # NaN sorts last
    q = C.reshape(q, (1,) * (x.ndim - 1) + (-1,))
    nan = apply(E.isnan, ordered)
    if ignore_nan:  # ranks among the values that are not NaN (all NaN: rank 0, a NaN)
        count = C.sum(apply(E.bitwise_not, nan), -1, keepdim=True).astype(x.dtype)
        ranks = C.clamp(q * (count - 1), min=0.0)
    else:  # a NaN anywhere: the last rank, a NaN
        last = x.shape[-1] - 1 if x.shape[-1] > 0 else apply(R.dim_numel, x, dim=-1) - 1
        ranks = C.where(C.any(nan, -1, keepdim=True), last, q * last).astype(x.dtype)
    if interpolation == "lower":
        ranks = apply(E.floor, ranks)
    elif interpolation == "higher":
        ranks = apply(E.ceil, ranks)
    elif interpolation == "nearest":
        ranks = C.round(ranks)  # (half to even, as PyTorch's round)
    below = ranks.astype(int64)
    out = C.gather(ordered, -1, below)
    if interpolation in ("linear", "midpoint"):
        above = C.gather(ordered, -1, apply(E.ceil, ranks).astype(int64))
        weight = 0.5 if interpolation == "midpoint" else ranks - apply(E.floor, ranks)
        out = A.lerp(out, above, weight)
    # out: the input's dims (the reduced one as 1), then one entry per q, moved first
    out = C.squeeze(C.transpose(C.unsqueeze(out, 0), 0, -1), -1)
    if not keepdim and input.ndim:
        out = C.reshape(out, out.shape[:1]) if dim is None else C.squeeze(out, d + 1)
    return C.squeeze(out, 0) if scalar_q else out


def quantile(input, q, dim=None, keepdim: bool = False, *,  # noqa: A002
             interpolation: str = "linear"):
    """The ``q``-th quantiles of ``input`` (float32/float64) along ``dim`` (``None``: over all
    elements), as PyTorch's: ``q`` a float or a 0-d/1-d tensor of the input's dtype in
    ``[0, 1]`` (a 1-d ``q`` adds a leading dim, one entry per quantile); between two values
    ``interpolation`` is ``'linear'``, ``'lower'``, ``'higher'``, ``'midpoint'`` or
    ``'nearest'``. A slice holding a NaN gives NaN (see :func:`nanquantile`). Differentiable.

    >>> hf.quantile(hf.tensor([1.0, 2.0, 4.0, 8.0]), 0.5).item()
    3.0
    >>> hf.tensor([[0.0, 1.0], [2.0, 6.0]]).quantile(hf.tensor([0.25, 1.0]), dim=1).tolist()
    [[0.25, 3.0], [1.0, 6.0]]
    """
    return _quantile("quantile", input, q, dim, keepdim, interpolation, ignore_nan=False)


def nanquantile(input, q, dim=None, keepdim: bool = False, *,  # noqa: A002
                interpolation: str = "linear"):
    """:func:`quantile` ignoring NaN values (a slice of NaN only gives NaN), as PyTorch's.

    >>> hf.nanquantile(hf.tensor([1.0, float('nan'), 3.0]), 0.5).item()
    2.0
    """
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, ignore_nan=True)


def checked_k(op: str, x, k, dim, low: int, error) -> int:
    """``dim`` normalized for ``x``, once ``k`` is checked: an int (TypeError) from ``low`` to
    the dim's size, when known (``error``: topk's ValueError, kthvalue's IndexError, as
    PyTorch)."""
    d = normalize_dim(op, dim, x.ndim)
    size = x.shape[d] if x.ndim else 1
    if not isinstance(k, int) or isinstance(k, bool):
        raise TypeError(f"{op}: k must be an int, got {k!r}")
    if size != -1 and not low <= k <= size:
        raise error(f"{op}: k ({k}) is out of range for dim {dim} of size {size} "
                    f"(shape {tuple(x.shape)})")
    return d
