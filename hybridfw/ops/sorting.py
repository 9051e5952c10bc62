"""Sorting with PyTorch's names: ``sort argsort topk msort`` and ``randperm``.

One primitive, ``argsort`` (the order of the elements along a dim: stable, NaN sorting as the
largest value, as PyTorch), carries no gradient; values come from ``gather`` by those
indices, so they get gradients (and run in static programs) without a rule of their own.
"""
from __future__ import annotations

from collections import namedtuple

from ..dtypes import as_dtype, bool_, float64, int64
from . import composite as C
from . import creation as K
from .factories import _dev
from .infer import normalize_dim
from .registry import apply, onnx_rules, register

__all__ = ["argsort_op", "sort", "argsort", "topk", "msort", "randperm", "median",
           "SortResult", "TopKResult", "MedianResult"]

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
    d = normalize_dim("topk", dim, x.ndim)
    size = x.shape[d] if x.ndim else 1
    if not isinstance(k, int) or isinstance(k, bool):
        raise TypeError(f"topk: k must be an int, got {k!r}")
    if size != -1 and not 0 <= k <= size:
        raise ValueError(f"topk: k ({k}) is out of range for dim {dim} of size {size} "
                         f"(shape {tuple(x.shape)})")
    indices = argsort(x, d, descending=largest)
    if x.ndim == 0:
        return TopKResult(C.reshape(x, ()), indices)
    indices = C.narrow(indices, d, 0, k)
    return TopKResult(C.gather(x, d, indices), indices)


def randperm(n: int, *, dtype=None, device=None):
    """A random permutation of ``0 .. n-1`` (int64 unless ``dtype``), from the generator
    ``hf.manual_seed`` seeds.

    >>> sorted(hf.randperm(4).tolist())
    [0, 1, 2, 3]
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"randperm: n must be a non-negative int, got {n!r}")
    keys = apply(K.uniform, shape=(n,), low=0.0, high=1.0, dtype=float64, device=_dev(device))
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
