"""Operators and math/shape methods shared by every tensor-like (eager Tensor, static Variable).

Defined once here, on top of the registry: ``x + y`` is ``apply(add, x, y)`` whichever
interpreter is active, so modules and functional code run unchanged on static Variables.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import (LEGACY_TYPE_NAMES, DType, as_dtype, bool_, float16, float32, float64,
                      int8, int16, int32, int64, legacy_type_name, result_type, uint8)
from . import composite as C
from . import composite_compare as Q
from . import composite_extra as X
from . import composite_math as A
from . import creation as K
from . import composite_matrix as M
from . import elementwise as E
from . import indexing as I
from . import linalg as L
from . import reduction as R
from . import sorting as O
from .factories import drawing
from .infer import normalize_dim
from .registry import TensorLike, _get_current, apply, apply_inplace

__all__ = ["TensorMethods"]

_add, _sub, _mul, _div = E.add, E.sub, E.mul, E.div
_NO_ATTRS: dict = {}  # shared, never mutated: the hottest operators skip apply()'s packing


class TensorMethods(TensorLike):
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

    # ---- math -------------------------------------------------------------------------------
    def add(self, other, *, alpha=1):
        return apply(_add, self, A.scaled_other("add", self, other, alpha))

    def sub(self, other, *, alpha=1):
        return apply(_sub, self, A.scaled_other("sub", self, other, alpha))

    def mul(self, other):
        return apply(_mul, self, other)

    def div(self, other, *, rounding_mode=None):
        return A.div(self, other, rounding_mode=rounding_mode)

    divide = div

    def true_divide(self, other):
        return apply(_div, self, other)

    def floor_divide(self, other):
        return apply(E.floor_divide, self, other)

    def remainder(self, other):
        return apply(E.remainder, self, other)

    def pow(self, exponent):
        return apply(E.pow_, self, exponent)

    def abs(self):
        return apply(E.abs_, self)

    def neg(self):
        return apply(E.neg, self)

    def exp(self):
        return apply(E.exp, self)

    def log(self):
        return apply(E.log, self)

    def log1p(self):
        return apply(E.log1p, self)

    def sqrt(self):
        return apply(E.sqrt, self)

    def rsqrt(self):
        return apply(E.rsqrt, self)

    def sin(self):
        return apply(E.sin, self)

    def cos(self):
        return apply(E.cos, self)

    def tanh(self):
        return apply(E.tanh, self)

    def sigmoid(self):
        return apply(E.sigmoid, self)

    def log2(self):
        return apply(E.log2, self)

    def log10(self):
        return apply(E.log10, self)

    def exp2(self):
        return apply(E.exp2, self)

    def expm1(self):
        return apply(E.expm1, self)

    def tan(self):
        return apply(E.tan, self)

    def atan(self):
        return apply(E.atan, self)

    def atan2(self, other):
        return apply(E.atan2, self, other)

    arctan2 = atan2

    def asin(self):
        return apply(E.asin, self)

    def acos(self):
        return apply(E.acos, self)

    def sinh(self):
        return apply(E.sinh, self)

    def cosh(self):
        return apply(E.cosh, self)

    def trunc(self):
        return apply(E.trunc, self)

    def frac(self):
        """``self - trunc(self)``: the fractional part, with the sign of ``self``."""
        return self - apply(E.trunc, self)

    def erf(self):
        from . import nn_ops  # noqa: PLC0415 - nn_ops imports this module's siblings
        return apply(nn_ops.erf, self)

    def relu(self):
        return apply(E.relu, self)

    def sign(self):
        return apply(E.sign, self)

    def floor(self):
        return apply(E.floor, self)

    def ceil(self):
        return apply(E.ceil, self)

    def round(self, *, decimals: int = 0):
        return C.round(self, decimals=decimals)

    def square(self):
        if self.dtype is bool_:  # PyTorch's pow(x, 2): a bool squares to int64 (x itself)
            return apply(E.cast, self, dtype=int64)
        return apply(_mul, self, self)

    def reciprocal(self):
        return apply(_div, 1.0, self)

    def isnan(self):
        return apply(E.isnan, self)

    def isinf(self):
        return apply(E.isinf, self)

    def isfinite(self):
        return apply(E.isfinite, self)

    def logical_not(self):
        return apply(E.bitwise_not, self if self.dtype is bool_ else self != 0)

    def clamp(self, min=None, max=None):  # noqa: A002
        return C.clamp(self, min, max)

    clip = clamp

    def clamp_min(self, min):  # noqa: A002
        return C.clamp(self, min=min)

    def clamp_max(self, max):  # noqa: A002
        return C.clamp(self, max=max)

    def maximum(self, other):
        return apply(E.maximum, self, other)

    def minimum(self, other):
        return apply(E.minimum, self, other)

    def nonzero(self, *, as_tuple: bool = False):
        return C.nonzero(self, as_tuple=as_tuple)

    def where(self, condition, other):
        return C.where(condition, self, other)

    def matmul(self, other):
        return apply(L.matmul, self, other)

    def mm(self, mat2):
        return C.mm(self, mat2)

    def bmm(self, mat2):
        return C.bmm(self, mat2)

    def mv(self, vec):
        return C.mv(self, vec)

    def dot(self, tensor):
        return C.dot(self, tensor)

    def outer(self, vec2):
        return C.outer(self, vec2)

    def lerp(self, end, weight):
        return A.lerp(self, end, weight)

    def addcmul(self, tensor1, tensor2, *, value=1):
        return A.addcmul(self, tensor1, tensor2, value=value)

    def addcdiv(self, tensor1, tensor2, *, value=1):
        return A.addcdiv(self, tensor1, tensor2, value=value)

    def logaddexp(self, other):
        return A.logaddexp(self, other)

    def hypot(self, other):
        return A.hypot(self, other)

    def fmod(self, other):
        return A.fmod(self, other)

    def diff(self, n=1, dim=-1, prepend=None, append=None):
        return A.diff(self, n, dim, prepend, append)

    def repeat_interleave(self, repeats, dim=None, *, output_size=None):
        return A.repeat_interleave(self, repeats, dim, output_size=output_size)

    def bernoulli(self, p=None, *, generator=None):
        return A.bernoulli(self, p, generator=generator)

    def diagonal(self, offset=0, dim1=0, dim2=1):
        return M.diagonal(self, offset, dim1, dim2)

    def trace(self):
        return M.trace(self)

    def diag(self, diagonal=0):
        return M.diag(self, diagonal)

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        return M.norm(self, p, dim, keepdim, dtype)

    def masked_fill(self, mask, value):
        return C.masked_fill(self, mask, value)

    def masked_fill_(self, mask, value):
        """In place: ``value`` where ``mask`` is True (``mask`` broadcasts to this shape)."""
        return self.copy_(C.masked_fill(self, mask, value))

    # ---- reductions -------------------------------------------------------------------------
    def sum(self, dim=None, keepdim=False, *, dtype=None):
        return C.sum(self, dim, keepdim, dtype=dtype)

    def mean(self, dim=None, keepdim=False, *, dtype=None):
        return C.mean(self, dim, keepdim, dtype=dtype)

    def prod(self, dim=None, keepdim=False, *, dtype=None):
        return C.prod(self, dim, keepdim, dtype=dtype)

    def max(self, dim=None, keepdim=False, *, other=None):
        return C.max(self, dim, keepdim, other=other)

    def min(self, dim=None, keepdim=False, *, other=None):
        return C.min(self, dim, keepdim, other=other)

    def amax(self, dim=None, keepdim=False):
        return apply(R.amax, self, dim=C._dims_attr(dim), keepdim=keepdim)

    def amin(self, dim=None, keepdim=False):
        return apply(R.amin, self, dim=C._dims_attr(dim), keepdim=keepdim)

    def argmax(self, dim=None, keepdim=False):
        return C.argmax(self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return C.argmin(self, dim, keepdim)

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return C.var(self, dim, unbiased, keepdim, correction=correction)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return C.std(self, dim, unbiased, keepdim, correction=correction)

    def logsumexp(self, dim, keepdim=False):
        return C.logsumexp(self, dim, keepdim)

    def cumsum(self, dim, *, dtype=None):
        return C.cumsum(self, dim, dtype=dtype)

    def cumprod(self, dim, *, dtype=None):
        return C.cumprod(self, dim, dtype=dtype)

    def all(self, dim=None, keepdim=False):
        return C.all(self, dim, keepdim)

    def any(self, dim=None, keepdim=False):
        return C.any(self, dim, keepdim)

    def sort(self, dim=-1, descending=False, stable=False):
        return O.sort(self, dim, descending, stable)

    def argsort(self, dim=-1, descending=False, stable=False):
        return O.argsort(self, dim, descending, stable)

    def msort(self):
        return O.msort(self)

    def median(self, dim=None, keepdim=False):
        return O.median(self, dim, keepdim)

    def quantile(self, q, dim=None, keepdim=False, *, interpolation="linear"):
        return O.quantile(self, q, dim, keepdim, interpolation=interpolation)

    def nanquantile(self, q, dim=None, keepdim=False, *, interpolation="linear"):
        return O.nanquantile(self, q, dim, keepdim, interpolation=interpolation)

    def topk(self, k, dim=-1, largest=True, sorted=True):  # noqa: A002
        return O.topk(self, k, dim, largest, sorted)

    # ---- shape ------------------------------------------------------------------------------
    def reshape(self, *sizes, shape=None):
        return C.reshape(self, *sizes, shape=shape)

    def view(self, *shape, size=None):
        return C.view(self, *shape, size=size)

    def flatten(self, start_dim=0, end_dim=-1):
        return C.flatten(self, start_dim, end_dim)

    def unflatten(self, dim, sizes):
        return C.unflatten(self, dim, sizes)

    def squeeze(self, dim=None):
        return C.squeeze(self, dim)

    def unsqueeze(self, dim):
        return C.unsqueeze(self, dim)

    def transpose(self, dim0, dim1):
        return C.transpose(self, dim0, dim1)

    def permute(self, *order, dims=None):
        return C.permute(self, *order, dims=dims)

    def expand(self, *sizes, size=None):
        return C.expand(self, *sizes, size=size)

    def expand_as(self, other):
        return C.expand_as(self, other)

    def broadcast_to(self, size):
        return C.broadcast_to(self, size)

    def view_as(self, other):
        return C.reshape(self, tuple(other.shape))

    def reshape_as(self, other):
        return C.reshape(self, tuple(other.shape))

    def split(self, split_size, dim=0):  # PyTorch's method names it split_size
        return C.split(self, split_size, dim)

    def chunk(self, chunks, dim=0):
        return C.chunk(self, chunks, dim)

    def narrow(self, dim, start, length):
        return C.narrow(self, dim, start, length)

    def gather(self, dim, index):
        return C.gather(self, dim, index)

    def index_select(self, dim, index):
        return C.index_select(self, dim, index)

    def scatter(self, dim, index, src=None, *, value=None, reduce=None):
        return X.scatter(self, dim, index, src, value=value, reduce=reduce)

    def scatter_add(self, dim, index, src):
        return X.scatter_add(self, dim, index, src)

    def swapaxes(self, axis0, axis1):
        return C.transpose(self, axis0, axis1)

    def movedim(self, source, destination):
        return X.movedim(self, source, destination)

    def unbind(self, dim=0):
        return X.unbind(self, dim)

    def flip(self, dims):
        return X.flip(self, dims)

    def roll(self, shifts, dims=None):
        return X.roll(self, shifts, dims)

    def repeat(self, *sizes):
        return X.repeat(self, *sizes)

    def tile(self, dims):
        return X.tile(self, dims)

    def tril(self, diagonal=0):
        return X.tril(self, diagonal)

    def triu(self, diagonal=0):
        return X.triu(self, diagonal)

    def masked_select(self, mask):
        return X.masked_select(self, mask)

    def nansum(self, dim=None, keepdim=False, *, dtype=None):
        return X.nansum(self, dim, keepdim, dtype=dtype)

    def fmax(self, other):
        return X.fmax(self, other)

    def fmin(self, other):
        return X.fmin(self, other)

    def t(self):
        """The transpose of a matrix; a tensor of 0 or 1 dims as it is (PyTorch's ``t()``)."""
        if self.ndim > 2:
            raise ValueError(f"t: expects a tensor of at most 2 dims, got shape "
                             f"{tuple(self.shape)}; use transpose(dim0, dim1) or mT")
        return C.permute(self, *reversed(range(self.ndim)))

    @property
    def T(self):  # noqa: N802 - PyTorch's name
        return C.permute(self, *reversed(range(self.ndim)))

    @property
    def mT(self):  # noqa: N802
        return C.transpose(self, -2, -1)

    def size(self, dim=None):
        return tuple(self.shape) if dim is None else self.shape[dim]

    def dim(self):
        return self.ndim

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    nelement = numel

    def element_size(self) -> int:
        """Bytes per element of this dtype."""
        return self.dtype.itemsize

    def clone(self):
        """A copy with its own storage (differentiable)."""
        return apply(E.copy, self)

    def softmax(self, dim, dtype=None):
        """Softmax along ``dim``; ``dtype`` casts the input first, as in PyTorch."""
        from . import nn_ops  # noqa: PLC0415 - nn_ops imports this module's siblings
        x = self if dtype is None else self.astype(dtype)
        return apply(nn_ops.softmax, x, dim=dim)

    def log_softmax(self, dim, dtype=None):
        """Log-softmax along ``dim``; ``dtype`` casts the input first, as in PyTorch."""
        from . import nn_ops  # noqa: PLC0415
        x = self if dtype is None else self.astype(dtype)
        return apply(nn_ops.log_softmax, x, dim=dim)

    def type_as(self, other):
        return self.astype(other.dtype)

    def new_zeros(self, *sizes, size=None, dtype=None):
        from .factories import zeros  # noqa: PLC0415
        return zeros(*sizes, size=size, dtype=dtype or self.dtype, device=self.device)

    def new_ones(self, *sizes, size=None, dtype=None):
        from .factories import ones  # noqa: PLC0415
        return ones(*sizes, size=size, dtype=dtype or self.dtype, device=self.device)

    def new_full(self, size, fill_value, *, dtype=None):
        from .factories import full  # noqa: PLC0415
        return full(size, fill_value, dtype=dtype or self.dtype, device=self.device)

    def new_empty(self, *sizes, size=None, dtype=None):
        """Zeros (hybridfw never hands out uninitialised memory) of this dtype and device."""
        from .factories import empty  # noqa: PLC0415
        return empty(*sizes, size=size, dtype=dtype or self.dtype, device=self.device)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        """A new tensor holding ``data`` (a copy, without history), of this tensor's dtype and
        device unless given, as in PyTorch: ``x.new_tensor([1, 2])`` of a float32 ``x`` is
        float32."""
        dt = as_dtype(dtype) if dtype is not None else self.dtype
        if isinstance(data, TensorLike):
            out = apply(E.copy, data.detach().astype(dt))
        else:  # built in the target dtype, never through float32
            out = self._to_tensor(np.asarray(data, dtype=dt.np))
        if device is not None:
            out = out.to(device)
        return out.requires_grad_() if requires_grad else out

    # ---- dtype conversion -------------------------------------------------------------------
    @staticmethod
    def _to_arguments(args, dtype=None, device=None) -> tuple:
        """``(dtype, device)`` that ``.to(*args, dtype=, device=)`` asks for: a tensor gives
        its dtype and device, a dtype (``hf.float64``, ``'float64'``, a numpy dtype or type)
        the dtype, anything else the device."""
        for a in args:
            if isinstance(a, TensorLike):
                device, dtype = a.device, a.dtype
            elif isinstance(a, (DType, np.dtype, type)) or (isinstance(a, str) and
                                                            _is_dtype_name(a)):
                dtype = a
            else:
                device = a
        return dtype, device

    def astype(self, dtype):
        dt = as_dtype(dtype)
        return self if dt is self.dtype else apply(E.cast, self, dtype=dt)

    def type(self, dtype=None, non_blocking: bool = False):
        """PyTorch's legacy form: without ``dtype`` the type's name
        (``'hybridfw.FloatTensor'``); else ``astype``, also taking a legacy type
        (``hf.LongTensor``) or name (``'torch.LongTensor'``, ``'hybridfw.LongTensor'``)."""
        if dtype is None:
            return legacy_type_name(self.dtype)
        legacy = getattr(dtype, "legacy_dtype", None)  # hf.LongTensor and its kin
        if legacy is not None:
            dtype = legacy
        elif isinstance(dtype, str) and dtype.rpartition(".")[2] in LEGACY_TYPE_NAMES:
            if dtype.partition(".")[0] not in ("torch", "hybridfw") or dtype.count(".") != 1:
                raise TypeError(f"type: unsupported type name {dtype!r}")
            dtype = LEGACY_TYPE_NAMES[dtype.rpartition(".")[2]]
        return self.astype(dtype)

    def float(self):
        return self.astype(float32)

    def double(self):
        return self.astype(float64)

    def half(self):
        return self.astype(float16)

    def int(self):
        return self.astype(int32)

    def long(self):
        return self.astype(int64)

    def bool(self):
        return self.astype(bool_)

    def byte(self):
        return self.astype(uint8)

    def char(self):
        return self.astype(int8)

    def short(self):
        return self.astype(int16)

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def is_signed(self) -> bool:
        return self.dtype.is_signed

    # ---- in-place (optimizers, init): they bump the storage version ---------------------------
    def add_(self, other, *, alpha=1):
        return apply_inplace(_add, self, self, A.scaled_other("add_", self, other, alpha))

    def sub_(self, other, *, alpha=1):
        return apply_inplace(_sub, self, self, A.scaled_other("sub_", self, other, alpha))

    def mul_(self, other):
        return apply_inplace(_mul, self, self, other)

    def div_(self, other, *, rounding_mode=None):
        if rounding_mode is None:
            return apply_inplace(_div, self, self, other)
        return self.copy_(A.div(self, other, rounding_mode=rounding_mode))

    def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
        if reduce not in (None, "add"):
            raise ValueError(f"scatter_: reduce must be None or 'add', got {reduce!r}")
        return apply_inplace(I.scatter, self, self, index,
                             X._scatter_source("scatter_", src, value),
                             dim=normalize_dim("scatter_", dim, self.ndim), reduce=reduce)

    def scatter_add_(self, dim, index, src):
        return apply_inplace(I.scatter, self, self, index, src,
                             dim=normalize_dim("scatter_add_", dim, self.ndim), reduce="add")

    def pow_(self, exponent):
        return apply_inplace(E.pow_, self, self, exponent)

    def neg_(self):
        return apply_inplace(E.neg, self, self)

    def clamp_(self, min=None, max=None):  # noqa: A002
        if isinstance(min, TensorLike) or isinstance(max, TensorLike):
            # tensor bounds make clamp a composite (where/maximum/minimum): write its result
            # back, refusing a promoted dtype the tensor cannot hold as in-place arithmetic does
            dt = result_type(self, *(b for b in (min, max) if b is not None))
            if dt.category > self.dtype.category:
                raise TypeError(f"clamp_: result type {dt} can't be cast to the in-place "
                                f"output type {self.dtype}")
            # the composite's gradient needs the old value: clamp a copy when one is recorded
            old = self.clone() if any(getattr(t, "requires_grad", False)
                                      for t in (self, min, max)) else self
            out = C.clamp(old, min, max)
            if tuple(out.shape) != tuple(self.shape):
                raise ValueError(f"clamp_: in-place output of shape {tuple(self.shape)} does not "
                                 f"match the broadcast shape {tuple(out.shape)}")
            return self.copy_(out)
        return apply_inplace(E.clamp, self, self, min=min, max=max)

    def abs_(self):
        return apply_inplace(E.abs_, self, self)

    def exp_(self):
        return apply_inplace(E.exp, self, self)

    def sqrt_(self):
        return apply_inplace(E.sqrt, self, self)

    def relu_(self):
        return apply_inplace(E.relu, self, self)

    def sigmoid_(self):
        return apply_inplace(E.sigmoid, self, self)

    def tanh_(self):
        return apply_inplace(E.tanh, self, self)

    def log_(self):
        return apply_inplace(E.log, self, self)

    def log1p_(self):
        return apply_inplace(E.log1p, self, self)

    def expm1_(self):
        return apply_inplace(E.expm1, self, self)

    def rsqrt_(self):
        return apply_inplace(E.rsqrt, self, self)

    def sin_(self):
        return apply_inplace(E.sin, self, self)

    def cos_(self):
        return apply_inplace(E.cos, self, self)

    def floor_(self):
        return apply_inplace(E.floor, self, self)

    def ceil_(self):
        return apply_inplace(E.ceil, self, self)

    def trunc_(self):
        return apply_inplace(E.trunc, self, self)

    def sign_(self):
        return apply_inplace(E.sign, self, self)

    def clip_(self, min=None, max=None):  # noqa: A002
        return self.clamp_(min, max)

    def clamp_min_(self, min):  # noqa: A002
        return self.clamp_(min=min)

    def clamp_max_(self, max):  # noqa: A002
        return self.clamp_(max=max)

    def uniform_(self, *args, generator=None, **bounds):
        """In place: samples of U(from, to) (default U(0, 1)), seeded by ``hf.manual_seed``
        (or from ``generator``, an ``hf.Generator``); called ``uniform_(0.0, 1.0)`` or
        ``uniform_(**{'from': 0.0, 'to': 1.0})``."""
        names = ("from", "to")
        if len(args) > 2 or set(bounds) - set(names):
            raise TypeError(f"uniform_: takes (from=0, to=1), got {args} and {bounds}")
        low, high = (list(args) + [bounds.get(n, d) for n, d in
                                   zip(names, (0.0, 1.0))][len(args):])[:2]
        return self._random_fill_("uniform_", generator, K.uniform, low=float(low),
                                  high=float(high))

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        """In place: samples of N(mean, std**2), seeded by ``hf.manual_seed`` (or from
        ``generator``)."""
        if std < 0:
            raise ValueError(f"normal_: std must be >= 0, got {std}")
        return self._random_fill_("normal_", generator, K.normal, mean=float(mean),
                                  std=float(std))

    # in-place shape changes: the tensor itself becomes the view (see ``_become_view``)
    def squeeze_(self, dim=None):
        return self._become_view("squeeze_", C.squeeze(self, dim))

    def unsqueeze_(self, dim):
        return self._become_view("unsqueeze_", C.unsqueeze(self, dim))

    def transpose_(self, dim0, dim1):
        return self._become_view("transpose_", C.transpose(self, dim0, dim1))

    def t_(self):
        return self._become_view("t_", self.t())

    def _random_fill_(self, name, generator, op, **params):
        if not self.dtype.is_floating_point:
            raise TypeError(f"{name}: expects a floating point tensor, got dtype {self.dtype}")
        shape = tuple(self.shape)
        with drawing(generator, self.device, name):
            draw = apply(op, self, dtype=self.dtype, device=str(self.device), **params) \
                if -1 in shape else apply(op, shape=shape, dtype=self.dtype,
                                          device=str(self.device), **params)
        return apply_inplace(I.index_put, self, self, draw, spec=(("ellipsis",),))

    def copy_(self, src):
        if isinstance(src, TensorLike) and src.dtype is not self.dtype:
            src = src.astype(self.dtype)
        return apply_inplace(I.index_put, self, self, src, spec=(("ellipsis",),))

    def fill_(self, value):
        return apply_inplace(I.index_put, self, self, value, spec=(("ellipsis",),))

    def zero_(self):
        return self.fill_(0)


def _is_dtype_name(s: str) -> bool:
    try:
        as_dtype(s)
        return True
    except TypeError:
        return False



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
