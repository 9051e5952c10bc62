"""Static reverse-mode autodiff: :func:`gradients` appends backward operators to a program.

The backward of each forward operator comes from the same registry rules as eager autograd
(``rule(g, out, *inputs, **attrs)``, variadic rules with ``input_index``), run by the static
interpreter so they append operators; inputs an op did not declare in ``save`` reach the rule as
:class:`TensorMeta`; broadcast gradients are reduced by the one ``reduce_grad``; gradients of a
value used several times are added.

Control flow:

- ``cond``: a backward ``cond`` on the same predicate, each branch holding the backward of the
  forward branch. Values of a forward branch that its backward needs are exported as extra
  outputs of the forward ``cond`` (an empty array when the other branch ran, whose backward
  never reads them).
- ``while``: the forward loop pushes, after each iteration, one record of the body values the
  backward needs onto a stack (a Python list, named by the loop's extra ``stack`` output); a
  ``while_grad`` operator then runs the backward of the body once per record, last first,
  carrying the gradients of the loop variables and accumulating those of values read from
  outside the loop. The trip count is whatever the forward ran.

Each level of nesting resolves the forward values its backward reads through a *resolver*:
the name of a value in the forward block -> the Variable standing for it where backward is being
built (the value itself, an exported branch value, or a stack slot of the enclosing loop), so
cond in while in cond... nests to any depth.

Python callbacks (``py_func``) pass no gradient: their outputs are constants to autodiff.

Dynamic dims: a gradient that a rule built with a dim of 1 where its input's dim is only known
at run time (``sum`` broadcasts back to its input's static shape) is broadcast to that input's
run-time shape. An unsaved input with such dims reaches its rule as a ``TensorMeta`` whose
``value()`` resolves the input, so rules that slice or allocate by sizes read them at run time:
``concat`` (one unknown size comes from the gradient itself, more from the inputs), ``getitem``
(scatters into zeros of its input's run-time shape). ``gather``'s backward still needs its
input's shape known when the program is built. Gradients
through the backward of a while loop (double backward through ``while_loop``) are not supported.
"""
from __future__ import annotations

from ..dtypes import int64
from ..ops import creation as C
from ..ops import elementwise as E
from ..ops import shape_ops as S
from ..ops.composite import reduce_grad
from ..ops.registry import TensorLike, TensorMeta, apply, get_op
from .control_flow import build_in, new_sub_block, outer_reads, to_variable
from .fused import FUSIBLE_OPS
from . import ir
from .ir import Operator, Program, Variable

__all__ = ["gradients"]

# ops whose rules give each input a gradient of exactly its run-time shape, never a broadcast
# one (cat's pieces of its gradient, getitem's scatter into zeros of its input's shape,
# linear's g @ weight for an input it never broadcasts)
_EXACT_GRADIENT_OPS = frozenset({"concat", "getitem", "linear"})


def _exact_broadcast(op, block, i: int) -> bool:
    """Whether input ``i`` of the broadcasting elementwise ``op`` (``FUSIBLE_OPS``) has the
    output's run-time shape: it has the output's rank and, at each dim of it known only at run
    time, every other tensor input lacks that dim or has it as 1 (a bias added to a batch of
    unknown size). Its gradient then needs no run-time reduction, so the backward does not
    keep that input's value alive only to read its shape."""
    shape = block.var(op.inputs[i]).shape
    rank = len(block.var(op.outputs[0]).shape)
    if len(shape) != rank:
        return False
    others = [block.var(n).shape for j, n in enumerate(op.inputs)
              if j != i and isinstance(n, str)]
    for d, size in enumerate(shape):
        if size != -1:
            continue
        for other in others:
            k = d - (rank - len(other))
            if k >= 0 and other[k] != 1:
                return False
    return True


def gradients(targets, inputs, target_gradients=None, no_grad_set=None) -> list:
    """Append the backward of ``targets`` to their program; return d(sum of targets)/d(input)
    for each of ``inputs`` (a Variable, or None where an input does not reach any target).

    ``inputs`` are Variables or eager tensors the program captured (parameters).
    ``target_gradients`` (same length as ``targets``) seed the backward; by default ones.
    ``no_grad_set`` (Variables, their names or captured tensors, as Paddle's): values no
    gradient flows through, as if they were constants (an input among them gets None).
    The backward is built into the program's current block (the global one outside of
    control-flow functions), from its operators in reverse.

    Example::

        >>> import hybridfw as hf
        >>> w = hf.tensor([1.0, 2.0], requires_grad=True)
        >>> prog = hf.static.Program()
        >>> with hf.static.program_guard(prog):
        ...     x = hf.static.data("x", [2])
        ...     gw, gx = hf.static.gradients((x * w).sum(), [w, x])
        >>> gw_value, = hf.static.Executor().run(prog, feed={"x": hf.tensor([3.0, 4.0])},
        ...                                      fetch_list=[gw])
        >>> gw_value.tolist()
        [3.0, 4.0]
    """
    targets = _as_list(targets, "targets")
    inputs = _as_list(inputs, "inputs")
    for t in targets:
        if not isinstance(t, Variable):
            raise TypeError(f"gradients: targets must be static Variables, got "
                            f"{type(t).__name__}; build them inside hf.static.program_guard")
        if not t.dtype.is_floating_point:
            raise TypeError(f"gradients: target {t.name!r} has dtype {t.dtype}; only "
                            "floating-point targets have gradients")
    program = targets[0].block.program
    names = [_input_name(program, x) for x in inputs]
    blocked = frozenset() if no_grad_set is None else frozenset(
        n for n in (x if isinstance(x, str) else _input_name(program, x)
                    for x in _as_list(no_grad_set, "no_grad_set")) if n is not None)
    if target_gradients is None:
        target_gradients = [None] * len(targets)
    target_gradients = _as_list(target_gradients, "target_gradients")
    if len(target_gradients) != len(targets):
        raise ValueError(f"gradients: got {len(target_gradients)} target_gradients for "
                         f"{len(targets)} targets")
    block = program.current_block()
    # the backward reads values a branch may have left unassigned (the zeros standing in for
    # them: their shape, for a gradient of zeros) without using them as the user's code would:
    # no check that they were assigned (static.builder.require_defined) goes into it
    guarded, program.maybe_undefined = program.maybe_undefined, {}
    try:
        with build_in(program, block):
            grads: dict = {}
            for t, g in zip(targets, target_gradients):
                g = _fill_like(program, t, 1.0) if g is None else _seed(program, t, g)
                _accumulate(grads, t.name, g)
            reachable = _reachable(block, {n for n in names if n is not None})
            _Backward(program, blocked).run(block, grads, block.var, reachable)
    finally:
        program.maybe_undefined = guarded
    return [None if n is None or n in blocked else grads.get(n) for n in names]


def _as_list(value, what: str) -> list:
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    if value is None:
        raise TypeError(f"gradients: {what} must be a Variable or a list of them, got None")
    return [value]


def _input_name(program: Program, x):
    if isinstance(x, Variable):
        if x.block.program is not program:
            raise ValueError(f"gradients: input {x.name!r} belongs to another program")
        return x.name
    if isinstance(x, TensorLike):  # a parameter: the program captured it, or never used it
        return program._captured.get(id(x))
    raise TypeError(f"gradients: inputs must be Variables or tensors, got {type(x).__name__}")


def _seed(program, target, g):
    g = to_variable(program, g, None if isinstance(g, TensorLike) else target.dtype)
    if len(g.shape) != len(target.shape) or any(
            a != b and -1 not in (a, b) for a, b in zip(g.shape, target.shape)):
        raise ValueError(f"gradients: target gradient of shape {g.shape} does not match target "
                         f"{target.name!r} of shape {target.shape}")
    return g if g.dtype is target.dtype else apply(E.cast, g, dtype=target.dtype)


# ---- small pieces -------------------------------------------------------------------------------
def _accumulate(grads: dict, name: str, g) -> None:
    prev = grads.get(name)
    grads[name] = g if prev is None else prev + g


def _fill_like(program, like, value):
    """A tensor of ``like``'s shape and dtype filled with ``value``. A shape with unknown dims
    is taken from ``like`` at run time: ``where`` over a mask of ``like``'s shape picks ``value``
    either way (``like * 0`` would turn inf and nan into nan)."""
    if -1 not in like.shape:
        return apply(C.full, shape=tuple(like.shape), value=value, dtype=like.dtype,
                     device=str(program.device))
    out = apply(E.where, apply(E.isnan, like), value, value)
    return out if out.dtype is like.dtype else apply(E.cast, out, dtype=like.dtype)


def _fit(g, var, resolve, exact: bool = False):
    """``g`` brought to ``var``'s shape and dtype: summed over broadcast dims by the one generic
    ``reduce_grad``, and broadcast up where ``var`` has a dim only known at run time that ``g``
    has as 1 or lacks (rules that rebuild an input's shape from its static shape, as ``sum``'s
    does, keep such a dim at 1); ``resolve(var.name)`` gives ``var``'s value, read only then.
    A dim unknown in ``var`` and larger in ``g`` is taken as not broadcast.

    ``exact``: ``g`` is known to have ``var``'s run-time shape (a sum of gradients fitted
    before, or the gradient of a rule that never broadcasts), so nothing needs ``var``'s value:
    a loop then pushes no copy of it for its backward."""
    shape = var.shape
    if len(g.shape) == len(shape) and all(
            a == b or b == -1 or (a == -1 and b != 1) for a, b in zip(g.shape, shape)):
        shape = g.shape
    if tuple(g.shape) != tuple(shape) or g.dtype is not var.dtype:
        g = reduce_grad(g, shape, var.dtype)
    if exact:
        return g
    lead = len(var.shape) - len(g.shape)
    if lead > 0 or any(b == -1 and a == 1 for a, b in zip(g.shape, var.shape[lead:])):
        g = apply(E.where, apply(E.isnan, resolve(var.name)), g, g)
    if any(b == -1 and a != 1 for a, b in zip(g.shape, var.shape)):
        # a dim known only at run time may still have been broadcast (size 1 then): reduce to
        # the input's actual shape when the program runs
        g = apply(S.sum_to_like, g, resolve(var.name))
    return g


def _is_float(block, name) -> bool:
    return block.var(name).dtype.is_floating_point


def _reachable(block, seeds: set) -> set:
    """Names in ``block`` that depend on ``seeds`` (a control-flow op depends on all it reads)."""
    reached = set(seeds)
    for op in block.ops:
        if any(n in reached for n in op.input_names()):
            reached.update(op.outputs)
    return reached


def _saved_indices(opdef, count: int):
    save = opdef.save
    return set(range(count)[save]) if isinstance(save, slice) else set(save)


def _referenced(block) -> set:
    names = set()
    for op in block.ops:
        names.update(op.input_names())
    return names


# ---- the backward builder ---------------------------------------------------------------------
class _Backward:
    """Builds backward operators into the program's current block (and sub-blocks of it)."""

    def __init__(self, program: Program, blocked: frozenset = frozenset()):
        self.program = program
        self.blocked = blocked  # names no gradient flows through (gradients' no_grad_set)
        # the origin of every backward operator: the user's line that asked for the gradients
        # when the origin provider finds one (asked once here), else the line of the forward
        # operator it differentiates (to_static: the user's code has returned by then); no
        # provider then walks the Python stack once per backward operator
        provider = ir._origin_provider
        self.call_origin = provider() if provider is not None else None

    def run(self, block, grads: dict, resolve, reachable: set) -> None:
        """Walk ``block``'s operators in reverse, adding to ``grads`` (forward name -> gradient
        Variable) the gradients of every reachable floating-point value they read."""
        no_grad = self.program.no_grad_values
        blocked = self.blocked
        for op in reversed(block.ops):
            if blocked:  # their gradients stop here, before their producer's rule
                for o in blocked.intersection(op.outputs):
                    grads.pop(o, None)
            if not any(grads.get(o) is not None for o in op.outputs):
                continue
            if no_grad and no_grad.issuperset(op.outputs):  # built under hf.no_grad()
                continue
            previous = ir._origin_provider
            ir._origin_provider = (lambda origin=self.call_origin or op.origin: origin)
            try:
                self._gradient(op, block, grads, resolve, reachable)
            finally:
                ir._origin_provider = previous

    def _gradient(self, op, block, grads, resolve, reachable) -> None:
        if op.type == "cond":
            self._cond(op, block, grads, resolve, reachable)
        elif op.type == "while":
            self._while(op, block, grads, resolve, reachable)
        elif op.type == "py_func":  # a Python callback: its outputs are constants here
            return
        elif op.type == "while_grad":
            raise ValueError(
                "gradients: differentiating the backward of a while loop (double backward "
                "through while_loop) is not supported")
        else:
            self._primitive(op, block, grads, resolve, reachable)

    def _primitive(self, op, block, grads, resolve, reachable) -> None:
        opdef = get_op(op.type)
        rules = opdef.vjp
        if rules is None:
            return
        wanted = [i for i, n in enumerate(op.inputs)
                  if isinstance(n, str) and n in reachable and _is_float(block, n)]
        if not wanted:
            return
        saved = _saved_indices(opdef, len(op.inputs))
        args = []
        for i, name in enumerate(op.inputs):
            if not isinstance(name, str):
                args.append(name)
            elif i in saved:
                args.append(resolve(name))
            else:
                var = block.var(name)
                # a dim known only at run time: the rule may read the value's run-time shape
                # (resolved only if it does, so nothing is kept alive otherwise)
                resolve_value = (lambda n=name: resolve(n)) if -1 in var.shape else None
                args.append(TensorMeta(var.shape, var.dtype, resolve_value))
        out = resolve(op.outputs[0]) if opdef.save_output else None
        g = grads[op.outputs[0]]
        for i in wanted:
            if opdef.variadic:
                gi = rules[0](g, out, *args, input_index=i, **op.attrs)
            else:
                rule = rules[i] if i < len(rules) else None
                gi = None if rule is None else rule(g, out, *args, **op.attrs)
            if gi is not None:
                name = op.inputs[i]
                exact = op.type in _EXACT_GRADIENT_OPS or (
                    op.type in FUSIBLE_OPS and _exact_broadcast(op, block, i))
                _accumulate(grads, name, _fit(gi, block.var(name), resolve, exact))

    # ---- cond ------------------------------------------------------------------------------------
    def _cond(self, op, block, grads, resolve, reachable) -> None:
        program = self.program
        captured = [n for n in dict.fromkeys(op.inputs[1:])
                    if n in reachable and _is_float(block, n)]
        if not captured:
            return
        out_grads = [grads.get(o) for o in op.outputs]
        outer = program.current_block()
        first_new_block = len(program.blocks)
        sides = ("true_outputs", "false_outputs")
        branches = []
        for side, forward in zip(sides, op.blocks):
            backward = new_sub_block(program, outer)
            with build_in(program, backward):
                branch_grads: dict = {}
                for name, g in zip(op.attrs[side], out_grads):
                    if name is not None and g is not None:
                        _accumulate(branch_grads, name, g)
                self.run(forward, branch_grads,
                         self._branch_resolver(op, block, side, forward, resolve),
                         _reachable(forward, reachable))
            branches.append((backward, branch_grads))
        needed = [c for c in captured if any(c in bg for _, bg in branches)]
        if not needed:
            del program.blocks[first_new_block:]
            return
        results = []
        for backward, branch_grads in branches:
            with build_in(program, backward):
                results.append(tuple(
                    _fit(branch_grads[c], block.var(c), resolve, True).name if c in branch_grads
                    else _fill_like(program, resolve(c), 0.0).name for c in needed))
        outs = [outer.create_var(block.var(c).shape, block.var(c).dtype) for c in needed]
        reads = outer_reads([(b, names) for (b, _), names in zip(branches, results)])
        outer.append_op(Operator(
            "cond", [resolve(op.inputs[0]).name, *reads], [o.name for o in outs],
            {"true_outputs": results[0], "false_outputs": results[1]},
            blocks=tuple(b for b, _ in branches)))
        for c, g in zip(needed, outs):
            _accumulate(grads, c, g)

    def _branch_resolver(self, op, block, side, forward, resolve):
        """Forward-branch values become extra outputs of the forward cond (once each)."""
        program = self.program
        other = "false_outputs" if side == "true_outputs" else "true_outputs"

        def resolve_branch(name):
            if name not in forward.vars:
                return resolve(name)
            names = op.attrs[side]
            if name in names:
                index = names.index(name)
            else:
                var = forward.vars[name]
                exported = block.create_var(var.shape, var.dtype, program.unique_name("branch"))
                op.outputs = op.outputs + (exported.name,)
                op.attrs[side] = names + (name,)
                op.attrs[other] = op.attrs[other] + (None,)
                index = len(op.outputs) - 1
            return resolve(op.outputs[index])
        return resolve_branch

    # ---- while -----------------------------------------------------------------------------------
    def _loop_reachable(self, op, reachable):
        """Loop variables that depend on the inputs (a fixed point over the body), and the body
        names that do."""
        attrs = op.attrs
        count = len(attrs["body_args"])
        live = {k for k in range(count) if op.inputs[k] in reachable}
        while True:
            body_reached = _reachable(op.blocks[1], reachable | {attrs["body_args"][k]
                                                                 for k in live})
            grown = live | {k for k in range(count) if attrs["body_outputs"][k] in body_reached}
            if grown == live:
                return live, body_reached
            live = grown

    def _while(self, op, block, grads, resolve, reachable) -> None:
        program = self.program
        attrs = op.attrs
        count = len(attrs["body_args"])
        body = op.blocks[1]
        init, finals = op.inputs[:count], op.outputs[:count]
        live, body_reached = self._loop_reachable(op, reachable)
        carried = [k for k in sorted(live) if _is_float(block, finals[k])]
        # (a value only the condition reads has no gradient through the loop: None, as eager,
        # not zeros)
        body_reads = _referenced(body)
        captured = [n for n in dict.fromkeys(op.inputs[count:])
                    if n in reachable and _is_float(block, n) and n in body_reads]
        if not carried and not captured:
            return
        outer = program.current_block()
        start = [grads[finals[k]] if grads.get(finals[k]) is not None
                 else _fill_like(program, resolve(finals[k]), 0.0) for k in carried]
        start += [_fill_like(program, resolve(c), 0.0) for c in captured]

        backward = new_sub_block(program, outer)
        unique = program.unique_name
        states = [backward.create_var(block.var(finals[k]).shape, block.var(finals[k]).dtype,
                                      unique("grad")) for k in carried]
        states += [backward.create_var(block.var(c).shape, block.var(c).dtype, unique("grad"))
                   for c in captured]
        restored: dict = {}  # forward body name -> the Variable a stack record restores

        def resolve_body(name):
            if name not in body.vars:
                return resolve(name)
            var = restored.get(name)
            if var is None:
                fwd = body.vars[name]
                var = restored[name] = backward.create_var(fwd.shape, fwd.dtype,
                                                           unique("saved"))
            return var

        with build_in(program, backward):
            body_grads: dict = {}
            for k, g in zip(carried, states):
                _accumulate(body_grads, attrs["body_outputs"][k], g)
            self.run(body, body_grads, resolve_body, body_reached)
            results = []
            for k, state in zip(carried, states):
                arg = attrs["body_args"][k]
                g = body_grads.get(arg)
                if g is not None:
                    results.append(_fit(g, body.vars[arg], resolve_body, True))
                else:  # this variable did not reach the outputs in this iteration
                    like = state if -1 not in state.shape else resolve_body(arg)
                    results.append(_fill_like(program, like, 0.0))
            for c, state in zip(captured, states[len(carried):]):
                g = body_grads.get(c)
                results.append(state if g is None else
                               state + _fit(g, block.var(c), resolve, True))

        used = _referenced(backward) | {r.name for r in results}
        for name, var in list(restored.items()):
            if var.name not in used:
                del backward.vars[var.name]
                del restored[name]
        stack = self._stack_of(op, block)
        record = list(attrs.get("saved", ()))
        for name in restored:
            if name not in record:
                record.append(name)
        attrs["saved"] = tuple(record)

        body_outputs = tuple(r.name for r in results)
        outs = [outer.create_var(s.shape, s.dtype) for s in states]
        outer.append_op(Operator(
            "while_grad",
            [resolve(stack).name, *(s.name for s in start),
             *outer_reads([(backward, body_outputs)])],
            [o.name for o in outs],
            {"body_args": tuple(s.name for s in states), "body_outputs": body_outputs,
             "saved_args": tuple(v.name for v in restored.values()),
             "saved_index": tuple(record.index(n) for n in restored)},
            blocks=(backward,)))
        for k, g in zip(carried, outs):
            if init[k] in reachable:
                _accumulate(grads, init[k], _fit(g, block.var(init[k]), resolve, True))
        for c, g in zip(captured, outs[len(carried):]):
            _accumulate(grads, c, g)

    def _stack_of(self, op, block) -> str:
        """The forward loop's stack output, added on first use."""
        name = op.attrs.get("stack")
        if name is None:
            stack = block.create_var((0,), int64, self.program.unique_name("stack"))
            op.outputs = op.outputs + (stack.name,)
            op.attrs["stack"] = name = stack.name
        return name
