"""Operators and math/shape methods shared by every tensor-like (eager Tensor, static Variable).

Defined once here, on top of the registry: ``x + y`` is ``apply(add, x, y)`` whichever
interpreter is active, so modules and functional code run unchanged on static Variables.
This module holds the operators, comparisons and indexing; :class:`TensorMethods` gathers the
math (:mod:`.methods_math`), reduction and shape (:mod:`.methods_shape`), and dtype-conversion
and in-place (:mod:`.methods_inplace`) methods from their mixins.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import bool_
from . import composite as C
from . import composite_compare as Q
from . import composite_extra as X
from . import elementwise as E
from . import indexing as I
from . import linalg as L
from .methods_inplace import ConversionMethods
from .methods_math import MathMethods
from .methods_shape import ShapeMethods
from .registry import TensorLike, _get_current, apply, apply_inplace

__all__ = ["TensorMethods"]

_add, _sub, _mul, _div = E.add, E.sub, E.mul, E.div
_NO_ATTRS: dict = {}  # shared, never mutated: the hottest operators skip apply()'s packing


class TensorMethods(MathMethods, ShapeMethods, ConversionMethods, TensorLike):
    """Mixin: subclasses provide ``shape``, ``dtype``, ``ndim`` and ``_to_tensor(value)``."""

    __slots__ = ()
    __array_priority__ = 1000  # numpy scalars/arrays on the left defer to our operators
    __array_ufunc__ = None
    __hash__ = object.__hash__  # __eq__ is elementwise; identity hashing keeps dict/set use

    # ---- arithmetic -------------------------------------------------------------------------
    def __add__(self, other):
        return _get_current().apply(_add, (self, other), _NO_ATTRS)

    def __radd__(self, other):
        return _get_current().apply(_add, (other, self), _NO_ATTRS)

    def __sub__(self, other):
        return _get_current().apply(_sub, (self, other), _NO_ATTRS)

    def __rsub__(self, other):
        return _get_current().apply(_sub, (other, self), _NO_ATTRS)

    def __mul__(self, other):
        return _get_current().apply(_mul, (self, other), _NO_ATTRS)

    def __rmul__(self, other):
        return _get_current().apply(_mul, (other, self), _NO_ATTRS)

    def __truediv__(self, other):
        return _get_current().apply(_div, (self, other), _NO_ATTRS)

    def __rtruediv__(self, other):
        return _get_current().apply(_div, (other, self), _NO_ATTRS)

    def __floordiv__(self, other):
        return apply(E.floor_divide, self, other)

    def __rfloordiv__(self, other):
        return apply(E.floor_divide, other, self)

    def __mod__(self, other):
        return apply(E.remainder, self, other)

    def __rmod__(self, other):
        return apply(E.remainder, other, self)

    def __pow__(self, other):
        return apply(E.pow_, self, other)

    def __rpow__(self, other):
        return apply(E.pow_, other, self)

    def __matmul__(self, other):
        return apply(L.matmul, self, other)

    def __rmatmul__(self, other):
        return apply(L.matmul, other, self)

    # Augmented assignment is in place, as in PyTorch (``w -= lr * w.grad`` updates w itself).
    def __iadd__(self, other):
        return apply_inplace(_add, self, self, other)

    def __isub__(self, other):
        return apply_inplace(_sub, self, self, other)

    def __imul__(self, other):
        return apply_inplace(_mul, self, self, other)

    def __itruediv__(self, other):
        return apply_inplace(_div, self, self, other)

    def __ifloordiv__(self, other):
        return apply_inplace(E.floor_divide, self, self, other)

    def __imod__(self, other):
        return apply_inplace(E.remainder, self, self, other)

    def __ipow__(self, other):
        return apply_inplace(E.pow_, self, self, other)

    def __iand__(self, other):
        return apply_inplace(E.bitwise_and, self, self, other)

    def __ior__(self, other):
        return apply_inplace(E.bitwise_or, self, self, other)

    def __ixor__(self, other):
        return apply_inplace(E.bitwise_xor, self, self, other)

    def __neg__(self):
        return apply(E.neg, self)

    def __pos__(self):
        if self.dtype is bool_:  # as PyTorch
            raise TypeError(f"The `+` operator on a bool tensor is not supported (shape "
                            f"{tuple(self.shape)})")
        return self

    def __abs__(self):
        return apply(E.abs_, self)

    def __invert__(self):
        return apply(E.bitwise_not, self)

    def __and__(self, other):
        return apply(E.bitwise_and, self, other)

    def __rand__(self, other):
        return apply(E.bitwise_and, other, self)

    def __or__(self, other):
        return apply(E.bitwise_or, self, other)

    def __ror__(self, other):
        return apply(E.bitwise_or, other, self)

    def __xor__(self, other):
        return apply(E.bitwise_xor, self, other)

    def __rxor__(self, other):
        return apply(E.bitwise_xor, other, self)

    # ---- comparisons ------------------------------------------------------------------------
    def __eq__(self, other):
        if other is None:  # PyTorch: a tensor never equals None (a Python bool, not a tensor)
            return False
        return apply(E.eq, self, other)

    def __ne__(self, other):
        if other is None:
            return True
        return apply(E.ne, self, other)

    def __contains__(self, element):
        """``element in x``: whether some element of ``x`` equals it, as PyTorch."""
        return bool(C.any(apply(E.eq, self, element)))

    def __lt__(self, other):
        return apply(E.lt, self, other)

    def __le__(self, other):
        return apply(E.le, self, other)

    def __gt__(self, other):
        return apply(E.gt, self, other)

    def __ge__(self, other):
        return apply(E.ge, self, other)

    def eq(self, other):
        return apply(E.eq, self, other)

    def ne(self, other):
        return apply(E.ne, self, other)

    def lt(self, other):
        return apply(E.lt, self, other)

    def le(self, other):
        return apply(E.le, self, other)

    def gt(self, other):
        return apply(E.gt, self, other)

    def ge(self, other):
        return apply(E.ge, self, other)

    def logical_and(self, other):
        return Q.logical_and(self, other)

    def logical_or(self, other):
        return Q.logical_or(self, other)

    def logical_xor(self, other):
        return Q.logical_xor(self, other)

    def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        return Q.isclose(self, other, rtol, atol, equal_nan)

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
        return bool(Q.isclose(self, other, rtol, atol, equal_nan).all())

    def equal(self, other) -> bool:
        """Same shape and the same elements (a Python bool), as ``hf.equal``."""
        return tuple(self.shape) == tuple(other.shape) and bool((self == other).all())

    def nan_to_num(self, nan=0.0, posinf=None, neginf=None):
        return Q.nan_to_num(self, nan, posinf, neginf)

    def count_nonzero(self, dim=None):
        return Q.count_nonzero(self, dim)

    # ---- indexing ---------------------------------------------------------------------------
    def __getitem__(self, index):
        try:
            spec, tensors = I.parse_index(index, self._to_tensor)
        except I.RunTimeSliceBound:  # slices by bounds a static program knows when it runs
            masks, index = X.run_time_slices(self, index)
            x = self
            for dim, mask, _ in masks:  # (one dim at a time: each mask stays in place)
                x = x[(slice(None),) * dim + (mask,)]
            return x[index]
        return apply(I.getitem, self, *tensors, spec=spec)

    def __reversed__(self):
        """``reversed(x)``: ``x.flip(0)``, as PyTorch (a 0-d tensor is itself)."""
        return self.flip(0) if self.ndim else self

    def __setitem__(self, index, value):
        try:
            spec, tensors = I.parse_index(index, self._to_tensor)
        except I.RunTimeSliceBound:
            index = _one_mask_index(X.run_time_slices(self, index), index)
            spec, tensors = I.parse_index(index, self._to_tensor)
        if not isinstance(value, (TensorLike, int, float, bool)):
            value = self._to_tensor(value)
        apply_inplace(I.index_put, self, self, value, *tensors, spec=spec)



def _one_mask_index(masked, index):
    """The index of ``x[index] = value`` with its one slice by bounds known when the program
    runs replaced by the mask over its dim (in place: the only index tensor)."""
    masks, items = masked
    if len(masks) != 1 or any(isinstance(i, (TensorLike, list, np.ndarray)) for i in items):
        raise TypeError(f"setitem: an index {index!r} with several slices by bounds known only "
                        "when the program runs, or one next to index tensors, is not supported "
                        "in to_static; assign through one such slice at a time")
    (_, mask, position), = masks
    return items[:position] + (mask,) + items[position + 1:]
