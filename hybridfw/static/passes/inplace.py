"""In-place reuse: mark elementwise operators whose output may take over an input's memory.

The annotation is a mapping on the program, ``program.inplace = {output_name: input_name}``
(not an operator attribute: attributes are passed to kernels as keyword arguments). An entry
means: *the buffer holding* ``input_name`` *may be reused for* ``output_name``, because the
operator producing ``output_name`` is the last reader of that buffer. The memory planner
(:mod:`hybridfw.static.memory_plan`) honours it; the executor without a plan ignores it. Passes
that rename values keep the mapping in step (:func:`.rewrite.replace_uses`); this pass recomputes
it from scratch.

An operator gets an entry for its first tensor input ``x`` when:

- it is an elementwise op whose kernel writes through ``out=`` (``where`` does not; a
  ``fused_elementwise`` allocates its own temporaries), and its output is not a fetch target
  (fetched results get memory of their own);
- ``x`` is the output of an earlier non-view registry op of the same block (so not a feed, a
  parameter, a block argument or a value from outside a loop body), and ``x``'s buffer is not
  read after this operator: neither ``x`` nor any view of it (``reshape``, ``permute``, ...) is
  read later, fetched, or named by the control-flow operator holding the block (branch results,
  loop outputs, values saved for backward);
- no other input of the operator is a view of ``x``'s buffer (a transposed read of the memory
  being written);
- the output has ``x``'s dtype and shape; where ``x``'s dim is unknown (-1), every other tensor
  input has size 1 (or no dim) there, so the result cannot be broadcast bigger than ``x`` at run
  time.

Example::

    >>> import hybridfw as hf
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     x = hf.static.data("x", [3])
    ...     y = (x.exp() + 1.0).relu()
    >>> run(prog, fetch=[y]).inplace
    {'t1': 't0'}
"""
from __future__ import annotations

from ...ops.registry import get_op
from ..fused import FUSIBLE_OPS
from ..ir import Block, Program
from ..liveness import analyze_block
from ..verifier import is_registry_op
from .analysis import attr_names, resolve_fetch
from .clone import working_copy
from .rewrite import holders

__all__ = ["run", "INPLACE_OPS"]

INPLACE_OPS = frozenset(name for name in FUSIBLE_OPS if get_op(name).supports_out)


def run(program: Program, fetch=None) -> Program:
    """A copy of ``program`` whose ``inplace`` mapping lists the reusable buffers."""
    fetch = set(resolve_fetch(program, fetch))
    program = working_copy(program)
    names = {name for block in program.blocks for name in block.vars}
    holder_map = holders(program)
    program.inplace = {}
    for block in program.blocks:
        if block.idx == 0:
            live_out = fetch
        else:
            live_out = set(attr_names(holder_map[block.idx][1], names)) & set(block.vars)
        program.inplace.update(_block_pairs(block, live_out, fetch))
    return program


def _block_pairs(block: Block, live_out: set, fetch: set) -> dict:
    liveness = analyze_block(block, live_out=live_out)
    root: dict = {}     # name -> the name owning its buffer (itself, or what a view views)
    members: dict = {}  # owner -> names sharing its buffer
    pairs = {}
    for i, op in enumerate(block.ops):
        candidate = next((n for n in op.inputs if isinstance(n, str)), None)
        if op.type in INPLACE_OPS and candidate is not None and op.outputs[0] not in fetch:
            owner = root.get(candidate)
            if owner == candidate and _reusable(block, op, i, candidate, members[owner],
                                                liveness):
                pairs[op.outputs[0]] = candidate
        for name in op.outputs:
            if is_registry_op(op.type) and get_op(op.type).view and op.inputs[0] in root:
                owner = root[op.inputs[0]]
            else:
                owner = name if is_registry_op(op.type) and not op.blocks else None
            if owner is not None:
                root[name] = owner
                members.setdefault(owner, []).append(name)
    return pairs


def _reusable(block: Block, op, index: int, name: str, aliases: list, liveness) -> bool:
    if any(liveness.last_use.get(alias, -1) > index for alias in aliases):
        return False
    if any(isinstance(i, str) and i != name and i in aliases for i in op.inputs):
        return False
    source, out = block.var(name), block.var(op.outputs[0])
    if source.persistable or out.shape != source.shape or out.dtype is not source.dtype:
        return False
    for k, size in enumerate(source.shape):
        if size == -1:
            for other in op.inputs:
                if isinstance(other, str) and other != name:
                    shape = block.var(other).shape
                    offset = k - (len(source.shape) - len(shape))
                    if offset >= 0 and shape[offset] != 1:
                        return False
    return True
