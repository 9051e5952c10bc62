"""Shape primitives: reshape, permute, broadcast_to (views), concat, to_device.

squeeze/unsqueeze/flatten/view/transpose/stack/split/chunk are compositions of these (see
``composite``), so they need no gradient rules of their own.
"""
from __future__ import annotations

from ..backend import device as as_device
from ..backend import to_device_array
from .infer import broadcast_shapes, normalize_dim, numel
from .lowering_rules import Unsupported, array_rule, view_rule
from .registry import OnnxNotExportable, apply, onnx_rules, register, runtime_value


def resolve_shape(op: str, shape, new_shape) -> tuple:
    """Validate a reshape target and fill in one -1 (PyTorch's rules)."""
    new_shape = tuple(new_shape)
    for s in new_shape:
        if not isinstance(s, int) or isinstance(s, bool) or s < -1:
            raise ValueError(f"{op}: invalid target shape {new_shape} (sizes must be ints >= -1)")
    if new_shape.count(-1) > 1:
        raise ValueError(f"{op}: only one dimension can be inferred (-1) in {new_shape}")
    if -1 in shape:  # unknown input size (static): keep what is known
        return new_shape
    total = numel(shape)
    known = numel(s for s in new_shape if s != -1)
    if -1 in new_shape:
        if known == 0 or total % known:
            raise ValueError(f"{op}: shape {new_shape} is invalid for input of shape "
                             f"{tuple(shape)} ({total} elements)")
        return tuple(total // known if s == -1 else s for s in new_shape)
    if known != total:
        raise ValueError(f"{op}: shape {new_shape} is invalid for input of shape {tuple(shape)} "
                         f"({total} elements vs {known})")
    return new_shape


def _reshape_infer(a, *, shape):
    return resolve_shape("reshape", a.shape, shape), a.dtype, None


def _reshape_grad(g, out, a, *, shape):
    return reshape_like_input(g, a)


def _reshape_lower(in_shape, out_shape, *, shape):
    """Adding or dropping dims of size 1 keeps the others' indices; any other reshape goes
    through the row-major position of the element."""
    if [s for s in in_shape if s != 1] == [s for s in out_shape if s != 1]:
        def mapping(idx):
            kept = iter([i for i, s in zip(idx, out_shape) if s != 1])
            return [("0" if s == 1 else next(kept)) for s in in_shape]
        return mapping

    def linear_mapping(idx):
        position = " + ".join(f"{i} * {stride}" for i, stride in
                              zip(idx, _row_major_strides(out_shape))) or "0"
        return [f"(({position}) // {stride}) % {n}"
                for n, stride in zip(in_shape, _row_major_strides(in_shape))]
    return linear_mapping


def _row_major_strides(shape) -> list:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return strides[::-1]


reshape = register("reshape", infer=_reshape_infer, view=True,
                   kernel=lambda xp, a, *, shape: a.reshape(shape), vjp=(_reshape_grad,),
                   lower=view_rule(_reshape_lower))


# ---- sizes known when the program runs ----------------------------------------------------------
# A static program's dims may be known only at run time (an InputSpec's None). Converted code
# reading such a dim (``x.shape[0]``, ``x.size(0)``) gets a value of the program, and ops given
# it as a size (``x.view(x.size(0), -1)``, ``hf.zeros(b, 3)``) take size *entries*: an int
# (-1: inferred, as in reshape), ``("dim", j, k)``: dim k of the op's input j (the tensor whose
# size it is), or ``("value", j)``: the value of input j (a 0-d int computed from sizes).
def dynamic_sizes(op: str, entries, inputs, run: bool) -> list:
    """The sizes ``entries`` stand for, given the op's ``inputs``: at run time (``run``) all
    known; while building, -1 where the size is only known when the program runs."""
    sizes = []
    for e in entries:
        if isinstance(e, int):
            sizes.append(e)
        elif e[0] == "dim":
            sizes.append(inputs[e[1]].shape[e[2]])
        elif e[0] == "value":
            sizes.append(int(inputs[e[1]]) if run else -1)
        else:
            raise ValueError(f"{op}: invalid size entry {e!r}")
    return sizes


def size_entries(sizes, own=None):
    """``(entries, refs)`` for ``sizes`` holding a static program's values (sizes known when it
    runs, see :func:`dynamic_sizes`), or None when all are ints: each such value becomes the
    dim it reads (``("dim", j, k)``: what converted code's ``x.shape[k]`` gives) or its own
    value (``("value", j)``); ``refs`` are the inputs those entries index (after ``own``, the
    op's input 0, when given)."""
    if not any(hasattr(s, "dim_source") for s in sizes):
        return None
    entries, refs = [], []
    offset = 0 if own is None else 1
    own_name = getattr(own, "name", None)  # (an eager tensor, a parameter, has none)

    def index_of(t):
        if own_name is not None and t.name == own_name:
            return 0
        for j, r in enumerate(refs):
            if r.name == t.name:
                return j + offset
        refs.append(t)
        return len(refs) - 1 + offset

    for s in sizes:
        if not hasattr(s, "dim_source"):
            entries.append(int(s))
            continue
        source = s.dim_source()
        if source is not None and own is not None and source[0].name != own_name:
            # another tensor's dim that is provably one of own's (batch = x.size(0) ...
            # h.view(batch, -1) with h computed from x batch-wise): read as own's
            same = [k for k, d in enumerate(own.shape) if d == -1 and
                    own.same_dim(k, source[0], source[1])]
            if same:
                source = (own, same[0])
        if source is not None:
            entries.append(("dim", index_of(source[0]), source[1]))
        elif s.shape or s.dtype.category != 1:  # (1: integer)
            raise TypeError(f"size: expected ints or one-element integer tensors, got a tensor "
                            f"of shape {tuple(s.shape)} and dtype {s.dtype}")
        else:
            entries.append(("value", index_of(s)))
    return tuple(entries), refs


def _reshape_dynamic_infer(a, *refs, shape):
    """The target sizes, the one -1 solved where the sizes allow: every known size, or the
    input's unknown dims each passed on by a ``("dim", 0, k)`` entry (``x.view(x.size(0), -1)``
    on an input of shape (-1, 1, 28, 28) gives (-1, 784))."""
    return tuple(_reshape_sizes(a, refs, shape)), a.dtype, None


def _reshape_sizes(a, refs, shape) -> list:
    sizes = dynamic_sizes("reshape", shape, (a, *refs), run=False)
    literal = [i for i, e in enumerate(shape) if e == -1]
    if len(literal) > 1:
        raise ValueError(f"reshape: only one dimension can be inferred (-1) in {shape}")
    if not literal:
        if -1 not in sizes and -1 not in a.shape and numel(sizes) != numel(a.shape):
            raise ValueError(f"reshape: shape {tuple(sizes)} is invalid for input of shape "
                             f"{tuple(a.shape)} ({numel(a.shape)} elements)")
        return sizes
    i = literal[0]
    passed = [e[2] for k, e in enumerate(shape) if k != i and not isinstance(e, int) and
              e[0] == "dim" and e[1] == 0]   # the input's own dims, passed on as they are
    unknown = [k for k, s in enumerate(a.shape) if s == -1]
    rest = [s for k, (s, e) in enumerate(zip(sizes, shape)) if k != i and
            (isinstance(e, int) or e[0] != "dim" or e[1] != 0 or a.shape[e[2]] != -1)]
    if -1 in rest or not set(unknown) <= set(passed):
        return sizes  # (known when the program runs)
    cancel = set(k for k in passed if a.shape[k] == -1)
    total = numel(s for k, s in enumerate(a.shape) if k not in cancel)
    known = numel(rest)
    if known == 0 or total % known:
        raise ValueError(f"reshape: shape {tuple(sizes)} is invalid for input of shape "
                         f"{tuple(a.shape)}")
    sizes[i] = total // known
    return sizes


def static_reshape_shape(a, entries, refs):
    """The shape of an equivalent plain ``reshape`` of ``a`` (its one -1 computed when the
    program runs), or None when the sizes need ``reshape_dynamic``: when ``a`` has one unknown
    dim and the target passes it on as it is (``x.view(x.size(0), -1)``,
    ``q.reshape(*q.shape[:2], heads, head_dim)``), the other sizes being known (a plain reshape
    exports to ONNX and compiles like any other). Sizes no batch size could match are refused
    as eager refuses them."""
    sizes = list(_reshape_dynamic_infer(a, *refs, shape=entries)[0])
    unknown_a = [k for k, s in enumerate(a.shape) if s == -1]
    unknown = [i for i, s in enumerate(sizes) if s == -1]
    if not unknown:
        return tuple(sizes)
    e = entries[unknown[0]]
    if len(unknown_a) != 1 or len(unknown) != 1 or isinstance(e, int) or \
            tuple(e[:2]) != ("dim", 0) or e[2] != unknown_a[0]:
        return None
    if -1 not in entries:  # every other size given: the known ones must match
        known_a = numel(s for s in a.shape if s != -1)
        known = numel(s for s in sizes if s != -1)
        if known_a != known:
            raise ValueError(f"reshape: shape {tuple(sizes)} is invalid for input of shape "
                             f"{tuple(a.shape)} (the known sizes hold {known} and {known_a} "
                             "elements per unknown one)")
    return tuple(sizes)


def _reshape_dynamic_kernel(xp, a, *refs, shape):
    return a.reshape(tuple(dynamic_sizes("reshape", shape, (a,) + refs, run=True)))


def own_dims(x, dims) -> list:
    """x's sizes at ``dims``, those known only when a static program runs as ``("dim", 0,
    k)`` entries (see :func:`dynamic_sizes`): kept as they are by :func:`reshape_keeping`."""
    return [("dim", 0, k) if x.shape[k] == -1 else x.shape[k] for k in dims]


def reshape_keeping(x, entries):
    """Reshape to ``entries`` (ints, one maybe -1, and x's own dims kept): a plain reshape
    where its one -1 says it all, else one reading x's dims when the program runs (several
    unknown dims kept: a transformer over a batch and a length both unknown)."""
    if all(isinstance(e, int) for e in entries):
        return apply(reshape, x, shape=tuple(entries))
    entries = tuple(entries)
    plain = static_reshape_shape(x, entries, [])
    if plain is not None:
        return apply(reshape, x, shape=plain)
    return apply(reshape_dynamic, x, shape=entries)


def insert_unit_dims(x, dims) -> object:
    """``x`` with dims of size 1 at the positions ``dims`` of the result (normalized,
    ascending): unsqueeze, and a reduction's gradient given its dims back."""
    entries, k = [], 0
    for i in range(x.ndim + len(dims)):
        if i in dims:
            entries.append(1)
        else:
            entries.extend(own_dims(x, (k,)))
            k += 1
    return reshape_keeping(x, entries)


def reshape_like_input(g, a):
    """``g`` reshaped to the shape of ``a`` (a gradient rule's input, maybe a
    :class:`TensorMeta` whose dims are partly known only at run time)."""
    if list(a.shape).count(-1) <= 1:
        return apply(reshape, g, shape=tuple(a.shape))
    return apply(reshape_dynamic, g, runtime_value(a),
                 shape=tuple(("dim", 1, k) if s == -1 else s for k, s in enumerate(a.shape)))


reshape_dynamic = register(
    "reshape_dynamic", infer=_reshape_dynamic_infer, kernel=_reshape_dynamic_kernel, view=True,
    vjp=(lambda g, out, a, *refs, shape: reshape_like_input(g, a),),
    doc="reshape to sizes partly known only when the program runs (see dynamic_sizes)")


def _permute_infer(a, *, dims):
    dims = tuple(dims)
    norm = tuple(normalize_dim("permute", d, a.ndim) for d in dims)
    if sorted(norm) != list(range(a.ndim)):
        raise ValueError(f"permute: dims {dims} are not a permutation of the {a.ndim} dims of "
                         f"a tensor of shape {a.shape}")
    return tuple(a.shape[d] for d in norm), a.dtype, None


def _inverse_permutation(dims):
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d % len(dims)] = i
    return tuple(inv)


def _permute_lower(in_shape, out_shape, *, dims):
    def mapping(idx):
        source = [None] * len(idx)
        for k, d in enumerate(dims):
            source[d % len(dims)] = idx[k]
        return source
    # a matrix transpose: a matrix product reads the operand transposed instead (no copy)
    mapping.transposes = len(dims) == 2 and dims[0] % 2 == 1
    return mapping


permute = register("permute", infer=_permute_infer, view=True,
                   lower=view_rule(_permute_lower),
                   kernel=lambda xp, a, *, dims: xp.transpose(a, dims),
                   vjp=(lambda g, out, a, *, dims:
                        apply(permute, g, dims=_inverse_permutation(dims)),))


def broadcast_target(op: str, shape, target) -> tuple:
    """The shape ``shape`` takes broadcast to ``target`` (-1 there keeps the size, as
    PyTorch's expand), with an error naming ``op`` (``expand``, ``broadcast_to``) where it
    cannot."""
    shape, target = tuple(shape), tuple(target)
    if len(target) < len(shape):
        raise ValueError(f"{op}: cannot broadcast shape {shape} to fewer dims {target}")
    lead = len(target) - len(shape)
    out = list(target[:lead])
    for s, t in zip(shape, target[lead:]):
        if t == -1:
            out.append(s)
        elif s == t or s == 1 or s == -1:
            out.append(t)
        else:
            raise ValueError(f"{op}: cannot broadcast shape {shape} to {target}")
    return tuple(out)


def _broadcast_to_infer(a, *, shape):
    return broadcast_target("broadcast_to", a.shape, shape), a.dtype, None


def sum_to(g, shape):
    """Sum a broadcast gradient down to ``shape`` (the one generic broadcast reduction)."""
    from .reduction import sum_  # reduction imports this module; call-time import breaks the cycle
    shape = tuple(shape)
    gshape = g.shape
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    if lead > 0:  # the new leading dims go (not kept as 1s for a reshape: a static program's
        # target may have several dims known only at run time, which no reshape can infer)
        g = apply(sum_, g, dim=tuple(range(lead)), keepdim=False)
    dims = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    if dims:
        g = apply(sum_, g, dim=dims, keepdim=True)
    if g.shape != shape:
        g = apply(reshape, g, shape=shape)
    return g


def _broadcast_to_lower(in_shape, out_shape, *, shape):
    """Dims of size 1 (and the new leading ones) read index 0; the others keep their index."""
    offset = len(out_shape) - len(in_shape)

    def mapping(idx):
        return ["0" if s == 1 else idx[offset + k] for k, s in enumerate(in_shape)]
    return mapping


broadcast_to = register("broadcast_to", infer=_broadcast_to_infer, view=True,
                        lower=view_rule(_broadcast_to_lower),
                        kernel=lambda xp, a, *, shape:
                        xp.broadcast_to(a, _broadcast_to_infer(a, shape=shape)[0]),
                        vjp=(lambda g, out, a, *, shape: sum_to(g, a.shape),))


def _sum_to_like_infer(g, like):
    return tuple(like.shape), g.dtype, None


def _sum_to_like_kernel(xp, g, like):
    shape = like.shape
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and g.shape[lead + i] != 1)
    return (g.sum(axis=axes, keepdims=True) if axes else g).reshape(shape)


def _sum_to_like_grad(gg, out, g, like):
    raise RuntimeError("sum_to_like: double backward through a gradient reduced over dims only "
                       "known at run time is not supported")


# sum_to at run time: a static program's gradient for an input whose dims are only known as
# -1 (and may turn out to be broadcast, size 1) is reduced to that input's actual shape.
sum_to_like = register("sum_to_like", infer=_sum_to_like_infer, kernel=_sum_to_like_kernel,
                       view=True, vjp=(_sum_to_like_grad, None))


def _concat_infer(*xs, dim):
    if not xs:
        raise ValueError("cat: expected a non-empty sequence of tensors")
    first = xs[0]
    d = normalize_dim("cat", dim, first.ndim)
    size = 0
    dt = first.dtype
    from ..dtypes import promote_types
    for x in xs:
        if x.ndim != first.ndim:
            raise ValueError(f"cat: tensors must have the same number of dims, got shapes "
                             f"{[tuple(t.shape) for t in xs]}")
        for i, (s, t) in enumerate(zip(x.shape, first.shape)):
            if i != d and s != t and s != -1 and t != -1:
                raise ValueError(f"cat: sizes must match except in dim {d}, got shapes "
                                 f"{[tuple(t.shape) for t in xs]}")
        size = -1 if (size == -1 or x.shape[d] == -1) else size + x.shape[d]
        dt = promote_types(dt, x.dtype)
    # the other dims: what the inputs holding elements along dim say (an input empty along it,
    # such as a list's buffer before its first append in a static loop, holds nothing that
    # must match: see _concat_kernel); -1 where they know only at run time
    shape = list(first.shape)
    shape[d] = size
    filled = [x for x in xs if x.shape[d] != 0] or xs
    for i in range(len(shape)):
        if i != d:
            known = [x.shape[i] for x in filled if x.shape[i] != -1]
            shape[i] = known[0] if known else -1
    return tuple(shape), dt, dt


def _concat_kernel(xp, *xs, dim, out=None):
    if len(xs) > 1 and any(x.shape[dim] == 0 for x in xs):
        # (a static program's empty buffer, made before the sizes of the items were known)
        xs = [x for x in xs if x.shape[dim] != 0] or xs[:1]
        if len(xs) == 1 and out is None:
            return xs[0].copy()
    return xp.concatenate(xs, axis=dim, out=out)


def _concat_grad(g, out, *xs, dim, input_index):
    from .indexing import narrow
    d = dim % xs[0].ndim
    sizes = tuple(x.shape[d] for x in xs)
    if -1 not in sizes[:input_index + 1]:
        return narrow(g, d, sum(sizes[:input_index]), sizes[input_index])
    # a static program knows some sizes only at run time: one is what g has beyond the others;
    # more are read from those inputs' run-time shapes
    unknown = [i for i, s in enumerate(sizes) if s == -1]
    sources = [] if len(unknown) == 1 else [runtime_value(xs[i]) for i in unknown]
    return apply(concat_backward, g, *sources, dim=d, index=input_index, sizes=sizes)


def _concat_lower(ctx, *xs, dim):
    """One loop per piece writing its part of the result (an elementwise piece computed in
    that loop)."""
    d = dim % len(ctx.out_shape)
    out = ctx.temp("cat")
    ctx.line(f"{out} = np.empty({ctx.out_shape!r}, {ctx.out_dtype})")
    offset = 0
    for k, shape in enumerate(ctx.shapes):
        if len(shape) != len(ctx.out_shape):
            raise Unsupported("concat of a 0-d value")
        with ctx.loop(shape) as idx:
            target = [f"{i} + {offset}" if j == d and offset else i for j, i in enumerate(idx)]
            ctx.line(f"{out}[{', '.join(target)}] = {ctx.out_dtype}({ctx.element(k, shape, idx)})")
        offset += shape[d]
    return out


concat = register("concat", infer=_concat_infer, variadic=True,
                  lower=array_rule(_concat_lower, inlines=True),
                  kernel=_concat_kernel,
                  supports_out=True, vjp=(_concat_grad,))


def _concat_backward_infer(g, *sources, dim, index, sizes):
    unknown = sum(1 for s in sizes if s == -1)
    if len(sources) not in (0, unknown) or (not sources and unknown > 1):
        raise ValueError(f"concat_backward: sizes {tuple(sizes)} need the inputs of every "
                         f"unknown (-1) size, got {len(sources)}")
    return g.shape[:dim] + (sizes[index],) + g.shape[dim + 1:], g.dtype, None


def _concat_backward_kernel(xp, g, *sources, dim, index, sizes):
    sizes = list(sizes)
    unknown = [i for i, s in enumerate(sizes) if s == -1]
    for i, source in zip(unknown, sources):
        sizes[i] = source.shape[dim]
    if unknown and not sources:
        sizes[unknown[0]] = g.shape[dim] - sum(s for s in sizes if s != -1)
    start = sum(sizes[:index])
    return g[(slice(None),) * dim + (slice(start, start + sizes[index]),)]


def _concat_backward_grad(gg, out, g, *sources, dim, index, sizes, input_index):
    if input_index == 0:
        raise RuntimeError("cat: double backward through the gradient of a concatenation whose "
                           "sizes are known only at run time is not supported")
    return None


# The piece of cat's gradient g that belongs to input ``index`` when a static program knows some
# sizes along ``dim`` (``sizes``, -1 where unknown) only at run time: one unknown size is g's
# size beyond the others; several are read from ``sources``, the inputs of unknown size.
concat_backward = register("concat_backward", infer=_concat_backward_infer,
                           kernel=_concat_backward_kernel, view=True, variadic=True,
                           vjp=(_concat_backward_grad,))


def _to_device_infer(a, *, device, source):
    as_device(device)
    return a.shape, a.dtype, None


def _to_device_kernel(xp, a, *, device, source):
    out = to_device_array(a, as_device(device))
    return out.copy() if out is a else out


to_device = register("to_device", infer=_to_device_infer, kernel=_to_device_kernel,
                     vjp=(lambda g, out, a, *, device, source:
                          apply(to_device, g, device=source, source=device),))

def _detach_lower(in_shape, out_shape):
    return list  # each index reads the same index of the input


# a static program's Tensor.detach (eager detach shares the data, no op): the value itself, with
# no gradient rule, so a program's gradients stop here
detach = register("detach", infer=lambda a: (a.shape, a.dtype, None), view=True,
                  kernel=lambda xp, a: a.view(), lower=view_rule(_detach_lower))


def _updated_under_no_grad_infer(old, new):
    if tuple(old.shape) != tuple(new.shape) or old.dtype is not new.dtype:
        raise ValueError(f"updated_under_no_grad: the new value ({tuple(new.shape)}, "
                         f"{new.dtype}) must have the old one's shape and dtype "
                         f"({tuple(old.shape)}, {old.dtype})")
    return new.shape, new.dtype, None


# a static program's value of a tensor that an in-place op updated under hf.no_grad(): the new
# value, through which gradients flow to the old one unchanged (as eager autograd, which records
# nothing there, sends a later use's gradient to the tensor itself: a leaf stays a leaf)
updated_under_no_grad = register(
    "updated_under_no_grad", infer=_updated_under_no_grad_infer,
    kernel=lambda xp, old, new: new.copy(), vjp=(lambda g, out, old, new: g, None),
    doc="The new value of a tensor updated in place under no_grad; gradients pass to the old.")

__all__ = ["reshape", "reshape_dynamic", "permute", "broadcast_to", "concat", "concat_backward",
           "to_device", "detach", "updated_under_no_grad", "sum_to", "sum_to_like",
           "resolve_shape", "broadcast_shapes", "dynamic_sizes", "reshape_like_input", "size_entries", "static_reshape_shape"]


# ---- ONNX lowering rules (hybridfw.onnx) ----------------------------------------------------
def _onnx_reshape(ctx, a, *, shape):
    source, target = ctx.metas[0].shape, list(shape)
    if target.count(-1) == 1 and 0 not in target:
        i = target.index(-1)
        rest = [s for j, s in enumerate(source) if j != i]
        if i < len(source) and source[i] == -1 and -1 not in rest and \
                numel(rest) == numel(s for s in target if s != -1):
            # the inferred dim is the input's own unknown dim: copy it (ONNX's 0), which keeps a
            # symbolic dim symbolic for shape inference (flatten of a batch)
            target[i] = 0
            return ctx.node("Reshape", [a, ctx.ints(target)])
    return ctx.reshape(a, target)


def _onnx_permute(ctx, a, *, dims):
    return ctx.node("Transpose", [a], perm=[d % ctx.metas[0].ndim for d in dims])


def _onnx_broadcast_to(ctx, a, *, shape):
    # Expand broadcasts both ways: a 1 keeps the input's size (PyTorch's -1, unknown dims)
    return ctx.node("Expand", [a, ctx.ints(1 if s == -1 else s for s in ctx.out.shape)])


def _onnx_concat(ctx, *xs, dim):
    dt = ctx.out.dtype
    return ctx.node("Concat", [ctx.operand(i, dt) for i in range(len(xs))], axis=dim)


_BACKWARD = OnnxNotExportable("a gradient op (backward only); an exported model is inference "
                              "only")

def onnx_sizes(ctx, entries, inputs) -> str:
    """A 1-D int64 tensor of the sizes ``entries`` stand for (see :func:`dynamic_sizes`):
    constants, dims read with Shape, values cast and flattened."""
    pieces = []
    for e in entries:
        if isinstance(e, int):
            pieces.append(ctx.ints([e]))
        elif e[0] == "dim":
            pieces.append(ctx.node("Gather", [ctx.shape_of(inputs[e[1]]), ctx.ints([e[2]])],
                                   axis=0))
        else:
            value = ctx.cast(inputs[e[1]], ctx.metas[e[1]].dtype, "int64")
            pieces.append(ctx.node("Reshape", [value, ctx.ints([1])]))
    return pieces[0] if len(pieces) == 1 else ctx.node("Concat", pieces, axis=0)


def _onnx_reshape_dynamic(ctx, a, *refs, shape):
    return ctx.node("Reshape", [a, onnx_sizes(ctx, shape, (a,) + refs)])


def _onnx_updated_under_no_grad(ctx, old, new):
    return ctx.node("Identity", [new])


onnx_rules(reshape=_onnx_reshape, reshape_dynamic=_onnx_reshape_dynamic, permute=_onnx_permute,
           broadcast_to=_onnx_broadcast_to, concat=_onnx_concat, to_device="Identity",
           detach="Identity", updated_under_no_grad=_onnx_updated_under_no_grad,
           sum_to_like=_BACKWARD, concat_backward=_BACKWARD)
