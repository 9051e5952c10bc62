"""What passes need to know about operators: effects, readers, fetch targets.

**Effects policy** (shared by every pass, so they agree):

- Registry ops are *pure value producers*. That includes in-place methods (``y += 1``): a static
  program records them as a new value the Python name is rebound to, so nothing is mutated.
- *Random* ops (:data:`RANDOM_OPS`) draw from the global generator. Their results are values
  like any other, so an unused draw may be removed by dead-code elimination (this shifts the
  generator's stream: random ops that run later in the same run, and later runs, see different
  numbers than they would have). Two draws are never the same value, so random ops are never
  merged (CSE), folded or fused.
- An op has *side effects*, and is kept even when nothing reads its outputs, when its type is in
  :data:`SIDE_EFFECT_OPS` (``assign_param``, which writes a parameter in place), when it is of an
  unknown kind, when it writes a persistable variable (state that outlives the run), or when it
  holds sub-blocks containing such an op. A Python callback (``py_func``) has side effects when
  its ``has_side_effects`` attribute says so.
- A parameter that an ``assign_param`` writes changes during the run: it is no constant
  (constant folding), and operators reading it must run where they are, before the write (CSE
  does not merge them, fusion does not move them into a later fused operator).
"""
from __future__ import annotations

from collections.abc import Iterator

from ...ops.registry import get_op
from ..ir import Block, Operator, Program
from ..verifier import is_control_flow, is_registry_op

__all__ = ["RANDOM_OPS", "SIDE_EFFECT_OPS", "is_random", "has_side_effects", "is_pure",
           "attr_names", "walk_ops", "readers", "resolve_fetch", "assigned_state", "place_early"]

RANDOM_OPS = frozenset({"uniform", "normal", "randint", "bernoulli"})

# op types that act on the world (printing, writing state); modules defining such ops add theirs
SIDE_EFFECT_OPS: set = {"assign_param"}


def is_random(op: Operator) -> bool:
    """Whether ``op`` draws from the random generator."""
    return op.type in RANDOM_OPS


def has_side_effects(block: Block, op: Operator) -> bool:
    """Whether ``op`` must run even when nothing reads its outputs (see the effects policy)."""
    type_ = op.type
    if type_ == "py_func":  # a Python callback says whether it acts on the world
        return bool(op.attrs.get("has_side_effects"))
    if type_ in SIDE_EFFECT_OPS:
        return True
    if not is_registry_op(type_) and not is_control_flow(type_):
        return True
    own = block.vars
    for name in op.outputs:
        var = own.get(name)  # (an output is nearly always the block's own)
        if (var if var is not None else block.var(name)).persistable:
            return True
    for sub in op.blocks:
        for inner in sub.ops:
            if has_side_effects(sub, inner):
                return True
    return False


def is_pure(block: Block, op: Operator) -> bool:
    """A deterministic registry op without side effects: same inputs, same result."""
    return is_registry_op(op.type) and not is_random(op) and not has_side_effects(block, op)


def assigned_state(program: Program) -> set:
    """The parameters some ``assign_param`` writes, and every view of them (their values change
    where the write runs, so operators reading them must stay where they are)."""
    names = {op.inputs[0] for _, op in walk_ops(program.global_block())
             if op.type == "assign_param"}
    if names:
        for _, op in walk_ops(program.global_block()):
            if is_registry_op(op.type) and get_op(op.type).view and op.inputs[0] in names:
                names.add(op.outputs[0])
    return names


def attr_names(op: Operator, names) -> list:
    """Variable names (members of ``names``) that a control-flow operator's attributes refer to
    (branch results, loop outputs, saved values). Registry ops' attributes are never names."""
    if is_registry_op(op.type):
        return []
    found: list = []
    _collect_strings(op.attrs, names, found)
    return found


def _collect_strings(value, names, found: list) -> None:
    if isinstance(value, str):
        if value in names:
            found.append(value)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _collect_strings(v, names, found)
    elif isinstance(value, dict):
        for v in value.values():
            _collect_strings(v, names, found)


def walk_ops(block: Block) -> Iterator:
    """``(block, op)`` for every operator of ``block`` and its sub-blocks, in program order
    (a control-flow operator comes after the operators of its sub-blocks)."""
    for op in block.ops:
        for sub in op.blocks:
            yield from walk_ops(sub)
        yield block, op


def readers(program: Program) -> dict:
    """name -> the operators that read it directly (as an input, or, for a control-flow
    operator, through its attributes), each listed once."""
    names = None  # every variable name, for control-flow attributes (built when one comes)
    result: dict = {}
    for _, op in walk_ops(program.global_block()):
        read = op.input_names()
        if not is_registry_op(op.type):
            if names is None:
                names = {name for block in program.blocks for name in block.vars}
            read = dict.fromkeys([*read, *attr_names(op, names)])
        elif len(read) > 1:
            read = dict.fromkeys(read)
        for name in read:
            entry = result.get(name)
            if entry is None:
                result[name] = [op]
            else:
                entry.append(op)
    return result


def resolve_fetch(program: Program, fetch) -> tuple:
    """The fetch targets as names. ``None`` means the program's *sinks*: outputs of global-block
    operators that nothing reads (what a caller of an un-annotated program can fetch)."""
    block = program.global_block()
    if fetch is None:
        read = readers(program)
        return tuple(name for op in block.ops for name in op.outputs if name not in read)
    names = []
    for target in fetch:
        name = target if isinstance(target, str) else getattr(target, "name", None)
        if name is None or block.find_var(name) is None:
            raise ValueError(f"fetch target {target!r} is not a variable of the program's "
                             "global block")
        names.append(name)
    return tuple(names)


def place_early(block: Block, ops: list, early: set) -> list:
    """``ops`` (a flat block's operators, in order) with each operator whose id is in ``early``
    moved up to right after the last operator defining one of its inputs, and never above an
    operator with side effects or sub-blocks (an ``assign_param`` may write what it reads). The
    moved ones keep their own order; the others keep their places."""
    keys, made = [], {}
    barrier = (-1, 0, 0)
    variables = block.vars
    for k, op in enumerate(ops):
        if id(op) in early:
            latest = max((made[n] for n in op.input_names() if n in made), default=barrier)
            key = (max(latest, barrier)[0], 1, k)
        else:
            key = (k, 0, 0)
            kind = op.type
            # (has_side_effects, less the lookups of every output through the scopes)
            if op.blocks or kind in SIDE_EFFECT_OPS or kind == "py_func" or \
                    not is_registry_op(kind) or \
                    any(variables[n].persistable for n in op.outputs if n in variables):
                barrier = key
        keys.append(key)
        for name in op.outputs:
            made[name] = key
    order = sorted(range(len(ops)), key=keys.__getitem__)
    return [ops[k] for k in order]
