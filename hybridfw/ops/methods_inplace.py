"""dtype conversions and in-place methods of every tensor-like (eager Tensor, static Variable),
each a call of the op registry (see :mod:`hybridfw.ops.methods`).
"""
from __future__ import annotations

import numpy as np

from ..dtypes import (LEGACY_TYPE_NAMES, DType, as_dtype, bool_, float16, float32, float64,
                      int8, int16, int32, int64, legacy_type_name, result_type, uint8)
from . import composite as C
from . import composite_compare as Q
from . import composite_extra as X
from . import composite_math as A
from . import composite_more as P
from . import creation as K
from . import elementwise as E
from . import indexing as I
from .factories import drawing
from .infer import normalize_dim
from .registry import TensorLike, apply, apply_inplace

__all__ = ["ConversionMethods"]


class ConversionMethods:
    """Mixin of :class:`~hybridfw.ops.methods.TensorMethods`: dtype conversions and in-place
    methods."""

    __slots__ = ()

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
        return apply_inplace(E.add, self, self, A.scaled_other("add_", self, other, alpha))

    def sub_(self, other, *, alpha=1):
        return apply_inplace(E.sub, self, self, A.scaled_other("sub_", self, other, alpha))

    def mul_(self, other):
        return apply_inplace(E.mul, self, self, other)

    def div_(self, other, *, rounding_mode=None):
        if rounding_mode is None:
            return apply_inplace(E.div, self, self, other)
        return self.copy_(A.div(self, other, rounding_mode=rounding_mode))

    def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
        if reduce not in (None, "add"):
            raise ValueError(f"scatter_: reduce must be None or 'add', got {reduce!r}")
        return apply_inplace(I.scatter, self, self, index,
                             X._scatter_source("scatter_", src, value),
                             dim=normalize_dim("scatter_", dim, self.ndim), reduce=reduce)

    def addcmul_(self, tensor1, tensor2, *, value=1):
        return self.copy_(A.addcmul(self, tensor1, tensor2, value=value))

    def addcdiv_(self, tensor1, tensor2, *, value=1):
        return self.copy_(A.addcdiv(self, tensor1, tensor2, value=value))

    def lerp_(self, end, weight):
        return self.copy_(A.lerp(self.clone(), end, weight))

    def square_(self):
        return self.copy_(self.clone().square())

    def nan_to_num_(self, nan=0.0, posinf=None, neginf=None):
        return self.copy_(Q.nan_to_num(self.clone(), nan, posinf, neginf))

    def cumsum_(self, dim, *, dtype=None):
        return self.copy_(C.cumsum(self, dim, dtype=dtype))

    def addmv_(self, mat, vec, *, beta=1, alpha=1):
        return self.copy_(P.addmv(self, mat, vec, beta=beta, alpha=alpha))

    def addr_(self, vec1, vec2, *, beta=1, alpha=1):
        return self.copy_(P.addr(self, vec1, vec2, beta=beta, alpha=alpha))

    def addbmm_(self, batch1, batch2, *, beta=1, alpha=1):
        return self.copy_(P.addbmm(self, batch1, batch2, beta=beta, alpha=alpha))

    def addmm_(self, mat1, mat2, *, beta=1, alpha=1):
        return self.copy_(P.addmm(self, mat1, mat2, beta=beta, alpha=alpha))

    def baddbmm_(self, batch1, batch2, *, beta=1, alpha=1):
        return self.copy_(P.baddbmm(self, batch1, batch2, beta=beta, alpha=alpha))

    def logit_(self, eps=None):
        return self.copy_(P.logit(self.clone(), eps))

    def xlogy_(self, other):
        return self.copy_(P.xlogy(self.clone(), other))

    def index_add_(self, dim, index, source, *, alpha=1):
        return self.copy_(P.index_add(self, dim, index, source, alpha=alpha))

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
