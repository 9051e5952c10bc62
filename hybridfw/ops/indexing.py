"""Indexing primitives: getitem (read), index_put (write), their gradient scatter, gather.

A Python index (ints, slices, None, Ellipsis, bool masks, integer tensors, lists) is normalized
once by :func:`parse_index` into a hashable ``spec`` plus the index tensors, which become op
inputs (so static graphs can feed them). ``spec`` items are ``('int', i)``,
``('slice', start, stop, step)``, ``('none',)``, ``('ellipsis',)`` and ``('tensor',)`` (the next
index tensor input).
"""
from __future__ import annotations

import warnings

from ..dtypes import bool_, int64, uint8
from .infer import broadcast_shapes, check_fill_value
from .lowering_rules import ScalarIndex, Unsupported, view_rule
from ..backend import add_at
from .registry import OnnxNotExportable, TensorLike, apply, onnx_rules, register, runtime_value


# --------------------------------------------------------------------------- spec handling
def parse_index(index, to_tensor):
    """Split a user index into (spec, index_tensors). ``to_tensor`` converts lists/arrays."""
    if not isinstance(index, tuple):
        index = (index,)
    spec, tensors = [], []
    for item in index:
        if item is None:
            spec.append(("none",))
        elif item is Ellipsis:
            spec.append(("ellipsis",))
        elif isinstance(item, bool):  # numpy's and PyTorch's: a 0-d mask (a new dim of 1 or 0)
            if item:
                spec.append(("none",))
            else:
                spec.append(("tensor",))
                tensors.append(to_tensor(False))
        elif isinstance(item, int):
            spec.append(("int", item))
        elif isinstance(item, slice):
            for part in (item.start, item.stop, item.step):
                if part is not None and (not isinstance(part, int) or isinstance(part, bool)):
                    if isinstance(part, TensorLike) and part.ndim == 0:
                        if getattr(part, "block", None) is not None:
                            raise RunTimeSliceBound(item)  # (a static program's value)
                        continue
                    raise IndexError(f"getitem: slice bounds must be ints or None, got {item}")
            start, stop, step = (None if p is None else int(p)
                                 for p in (item.start, item.stop, item.step))
            if step is not None and step <= 0:
                raise ValueError(f"getitem: slice step must be positive, got {step}")
            spec.append(("slice", start, stop, step))
        else:
            t = item if isinstance(item, TensorLike) else to_tensor(item)
            if isinstance(item, list) and 0 in t.shape:  # x[[]]: an empty int64 index, as
                t = t.astype(int64)                       # PyTorch reads it (not float32)
            if t.dtype is uint8:  # PyTorch's legacy byte mask: a mask, not integer indices
                warnings.warn("indexing with dtype uint8 is deprecated (as in PyTorch), and "
                              "reads it as a mask; use a bool tensor", UserWarning, stacklevel=3)
                t = t.astype(bool_)
            if not (t.dtype is bool_ or t.dtype.category == 1):
                raise IndexError(f"getitem: tensors used as indices must be integer or bool, "
                                 f"got dtype {t.dtype}")
            spec.append(("tensor",))
            tensors.append(t)
    return tuple(spec), tuple(tensors)


class RunTimeSliceBound(Exception):
    """Raised by :func:`parse_index` for a slice bounded by a value a static program knows
    only when it runs: indexing then selects with a mask over that dim instead
    (``composite_extra.run_time_slices``)."""


def _consumed(item, tensor) -> int:
    kind = item[0]
    if kind == "none" or kind == "ellipsis":
        return 0
    if kind == "tensor" and tensor.dtype is bool_:
        return max(tensor.ndim, 1) if tensor.ndim else 0
    return 1


def _expand_spec(op, shape, spec, tensors):
    """Replace the ellipsis by full slices; pair each item with its index tensor (or None)."""
    it = iter(tensors)
    paired = [(item, next(it) if item[0] == "tensor" else None) for item in spec]
    used = sum(_consumed(i, t) for i, t in paired)
    if sum(1 for i, _ in paired if i[0] == "ellipsis") > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis ('...')")
    if used > len(shape):
        raise IndexError(f"{op}: too many indices for a tensor of shape {tuple(shape)} "
                         f"({used} dims indexed)")
    fill = [(("slice", None, None, None), None)] * (len(shape) - used)
    out, seen = [], False
    for item, t in paired:
        if item[0] == "ellipsis":
            out.extend(fill)
            seen = True
        else:
            out.append((item, t))
    if not seen:
        out.extend(fill)
    return out


def _slice_len(n, start, stop, step):
    if n == -1:
        return -1
    return len(range(*slice(start, stop, step).indices(n)))


def _is_bool_index(t) -> bool:
    dt = t.dtype
    return dt is bool_ or getattr(dt, "kind", None) == "b"


def split_int_selects(spec, tensors):
    """PyTorch applies integer indices first, as selects, even next to index tensors (numpy
    instead counts them as advanced indices, which moves the advanced dims elsewhere:
    ``x[0, :, [1, 2]]`` is (4, 2) in PyTorch, (2, 4) in numpy). Returns ``(selects, rest)``:
    a basic index with the ints (and full slices where the tensors go), then the index to apply
    to its result; or None when the spec does not mix ints with index tensors."""
    kinds = {item[0] for item in spec}
    if "int" not in kinds or "tensor" not in kinds:
        return None
    full = ("slice", None, None, None)
    it = iter(tensors)
    first, rest = [], []
    for item in spec:
        kind = item[0]
        if kind == "int":
            first.append(item)
        elif kind == "tensor":
            t = next(it)
            first.extend([full] * (max(t.ndim, 1) if _is_bool_index(t) else 1))
            rest.append(item)
        elif kind == "ellipsis":
            first.append(item)
            rest.append(item)
        else:  # slice (applied by the first step) or None (a real dim of size 1 afterwards)
            first.append(item)
            rest.append(full)
    return tuple(first), tuple(rest)


def index_shape(op, shape, spec, tensors):
    """Result shape of ``x[index]`` (PyTorch's rules); -1 where unknown until run time."""
    split = split_int_selects(spec, tensors)
    if split is not None:
        return index_shape(op, index_shape(op, shape, split[0], ()), split[1], tensors)
    items = _expand_spec(op, shape, spec, tensors)
    dim = 0
    basic, adv_shapes, adv_positions = [], [], []
    for item, t in items:
        kind = item[0]
        if kind == "none":
            basic.append(1)
            continue
        if kind == "int":
            n = shape[dim]
            if n != -1 and not -n <= item[1] < n:
                raise IndexError(f"{op}: index {item[1]} is out of bounds for dim {dim} with "
                                 f"size {n}")
            adv_positions.append(len(basic))
            adv_shapes.append(())
            dim += 1
        elif kind == "slice":
            basic.append(_slice_len(shape[dim], *item[1:]))
            dim += 1
        else:  # tensor
            adv_positions.append(len(basic))
            if t.dtype is bool_:
                k = max(t.ndim, 1) if t.ndim else 0
                target = tuple(shape[dim:dim + k])
                if t.ndim and any(a != b and -1 not in (a, b) for a, b in zip(t.shape, target)):
                    raise IndexError(f"{op}: bool mask of shape {t.shape} does not match the "
                                     f"indexed shape {target} at dim {dim}")
                adv_shapes.append((-1,))
                dim += k
            else:
                adv_shapes.append(tuple(t.shape))
                dim += 1
    if not any(item[0] == "tensor" for item, _ in items):
        return tuple(basic)  # ints alone just drop their dims
    # numpy: ints combined with index arrays count as advanced indices; the broadcast advanced
    # dims replace them in place when they are adjacent, and go first otherwise.
    adv = broadcast_shapes(op, *adv_shapes)
    p = adv_positions[0]
    if all(q == p for q in adv_positions):
        return tuple(basic[:p]) + adv + tuple(basic[p:])
    return adv + tuple(basic)


def build_index(spec, arrays):
    """The numpy/cupy index tuple for ``spec`` with the index arrays filled in."""
    it = iter(arrays)
    out = []
    for item in spec:
        kind = item[0]
        if kind == "int":
            out.append(item[1])
        elif kind == "slice":
            out.append(slice(item[1], item[2], item[3]))
        elif kind == "none":
            out.append(None)
        elif kind == "ellipsis":
            out.append(Ellipsis)
        else:
            out.append(next(it))
    return tuple(out)


def indexed_target(arr, spec, arrays):
    """``(view, index)`` such that ``view[index]`` is ``arr[spec]`` with PyTorch's semantics and
    writes through ``view[index] = ...`` land in ``arr``."""
    split = split_int_selects(spec, arrays)
    if split is None:
        return arr, build_index(spec, arrays), spec
    return arr[build_index(split[0], ())], build_index(split[1], arrays), split[1]


def _has_int_arrays(spec, arrays) -> bool:
    it = iter(arrays)
    return any(item[0] == "tensor" and next(it).dtype.kind != "b" for item in spec)


# --------------------------------------------------------------------------- primitives
def _getitem_infer(a, *index, spec):
    return index_shape("getitem", a.shape, spec, index), a.dtype, None


def _getitem_kernel(xp, a, *index, spec):
    view, idx, _ = indexed_target(a, spec, index)
    return view[idx]  # basic indexing gives a view, advanced a copy


def _getitem_subscript(*index, spec):
    """Without index tensors the kernel's index depends on ``spec`` alone: the index itself
    (exactly what :func:`_getitem_kernel` applies: no int selects to split off then)."""
    return None if index else build_index(spec, ())


def _getitem_grad(g, out, a, *index, spec):
    if -1 not in a.shape:
        return apply(getitem_backward, g, *index, spec=spec, shape=tuple(a.shape))
    # a static program knows a's shape only at run time: scatter into zeros of a's shape then
    from .creation import full
    zeros = apply(full, runtime_value(a), value=0, dtype=g.dtype, device=str(g.device))
    return apply(index_put, zeros, g, *index, spec=spec, accumulate=True)


def _getitem_lower(in_shape, out_shape, *index, spec):
    """Ints, slices, None, ... and 0-d integer index tensors (:class:`ScalarIndex`, bounds
    checked once) read operand 0 in place; other index tensors do not compile."""
    if any(not isinstance(t, ScalarIndex) or t.dtype is bool_ for t in index):
        raise Unsupported("getitem with index tensors (other than 0-d integers)")
    fixed = []  # per dim of operand 0: a position expression, or (start, step) of a slice
    for item, tensor in _expand_spec("getitem", in_shape, spec, index):
        kind = item[0]
        if kind == "none":
            fixed.append(None)
            continue
        n = in_shape[sum(f is not None for f in fixed)]
        if kind == "int":
            fixed.append(str(item[1] % n))
        elif kind == "tensor":
            fixed.append(tensor.checked(n))
        else:
            start, _, step = slice(*item[1:]).indices(n)
            fixed.append((start, step))

    def mapping(idx):
        out, k = [], 0
        for f in fixed:
            if f is None:  # a new dim of size 1
                k += 1
            elif isinstance(f, str):
                out.append(f)
            else:
                i = idx[k]
                k += 1
                term = i if f[1] == 1 else f"{f[1]} * {i}"
                out.append(term if f[0] == 0 else f"{term} + {f[0]}")
        return out
    return mapping


getitem = register("getitem", infer=_getitem_infer, kernel=_getitem_kernel, view=True,
                   save=slice(1, None), vjp=(_getitem_grad,), lower=view_rule(_getitem_lower),
                   subscript=_getitem_subscript)


def _getitem_backward_infer(g, *index, spec, shape):
    return tuple(shape), g.dtype, None


def _getitem_backward_kernel(xp, g, *index, spec, shape):
    out = xp.zeros(shape, dtype=g.dtype)
    view, idx, rest = indexed_target(out, spec, index)
    if _has_int_arrays(rest, index):
        add_at(xp, view, idx, g)  # repeated indices accumulate
    else:
        view[idx] = g
    return out


getitem_backward = register(
    "getitem_backward", infer=_getitem_backward_infer, kernel=_getitem_backward_kernel,
    save=slice(1, None),
    vjp=(lambda g, out, g0, *index, spec, shape: apply(getitem, g, *index, spec=spec),))


def _index_put_infer(a, value, *index, spec, accumulate=False):
    target = index_shape("index_put", a.shape, spec, index)
    vshape = value.shape if isinstance(value, TensorLike) else ()
    # the value must broadcast to the target itself (-1: a dim known only at run time)
    extra = len(vshape) - len(target)
    if any(v not in (1, -1) for v in vshape[:max(extra, 0)]) or any(
            v not in (1, -1, t) and t != -1
            for v, t in zip(vshape[::-1], tuple(target)[::-1])):
        raise ValueError(f"index_put: value of shape {vshape} cannot be broadcast to the "
                         f"indexed shape {tuple(target)}")
    if not accumulate:
        check_fill_value("index_put", value, a.dtype)
    return a.shape, a.dtype, None


def _index_put_kernel(xp, a, value, *index, spec, accumulate=False, out=None):
    if out is None:
        out = a.copy()
    view, idx, rest = indexed_target(out, spec, index)
    if accumulate:
        if _has_int_arrays(rest, index):
            add_at(xp, view, idx, value)
        else:
            view[idx] += value
    else:
        view[idx] = value
    return out


def _index_put_grad_self(g, out, a, value, *index, spec, accumulate=False):
    return g if accumulate else apply(index_put, g, 0.0, *index, spec=spec)


def _index_put_grad_value(g, out, a, value, *index, spec, accumulate=False):
    g = apply(getitem, g, *index, spec=spec)
    for _ in range(value.ndim - g.ndim):  # a value with extra leading 1 dims
        g = g.unsqueeze(0)
    return g


index_put = register("index_put", infer=_index_put_infer, kernel=_index_put_kernel,
                     supports_out=True, save=slice(2, None),
                     vjp=(_index_put_grad_self, _index_put_grad_value))


def narrow(x, dim: int, start: int, length: int):
    """``x`` restricted to ``start:start+length`` along ``dim`` (a view)."""
    spec = (("slice", None, None, None),) * dim + (("slice", start, start + length, None),)
    return apply(getitem, x, spec=spec)


def _gather_infer(a, index, *, dim):
    from .infer import normalize_dim
    d = normalize_dim("gather", dim, a.ndim)
    if index.dtype.category != 1:
        raise TypeError(f"gather: index must be an integer tensor, got dtype {index.dtype}")
    if index.ndim != a.ndim:
        raise ValueError(f"gather: index must have as many dims as input, got index shape "
                         f"{index.shape} and input shape {a.shape}")
    for i, (s, t) in enumerate(zip(index.shape, a.shape)):
        if i != d and s > t and t != -1:
            raise ValueError(f"gather: index shape {index.shape} exceeds input shape {a.shape} "
                             f"in dim {i}")
    return tuple(index.shape), a.dtype, None


def _gather_index(xp, index, dim):
    grids = list(xp.ogrid[tuple(slice(0, s) for s in index.shape)])
    grids[dim] = index
    return tuple(grids)


class IndexOutOfBoundsError(IndexError, RuntimeError):
    """An index tensor holds a position outside its dim (gather, scatter: PyTorch raises
    ``RuntimeError`` there, Python code expects ``IndexError``; this error is both)."""


def check_index_bounds(op: str, index, dim: int, size: int) -> None:
    """Refuse entries of ``index`` outside ``[0, size)`` (negative ones do not wrap around,
    as in PyTorch's gather and scatter), naming the first bad one."""
    if index.size and (int(index.min()) < 0 or int(index.max()) >= size):
        bad = index[(index < 0) | (index >= size)].ravel()[0]
        raise IndexOutOfBoundsError(f"{op}: index {int(bad)} is out of bounds for dimension "
                                    f"{dim} with size {size}")


def _check_index_infer(index, like, *, name, dim):
    return tuple(index.shape), index.dtype, None


def _check_index_kernel(xp, index, like, *, name, dim):
    check_index_bounds(name, index, dim, like.shape[dim])
    return index


# ``index`` itself, once its entries are known to lie in ``[0, like.shape[dim])`` (read when the
# op runs): ops built on getitem, where negative indices wrap, refuse them as PyTorch does.
check_index = register("check_index", infer=_check_index_infer, kernel=_check_index_kernel,
                       view=True)


def _gather_kernel(xp, a, index, *, dim):
    check_index_bounds("gather", index, dim, a.shape[dim])
    return a[_gather_index(xp, index, dim % a.ndim)]


def _gather_grad(g, out, a, index, *, dim):
    if -1 not in a.shape:
        return apply(gather_backward, g, index, dim=dim, shape=tuple(a.shape))
    # a static program knows a's shape only at run time: the backward reads it from a then
    return apply(gather_backward, g, index, runtime_value(a), dim=dim, shape=None)


gather = register("gather", infer=_gather_infer, kernel=_gather_kernel, save=(1,),
                  vjp=(_gather_grad, None))


def _gather_backward_infer(g, index, *like, dim, shape):
    return tuple(like[0].shape if like else shape), g.dtype, None


def _gather_backward_kernel(xp, g, index, *like, dim, shape):
    """Zeros of ``shape`` (or of input ``like``'s shape) with ``g`` added at ``index``."""
    shape = like[0].shape if like else shape
    out = xp.zeros(shape, dtype=g.dtype)
    add_at(xp, out, _gather_index(xp, index, dim % len(shape)), g)
    return out


gather_backward = register(
    "gather_backward", infer=_gather_backward_infer, kernel=_gather_backward_kernel, save=(1,),
    vjp=(lambda g, out, g0, index, *like, dim, shape: apply(gather, g, index, dim=dim), None))

def _scatter_infer(a, index, src, *, dim, reduce=None):
    from .infer import normalize_dim
    op = "scatter_add" if reduce == "add" else "scatter"
    d = normalize_dim(op, dim, a.ndim)
    if index.dtype.category != 1:
        raise TypeError(f"{op}: index must be an integer tensor, got dtype {index.dtype}")
    if index.ndim != a.ndim:
        raise ValueError(f"{op}: index must have as many dims as input, got index shape "
                         f"{index.shape} and input shape {a.shape}")
    if isinstance(src, TensorLike):
        if src.dtype is not a.dtype:
            raise TypeError(f"{op}: src must have the input's dtype {a.dtype}, got {src.dtype}")
        if src.ndim != a.ndim:
            raise ValueError(f"{op}: src must have as many dims as input, got src shape "
                             f"{src.shape} and input shape {a.shape}")
    for i, s in enumerate(index.shape):
        if s == -1:
            continue
        if (i != d and a.shape[i] != -1 and s > a.shape[i]) or (
                isinstance(src, TensorLike) and src.shape[i] != -1 and s > src.shape[i]):
            raise ValueError(f"{op}: index shape {index.shape} exceeds input shape {a.shape} "
                             f"or src shape {getattr(src, 'shape', ())} in dim {i}")
    return tuple(a.shape), a.dtype, None


def _scatter_kernel(xp, a, index, src, *, dim, reduce=None, out=None):
    """``a`` (or ``out``, in place) with ``src`` (its leading ``index.shape`` block, or a
    number) written, or added for ``reduce='add'``, at ``index`` along ``dim``."""
    check_index_bounds("scatter_add" if reduce == "add" else "scatter", index, dim % a.ndim,
                       a.shape[dim])
    if out is None:
        out = a.copy()
    if getattr(src, "ndim", 0):
        src = src[tuple(slice(0, s) for s in index.shape)]
    positions = _gather_index(xp, index, dim % a.ndim)
    if reduce == "add":
        add_at(xp, out, positions, src)
    else:
        out[positions] = src
    return out


def _scatter_grad_self(g, out, a, index, src, *, dim, reduce=None):
    return g if reduce == "add" else apply(scatter, g, index, 0.0, dim=dim)


def _scatter_grad_src(g, out, a, index, src, *, dim, reduce=None):
    if tuple(src.shape) != tuple(index.shape):
        raise ValueError(f"scatter: the gradient with respect to src needs src of the index's "
                         f"shape {tuple(index.shape)}, got {tuple(src.shape)}")
    return apply(gather, g, index, dim=dim)


scatter = register("scatter", infer=_scatter_infer, kernel=_scatter_kernel, supports_out=True,
                   save=(1,), vjp=(_scatter_grad_self, None, _scatter_grad_src))


__all__ = ["getitem", "getitem_backward", "index_put", "gather", "gather_backward",
           "scatter", "check_index", "IndexOutOfBoundsError", "check_index_bounds",
           "parse_index", "index_shape", "build_index", "narrow", "RunTimeSliceBound"]


# ---- ONNX lowering rules (hybridfw.onnx) ----------------------------------------------------
_GRADIENT_ONLY = OnnxNotExportable("a gradient op (backward only); an exported model is "
                                   "inference only")
_INT64_MAX = 2 ** 63 - 1


def _onnx_apply_index(ctx, x, shape, spec, names, metas):
    """Emit ``x[spec]`` as Slice/Gather/Unsqueeze/Compress nodes (adjacent integer index
    tensors together as one GatherND)."""
    items = _expand_spec("getitem", shape, spec, metas)
    group = [i for i, (item, _) in enumerate(items) if item[0] == "tensor"]
    if len(group) > 1 and (group != list(range(group[0], group[0] + len(group))) or
                           any(meta.dtype is bool_ for meta in metas)):
        raise ctx.fail("several index tensors lower to ONNX only when they are integer "
                       "tensors at adjacent positions (x[:, i, j]); index one dim at a time")
    names = iter(names)
    axis, rank = 0, len(shape)
    for position, (item, meta) in enumerate(items):
        kind = item[0]
        if kind == "none":
            x = ctx.node("Unsqueeze", [x, ctx.ints([axis])])
            axis, rank = axis + 1, rank + 1
        elif kind == "int":
            x = ctx.node("Gather", [x, ctx.const(item[1], "int64")], axis=axis)
            rank -= 1
        elif kind == "slice":
            start, stop, step = item[1:]
            if (start, stop, step) != (None, None, None):
                x = ctx.node("Slice", [x, ctx.ints([start or 0]),
                                       ctx.ints([_INT64_MAX if stop is None else stop]),
                                       ctx.ints([axis]), ctx.ints([step or 1])])
            axis += 1
        elif len(group) > 1:
            if position == group[0]:
                indexed = [(next(names), m) for m in metas]
                x, added = _onnx_gather_nd(ctx, x, axis, rank, indexed)
                axis, rank = axis + added, rank + added - len(group)
        elif meta.dtype is bool_:
            if meta.ndim != 1:
                raise ctx.fail(f"a bool mask of {meta.ndim} dims has no ONNX lowering (1-D "
                               "masks only)")
            x = ctx.node("Compress", [x, next(names)], axis=axis)
            axis += 1
        else:
            x = ctx.node("Gather", [x, ctx.cast(next(names), meta.dtype, "int64")], axis=axis)
            axis, rank = axis + meta.ndim, rank + meta.ndim - 1
    return x


def _onnx_gather_nd(ctx, x, axis, rank, indexed):
    """``x[..., i, j, ...]`` with integer index tensors at dims ``axis``, ``axis + 1``, ...:
    those dims moved first, one GatherND on the broadcast indices, the result's index dims moved
    back to ``axis``. Returns the result and the number of index dims."""
    k = len(indexed)
    front = list(range(axis, axis + k)) + list(range(axis)) + list(range(axis + k, rank))
    moved = ctx.node("Transpose", [x], perm=front)
    sizes = ctx.shape_of(moved)
    zero = None
    columns = []
    for d, (name, meta) in enumerate(indexed):
        index = ctx.cast(name, meta.dtype, "int64")
        size = ctx.node("Gather", [sizes, ctx.const(d, "int64")], axis=0)
        wrapped = ctx.node("Where", [ctx.node("Less", [index, ctx.const(0, "int64")]),
                                     ctx.node("Add", [index, size]), index])
        columns.append(wrapped)
        scaled = ctx.node("Mul", [wrapped, ctx.const(0, "int64")])
        zero = scaled if zero is None else ctx.node("Add", [zero, scaled])
    stacked = ctx.node("Concat", [ctx.node("Unsqueeze", [ctx.node("Add", [c, zero]),
                                                         ctx.ints([-1])]) for c in columns],
                       axis=-1)
    gathered = ctx.node("GatherND", [moved, stacked])
    batch = max(meta.ndim for _, meta in indexed)
    back = list(range(batch, batch + axis)) + list(range(batch)) + \
        list(range(batch + axis, batch + rank - k))
    return ctx.node("Transpose", [gathered], perm=back), batch


def _onnx_getitem(ctx, a, *index, spec):
    metas, shape = ctx.metas[1:], ctx.metas[0].shape
    split = split_int_selects(spec, metas)
    if split is None:
        return _onnx_apply_index(ctx, a, shape, spec, index, metas)
    first = _onnx_apply_index(ctx, a, shape, split[0], (), ())
    return _onnx_apply_index(ctx, first, index_shape("getitem", shape, split[0], ()), split[1],
                             index, metas)


def _onnx_index_put(ctx, a, value, *index, spec, accumulate=False):
    import numpy as np
    shape = ctx.metas[0].shape
    if index or -1 in shape:
        raise ctx.fail("index_put (an indexed assignment) lowers to ONNX only with a target "
                       f"of known shape and int/slice indices; got shape {tuple(shape)}"
                       f"{' and index tensors' if index else ''}")
    flat_positions = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    view, idx, _ = indexed_target(flat_positions, spec, ())
    region = np.asarray(view[idx])
    dt = ctx.out.dtype
    values = ctx.node("Expand", [ctx.operand(1, dt), ctx.ints(region.shape)])
    flat = ctx.node("ScatterElements", [ctx.reshape(ctx.operand(0, dt), [-1]),
                                        ctx.ints(region.reshape(-1)), ctx.reshape(values, [-1])],
                    axis=0, reduction="add" if accumulate else None)
    return ctx.reshape(flat, shape)


def _onnx_gather(ctx, a, index, *, dim):
    return ctx.node("GatherElements", [a, ctx.cast(index, ctx.metas[1].dtype, "int64")],
                    axis=dim % ctx.metas[0].ndim)


def _onnx_scatter(ctx, a, index, src, *, dim, reduce=None):
    index_meta = ctx.metas[1]
    if not isinstance(ctx.metas[2], TensorLike):
        if -1 in index_meta.shape:
            raise ctx.fail("scatter with a number as src lowers to ONNX only with an index "
                           f"of known shape; got {tuple(index_meta.shape)}")
        src = ctx.node("Expand", [ctx.operand(2, ctx.out.dtype), ctx.ints(index_meta.shape)])
    elif tuple(ctx.metas[2].shape) != tuple(index_meta.shape):
        raise ctx.fail(f"scatter lowers to ONNX only with src of the index's shape; got src "
                       f"{tuple(ctx.metas[2].shape)} and index {tuple(index_meta.shape)}")
    return ctx.node("ScatterElements", [a, ctx.cast(index, index_meta.dtype, "int64"), src],
                    axis=dim % ctx.metas[0].ndim, reduction="add" if reduce == "add" else None)


onnx_rules(getitem=_onnx_getitem, index_put=_onnx_index_put, gather=_onnx_gather,
           scatter=_onnx_scatter,
           check_index=lambda ctx, index, like, *, name, dim: ctx.node("Identity", [index]),
           getitem_backward=_GRADIENT_ONLY, gather_backward=_GRADIENT_ONLY)
