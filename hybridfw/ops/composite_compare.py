"""Comparison and cleaning composites with PyTorch's names and arguments: ``logical_and
logical_or logical_xor`` (any dtype, tested ``!= 0``), ``isclose``, ``nan_to_num``,
``count_nonzero`` and ``clamp_min``/``clamp_max``. Built from primitives only, so they need
no gradient rules and run in eager and static code alike.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import bool_
from . import composite as C
from . import elementwise as E
from .registry import TensorLike, apply

__all__ = ["logical_and", "logical_or", "logical_xor", "isclose", "nan_to_num",
           "count_nonzero", "clamp_min", "clamp_max"]


def _truth(x):
    """``x`` as a bool tensor (``x != 0``); a Python value as its bool."""
    if isinstance(x, TensorLike):
        return x if x.dtype is bool_ else apply(E.ne, x, 0)
    return bool(x)


def logical_and(input, other):  # noqa: A002
    """Elementwise ``input != 0 and other != 0`` (bool result, with broadcasting).

    >>> hf.logical_and(hf.tensor([0, 1, 2]), hf.tensor([1.0, 0.0, 3.0])).tolist()
    [False, False, True]
    """
    return apply(E.bitwise_and, _truth(input), _truth(other))


def logical_or(input, other):  # noqa: A002
    """Elementwise ``input != 0 or other != 0`` (bool result, with broadcasting)."""
    return apply(E.bitwise_or, _truth(input), _truth(other))


def logical_xor(input, other):  # noqa: A002
    """Elementwise: exactly one of ``input != 0`` and ``other != 0`` (bool result)."""
    return apply(E.bitwise_xor, _truth(input), _truth(other))


def isclose(input, other, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
            equal_nan: bool = False):
    """Elementwise ``|input - other| <= atol + rtol * |other|`` as a bool tensor, as PyTorch:
    equal values (infinities included) are close, NaN only to NaN with ``equal_nan``.

    >>> hf.isclose(hf.tensor([1.0, 2.0]), hf.tensor([1.0 + 1e-9, 2.1])).tolist()
    [True, False]
    """
    a, b = input, other
    if isinstance(a, TensorLike) and isinstance(b, TensorLike) and a.dtype is not b.dtype:
        raise TypeError(f"isclose: input ({a.dtype}) and other ({b.dtype}) must have the same "
                        "dtype")
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol ({rtol}) and atol ({atol}) must be non-negative")
    close = apply(E.eq, a, b)
    if equal_nan:
        close = close | (apply(E.isnan, a) & apply(E.isnan, b))
    if isinstance(a, TensorLike) and a.dtype is bool_:
        return close
    error = apply(E.abs_, a - b)
    allowed = atol + rtol * apply(E.abs_, b)
    return close | (apply(E.isfinite, error) & (error <= allowed))


def nan_to_num(input, nan: float = 0.0, posinf: float | None = None,  # noqa: A002
               neginf: float | None = None):
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default 0, the
    largest and the lowest finite value of the dtype), as PyTorch; integer and bool tensors
    come back as a copy.

    >>> hf.nan_to_num(hf.tensor([float('nan'), 1.0]), nan=-1.0).tolist()
    [-1.0, 1.0]
    """
    x = input
    if not x.dtype.is_floating_point:
        return apply(E.copy, x)
    info = np.finfo(x.dtype.np)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    x = apply(E.where, apply(E.isnan, x), nan, x)
    x = apply(E.where, apply(E.eq, x, float("inf")), posinf, x)
    out = apply(E.where, apply(E.eq, x, float("-inf")), neginf, x)
    return out if out.dtype is x.dtype else apply(E.cast, out, dtype=x.dtype)


def count_nonzero(input, dim=None):  # noqa: A002
    """The number of non-zero elements over ``dim`` (None: all; an int or a tuple), int64.

    >>> hf.count_nonzero(hf.tensor([[0, 1], [2, 3]]), dim=0).tolist()
    [1, 2]
    """
    return C.sum(_truth(input), dim)


def clamp_min(input, min):  # noqa: A002
    """``clamp(input, min=min)``."""
    return C.clamp(input, min=min)


def clamp_max(input, max):  # noqa: A002
    """``clamp(input, max=max)``."""
    return C.clamp(input, max=max)
