"""Reduction and shape methods of every tensor-like (eager Tensor, static Variable), each a
call of the op registry (see :mod:`hybridfw.ops.methods`).
"""
from __future__ import annotations

import numpy as np

from ..dtypes import as_dtype
from . import composite as C
from . import composite_extra as X
from . import elementwise as E
from . import reduction as R
from . import sorting as O
from .registry import TensorLike, apply

__all__ = ["ShapeMethods"]


class ShapeMethods:
    """Mixin of :class:`~hybridfw.ops.methods.TensorMethods`: reductions and shape methods."""

    __slots__ = ()

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
