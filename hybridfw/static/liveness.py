"""Liveness of the variables of a block: where each value is defined and where it is last used.

One analysis, shared by the executor (when to drop a value), the arena planner (which values may
share memory) and the recompute pass (what a checkpoint keeps alive). Positions are operator
indices in the block:

- an operator *reads* its input names and, when it has sub-blocks (``cond``, ``while``), every
  name of the enclosing scopes that its sub-blocks read, at any depth: those values must stay live
  until the whole control-flow operator has run;
- it *writes* its outputs and every name of the enclosing scopes that its sub-blocks assign;
- fetch targets (``live_out``) are read at ``len(block.ops)``, one past the last operator, so they
  stay live to the end.

Inputs (feeds, parameters, anything defined outside the block) have a last use but no definition.

Example::

    >>> import hybridfw as hf
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     x = hf.static.data("x", [4])
    ...     y = x * 2.0
    ...     z = (y + 1.0).relu()
    >>> live = analyze_block(prog.global_block(), live_out=[z.name])
    >>> live.interval(y.name), live.interval(z.name)
    ((0, 1), (2, 3))
"""
from __future__ import annotations

from .ir import Block, Operator

__all__ = ["Liveness", "analyze_block", "block_reads", "block_writes", "op_reads", "op_writes"]


def block_reads(block: Block) -> set:
    """Every name read by the operators of ``block`` and of its nested blocks."""
    names = set()
    for op in block.ops:
        names.update(op.input_names())
        for sub in op.blocks:
            names |= block_reads(sub)
    return names


def block_writes(block: Block) -> set:
    """Every name written by the operators of ``block`` and of its nested blocks."""
    names = set()
    for op in block.ops:
        names.update(op.outputs)
        for sub in op.blocks:
            names |= block_writes(sub)
    return names


def _visible(block: Block, names) -> list:
    """The names (sorted, for a stable order) that ``block`` or a scope around it defines."""
    return sorted(n for n in names if block.find_var(n) is not None)


def op_reads(op: Operator, block: Block) -> tuple:
    """Names of ``block``'s scope that ``op`` reads: its inputs, then what its sub-blocks read."""
    names = op.input_names()
    if not op.blocks:
        return names if len(names) < 2 else tuple(dict.fromkeys(names))
    names = list(dict.fromkeys(names))
    inner = set().union(*(block_reads(sub) for sub in op.blocks)) - set(names)
    names += _visible(block, inner)
    return tuple(names)


def op_writes(op: Operator, block: Block) -> tuple:
    """Names of ``block``'s scope that ``op`` writes: its outputs, then what its sub-blocks
    assign to names of the enclosing scopes."""
    outputs = op.outputs
    if not op.blocks:
        return outputs if len(outputs) < 2 else tuple(dict.fromkeys(outputs))
    names = list(dict.fromkeys(outputs))
    inner = set().union(*(block_writes(sub) for sub in op.blocks)) - set(names)
    names += _visible(block, inner)
    return tuple(names)


class Liveness:
    """Definition and last use of every value of one block (see the module docstring).

    Attributes:
        num_ops: number of operators; ``num_ops`` is the position of the fetch targets' use.
        reads / writes: per operator, the names it reads / writes (:func:`op_reads`,
            :func:`op_writes`).
        definition: name -> index of the first operator writing it (values defined here).
        assignments: name -> how many operators write it (1 in single-assignment programs).
        last_use: name -> index of the last operator reading it, ``num_ops`` for values live at
            the end; a value defined and never read has its definition as last use.
    """

    __slots__ = ("assignments", "definition", "last_use", "num_ops", "reads", "writes")

    def __init__(self, num_ops, reads, writes, definition, assignments, last_use):
        self.num_ops = num_ops
        self.reads = reads
        self.writes = writes
        self.definition = definition
        self.assignments = assignments
        self.last_use = last_use

    def interval(self, name: str) -> tuple:
        """``(definition, last use)`` of a value defined in the block (both inclusive)."""
        if name not in self.definition:
            raise KeyError(f"liveness: {name!r} is not defined in this block (an input, or a "
                           "value of another block)")
        return self.definition[name], self.last_use[name]

    def is_live(self, name: str, index: int) -> bool:
        """Whether the value is live at operator ``index`` (defined there or earlier, read there
        or later)."""
        start = self.definition.get(name, -1)
        return start <= index <= self.last_use.get(name, start)

    def dying(self) -> list:
        """Per operator, the values defined in the block whose last use is that operator (the
        values that may be dropped right after it runs)."""
        out = [[] for _ in range(self.num_ops)]
        for name in self.definition:
            end = self.last_use[name]
            if end < self.num_ops:
                out[end].append(name)
        return out

    def __repr__(self) -> str:
        return f"Liveness({self.num_ops} ops, {len(self.definition)} values defined)"


def analyze_block(block: Block, live_out=()) -> Liveness:
    """Liveness of ``block``'s values; ``live_out`` (e.g. fetch targets) stay live to the end."""
    ops = block.ops
    reads = [op_reads(op, block) for op in ops]
    writes = [op_writes(op, block) for op in ops]
    definition: dict = {}
    assignments: dict = {}
    last_use: dict = {}
    for i, (read, written) in enumerate(zip(reads, writes)):
        for name in read:
            last_use[name] = i
        for name in written:
            definition.setdefault(name, i)
            assignments[name] = assignments.get(name, 0) + 1
            if last_use.get(name, -1) < i:
                last_use[name] = i
    for name in live_out:
        last_use[name] = len(ops)
    return Liveness(len(ops), reads, writes, definition, assignments, last_use)
