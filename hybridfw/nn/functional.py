"""``hf.nn.functional`` (``F``): PyTorch's functional layer API, on hybridfw ops.

Signatures, defaults and semantics follow ``torch.nn.functional``. Everything is written in
registry ops (``hybridfw.ops``), so the same code runs eagerly, inside static programs, and
under double backward. Shape problems raise ``ValueError`` and dtype problems ``TypeError``,
each naming the function and the shapes/dtypes.

Example::

    >>> import hybridfw as hf
    >>> import hybridfw.nn.functional as F
    >>> logits = hf.tensor([[2.0, 0.5, -1.0]], requires_grad=True)
    >>> loss = F.cross_entropy(logits, hf.tensor([0]))
    >>> loss.backward()
    >>> logits.grad.shape
    (1, 3)
"""
from __future__ import annotations

import math
import warnings

from ..dtypes import as_dtype, int64
from ..dygraph import no_grad
from ..memory.checkpoint import is_recomputing
from ..ops import composite as C
from ..ops import composite_matrix as M
from ..ops import creation as K
from ..ops import elementwise as E
from ..ops import indexing as I
from ..ops import linalg as L
from ..ops import nn_ops as N
from ..ops import reduction as R
from ..ops import shape_ops as S
from ..ops.conv import conv_attrs, pair
from ..ops.factories import rand_like
from ..ops.infer import broadcast_shapes, normalize_dim
from ..ops.pooling import pool_attrs
from ..ops.registry import apply, apply_inplace
from .interpolation import interpolate

__all__ = ["relu", "leaky_relu", "elu", "softplus", "hardtanh", "relu6", "gelu", "silu", "tanh",
           "sigmoid", "logsigmoid", "softmax", "log_softmax", "dropout", "dropout2d", "linear",
           "conv2d", "conv_transpose2d", "max_pool1d", "avg_pool1d", "adaptive_avg_pool1d",
           "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "interpolate", "batch_norm",
           "layer_norm", "group_norm", "embedding", "pad", "one_hot", "cross_entropy", "nll_loss",
           "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "normalize",
           "binary_cross_entropy", "binary_cross_entropy_with_logits"]


# --------------------------------------------------------------------------- activations
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
    return C.where(input > 0, input, input * negative_slope)


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
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val "
                         f"({max_val})")
    if inplace:  # (computed from a copy: the gradient needs the old values)
        return input.copy_(hardtanh(input.clone(), min_val, max_val))
    inside = (input > min_val) & (input < max_val)
    return C.where(inside, input, C.clamp(input, min=min_val, max=max_val).detach())


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


# --------------------------------------------------------------------------- linear, conv
def _same_dtype(name, a, b, what_a, what_b):
    if a.dtype is not b.dtype:
        raise TypeError(f"{name}: {what_a} and {what_b} must have the same dtype, got "
                        f"{a.dtype} and {b.dtype}")


def linear(input, weight, bias=None):  # noqa: A002
    """``input @ weight.T + bias``; weight is (out_features, in_features)."""
    if weight.ndim not in (1, 2) or input.ndim < 1:
        raise ValueError(f"linear: expected a 1-D or 2-D weight and an input with at least 1 "
                         f"dim, got input {tuple(input.shape)} and weight {tuple(weight.shape)}")
    _same_dtype("linear", input, weight, "input", "weight")
    features = weight.shape[-1]
    if input.shape[-1] != features and -1 not in (input.shape[-1], features):
        raise ValueError(f"linear: input of shape {tuple(input.shape)} has {input.shape[-1]} "
                         f"features but weight of shape {tuple(weight.shape)} expects "
                         f"{features}")
    if weight.ndim == 1:
        out = apply(L.matmul, input, weight)
    else:
        out = apply(L.linear, input, weight)
    if bias is not None:
        out = out + bias
    return out


def _batched(name, input, ndim, layout):
    """(input with a batch dim, whether one was added) for ops taking batched or unbatched."""
    if input.ndim == ndim - 1:
        return C.unsqueeze(input, 0), True
    if input.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim - 1}-D or {ndim}-D input ({layout}), got "
                         f"shape {tuple(input.shape)}")
    return input, False


def _unbatched(out, added):
    return C.squeeze(out, 0) if added else out


def _conv_padding(name, padding, weight, stride, dilation):
    if not isinstance(padding, str):
        return padding
    if padding == "valid":
        return 0
    if padding != "same":
        raise ValueError(f"{name}: padding string must be 'valid' or 'same', got {padding!r}")
    if pair(name, "stride", stride) != (1, 1):
        raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
    pads = []
    for k, d in zip(weight.shape[2:], pair(name, "dilation", dilation)):
        total = d * (k - 1)  # PyTorch puts the odd pixel at the end
        pads.append((total // 2, total - total // 2))
    return tuple(pads)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1,  # noqa: A002
           groups: int = 1):
    """2-D convolution (cross-correlation) of an (N, C, H, W) or (C, H, W) input with an
    (out_channels, C/groups, kh, kw) weight; ``padding`` is an int, a pair, 'valid' or 'same'.

    Example::

        >>> x, w = hf.randn(1, 3, 8, 8), hf.randn(4, 3, 3, 3)
        >>> F.conv2d(x, w, padding=1).shape
        (1, 4, 8, 8)
    """
    x, added = _batched("conv2d", input, 4, "N, C, H, W")
    if weight.ndim != 4:
        raise ValueError(f"conv2d: expected a 4-D weight (out_channels, in_channels/groups, kh, "
                         f"kw), got shape {tuple(weight.shape)}")
    attrs = conv_attrs(stride, _conv_padding("conv2d", padding, weight, stride, dilation),
                       dilation, groups)
    out = apply(N.conv2d, x, weight, **attrs)
    if bias is not None:
        if tuple(bias.shape) != (weight.shape[0],):
            raise ValueError(f"conv2d: bias must have shape ({weight.shape[0]},) for weight of "
                             f"shape {tuple(weight.shape)}, got {tuple(bias.shape)}")
        out = out + apply(S.reshape, bias, shape=(1, -1, 1, 1))
    return _unbatched(out, added)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0,  # noqa: A002
                     output_padding=0, groups: int = 1, dilation=1):
    """2-D transposed convolution of an (N, C_in, H, W) or (C_in, H, W) input with an
    (C_in, C_out/groups, kh, kw) weight: the gradient of :func:`conv2d` with respect to its
    input, so it runs on the ``conv2d_input_grad`` op. The output is
    ``(H - 1)*stride - 2*padding + dilation*(kh - 1) + output_padding + 1`` high (likewise
    wide); ``output_padding`` (smaller than the stride or the dilation) adds rows at the bottom
    and columns at the right.

    Example::

        >>> x, w = hf.randn(1, 4, 5, 5), hf.randn(4, 2, 3, 3)
        >>> F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1).shape
        (1, 2, 10, 10)
    """
    x, added = _batched("conv_transpose2d", input, 4, "N, C_in, H, W")
    if weight.ndim != 4:
        raise ValueError(f"conv_transpose2d: expected a 4-D weight (in_channels, "
                         f"out_channels/groups, kh, kw), got shape {tuple(weight.shape)}")
    _same_dtype("conv_transpose2d", x, weight, "input", "weight")
    attrs = conv_attrs(stride, padding, dilation, groups, name="conv_transpose2d")
    extra = pair("conv_transpose2d", "output_padding", output_padding)
    c, c_w = x.shape[1], weight.shape[0]
    if c != -1 and c != c_w:
        raise ValueError(f"conv_transpose2d: input has {c} channels but the weight of shape "
                         f"{tuple(weight.shape)} expects {c_w} (weight dim 0 is in_channels)")
    if c_w % groups:
        raise ValueError(f"conv_transpose2d: in_channels {c_w} (weight shape "
                         f"{tuple(weight.shape)}) must be divisible by groups={groups}")
    sizes, pads, zeros = [], [], []
    for axis, (n, k, s, (p, _), d, e) in enumerate(zip(x.shape[2:], weight.shape[2:],
                                                        attrs["stride"], attrs["padding"],
                                                        attrs["dilation"], extra)):
        if e < 0 or (e >= s and e >= d):
            raise ValueError(f"conv_transpose2d: output_padding {extra} must be non-negative "
                             f"and smaller than either the stride {attrs['stride']} or the "
                             f"dilation {attrs['dilation']}")
        # conv2d_input_grad places the same values wherever the output ends; the output's last
        # rows are set by the padding of the convolution it inverts: ``p - e`` at the bottom
        # reaches the ``e`` extra rows, and rows past the last one any input reaches (e > p,
        # only with dilation > stride) are zeros, padded on afterwards.
        if n == -1 and s != 1:
            raise ValueError(f"conv_transpose2d: the input's spatial dim {axis + 2} is known only "
                             f"when the program runs (input shape {tuple(input.shape)}, an "
                             f"InputSpec None dim) and the stride is {s}, so the output size "
                             f"cannot be fixed; give the height and width fixed sizes in the "
                             f"InputSpec (stride 1 takes any)")
        reached = min(e, p)
        size = -1 if n == -1 else (n - 1) * s - 2 * p + d * (k - 1) + reached + 1
        if n != -1 and size + e - reached <= 0:
            raise ValueError(f"conv_transpose2d: input of shape {tuple(input.shape)} with weight "
                             f"{tuple(weight.shape)}, stride {attrs['stride']}, padding "
                             f"{attrs['padding'][0][0], attrs['padding'][1][0]} and dilation "
                             f"{attrs['dilation']} gives a spatial dim {axis + 2} of size "
                             f"{size + e - reached}")
        sizes.append(size)
        pads.append((p, p - reached))
        zeros.append(e - reached)
    attrs["padding"] = tuple(pads)
    out = apply(N.conv2d_input_grad, x, weight, input_size=tuple(sizes), **attrs)
    if any(zeros):
        out = apply(N.pad_constant, out, pad=(0, zeros[1], 0, zeros[0]), value=0)
    if bias is not None:
        c_out = weight.shape[1] * groups
        if tuple(bias.shape) != (c_out,):
            raise ValueError(f"conv_transpose2d: bias must have shape ({c_out},) for weight of "
                             f"shape {tuple(weight.shape)} and groups={groups}, got "
                             f"{tuple(bias.shape)}")
        out = out + apply(S.reshape, bias, shape=(1, -1, 1, 1))
    return _unbatched(out, added)


def _single(name: str, what: str, value) -> int:
    if isinstance(value, (tuple, list)) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: {what} must be an int or a 1-tuple of ints, got {value!r}")
    return value


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1,  # noqa: A002
           groups: int = 1):
    """1-D convolution (cross-correlation) of an (N, C, L) or (C, L) input with an
    (out_channels, C/groups, k) weight, as :func:`conv2d` over a height of 1; ``padding`` is an
    int, 'valid' or 'same'.

    Example::

        >>> x, w = hf.randn(2, 3, 10), hf.randn(4, 3, 5)
        >>> F.conv1d(x, w, padding=2).shape
        (2, 4, 10)
    """
    if input.ndim not in (2, 3):
        raise ValueError(f"conv1d: expected a 2-D (C, L) or 3-D (N, C, L) input, got shape "
                         f"{tuple(input.shape)}")
    if weight.ndim != 3:
        raise ValueError(f"conv1d: expected a 3-D weight (out_channels, in_channels/groups, k), "
                         f"got shape {tuple(weight.shape)}")
    if not isinstance(padding, str):
        padding = (0, _single("conv1d", "padding", padding))
    out = conv2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias,
                 (1, _single("conv1d", "stride", stride)), padding,
                 (1, _single("conv1d", "dilation", dilation)), groups)
    return out.squeeze(-2)


# --------------------------------------------------------------------------- pooling
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode: bool = False, return_indices: bool = False):
    """2-D max pooling; with ``return_indices`` also the flat H*W index of each maximum."""
    x, added = _batched("max_pool2d", input, 4, "N, C, H, W")
    attrs = pool_attrs("max_pool2d", kernel_size, stride, padding, dilation)
    out = _unbatched(apply(N.max_pool2d, x, ceil_mode=bool(ceil_mode), **attrs), added)
    if return_indices:
        indices = apply(N.max_pool2d_indices, x, ceil_mode=bool(ceil_mode), **attrs)
        return out, _unbatched(indices, added)
    return out


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False,  # noqa: A002
               count_include_pad: bool = True, divisor_override=None):
    """2-D average pooling (PyTorch's divisor rules for padding and ceil_mode)."""
    x, added = _batched("avg_pool2d", input, 4, "N, C, H, W")
    attrs = pool_attrs("avg_pool2d", kernel_size, stride, padding)
    del attrs["dilation"]
    out = apply(N.avg_pool2d, x, ceil_mode=bool(ceil_mode),
                count_include_pad=bool(count_include_pad), divisor_override=divisor_override,
                **attrs)
    return _unbatched(out, added)


def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    """Average pooling to ``output_size`` (an int, or a pair whose None entries keep the
    input size)."""
    x, added = _batched("adaptive_avg_pool2d", input, 4, "N, C, H, W")
    if isinstance(output_size, int) or output_size is None:
        output_size = (output_size, output_size)
    size = tuple(x.shape[2 + i] if s is None else s for i, s in enumerate(output_size))
    out = apply(N.adaptive_avg_pool2d, x, output_size=pair("adaptive_avg_pool2d",
                                                           "output_size", size))
    return _unbatched(out, added)


def _pool1d_input(name: str, input):  # noqa: A002
    if input.ndim not in (2, 3):
        raise ValueError(f"{name}: expected a 2-D (C, L) or 3-D (N, C, L) input, got shape "
                         f"{tuple(input.shape)}")
    return input.unsqueeze(-2)  # (pooled as 2-D over a height of 1)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode: bool = False, return_indices: bool = False):
    """1-D max pooling over (N, C, L) or (C, L), as :func:`max_pool2d` over a height of 1;
    with ``return_indices`` also the index along L of each maximum."""
    k = _single("max_pool1d", "kernel_size", kernel_size)
    s = k if stride is None else _single("max_pool1d", "stride", stride)
    out = max_pool2d(_pool1d_input("max_pool1d", input), (1, k), (1, s),
                     (0, _single("max_pool1d", "padding", padding)),
                     (1, _single("max_pool1d", "dilation", dilation)), ceil_mode, return_indices)
    if return_indices:  # (a flat index over a height of 1 is the index along L)
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False,  # noqa: A002
               count_include_pad: bool = True):
    """1-D average pooling over (N, C, L) or (C, L), as :func:`avg_pool2d` over a height of 1."""
    k = _single("avg_pool1d", "kernel_size", kernel_size)
    s = k if stride is None else _single("avg_pool1d", "stride", stride)
    return avg_pool2d(_pool1d_input("avg_pool1d", input), (1, k), (1, s),
                      (0, _single("avg_pool1d", "padding", padding)), ceil_mode,
                      count_include_pad).squeeze(-2)


def adaptive_avg_pool1d(input, output_size):  # noqa: A002
    """Average pooling of (N, C, L) or (C, L) to length ``output_size``."""
    size = _single("adaptive_avg_pool1d", "output_size", output_size)
    return adaptive_avg_pool2d(_pool1d_input("adaptive_avg_pool1d", input), (1, size)).squeeze(-2)


# --------------------------------------------------------------------------- normalization
def _check_param(name, what, t, size, input):
    if t is None:
        return
    if t.ndim != 1 or t.shape[0] != size:
        raise ValueError(f"{name}: {what} must have shape ({size},) for input of shape "
                         f"{tuple(input.shape)}, got {tuple(t.shape)}")


def batch_norm(input, running_mean, running_var, weight=None, bias=None,  # noqa: A002
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5):
    """Normalize over every dim but the channel dim 1.

    Training uses the batch statistics (biased variance) and, when running stats are given,
    updates them in place without recording a graph: ``running = (1 - momentum) * running +
    momentum * batch`` with the *unbiased* batch variance, exactly like PyTorch -- except while
    ``hf.memory.checkpoint`` recomputes the forward (:func:`hf.memory.is_recomputing`), which
    must not update them a second time.
    """
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input with at least 2 dims (N, C, ...), got "
                         f"shape {tuple(input.shape)}")
    _check_norm_dtypes("batch_norm", input, running_mean=running_mean, running_var=running_var,
                       weight=weight, bias=bias)
    channels = input.shape[1]
    for what, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        _check_param("batch_norm", what, t, channels, input)
    shape = (1, channels) + (1,) * (input.ndim - 2)
    dims = (0,) + tuple(range(2, input.ndim))
    if training:
        count = 1
        for d in dims:
            count *= input.shape[d]
        if any(input.shape[d] < 0 for d in dims):
            count = -1  # (two unknown dims multiply to a positive number)
        if 0 < count <= 1:  # (negative: a dim unknown until run time)
            raise ValueError(f"batch_norm: expected more than 1 value per channel when "
                             f"training, got input of shape {tuple(input.shape)}")
        if count < 0:  # a static program counts the values per channel when it runs
            count = apply(R.dim_numel, input, dim=dims)
        mean = C.mean(input, dims, keepdim=True)
        centered = input - mean
        var = C.mean(centered * centered, dims, keepdim=True)
        if is_recomputing():  # hf.memory.checkpoint's backward: the forward updated them
            running_mean = running_var = None
        with no_grad():
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(C.reshape(mean, channels) * momentum)
            if running_var is not None:
                unbiased = C.reshape(var, channels) * (momentum * count / (count - 1))
                running_var.mul_(1 - momentum).add_(unbiased)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var must be given when "
                             "training=False")
        centered = input - C.reshape(running_mean, shape)
        var = C.reshape(running_var, shape)
    out = centered * apply(E.rsqrt, var + eps)
    if weight is not None:
        out = out * C.reshape(weight, shape)
    if bias is not None:
        out = out + C.reshape(bias, shape)
    return out if out.dtype is input.dtype else out.astype(input.dtype)


def _check_norm_dtypes(name, input, **params):  # noqa: A002
    """As PyTorch: a floating input; parameters of its dtype, or float32 ones for a float16
    input (computed in float32, the result in float16); any other mix is a TypeError."""
    if not input.dtype.is_floating_point:
        raise TypeError(f"{name}: expected a floating-point input, got dtype {input.dtype}")
    for what, t in params.items():
        if t is None or t.dtype is input.dtype:
            continue
        if input.dtype.name == "float16" and t.dtype.name == "float32":
            continue
        raise TypeError(f"{name}: mixed dtypes: input {input.dtype}, {what} {t.dtype}; give "
                        f"them one dtype (module.to({input.dtype.name}) or input.to(...))")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):  # noqa: A002
    """Normalize over the trailing ``normalized_shape`` dims (biased variance)."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or k > input.ndim or tuple(input.shape[input.ndim - k:]) != normalized_shape:
        raise ValueError(f"layer_norm: normalized_shape {normalized_shape} must match the "
                         f"trailing dims of input of shape {tuple(input.shape)}")
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != normalized_shape:
            raise ValueError(f"layer_norm: {what} must have shape {normalized_shape}, got "
                             f"{tuple(t.shape)}")
    _check_norm_dtypes("layer_norm", input, weight=weight, bias=bias)
    dims = tuple(range(input.ndim - k, input.ndim))
    centered = input - C.mean(input, dims, keepdim=True)
    var = C.mean(centered * centered, dims, keepdim=True)
    out = centered * apply(E.rsqrt, var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out if out.dtype is input.dtype else out.astype(input.dtype)


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):  # noqa: A002
    """Normalize each of ``num_groups`` groups of channels of an (N, C, ...) input over its
    channels and positions (biased variance), then the per-channel ``weight`` and ``bias``."""
    if input.ndim < 2:
        raise ValueError(f"group_norm: expected an input with at least 2 dims (N, C, ...), got "
                         f"shape {tuple(input.shape)}")
    channels = input.shape[1]
    if channels % num_groups:
        raise ValueError(f"group_norm: the {channels} channels of input of shape "
                         f"{tuple(input.shape)} must be divisible by num_groups={num_groups}")
    _check_norm_dtypes("group_norm", input, weight=weight, bias=bias)
    for what, t in (("weight", weight), ("bias", bias)):
        _check_param("group_norm", what, t, channels, input)
    grouped = input.unflatten(1, (num_groups, channels // num_groups))
    dims = tuple(range(2, grouped.ndim))
    centered = grouped - C.mean(grouped, dims, keepdim=True)
    var = C.mean(centered * centered, dims, keepdim=True)
    out = (centered * apply(E.rsqrt, var + eps)).flatten(1, 2)
    shape = (1, channels) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * C.reshape(weight, shape)
    if bias is not None:
        out = out + C.reshape(bias, shape)
    return out if out.dtype is input.dtype else out.astype(input.dtype)


# --------------------------------------------------------------------------- embedding, pad
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type: float = 2.0,  # noqa: A002
              scale_grad_by_freq: bool = False, sparse: bool = False):
    """Rows ``weight[input]``; the ``padding_idx`` row gets no gradient. ``max_norm``
    renormalizes (in place) the rows looked up whose ``norm_type``-norm exceeds it.
    ``scale_grad_by_freq`` divides each row's gradient by how often its index occurs in
    ``input``. ``sparse`` is accepted, and the gradient is dense."""
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got "
                         f"shape {tuple(weight.shape)}")
    num = weight.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise ValueError(f"embedding: padding_idx {padding_idx} must be within "
                             f"num_embeddings={num}")
        padding_idx %= num
    if max_norm is not None:
        _renormalize_rows(input, weight, float(max_norm), float(norm_type))
    return apply(N.embedding, weight, input, padding_idx=padding_idx,
                 scale_grad_by_freq=bool(scale_grad_by_freq))


def _renormalize_rows(input, weight, max_norm, norm_type):
    with no_grad():
        flat = C.reshape(input, -1)
        rows = apply(N.embedding, weight, flat, padding_idx=None)
        # any norm_type, inf/-inf (largest/smallest |w|) and 0 (non-zeros) too, as torch's
        # embedding_renorm_: rows above max_norm are scaled by max_norm / (norm + 1e-7)
        norms = M.norm(rows, norm_type, -1, keepdim=True)
        scale = apply(E.where, norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        # a repeated index writes the same row twice: no accumulation needed
        apply_inplace(I.index_put, weight, weight, rows * scale, flat, spec=(("tensor",),))


def _pad_index(n, before, after, mode, device):
    """Source positions of a reflect/replicate/circular pad along one dim of size ``n``."""
    pos = apply(K.arange, start=-before, stop=n + after, step=1, dtype=int64,
                device=str(device))
    if mode == "replicate":
        return apply(E.clamp, pos, min=0, max=n - 1)
    if mode == "circular":
        return apply(E.remainder, pos, n)
    last = n - 1  # reflect: mirror at both ends without repeating the edge
    return last - apply(E.abs_, last - apply(E.abs_, pos))


def pad(input, pad, mode: str = "constant", value=None):  # noqa: A002
    """Pad the trailing dims; ``pad`` lists (before, after) pairs starting from the LAST dim.
    ``mode`` is 'constant' (negative pads crop), 'reflect', 'replicate' or 'circular'."""
    pad = tuple(int(p) for p in pad)
    if mode == "constant":
        return apply(N.pad_constant, input, pad=pad, value=0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', "
                         f"got {mode!r}")
    if value not in (None, 0):
        raise ValueError(f"pad: value is only used with mode='constant', got mode={mode!r}")
    if len(pad) % 2 or len(pad) > 2 * input.ndim:
        raise ValueError(f"pad: the pad tuple must have an even length of at most 2 * ndim, "
                         f"got {len(pad)} for input of shape {tuple(input.shape)}")
    out = input
    for k in range(len(pad) // 2):
        d = input.ndim - 1 - k
        before, after = pad[2 * k], pad[2 * k + 1]
        n = input.shape[d]
        if n == -1 and (before or after):
            raise ValueError(f"pad: {mode} padding of dim {d}, whose size is known only when "
                             f"the program runs (input shape {tuple(input.shape)}, an "
                             "InputSpec None dim), is not supported; give that dim a fixed "
                             "size in the InputSpec, or use mode='constant'")
        # as PyTorch: a negative pad crops; reflect mirrors less than the dim's size, circular
        # wraps at most once, replicate repeats the edge any number of times
        where = f"of dim {d} for input of shape {tuple(input.shape)}"
        if mode == "reflect" and max(before, after) >= n:
            raise ValueError(f"pad: reflect padding {(before, after)} {where} must be less than "
                             f"the dim's size {n}")
        if mode == "circular" and max(before, after) > n:
            raise ValueError(f"pad: circular padding {(before, after)} {where} wraps around "
                             f"more than once (at most the dim's size {n})")
        if n + before + after <= 0 and not (mode == "circular" and n + before + after == 0):
            raise ValueError(f"pad: {mode} padding {(before, after)} {where} leaves "
                             f"{n + before + after} elements")
        if mode == "circular" and min(before, after) < 0:  # crops first, then wraps the rest
            start, stop = max(-before, 0), n - max(-after, 0)
            spec = (("slice", None, None, None),) * d + (("slice", start, stop, None),)
            out = apply(I.getitem, out, spec=spec)
            n, before, after = stop - start, max(before, 0), max(after, 0)
            if n <= 0 and (before or after):
                raise ValueError(f"pad: circular padding {pad[2 * k:2 * k + 2]} {where} crops "
                                 "every element, leaving nothing to wrap")
        if before or after:
            index = _pad_index(n, before, after, mode, input.device)
            spec = (("slice", None, None, None),) * d + (("tensor",),)
            out = apply(I.getitem, out, index, spec=spec)
    return out


def one_hot(input=None, num_classes: int = -1, *, tensor=None):  # noqa: A002
    """int64 one-hot encoding in a new last dim; ``num_classes=-1`` means max + 1. The
    indices are ``input`` (PyTorch's parameter name) or ``tensor=`` (the name its docs use)."""
    if (input is None) == (tensor is None):
        raise TypeError("one_hot: pass the indices once, as input (positionally or input=) or "
                        "as tensor=")
    tensor = input if tensor is None else tensor
    if num_classes == -1:
        if tensor.ndim and 0 in tensor.shape:
            raise ValueError("one_hot: cannot infer the number of classes from an empty tensor")
        largest = C.max(tensor).item()
        if not isinstance(largest, (int, float)):  # a static program's run-time value
            raise ValueError(
                "one_hot: num_classes=-1 takes the number of classes from the values, which a "
                "static program knows only when it runs (the result's shape would depend on "
                f"them); pass num_classes (input of shape {tuple(tensor.shape)})")
        num_classes = int(largest) + 1
    return apply(N.one_hot, tensor, num_classes=num_classes)


# --------------------------------------------------------------------------- losses
def _reduction(name, reduction, size_average=None, reduce=None):
    if size_average is not None or reduce is not None:  # PyTorch's deprecated arguments
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = ("mean" if size_average else "sum") if reduce else "none"
        warnings.warn(f"{name}: size_average and reduce are deprecated, use "
                      f"reduction={reduction!r}", stacklevel=3)
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got "
                         f"{reduction!r}")
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return C.mean(loss)
    if reduction == "sum":
        return C.sum(loss)
    return loss


def _weighted(name, loss, weight, reduction, input):
    """Elementwise ``loss * weight`` reduced; 'mean' divides by the weight sum (PyTorch's
    weighted mse/l1 semantics)."""
    if weight is None:
        return _reduce(loss, reduction)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError(f"{name}: weight of shape {tuple(weight.shape)} must have the input's "
                         f"shape {tuple(input.shape)}")
    loss = loss * weight
    if reduction == "mean":
        return C.sum(loss) / C.sum(weight)
    return _reduce(loss, reduction)


def _broadcast_target(name, input, target):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"{name}: target size {tuple(target.shape)} differs from input size "
                      f"{tuple(input.shape)}; they will be broadcast, which is likely wrong",
                      stacklevel=3)
        broadcast_shapes(name, tuple(input.shape), tuple(target.shape))


def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",  # noqa: A002
             weight=None):
    """Squared error (x - y)^2, reduced."""
    reduction = _reduction("mse_loss", reduction, size_average, reduce)
    _broadcast_target("mse_loss", input, target)
    diff = input - target
    return _weighted("mse_loss", diff * diff, weight, reduction, input)


def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",  # noqa: A002
            weight=None):
    """Absolute error |x - y|, reduced."""
    reduction = _reduction("l1_loss", reduction, size_average, reduce)
    _broadcast_target("l1_loss", input, target)
    return _weighted("l1_loss", apply(E.abs_, input - target), weight, reduction, input)


def smooth_l1_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                   reduction: str = "mean", beta: float = 1.0):
    """``0.5 (x - y)^2 / beta`` where ``|x - y| < beta``, else ``|x - y| - 0.5 beta``, reduced
    (``beta=0``: the L1 loss)."""
    reduction = _reduction("smooth_l1_loss", reduction, size_average, reduce)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    _broadcast_target("smooth_l1_loss", input, target)
    diff = apply(E.abs_, input - target)
    if beta == 0:
        return _reduce(diff, reduction)
    return _reduce(C.where(diff < beta, diff * diff * (0.5 / beta), diff - 0.5 * beta),
                   reduction)


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0,  # noqa: A002
               weight=None):
    """``0.5 (x - y)^2`` where ``|x - y| < delta``, else ``delta (|x - y| - 0.5 delta)``;
    ``weight`` multiplies it elementwise before the reduction (as PyTorch: 'mean' divides by
    the element count, not by the weight sum)."""
    reduction = _reduction("huber_loss", reduction)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    _broadcast_target("huber_loss", input, target)
    diff = apply(E.abs_, input - target)
    loss = C.where(diff < delta, diff * diff * 0.5, (diff - 0.5 * delta) * delta)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean",  # noqa: A002
           log_target: bool = False):
    """Pointwise KL divergence ``y (log y - x)`` of log-probabilities ``x`` from the target
    ``y`` (0 where ``y = 0``; with ``log_target``, ``exp(y) (y - x)``). ``reduction``:
    'batchmean' (the sum over the batch size: the KL divergence), 'sum', 'none', or 'mean' (the
    mean over every element, with PyTorch's warning)."""
    if reduction == "batchmean" and size_average is None and reduce is None:
        batch = input.shape[0] if input.ndim else 1
    else:
        reduction = _reduction("kl_div", reduction, size_average, reduce)
        if reduction == "mean":
            warnings.warn("kl_div: reduction='mean' divides the total loss by both the batch "
                          "size and the support size; 'batchmean' divides only by the batch "
                          "size, as the KL divergence is defined", stacklevel=2)
    if log_target:
        loss = apply(E.exp, target) * (target - input)
    else:  # (the log of 1 where y = 0: a finite 0 * log term, and its gradient)
        loss = target * (apply(E.log, C.where(target > 0, target, 1.0)) - input)
    if reduction == "batchmean":
        return C.sum(loss) / batch
    return _reduce(loss, reduction)


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12):  # noqa: A002
    """``x / max(||x||_p, eps)`` along ``dim``."""
    return input / C.clamp(M.norm(input, p, dim, keepdim=True), min=eps)


def _same_shape_target(name, input, target):
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"{name}: target size {tuple(target.shape)} must be the same as the "
                         f"input size {tuple(input.shape)}")


def binary_cross_entropy(input, target, weight=None, size_average=None,  # noqa: A002
                         reduce=None, reduction: str = "mean"):
    """-(y log x + (1 - y) log(1 - x)) for probabilities x; each log is clamped at -100, as
    in PyTorch, so the loss and its gradient stay finite at x = 0 or 1."""
    reduction = _reduction("binary_cross_entropy", reduction, size_average, reduce)
    _same_shape_target("binary_cross_entropy", input, target)
    loss = apply(N.binary_cross_entropy, input, target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,  # noqa: A002
                                     reduce=None, reduction: str = "mean", pos_weight=None):
    """Binary cross-entropy of sigmoid(x), computed stably as
    (1 - y) x - (1 + (pos_weight - 1) y) log_sigmoid(x)  (= max(x,0) - x y + log1p(exp(-|x|))
    without pos_weight): finite loss and gradient for any finite logit."""
    reduction = _reduction("binary_cross_entropy_with_logits", reduction, size_average, reduce)
    _same_shape_target("binary_cross_entropy_with_logits", input, target)
    log_sig = apply(N.log_sigmoid, input)
    if pos_weight is None:
        loss = (1 - target) * input - log_sig
    else:
        loss = (1 - target) * input - (1 + (pos_weight - 1) * target) * log_sig
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _check_class_weight(name, weight, classes, input):
    if weight is None:
        return
    if weight.ndim != 1 or weight.shape[0] != classes:
        raise ValueError(f"{name}: weight must be a 1-D tensor of size {classes} (one per "
                         f"class) for input of shape {tuple(input.shape)}, got "
                         f"{tuple(weight.shape)}")
    _same_dtype(name, input, weight, "input", "weight")


def _as_batch(input, target):
    """(C,) input with a scalar target -> a batch of one."""
    return C.unsqueeze(input, 0), C.unsqueeze(target, 0)


def _target_weights(target, weight, ignore_index, dtype):
    """weight[target] (or 1), zero where target == ignore_index."""
    valid = target != ignore_index
    if weight is None:
        return apply(E.cast, valid, dtype=dtype)
    safe = apply(E.where, valid, target, 0)
    picked = apply(I.getitem, weight, safe, spec=(("tensor",),))
    return apply(E.where, valid, picked, 0.0)


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100,  # noqa: A002
             reduce=None, reduction: str = "mean"):
    """Negative log-likelihood of class indices ``target`` under log-probabilities ``input``
    ((N, C, d1, ...) with target (N, d1, ...), or (C,) with a scalar target). 'mean' divides
    by the summed weights of the non-ignored targets (PyTorch's weighted mean)."""
    reduction = _reduction("nll_loss", reduction, size_average, reduce)
    unbatched = input.ndim == 1
    if unbatched:
        input, target = _as_batch(input, target)  # noqa: A001
    if input.ndim < 2:
        raise ValueError(f"nll_loss: expected input of shape (N, C, ...) or (C,), got "
                         f"{tuple(input.shape)}")
    _check_class_weight("nll_loss", weight, input.shape[1], input)
    loss = apply(N.nll_loss, input, target, ignore_index=ignore_index)
    weights = _target_weights(target, weight, ignore_index, input.dtype)
    if weight is not None:
        loss = loss * weights
    if reduction == "none":
        return C.squeeze(loss, 0) if unbatched else loss
    total = C.sum(loss)
    return total if reduction == "sum" else total / C.sum(weights)


def cross_entropy(input, target, weight=None, size_average=None,  # noqa: A002
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0):
    """log_softmax over the class dim (1, or 0 for a (C,) input) followed by nll_loss, with
    PyTorch's semantics for class-index targets (ignore_index, class weights, label
    smoothing) and for class-probability targets (a float target shaped like the input)."""
    reduction = _reduction("cross_entropy", reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0 and 1, got "
                         f"{label_smoothing}")
    if input.ndim < 1:
        raise ValueError(f"cross_entropy: expected input of shape (N, C, ...) or (C,), got "
                         f"{tuple(input.shape)}")
    class_dim = 1 if input.ndim >= 2 else 0
    classes = input.shape[class_dim]
    _check_class_weight("cross_entropy", weight, classes, input)
    logp = apply(N.log_softmax, input, dim=class_dim)
    if target.dtype.is_floating_point:
        return _cross_entropy_probabilities(logp, target, weight, ignore_index, reduction,
                                            label_smoothing, class_dim)
    expected = tuple(input.shape[:class_dim]) + tuple(input.shape[class_dim + 1:])
    got = tuple(target.shape)
    # (a static program's -1, a dim known only at run time, agrees with any size)
    if len(got) != len(expected) or any(a != b and -1 not in (a, b)
                                         for a, b in zip(got, expected)):
        raise ValueError(f"cross_entropy: expected target of shape {expected} for input of "
                         f"shape {tuple(input.shape)}, got {tuple(target.shape)}")
    loss = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing == 0.0:
        return loss
    if weight is not None:
        wshape = [1] * input.ndim
        wshape[class_dim] = classes
        logp = logp * C.reshape(weight, tuple(wshape))
    smooth = -C.sum(logp, class_dim)
    ignored = target == ignore_index
    smooth = apply(E.where, ignored, 0.0, smooth)
    if reduction == "mean":
        smooth = C.sum(smooth) / C.sum(_target_weights(target, weight, ignore_index,
                                                       input.dtype))
    elif reduction == "sum":
        smooth = C.sum(smooth)
    return (1 - label_smoothing) * loss + smooth * (label_smoothing / classes)


def _cross_entropy_probabilities(logp, target, weight, ignore_index, reduction,
                                 label_smoothing, class_dim):
    if tuple(target.shape) != tuple(logp.shape):
        raise ValueError(f"cross_entropy: a class-probability target must have the input's "
                         f"shape {tuple(logp.shape)}, got {tuple(target.shape)}")
    _same_dtype("cross_entropy", logp, target, "input", "probability target")
    if ignore_index >= 0:
        raise ValueError("cross_entropy: ignore_index is not supported for class-probability "
                         "targets")
    classes = logp.shape[class_dim]
    if label_smoothing > 0:
        target = target * (1 - label_smoothing) + label_smoothing / classes
    prod = logp * target
    if weight is not None:
        wshape = [1] * logp.ndim
        wshape[class_dim] = classes
        prod = prod * C.reshape(weight, tuple(wshape))
    if reduction == "none":
        return -C.sum(prod, class_dim)
    if reduction == "sum":
        return -C.sum(prod)
    # the mean over the positions (NaN for none), counted when the program runs: a static
    # program may know the batch size only then
    return -C.mean(C.sum(prod, class_dim))

