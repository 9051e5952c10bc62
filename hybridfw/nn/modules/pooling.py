"""Pooling layers: MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool1d/2d."""
from __future__ import annotations

from .. import functional as F
from .module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d"]


def _check_input(layer: str, input) -> None:  # noqa: A002
    if input.ndim not in (3, 4):
        raise ValueError(f"{layer}: expected 3-D (C, H, W) or 4-D (N, C, H, W) input, got input "
                         f"of shape {tuple(input.shape)}")


class MaxPool2d(Module):
    """Max over ``kernel_size`` windows (``stride`` defaults to ``kernel_size``).

    Example::

        >>> import hybridfw as hf
        >>> hf.nn.MaxPool2d(2)(hf.randn(1, 3, 8, 8)).shape
        (1, 3, 4, 4)
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):  # noqa: A002
        _check_input("MaxPool2d", input)
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """Mean over ``kernel_size`` windows (``stride`` defaults to ``kernel_size``)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):  # noqa: A002
        _check_input("AvgPool2d", input)
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed ``output_size`` (an int, a pair, None keeps that dim)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):  # noqa: A002
        _check_input("AdaptiveAvgPool2d", input)
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class MaxPool1d(MaxPool2d):
    """Max over ``kernel_size`` windows of ``(N, C, L)`` or ``(C, L)`` input (``stride``
    defaults to ``kernel_size``).

    Example::

        >>> import hybridfw as hf
        >>> hf.nn.MaxPool1d(2)(hf.randn(1, 3, 8)).shape
        (1, 3, 4)
    """

    def forward(self, input):  # noqa: A002
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool1d(AvgPool2d):
    """Mean over ``kernel_size`` windows of ``(N, C, L)`` or ``(C, L)`` input."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)

    def forward(self, input):  # noqa: A002
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class AdaptiveAvgPool1d(AdaptiveAvgPool2d):
    """Average pooling of ``(N, C, L)`` or ``(C, L)`` input to length ``output_size``."""

    def forward(self, input):  # noqa: A002
        return F.adaptive_avg_pool1d(input, self.output_size)
