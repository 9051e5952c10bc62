"""Convolution layers: Conv1d, Conv2d, ConvTranspose2d."""
from __future__ import annotations


from ...ops.factories import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Conv1d", "Conv2d", "ConvTranspose2d"]


def _pair(value, name: str) -> tuple:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value)
    value = tuple(value)
    if len(value) != 2 or not all(isinstance(v, int) for v in value):
        raise ValueError(f"Conv2d: {name} must be an int or a pair of ints, got {value!r}")
    return value


class Conv2d(Module):
    """2-D convolution over ``(N, C_in, H, W)`` (or unbatched ``(C_in, H, W)``) input.

    Arguments, parameter shapes (``weight``: ``(out_channels, in_channels // groups, kH, kW)``)
    and initialisation follow PyTorch. ``padding`` may be an int, a pair, ``'valid'`` or
    ``'same'``; ``padding_mode`` is ``'zeros'``, ``'reflect'``, ``'replicate'`` or
    ``'circular'``.

    Example::

        >>> import hybridfw as hf
        >>> conv = hf.nn.Conv2d(3, 8, kernel_size=3, padding=1)
        >>> conv(hf.randn(2, 3, 16, 16)).shape
        (2, 8, 16, 16)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__()
        if groups <= 0:
            raise ValueError(f"Conv2d: groups must be a positive integer, got {groups}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must both be divisible by groups ({groups})")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"Conv2d: padding_mode must be 'zeros', 'reflect', 'replicate' or "
                             f"'circular', got {padding_mode!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        self.dilation = _pair(dilation, "dilation")
        self.groups = groups
        self.padding_mode = padding_mode
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Conv2d: padding string must be 'valid' or 'same', got "
                                 f"{padding!r}")
            if padding == "same" and self.stride != (1, 1):
                raise ValueError("Conv2d: padding='same' is not supported for strided "
                                 "convolutions")
            self.padding = padding
        else:
            self.padding = _pair(padding, "padding")
        # F.pad order (last dim first): (left, right, top, bottom).
        if self.padding == "valid":
            pads = (0, 0, 0, 0)
        elif self.padding == "same":
            pads = ()
            for d, k in zip(reversed(self.dilation), reversed(self.kernel_size)):
                total = d * (k - 1)
                pads += (total // 2, total - total // 2)
        else:
            pads = (self.padding[1], self.padding[1], self.padding[0], self.padding[0])
        self._reversed_padding_repeated_twice = pads
        self.weight = Parameter(empty(out_channels, in_channels // groups, *self.kernel_size,
                                      dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.fan_in_uniform_(self.weight, self.bias)

    def forward(self, input):  # noqa: A002
        if input.ndim not in (3, 4):
            raise ValueError(f"Conv2d: expected 3-D (C, H, W) or 4-D (N, C, H, W) input, got "
                             f"input of shape {tuple(input.shape)}")
        c = input.shape[-3]
        if c != self.in_channels and c != -1:
            raise ValueError(f"Conv2d: expected input with {self.in_channels} channels (dim "
                             f"-3), got input of shape {tuple(input.shape)}")
        pads = self._reversed_padding_repeated_twice
        if self.padding_mode == "zeros":
            padding = ((pads[2], pads[3]), (pads[0], pads[1]))  # conv2d pads as it copies
        else:
            input = F.pad(input, pads, mode=self.padding_mode)  # noqa: A001
            padding = 0
        return F.conv2d(input, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding not in ((0, 0), "valid"):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(Module):
    """1-D convolution over ``(N, C_in, L)`` (or unbatched ``(C_in, L)``) input.

    Arguments, parameter shapes (``weight``: ``(out_channels, in_channels // groups, k)``) and
    initialisation follow PyTorch. ``padding`` may be an int, ``'valid'`` or ``'same'``;
    ``padding_mode`` is ``'zeros'``, ``'reflect'``, ``'replicate'`` or ``'circular'``.

    Example::

        >>> import hybridfw as hf
        >>> conv = hf.nn.Conv1d(3, 8, kernel_size=5, padding=2)
        >>> conv(hf.randn(2, 3, 16)).shape
        (2, 8, 16)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__()
        if groups <= 0:
            raise ValueError(f"Conv1d: groups must be a positive integer, got {groups}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv1d: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must both be divisible by groups ({groups})")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"Conv1d: padding_mode must be 'zeros', 'reflect', 'replicate' or "
                             f"'circular', got {padding_mode!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = (F._single("Conv1d", "kernel_size", kernel_size),)
        self.stride = (F._single("Conv1d", "stride", stride),)
        self.dilation = (F._single("Conv1d", "dilation", dilation),)
        self.groups = groups
        self.padding_mode = padding_mode
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Conv1d: padding string must be 'valid' or 'same', got "
                                 f"{padding!r}")
            if padding == "same" and self.stride != (1,):
                raise ValueError("Conv1d: padding='same' is not supported for strided "
                                 "convolutions")
            self.padding = padding
            total = self.dilation[0] * (self.kernel_size[0] - 1) if padding == "same" else 0
            self._pads = (total // 2, total - total // 2)
        else:
            self.padding = (F._single("Conv1d", "padding", padding),)
            self._pads = (self.padding[0], self.padding[0])
        self.weight = Parameter(empty(out_channels, in_channels // groups, self.kernel_size[0],
                                      dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.fan_in_uniform_(self.weight, self.bias)

    def forward(self, input):  # noqa: A002
        if input.ndim not in (2, 3):
            raise ValueError(f"Conv1d: expected 2-D (C, L) or 3-D (N, C, L) input, got input "
                             f"of shape {tuple(input.shape)}")
        c = input.shape[-2]
        if c != self.in_channels and c != -1:
            raise ValueError(f"Conv1d: expected input with {self.in_channels} channels (dim "
                             f"-2), got input of shape {tuple(input.shape)}")
        padding = self.padding
        if self.padding_mode != "zeros":
            input = F.pad(input, self._pads, mode=self.padding_mode)  # noqa: A001
            padding = 0
        return F.conv1d(input, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding not in ((0,), "valid"):
            s += f", padding={self.padding}"
        if self.dilation != (1,):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class ConvTranspose2d(Module):
    """2-D transposed convolution over ``(N, C_in, H, W)`` (or unbatched ``(C_in, H, W)``)
    input: :func:`hybridfw.nn.functional.conv_transpose2d` with learned parameters.

    Arguments, parameter shapes (``weight``: ``(in_channels, out_channels // groups, kH, kW)``)
    and initialisation follow PyTorch; ``padding_mode`` is ``'zeros'`` only, as there.
    ``forward(input, output_size=None)``: ``output_size`` (the output's height and width, or a
    shape ending in them) picks the ``output_padding`` that gives it.

    Example::

        >>> import hybridfw as hf
        >>> up = hf.nn.ConvTranspose2d(8, 4, kernel_size=3, stride=2, padding=1,
        ...                            output_padding=1)
        >>> up(hf.randn(2, 8, 16, 16)).shape
        (2, 4, 32, 32)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__()
        if not isinstance(groups, int) or isinstance(groups, bool) or groups <= 0:
            raise ValueError(f"ConvTranspose2d: groups must be a positive integer, got {groups}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"ConvTranspose2d: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must both be divisible by groups ({groups})")
        if padding_mode != "zeros":
            raise ValueError(f"ConvTranspose2d: only padding_mode='zeros' is supported (as in "
                             f"PyTorch), got {padding_mode!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        self.padding = _pair(padding, "padding")
        self.output_padding = _pair(output_padding, "output_padding")
        self.dilation = _pair(dilation, "dilation")
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = Parameter(empty(in_channels, out_channels // groups, *self.kernel_size,
                                      dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # as PyTorch: fan_in is read from weight dim 1 (out_channels // groups) * kH * kW
        init.fan_in_uniform_(self.weight, self.bias)

    def _output_padding(self, input, output_size) -> tuple:
        if output_size is None:
            return self.output_padding
        size = tuple(int(n) for n in output_size)[-2:]
        if len(size) != 2:
            raise ValueError(f"ConvTranspose2d: output_size must end in the output's height and "
                             f"width, got {tuple(output_size)!r}")
        extra = []
        for n, o, k, s, p, d in zip(input.shape[-2:], size, self.kernel_size, self.stride,
                                    self.padding, self.dilation):
            smallest = (n - 1) * s - 2 * p + d * (k - 1) + 1
            if not smallest <= o < smallest + max(s, d):
                raise ValueError(f"ConvTranspose2d: requested output_size {size} for input of "
                                 f"shape {tuple(input.shape)}; each output size must lie in "
                                 f"[{smallest}, {smallest + max(s, d) - 1}] for that dim")
            extra.append(o - smallest)
        return tuple(extra)

    def forward(self, input, output_size=None):  # noqa: A002
        if input.ndim not in (3, 4):
            raise ValueError(f"ConvTranspose2d: expected 3-D (C, H, W) or 4-D (N, C, H, W) "
                             f"input, got input of shape {tuple(input.shape)}")
        c = input.shape[-3]
        if c != self.in_channels and c != -1:
            raise ValueError(f"ConvTranspose2d: expected input with {self.in_channels} channels "
                             f"(dim -3), got input of shape {tuple(input.shape)}")
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.output_padding != (0, 0):
            s += f", output_padding={self.output_padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s
