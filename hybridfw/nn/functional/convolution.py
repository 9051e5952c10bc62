"""linear, and convolutions (conv1d, conv2d, conv_transpose2d)."""
from __future__ import annotations

from ...ops import composite as C
from ...ops import linalg as L
from ...ops import nn_ops as N
from ...ops import shape_ops as S
from ...ops.conv import conv_attrs, pair
from ...ops.registry import TensorLike, apply


def require_tensor(name, what, value) -> None:
    """A tensor argument given as something else (a numpy array, a list) is refused by name,
    as PyTorch's functions do."""
    if not isinstance(value, TensorLike):
        raise TypeError(f"{name}: {what} must be a tensor, got {type(value).__module__}."
                        f"{type(value).__qualname__}; convert it with hf.tensor(...) or "
                        f"hf.from_numpy(...)")


def _same_dtype(name, a, b, what_a, what_b):
    require_tensor(name, what_a, a)
    require_tensor(name, what_b, b)
    if a.dtype is not b.dtype:
        raise TypeError(f"{name}: {what_a} and {what_b} must have the same dtype, got "
                        f"{a.dtype} and {b.dtype}")


def linear(input, weight, bias=None):  # noqa: A002
    """``input @ weight.T + bias``; weight is (out_features, in_features)."""
    require_tensor("linear", "input", input)
    require_tensor("linear", "weight", weight)
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
        _same_dtype("linear", input, bias, "input", "bias")
        check_broadcasts_to(name="linear", what="bias", tensor=bias, shape=out.shape,
                            target="output")
        out = out + bias
    return out


def check_broadcasts_to(name, what, tensor, shape, target) -> None:
    """``tensor`` must broadcast to ``shape`` without changing it (-1: a size known only when
    a program runs); else a ValueError naming the op and both shapes."""
    fits = tensor.ndim <= len(shape) and all(
        b in (1, o) or -1 in (b, o) for b, o in zip(reversed(tensor.shape), reversed(shape)))
    if not fits:
        raise ValueError(f"{name}: {what} of shape {tuple(tensor.shape)} does not broadcast to "
                         f"the {target} shape {tuple(shape)}")


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
        _same_dtype("conv2d", input, bias, "input", "bias")
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
        _same_dtype("conv_transpose2d", input, bias, "input", "bias")
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
