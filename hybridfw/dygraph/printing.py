"""``repr(tensor)`` in PyTorch's format.

The rules are PyTorch's (``torch/_tensor_str.py``): floats with 4 digits after the point, or
all in scientific notation when the finite non-zero magnitudes span more than 1000x, exceed
1e8 or go below 1e-4; floats that are all whole print as ``1.``; every element padded to one
width; rows wrapped at 80 columns; past 1000 elements, 3 items at each end of every dim with
``...`` between; suffixes ``dtype=`` (unless the default float dtype, int64 or bool),
``device=``, ``grad_fn=`` or ``requires_grad=True``, wrapped to a new line past 80 columns.

Example::

    >>> import hybridfw as hf
    >>> hf.tensor([1.5, 2.25, -3.0])
    tensor([ 1.5000,  2.2500, -3.0000])
    >>> hf.tensor([1e-5, 1.0])
    tensor([1.0000e-05, 1.0000e+00])
"""
from __future__ import annotations

import math

import numpy as np

from ..backend import default_device
from ..dtypes import bool_, get_default_dtype, int64

__all__ = ["format_tensor"]

PRECISION = 4
THRESHOLD = 1000  # more elements than this: summarised
EDGEITEMS = 3
LINEWIDTH = 80


class _Formatter:
    """How every element of one tensor is written: fixed, whole (``2.``) or scientific, padded
    to the widest (found from ``values``, the elements that will be shown)."""

    def __init__(self, values: np.ndarray):
        self.floating = values.dtype.kind == "f"
        self.int_mode, self.sci_mode, self.width = True, False, 1
        flat = values.reshape(-1)
        if not self.floating:
            if flat.size:
                self.width = max(len(str(v)) for v in flat.tolist())
            return
        shown = flat[np.isfinite(flat) & (flat != 0)]
        if not shown.size:
            return
        magnitude = np.abs(shown.astype(np.float64))
        low, high = magnitude.min(), magnitude.max()
        self.int_mode = bool(np.all(shown == np.ceil(shown)))
        self.sci_mode = bool(high / low > 1000.0 or high > 1.0e8 or low < 1.0e-4)
        if self.sci_mode:
            spec, extra = f".{PRECISION}e", 0
        elif self.int_mode:
            spec, extra = ".0f", 1  # the "." that follows
        else:
            spec, extra = f".{PRECISION}f", 0
        self.width = max(len(format(v, spec)) for v in shown.tolist()) + extra

    def format(self, value) -> str:
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = format(value, f".{PRECISION}e")
        elif self.int_mode:
            text = f"{value:.0f}"
            if not (math.isinf(value) or math.isnan(value)):
                text += "."
        else:
            text = format(value, f".{PRECISION}f")
        return text.rjust(self.width)


def _summarized(a: np.ndarray) -> np.ndarray:
    """The elements a summarised print shows: the first and last EDGEITEMS of every dim."""
    for axis, size in enumerate(a.shape):
        if size > 2 * EDGEITEMS:
            keep = np.r_[0:EDGEITEMS, size - EDGEITEMS:size]
            a = a.take(keep, axis=axis)
    return a


def _vector(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    per_line = max(1, (LINEWIDTH - indent) // (fmt.width + 2))
    if summarize and a.shape[0] > 2 * EDGEITEMS:
        items = [fmt.format(v) for v in a[:EDGEITEMS].tolist()] + [" ..."] + \
            [fmt.format(v) for v in a[-EDGEITEMS:].tolist()]
    else:
        items = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector(a, indent, summarize, fmt)
    n = a.shape[0]
    if summarize and n > 2 * EDGEITEMS:
        rows = [_nested(a[i], indent + 1, summarize, fmt) for i in range(EDGEITEMS)] + \
            ["..."] + [_nested(a[i], indent + 1, summarize, fmt) for i in range(n - EDGEITEMS, n)]
    else:
        rows = [_nested(a[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _with_suffixes(text: str, suffixes: list, indent: int) -> str:
    parts = [text]
    last_line = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line + len(suffix) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + suffix)
            last_line = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line += len(suffix) + 2
    return "".join(parts) + ")"


def format_tensor(array: np.ndarray, dtype, device, grad_fn: str | None,
                  requires_grad: bool) -> str:
    """PyTorch's ``repr`` of a tensor holding ``array`` (on the host) of ``dtype`` on
    ``device``; ``grad_fn`` is the printed gradient node (``<MulBackward>``) or None."""
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if device != default_device():
        suffixes.append(f"device='{device}'")
    if array.size == 0:
        body = "[]"
        if array.ndim != 1:
            suffixes.append(f"size={tuple(array.shape)}")
        if dtype is not get_default_dtype():  # nothing shows it is not the default
            suffixes.append(f"dtype={dtype}")
    else:
        if dtype not in (get_default_dtype(), int64, bool_):
            suffixes.append(f"dtype={dtype}")
        summarize = array.size > THRESHOLD
        fmt = _Formatter(_summarized(array) if summarize else array)
        body = _nested(array, indent, summarize, fmt)
    if grad_fn is not None:
        suffixes.append(f"grad_fn={grad_fn}")
    elif requires_grad:
        suffixes.append("requires_grad=True")
    return _with_suffixes(prefix + body, suffixes, indent)
