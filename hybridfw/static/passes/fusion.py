"""Elementwise fusion: groups of elementwise ops become one ``fused_elementwise`` operator.

An operator of :data:`~hybridfw.static.fused.FUSIBLE_OPS` joins the group of the operator that
reads its output when that is the output's only reader (in the whole program, sub-blocks and
control-flow attributes included), both are in the same block, and the output is not a fetch
target. Each group is therefore a tree whose intermediates nothing else sees; it is replaced, at
the position of its last operator (whose output name it keeps), by one ``fused_elementwise``
operator over the group's external inputs (see :mod:`hybridfw.static.fused` for its attributes
and kernel). Single operators are left as they are. Operators reading a parameter that an
``assign_param`` writes (or a view of it) are not fused: the fused operator runs later, maybe
after the write.

Groups whose result is small -- every dim known and at most :data:`MIN_ELEMENTS` elements --
are left unfused: on a few numbers one kernel call per op (a microsecond or two each) costs
less than running the fused operator's plan, and a static loop over scalars is exactly where
that per-call cost adds up.

``fused_elementwise`` has no gradient, so run fusion on inference programs or after
:func:`hf.static.gradients` has built the backward (the pass list runs it after everything that
may still need gradients).

Example::

    >>> import hybridfw as hf
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     x = hf.static.data("x", [3])
    ...     y = (x * 2.0 + 1.0).relu()
    >>> print(run(prog, fetch=[y]))
    input x : (3,) float32
    t2 = fused_elementwise(x) {ops=(('mul', ('in0', 2.0), ()), ('add', ('op0', 1.0), ()), ('relu', ('op1',), ())), dtype=hybridfw.float32} : (3,) float32
"""
from __future__ import annotations

from ..fused import FUSIBLE_OPS
from ..ir import Block, Operator, Program
from .analysis import assigned_state, readers, resolve_fetch
from .clone import working_copy
from .rewrite import erase_ops

__all__ = ["MIN_ELEMENTS", "run"]

MIN_ELEMENTS = 256


def run(program: Program, fetch=None) -> Program:
    """A copy of ``program`` with its elementwise groups fused."""
    protected = set(resolve_fetch(program, fetch))
    program = working_copy(program)
    read = readers(program)
    assigned = assigned_state(program)
    for block in program.blocks:
        _fuse_block(block, read, protected, assigned)
    return program


def _fuse_block(block: Block, read: dict, protected: set, assigned: set) -> None:
    producer: dict = {}  # output name -> fusible operator of this block
    groups: dict = {}    # id(operator) -> the group it ends (operators in program order)
    position = {id(op): i for i, op in enumerate(block.ops)}
    for op in block.ops:
        if op.type not in FUSIBLE_OPS or len(op.outputs) != 1:
            continue
        names = op.input_names()
        if assigned and any(name in assigned for name in names):
            continue
        parts = []  # the groups op joins, each in program order
        for name in dict.fromkeys(names):
            inner = producer.get(name)
            if inner is not None and _private(block, name, op, read, protected):
                parts.append(groups.pop(id(inner)))
        if len(parts) > 1:
            group = sorted([o for part in parts for o in part], key=lambda o: position[id(o)])
        else:
            group = parts[0] if parts else []
        group.append(op)
        groups[id(op)] = group
        producer[op.outputs[0]] = op
    doomed = []
    for group in groups.values():
        if len(group) > 1 and not _small(block.var(group[-1].outputs[0]).shape):
            # the root's position is still valid: nothing is erased until every group is fused
            block.ops[position[id(group[-1])]] = _fused(block, group)
            doomed += group[:-1]
    erase_ops(block, doomed)   # once: erasing group by group was quadratic in the block size


def _small(shape) -> bool:
    numel = 1
    for s in shape:
        if s == -1:
            return False
        numel *= s
    return numel <= MIN_ELEMENTS


def _private(block: Block, name: str, consumer, read: dict, protected: set) -> bool:
    """Whether ``consumer`` is the only reader of ``name`` and nothing else may see it."""
    readers_of = read.get(name, [])
    return (len(readers_of) == 1 and readers_of[0] is consumer and name not in protected
            and not block.var(name).persistable)


def _fused(block: Block, group: list) -> Operator:
    """The ``fused_elementwise`` operator computing ``group`` (its last operator's output)."""
    index = {op.outputs[0]: j for j, op in enumerate(group)}
    inputs: dict = {}  # external input name -> its position
    ops = []
    for op in group:
        refs = []
        for operand in op.inputs:
            if not isinstance(operand, str):
                refs.append(operand)
            elif operand in index:
                refs.append(f"op{index[operand]}")
            else:
                refs.append(f"in{inputs.setdefault(operand, len(inputs))}")
        ops.append((op.type, tuple(refs), tuple(sorted(op.attrs.items()))))
    root = group[-1]
    out = block.var(root.outputs[0])
    return Operator("fused_elementwise", list(inputs), root.outputs,
                    {"ops": tuple(ops), "dtype": out.dtype}, origin=root.origin)
