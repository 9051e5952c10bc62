"""Editing programs in place: renaming uses, erasing operators, dropping orphan blocks, adding
captures. Passes call these on their own copy (:func:`~.clone.clone_program`)."""
from __future__ import annotations

from ..ir import Block, Program
from ..verifier import is_registry_op
from .analysis import readers, walk_ops

__all__ = ["replace_uses", "erase_ops", "drop_unreachable_blocks", "drop_unused_constants",
           "holders", "add_capture"]


def replace_uses(program: Program, mapping: dict) -> None:
    """Make every reader of ``old`` read ``mapping[old]`` instead: operator inputs, names in
    control-flow attributes, and ``program.inplace``."""
    if not mapping:
        return
    for _, op in walk_ops(program.global_block()):
        if not mapping.keys().isdisjoint(op.input_names()):
            op.inputs = tuple(mapping.get(i, i) if isinstance(i, str) else i for i in op.inputs)
        if not is_registry_op(op.type):
            op.attrs = {k: _rename(v, mapping) for k, v in op.attrs.items()}
    inplace = getattr(program, "inplace", None)
    if inplace:
        program.inplace = {mapping.get(k, k): mapping.get(v, v) for k, v in inplace.items()}


def _rename(value, mapping):
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, tuple):
        return tuple(_rename(v, mapping) for v in value)
    if isinstance(value, list):
        return [_rename(v, mapping) for v in value]
    if isinstance(value, dict):
        return {k: _rename(v, mapping) for k, v in value.items()}
    return value


def erase_ops(block: Block, ops) -> None:
    """Remove ``ops`` (by identity) from ``block`` along with the variables they define."""
    doomed = {id(op) for op in ops}
    if not doomed:
        return
    for op in block.ops:
        if id(op) in doomed:
            for name in op.outputs:
                owner = block
                while owner is not None and name not in owner.vars:
                    owner = owner.parent
                if owner is not None:
                    del owner.vars[name]
    block.ops = [op for op in block.ops if id(op) not in doomed]


def drop_unreachable_blocks(program: Program) -> None:
    """Forget blocks no operator holds any more (after their operator was erased) and renumber
    the rest in their previous order."""
    if len(program.blocks) == 1:
        return
    reachable = {0}
    for _, op in walk_ops(program.global_block()):
        reachable.update(sub.idx for sub in op.blocks)
    if len(reachable) == len(program.blocks):
        return
    program.blocks = [b for b in program.blocks if b.idx in reachable]
    for i, block in enumerate(program.blocks):
        block.idx = i
    program._current = 0


def drop_unused_constants(program: Program, keep=()) -> None:
    """Forget the parameters that are constants (``requires_grad`` False), that no operator
    reads and that are not in ``keep`` (fetch targets); trainable parameters always stay
    (optimizers and gradients refer to them by name)."""
    candidates = [n for n, t in program.params.items()
                  if not getattr(t, "requires_grad", False) and n not in keep]
    if not candidates:
        return
    still_read = readers(program)
    block = program.global_block()
    for name in [n for n in candidates if n not in still_read]:
        tensor = program.params.pop(name)
        program._captured.pop(id(tensor), None)
        del block.vars[name]


def holders(program: Program) -> dict:
    """Block index -> (enclosing block, operator holding the block)."""
    result = {}
    for block, op in walk_ops(program.global_block()):
        for sub in op.blocks:
            result[sub.idx] = (block, op)
    return result


def add_capture(program: Program, block: Block, name: str, holder_map: dict) -> None:
    """``block`` now reads ``name`` from an enclosing block: list it among the inputs of every
    control-flow operator between them (their captured inputs come last, so appending keeps the
    layout of ``cond``/``while``/``while_grad``)."""
    while name not in block.vars:
        outer, op = holder_map[block.idx]
        if name not in op.inputs:
            op.inputs = (*op.inputs, name)
        block = outer
