"""Convolution layers: Conv1d, Conv2d, ConvTranspose2d, on one private base _ConvNd."""
from __future__ import annotations


from ...ops.factories import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Conv1d", "Conv2d", "ConvTranspose2d"]


def _pair(value, name: str, layer: str = "Conv2d") -> tuple:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value)
    value = tuple(value)
    if len(value) != 2 or not all(isinstance(v, int) for v in value):
        raise ValueError(f"{layer}: {name} must be an int or a pair of ints, got {value!r}")
    return value


_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """What Conv1d, Conv2d and ConvTranspose2d share, as PyTorch's ``_ConvNd``: argument checks
    and normalisation, ``padding='valid'/'same'`` and padding modes, the ``weight``/``bias``
    Parameters and their initialisation, the input check and ``extra_repr``.

    A subclass names itself in errors (``_name``), normalises one size argument to a tuple of
    its spatial dims (``_tuple``) and describes its input layouts (``_layouts``).
    """

    _name = "_ConvNd"
    _layouts = ("", "")  # e.g. ("2-D (C, L)", "3-D (N, C, L)")

    def _tuple(self, value, name: str) -> tuple:
        raise NotImplementedError

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding,
                 dilation, groups: int, bias: bool, padding_mode: str, device, dtype,
                 transposed: bool = False, output_padding=0):
        super().__init__()
        name = self._name
        if (transposed and (not isinstance(groups, int) or isinstance(groups, bool))) \
                or groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer, got {groups}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must both be divisible by groups ({groups})")
        if transposed and padding_mode != "zeros":
            raise ValueError(f"{name}: only padding_mode='zeros' is supported (as in "
                             f"PyTorch), got {padding_mode!r}")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be 'zeros', 'reflect', 'replicate' or "
                             f"'circular', got {padding_mode!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = self._tuple(kernel_size, "kernel_size")
        self.stride = self._tuple(stride, "stride")
        if transposed:  # normalised in the order PyTorch takes them
            self.padding = self._tuple(padding, "padding")
            self.output_padding = self._tuple(output_padding, "output_padding")
        self.dilation = self._tuple(dilation, "dilation")
        self.groups = groups
        self.padding_mode = padding_mode
        if not transposed:
            self._init_padding(padding)
        shape = (in_channels, out_channels // groups) if transposed else \
            (out_channels, in_channels // groups)
        self.weight = Parameter(empty(*shape, *self.kernel_size, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _init_padding(self, padding) -> None:
        """Sets ``padding`` (a tuple, ``'valid'`` or ``'same'``) and the F.pad amounts it means,
        ``_reversed_padding_repeated_twice`` (last dim first: (left, right, top, bottom))."""
        name = self._name
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"{name}: padding string must be 'valid' or 'same', got "
                                 f"{padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided "
                                 "convolutions")
            self.padding = padding
        else:
            self.padding = self._tuple(padding, "padding")
        pads = ()
        for i in reversed(range(len(self.kernel_size))):
            if self.padding == "same":
                total = self.dilation[i] * (self.kernel_size[i] - 1)
                pads += (total // 2, total - total // 2)
            else:
                p = 0 if self.padding == "valid" else self.padding[i]
                pads += (p, p)
        self._reversed_padding_repeated_twice = pads

    def reset_parameters(self) -> None:
        # for ConvTranspose2d, as PyTorch: fan_in is read from weight dim 1
        # (out_channels // groups) * kH * kW
        init.fan_in_uniform_(self.weight, self.bias)

    def _check_input(self, input) -> None:  # noqa: A002
        dims = len(self.kernel_size)
        if input.ndim not in (dims + 1, dims + 2):
            unbatched, batched = self._layouts
            raise ValueError(f"{self._name}: expected {unbatched} or {batched} input, got "
                             f"input of shape {tuple(input.shape)}")
        c = input.shape[-dims - 1]
        if c != self.in_channels and c != -1:
            raise ValueError(f"{self._name}: expected input with {self.in_channels} channels "
                             f"(dim {-dims - 1}), got input of shape {tuple(input.shape)}")

    def extra_repr(self) -> str:
        zeros = (0,) * len(self.kernel_size)
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding not in (zeros, "valid"):
            s += f", padding={self.padding}"
        if getattr(self, "output_padding", zeros) != zeros:
            s += f", output_padding={self.output_padding}"
        if self.dilation != (1,) * len(self.kernel_size):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv2d(_ConvNd):
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

    _name = "Conv2d"
    _layouts = ("3-D (C, H, W)", "4-D (N, C, H, W)")

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype)

    def _tuple(self, value, name: str) -> tuple:
        return _pair(value, name)

    def forward(self, input):  # noqa: A002
        self._check_input(input)
        pads = self._reversed_padding_repeated_twice
        if self.padding_mode == "zeros":
            padding = ((pads[2], pads[3]), (pads[0], pads[1]))  # conv2d pads as it copies
        else:
            input = F.pad(input, pads, mode=self.padding_mode)  # noqa: A001
            padding = 0
        return F.conv2d(input, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)


class Conv1d(_ConvNd):
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

    _name = "Conv1d"
    _layouts = ("2-D (C, L)", "3-D (N, C, L)")

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype)

    def _tuple(self, value, name: str) -> tuple:
        return (F._single("Conv1d", name, value),)

    def forward(self, input):  # noqa: A002
        self._check_input(input)
        padding = self.padding
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice,  # noqa: A001
                          mode=self.padding_mode)
            padding = 0
        return F.conv1d(input, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)


class ConvTranspose2d(_ConvNd):
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

    _name = "ConvTranspose2d"
    _layouts = ("3-D (C, H, W)", "4-D (N, C, H, W)")

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, transposed=True,
                         output_padding=output_padding)

    def _tuple(self, value, name: str) -> tuple:
        return _pair(value, name, "ConvTranspose2d")

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
        self._check_input(input)
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)
