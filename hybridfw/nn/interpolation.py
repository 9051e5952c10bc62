"""``F.interpolate``: resizing (N, C, H, W) images by 'nearest', 'nearest-exact' or 'bilinear'.

Resizing is separable: each spatial dim is resized on its own, by picking source rows (and
columns) with an integer index array and, for 'bilinear', blending two picked rows with fixed
weights. The index arrays and weights depend only on the sizes, so they are computed here once
on the host, in the precision PyTorch computes them in (float32 for 'nearest'; the input's
precision, at least float32, for 'bilinear'), and enter the ops as constant tensors: the
gradient is the gradient of the picks (a scatter-add) and of the weighted sum.
"""
from __future__ import annotations

import math

import numpy as np

from ..dygraph.tensor import tensor
from ..ops import indexing as I
from ..ops.registry import apply

__all__ = ["interpolate"]

_MODES = ("nearest", "nearest-exact", "bilinear")


def _output_sizes(name, in_sizes, size, scale_factor):
    """(output sizes, the scale factors PyTorch hands its kernels, or Nones)."""
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{name}: give exactly one of size and scale_factor, got size={size!r} "
                         f"and scale_factor={scale_factor!r}")
    if size is not None:
        sizes = (size, size) if isinstance(size, int) else tuple(size)
        if len(sizes) != 2 or not all(isinstance(s, int) and not isinstance(s, bool)
                                      for s in sizes):
            raise ValueError(f"{name}: size must be an int or a pair of ints for a 4-D input, "
                             f"got {size!r}")
        if min(sizes) <= 0:
            raise ValueError(f"{name}: size must be positive, got {size!r}")
        return sizes, (None, None)
    scales = (scale_factor,) * 2 if isinstance(scale_factor, (int, float)) \
        else tuple(scale_factor)
    if len(scales) != 2 or not all(isinstance(s, (int, float)) and not isinstance(s, bool)
                                   for s in scales):
        raise ValueError(f"{name}: scale_factor must be a number or a pair of numbers for a 4-D "
                         f"input, got {scale_factor!r}")
    if min(scales) <= 0:
        raise ValueError(f"{name}: scale_factor must be positive, got {scale_factor!r}")
    sizes = tuple(int(math.floor(n * float(s))) for n, s in zip(in_sizes, scales))
    if min(sizes) <= 0:
        raise ValueError(f"{name}: scale_factor {scale_factor!r} gives an empty output "
                         f"{sizes} for spatial size {tuple(in_sizes)}")
    return sizes, tuple(float(s) for s in scales)


def _scale(n_in, n_out, scale, real):
    """Source step per output step: ``1/scale_factor`` when one is given, else in/out."""
    if scale is not None and scale > 0:
        return real(1.0 / scale)
    return real(n_in) / real(n_out)


def _nearest_index(n_in, n_out, scale, exact):
    step = _scale(n_in, n_out, scale, np.float32)
    pos = np.arange(n_out, dtype=np.float32)
    if exact:
        pos = pos + np.float32(0.5)
    return np.minimum(np.floor(pos * step).astype(np.int64), n_in - 1)


def _linear_index(n_in, n_out, scale, align_corners, real):
    """(first source index, second source index, weight of the second) per output position."""
    pos = np.arange(n_out, dtype=real)
    if align_corners:
        step = real(n_in - 1) / real(n_out - 1) if n_out > 1 else real(0)
        src = pos * step
    else:
        step = _scale(n_in, n_out, scale, real)
        src = np.maximum(step * (pos + real(0.5)) - real(0.5), real(0))
    first = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    weight = np.clip(src - first, 0, 1).astype(real)
    return first, np.minimum(first + 1, n_in - 1), weight


def _pick(x, dim, index):
    spec = (("slice", None, None, None),) * dim + (("tensor",),)
    return apply(I.getitem, x, tensor(index, device=x.device), spec=spec)


def interpolate(input, size=None, scale_factor=None, mode: str = "nearest",  # noqa: A002
                align_corners=None, recompute_scale_factor=None, antialias: bool = False):
    """Resize an (N, C, H, W) input to ``size`` (an int or (H, W)) or by ``scale_factor`` (the
    output is ``floor(H * scale_factor)`` high), as ``torch.nn.functional.interpolate``.

    ``mode``: 'nearest' (PyTorch's: source pixel ``floor(i * H / H_out)``), 'nearest-exact'
    (``floor((i + 0.5) * H / H_out)``) or 'bilinear' (``align_corners=True`` maps the corner
    pixels' centres onto each other; False, the default, their outer edges). With a
    ``scale_factor`` its reciprocal is the source step (``recompute_scale_factor=True``: the
    size ratio instead), as in PyTorch.

    Example::

        >>> x = hf.arange(4.0).reshape(1, 1, 2, 2)
        >>> F.interpolate(x, scale_factor=2).tolist()[0][0][0]
        [0.0, 0.0, 1.0, 1.0]
        >>> F.interpolate(x, size=3, mode="bilinear", align_corners=True).tolist()[0][0][1]
        [1.0, 1.5, 2.0]
    """
    name = "interpolate"
    if mode not in _MODES:
        raise ValueError(f"{name}: mode must be one of {', '.join(map(repr, _MODES))}, got "
                         f"{mode!r}")
    if input.ndim != 4:
        raise ValueError(f"{name}: expected a 4-D (N, C, H, W) input, got shape "
                         f"{tuple(input.shape)}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"{name}: expected a floating-point input, got dtype {input.dtype}")
    if align_corners is not None and mode != "bilinear":
        raise ValueError(f"{name}: align_corners can only be set with mode='bilinear', got "
                         f"mode={mode!r}")
    if antialias:
        raise ValueError(f"{name}: antialias=True is not supported")
    in_sizes = tuple(input.shape[2:])
    if -1 in in_sizes:
        raise ValueError(f"{name}: the input's height and width must be known to build the "
                         f"resize (input shape {tuple(input.shape)}, an InputSpec None dim); "
                         f"give them fixed sizes in the InputSpec")
    sizes, scales = _output_sizes(name, in_sizes, size, scale_factor)
    if recompute_scale_factor:
        if size is not None:
            raise ValueError(f"{name}: recompute_scale_factor is only used with scale_factor, "
                             f"got size={size!r}")
        scales = (None, None)
    out = input
    real = np.float64 if input.dtype.np == np.float64 else np.float32
    for dim, n_in, n_out, scale in zip((2, 3), in_sizes, sizes, scales):
        if mode == "bilinear":
            first, second, weight = _linear_index(n_in, n_out, scale, bool(align_corners), real)
            shape = (-1, 1) if dim == 2 else (-1,)
            w = tensor(weight.reshape(shape), dtype=input.dtype, device=input.device)
            near, far = _pick(out, dim, first), _pick(out, dim, second)
            out = near + (far - near) * w
        else:
            out = _pick(out, dim, _nearest_index(n_in, n_out, scale, mode == "nearest-exact"))
    return out
