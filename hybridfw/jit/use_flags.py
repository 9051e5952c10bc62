"""Which inputs a run of a traced program used: a parameter only an untaken tensor branch reads
gets no gradient (None, as eager) rather than zeros (see :func:`_use_flags`).
"""
from __future__ import annotations

from ..static.passes.analysis import walk_ops

__all__: list = []  # (used by hybridfw.jit.static_function)


def _gradient_carriers(block, targets) -> set:
    """Names of ``block`` whose gradient can reach ``targets``: floating-point values read by
    an operator that passes gradients on from an output that is one (a control-flow operator
    from any output to all it reads); a value only a comparison or a Python callback reads is
    not one."""
    from ..ops.registry import get_op
    from ..static.verifier import is_registry_op
    carriers = set(targets)
    for op in reversed(block.ops):
        if op.type == "py_func" or not any(o in carriers for o in op.outputs):
            continue
        if is_registry_op(op.type) and get_op(op.type).vjp is None:
            continue
        carriers.update(n for n in op.input_names() if block.var(n).dtype.is_floating_point)
    return carriers


def _use_flags(program, names, targets) -> list:
    """Per name (a differentiable input or parameter; None: not captured), the name of a new
    bool value of the program that says whether a run uses it, or None when every run does.

    Eager autograd gives an input the branch it sits in did not run no gradient at all (None),
    and an optimizer then leaves that parameter alone (no weight decay, no momentum step); the
    static backward computes zeros for it. The flag lets the backward report None instead, as
    eager does, for a value read only by operators inside branches of conds of the global
    block (the flag: the OR of those branches' conditions); a branch that returns the value
    itself (``return x`` on one path) reads it too, and so do the blocks nested in a branch (an
    inner branch, a loop body: used when that outer branch runs; the inner condition is not
    tracked, so an untaken inner branch of a taken outer one still gives zeros). A value read
    anywhere else (the global block, a loop of the global block, a loop's initial values) counts
    as always used, except by an operator of the global block whose result passes no gradient
    on to ``targets`` (the outputs differentiated), such as ``y.sum()`` in the condition
    ``if y.sum() > 0``."""
    from ..ops import elementwise as E
    from ..ops.registry import apply
    block = program.global_block()
    # id(sub-block) -> (cond operator of the global block, index of its branch) that holds it,
    # at any depth: a value read only inside a branch, however deeply nested there (an inner
    # branch, a loop body), is unused on the runs that do not take that branch
    owner = {}
    for op in block.ops:
        if op.type == "cond":
            for k, sub in enumerate(op.blocks):
                for inner in _nested_blocks(sub):
                    owner[id(inner)] = (op, k)
    wanted = {n for n in names if n is not None}
    if not owner or not wanted:
        return [None] * len(names)
    position = {id(op): i for i, op in enumerate(block.ops)}
    carriers = _gradient_carriers(block, targets)
    branches: dict = {n: set() for n in wanted}  # name -> {(op position, branch)}; None: always
    for sub, op in walk_ops(block):
        if op.type == "py_func":  # a Python callback passes no gradient
            continue
        if sub is block and not any(o in carriers for o in op.outputs):
            continue  # (its result reaches the outputs differentiated by no gradient)
        where = owner.get(id(sub))
        if op.type != "cond":  # (a loop reads its initial values and what its body reads)
            reads = [(name, where) for name in op.input_names()]
        else:
            # its branches' operators were seen on their own; what remains is a value a branch
            # passes straight through, used when that branch runs
            reads = [(name, (op, k) if sub is block else where)
                     for k, side in enumerate(("true_outputs", "false_outputs"))
                     for name in op.attrs[side] if name is not None and name not in
                     op.blocks[k].vars]
        for name, place in reads:
            if name not in wanted or branches[name] is None:
                continue
            branches[name] = None if place is None else \
                branches[name] | {(position[id(place[0])], place[1])}
    flags = []
    made: dict = {}  # the same branches: the same flag
    for name in names:
        used = branches.get(name) if name is not None else None
        if not used:  # (an empty set: read by no registry operator; left as it is)
            flags.append(None)
            continue
        key = tuple(sorted(used))
        flag = made.get(key)
        if flag is None:
            terms = []
            for i, k in key:
                pred = block.var(block.ops[i].inputs[0])
                terms.append(pred if k == 0 else apply(E.bitwise_not, pred))
            value = terms[0]
            for term in terms[1:]:
                value = apply(E.bitwise_or, value, term)
            flag = made[key] = value.name
        flags.append(flag)
    return flags


def _nested_blocks(block):
    """``block`` and every block nested in its operators, at any depth."""
    yield block
    for op in block.ops:
        for sub in op.blocks:
            yield from _nested_blocks(sub)
