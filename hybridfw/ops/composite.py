"""Composite ops: Python compositions of primitives, so they need no gradient rules.

These are the ``hf.`` functions and Tensor methods that are not primitives (mean, var, std,
logsumexp, max/min with ``dim``, transpose, flatten, squeeze, unsqueeze, expand, stack, split,
chunk, index_select, masked_fill, ...). They work on any tensor-like, eager or static.
"""
from __future__ import annotations

import builtins
import functools
import math
import operator
import warnings
from collections import namedtuple

from ..dtypes import as_dtype, bool_, float16, float32, int64, promote_types, uint8
from . import elementwise as E, indexing as I, linalg as L, reduction as R
from . import shape_ops as S
from .infer import (broadcast_shapes, check_fill_value, is_index, normalize_dim, normalize_dims,
                    numel)
from .registry import TensorLike, apply

__all__ = ["mean", "var", "std", "logsumexp", "max", "min", "transpose", "flatten", "squeeze",
           "unsqueeze", "expand", "stack", "split", "chunk", "index_select", "masked_fill",
           "clamp", "where", "matmul", "einsum", "cat", "reshape", "permute", "broadcast_to",
           "sum", "prod", "cumsum", "cumprod", "argmax", "argmin", "gather", "maximum", "minimum",
           "getitem",
           "reduce_grad", "pow", "abs", "narrow", "unflatten", "all", "any", "nonzero",
           "round", "mm", "bmm", "mv", "dot", "outer"]

MinMax = namedtuple("MinMax", ["values", "indices"])


def _dim_count(x, dim):
    """How many elements ``dim`` covers: an int, or a 0-d tensor computed at run time when a
    static program knows one of those dims only as -1."""
    dims = normalize_dims("mean", dim, x.ndim)
    sizes = [x.shape[d] for d in dims]
    if -1 in sizes:
        return apply(R.dim_numel, x, dim=dims)
    return numel(sizes)


# Argument names are PyTorch's (``input``, ``other``, ``exponent``...), so keyword calls ported
# from PyTorch work: ``hf.sum(input=x, dim=0)``.
def sum(input, dim=None, keepdim: bool = False, *, dtype=None):  # noqa: A001,A002
    """Sum over ``dim`` (None or ``()``: every dim); integer and bool inputs sum to int64,
    unless ``dtype`` is given: the input is cast to it first and the result has it (an int32
    ``dtype`` gives int32, wrapping around as PyTorch's does)."""
    if dtype is None:
        return apply(R.sum_, input, dim=_dims_attr(dim), keepdim=keepdim)
    dt = as_dtype(dtype)
    out = apply(R.sum_, apply(E.cast, input, dtype=dt), dim=_dims_attr(dim), keepdim=keepdim)
    return out if out.dtype is dt else apply(E.cast, out, dtype=dt)


def _dims_attr(dim):
    """A reduction's ``dim`` as its primitive takes it: None (all dims), an int or a tuple. An
    empty tuple or list means all dims, as in PyTorch (``x.sum(dim=())`` is ``x.sum()``); the
    primitives themselves read ``()`` as "no dim" (what ``sum_to`` asks of them)."""
    if dim is None or isinstance(dim, int):
        return dim
    return tuple(dim) or None


def _empty_dims(dim) -> bool:
    return isinstance(dim, (tuple, list)) and not dim


def half_in_float32(fn):
    """``fn`` computed in float32 for a float16 first argument (and float16 tensor arguments
    after it), the result cast back to float16, as PyTorch computes float16 reductions and
    losses: a float16 sum or square passes 65504 (inf) long before the mean or the norm does."""
    @functools.wraps(fn)
    def wrapped(input, *args, **kwargs):  # noqa: A002
        if getattr(input, "dtype", None) is not float16 or kwargs.get("dtype") is not None:
            return fn(input, *args, **kwargs)
        up = [apply(E.cast, a, dtype=float32) if isinstance(a, TensorLike) and
              a.dtype is float16 else a for a in (input, *args)]
        out = fn(*up, **kwargs)
        return apply(E.cast, out, dtype=float16) if out.dtype is float32 else out
    return wrapped


@half_in_float32
def mean(input, dim=None, keepdim: bool = False, *, dtype=None):  # noqa: A002
    x = input if dtype is None else apply(E.cast, input, dtype=as_dtype(dtype))
    dim = _dims_attr(dim)
    if not x.dtype.is_floating_point:
        raise TypeError(f"mean: input dtype must be floating point, got {x.dtype}; cast it "
                        "first (x.float())")
    return apply(R.sum_, x, dim=dim, keepdim=keepdim) / _dim_count(x, dim)


@half_in_float32
def var(input, dim=None, unbiased=None, keepdim: bool = False, *,  # noqa: A002
        correction=None):
    """Variance, unbiased by default (``correction=1``); PyTorch's legacy positional forms
    ``var(x, dim, unbiased, keepdim)`` and ``var(x, unbiased)`` work too. Where ``correction``
    is at least the number of elements reduced, the result is inf (nan for zero spread), as
    in PyTorch."""
    x = input
    if isinstance(dim, bool):  # var(x, True): the legacy unbiased flag in dim's place
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None else (1 if unbiased else 0)
    elif unbiased is not None:
        raise ValueError("var: pass either correction or unbiased, not both")
    if not x.dtype.is_floating_point:
        raise TypeError(f"var: input dtype must be floating point, got {x.dtype}")
    dim = _dims_attr(dim)
    centered = x - apply(R.sum_, x, dim=dim, keepdim=True) / _dim_count(x, dim)
    n = _dim_count(x, dim) - correction
    total = apply(R.sum_, centered * centered, dim=dim, keepdim=keepdim)
    # PyTorch divides by max(n, 0): a sum over no degrees of freedom is inf, or nan if it is 0
    if isinstance(n, TensorLike):  # known at run time only
        return total / apply(E.maximum, n, 0)
    return total / n if n > 0 else total * math.inf


def std(input, dim=None, unbiased=None, keepdim: bool = False, *,  # noqa: A002
        correction=None):
    """Standard deviation (same arguments as :func:`var`). Where the variance is 0 the
    gradient is 0, as in PyTorch (whose std backward masks ``grad / (2 * std)`` there), not
    the NaN of inf * 0: the root reads 1 there, and ``where`` passes no gradient to the branch
    it did not pick."""
    return sqrt_of_variance(var(input, dim, unbiased, keepdim, correction=correction))


def sqrt_of_variance(v):
    """``sqrt(v)`` with gradient 0 where ``v`` is 0 (see :func:`std`)."""
    nonzero = apply(E.ne, v, 0)
    return apply(E.where, nonzero, apply(E.sqrt, apply(E.where, nonzero, v, 1.0)), 0.0)


def logsumexp(input, dim, keepdim: bool = False):  # noqa: A002
    """``log(sum(exp(input), dim))``, computed stably; -inf over an empty dim. ``dim=()``
    reduces over all dims with ``keepdim=True`` and is refused without it, as in PyTorch.
    Integer and bool inputs compute in float32."""
    x = input if input.dtype.is_floating_point else apply(E.cast, input, dtype=float32)
    if _empty_dims(dim) and not keepdim and x.ndim:
        raise RuntimeError(f"logsumexp: dim={dim!r} without keepdim=True is refused (as "
                           "PyTorch refuses it); pass keepdim=True, or every dim as a tuple")
    dim = _dims_attr(dim)
    if builtins.any(x.shape[d] == 0 for d in normalize_dims("logsumexp", dim, x.ndim)):
        # an empty dim has no max to shift by (nor needs one): log(0) = -inf
        out = apply(E.log, apply(R.sum_, apply(E.exp, x), dim=dim, keepdim=True))
    else:
        m = apply(R.amax, x, dim=dim, keepdim=True)
        m = apply(E.where, apply(E.isfinite, m), m, 0.0)
        out = apply(E.log, apply(R.sum_, apply(E.exp, x - m), dim=dim, keepdim=True)) + m
    if not keepdim:
        out = squeeze(out, dim if dim is not None else tuple(range(x.ndim)))
    return out


def _extreme(name, reduce_op, arg_op, x, dim, keepdim):
    if dim is None:
        return apply(reduce_op, x)
    if isinstance(dim, TensorLike):
        raise TypeError(f"{name}: dim must be an int (to take an elementwise {name} of two "
                        f"tensors use hf.{'maximum' if name == 'max' else 'minimum'})")
    d = normalize_dim(name, dim, x.ndim)
    indices = apply(arg_op, x, dim=d, keepdim=True)
    values = apply(I.gather, x, indices, dim=d) if x.ndim else x
    if not keepdim and x.ndim:
        values = squeeze(values, d)
        indices = squeeze(indices, d)
    return MinMax(values, indices)


def max(input, dim=None, keepdim: bool = False, *, other=None):  # noqa: A001,A002
    """Without ``dim``: the largest element. With ``dim``: ``(values, indices)``."""
    if other is not None:
        dim = other
    if isinstance(dim, TensorLike):
        return apply(E.maximum, input, dim)
    return _extreme("max", R.amax, R.argmax, input, dim, keepdim)


def min(input, dim=None, keepdim: bool = False, *, other=None):  # noqa: A001,A002
    if other is not None:
        dim = other
    if isinstance(dim, TensorLike):
        return apply(E.minimum, input, dim)
    return _extreme("min", R.amin, R.argmin, input, dim, keepdim)


def _sizes_argument(op: str, sizes: tuple, keyword: str, value) -> tuple:
    """The sizes of ``reshape(x, 2, 3)``, ``reshape(x, (2, 3))`` or ``reshape(x, shape=(2,
    3))`` (``keyword``/``value``: PyTorch's keyword form) as one tuple."""
    if value is not None:
        if sizes:
            raise TypeError(f"{op}: pass the sizes either positionally or as {keyword}=, "
                            "not both")
        return tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        return tuple(sizes[0])
    return sizes


def reshape(input, *sizes, shape=None):  # noqa: A002
    """``input`` with a new shape (``reshape(x, 2, 3)``, ``reshape(x, (2, 3))`` or
    ``reshape(x, shape=(2, 3))``; one size may be -1)."""
    return _reshape("reshape", input, _sizes_argument("reshape", sizes, "shape", shape))


def view(input, *sizes, size=None):  # noqa: A002
    """``input`` seen with a new shape (``view(x, 2, 3)``, ``view(x, (2, 3))`` or
    ``view(x, size=(2, 3))``); errors name ``view``."""
    return _reshape("view", input, _sizes_argument("view", sizes, "size", size))


def _reshape(op: str, x, shape: tuple):
    dynamic = S.size_entries(shape, own=x)  # sizes a static program knows when it runs
    if dynamic is not None:
        plain = S.static_reshape_shape(x, *dynamic)
        if plain is not None:
            return apply(S.reshape, x, shape=plain)
        return apply(S.reshape_dynamic, x, *dynamic[1], shape=dynamic[0])
    try:
        shape = tuple(operator.index(s) for s in shape)
    except TypeError:
        bad = next(s for s in shape if not is_index(s))
        raise TypeError(f"{op}: sizes must be ints, but found element of type "
                        f"{type(bad).__name__} ({bad!r}) in {shape!r}") from None
    if op != "reshape":  # refused under the name the user called (reshape's own infer checks)
        S.resolve_shape(op, x.shape, shape)
    return apply(S.reshape, x, shape=shape)


def permute(input, *order, dims=None):  # noqa: A002
    """``input`` with its dims reordered: ``permute(x, 1, 0)``, ``permute(x, (1, 0))`` or
    ``permute(x, dims=(1, 0))``."""
    order = _sizes_argument("permute", order, "dims", dims)
    return apply(S.permute, input,
                 dims=tuple(normalize_dim("permute", d, input.ndim) for d in order))


def transpose(input, dim0: int, dim1: int):  # noqa: A002
    x = input
    d0 = normalize_dim("transpose", dim0, x.ndim)
    d1 = normalize_dim("transpose", dim1, x.ndim)
    dims = list(range(x.ndim))
    if dims:  # a 0-d tensor takes dims 0/-1 and stays as it is
        dims[d0], dims[d1] = dims[d1], dims[d0]
    return apply(S.permute, x, dims=tuple(dims))


def flatten(input, start_dim: int = 0, end_dim: int = -1):  # noqa: A002
    x = input
    if x.ndim == 0:
        return apply(S.reshape, x, shape=(1,))
    s = normalize_dim("flatten", start_dim, x.ndim)
    e = normalize_dim("flatten", end_dim, x.ndim)
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    mid = x.shape[s:e + 1]
    size = -1 if -1 in mid else numel(mid)
    return S.reshape_keeping(x, S.own_dims(x, range(s)) + [size] +
                            S.own_dims(x, range(e + 1, x.ndim)))


def unflatten(input, dim: int, sizes):  # noqa: A002
    """Dim ``dim`` split into ``sizes`` (one may be -1), as ``torch.unflatten``."""
    x = input
    d = normalize_dim("unflatten", dim, x.ndim)
    sizes = tuple(int(s) for s in sizes)
    return S.reshape_keeping(x, S.own_dims(x, range(d)) + list(sizes) +
                            S.own_dims(x, range(d + 1, x.ndim)))


def _shape_text(shape) -> str:
    return "(" + ", ".join("None" if s == -1 else str(s) for s in shape) + \
        ("," if len(shape) == 1 else "") + ")"


def squeeze(input, dim=None):  # noqa: A002
    """PyTorch's squeeze. In a static program, ``dim=None`` keeps the dims whose size is known
    only at run time; naming such a dim raises (see below)."""
    x = input
    if dim is None:
        dims = tuple(i for i, s in enumerate(x.shape) if s == 1)
    else:
        named = normalize_dims("squeeze", dim, x.ndim)
        unknown = [d for d in named if x.shape[d] == -1]
        if unknown:  # squeezed or kept depends on the run: no one program does both
            raise ValueError(f"squeeze: dim {unknown[0]} of input {_shape_text(x.shape)} has a "
                             "size a static program knows only when it runs (an InputSpec None "
                             "dim): it would be squeezed on a run where it is 1 and kept "
                             "otherwise; give it a fixed size in the InputSpec, or index it "
                             f"(x[0]) or reshape if it is always 1")
        dims = tuple(d for d in named if x.shape[d] == 1)
    if not dims:
        return x
    return S.reshape_keeping(x, S.own_dims(x, [i for i in range(x.ndim) if i not in dims]))


def unsqueeze(input, dim: int):  # noqa: A002
    d = normalize_dim("unsqueeze", dim, input.ndim, extra=1)
    return S.insert_unit_dims(input, (d,))


def expand(input, *sizes, size=None):  # noqa: A002
    """``input`` broadcast to ``sizes`` (-1 keeps a dim): ``expand(x, 3, 4)``, ``expand(x, (3,
    4))`` or ``expand(x, size=(3, 4))``."""
    return _broadcast("expand", input, _sizes_argument("expand", sizes, "size", size))


def _broadcast(op: str, input, sizes):  # noqa: A002
    shape, others = _static_sizes(op, input, sizes)
    S.broadcast_target(op, input.shape, shape)  # refused under the name the user called
    if others:
        # sizes of other tensors a static program knows when it runs (cls.expand(x.size(0),
        # -1, -1)): ``where`` over a mask of those sizes broadcasts to them, gradient included
        from .factories import ones  # (factories builds on this module's neighbours)
        mask = ones(*(sizes[i] if i in others else 1 for i in range(len(sizes))), dtype=bool_)
        input = apply(E.where, mask, input, input)
    return apply(S.broadcast_to, input, shape=shape)


def expand_as(input, other):  # noqa: A002
    """``input`` broadcast to ``other``'s shape. Where a static program knows a dim of
    ``other`` only at run time (-1 in its shape) the result follows that run-time size (passed
    on as a size, -1 would mean "keep ``input``'s size": (1, 3, 1) came out (1, 3, 4) for an
    ``other`` of (N, 3, 4)); ``where`` over a mask shaped like ``other`` broadcasts it."""
    shape = tuple(other.shape)
    if -1 not in shape:
        return expand(input, shape)
    from .factories import ones_like  # (factories builds on this module's neighbours)
    if len(shape) < input.ndim:
        raise ValueError(f"expand_as: cannot expand shape {tuple(input.shape)} to fewer dims "
                         f"{shape}")
    return apply(E.where, ones_like(other, dtype=bool_), input, input)


def _static_sizes(op: str, x, sizes) -> tuple:
    """``(sizes as ints, others)``: a size a static program reads when it runs (converted
    code's ``x.shape[k]`` of a None dim) is -1 ("keep the size") where it is ``x``'s own dim
    at that position; ``others`` are the positions of other such sizes (-1 here too: the
    caller broadcasts ``x`` to them first), where ``x``'s dim is 1 or new."""
    dynamic = S.size_entries(sizes, own=x)
    if dynamic is None:
        return tuple(sizes), ()
    entries, lead = dynamic[0], len(sizes) - x.ndim
    out, others = [], []
    for i, e in enumerate(entries):
        if isinstance(e, int):
            out.append(e)
        elif e[0] == "dim" and e[1] == 0 and e[2] == i - lead:
            out.append(-1)
        elif i < lead or x.shape[i - lead] == 1:
            out.append(-1)
            others.append(i)
        else:
            raise TypeError(f"{op}: size {i} is only known when the program runs and dim "
                            f"{i - lead} of the tensor of shape {tuple(x.shape)} is not 1 "
                            f"(sizes {sizes}); {op} broadcasts to such a size only a dim of "
                            "size 1 (or the tensor's own dim there)")
    return tuple(out), tuple(others)


def broadcast_to(input, size):  # noqa: A002
    return _broadcast("broadcast_to", input, tuple(size))


def _check_not_0d(op: str, x) -> None:
    if x.ndim == 0:
        raise ValueError(f"{op}: expects a tensor of at least 1 dim, got a 0-d tensor")


def cat(tensors, dim: int = 0):
    """``tensors`` joined along ``dim``. A tensor of shape (0,) beside tensors of other shapes
    is skipped (PyTorch's legacy empty tensor, ``hf.tensor([])``), its dtype still promoting
    the result's."""
    tensors = tuple(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty sequence of tensors")
    kept = tuple(t for t in tensors if tuple(t.shape) != (0,))
    if kept and len(kept) < len(tensors):
        dt = kept[0].dtype
        for t in tensors:
            dt = promote_types(dt, t.dtype)
        out = cat(kept, dim)
        return out if out.dtype is dt else apply(E.cast, out, dtype=dt)
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise ValueError(f"cat: the 0-d tensor at position {i} cannot be concatenated; "
                             "use hf.stack, or unsqueeze it first")
    d = normalize_dim("cat", dim, tensors[0].ndim)  # (checked for one tensor too)
    if len(tensors) == 1:
        return tensors[0]
    return apply(S.concat, *tensors, dim=d)


def stack(tensors, dim: int = 0):
    tensors = tuple(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    first = tuple(tensors[0].shape)
    for t in tensors:  # (-1: a dim known only when the program runs, any size)
        if len(t.shape) != len(first) or builtins.any(a != b and -1 not in (a, b)
                                                      for a, b in zip(t.shape, first)):
            raise ValueError(f"stack: all tensors must have the same shape, got "
                             f"{[tuple(t.shape) for t in tensors]}")
    d = normalize_dim("stack", dim, len(first), extra=1)
    parts = [unsqueeze(t, d) for t in tensors]
    return parts[0] if len(parts) == 1 else apply(S.concat, *parts, dim=d)


def narrow(input, dim: int, start: int, length: int):  # noqa: A002
    _check_not_0d("narrow", input)
    return I.narrow(input, normalize_dim("narrow", dim, input.ndim), start, length)


def split(tensor, split_size_or_sections, dim: int = 0):
    x = tensor
    _check_not_0d("split", x)
    d = normalize_dim("split", dim, x.ndim)
    n = x.shape[d]
    if n == -1:  # the number of pieces is the program's structure: it must be known
        raise ValueError(f"split: dim {d} of the input of shape {tuple(x.shape)} is only known "
                         "when the program runs (an InputSpec None dim), so the pieces are not "
                         "(their number, or that the sections add up to it); split along a dim "
                         "of fixed size, or give that dim a fixed size in the InputSpec")
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size <= 0:
            raise ValueError(f"split: split size must be positive, got {size}")
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
        if n == 0:
            sizes = [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if builtins.sum(sizes) != n:
            raise ValueError(f"split: sections {sizes} do not add up to the size {n} of dim {d}")
    out, start = [], 0
    for s in sizes:
        out.append(I.narrow(x, d, start, s))
        start += s
    return tuple(out)


def chunk(input, chunks: int, dim: int = 0):  # noqa: A002
    """Pieces of ``ceil(size / chunks)`` along ``dim`` (fewer pieces where they run out, the
    last one shorter); a dim of size 0 gives ``chunks`` empty pieces, as in PyTorch."""
    x = input
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    _check_not_0d("chunk", x)
    d = normalize_dim("chunk", dim, x.ndim)
    if x.shape[d] == -1:
        raise ValueError(f"chunk: dim {d} of the input of shape {tuple(x.shape)} is only known "
                         "when the program runs (an InputSpec None dim), so the pieces are not; "
                         "chunk along a dim of fixed size")
    if x.shape[d] == 0:  # PyTorch: ``chunks`` empty pieces, not one
        return split(x, [0] * chunks, d)
    return split(x, -(-x.shape[d] // chunks), d)


def getitem(x, index, to_tensor):
    spec, tensors = I.parse_index(index, to_tensor)
    return apply(I.getitem, x, *tensors, spec=spec)


def index_select(input, dim: int, index):  # noqa: A002
    """The entries of ``input`` at positions ``index`` (an integer tensor of 1 dim, or 0 dims)
    along ``dim``; on a 0-d input, a 0-d result (``index`` then holds one 0 or -1)."""
    x = input
    d = normalize_dim("index_select", dim, x.ndim)
    if not isinstance(index, TensorLike) or index.dtype.is_floating_point or \
            index.dtype is bool_:
        raise TypeError(f"index_select: index must be an integer tensor, got "
                        f"{getattr(index, 'dtype', type(index).__name__)}")
    if index.ndim > 1:
        raise ValueError(f"index_select: index must be 1-D, got shape {tuple(index.shape)}")
    if x.ndim == 0:
        if index.ndim and index.shape[0] != 1:
            raise ValueError(f"index_select: the index of a 0-d input must hold one value, "
                             f"got shape {tuple(index.shape)}")
        picked = index_select(apply(S.reshape, x, shape=(1,)), 0,
                              apply(S.reshape, index, shape=(1,)))
        return apply(S.reshape, picked, shape=())
    if index.ndim == 0:
        index = apply(S.reshape, index, shape=(1,))
    index = apply(I.check_index, index, x, name="index_select", dim=d)  # no wrapping, as PyTorch
    spec = (("slice", None, None, None),) * d + (("tensor",),)
    return apply(I.getitem, x, index, spec=spec)


def gather(input, dim: int, index):  # noqa: A002
    d = normalize_dim("gather", dim, input.ndim)
    if input.ndim == 0 and index.ndim == 0:  # PyTorch's 0-d gather: the value at index 0/-1
        out = apply(I.gather, apply(S.reshape, input, shape=(1,)),
                    apply(S.reshape, index, shape=(1,)), dim=0)
        return apply(S.reshape, out, shape=())
    return apply(I.gather, input, index, dim=d)


def masked_fill(input, mask, value):  # noqa: A002
    """``value`` where ``mask`` holds, else ``input``, in ``input``'s dtype: a float value on
    an integer tensor truncates toward 0, any nonzero one (inf too) on a bool tensor is True,
    as PyTorch casts it."""
    x = input
    if not isinstance(mask, TensorLike) or mask.dtype is not bool_:
        got = f"dtype {mask.dtype}" if isinstance(mask, TensorLike) else type(mask).__name__
        raise TypeError(f"masked_fill: mask must be a bool tensor, got {got}")
    broadcast_shapes("masked_fill", tuple(x.shape), tuple(mask.shape))
    if isinstance(value, TensorLike):
        if value.ndim:
            raise ValueError(f"masked_fill: value must be a number or a 0-d tensor, got a "
                             f"tensor of shape {tuple(value.shape)} (use where(mask, value, "
                             f"input) to fill from a tensor)")
        value = apply(E.cast, value, dtype=x.dtype) if value.dtype is not x.dtype else value
    else:
        check_fill_value("masked_fill", value, x.dtype)
        if x.dtype is bool_ and isinstance(value, (int, float)):
            value = builtins.bool(value)
        elif not x.dtype.is_floating_point and isinstance(value, float):
            value = int(value)
    out = apply(E.where, mask, value, x)
    return out if out.dtype is x.dtype else apply(E.cast, out, dtype=x.dtype)


def clamp(input, min=None, max=None):  # noqa: A002
    """``input`` limited to ``[min, max]`` (numbers or broadcasting tensors). With tensor
    bounds the gradient follows PyTorch: where ``input`` equals a bound it goes to ``input``
    alone (``maximum``/``minimum`` would split it), NaN in either propagates."""
    x = input
    if isinstance(min, TensorLike) or isinstance(max, TensorLike):
        if min is not None:
            x = apply(E.where, apply(E.ge, x, min), x, apply(E.maximum, x, min))
        if max is not None:
            x = apply(E.where, apply(E.le, x, max), x, apply(E.minimum, x, max))
        return x
    return apply(E.clamp, x, min=min, max=max)


_NO_VALUE = object()


def where(condition, input=_NO_VALUE, other=_NO_VALUE):  # noqa: A002
    """``input`` where ``condition`` holds, else ``other``; with ``condition`` alone,
    ``nonzero(condition, as_tuple=True)`` (as PyTorch)."""
    if input is _NO_VALUE and other is _NO_VALUE:
        return nonzero(condition, as_tuple=True)
    if input is _NO_VALUE or other is _NO_VALUE:
        raise TypeError("where: pass condition alone, or condition, input and other")
    if isinstance(condition, TensorLike) and condition.dtype is uint8:
        warnings.warn("where received a uint8 condition tensor: deprecated (as in PyTorch); "
                      "use a bool condition", UserWarning, stacklevel=2)
        condition = apply(E.cast, condition, dtype=bool_)
    return apply(E.where, condition, input, other)


def nonzero(input, *, as_tuple: bool = False):  # noqa: A002
    """The int64 indices of the nonzero (True) elements, in row-major order: an (n, ndim)
    tensor, or with ``as_tuple`` one 1-d tensor per dim."""
    from .creation import arange
    x = input
    if x.ndim == 0:  # as PyTorch: indices into the 1-element view, with no dims
        found = nonzero(apply(S.reshape, x, shape=(1,)), as_tuple=as_tuple)
        return found if as_tuple else I.narrow(found, 1, 0, 0)
    if -1 in x.shape:
        raise ValueError(f"nonzero: the shape {tuple(x.shape)} is only known when the program "
                         "runs; nonzero needs it when the program is built")
    mask = x if x.dtype is bool_ else apply(E.ne, x, 0)
    coords = []
    for d, n in enumerate(x.shape):
        positions = apply(arange, start=0, stop=n, step=1, dtype=as_dtype("int64"),
                          device=str(x.device))
        positions = apply(S.reshape, positions, shape=tuple(n if k == d else 1
                                                            for k in range(x.ndim)))
        positions = apply(S.broadcast_to, positions, shape=tuple(x.shape))
        coords.append(apply(I.getitem, positions, mask, spec=(("tensor",),)))
    return tuple(coords) if as_tuple else stack(coords, dim=1)


def round(input, *, decimals: int = 0):  # noqa: A001,A002
    """Round half to even; ``decimals`` places (negative: tens, hundreds...), computed as
    PyTorch does (``round(x * 10**d) / 10**d``)."""
    if not decimals:
        return apply(E.round_, input)
    scale = 10.0 ** builtins.abs(decimals)
    if decimals > 0:
        return apply(E.round_, input * scale) / scale
    return apply(E.round_, input / scale) * scale


def maximum(input, other):  # noqa: A002
    return apply(E.maximum, input, other)


def minimum(input, other):  # noqa: A002
    return apply(E.minimum, input, other)


def pow(input, exponent):  # noqa: A001,A002
    return apply(E.pow_, input, exponent)


def abs(input):  # noqa: A001,A002
    return apply(E.abs_, input)


def matmul(input, other):  # noqa: A002
    return apply(L.matmul, input, other)


def _check_product(op: str, a, b, ndims: tuple, inner: tuple) -> None:
    """PyTorch's checks of mm/bmm/mv/dot: operand dims ``ndims``, one dtype, and the
    contracted sizes (dims ``inner`` of a and b) equal (batch sizes too, for bmm)."""
    if (a.ndim, b.ndim) != ndims:
        raise ValueError(f"{op}: expects tensors of {ndims[0]} and {ndims[1]} dims, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype is not b.dtype:
        raise TypeError(f"{op}: expects both tensors of one dtype, got {a.dtype} and {b.dtype}")
    sizes = [(a.shape[inner[0]], b.shape[inner[1]])]
    if op == "bmm":
        sizes.append((a.shape[0], b.shape[0]))
    if builtins.any(x != y and x != -1 and y != -1 for x, y in sizes):
        raise ValueError(f"{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be "
                         "multiplied")


def mm(input, mat2):  # noqa: A002
    """The matrix product of two 2-d tensors of one dtype."""
    _check_product("mm", input, mat2, (2, 2), (1, 0))
    return apply(L.matmul, input, mat2)


def bmm(input, mat2):  # noqa: A002
    """Batched matrix products of two 3-d tensors with one batch size."""
    _check_product("bmm", input, mat2, (3, 3), (2, 1))
    return apply(L.matmul, input, mat2)


def mv(input, vec):  # noqa: A002
    """The product of a 2-d matrix and a 1-d vector."""
    _check_product("mv", input, vec, (2, 1), (1, 0))
    return apply(L.matmul, input, vec)


def dot(input, tensor):  # noqa: A002
    """The inner product of two 1-d tensors of one size and dtype (a 0-d tensor)."""
    _check_product("dot", input, tensor, (1, 1), (0, 0))
    return apply(L.matmul, input, tensor)


def outer(input, vec2):  # noqa: A002
    """The outer product of two 1-d tensors: ``out[i, j] = input[i] * vec2[j]``."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise ValueError(f"outer: expects two 1-d tensors, got shapes {tuple(input.shape)} and "
                         f"{tuple(vec2.shape)}")
    return apply(S.reshape, input, shape=(input.shape[0], 1)) * \
        apply(S.reshape, vec2, shape=(1, vec2.shape[0]))


def einsum(equation: str, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    specs, out = L.parse_equation(equation, [o.ndim for o in operands])
    if len(operands) == 1 and not operands[0].dtype.is_floating_point and set(specs[0]) - set(out):
        # one integer/bool operand with labels summed out is a sum, which PyTorch gives int64
        operands = (apply(E.cast, operands[0], dtype=int64),)
    return apply(L.einsum, *operands, equation=",".join(specs) + "->" + out)


def prod(input, dim=None, keepdim: bool = False, *, dtype=None):  # noqa: A002
    """Product over ``dim`` (an int, or None for every element); integer and bool inputs
    multiply to int64, unless ``dtype`` is given: the input is cast to it first and the result
    has it (an int32 ``dtype`` gives int32), as in PyTorch."""
    if _empty_dims(dim):
        raise TypeError(f"prod: dim must be an int or None, got {dim!r} (PyTorch's prod "
                        "takes no empty dim list); pass dim=None to multiply every element")
    if dtype is None:
        return apply(R.prod, input, dim=_dims_attr(dim), keepdim=keepdim)
    dt = as_dtype(dtype)
    x = input if input.dtype is dt else apply(E.cast, input, dtype=dt)
    out = apply(R.prod, x, dim=_dims_attr(dim), keepdim=keepdim)
    return out if out.dtype is dt else apply(E.cast, out, dtype=dt)


def _cumulative(op, input, dim: int, dtype):  # noqa: A002
    if dtype is None:
        return apply(op, input, dim=normalize_dim(op.name, dim, input.ndim))
    dt = as_dtype(dtype)
    x = input if input.dtype is dt else apply(E.cast, input, dtype=dt)
    out = apply(op, x, dim=normalize_dim(op.name, dim, x.ndim))
    return out if out.dtype is dt else apply(E.cast, out, dtype=dt)  # (integers give int64)


def cumsum(input, dim: int, *, dtype=None):  # noqa: A002
    """Cumulative sum along ``dim``; ``dtype`` casts the input first, as in PyTorch."""
    return _cumulative(R.cumsum, input, dim, dtype)


def cumprod(input, dim: int, *, dtype=None):  # noqa: A002
    """Cumulative product along ``dim``; ``dtype`` casts the input first, as in PyTorch.

    Example::

        >>> import hybridfw as hf
        >>> hf.cumprod(hf.tensor([1.0, 2.0, 3.0]), 0).tolist()
        [1.0, 2.0, 6.0]
    """
    return _cumulative(R.cumprod, input, dim, dtype)


def all(input, dim=None, keepdim: bool = False):  # noqa: A001,A002
    """Whether every element (along ``dim``) is nonzero (True): a bool tensor; True over no
    elements. An empty ``dim`` (``()``/``[]``) reduces nothing, as in PyTorch: each element's
    truth."""
    if _empty_dims(dim):
        return apply(E.ne, input, 0)
    return sum(apply(E.eq, input, 0), dim, keepdim) == 0


def any(input, dim=None, keepdim: bool = False):  # noqa: A001,A002
    """Whether some element (along ``dim``) is nonzero (True): a bool tensor. An empty ``dim``
    reduces nothing, as :func:`all`."""
    if _empty_dims(dim):
        return apply(E.ne, input, 0)
    return sum(apply(E.ne, input, 0), dim, keepdim) > 0


def argmax(input, dim=None, keepdim: bool = False):  # noqa: A002
    return apply(R.argmax, input, dim=dim, keepdim=keepdim)


def argmin(input, dim=None, keepdim: bool = False):  # noqa: A002
    return apply(R.argmin, input, dim=dim, keepdim=keepdim)


def reduce_grad(g, shape, dtype):
    """Bring a gradient to its input's shape (summing broadcast dims) and dtype: the one place
    where broadcast gradients are reduced, for eager and static autodiff alike."""
    if tuple(g.shape) != tuple(shape):
        g = S.sum_to(g, shape)
    if g.dtype is not dtype:
        g = apply(E.cast, g, dtype=dtype)
    return g


