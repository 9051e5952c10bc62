"""pad: constant, reflect, replicate and circular padding."""
from __future__ import annotations

from ...dtypes import int64
from ...ops import creation as K
from ...ops import elementwise as E
from ...ops import indexing as I
from ...ops import nn_ops as N
from ...ops.registry import apply


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
