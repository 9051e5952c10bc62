"""Regions: runs of lowerable operators of a program's global block, each one compiled function.

An operator is lowerable when its op has a lowering rule that accepts its operands (or it is a
``fused_elementwise`` group of such ops, or a ``while``/``cond`` whose blocks are wholly
lowerable), its dtypes are numba's and its array shapes are known. Consecutive lowerable
operators form a region; a region of one plain operator stays interpreted (a kernel call costs
no more than a compiled call). :func:`plan_regions` returns the regions and, for the report,
every operator left out with the reason.
"""
from __future__ import annotations

from ...ops.registry import TensorMeta, get_op
from .emit import RegionEmitter, Unsupported

__all__ = ["Region", "plan_regions", "region_source"]

_CONTROL = ("while", "while_grad", "cond", "fused_elementwise")

# Outside loops, an array operator (matmul, a reduction) on more elements than this stays an
# executor call, splitting the region: numpy's kernel for it (BLAS, pairwise summation) is as
# fast as numba's and a compiled call adds nothing. Elementwise chains, views and concat compile
# at any size: one vectorized loop with no temporaries beats one numpy pass per op.
MAX_ARRAY_OP_ELEMENTS = 1024

# An operator reading more arrays than this (a gradient summed over 50 unrolled steps, a concat
# of 50 pieces) stays an executor call: LLVM does not vectorize a loop over that many pointers
# (it cannot rule out their overlap at a bearable cost), and compiling it takes seconds.
MAX_OPERANDS = 8


class Region:
    """Operators ``start``..``stop - 1`` of the global block, compiled as function ``name``."""

    __slots__ = ("name", "start", "stop", "inputs", "outputs", "body", "ops", "arg_types",
                 "records", "stack_inputs", "fresh")

    def __init__(self, name, start, stop, ops, inputs, outputs, body, records=(),
                 stack_inputs=None):
        self.name, self.start, self.stop = name, start, stop
        self.ops, self.inputs, self.outputs, self.body = ops, inputs, outputs, body
        # outputs that are a loop's records, returned stacked: (count, item_0, item_1, ...)
        self.records = tuple(records)
        # inputs that are loop stacks a while_grad reads: name -> (saved_index, item forms),
        # passed as (count, the items read...) (see hybridfw.static.loop_stack.stacked_records)
        self.stack_inputs = dict(stack_inputs or {})
        # outputs returned in an array made for them, shared with nothing (a fetch needs no
        # copy): the 0-d results, boxed
        self.fresh = frozenset()

    def describe(self) -> str:
        kinds = ", ".join(dict.fromkeys(op.type for op in self.ops))
        return f"{self.name}: operators {self.start}..{self.stop - 1} ({kinds})"


def _readers(program) -> dict:
    read: dict = {}
    for block in program.blocks:
        for op in block.ops:
            for name in op.input_names():
                read.setdefault(name, []).append((block, op))
    return read


def _meta_lookup(program, metas: dict):
    declared = {}
    for block in program.blocks:
        for name, var in block.vars.items():
            declared.setdefault(name, TensorMeta(tuple(var.shape), var.dtype))

    def meta(name):
        found = metas.get(name) or declared.get(name)
        if found is None:
            raise Unsupported(f"no shape known for {name!r}")
        return found
    return meta


def _emit(meta, readers, block, ops, inputs, outputs) -> RegionEmitter:
    emitter = RegionEmitter(meta, readers, outputs)
    for k, name in enumerate(inputs):
        emitter.bind_input(name, f"p{k}")
    emitter.emit_ops(block, ops)
    emitter.return_line(outputs)
    return emitter


def _boundary(ops, later_reads: set, fetch: set):
    defined, inputs = set(), []
    for op in ops:
        for name in op.input_names():
            if name not in defined and name not in inputs:
                inputs.append(name)
        defined.update(op.outputs)
    outputs = [n for op in ops for n in op.outputs if n in later_reads or n in fetch]
    return inputs, outputs


def _check(meta, readers, block, op):
    """None when ``op`` lowers on its own, else the reason."""
    if op.type not in ("while", "while_grad", "cond"):
        operands = len(set(op.input_names()))
        if operands > MAX_OPERANDS:
            return (f"{op.type} reads {operands} arrays (> {MAX_OPERANDS}): a compiled loop "
                    "over that many is not vectorized and takes seconds to compile")
    rule = _rule(op)
    if rule is not None and not rule.elementwise and not getattr(rule, "view", False) and \
            not getattr(rule, "inlines", False):
        try:
            largest = max((_numel(meta(n).shape) for n in list(op.input_names()) +
                           list(op.outputs)), default=0)
        except Unsupported as exc:
            return str(exc)
        if largest > MAX_ARRAY_OP_ELEMENTS:
            return (f"{op.type} on arrays of up to {largest} elements (> "
                    f"{MAX_ARRAY_OP_ELEMENTS}): numpy's kernel is as fast")
    inputs, _ = _boundary([op], set(), set())
    try:
        _emit(meta, readers, block, [op], inputs, list(op.outputs))
    except Unsupported as exc:
        return str(exc)
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def plan_regions(program, metas: dict, fetch_names, min_ops: int = 2):
    """``(regions, left_out)``: the compiled regions of the global block, and ``(index, op,
    reason)`` for every operator that stays interpreted."""
    block = program.global_block()
    ops = block.ops
    readers = _readers(program)
    meta = _meta_lookup(program, metas)
    reasons = [_check(meta, readers, block, op) for op in ops]
    runs, start = [], None
    for i, reason in enumerate(reasons + ["end"]):
        if reason is None and start is None:
            start = i
        elif reason is not None and start is not None:
            runs.append((start, i))
            start = None
    regions, left_out = [], []
    for i, reason in enumerate(reasons):
        if reason is not None:
            left_out.append((i, ops[i], reason))
    fetch = set(fetch_names)
    for start, stop in runs:
        while stop > start:
            if _is_view(ops[stop - 1]):
                reason = ("a view at the end of a region (the region would return a copy; the "
                          "executor's view copies nothing)")
            elif ops[stop - 1].type == "concat" and \
                    _reads_outside(ops[stop - 1], ops[start:stop - 1]):
                reason = ("a concat at the end of a region that copies values made before it "
                          "(numpy's concat copies as fast; compiling it would only make one "
                          "more distinct region to compile)")
            else:
                break
            stop -= 1
            left_out.append((stop, ops[stop], reason))
        run_ops = ops[start:stop]
        if run_ops and all(_is_view(op) or op.type == "concat" for op in run_ops):
            left_out += [(i, ops[i], "a region that only views and copies (numpy does that as "
                          "fast)") for i in range(start, stop)]
            continue
        if not run_ops:
            continue
        if len(run_ops) < min_ops and not any(op.type in _CONTROL for op in run_ops):
            left_out += [(i, ops[i], "a single elementwise or array operator (its kernel call "
                          "costs no more than a compiled call)") for i in range(start, stop)]
            continue
        later = {n for op in ops[stop:] for n in op.input_names()}
        inputs, outputs = _boundary(run_ops, later, fetch)
        try:
            emitter = _emit(meta, readers, block, run_ops, inputs, outputs)
        except Unsupported as exc:
            left_out += [(i, ops[i], f"region failed to lower: {exc}")
                         for i in range(start, stop)]
            continue
        region = Region(f"region_{len(regions)}", start, stop, run_ops, inputs, outputs,
                        emitter.lines, [n for n in outputs if n in emitter.records],
                        emitter.stack_inputs)
        # the argument types are part of the source: one module (and numba cache) per signature
        region.arg_types = [_arg_type(meta(n), region.stack_inputs.get(n)) for n in inputs]
        region.fresh = frozenset(emitter.fresh)
        regions.append(region)
    left_out.sort(key=lambda item: item[0])
    return regions, left_out


def _arg_type(meta, stack) -> str:
    if stack is None:
        return f"{meta.dtype.name}[{', '.join(':' * len(meta.shape))}]"
    return "(int64, " + "".join(f"{dt[3:]}[{', '.join(':' * (len(shape) + 1))}], "
                                for shape, dt in stack[1]) + ")"


def _reads_outside(op, before) -> bool:
    """Whether ``op`` reads a value that none of the operators ``before`` it defines."""
    made = {n for other in before for n in other.outputs}
    return any(n not in made for n in op.input_names())


def _is_view(op) -> bool:
    return getattr(_rule(op), "view", False)


def _rule(op):
    """The lowering rule of a registry op (None for control flow and ops without one)."""
    if op.blocks or op.type in _CONTROL:
        return None
    try:
        return get_op(op.type).lower
    except KeyError:  # while_grad and other executor-only operators
        return None


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= max(s, 1)
    return n


def region_source(region: Region) -> str:
    params = ", ".join(f"p{k}" for k in range(len(region.inputs)))
    header = [f"# {region.describe()}",
              f"# inputs: {', '.join(region.inputs) or '-'}; outputs: "
              f"{', '.join(region.outputs) or '-'}",
              f"# argument types: {', '.join(region.arg_types) or '-'}",
              "@numba.njit(cache=True, error_model='numpy', nogil=True)",
              f"def {region.name}({params}):"]
    return "\n".join(header + region.body) + "\n"
