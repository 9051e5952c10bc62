"""The arena planner: every intermediate of a program at a byte offset inside one buffer.

:func:`plan_arena` resolves the shapes of a program's global block for concrete feed shapes
(re-running each op's registry inference), takes the values' lifetimes from
:mod:`~hybridfw.static.liveness`, and assigns offsets: visit buffers by decreasing size (ties:
earlier first), put each in the smallest gap, among the already placed buffers whose lifetimes
overlap it, that is large enough (best fit), else above the highest of them; the same again
visiting them by decreasing size times lifetime, keeping the smaller arena. All sizes and offsets
are multiples of ``alignment`` (64 bytes by default).

What lives where:

- *Arena*: the output of every registry op of the global block whose size is known, that is not
  a fetch target, that is written once, and that is not a view.
- *Views* (``reshape``, ``permute``, basic indexing, ...) get no memory of their own: they keep
  the value they view alive (its lifetime is extended to theirs).
- *Heap* (:attr:`MemoryPlan.heap`, with the reason): feeds and parameters (not intermediates);
  fetch targets (they get fresh memory, so a result never aliases the arena after the run);
  values whose size is only known at run time (data-dependent shapes, e.g. boolean-mask
  indexing, and everything computed from them); outputs of control-flow operators and values
  their sub-blocks assign (their bodies run on their own); values a control-flow operator reads
  (a body may keep them beyond the operator, as a while loop's stack of saved values does);
  names assigned more than once; and any name the caller passes in ``heap``.
- *In place*: ``program.inplace = {output: input}`` (set by the in-place pass) lets ``output``
  take over ``input``'s memory when the operator producing ``output`` is the last use of
  ``input`` (views of it included), both have the same shape and dtype, and no other input of
  that operator views the same memory.

Figures (all in 64-byte aligned sizes): ``arena_bytes``; ``lower_bound_bytes``, the most bytes
simultaneously live at any operator (no placement can do better for this operator order); and
``naive_bytes``, the sum of every planned intermediate (an arena without any reuse).

Example::

    >>> import hybridfw as hf
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     x = hf.static.data("x", [None, 256])
    ...     y = ((x * 2.0 + 1.0).relu() * 3.0).sum()
    >>> plan = plan_arena(prog, {"x": (8, 256)}, [y.name])
    >>> plan.arena_bytes, plan.lower_bound_bytes, plan.naive_bytes
    (16384, 16384, 32768)
"""
from __future__ import annotations

import numpy as np

from ..ops.registry import TensorMeta, all_ops
from .codegen import exact_key
from .ir import Program, format_origin
from .liveness import Liveness, analyze_block

__all__ = ["DEFAULT_ALIGNMENT", "MemoryPlan", "plan_arena", "resolve_shapes"]

DEFAULT_ALIGNMENT = 64


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def resolve_shapes(program: Program, feed_shapes: dict) -> tuple:
    """Concrete metas of the global block's values for the given feed shapes.

    Returns ``(metas, op_infos)``: ``metas`` maps every value of the global block to a
    :class:`TensorMeta` (``-1`` dims remain where the size is data-dependent); ``op_infos`` holds,
    per operator, the registry inference result ``(shape, dtype, compute_dtype)``, or None for an
    operator that is not a registry op (control flow), whose outputs keep their declared metas.
    """
    block = program.global_block()
    unknown = [n for n in feed_shapes if n not in program.feeds]
    if unknown:
        raise ValueError(f"plan_arena: {unknown} are not inputs of the program "
                         f"(inputs: {program.feeds})")
    metas = {}
    for name, var in block.vars.items():
        metas[name] = TensorMeta(var.shape, var.dtype)
    for name, shape in feed_shapes.items():
        var = block.vars[name]
        shape = tuple(int(s) for s in shape)
        if len(shape) != len(var.shape) or any(d != -1 and d != s
                                               for d, s in zip(var.shape, shape)):
            raise ValueError(f"plan_arena: input {name!r} is declared with shape {var.shape}, "
                             f"got {shape}")
        metas[name] = TensorMeta(shape, var.dtype)
    registry = all_ops()
    op_infos = []
    inferred: dict = {}  # what decides an inference -> its result (unrolled loops repeat them)
    for i, op in enumerate(block.ops):
        opdef = registry.get(op.type)
        if opdef is None or op.blocks:
            op_infos.append(None)
            continue
        args = [metas[a] if isinstance(a, str) else a for a in op.inputs]
        key = _inference_key(op, args)
        info = inferred.get(key) if key is not None else None
        if info is None:
            try:
                info = opdef.infer(*args, **op.attrs)
            except (ValueError, TypeError, IndexError) as exc:
                shapes = {a: metas[a].shape for a in op.input_names()}
                raise type(exc)(f"operator #{i} ({', '.join(op.outputs)} = {op.type}) fails "
                                f"for input shapes {shapes}: {exc}{format_origin(op.origin)}"
                                ) from exc
            if key is not None:
                inferred[key] = info
        op_infos.append(info)
        metas[op.outputs[0]] = TensorMeta(tuple(info[0]), info[1])
    return metas, op_infos


def _inference_key(op, args):
    """What an operator's inference depends on (its type, its tensors' shapes and dtypes, its
    numbers and attributes), or None when a number or attribute has no exact key."""
    parts = [op.type]
    for arg in args:
        part = (arg.shape, arg.dtype.name) if arg.__class__ is TensorMeta else exact_key(arg)
        if part is None:
            return None
        parts.append(part)
    for name, value in op.attrs.items():
        part = exact_key(value)
        if part is None:
            return None
        parts.append((name, part))
    return tuple(parts)


class _Buffer:
    """A region of the arena: one planned value, or an in-place chain of them."""

    __slots__ = ("end", "name", "offset", "size", "start")

    def __init__(self, name, size, start, end):
        self.name = name
        self.size = size
        self.start = start
        self.end = end
        self.offset = 0


class MemoryPlan:
    """Where each value of a program lives for one set of feed shapes (see the module docstring).

    Attributes:
        offsets: planned value -> byte offset in the arena (values sharing memory in place share
            an offset).
        buffer_of: planned value -> name of its buffer (the first value of its in-place chain).
        buffer_end: buffer name -> index of the operator after which its memory is free.
        aliases: view value -> the value whose memory it views.
        heap: value -> why it is not in the arena.
        inplace: the ``output -> input`` pairs that do share memory.
        metas: value -> resolved :class:`TensorMeta`; op_infos: see :func:`resolve_shapes`.
        liveness: the :class:`Liveness` of the global block used for the plan.
        arena_bytes / lower_bound_bytes / naive_bytes: the figures; alignment: in bytes.
        backward: for the plan of a training call's forward (``StaticFunction.memory_plan``),
            the backward program's plan; else None.
    """

    backward = None

    def __init__(self, *, offsets, buffer_of, buffer_end, aliases, heap, inplace, metas,
                 op_infos, liveness, arena_bytes, lower_bound_bytes, naive_bytes, alignment):
        self.offsets = offsets
        self.buffer_of = buffer_of
        self.buffer_end = buffer_end
        self.aliases = aliases
        self.heap = heap
        self.inplace = inplace
        self.metas = metas
        self.op_infos = op_infos
        self.liveness: Liveness = liveness
        self.arena_bytes = arena_bytes
        self.lower_bound_bytes = lower_bound_bytes
        self.naive_bytes = naive_bytes
        self.alignment = alignment

    def nbytes(self, name: str) -> int:
        """Exact (unaligned) bytes of a value whose size is known."""
        meta = self.metas[name]
        return _numel(meta.shape) * meta.dtype.itemsize

    def root(self, name: str) -> str:
        """The value whose memory ``name`` uses (itself unless it is a view)."""
        return self.aliases.get(name, name)

    def summary(self) -> str:
        """One line of figures: arena, lower bound, naive, and the ratios between them."""
        lb, arena, naive = self.lower_bound_bytes, self.arena_bytes, self.naive_bytes
        ratio = arena / lb if lb else 1.0
        gain = naive / arena if arena else 1.0
        planned = len(self.offsets)
        return (f"arena {arena} B ({ratio:.3f}x the lower bound {lb} B); naive {naive} B "
                f"({gain:.1f}x the arena); {planned} value{'' if planned == 1 else 's'} "
                f"planned, {len(self.heap)} on the heap")

    def __repr__(self) -> str:
        return f"MemoryPlan({self.summary()})"


def _align(nbytes: int, alignment: int) -> int:
    return -(-nbytes // alignment) * alignment


def _heap_reasons(program, metas, op_infos, live, fetch_names, forced) -> tuple:
    """(heap reasons, view aliases) for the values of the global block."""
    block = program.global_block()
    registry = all_ops()
    heap = {name: "input" for name in program.feeds}
    heap.update((name, "parameter") for name in program.params)
    aliases = {}
    for i, op in enumerate(block.ops):
        if op_infos[i] is not None and registry[op.type].view and isinstance(op.inputs[0], str):
            source = op.inputs[0]
            aliases[op.outputs[0]] = aliases.get(source, source)
    for i, op in enumerate(block.ops):
        if op_infos[i] is None:
            for name in live.writes[i]:
                heap[name] = "control-flow output"
            # a body may keep what it reads beyond the operator (a while loop's stack of saved
            # values), so no arena region it could see is ever reused under it
            for name in live.reads[i]:
                heap.setdefault(aliases.get(name, name), "read by a control-flow operator")
            continue
        out = op.outputs[0]
        if out in aliases or out in heap:
            continue
        if -1 in metas[out].shape:
            heap[out] = "size known only at run time"
        elif live.assignments.get(out, 0) > 1:
            heap[out] = "assigned more than once"
    for name in fetch_names:
        if name not in aliases:
            heap.setdefault(name, "fetch target")
    for name in forced:
        if name not in aliases:
            heap.setdefault(name, "kept on the heap by the caller")
    return heap, aliases


def _place(buffers) -> int:
    """Greedy best fit in two visiting orders; sets each buffer's offset from the order giving
    the smaller arena (the first on ties), returns that arena's size.

    The orders: by decreasing size (ties: earlier first), and by decreasing size times lifetime
    (the values that block the most memory for longest first); neither is best on every
    program (a CNN's training step: 11 % above the lower bound by size alone, exact by the
    other; a deep MLP's: the reverse). See :func:`_place_in_order`.
    """
    buffers = [b for b in buffers if b.size]
    best = None
    for key in (lambda b: (-b.size, b.start, b.end),
                lambda b: (-b.size * (b.end - b.start + 1), -b.size, b.start, b.end)):
        order = sorted(buffers, key=key)
        arena, offsets = _place_in_order(order)
        if best is None or arena < best[0]:
            best = (arena, order, offsets)
    if best is None:
        return 0
    arena, order, offsets = best
    for buf, offset in zip(order, offsets.tolist()):
        buf.offset = offset
    return arena


def _place_in_order(order) -> tuple:
    """Best fit visiting ``order``: among the placed buffers whose lifetimes overlap, sorted by
    offset, the smallest gap that fits (the lowest on ties), else the top of them. Returns
    ``(arena size, offsets in order)``. The scan is vectorized: training graphs keep hundreds
    of activations live at once, and a Python loop over every overlapping pair dominates
    planning time."""
    count = len(order)
    starts = np.fromiter([b.start for b in order], np.int64, count)
    ends = np.fromiter([b.end for b in order], np.int64, count)
    lows, highs = np.empty(count, np.int64), np.empty(count, np.int64)
    arena = 0
    for placed, buf in enumerate(order):
        size = buf.size
        busy = ((starts[:placed] <= buf.end) & (ends[:placed] >= buf.start)).nonzero()[0]
        offset = 0
        if busy.size:
            by_offset = lows[busy].argsort(kind="stable")
            lo = lows[busy[by_offset]]
            top = np.maximum.accumulate(highs[busy[by_offset]])
            gaps = lo.copy()           # gap under each busy range: its low minus the highest
            gaps[1:] -= top[:-1]       # end below it (0 under the first)
            fits = (gaps >= size).nonzero()[0]
            if fits.size:
                k = fits[gaps[fits].argmin()]
                offset = int(top[k - 1]) if k else 0
            else:
                offset = int(top[-1])
        lows[placed], highs[placed] = offset, offset + size
        arena = max(arena, offset + size)
    return arena, lows


def _lower_bound(buffers, num_ops) -> int:
    """The most bytes live at any operator."""
    delta = [0] * (num_ops + 2)
    for buf in buffers:
        delta[buf.start] += buf.size
        delta[buf.end + 1] -= buf.size
    best = live = 0
    for d in delta:
        live += d
        best = max(best, live)
    return best


def plan_arena(program: Program, feed_shapes: dict, fetch_names=(), *, heap=(),
               alignment: int = DEFAULT_ALIGNMENT, keep_alive=None,
               shapes=None) -> MemoryPlan:
    """Plan the arena of ``program``'s global block for ``feed_shapes`` (name -> shape).

    ``fetch_names`` are the values the caller will read after the run; ``heap`` names values to
    keep out of the arena whatever their size; ``keep_alive`` maps values to an operator index
    they must stay live until at least (the operands of a product another thread computes, see
    :mod:`~hybridfw.static.streams`); ``shapes``, the ``(metas, op_infos)``
    :func:`resolve_shapes` gave for these feed shapes (resolved here when None). See the module
    docstring for the rules.
    """
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"plan_arena: alignment must be a power of two, got {alignment}")
    fetch_names = [f if isinstance(f, str) else f.name for f in fetch_names]
    block = program.global_block()
    for name in fetch_names:
        if name not in block.vars:
            raise KeyError(f"plan_arena: fetch target {name!r} is not a variable of the "
                           "program's global block")
    metas, op_infos = shapes or resolve_shapes(program, feed_shapes)
    live = analyze_block(block, live_out=fetch_names)
    for name, end in (keep_alive or {}).items():
        if name in live.definition:
            live.last_use[name] = max(live.last_use[name], min(end, live.num_ops))
    heap_reason, aliases = _heap_reasons(program, metas, op_infos, live, fetch_names, heap)

    # a viewed value lives as long as its last view
    ends = {}
    for name, start in live.definition.items():
        root = aliases.get(name, name)
        ends[root] = max(ends.get(root, start), live.last_use[name])

    buffers, buffer_of = {}, {}
    naive = 0
    for i, op in enumerate(block.ops):
        if op_infos[i] is None:
            continue
        name = op.outputs[0]
        if name in heap_reason or name in aliases:
            continue
        size = _align(_numel(metas[name].shape) * metas[name].dtype.itemsize, alignment)
        naive += size
        buffers[name] = _Buffer(name, size, i, ends[name])
        buffer_of[name] = name

    inplace = {}
    requested = (getattr(program, "inplace", None) or {}).items()
    for out, source in sorted(requested, key=lambda item: live.definition.get(item[0], -1)):
        if out not in buffers or source not in buffer_of:
            continue
        i = live.definition[out]
        donor = buffers[buffer_of[source]]
        same = metas[out].shape == metas[source].shape and metas[out].dtype is metas[source].dtype
        inputs = block.ops[i].input_names()
        # another input viewing the same memory would be overwritten while being read
        overlap = any(n != source and buffer_of.get(aliases.get(n, n)) == donor.name
                      for n in inputs)
        if same and not overlap and source in inputs and donor.end == i:
            donor.end = buffers.pop(out).end
            buffer_of[out] = donor.name
            inplace[out] = source

    arena = _place(buffers.values())
    offsets = {name: buffers[buf].offset for name, buf in buffer_of.items()}
    return MemoryPlan(offsets=offsets, buffer_of=buffer_of,
                      buffer_end={b.name: b.end for b in buffers.values()}, aliases=aliases,
                      heap=heap_reason, inplace=inplace, metas=metas, op_infos=op_infos,
                      liveness=live, arena_bytes=arena,
                      lower_bound_bytes=_lower_bound(buffers.values(), live.num_ops),
                      naive_bytes=naive, alignment=alignment)
