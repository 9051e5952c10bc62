"""Math methods of every tensor-like (eager Tensor, static Variable): elementwise functions,
clamping, activations and the other math ops, each a call of the op registry (see
:mod:`hybridfw.ops.methods`).
"""
from __future__ import annotations

from ..dtypes import bool_, int64
from . import composite as C
from . import composite_math as A
from . import composite_more as P
from . import composite_matrix as M
from . import elementwise as E
from . import linalg as L
from . import search as F
from .registry import apply

__all__ = ["MathMethods"]


class MathMethods:
    """Mixin of :class:`~hybridfw.ops.methods.TensorMethods`: the math methods."""

    __slots__ = ()

    # ---- math -------------------------------------------------------------------------------
    def add(self, other, *, alpha=1):
        return apply(E.add, self, A.scaled_other("add", self, other, alpha))

    def sub(self, other, *, alpha=1):
        return apply(E.sub, self, A.scaled_other("sub", self, other, alpha))

    def mul(self, other):
        return apply(E.mul, self, other)

    def div(self, other, *, rounding_mode=None):
        return A.div(self, other, rounding_mode=rounding_mode)

    divide = div

    def true_divide(self, other):
        return apply(E.div, self, other)

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
        return apply(E.mul, self, self)

    def reciprocal(self):
        return apply(E.div, 1.0, self)

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

    def addmm(self, mat1, mat2, *, beta=1, alpha=1):
        return P.addmm(self, mat1, mat2, beta=beta, alpha=alpha)

    def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
        return P.baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)

    def addmv(self, mat, vec, *, beta=1, alpha=1):
        return P.addmv(self, mat, vec, beta=beta, alpha=alpha)

    def addr(self, vec1, vec2, *, beta=1, alpha=1):
        return P.addr(self, vec1, vec2, beta=beta, alpha=alpha)

    def addbmm(self, batch1, batch2, *, beta=1, alpha=1):
        return P.addbmm(self, batch1, batch2, beta=beta, alpha=alpha)

    def nanmean(self, dim=None, keepdim=False, *, dtype=None):
        return P.nanmean(self, dim, keepdim, dtype=dtype)

    def cross(self, other, dim=None):
        return P.cross(self, other, dim)

    def take_along_dim(self, indices, dim=None):
        return P.take_along_dim(self, indices, dim)

    def tensor_split(self, indices_or_sections, dim=0):
        return P.tensor_split(self, indices_or_sections, dim)

    def logit(self, eps=None):
        return P.logit(self, eps)

    def xlogy(self, other):
        return P.xlogy(self, other)

    def aminmax(self, *, dim=None, keepdim=False):
        return P.aminmax(self, dim=dim, keepdim=keepdim)

    def rot90(self, k=1, dims=(0, 1)):
        return P.rot90(self, k, dims)

    def index_add(self, dim, index, source, *, alpha=1):
        return P.index_add(self, dim, index, source, alpha=alpha)

    def argwhere(self):
        return P.argwhere(self)

    def bincount(self, weights=None, minlength=0):
        return F.bincount(self, weights, minlength)

    def unique(self, sorted=True, return_inverse=False, return_counts=False,  # noqa: A002
               dim=None):
        return F.unique(self, sorted, return_inverse, return_counts, dim)

    def cummax(self, dim):
        return F.cummax(self, dim)

    def cummin(self, dim):
        return F.cummin(self, dim)

    def kthvalue(self, k, dim=-1, keepdim=False):
        return F.kthvalue(self, k, dim, keepdim)

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
