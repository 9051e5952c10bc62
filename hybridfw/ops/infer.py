"""Shared pieces of shape/dtype inference: broadcasting, dim normalization, operand checks.

Errors raised here name the op and the offending shapes/dtypes: a shape problem is a
``ValueError``, a dtype problem a ``TypeError`` (as the API contract settles).
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..dtypes import DType, bool_, get_default_dtype, result_type
from .registry import TensorLike

__all__ = ["broadcast_shapes", "shape_of", "normalize_dim", "normalize_dims", "float_result",
           "check_float", "numel", "is_index", "check_fill_value"]


_PY_SCALARS = (int, float, bool)


def shape_of(x) -> tuple:
    """Shape of a tensor-like, or () for a Python scalar; anything else is a TypeError (the
    eager interpreter then converts lists/arrays to tensors and infers again)."""
    if isinstance(x, TensorLike):
        return x.shape
    if x.__class__ in _PY_SCALARS:
        return ()
    raise TypeError(f"expected a tensor or a Python number, got {type(x).__name__}")


def _broadcast_dim(op: str, x: int, y: int, shapes) -> int:
    if x == y or y == 1:
        return x
    if x == 1:
        return y
    if x == -1 or y == -1:  # unknown at build time: the known non-1 size must match at run time
        return y if x == -1 else x
    raise ValueError(f"{op}: shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be "
                     f"broadcast together ({x} vs {y} in a trailing dim)")


def broadcast_shapes(op: str, *shapes) -> tuple:
    """numpy/PyTorch broadcasting of several shapes; -1 (unknown) dims are allowed."""
    out = shapes[0]
    for s in shapes[1:]:
        if s == out or not s:
            continue
        if not out:
            out = s
            continue
        n = max(len(out), len(s))
        a = (1,) * (n - len(out)) + tuple(out)
        b = (1,) * (n - len(s)) + tuple(s)
        out = tuple(_broadcast_dim(op, x, y, shapes) for x, y in zip(a, b))
    return tuple(out)


def normalize_dim(op: str, dim: int, ndim: int, *, extra: int = 0) -> int:
    """Turn a possibly negative ``dim`` into 0..ndim-1+extra, with a clear error.

    A 0-d tensor takes ``dim`` 0 or -1 (as in PyTorch, which treats it as having one dim for
    this check); both give 0, and the caller handles the 0-d case (see :func:`normalize_dims`).
    """
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int, got {dim!r}")
    n = ndim + extra
    bound = max(n, 1)
    if not -bound <= dim < bound:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor of {ndim} dims "
                         f"(expected {-bound} <= dim < {bound})")
    return dim % n if n else 0


def normalize_dims(op: str, dim, ndim: int) -> tuple:
    """``dim`` None (all), an int or a sequence -> sorted tuple of distinct non-negative dims.

    On a 0-d tensor, ``dim`` 0 or -1 names no real dim: the result is ``()``, so a reduction
    over it returns the 0-d value itself, as PyTorch's ``tensor(3.).sum(0)`` does."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
        d = normalize_dim(op, dim, ndim)
        return (d,) if ndim else ()
    dims = tuple(normalize_dim(op, d, ndim) for d in dim)
    if len(set(dims)) != len(dims):
        raise ValueError(f"{op}: dim {tuple(dim)} repeats a dimension")
    return tuple(sorted(dims)) if ndim else ()


def float_result(dt: DType) -> DType:
    """Integer and bool inputs of float functions (exp, sqrt, /) compute in the default dtype
    (float32)."""
    return dt if dt.is_floating_point else get_default_dtype()


def check_float(op: str, *xs) -> None:
    for x in xs:
        if isinstance(x, TensorLike) and not x.dtype.is_floating_point:
            raise TypeError(f"{op}: expected a floating-point tensor, got dtype {x.dtype}")


def check_bool_or_int(op: str, *xs) -> DType:
    dt = result_type(*xs)
    if dt.is_floating_point:
        raise TypeError(f"{op}: expected bool or integer tensors, got "
                        f"{', '.join(str(getattr(x, 'dtype', type(x).__name__)) for x in xs)}")
    return dt


def numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


__all__ += ["check_bool_or_int", "bool_"]


def is_index(value) -> bool:
    """Whether ``value`` can be a size or an index: ``operator.index`` takes it (ints, numpy
    integers; not floats)."""
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def check_fill_value(op: str, value, dtype: DType) -> None:
    """A Python number written into a tensor of ``dtype`` (``full``, ``fill_``, ``masked_fill``,
    item assignment) must fit it, as PyTorch checks: NaN or infinity into an integer dtype,
    an integer out of its range, or a finite float beyond a float dtype's largest raise a
    RuntimeError (numpy would give INT_MIN, wrap, or inf without a word). Bools fit anything;
    tensors are cast as they are."""
    if value.__class__ not in (int, float) or dtype is bool_:
        return
    kind = dtype.np.kind
    if kind == "f":
        limit = float(np.finfo(dtype.np).max)
        fits = value != value or abs(value) == float("inf") or abs(value) <= limit
    elif kind in "iu":
        info = np.iinfo(dtype.np)
        fits = (value.__class__ is int or math.isfinite(value)) and \
            info.min <= int(value) <= info.max
    else:
        return
    if not fits:
        raise RuntimeError(f"{op}: value {value!r} cannot be converted to {dtype.name} without "
                           "overflow")
