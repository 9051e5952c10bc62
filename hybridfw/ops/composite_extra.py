"""More composites with PyTorch's names and arguments: rearranging (``swapaxes movedim unbind
flip roll repeat tile tril triu``), selecting (``masked_select``), NaN-aware math (``nansum
fmax fmin``) and broadcasting helpers. Built from primitives and other composites only, so
they need no gradient rules and run in eager and static code alike.
"""
from __future__ import annotations

from ..dtypes import as_dtype, bool_
from . import composite as C
from . import creation as K
from . import elementwise as E
from . import indexing as I
from . import shape_ops as S
from .infer import broadcast_shapes as _broadcast
from .infer import normalize_dim
from .registry import apply

__all__ = ["swapaxes", "movedim", "unbind", "flip", "roll", "repeat", "tile", "tril", "triu",
           "masked_select", "nansum", "fmax", "fmin", "broadcast_tensors", "broadcast_shapes",
           "scatter", "scatter_add", "var_mean", "std_mean", "run_time_slices"]


def _known(op: str, x) -> None:
    if -1 in x.shape:
        raise ValueError(f"{op}: the shape {tuple(x.shape)} is only known when the program "
                         f"runs; {op} needs it when the program is built")


def _positions(x, n: int, start: int = 0, step: int = 1):
    """An int64 arange on ``x``'s device."""
    return apply(K.arange, start=start, stop=start + n * step, step=step,
                 dtype=as_dtype("int64"), device=str(x.device))


def swapaxes(input, axis0: int, axis1: int):  # noqa: A002
    return C.transpose(input, axis0, axis1)


def movedim(input, source, destination):  # noqa: A002
    """``input`` with dims ``source`` moved to positions ``destination`` (ints or sequences);
    the other dims keep their order."""
    x = input
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise ValueError(f"movedim: source {source} and destination {destination} differ in "
                         "length")
    src = [normalize_dim("movedim", d, x.ndim) for d in src]
    dst = [normalize_dim("movedim", d, x.ndim) for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"movedim: repeated dim in source {source} or destination "
                         f"{destination}")
    order = [None] * x.ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(x.ndim) if d not in src)
    return C.permute(x, *[next(rest) if o is None else o for o in order])


def unbind(input, dim: int = 0):  # noqa: A002
    """The slices of ``input`` along ``dim``, that dim removed, as a tuple."""
    x = input
    C._check_not_0d("unbind", x)
    d = normalize_dim("unbind", dim, x.ndim)
    _known("unbind", x)
    return tuple(C.squeeze(I.narrow(x, d, i, 1), d) for i in range(x.shape[d]))


def flip(input, dims):  # noqa: A002
    """``input`` with the order of its elements reversed along ``dims`` (a copy)."""
    x = input
    for d in ((dims,) if isinstance(dims, int) else tuple(dims)):
        d = normalize_dim("flip", d, x.ndim)
        if x.ndim:
            if x.shape[d] == -1:  # (only the flipped dim's size is needed)
                raise ValueError(f"flip: dim {d} of the shape {tuple(x.shape)} is only known "
                                 "when the program runs; flip needs its size when the program "
                                 "is built")
            x = C.index_select(x, d, _positions(x, x.shape[d], x.shape[d] - 1, -1))
    return x


def roll(input, shifts, dims=None):  # noqa: A002
    """Elements shifted by ``shifts`` along ``dims``, wrapping around; without ``dims``, over
    the flattened tensor (its shape kept)."""
    x = input
    if dims is None:
        if not isinstance(shifts, int):
            shifts, = shifts
        return C.reshape(roll(C.flatten(x), shifts, 0), tuple(x.shape))
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: shifts {shifts} and dims {dims} differ in length")
    _known("roll", x)
    for shift, d in zip(shifts, dims):
        d = normalize_dim("roll", d, x.ndim)
        n = x.shape[d]
        k = shift % n if n else 0
        if k:
            x = C.cat([I.narrow(x, d, n - k, k), I.narrow(x, d, 0, n - k)], d)
    return x


def repeat(input, *sizes):  # noqa: A002
    """``input`` repeated ``sizes[i]`` times along dim ``i`` (leading new dims allowed): the
    data copied, as PyTorch's ``Tensor.repeat``."""
    x = input
    sizes = C._sizes_argument("repeat", sizes, "sizes", None)
    if len(sizes) < x.ndim:
        raise ValueError(f"repeat: {len(sizes)} sizes for a tensor of {x.ndim} dims; give at "
                         "least one per dim")
    if x.shape.count(-1) > 1:  # (one dim known only at run time: the reshapes infer it)
        _known("repeat", x)
    shape = (1,) * (len(sizes) - x.ndim) + tuple(x.shape)
    # (r0, s0, r1, s1, ...): each dim preceded by its repeat count, then merged pairwise
    paired = apply(S.reshape, x, shape=tuple(v for s in shape for v in (1, s)))
    paired = apply(S.broadcast_to, paired,
                   shape=tuple(v for r, s in zip(sizes, shape) for v in (r, s)))
    return apply(S.reshape, paired,
                 shape=tuple(-1 if s == -1 else r * s for r, s in zip(sizes, shape)))


def tile(input, dims):  # noqa: A002
    """:func:`repeat` with ``dims`` padded with leading 1s to ``input``'s dims."""
    dims = tuple(dims)
    return repeat(input, *((1,) * (input.ndim - len(dims)) + dims))


def _triangle(op: str, x, diagonal: int, lower: bool):
    if x.ndim < 2:
        raise ValueError(f"{op}: expects a tensor of at least 2 dims, got shape "
                         f"{tuple(x.shape)}")
    rows, cols = x.shape[-2], x.shape[-1]
    if -1 in (rows, cols):
        # sizes a static program knows when it runs (a causal mask over an InputSpec None
        # sequence): each element's column minus its row, from running counts of ones
        from .factories import ones_like
        ones = ones_like(x, dtype="int64")
        offset = C.cumsum(ones, -1) - C.cumsum(ones, -2)
    else:
        r = apply(S.reshape, _positions(x, rows), shape=(rows, 1))
        c = apply(S.reshape, _positions(x, cols), shape=(1, cols))
        offset = c - r
    keep = (offset <= diagonal) if lower else (offset >= diagonal)
    return C.masked_fill(x, apply(E.bitwise_not, keep), 0)


def tril(input, diagonal: int = 0):  # noqa: A002
    """The lower triangle of the last two dims (``j - i <= diagonal``), zeros elsewhere."""
    return _triangle("tril", input, diagonal, True)


def triu(input, diagonal: int = 0):  # noqa: A002
    """The upper triangle of the last two dims (``j - i >= diagonal``), zeros elsewhere."""
    return _triangle("triu", input, diagonal, False)


def masked_select(input, mask):  # noqa: A002
    """The elements of ``input`` where the bool ``mask`` (broadcast together) holds, 1-d."""
    if mask.dtype is not bool_:
        raise TypeError(f"masked_select: mask must be a bool tensor, got dtype {mask.dtype}")
    x, m = broadcast_tensors(input, mask)
    return apply(I.getitem, x, m, spec=(("tensor",),))


def nansum(input, dim=None, keepdim: bool = False, *, dtype=None):  # noqa: A002
    """:func:`sum` with NaNs counted as zero."""
    x = input
    if x.dtype.is_floating_point:
        x = apply(E.where, apply(E.isnan, x), 0.0, x)
    return C.sum(x, dim, keepdim, dtype=dtype)


def fmax(input, other):  # noqa: A002
    """Elementwise maximum where a NaN loses to a number (NaN only where both are)."""
    return apply(E.where, apply(E.isnan, other), input,
                 apply(E.where, apply(E.isnan, input), other, apply(E.maximum, input, other)))


def fmin(input, other):  # noqa: A002
    """Elementwise minimum where a NaN loses to a number (NaN only where both are)."""
    return apply(E.where, apply(E.isnan, other), input,
                 apply(E.where, apply(E.isnan, input), other, apply(E.minimum, input, other)))


def broadcast_shapes(*shapes) -> tuple:
    """The shape ``shapes`` (tuples or ints) broadcast to, as a tuple."""
    return _broadcast("broadcast_shapes", *(((s,) if isinstance(s, int) else tuple(s))
                                            for s in shapes))


def broadcast_tensors(*tensors) -> tuple:
    """``tensors`` broadcast to one shape (views)."""
    shape = broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return tuple(t if tuple(t.shape) == shape else C.broadcast_to(t, shape) for t in tensors)



def _scatter_source(op: str, src, value):
    if (src is None) == (value is None):
        raise TypeError(f"{op}: pass exactly one of src (a tensor or a number) and value")
    return value if src is None else src


def scatter(input, dim: int, index, src=None, *, value=None, reduce=None):  # noqa: A002
    """A copy of ``input`` with ``src`` (a tensor, or a number: also ``value=``) written at
    ``index`` along ``dim``: ``out[i][index[i][j]] = src[i][j]`` for ``dim=1``; ``reduce='add'``
    adds instead. Indices must lie in ``[0, input.shape[dim])``.

    >>> hf.zeros(2, 3).scatter(1, hf.tensor([[2], [0]]), 5.0).tolist()
    [[0.0, 0.0, 5.0], [5.0, 0.0, 0.0]]
    """
    if reduce not in (None, "add"):
        raise ValueError(f"scatter: reduce must be None or 'add', got {reduce!r}")
    return apply(I.scatter, input, index, _scatter_source("scatter", src, value),
                 dim=normalize_dim("scatter", dim, input.ndim), reduce=reduce)


def scatter_add(input, dim: int, index, src):  # noqa: A002
    """A copy of ``input`` with ``src`` added at ``index`` along ``dim`` (repeated indices
    add up): ``out[i][index[i][j]] += src[i][j]`` for ``dim=1``.

    >>> hf.zeros(3).scatter_add(0, hf.tensor([0, 0, 2]), hf.ones(3)).tolist()
    [2.0, 0.0, 1.0]
    """
    return apply(I.scatter, input, index, src, dim=normalize_dim("scatter_add", dim, input.ndim),
                 reduce="add")


def var_mean(input, dim=None, unbiased=None, keepdim: bool = False, *,  # noqa: A002
             correction=None) -> tuple:
    """``(var, mean)`` over ``dim``, with :func:`var`'s arguments (``correction=1`` by
    default).

    >>> [t.item() for t in hf.var_mean(hf.tensor([1.0, 2.0, 3.0]))]
    [1.0, 2.0]
    """
    if isinstance(dim, bool):  # var_mean(x, True): the legacy unbiased flag in dim's place
        dim, unbiased = None, dim
    return (C.var(input, dim, unbiased, keepdim, correction=correction),
            C.mean(input, dim, keepdim))


def std_mean(input, dim=None, unbiased=None, keepdim: bool = False, *,  # noqa: A002
             correction=None) -> tuple:
    """``(std, mean)`` over ``dim``, with :func:`var`'s arguments (``correction=1`` by
    default)."""
    var, mean = var_mean(input, dim, unbiased, keepdim, correction=correction)
    return C.sqrt_of_variance(var), mean


# ---- slices whose bounds a static program knows only when it runs -----------------------------
def _run_time_bound(part) -> bool:
    return part is not None and part.__class__ is not int and \
        getattr(part, "block", None) is not None  # (a static program's value)


def run_time_slices(x, index):
    """``(masks, index)`` for ``x[index]`` where a slice's bound is a value a static program
    knows only when it runs (``x[:n]``, ``x[i:i + 2]`` with ``i`` a loop index over
    ``range(tensor)``): ``masks`` are ``(dim, mask, position)``, a 1-D bool mask over ``x``'s
    dim ``dim`` that selects what the slice at ``position`` of the index would, and ``index``
    has those slices as ``:``."""
    items = index if index.__class__ is tuple else (index,)

    def consumed(item):
        if item is None or item is Ellipsis:
            return 0
        dtype = getattr(item, "dtype", None)
        return max(item.ndim, 1) if dtype is bool_ else 1

    used = sum(consumed(item) for item in items)
    masks, out, dim = [], [], 0
    for item in items:
        if item is Ellipsis:
            dim += x.ndim - used
        elif isinstance(item, slice) and any(_run_time_bound(p) for p in
                                             (item.start, item.stop, item.step)):
            if dim >= x.ndim:
                raise IndexError(f"getitem: too many indices for a tensor of shape "
                                 f"{tuple(x.shape)}")
            masks.append((dim, _slice_mask(x, dim, item), len(out)))
            item = slice(None)
        dim += consumed(item) if item is not Ellipsis else 0
        out.append(item)
    return masks, tuple(out)


def _slice_mask(x, dim: int, item: slice):
    """A bool mask over ``x``'s dim ``dim``: True at the positions ``item`` selects (Python's
    rules: negative bounds count from the end, bounds past it are clipped)."""
    n = x.shape[dim]
    if n != -1:
        positions = _positions(x, n)
        size = n
    else:  # the positions along the dim, from a line of ones of its run-time length
        from .factories import ones_like  # (factories builds on this module's neighbours)
        ones = ones_like(x, dtype="int64")
        line = ones[(0,) * dim + (slice(None),) + (0,) * (x.ndim - dim - 1)]
        positions = C.cumsum(line, 0) - 1
        size = line.sum()
    step = 1 if item.step is None else item.step
    if _run_time_bound(step) or step <= 0:
        raise ValueError(f"getitem: a slice with a bound known only when the program runs "
                         f"needs a positive Python int step, got {step!r}")

    def bound(b, default):
        if b is None:
            return default
        return apply(E.where, b < 0, b + size, b) if _run_time_bound(b) else \
            (b + size if b < 0 else b)
    start, stop = bound(item.start, 0), bound(item.stop, size)
    mask = (positions >= start) & (positions < stop)
    if step != 1:
        mask = mask & ((positions - start) % step == 0)
    return mask
