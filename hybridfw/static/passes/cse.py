"""Common-subexpression elimination: one operator per distinct pure computation.

Two operators compute the same value when they have the same type, the same inputs (after
earlier merges) and equal attributes, and are pure (:func:`.analysis.is_pure`: deterministic
registry ops; random draws are never merged). The later one is removed and its readers read the
earlier one's output. Python-number inputs and attributes compare by type and exact value
(``1`` and ``1.0`` differ, ``0.0`` and ``-0.0`` differ); inputs of commutative ops (``add``,
``mul``, ``eq``, ...) are compared in a canonical order, since swapping them gives the same
result (up to which NaN's payload a NaN result carries).

Scoping: an operator in a sub-block may reuse a value computed earlier in an enclosing block
(the value is then added to the captured inputs of the control-flow operators in between);
values computed inside a sub-block are never reused outside it, nor in a sibling block.
A fetch target is never removed (it would disappear from the program); it is simply not merged.
Operators reading a parameter that an ``assign_param`` writes (or a view of it) are not merged:
the same expression before and after the write has different values.

Example::

    >>> import hybridfw as hf
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     x = hf.static.data("x", [2])
    ...     y = (x + 1.0) * (x + 1.0)
    >>> print(run(prog, fetch=[y]))
    input x : (2,) float32
    t0 = add(x, 1.0) : (2,) float32
    t2 = mul(t0, t0) : (2,) float32
"""
from __future__ import annotations

from ..ir import Block, Operator, Program
from ..verifier import is_registry_op
from .analysis import RANDOM_OPS, SIDE_EFFECT_OPS, assigned_state, resolve_fetch
from .clone import working_copy
from .rewrite import add_capture, erase_ops, holders, replace_uses

__all__ = ["run", "expression_key"]

COMMUTATIVE = frozenset({"add", "mul", "eq", "ne", "bitwise_and", "bitwise_or", "bitwise_xor"})


def run(program: Program, fetch=None) -> Program:
    """A copy of ``program`` in which each pure computation happens once."""
    protected = set(resolve_fetch(program, fetch))
    program = working_copy(program)
    mapping: dict = {}
    _merge_block(program, program.global_block(), {}, mapping, protected | assigned_state(program),
                 holders(program))
    replace_uses(program, mapping)
    return program


def _merge_block(program, block: Block, available: dict, mapping: dict, fixed: set,
                 holder_map: dict) -> None:
    """Merge duplicates in ``block``; ``available`` maps expression keys to the names holding
    them in enclosing scopes (a copy is extended here, so nothing leaks out). Names in ``fixed``
    (fetch targets, and values an ``assign_param`` changes) are neither removed nor read by a
    merged operator."""
    available = dict(available)
    removed = []
    for op in block.ops:
        if mapping and not mapping.keys().isdisjoint(op.input_names()):
            op.inputs = tuple(mapping.get(i, i) if isinstance(i, str) else i for i in op.inputs)
        for sub in op.blocks:
            _merge_block(program, sub, available, mapping, fixed, holder_map)
        key = expression_key(block, op)
        if key is None or not fixed.isdisjoint(op.input_names()):
            continue
        existing = available.get(key)
        if existing is None:
            available[key] = op.outputs[0]
        elif op.outputs[0] not in fixed:
            mapping[op.outputs[0]] = existing
            removed.append(op)
            if block.idx != 0 and existing not in block.vars:
                add_capture(program, block, existing, holder_map)
    erase_ops(block, removed)


def expression_key(block: Block, op: Operator) -> tuple | None:
    """A hashable description of what a pure single-output operator computes, or None when it
    may not be merged (impure, several outputs, or attributes that cannot be compared)."""
    outputs = op.outputs
    if len(outputs) != 1 or op.blocks:
        return None
    type_ = op.type
    # is_pure, spelled out for the one-output, block-free operator (run per operator of every
    # program: the calls and the generic checks cost more than the key itself)
    if type_ in RANDOM_OPS or type_ in SIDE_EFFECT_OPS or type_ == "py_func" or \
            not is_registry_op(type_):
        return None
    var = block.vars.get(outputs[0])
    if (var if var is not None else block.var(outputs[0])).persistable:
        return None
    try:
        # names stay strings; numbers become tuples (_freeze or ("repr", ...)): never equal
        operands = op.inputs
        if operands.__class__ is not tuple or len(op.input_names()) != len(operands):
            operands = tuple([i if i.__class__ is str else _operand_key(i) for i in operands])
        if type_ in COMMUTATIVE:
            if len(operands) == 2 and operands[0].__class__ is str and \
                    operands[1].__class__ is str:
                if operands[0] > operands[1]:
                    operands = (operands[1], operands[0])
            else:
                operands = tuple(sorted(operands, key=repr))
        attrs = op.attrs
        if attrs:
            items = sorted(attrs.items())  # by name (names are unique)
            plain = True
            for _, v in items:
                if not _plain(v):
                    plain = False
                    break
            key = (type_, operands, ("repr", repr(items)) if plain else
                   tuple([(k, _freeze(v)) for k, v in items]))
        else:
            key = (type_, operands, _NO_ATTRS)
        hash(key)
    except TypeError:
        return None
    return key


_NO_ATTRS = ("repr", "[]")


_PLAIN_SCALARS = frozenset({int, float, bool, str, type(None)})


def _plain(value) -> bool:
    """Whether ``value`` is made of exactly None, bool, int, float and str in tuples and lists:
    then its ``repr`` tells apart exactly what :func:`_freeze` does, at a fraction of the cost."""
    cls = value.__class__
    if cls in _PLAIN_SCALARS:
        return True
    if cls is tuple or cls is list:
        for v in value:
            if not _plain(v):
                return False
        return True
    return False


def _operand_key(value):
    return ("repr", repr(value)) if _plain(value) else _freeze(value)


def _freeze(value):
    """``value`` as a hashable key that tells apart values Python calls equal (1, 1.0, True)."""
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, (bool, int)):
        return (type(value).__name__, value)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _freeze(v)) for k, v in value.items())))
    return (type(value).__name__, value)
