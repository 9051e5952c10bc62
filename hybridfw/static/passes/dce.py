"""Dead-code elimination: keep only the operators the fetch targets (or side effects) need.

Walks each block backwards from what is live at its end: the fetch targets for the global block;
for a sub-block, the names its control-flow operator's attributes refer to (branch results, loop
outputs, values saved for backward). An operator stays when one of its outputs is live or it has
side effects (:mod:`.analysis` states the policy: unused random draws go, which shifts the
generator's stream for later draws); its inputs then become live. A removed control-flow
operator takes its sub-blocks with it (the remaining blocks are renumbered). Parameters that are
constants (``requires_grad`` False), not fetched and no longer read are dropped too; trainable
parameters always stay (optimizers and gradients refer to them by name).

Captured inputs of a control-flow operator stay listed even when its pruned blocks no longer read
them (they then only keep their producers alive).

Example::

    >>> import hybridfw as hf
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     x = hf.static.data("x", [2])
    ...     unused = x.exp()
    ...     y = x * 2.0
    >>> print(run(prog, fetch=[y]))
    input x : (2,) float32
    t1 = mul(x, 2.0) : (2,) float32
"""
from __future__ import annotations

from ..ir import Block, Program
from ..verifier import is_registry_op
from .analysis import attr_names, has_side_effects, resolve_fetch
from .clone import working_copy
from .rewrite import drop_unreachable_blocks, drop_unused_constants, erase_ops

__all__ = ["run"]


def run(program: Program, fetch=None) -> Program:
    """A copy of ``program`` without the operators no fetch target or side effect needs."""
    fetch = resolve_fetch(program, fetch)
    program = working_copy(program)
    names = {name for block in program.blocks for name in block.vars}
    _sweep(program.global_block(), set(fetch), names)
    drop_unreachable_blocks(program)
    drop_unused_constants(program, fetch)
    return program


def _sweep(block: Block, live: set, names: set) -> set:
    """Erase the dead operators of ``block`` given the names ``live`` at its end; return every
    name the kept operators read (at any depth)."""
    dead = []
    read: set = set()
    for op in reversed(block.ops):
        if live.isdisjoint(op.outputs) and not has_side_effects(block, op):
            dead.append(op)
            continue
        if not op.blocks and is_registry_op(op.type):  # no attribute names, no sub-blocks
            live.update(op.input_names())
            read.update(op.input_names())
            continue
        uses = set(op.input_names())
        results = set(attr_names(op, names))
        for sub in op.blocks:
            uses |= _sweep(sub, results, names)
        uses |= results
        live |= uses
        read |= uses
    erase_ops(block, dead)
    return read
