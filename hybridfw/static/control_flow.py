"""Control flow for eager and static code alike: :func:`cond` and :func:`while_loop`.

When the predicate (``cond``) or the loop variables (``while_loop``) are not static Variables and
no program is being built, they run plain Python. Otherwise each builds its functions into
sub-blocks and appends one operator. The operators, as the executor, the printer and
:func:`hf.static.gradients` read them:

``cond``
    inputs ``(pred, *captured)``, outputs ``outs``, blocks ``(true_block, false_block)``; attrs
    ``true_outputs``/``false_outputs`` give, per output, the name the branch yields (an inner
    value, an outer one, or a constant). ``None`` means the branch does not produce that output
    (it then holds zeros): only for branch values exported for backward
    (:mod:`.autodiff`), which reads them on the same branch only.
``while``
    inputs ``(*init, *captured)``, outputs ``(*final[, stack])``, blocks ``(cond_block,
    body_block)``; attrs ``cond_args``/``body_args`` (each block's loop variables), ``cond_output``
    and ``body_outputs``. Once differentiated it also has ``saved`` (body values pushed, one record
    per iteration, onto the stack) and ``stack`` (the name of its last output).
``while_grad`` (appended by :mod:`.autodiff`)
    inputs ``(stack, *init, *captured)``, outputs ``final``, blocks ``(body,)``; attrs
    ``body_args``, ``body_outputs``, ``saved_args`` and ``saved_index``: the body runs once per
    record of the stack, last record first, with ``saved_args`` set from the record's items
    ``saved_index``.

The stack is a Python list of records (tuples of arrays), made anew by each run of the forward
loop. The ``stack`` variable holds a token carrying it (:class:`~.loop_stack.LoopStack`: an
empty int64 array, declared ``(0,)`` int64, whose ``records`` copies and views keep), so it
flows through the program like any value: an enclosing loop pushes the token of each run of an
inner loop, the backward reads the list through whichever token it is given, and a token fetched
from one run can be fed to another (a backward program run after its forward program).

Conventions every construct keeps: variable names are unique in the program, so all blocks share
one slot space in the executor; a sub-block's *block arguments* (the loop variables) are variables
of that block that no operator defines, set by the construct before the block runs; and every
name a sub-block reads from enclosing blocks is listed among its operator's inputs ("captured"),
so liveness, ordering and autodiff see every use at the operator itself.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np

from ..dtypes import as_dtype, bool_
from ..ops.registry import TensorLike, current_interpreter, use_interpreter
from .builder import StaticInterpreter, check_same_program
from .executor import OP_COMPILERS, compile_block
from .ir import Block, Operator, Program, Variable
from .loop_stack import new_loop_stack

__all__ = ["cond", "while_loop"]

_SCALARS = (int, float, bool)


# ---- building helpers (shared with autodiff) -------------------------------------------------
def active_program() -> Program | None:
    """The program the active static interpreter records into, or None in eager mode."""
    interpreter = current_interpreter()
    return interpreter.program if isinstance(interpreter, StaticInterpreter) else None


@contextlib.contextmanager
def build_in(program: Program, block: Block):
    """Record registry ops into ``block`` of ``program`` while the ``with`` body runs."""
    previous = program._current
    program._current = block.idx
    try:
        if active_program() is program:
            yield block
        else:
            with use_interpreter(StaticInterpreter(program)):
                yield block
    finally:
        program._current = previous


def new_sub_block(program: Program, parent: Block) -> Block:
    """A new block nested in ``parent``."""
    previous = program._current
    program._current = parent.idx
    try:
        return program.new_block()
    finally:
        program._current = previous


def to_variable(program: Program, value, dtype=None) -> Variable:
    """``value`` as a Variable: eager tensors are captured, Python and numpy values become
    constants (of ``dtype`` when given)."""
    if isinstance(value, Variable):
        check_same_program(program, value)
        return value
    if isinstance(value, TensorLike):
        return program.value_of(value)
    if dtype is not None:
        return program.constant(np.asarray(value, dtype=as_dtype(dtype).np))
    return program.constant(value)


def outer_reads(parts) -> list:
    """Names that blocks read from enclosing blocks, in first-use order.

    ``parts`` is a list of ``(block, names)``: each block's operator inputs (a nested control-flow
    operator already lists what its own sub-blocks read) plus ``names`` the construct takes from
    the block (branch outputs, loop results), less what the block itself defines.
    """
    reads: dict = {}
    for block, extra in parts:
        local = block.vars
        for op in block.ops:
            for name in op.input_names():
                if name not in local:
                    reads.setdefault(name)
        for name in extra:
            if name is not None and name not in local:
                reads.setdefault(name)
    return list(reads)


# ---- nested outputs -----------------------------------------------------------------------------
def _flatten(tree, leaves: list, paths: list, path: str = ""):
    """Collect the leaves of nested tuples/lists/dicts (None is structure, not a leaf); return
    a hashable description of the structure."""
    if isinstance(tree, (list, tuple)):
        return ("seq", type(tree), tuple(_flatten(v, leaves, paths, f"{path}[{i}]")
                                         for i, v in enumerate(tree)))
    if isinstance(tree, dict):
        keys = tuple(tree)
        return ("dict", keys, tuple(_flatten(tree[k], leaves, paths, f"{path}[{k!r}]")
                                    for k in keys))
    if tree is None:
        return ("none",)
    leaves.append(tree)
    paths.append(path)
    return ("leaf",)


def _unflatten(structure, leaves):
    it = iter(leaves)

    def build(s):
        kind = s[0]
        if kind == "leaf":
            return next(it)
        if kind == "none":
            return None
        if kind == "dict":
            return {k: build(c) for k, c in zip(s[1], s[2])}
        children = [build(c) for c in s[2]]
        seq_type = s[1]
        if hasattr(seq_type, "_fields"):  # a namedtuple
            return seq_type(*children)
        return seq_type(children)
    return build(structure)


def _describe(structure) -> str:
    kind = structure[0]
    if kind == "leaf":
        return "tensor"
    if kind == "none":
        return "None"
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {_describe(c)}" for k, c in zip(structure[1],
                                                                         structure[2])) + "}"
    inner = ", ".join(_describe(c) for c in structure[2])
    if structure[1] is list:
        return f"[{inner}]"
    return f"({inner}{',' if len(structure[2]) == 1 else ''})"


def _merge_shape(construct: str, what: str, a, b, a_label: str, b_label: str) -> tuple:
    """Dims that agree stay, dims that differ become -1; the number of dims must agree."""
    if len(a) != len(b):
        raise ValueError(f"{construct}: {what} has shape {tuple(a)} in {a_label} but "
                         f"{tuple(b)} in {b_label}; the number of dims must agree")
    return tuple(x if x == y else -1 for x, y in zip(a, b))


def _check_flag(construct: str, what: str, value: Variable) -> None:
    if value.dtype is not bool_ or any(s not in (1, -1) for s in value.shape):
        raise TypeError(f"{construct}: {what} must be a bool tensor with one element, got shape "
                        f"{value.shape} and dtype {value.dtype}")


# ---- cond ---------------------------------------------------------------------------------------
@contextlib.contextmanager
def _discard_blocks_on_error(program: Program):
    """Drop the blocks a construct built when building it fails, so none stays unreferenced."""
    first_new_block = len(program.blocks)
    try:
        yield first_new_block
    except BaseException:
        del program.blocks[first_new_block:]
        raise


def _call_branch(fn, label):
    if fn is None:
        return None
    if not callable(fn):
        raise TypeError(f"cond: {label} must be a callable taking no arguments, got "
                        f"{type(fn).__name__}")
    return fn()


def _build_branch(program: Program, outer: Block, fn, label: str):
    block = new_sub_block(program, outer)
    with build_in(program, block):
        result = _call_branch(fn, label)
    return block, result


def cond(pred, true_fn: Callable | None, false_fn: Callable | None):
    """``true_fn()`` if ``pred`` else ``false_fn()``, in eager and static code alike.

    Eager (``pred`` a Python value, or an eager bool tensor with one element as in a program):
    plain Python. Static (``pred`` a bool
    Variable with one element): both functions are built into sub-blocks of one ``cond``
    operator and the branch is chosen when the program runs. The branches must return the same
    structure (a tensor, or nested tuples/lists/dicts of them, or None) with equal dtypes and
    the same number of dims; a dim that differs between branches is -1 in the result. Values of
    the enclosing code are read directly; eager tensors and Python numbers a branch returns become
    constants.

    Example::

        >>> import hybridfw as hf
        >>> prog = hf.static.Program()
        >>> with hf.static.program_guard(prog):
        ...     x = hf.static.data("x", [2])
        ...     y = hf.static.nn.cond(x.sum() > 0, lambda: x * 2.0, lambda: -x)
        >>> hf.static.Executor().run(prog, feed={"x": hf.ones(2)}, fetch_list=[y])[0].tolist()
        [2.0, 2.0]
    """
    if not isinstance(pred, Variable):
        if isinstance(pred, TensorLike):  # what a program would refuse is refused eagerly too
            _check_flag("cond", "pred", pred)
        return _call_branch(true_fn, "true_fn") if bool(pred) else \
            _call_branch(false_fn, "false_fn")
    program = pred.block.program
    _check_flag("cond", "pred", pred)
    outer = program.current_block()
    with _discard_blocks_on_error(program):
        true_block, true_out = _build_branch(program, outer, true_fn, "true_fn")
        false_block, false_out = _build_branch(program, outer, false_fn, "false_fn")
        structure, true_names, false_names, outs = _branch_outputs(program, outer, true_out,
                                                                   false_out)
    captured = outer_reads([(true_block, true_names), (false_block, false_names)])
    outer.append_op(Operator("cond", [pred.name, *captured], [o.name for o in outs],
                             {"true_outputs": tuple(true_names),
                              "false_outputs": tuple(false_names)},
                             blocks=(true_block, false_block)))
    return _unflatten(structure, outs)


def _branch_outputs(program, outer, true_out, false_out):
    """Check that the branches' results agree; return their structure, the names each branch
    yields and the cond's output Variables (in ``outer``)."""
    true_leaves, false_leaves, paths = [], [], []
    structure = _flatten(true_out, true_leaves, paths)
    false_structure = _flatten(false_out, false_leaves, [])
    if structure != false_structure:
        raise ValueError(f"cond: true_fn and false_fn must return the same structure, got "
                         f"{_describe(structure)} from true_fn and "
                         f"{_describe(false_structure)} from false_fn")
    true_names, false_names, outs = [], [], []
    for a, b, path in zip(true_leaves, false_leaves, paths):
        # a Python number takes the dtype of the other branch's tensor, as in ``x if p else 0``
        a_dtype = b.dtype if a.__class__ in _SCALARS and isinstance(b, TensorLike) else None
        b_dtype = a.dtype if b.__class__ in _SCALARS and isinstance(a, TensorLike) else None
        a, b = to_variable(program, a, a_dtype), to_variable(program, b, b_dtype)
        what = f"output{path}" if path else "the output"
        if a.dtype is not b.dtype:
            raise TypeError(f"cond: {what} has dtype {a.dtype} in true_fn but {b.dtype} in "
                            f"false_fn; cast one branch (.astype(dtype)) so they agree")
        shape = _merge_shape("cond", what, a.shape, b.shape, "true_fn", "false_fn")
        true_names.append(a.name)
        false_names.append(b.name)
        outs.append(outer.create_var(shape, a.dtype))
    return structure, true_names, false_names, outs


# ---- while_loop ---------------------------------------------------------------------------------
def _loop_values(out, count: int) -> list:
    """What body_fn returned, as a list of ``count`` loop values."""
    if count == 1 and not isinstance(out, (list, tuple)):
        return [out]
    if not isinstance(out, (list, tuple)) or len(out) != count:
        got = f"{len(out)} values" if isinstance(out, (list, tuple)) else type(out).__name__
        raise ValueError(f"while_loop: body_fn must return {count} loop variable(s), as many as "
                         f"loop_vars, got {got}")
    return list(out)


def _same_container(loop_vars, values):
    """``values`` in a list, tuple or namedtuple like ``loop_vars``."""
    if hasattr(loop_vars, "_fields"):
        return type(loop_vars)(*values)
    return type(loop_vars)(values)


def _eager_while(cond_fn, body_fn, loop_vars):
    """The loop in Python, refusing what a program would refuse: a predicate that is not one
    bool, a body changing the structure of the loop variables or a tensor's dtype."""
    values = list(loop_vars)
    while True:
        flag = cond_fn(*values)
        if isinstance(flag, TensorLike):
            _check_flag("while_loop", "cond_fn's result", flag)
        if not bool(flag):
            return _same_container(loop_vars, values)
        new = _loop_values(body_fn(*values), len(values))
        _check_same_loop_values(values, new)
        values = new


def _check_same_loop_values(old: list, new: list) -> None:
    old_leaves, paths, new_leaves = [], [], []
    structure, got = _flatten(old, old_leaves, paths), _flatten(new, new_leaves, [])
    if got != structure:
        raise ValueError(f"while_loop: body_fn must return the structure of loop_vars, "
                         f"{_describe(structure)}, got {_describe(got)}")
    for a, b, path in zip(old_leaves, new_leaves, paths):
        if isinstance(a, TensorLike) and isinstance(b, TensorLike) and a.dtype is not b.dtype:
            raise TypeError(f"while_loop: loop variable{path} has dtype {a.dtype} but body_fn "
                            f"returns {b.dtype} for it; a loop variable keeps its dtype (cast "
                            f"with .astype('{a.dtype.name}'))")


def while_loop(cond_fn: Callable, body_fn: Callable, loop_vars):
    """``while cond_fn(*vars): vars = body_fn(*vars)``, in eager and static code alike.

    Eager (no loop variable is a static Variable and no program is being built): a Python loop
    that refuses what a program would (a tensor ``cond_fn`` result that is not one bool, a body
    changing the loop variables' structure or a tensor's dtype).
    Static: one ``while`` operator whose sub-blocks hold ``cond_fn`` (returning a bool tensor
    with one element) and ``body_fn`` (returning new values for every loop variable); the trip
    count is decided when the program runs. Each loop variable keeps its dtype; a dim that the
    body changes becomes -1 (found by building the body once and comparing). Eager tensors and
    Python numbers among ``loop_vars`` become constants. Returns the final values, in a list or
    tuple like ``loop_vars``.

    ``body_fn`` and ``cond_fn`` may be called more than once while building (again after a dim
    turned out to change), so they should not have Python side effects.

    Example::

        >>> import hybridfw as hf
        >>> prog = hf.static.Program()
        >>> with hf.static.program_guard(prog):
        ...     n = hf.static.data("n", [], "int64")
        ...     i, total = hf.static.nn.while_loop(lambda i, s: i < n,
        ...                                        lambda i, s: (i + 1, s + i), [0, 0])
        >>> hf.static.Executor().run(prog, feed={"n": hf.tensor(4)}, fetch_list=[total])[0].item()
        6
    """
    if not isinstance(loop_vars, (list, tuple)) or not loop_vars:
        raise TypeError(f"while_loop: loop_vars must be a non-empty list or tuple, got "
                        f"{loop_vars!r}")
    if not callable(cond_fn) or not callable(body_fn):
        raise TypeError("while_loop: cond_fn and body_fn must be callables taking the loop "
                        "variables")
    leaves, paths = [], []
    structure = _flatten(list(loop_vars), leaves, paths)
    program = next((v.block.program for v in leaves if isinstance(v, Variable)), None) or \
        active_program()
    if program is None:
        return _eager_while(cond_fn, body_fn, loop_vars)
    outer = program.current_block()
    init = [to_variable(program, v) for v in leaves]
    loop = _LoopBuilder(program, outer, structure, paths, [v.dtype for v in init])
    loop.init_names = [v.name for v in init]
    with _discard_blocks_on_error(program) as first_new_block:
        shapes = [v.shape for v in init]
        while not loop.build(cond_fn, body_fn, shapes, len(loop_vars)):
            # a dim changes across iterations: rebuild both blocks with it unknown (-1)
            del program.blocks[first_new_block:]
            shapes = loop.shapes
    program.updated_in_blocks.update(v.name for v, u in zip(init, loop.updated) if u)
    body_names = [o.name for o in loop.outputs]
    captured = outer_reads([(loop.cond_block, [loop.flag.name]), (loop.body_block, body_names)])
    finals = [outer.create_var(s, d) for s, d in zip(loop.shapes, loop.dtypes)]
    outer.append_op(Operator(
        "while", [*(v.name for v in init), *captured], [v.name for v in finals],
        {"cond_args": tuple(a.name for a in loop.cond_args), "cond_output": loop.flag.name,
         "body_args": tuple(a.name for a in loop.body_args), "body_outputs": tuple(body_names)},
        blocks=(loop.cond_block, loop.body_block)))
    return _same_container(loop_vars, _unflatten(structure, finals))


class _LoopBuilder:
    """Builds the cond and body blocks of one ``while`` for given loop-variable shapes."""

    def __init__(self, program, outer, structure, paths, dtypes):
        self.program, self.outer = program, outer
        self.structure, self.paths, self.dtypes = structure, paths, dtypes
        self.init_names = ()

    def _block(self, shapes):
        block = new_sub_block(self.program, self.outer)
        args = [block.create_var(s, d, self.program.unique_name("loop"))
                for s, d in zip(shapes, self.dtypes)]
        for arg, source in zip(args, self.init_names):
            self.program.loop_sources[arg.name] = source
        return block, args, _unflatten(self.structure, args)

    def build(self, cond_fn, body_fn, shapes, count: int) -> bool:
        """Build both blocks; True when the body keeps ``shapes`` (else ``self.shapes`` holds
        them merged with the body's results)."""
        program = self.program
        self.cond_block, self.cond_args, cond_in = self._block(shapes)
        with build_in(program, self.cond_block):
            flag = cond_fn(*cond_in)
            if not isinstance(flag, Variable):  # a constant: the loop would never end (or run)
                raise TypeError(
                    f"while_loop: cond_fn returned {flag!r}, a value fixed while the program "
                    "is built (not computed from the loop variables on each iteration); it "
                    "must return a bool tensor the program computes, such as a comparison of "
                    "a loop variable (a Python test of a shape, x.shape[0] < 10, is decided "
                    "once)")
            self.flag = to_variable(program, flag)
        _check_flag("while_loop", "cond_fn's result", self.flag)
        self.body_block, self.body_args, body_in = self._block(shapes)
        names = [a.name for a in self.body_args]
        with build_in(program, self.body_block):
            result = _loop_values(body_fn(*body_in), count)
        # loop variables the body updated in place (recorded by the builder's apply_inplace)
        self.updated = [n in program.updated_in_blocks for n in names]
        self.outputs = self._body_outputs(result)
        self.shapes = [_merge_shape("while_loop", f"loop variable{p}", s, o.shape, "loop_vars",
                                    "body_fn's result")
                       for s, o, p in zip(shapes, self.outputs, self.paths)]
        return self.shapes == list(shapes)

    def _body_outputs(self, result) -> list:
        leaves = []
        got = _flatten(result, leaves, [])
        if got != self.structure:
            raise ValueError(f"while_loop: body_fn must return the structure of loop_vars, "
                             f"{_describe(self.structure)}, got {_describe(got)}")
        outputs = []
        for value, path, dtype in zip(leaves, self.paths, self.dtypes):
            var = to_variable(self.program, value,
                              None if isinstance(value, TensorLike) else dtype)
            if var.dtype is not dtype:
                raise TypeError(f"while_loop: loop variable{path} has dtype {dtype} but body_fn "
                                f"returns {var.dtype} for it; a loop variable keeps its dtype "
                                f"(cast with .astype({dtype.name!r}))")
            outputs.append(var)
        return outputs


# ---- execution --------------------------------------------------------------------------
def _compile_cond(op, block, slots, xp):
    true_plan, false_plan = (compile_block(b, slots, xp) for b in op.blocks)
    pred = slots[op.inputs[0]]

    def moves(names):
        return tuple((slots[o], None if n is None else slots[n], _absent(xp, block.var(o)))
                     for o, n in zip(op.outputs, names))
    true_moves, false_moves = moves(op.attrs["true_outputs"]), moves(op.attrs["false_outputs"])

    def step(env):
        if env[pred]:
            true_plan.run(env)
            chosen = true_moves
        else:
            false_plan.run(env)
            chosen = false_moves
        for dst, src, absent in chosen:
            env[dst] = absent if src is None else env[src]
    return step


def _absent(xp, var):
    """What an output a branch does not produce holds: a read-only zero broadcast to its declared
    shape (dims known only at run time are 0), so it allocates nothing and still matches the
    declared shape when it is fetched and fed to a backward program (:mod:`.partition`)."""
    shape = tuple(0 if s == -1 else s for s in var.shape)
    return xp.broadcast_to(xp.zeros((), dtype=var.dtype.np), shape)


def _own_copy(xp, value):
    """``value``, copied when it views other memory. A record must keep the values of its
    iteration until the backward reads it, long after the forward is done with them; a view
    (of a loop input, or of a value from outside the loop) would see its base's memory reused
    or updated in place in between. A broadcast scalar (every element one memory location, as
    a branch's absent output) keeps its shape as a broadcast of a copy of that one element."""
    if getattr(value, "base", None) is None:
        return value
    if value.size > 1 and not any(value.strides):
        return xp.broadcast_to(value[(0,) * value.ndim].copy(), value.shape)
    return value.copy()


def _compile_while(op, block, slots, xp):
    attrs = op.attrs
    for name in attrs["cond_args"] + attrs["body_args"]:
        slots.setdefault(name, len(slots))
    cond_plan, body_plan = (compile_block(b, slots, xp) for b in op.blocks)
    count = len(attrs["body_args"])
    init = [slots[n] for n in op.inputs[:count]]
    finals = [slots[n] for n in op.outputs[:count]]
    cond_args = [slots[n] for n in attrs["cond_args"]]
    flag = slots[attrs["cond_output"]]
    body_args = [slots[n] for n in attrs["body_args"]]
    body_outs = [slots[n] for n in attrs["body_outputs"]]
    stack_slot = slots[attrs["stack"]] if "stack" in attrs else None
    saved = [slots[n] for n in attrs.get("saved", ())]

    def step(env):
        values = [env[s] for s in init]
        stack = []  # a new list each run: an enclosing loop may have pushed the previous one
        while True:
            for s, v in zip(cond_args, values):
                env[s] = v
            cond_plan.run(env)
            if not env[flag]:
                break
            for s, v in zip(body_args, values):
                env[s] = v
            body_plan.run(env)
            values = [env[s] for s in body_outs]
            if stack_slot is not None:
                stack.append(tuple(_own_copy(xp, env[s]) for s in saved))
        for s, v in zip(finals, values):
            env[s] = v
        if stack_slot is not None:
            env[stack_slot] = new_loop_stack(stack)
    return step


def _compile_while_grad(op, block, slots, xp):
    attrs = op.attrs
    for name in attrs["body_args"] + attrs["saved_args"]:
        slots.setdefault(name, len(slots))
    (body_plan,) = (compile_block(b, slots, xp) for b in op.blocks)
    count = len(attrs["body_args"])
    stack_slot = slots[op.inputs[0]]
    init = [slots[n] for n in op.inputs[1:1 + count]]
    finals = [slots[n] for n in op.outputs]
    body_args = [slots[n] for n in attrs["body_args"]]
    body_outs = [slots[n] for n in attrs["body_outputs"]]
    restores = list(zip((slots[n] for n in attrs["saved_args"]), attrs["saved_index"]))

    def step(env):
        token = env[stack_slot]
        stack = getattr(token, "records", None)
        if stack is None:
            raise RuntimeError(f"while_grad: {op.inputs[0]!r} holds no stack of a forward "
                               f"while_loop run (got a {type(token).__name__}); feed it the "
                               "value a run of the forward loop produced for it (a LoopStack)")
        values = [env[s] for s in init]
        for record in reversed(stack):  # last iteration first
            for s, i in restores:
                env[s] = record[i]
            for s, v in zip(body_args, values):
                env[s] = v
            body_plan.run(env)
            values = [env[s] for s in body_outs]
        for s, v in zip(finals, values):
            env[s] = v
    return step


OP_COMPILERS["cond"] = _compile_cond
OP_COMPILERS["while"] = _compile_while
OP_COMPILERS["while_grad"] = _compile_while_grad
