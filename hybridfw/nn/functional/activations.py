"""Activation functions, softmax and dropout."""
from __future__ import annotations

import math
import warnings

from ...dtypes import as_dtype
from ...ops import composite as C
from ...ops import elementwise as E
from ...ops import nn_ops as N
from ...ops.factories import rand_like
from ...ops.infer import normalize_dim
from ...ops.registry import apply, apply_inplace


def relu(input, inplace: bool = False):  # noqa: A002 - PyTorch's argument names throughout
    """max(x, 0)."""
    if inplace:
        return apply_inplace(E.relu, input, input)
    return apply(E.relu, input)


_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@C.half_in_float32
def gelu(input, approximate: str = "none"):  # noqa: A002
    """x * Phi(x): exact (erf) by default, or PyTorch's tanh approximation with
    ``approximate='tanh'``."""
    if approximate == "none":
        return input * 0.5 * (1 + apply(N.erf, input * _SQRT_HALF))
    if approximate == "tanh":
        inner = (input + 0.044715 * input * input * input) * _SQRT_2_OVER_PI
        return input * 0.5 * (1 + apply(E.tanh, inner))
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def silu(input, inplace: bool = False):  # noqa: A002
    """x * sigmoid(x)."""
    if inplace:
        return apply_inplace(E.mul, input, input, apply(E.sigmoid, input))
    return input * apply(E.sigmoid, input)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):  # noqa: A002
    """``x`` where ``x > 0``, else ``negative_slope * x`` (the gradient at 0 is the slope, as
    PyTorch's)."""
    if inplace:  # times 1 or the slope: the gradient needs only that factor, not the old x
        factor = (input > 0).to(input.dtype) * (1 - negative_slope) + negative_slope
        return apply_inplace(E.mul, input, input, factor)
    # relu(input) equals input where it is taken; through it the gradient stays an op of the
    # input (relu_backward), so higher-order gradients of leaky_relu(x) * x work, as PyTorch's
    return C.where(input > 0, apply(E.relu, input), input * negative_slope)


def prelu(input, weight):  # noqa: A002
    """``x`` where ``x > 0``, else ``weight * x``, with a learned slope: ``weight`` holds one
    slope (for every channel) or one per channel of dim 1 (an input of fewer than 2 dims has 1
    channel). The gradient at 0 is the slope, as PyTorch's.

    Example::

        >>> import hybridfw as hf
        >>> import hybridfw.nn.functional as F
        >>> F.prelu(hf.tensor([[-2.0, 3.0]]), hf.tensor([0.25, 0.5])).tolist()
        [[-0.5, 3.0]]
    """
    if weight.ndim > 1:
        raise ValueError(f"prelu: expected weight to be a scalar or 1-D tensor, got weight of "
                         f"shape {tuple(weight.shape)}")
    count = weight.numel()
    if count != 1:
        channels = input.shape[1] if input.ndim >= 2 else 1
        if channels != count and channels != -1:
            raise ValueError(f"prelu: weight of shape {tuple(weight.shape)} has {count} slopes "
                             f"but input of shape {tuple(input.shape)} has {channels} "
                             f"channel(s) (dim 1)")
        weight = C.reshape(weight, (count,) + (1,) * (input.ndim - 2))
    elif weight.ndim == 1 and input.ndim == 0:
        weight = C.reshape(weight, ())  # a 0-d input gives a 0-d result, as PyTorch
    # relu(input) equals input where it is taken: see leaky_relu
    return C.where(input > 0, apply(E.relu, input), input * weight)


def elu(input, alpha: float = 1.0, inplace: bool = False):  # noqa: A002
    """``x`` where ``x > 0``, else ``alpha (exp(x) - 1)``."""
    if inplace:  # (computed from a copy: the gradient needs the old values)
        return input.copy_(elu(input.clone(), alpha))
    negative = apply(E.expm1, C.clamp(input, max=0.0)) * alpha  # (no overflow for large x)
    return C.where(input > 0, input, negative)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):  # noqa: A002
    """``log(1 + exp(beta x)) / beta``, and ``x`` itself where ``beta x > threshold``."""
    scaled = input * beta
    smooth = apply(E.log1p, apply(E.exp, C.clamp(scaled, max=threshold))) / beta
    return C.where(scaled > threshold, input, smooth)


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0,  # noqa: A002
             inplace: bool = False):
    """``input`` clipped to ``[min_val, max_val]``; as PyTorch, the gradient is 0 at the bounds
    too (it flows only strictly inside)."""
    if inplace:  # (computed from a copy: the gradient needs the old values)
        return input.copy_(hardtanh(input.clone(), min_val, max_val))
    return apply(N.hardtanh, input, min_val=min_val, max_val=max_val)


def relu6(input, inplace: bool = False):  # noqa: A002
    """``min(max(x, 0), 6)``."""
    return hardtanh(input, 0.0, 6.0, inplace)


def tanh(input):  # noqa: A002
    """Elementwise tanh."""
    return apply(E.tanh, input)


def sigmoid(input):  # noqa: A002
    """1 / (1 + exp(-x)), computed without overflow."""
    return apply(E.sigmoid, input)


def logsigmoid(input):  # noqa: A002
    """log(sigmoid(x)), finite (with a finite gradient) for every finite x."""
    return apply(N.log_sigmoid, input)


def _floating(name: str, input) -> None:  # noqa: A002
    if not input.dtype.is_floating_point:
        raise TypeError(f"{name}: expected a floating-point input, got {input.dtype}")


def _in_place(input, fn, *args):  # noqa: A002
    """``input`` overwritten with ``fn(input, *args)``, computed from a copy (the gradient
    needs the old values)."""
    return input.copy_(fn(input.clone(), *args))


def mish(input, inplace: bool = False):  # noqa: A002
    """``x * tanh(softplus(x))``."""
    _floating("mish", input)
    if inplace:
        return _in_place(input, mish)
    return input * apply(E.tanh, softplus(input))


def hardswish(input, inplace: bool = False):  # noqa: A002
    """``x * relu6(x + 3) / 6``; as PyTorch's, the gradient is 0 at -3 and 1 at 3."""
    _floating("hardswish", input)
    if inplace:
        return _in_place(input, hardswish)
    return input * apply(N.hardtanh, input + 3, min_val=0.0, max_val=6.0) / 6


def hardsigmoid(input, inplace: bool = False):  # noqa: A002
    """``relu6(x + 3) / 6``; the gradient is 1/6 strictly between -3 and 3, else 0."""
    _floating("hardsigmoid", input)
    if inplace:
        return _in_place(input, hardsigmoid)
    return apply(N.hardtanh, input + 3, min_val=0.0, max_val=6.0) / 6


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace: bool = False):  # noqa: A002
    """``scale * elu(x, alpha)`` with the self-normalizing constants (alpha ~ 1.6733, scale
    ~ 1.0507)."""
    _floating("selu", input)
    if inplace:
        return _in_place(input, selu)
    return elu(input, _SELU_ALPHA) * _SELU_SCALE


def celu(input, alpha: float = 1.0, inplace: bool = False):  # noqa: A002
    """``x`` where ``x > 0``, else ``alpha * (exp(x / alpha) - 1)``."""
    _floating("celu", input)
    if alpha == 0:
        raise ValueError("celu: alpha cannot be 0")
    if inplace:
        return _in_place(input, celu, alpha)
    negative = apply(E.expm1, C.clamp(input, max=0.0) / alpha) * alpha
    return C.where(input > 0, input, negative)


def glu(input, dim: int = -1):  # noqa: A002
    """``a * sigmoid(b)``, where ``a`` and ``b`` are the two halves of ``input`` along
    ``dim``."""
    _floating("glu", input)
    if input.ndim == 0:
        raise ValueError("glu: does not take a 0-d input (the halved dim must be even)")
    d = normalize_dim("glu", dim, input.ndim)
    if input.shape[d] != -1 and input.shape[d] % 2:
        raise ValueError(f"glu: the halved dim must be even, but dim {dim} of the input of "
                         f"shape {tuple(input.shape)} has size {input.shape[d]}")
    a, b = C.chunk(input, 2, d)
    return a * apply(E.sigmoid, b)


def softsign(input):  # noqa: A002
    """``x / (1 + |x|)``."""
    return input / (apply(E.abs_, input) + 1)


def tanhshrink(input):  # noqa: A002
    """``x - tanh(x)``."""
    return input - apply(E.tanh, input)


def threshold(input, threshold: float, value: float, inplace: bool = False):  # noqa: A002
    """``x`` where ``x > threshold``, else ``value`` (cast to ``input``'s dtype)."""
    if not input.dtype.is_floating_point:
        value = int(value) if input.dtype is not as_dtype("bool") else bool(value)
    if inplace:
        return input.masked_fill_(apply(E.bitwise_not, input > threshold), value)
    return apply(E.where, input > threshold, input, value)


def _softmax_dim(name, input, dim):
    if dim is None:  # PyTorch's legacy implicit choice
        dim = 0 if input.ndim in (0, 1, 3) else 1
        warnings.warn(f"{name}: implicit dimension choice is deprecated; pass dim= explicitly",
                      stacklevel=3)
    return normalize_dim(name, dim, input.ndim)


def _cast(input, dtype):
    if dtype is None:
        return input
    return apply(E.cast, input, dtype=as_dtype(dtype))


def softmax(input, dim=None, _stacklevel: int = 3, dtype=None):  # noqa: A002
    """exp(x) / sum(exp(x)) along ``dim`` (stable: the max is subtracted first)."""
    input = _cast(input, dtype)  # noqa: A001
    return apply(N.softmax, input, dim=_softmax_dim("softmax", input, dim))


def log_softmax(input, dim=None, _stacklevel: int = 3, dtype=None):  # noqa: A002
    """x - logsumexp(x) along ``dim``; finite, with finite gradients, for any finite x."""
    input = _cast(input, dtype)  # noqa: A001
    return apply(N.log_softmax, input, dim=_softmax_dim("log_softmax", input, dim))


def softmin(input, dim=None, _stacklevel: int = 3, dtype=None):  # noqa: A002
    """``softmax(-x)`` along ``dim``."""
    input = _cast(input, dtype)  # noqa: A001
    _floating("softmin", input)
    return apply(N.softmax, -input, dim=_softmax_dim("softmin", input, dim))


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):  # noqa: A002
    """Zero each element with probability ``p`` and scale the rest by 1/(1-p) (training only).

    The mask comes from ``hf.rand_like``, so ``hf.manual_seed`` makes it reproducible.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability must be between 0 and 1, got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return apply_inplace(E.mul, input, input, 0) if inplace else input * 0
    keep = apply(E.ge, rand_like(input), p)
    mask = apply(E.cast, keep, dtype=input.dtype) * (1.0 / (1.0 - p))
    if inplace:
        return apply_inplace(E.mul, input, input, mask)
    return input * mask


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):  # noqa: A002
    """Zero whole channels: each ``(n, c)`` feature map of an ``(N, C, H, W)`` input with
    probability ``p``, the rest scaled by 1/(1-p) (training only). A 3-D input is taken as
    ``(N, C, L)`` with PyTorch's warning."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout2d: probability must be between 0 and 1, got {p}")
    if input.ndim not in (3, 4):
        raise ValueError(f"dropout2d: expected a 4-D (N, C, H, W) input, got shape "
                         f"{tuple(input.shape)}")
    if input.ndim == 3:
        warnings.warn("dropout2d: received a 3-D input; it is taken as (N, C, L) and whole "
                      "(n, c) rows are dropped (use dropout1d for that)", stacklevel=2)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return apply_inplace(E.mul, input, input, 0) if inplace else input * 0
    # one draw per (n, c): the mask has the input's shape with 1 in the spatial dims
    corner = input[(slice(None), slice(None)) + (slice(0, 1),) * (input.ndim - 2)]
    keep = apply(E.ge, rand_like(corner), p)
    mask = apply(E.cast, keep, dtype=input.dtype) * (1.0 / (1.0 - p))
    if inplace:
        return apply_inplace(E.mul, input, input, mask)
    return input * mask
