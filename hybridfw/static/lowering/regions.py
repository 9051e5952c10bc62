"""Regions: runs of lowerable operators of a program's global block, each one compiled function.

An operator is lowerable when its op has a lowering rule that accepts its operands (or it is a
``fused_elementwise`` group of such ops, or a ``while``/``cond`` whose blocks are wholly
lowerable), its dtypes are numba's and its array shapes are known. Consecutive lowerable
operators form a region; a region of one plain operator stays interpreted (a kernel call costs
no more than a compiled call). :func:`plan_regions` returns the regions and, for the report,
every operator left out with the reason.
"""
from __future__ import annotations

from ...ops.registry import TensorMeta
from .emit import RegionEmitter, Unsupported

__all__ = ["Region", "plan_regions", "region_source"]

_CONTROL = ("while", "cond", "fused_elementwise")
_LOOPS = ("while", "cond")

# A region without control flow is compiled only when its values are small (at most this many
# elements): there the interpreter's per-operator cost dominates and one compiled call removes
# it; on large arrays numpy's vectorized kernels writing into the arena are as fast as numba's
# loops (on the W4 LSTM, 32 x 128 gates, compiling them made a training step slower).
MAX_STRAIGHT_ELEMENTS = 1024


class Region:
    """Operators ``start``..``stop - 1`` of the global block, compiled as function ``name``."""

    __slots__ = ("name", "start", "stop", "inputs", "outputs", "body", "ops", "arg_types")

    def __init__(self, name, start, stop, ops, inputs, outputs, body):
        self.name, self.start, self.stop = name, start, stop
        self.ops, self.inputs, self.outputs, self.body = ops, inputs, outputs, body

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


def _emit(meta, readers, block, ops, inputs, outputs) -> list:
    emitter = RegionEmitter(meta, readers, outputs)
    for k, name in enumerate(inputs):
        emitter.bind_input(name, f"p{k}")
    emitter.emit_ops(block, ops)
    emitter.return_line(outputs)
    return emitter.lines


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
        run_ops = ops[start:stop]
        if len(run_ops) < min_ops and not any(op.type in _CONTROL for op in run_ops):
            left_out += [(i, ops[i], "a single elementwise or array operator (its kernel call "
                          "costs no more than a compiled call)") for i in range(start, stop)]
            continue
        later = {n for op in ops[stop:] for n in op.input_names()}
        inputs, outputs = _boundary(run_ops, later, fetch)
        if not any(op.type in _LOOPS for op in run_ops):
            largest = max((_numel(meta(n).shape) for op in run_ops
                           for n in list(op.input_names()) + list(op.outputs)), default=0)
            if largest > MAX_STRAIGHT_ELEMENTS:
                left_out += [(i, ops[i], f"straight-line region on arrays of up to {largest} "
                              f"elements (> {MAX_STRAIGHT_ELEMENTS}): numpy's kernels are as "
                              "fast") for i in range(start, stop)]
                continue
        try:
            body = _emit(meta, readers, block, run_ops, inputs, outputs)
        except Unsupported as exc:
            left_out += [(i, ops[i], f"region failed to lower: {exc}")
                         for i in range(start, stop)]
            continue
        region = Region(f"region_{len(regions)}", start, stop, run_ops, inputs, outputs, body)
        # the argument types are part of the source: one module (and numba cache) per signature
        region.arg_types = [f"{meta(n).dtype.name}[{', '.join(':' * len(meta(n).shape))}]"
                            for n in inputs]
        regions.append(region)
    left_out.sort(key=lambda item: item[0])
    return regions, left_out


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
