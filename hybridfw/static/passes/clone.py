"""Copying programs, so that passes never mutate the program they are given.

A pass starts with ``program = working_copy(program)``: a clone, except inside
:func:`~hybridfw.static.passes.optimize`, whose passes share one private copy (nobody else holds
it), so that each pass does not clone the whole program again.
"""
from __future__ import annotations

import contextlib
import contextvars
import copy
import itertools
import re

from ..ir import Block, Program

__all__ = ["clone_program", "working_copy", "private_copy"]

# attributes of Program that clone_program rebuilds itself; any other (an annotation another
# module set, such as ``inplace``) is copied one level deep
_REBUILT = {"blocks", "params", "feeds", "device", "_counter", "_captured", "_current",
            "lineage"}
_NUMBERED = re.compile(r"(\d+)\0")  # the number ending a name, in NUL-terminated names

# the program that the running optimize() owns alone (its passes may rewrite it in place)
_PRIVATE: contextvars.ContextVar = contextvars.ContextVar("private_program", default=None)


def clone_program(program: Program, keep=None) -> Program:
    """A copy of ``program`` that passes may rewrite freely.

    Blocks, variables and operators are new objects (operator attributes are copied one level,
    with references to blocks mapped to the copies); parameter values (eager tensors) are shared,
    since passes never write them. Fresh names from ``unique_name`` continue after the largest
    numbered name in use. ``keep`` (a set of indices into the global block's operators) copies
    only those operators and leaves out the variables the others define, as
    :func:`~.rewrite.erase_ops` would erase them from a full copy.

    Example::

        >>> import hybridfw as hf
        >>> prog = hf.static.Program()
        >>> with hf.static.program_guard(prog):
        ...     y = hf.static.data("x", [2]) * 2.0
        >>> copy = clone_program(prog)
        >>> str(copy) == str(prog), copy.global_block().ops[0] is prog.global_block().ops[0]
        (True, False)
    """
    new = Program(device=program.device)
    new.blocks = [Block(new, block.idx, None) for block in program.blocks]
    mapping = {id(old): block for old, block in zip(program.blocks, new.blocks)}
    for old, block in zip(program.blocks, new.blocks):
        if old.parent is not None:
            block.parent = mapping[id(old.parent)]
        ops, variables = old.ops, old.vars
        if keep is not None and old is program.blocks[0]:
            left_out = {name for i, op in enumerate(ops) if i not in keep for name in op.outputs}
            ops = [op for i, op in enumerate(ops) if i in keep]
            variables = {n: v for n, v in variables.items() if n not in left_out}
        block.vars = {name: var._copy(block) for name, var in variables.items()}
        if len(program.blocks) == 1:   # no attribute can refer to a block: copy them as they are
            block.ops = [op._copy(dict(op.attrs)) for op in ops]
        else:
            block.ops = [op._copy({k: _map_blocks(v, mapping) for k, v in op.attrs.items()},
                                  tuple([mapping[id(b)] for b in op.blocks]))
                         for op in ops]
    new.params = dict(program.params)
    new.feeds = list(program.feeds)
    new._captured = dict(program._captured)
    new._current = program._current
    new.lineage = program.lineage
    new._counter = itertools.count(_next_number(program))
    for key, value in vars(program).items():
        if key not in _REBUILT:
            setattr(new, key, copy.copy(value))
    return new


def working_copy(program: Program) -> Program:
    """A program the calling pass may rewrite: ``program`` itself when it is the private copy of
    the running :func:`private_copy` block, else :func:`clone_program` of it. Fresh names
    continue after the largest numbered name in use (a clone) or the program's own counter."""
    if program is not _PRIVATE.get():
        return clone_program(program)
    # (its own counter already runs past the names it made; unique_name skips any other)
    return program


@contextlib.contextmanager
def private_copy(program: Program):
    """Within the block, :func:`working_copy` hands out ``program`` itself rather than a clone
    (the caller promises nobody else holds it); ``set`` (yielded) makes another program the
    private one, such as the copy a pass returned."""
    token = _PRIVATE.set(program)
    try:
        yield _PRIVATE.set
    finally:
        _PRIVATE.reset(token)


def _map_blocks(value, mapping):
    if isinstance(value, Block):
        return mapping[id(value)]
    if isinstance(value, tuple):
        return tuple(_map_blocks(v, mapping) for v in value)
    if isinstance(value, list):
        return [_map_blocks(v, mapping) for v in value]
    if isinstance(value, dict):
        return {k: _map_blocks(v, mapping) for k, v in value.items()}
    return value


def _next_number(program: Program) -> int:
    # one regex scan over all names (each followed by NUL) rather than one search per name
    names = "\0".join([name for block in program.blocks for name in block.vars]) + "\0"
    return max(map(int, _NUMBERED.findall(names)), default=-1) + 1
