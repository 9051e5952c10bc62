"""Algebraic simplification: identities that need no computation.

- ``x * 1``, ``1 * x``, ``x + 0``, ``0 + x``, ``x - 0``, ``x / 1`` become ``x`` (readers read
  ``x``), only when the result has ``x``'s shape and dtype (``int_x / 1`` is a float, so it stays;
  ``x + 0.0`` turns ``-0.0`` into ``0.0``, which compares equal).
- ``permute(permute(x, a), b)`` becomes one ``permute(x, c)``; a permutation that is the identity
  (after composing or on its own) disappears.
- ``reshape(reshape(x, a), b)`` becomes ``reshape(x, b)``; a reshape to ``x``'s own (fully known)
  shape disappears.

A rewritten operator must infer exactly the shape and dtype its output was declared with (with
unknown dims, collapsing two reshapes can lose what the first one knew: then it is kept).
Operators whose outputs are fetch targets are rewritten but never removed. Producers left without
readers by a rewrite (the inner permute or reshape) are removed.

Example::

    >>> import hybridfw as hf
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     x = hf.static.data("x", [2, 3])
    ...     y = (x * 1.0).T.T.exp()
    >>> print(run(prog, fetch=[y]))
    input x : (2, 3) float32
    t3 = exp(x) : (2, 3) float32
"""
from __future__ import annotations

from ...ops.registry import TensorMeta, get_op
from ..ir import Block, Program
from .analysis import readers, resolve_fetch
from .clone import working_copy
from .rewrite import erase_ops, replace_uses

__all__ = ["run"]

# op type -> positions of the Python number that makes it an identity, and that number
_IDENTITIES = {"mul": ((0, 1), 1), "add": ((0, 1), 0), "sub": ((1,), 0), "div": ((1,), 1)}


def run(program: Program, fetch=None) -> Program:
    """A copy of ``program`` with algebraic identities removed."""
    protected = set(resolve_fetch(program, fetch))
    program = working_copy(program)
    mapping: dict = {}
    bypassed: list = []
    for block in program.blocks:  # enclosing blocks come before the blocks they hold
        producers: dict = {}
        removed = []
        for op in block.ops:
            if mapping and not mapping.keys().isdisjoint(op.input_names()):
                op.inputs = tuple(mapping.get(i, i) if isinstance(i, str) else i
                                  for i in op.inputs)
            source = _simplify(block, op, producers, bypassed)
            if source is not None and op.outputs[0] not in protected:
                mapping[op.outputs[0]] = source
                removed.append(op)
            for name in op.outputs:
                producers[name] = op
        erase_ops(block, removed)
    replace_uses(program, mapping)
    _erase_unread(bypassed, protected, program)
    return program


def _simplify(block: Block, op, producers: dict, bypassed: list):
    """The name ``op``'s output equals when it is an identity, else None; composes chains of
    permute/reshape in place."""
    if op.type in _IDENTITIES:
        return _identity_operand(block, op)
    if op.type not in ("permute", "reshape") or not isinstance(op.inputs[0], str):
        return None
    inner = producers.get(op.inputs[0])
    if inner is not None and inner.type == op.type:
        if op.type == "permute":
            rank = len(inner.attrs["dims"])
            first = [d % rank for d in inner.attrs["dims"]]
            attrs = {"dims": tuple(first[d % rank] for d in op.attrs["dims"])}
        else:
            attrs = dict(op.attrs)
        if _infers_same(block, op, inner.inputs[0], attrs):
            op.inputs, op.attrs = (inner.inputs[0],), attrs
            bypassed.append((block, inner))
    source = block.var(op.inputs[0])
    out = block.var(op.outputs[0])
    if op.type == "permute":
        identity = tuple(d % out.ndim for d in op.attrs["dims"]) == tuple(range(out.ndim))
    else:
        identity = source.shape == out.shape and -1 not in out.shape
    return source.name if identity and source.dtype is out.dtype else None


def _identity_operand(block: Block, op):
    positions, neutral = _IDENTITIES[op.type]
    for k in positions:
        number, other = op.inputs[k], op.inputs[1 - k]
        if number.__class__ in (int, float) and number == neutral and isinstance(other, str):
            source, out = block.var(other), block.var(op.outputs[0])
            if source.shape == out.shape and source.dtype is out.dtype:
                return other
    return None


def _infers_same(block: Block, op, source: str, attrs: dict) -> bool:
    var = block.var(source)
    out = block.var(op.outputs[0])
    try:
        shape, dtype, _ = get_op(op.type).infer(TensorMeta(var.shape, var.dtype), **attrs)
    except (ValueError, TypeError, IndexError):
        return False
    return tuple(shape) == out.shape and dtype is out.dtype


def _erase_unread(candidates: list, protected: set, program: Program) -> None:
    """Erase the bypassed producers nothing reads any more (repeatedly: erasing one may leave
    the producer before it unread)."""
    while candidates:
        read = readers(program)
        dead = [(b, op) for b, op in candidates
                if op in b.ops and op.outputs[0] not in read and op.outputs[0] not in protected]
        if not dead:
            return
        for block, op in dead:
            erase_ops(block, [op])
        candidates = [c for c in candidates if c not in dead]
