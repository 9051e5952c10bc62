"""Pooling: max/avg/adaptive-avg over 1-D and 2-D inputs."""
from __future__ import annotations

from ...ops import nn_ops as N
from ...ops.conv import pair
from ...ops.pooling import pool_attrs
from ...ops.registry import apply
from .convolution import _batched, _single, _unbatched


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
