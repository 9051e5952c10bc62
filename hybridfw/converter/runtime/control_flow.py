"""Runtime helpers for converted control flow: Python values run as Python, static values
(Variables of the program being traced) build ``cond``/``while`` operators.

Branch and loop bodies arrive as functions of the variables they assign (``names``), returning
their new values; each helper returns the values after the construct.
"""
from __future__ import annotations

import numpy as np

from ...dtypes import bool_, int64, result_type
from ...ops import elementwise as E
from ...ops.registry import TensorLike, apply
from ...static.builder import rebind
from ...static.control_flow import (
    _build_branch,
    _merge_shape,
    active_program,
    build_in,
    new_sub_block,
    outer_reads,
    to_variable,
    while_loop,
)
from ...static.ir import Operator, Variable
from ...static.py_func import py_func
from ..errors import ConversionError, add_user_location, located, user_frame
from .tensor_array import TensorArray, is_tensor_array
from .undefined import UNDEFINED_RETURN, UNREACHED, Unmerged, is_undefined

__all__ = [
    "TensorRange",
    "convert_enumerate",
    "convert_for",
    "convert_ifelse",
    "convert_range",
    "convert_while",
    "convert_zip",
    "is_static",
    "to_predicate",
    "try_block",
]

_NUMBERS = (int, float, bool, np.number, np.bool_)


def _number_like(program, value) -> bool:
    """A Python number, or a program value standing for one (``x.item()``, see
    ``Variable.python_number``): a branch or loop merging only such values gives one too."""
    return isinstance(value, _NUMBERS) or (value.__class__ is Variable and
                                           value.name in program.python_scalars)


def is_static(value) -> bool:
    return isinstance(value, Variable)


def _tensorish(value) -> bool:
    return isinstance(value, (Variable, TensorLike, _NUMBERS))


def require_one_element(value, message: str) -> None:
    """Raise ``message`` (at the user's line) unless ``value`` has one element (dims only
    known at run time count as one)."""
    numel = 1
    for s in value.shape:
        numel *= max(s, 1)
    if numel != 1:
        raise located(message, AmbiguousTruthError)


class AmbiguousTruthError(ValueError, RuntimeError):
    """The truth value of a tensor of several elements, asked by converted control flow: a
    ValueError, and the RuntimeError eager code (and PyTorch) raises for it."""


class try_block:
    """Marks the body of a ``try`` with ``except`` handlers in converted code."""

    __hf_static_safe__ = True
    depth = 0

    def __enter__(self):
        try_block.depth += 1
        return self

    def __exit__(self, *exc):
        try_block.depth -= 1
        return False


def to_predicate(value, what: str = "condition") -> Variable:
    """A static value as a bool Variable with one element (PyTorch's truth value rules); also
    where control flow becomes static, so constructs that cannot surround it are refused."""
    if try_block.depth:
        from ..errors import UnsupportedConstructError, user_frame
        frame = user_frame(1)
        raise UnsupportedConstructError(
            f"try/except around control flow decided by a tensor (the {what})",
            frame.f_code.co_filename if frame else None, frame.f_lineno if frame else None,
            hint="an exception the program raises when it runs could not reach the handler; "
                 "move the try/except out of the converted function")
    require_one_element(value, f"the truth value of a tensor with shape {tuple(value.shape)} "
                               f"is ambiguous (used as the {what}); reduce it with .any() or "
                               f".all()")
    if value.dtype is not bool_:
        value = apply(E.ne, value, 0)
    return value


def truth_of(value):
    """``value`` where Python takes its truth value: a list grown inside a loop a tensor
    decides (``if outs:``, ``while queue:``) is whether it has items, when the program runs."""
    if is_tensor_array(value):
        return value.length() > 0
    return value


def _refuse_writes(writes, construct: str):
    """Refuse assigning global or nonlocal names inside a construct a tensor decides: its body
    is traced once while the program is built, not run on each call, so the assignment could
    not happen as written (and a branch not taken would still have made it)."""
    from ..errors import UnsupportedConstructError, user_frame
    frame = user_frame(2)
    listed = ", ".join(repr(n) for n in writes)
    raise UnsupportedConstructError(
        f"assigning the global or nonlocal name(s) {listed} inside {construct} decided by a "
        f"tensor", frame.f_code.co_filename if frame else None,
        frame.f_lineno if frame else None,
        hint="the body is traced once when the program is built, not run on each call; "
             "return the value from the function instead (or keep this code out of the "
             "converted function with hf.jit.not_to_static, or use full_graph=False to run "
             "it eagerly)")


# ---- if / else ------------------------------------------------------------------------------
def convert_ifelse(pred, true_fn, false_fn, values, names, writes=()):
    """``if pred: <true_fn> else: <false_fn>`` over the variables ``names`` (``writes``: the
    global or nonlocal names the branches assign)."""
    pred = truth_of(pred)
    if not is_static(pred):
        return true_fn(*values) if pred else false_fn(*values)
    if writes:
        _refuse_writes(writes, "an if")
    return _static_ifelse(to_predicate(pred, "if condition"), true_fn, false_fn, values, names)


def _static_ifelse(pred, true_fn, false_fn, values, names):
    program = pred.block.program
    outer = program.current_block()
    first_block = len(program.blocks)
    try:
        # each branch appends to its own copy of a list; a list the branches change
        # becomes a tensor array
        true_in, false_in = _copy_lists(values), _copy_lists(values)
        true_block, true_out, failure = _branch(
            program, outer, lambda: true_fn(*true_in), "if", len(values))
        false_block, false_out, other_failure = _branch(
            program, outer, lambda: false_fn(*false_in), "else", len(values))
        if failure is not None and other_failure is not None:  # both raise: now, as before
            raise failure
        merged = _Merge(program, true_block, false_block)
        result = tuple(merged.value(_same_list(v, t), _same_list(v, f), n, v)
                       for v, t, f, n in zip(values, true_out, false_out, names))
        result = tuple(_updated_in_place(program, v, r, (t, a), (f, b))
                       for v, r, t, a, f, b in zip(values, result, true_out, true_in,
                                                   false_out, false_in))
    except BaseException:
        del program.blocks[first_block:]
        raise
    captured = outer_reads([(true_block, merged.true_names),
                            (false_block, merged.false_names)])
    outer.append_op(Operator("cond", [pred.name, *captured], [o.name for o in merged.outs],
                             {"true_outputs": tuple(merged.true_names),
                              "false_outputs": tuple(merged.false_names)},
                             blocks=(true_block, false_block)))
    return result


def _updated_in_place(program, before, result, *branches):
    """The value of a variable after the if. Where a branch updated the tensor in place
    (``x.add_(1)``: the object the branch got is the one it gives back, with a new value), the
    Python object from before the if becomes the merged value, so that every reference to it
    (an alias, a list holding it, the caller's argument) sees the update, as in eager code."""
    if before.__class__ is not Variable or result.__class__ is not Variable or \
            result is before or not any(out is given and given.name != before.name
                                        for out, given in branches):
        return result
    program.updated_in_blocks.discard(before.name)  # (the update leaves the branch)
    rebind(before, result)
    return before


def _branch(program, outer, fn, label, count):
    """The block of one branch of an if on a tensor condition and the values it gives its
    ``count`` variables. A branch whose building raises (an explicit ``raise``, ``x[10]`` past
    the end of ``x``, ...) becomes one raising that error, naming the user's line, when the
    program takes it: eager Python raises it only then. Its values are :data:`UNREACHED`.
    Returns ``(block, values, the error or None)``."""
    first = len(program.blocks)
    try:
        return (*_build_branch(program, outer, fn, label), None)
    except ConversionError:  # (an unsupported construct: the conversion fails)
        raise
    except Exception as exc:  # noqa: BLE001 - any error the branch would raise when run
        block = program.blocks[first]
        raise_when_run(program, block, exc)
        return block, (UNREACHED,) * count, exc


def raise_when_run(program, block, exc: Exception) -> None:
    """Make ``block`` (a branch whose building raised ``exc``) a branch that raises ``exc``,
    naming the user's line, when the program runs it: what it built so far goes, with the
    blocks made after it (its own nested control flow)."""
    del program.blocks[block.idx + 1:]
    block.ops.clear()
    add_user_location(exc)  # (its message names the user's line)

    def run():
        raise exc.with_traceback(None)
    run.__qualname__ = f"raise {type(exc).__name__}"
    with build_in(program, block):
        py_func(run, [], [], has_side_effects=True)


def _copy_lists(values):
    """What one branch gets: copies of lists (it may append) and dicts (it may write an item),
    and fresh objects for Variables (an in-place op rebinds the Python object it is applied
    to)."""
    return _fresh_variables(values)


def _fresh_variables(values):
    return [_fresh(v) for v in values]


def _fresh(value):
    """``value`` with fresh objects for its Variables and copies of the lists and dicts holding
    them (an in-place op, ``acc[0] += x``, rebinds the Variable object it is applied to)."""
    if value.__class__ is Variable:
        return Variable(value.block, value.name, value.shape, value.dtype, value.persistable)
    if value.__class__ is list:
        return [_fresh(v) for v in value]
    if value.__class__ is dict:
        return {k: _fresh(v) for k, v in value.items()}
    if value.__class__ is tuple:
        return tuple(_fresh(v) for v in value)
    return value


def _same_list(before, after):
    """``before`` itself when ``after`` is an unchanged copy of that list (or dict): the same
    items, or fresh objects for the same Variables (see :func:`_fresh`)."""
    if before.__class__ is list and after.__class__ is list and len(before) == len(after) \
            and all(_same_item(a, b) for a, b in zip(before, after)):
        return before
    if before.__class__ is dict and after.__class__ is dict and list(before) == list(after) \
            and all(_same_item(before[k], after[k]) for k in before):
        return before
    return after


def _same_item(a, b) -> bool:
    return a is b or (a.__class__ is Variable and b.__class__ is Variable and a.name == b.name
                      and a.block is b.block)


def _holds_tensors(value) -> bool:
    """Whether ``value`` is or holds (in lists, tuples, dicts) a tensor or a static value."""
    if isinstance(value, (list, tuple)):
        return any(_holds_tensors(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_tensors(v) for v in value.values())
    return is_tensor_array(value) or _tensorish(value) and not isinstance(value, _NUMBERS)


def _variable(name: str) -> str:
    """A variable as an error names it: the user's name, or "the value returned" for the one
    the return transformer made (``return x`` on one path, ``return x, y`` on another)."""
    stem, bracket, rest = name.partition("[")
    if stem.startswith("_hf_retval_"):
        return "the value returned" + (f" (its item [{rest})" if bracket else "")
    return f"variable {name!r}"


def _describe(value) -> str:
    if isinstance(value, (Variable, TensorLike)):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    if is_undefined(value):
        return "not assigned"
    if value.__class__ in (tuple, list):
        return f"a {type(value).__name__} of {len(value)} (" + \
            "; ".join(_describe(v) for v in value) + ")"
    return f"{type(value).__name__} {value!r}"


def _number_as(program, number, shape, name, construct, where, there):
    """``number`` (a 0-d value standing for a Python number) broadcast to ``shape``, a tensor's
    the other path gives the variable (as ``number + tensor`` would be in eager code)."""
    shape = tuple(shape)
    if number.shape not in ((), (1,)) or not shape:
        return number
    if -1 in shape:
        raise located(f"{construct}: {_variable(name)} is a Python number {where} but a tensor "
                      f"of shape {tuple(None if d == -1 else d for d in shape)} (sizes known "
                      f"only when the program runs) {there}; start it as a tensor "
                      f"of that shape, e.g. `{name} = hf.zeros_like(x)`", ConversionError)
    return number + program.constant(np.zeros(shape, dtype=number.dtype.np))


def _zeros_for(program, like):
    """A stand-in value for a branch that does not assign a variable the other one does (its
    value is never read on that path, e.g. the return value of a branch that did not return):
    zeros of the same structure, shapes and dtypes."""
    if isinstance(like, (tuple, list)):
        items = [_zeros_for(program, v) for v in like]
        return type(like)(*items) if hasattr(like, "_fields") else type(like)(items)
    if isinstance(like, dict):
        return {k: _zeros_for(program, v) for k, v in like.items()}
    if is_tensor_array(like):
        return TensorArray([_zeros_for(program, b) for b in like.buffers], like.structure)
    if isinstance(like, _NUMBERS):
        return type(like)(0)
    if not _tensorish(like):
        return like
    var = to_variable(program, like)
    shape = tuple(1 if s == -1 else s for s in var.shape)
    zeros = program.constant(np.zeros(shape, dtype=var.dtype.np))
    if var.name in program.python_scalars:  # (a loop index first bound by the loop: a number)
        program.python_scalars.add(zeros.name)
    return zeros


def _equal(a, b) -> bool:
    """``a == b`` as a bool, False for objects whose ``==`` fails or is not a bool."""
    try:
        return (a == b) is True
    except Exception:  # noqa: BLE001 - any object may come through a branch
        return False


class _Merge:
    """Pairs the values the two branches give each variable into ``cond`` outputs."""

    def __init__(self, program, true_block, false_block):
        self.program = program
        self.blocks = (true_block, false_block)
        self.true_names, self.false_names, self.outs = [], [], []

    def value(self, a, b, name, before=None):
        if a is UNREACHED or b is UNREACHED:  # one branch raises: the other's value it is
            other = b if a is UNREACHED else a
            if is_undefined(other) or not _holds_tensors(other):
                return other
            stand_in = _zeros_for(self.program, other)
            a, b = (stand_in, b) if a is UNREACHED else (a, stand_in)
        if a is b:
            return a  # unchanged by both branches (or the same object)
        none_return = name.startswith("_hf_retval_") and (a is None) != (b is None) and \
            isinstance(b if a is None else a, (Variable, TensorLike))
        if none_return:
            # return None (or a bare return) on one path and a tensor on the other: as a
            # function falling off its end there, the call returns None when it takes it
            a, b = (UNDEFINED_RETURN if a is None else a), (UNDEFINED_RETURN if b is None else b)
        for side in (a, b):
            if side.__class__ is Unmerged:
                return side  # (a value no use may read stays one)
        if a.__class__ is Variable and b.__class__ is Variable and a.name == b.name:
            return before if before.__class__ is Variable and before.name == a.name else a
        if before.__class__ is list and a.__class__ is list and b.__class__ is list and \
                len(a) == len(b) == len(before):  # items written (acc[0] += x): item by item
            return [self.value(x, y, f"{name}[{i}]", z)
                    for i, (x, y, z) in enumerate(zip(a, b, before))]
        if before.__class__ is list and (a.__class__ is list or is_tensor_array(a)) and \
                (b.__class__ is list or is_tensor_array(b)):
            a, b = self._arrays(a, b, name)
        if is_undefined(a) and is_undefined(b):
            return a
        assigned = (self._assigned(a, self.blocks[0]), self._assigned(b, self.blocks[1]))
        if is_undefined(a) and not is_undefined(b):
            a = _zeros_for(self.program, b)
        elif is_undefined(b) and not is_undefined(a):
            b = _zeros_for(self.program, a)
        if _tensorish(a) and _tensorish(b) and not (isinstance(a, _NUMBERS) and
                                                    isinstance(b, _NUMBERS) and a == b
                                                    and type(a) is type(b)):
            out = self._leaf(a, b, name)
            if assigned[0] is not True or assigned[1] is not True:  # (flags: Variables)
                # assigned on one path only: zeros stand in on the other, and a flag says which
                # ran (a use checks it, see static.builder.require_defined)
                flag = self._leaf(*assigned, f"{name} (assigned)")
                frame = user_frame(1)
                self.program.maybe_undefined[out.name] = (
                    flag.name, name,
                    None if frame is None else (frame.f_code.co_filename, frame.f_lineno))
                if none_return or any(side.__class__ is Variable and side.name in
                                      self.program.none_returns for side in (a, b)):
                    self.program.none_returns.add(out.name)
            return out
        if is_tensor_array(a) and is_tensor_array(b) and a.structure == b.structure:
            return TensorArray([self._leaf(x, y, name) for x, y in zip(a.buffers, b.buffers)],
                               a.structure)
        if isinstance(a, (tuple, list)) and type(a) is type(b) and len(a) == len(b):
            items = [self.value(x, y, f"{name}[{i}]") for i, (x, y) in enumerate(zip(a, b))]
            return type(a)(*items) if hasattr(a, "_fields") else type(a)(items)
        if isinstance(a, dict) and isinstance(b, dict) and list(a) == list(b):
            return {k: self.value(a[k], b[k], f"{name}[{k!r}]") for k in a}
        if type(a) is type(b) and _equal(a, b):
            return a
        if type(a) is str and type(b) is str:  # tag = "neg" / "pos": chosen when it runs
            from .python_builtins import chosen_string
            return chosen_string(a, b, self._leaf(0, 1, f"{name} (which string)"))
        # fine while unused (y = None on one path, never read again); a use raises this
        if name.startswith("_hf_retval_"):  # (the ifs of the return transformer)
            why = (f"return under an if on a tensor condition: {_variable(name)} is "
                   f"{_describe(b)} on one path but {_describe(a)} on another; a static cond "
                   "needs the same structure of tensors (or numbers) on both")
        else:
            why = (f"if on a tensor condition: {_variable(name)} is {_describe(a)} in the if "
                   f"branch but {_describe(b)} in the else branch; a static cond needs tensors "
                   "(or numbers) of the same dtype in both")
        return Unmerged(name, why)

    def _assigned(self, value, block):
        """Whether the branch ``block`` assigned ``value``: True, False (undefined there) or
        the flag of a value an earlier if (maybe inside the branch) assigned on one path."""
        if is_undefined(value):
            return False
        if value.__class__ is Variable:
            guard = self.program.maybe_undefined.get(value.name)
            if guard is not None:
                return block.var(guard[0])
        return True

    def _arrays(self, a, b, name):
        """Two versions of a list the branches changed, as tensor arrays (built in their
        branches)."""
        template = a if is_tensor_array(a) else b if is_tensor_array(b) else None
        example = None
        if template is None:
            example = a[-1] if a else b[-1] if b else None
            if example is None:
                return a, b
        arrays = []
        for value, block in zip((a, b), self.blocks):
            if is_tensor_array(value):
                arrays.append(value)
                continue
            with build_in(self.program, block):
                arrays.append(TensorArray.from_list_like(value, template) if template
                              is not None else TensorArray.from_items(value, example))
        return arrays[0], arrays[1]

    def _leaf(self, a, b, name):
        program = self.program
        a_number, b_number = _number_like(program, a), _number_like(program, b)
        numbers = a_number and b_number
        a_dtype = b.dtype if isinstance(a, _NUMBERS) and not isinstance(b, _NUMBERS) else None
        b_dtype = a.dtype if isinstance(b, _NUMBERS) and not isinstance(a, _NUMBERS) else None
        with build_in(program, self.blocks[0]):
            a = to_variable(program, a, a_dtype)
        with build_in(program, self.blocks[1]):
            b = to_variable(program, b, b_dtype)
        if a.dtype is not b.dtype:
            dtype = result_type(a, b)
            with build_in(program, self.blocks[0]):
                a = a.astype(dtype) if a.dtype is not dtype else a
            with build_in(program, self.blocks[1]):
                b = b.astype(dtype) if b.dtype is not dtype else b
        if a_number != b_number and (a if a_number else b).shape != (b if a_number else a).shape:
            # total = 0; if c: total += x -- the number, as a tensor of the other one's shape
            side = 0 if a_number else 1
            with build_in(program, self.blocks[side]):
                number = _number_as(program, (a, b)[side], (b, a)[side].shape, name,
                                    "if on a tensor condition", "in one branch",
                                    "in the other")
            a, b = (number, b) if side == 0 else (a, number)
        shape = _merge_shape("if", _variable(name), a.shape, b.shape, "the if branch",
                             "the else branch")
        out = program.current_block().create_var(shape, a.dtype)
        if numbers:  # a number on either path: returned as a Python number, as in eager
            program.python_scalars.add(out.name)
        self.true_names.append(a.name)
        self.false_names.append(b.name)
        self.outs.append(out)
        return out


# ---- while ------------------------------------------------------------------------------------
def convert_while(cond_fn, body_fn, values, names, writes=()):
    """``while cond_fn(*values): values = body_fn(*values)``: a Python loop until the condition
    is a static value, then one static ``while`` for the rest."""
    values = tuple(values)
    while True:
        flag = truth_of(cond_fn(*values))
        if is_static(flag):
            to_predicate(flag, "loop condition")
            if writes:
                _refuse_writes(writes, "a while loop")
            return _static_loop(cond_fn, body_fn, values, names)
        if not flag:
            return values
        values = tuple(body_fn(*values))


class _Carry:
    """How one variable crosses a static loop: as tensors (``count`` leaves), or unchanged."""

    __slots__ = ("count", "kind", "structure", "value", "numbers")

    def __init__(self, kind, count=0, structure=None, value=None, numbers=()):
        self.kind, self.count, self.structure, self.value = kind, count, structure, value
        self.numbers = numbers  # per leaf: a number before the loop and after its body


def _probe(program, body_fn, values):
    """Build ``body_fn`` once into a scratch block and return what it gives each variable, so
    that variables first assigned in the loop, Python numbers and lists learn their types."""
    first_block = len(program.blocks)
    scratch = new_sub_block(program, program.current_block())
    try:
        with build_in(program, scratch):
            stand_ins = []
            for v in values:
                if isinstance(v, (Variable, TensorLike, _NUMBERS)):
                    var = to_variable(program, v)
                    stand_ins.append(scratch.create_var(var.shape, var.dtype))
                    if _number_like(program, v):  # (arithmetic on it stays number-like)
                        program.python_scalars.add(stand_ins[-1].name)
                else:  # appends and item writes go to copies of the containers
                    stand_ins.append(_fresh(v))
            return tuple(body_fn(*stand_ins))
    finally:
        for block in program.blocks[first_block:]:
            for op in block.ops:
                if op.origin is not None:
                    program.dropped_origins.update(dict.fromkeys(op.outputs, op.origin))
        del program.blocks[first_block:]


def _static_loop(cond_fn, body_fn, values, names):
    program = active_program()
    probed = _probe(program, body_fn, values)
    carries, init = [], []
    for value, after, name in zip(values, probed, names):
        carry, leaves = _plan_carry(program, value, after, name)
        carries.append(carry)
        init.extend(leaves)

    def unpack(leaves):
        it = iter(leaves)
        out = []
        for carry in carries:
            if carry.kind == "tree":
                out.append(_tree_build(carry.structure, it))
            elif carry.kind == "array":
                out.append(TensorArray([next(it) for _ in range(carry.count)],
                                       carry.structure))
            else:
                out.append(carry.value)
        return out

    def pack(new_values):
        leaves = []
        for carry, value, name in zip(carries, new_values, names):
            if carry.kind == "tree":
                got: list = []
                if is_undefined(value) or _tree_leaves(value, got) != carry.structure:
                    if isinstance(value, dict) and carry.structure[0] == "dict" and \
                            tuple(value) != carry.structure[1]:
                        added = [k for k in value if k not in carry.structure[1]]
                        removed = [k for k in carry.structure[1] if k not in value]
                        change = ", ".join(
                            ([f"adds the keys {added}"] if added else []) +
                            ([f"removes the keys {removed}"] if removed else []))
                        raise located(
                            f"loop on a tensor condition: its body changes the keys of dict "
                            f"{_variable(name)} ({change}); a loop the program runs carries a "
                            "fixed set of "
                            "keys: create them before the loop (d[k] = hf.zeros_like(x)), or "
                            "append the values to a list", ConversionError)
                    raise located(f"loop on a tensor condition: {_variable(name)} is "
                                  f"{_describe(value)} after an iteration, but the loop "
                                  f"carries it as {_describe(_tree_build(carry.structure, iter(['tensor'] * carry.count)))}",
                                  ConversionError)
                leaves.extend(got)
            elif carry.kind == "array":
                if not is_tensor_array(value):
                    raise located(f"loop on a tensor condition: list {name!r} is replaced by "
                                  f"{_describe(value)} inside the loop", ConversionError)
                leaves.extend(value.buffers)
            elif value is not carry.value and not is_undefined(carry.value):
                raise located(f"loop on a tensor condition: {_variable(name)} "
                              f"({_describe(carry.value)}) is changed inside the loop to "
                              f"{_describe(value)}; a static loop carries only tensors, "
                              f"numbers and lists of tensors", ConversionError)
        return leaves

    # variables the loop body assigns that had no value before: flags say whether the body
    # ran, so a use after a loop that did not run raises UnboundLocalError as eager does
    unbound = [i for i, (value, carry) in enumerate(zip(values, carries))
               if is_undefined(value) and carry.kind == "tree"]
    n_values = len(init)
    init.extend(to_variable(program, False) for _ in unbound)
    numbers = [n for carry in carries for n in (carry.numbers if carry.kind == "tree" else
                                                (False,) * carry.count)]

    def numbers_inside(leaves):
        """A number carried by the loop is one inside its body too (print shows it as one)."""
        for leaf, number in zip(leaves, numbers):
            if number and is_static(leaf):
                program.python_scalars.add(leaf.name)
        return leaves

    # (fresh Variable objects: an in-place op would rebind the loop's own block arguments)
    def loop_cond(*leaves):
        flag = truth_of(cond_fn(*_fresh_variables(unpack(numbers_inside(leaves[:n_values])))))
        return to_predicate(flag, "loop condition") if is_static(flag) else bool(flag)

    def loop_body(*leaves):
        return pack(body_fn(*_fresh_variables(unpack(numbers_inside(leaves[:n_values]))))) + \
            [to_variable(program, True) for _ in unbound]

    if not n_values:
        raise located("loop on a tensor condition carries no tensor: its condition can never "
                      "change", ConversionError)
    finals = while_loop(loop_cond, loop_body, init)
    for final, number in zip(finals, numbers):
        if number:  # a Python number in eager code: returned as one (see Variable.item)
            program.python_scalars.add(final.name)
    out = unpack(finals[:n_values])
    for i, (name, after) in enumerate(zip(names, probed)):
        if after is None and is_undefined(out[i]) and name.startswith("_hf_retval_"):
            out[i] = None  # `return None` in the body: None where the loop returned
    if unbound:
        frame = user_frame(1)
        where = None if frame is None else (frame.f_code.co_filename, frame.f_lineno, "loop")
        for i, flag in zip(unbound, finals[n_values:]):
            leaves: list = []
            _tree_leaves(out[i], leaves)
            for leaf in leaves:
                program.maybe_undefined[leaf.name] = (flag.name, names[i], where)
    return tuple(out)


def _tree_leaves(value, leaves: list):
    """The structure of nested tuples/lists/dicts of tensors and numbers, or None when
    something else is inside."""
    if isinstance(value, (tuple, list)):
        parts = [_tree_leaves(v, leaves) for v in value]
        return None if any(p is None for p in parts) else ("seq", type(value), tuple(parts))
    if isinstance(value, dict):
        parts = [_tree_leaves(v, leaves) for v in value.values()]
        return None if any(p is None for p in parts) else ("dict", tuple(value), tuple(parts))
    if _tensorish(value) and not is_undefined(value):
        leaves.append(value)
        return ("leaf",)
    return None


def _tree_build(structure, it):
    kind = structure[0]
    if kind == "leaf":
        return next(it)
    if kind == "dict":
        return {k: _tree_build(c, it) for k, c in zip(structure[1], structure[2])}
    items = [_tree_build(c, it) for c in structure[2]]
    return structure[1](*items) if hasattr(structure[1], "_fields") else structure[1](items)


def _plan_carry(program, value, after, name):
    """The carry of one variable and its initial leaves, from its value before the loop and
    the value the probe body gave it."""
    if is_undefined(value):
        if is_undefined(after) or _tree_leaves(after, []) is None:
            return _Carry("same", value=value), []
        value = _zeros_for(program, after)
    if isinstance(value, list) and (is_tensor_array(after) or (
            isinstance(after, list) and after is not value and len(after) != len(value))):
        if not value and not is_tensor_array(after) and not after:
            return _Carry("same", value=value), []
        array = TensorArray.from_list_like(value, after) if is_tensor_array(after) else \
            TensorArray.from_items(value, after[-1] if after else None)
        return _Carry("array", len(array.buffers), array.structure), array.buffers
    if is_tensor_array(value):
        return _Carry("array", len(value.buffers), value.structure), list(value.buffers)
    before_leaves, after_leaves = [], []
    structure = _tree_leaves(value, before_leaves)
    if structure is None or (not isinstance(value, (list, tuple, dict)) and
                             not _tensorish(value)):
        return _Carry("same", value=value), []
    if _tree_leaves(after, after_leaves) != structure:
        after_leaves = [None] * len(before_leaves)
    init = []
    numbers = tuple(_number_like(program, leaf) and later is not None and
                    _number_like(program, later)
                    for leaf, later in zip(before_leaves, after_leaves))
    for leaf, later in zip(before_leaves, after_leaves):
        var = to_variable(program, leaf)
        if later is not None:
            later_dtype = to_variable(program, later).dtype
            if later_dtype is not var.dtype:
                if isinstance(leaf, _NUMBERS):
                    var = to_variable(program, leaf, later_dtype)
                else:
                    var = var.astype(result_type(var, to_variable(program, later)))
            if _number_like(program, leaf) and not _number_like(program, later):
                # total = 0; for ...: total += x -- carried as a tensor of the body's shape
                var = _number_as(program, var, later.shape, name, "loop on a tensor condition",
                                 "before the loop", "after its body")
        init.append(var)
    return _Carry("tree", len(init), structure, numbers=numbers), init


# ---- for ---------------------------------------------------------------------------------------
class TensorRange:
    """``range(start, stop, step)`` with bounds only known when the program runs."""

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step

    def trip_count(self):
        import hybridfw as hf
        start, stop, step = self.start, self.stop, self.step
        if isinstance(step, int):
            if step == 0:
                raise located("range() arg 3 must not be zero", ValueError)
            n = (stop - start + (step - 1 if step > 0 else step + 1)) // step
        else:
            n = (stop - start + step - hf.sign(step)) // step
        return hf.maximum(n, 0) if is_static(n) else max(n, 0)

    def item_at(self, i):
        return _as_number(self.start + i * self.step)


def _as_number(value):
    """A loop index: a Python int in eager code (see ``Variable.python_number``)."""
    if value.__class__ is Variable:
        value.block.program.python_scalars.add(value.name)
    return value


def convert_range(*args):
    if any(is_static(a) for a in args):
        if len(args) == 1:
            return TensorRange(0, _as_int(args[0]), 1)
        start, stop, *step = args
        return TensorRange(_as_int(start), _as_int(stop), _as_int(step[0]) if step else 1)
    return range(*args)


def _as_int(value):
    if is_static(value) and not value.dtype.is_floating_point and value.dtype is not bool_:
        return value.astype(int64) if value.dtype is not int64 else value
    if is_static(value):
        raise located(f"range(): expected integer bounds, got a tensor of dtype {value.dtype}",
                      TypeError)
    return value


def _python_iteration(static):
    """Items of ``enumerate``/``zip`` over tensors iterated by Python (a generator expression,
    ``list(...)``): the lengths must be known while the program is built."""
    n = static.trip_count()
    if is_static(n):
        raise located(f"iterating in Python (a generator expression, list(), a comprehension "
                      f"with a condition) over {static.what} of a tensor whose length is only "
                      f"known when the program runs; use a for loop (converted) or tensor ops",
                      TypeError)
    return (static.item_at(i) for i in range(n))


class _StaticEnumerate:
    what = "enumerate()"

    def __init__(self, iterable, start):
        self.iterable, self.start = iterable, start

    def __iter__(self):
        return _python_iteration(self)

    def trip_count(self):
        return _trip_count(self.iterable)

    def item_at(self, i):
        return (_as_number(i + self.start), _item_at(self.iterable, i))


class _StaticZip:
    what = "zip()"

    def __init__(self, iterables):
        self.iterables = iterables

    def __iter__(self):
        return _python_iteration(self)

    def trip_count(self):
        import hybridfw as hf
        counts = [_trip_count(it) for it in self.iterables]
        n = counts[0]
        for c in counts[1:]:
            n = hf.minimum(n, c) if is_static(n) or is_static(c) else min(n, c)
        return n

    def item_at(self, i):
        return tuple(_item_at(it, i) for it in self.iterables)


_STATIC_ITERABLES = (TensorRange, _StaticEnumerate, _StaticZip, TensorArray)


def _static_iterable(value) -> bool:
    return is_static(value) or isinstance(value, _STATIC_ITERABLES)


def _trip_count(iterable):
    if isinstance(iterable, TensorArray):
        return iterable.length()
    if is_static(iterable):
        if not iterable.shape:
            raise located("iteration over a 0-d tensor", TypeError)
        n = iterable.shape[0]
        if n == -1:
            from ...ops import reduction as R
            return apply(R.dim_numel, iterable, dim=(0,))
        return n
    if isinstance(iterable, (TensorRange, _StaticEnumerate, _StaticZip, _NumberSequence)):
        return iterable.trip_count()
    return len(iterable)


def _item_at(iterable, i):
    if isinstance(iterable, (TensorRange, _StaticEnumerate, _StaticZip, _NumberSequence)):
        return iterable.item_at(i)
    return iterable[i]


def convert_enumerate(iterable, start=0):
    if _static_iterable(iterable):
        return _StaticEnumerate(iterable, start)
    return enumerate(iterable, start)


def convert_zip(*iterables):
    if any(_static_iterable(it) for it in iterables):
        if all(_static_iterable(it) for it in iterables):
            return _StaticZip(iterables)
        if all(not _static_iterable(it) or (is_static(it) and it.shape and it.shape[0] != -1)
               for it in iterables):
            # zip(x, python_list) with x's length known: Python's zip over x's rows, so each
            # item of the list (a module, a string, a number) stays what it is
            return zip(*iterables)
        return _StaticZip(tuple(it if _static_iterable(it) else _as_static_sequence(it)
                                for it in iterables))
    return zip(*iterables)


def _as_static_sequence(iterable):
    """A Python sequence zipped with a tensor whose length is only known when the program
    runs: its numbers (or same-shaped tensors) stacked, so the loop can index them."""
    import hybridfw as hf
    items = list(iterable)
    if items and all(isinstance(v, (bool, int, float)) for v in items):
        return _NumberSequence(hf.tensor(items))
    if items and all(is_static(v) or hf.is_tensor(v) for v in items) and \
            len({tuple(v.shape) for v in items}) == 1:
        return hf.stack(items)
    kinds = sorted({type(v).__name__ for v in items}) or ["nothing (an empty sequence)"]
    raise located(f"zip() of a tensor whose length is only known when the program runs with "
                  f"a Python {type(iterable).__name__} of {', '.join(kinds)}: the loop runs in "
                  f"the program and can only index numbers or same-shaped tensors; loop over "
                  f"the Python sequence instead (for i, item in enumerate(items): ... x[i] ...) "
                  f"or give that dim a fixed size", TypeError)


class _NumberSequence:
    """Python numbers as a tensor the loop indexes: each item is a number again (as eager)."""

    def __init__(self, values):
        self.values = values

    def trip_count(self):
        return self.values.shape[0]

    def item_at(self, i):
        return _as_number(self.values[i])


def convert_for(iterable, body_fn, values, names, extra_test=None, writes=()):
    """``for item in iterable: values = body_fn(item, *values)`` (stopping early when
    ``extra_test(*values)`` is false: the loop's break flag)."""
    values = tuple(values)
    if _static_iterable(iterable):
        if writes:
            _refuse_writes(writes, "a for loop over a tensor")
        return _static_for(iterable, body_fn, values, names, extra_test)
    for item in iterable:
        if extra_test is not None:
            go_on = extra_test(*values)
            if is_static(go_on):
                if writes:
                    _refuse_writes(writes, "a for loop a tensor breaks")
                # a tensor decided to break: the remaining iterations run under that flag
                values = tuple(convert_ifelse(go_on, lambda *v, item=item: body_fn(item, *v),
                                              lambda *v: v, values, names))
                continue
            if not go_on:
                break
        values = tuple(body_fn(item, *values))
    return values


def _static_for(iterable, body_fn, values, names, extra_test):
    import hybridfw as hf
    count = _trip_count(iterable)
    index = hf.zeros((), dtype=int64)

    def loop_cond(i, *vs):
        in_range = i < count
        if extra_test is None:
            return in_range
        from .logical import convert_logical_and
        return convert_logical_and(lambda: in_range, lambda: extra_test(*vs))

    def loop_body(i, *vs):
        return (i + 1, *body_fn(_item_at(iterable, i), *vs))

    _, *finals = convert_while(loop_cond, loop_body, (index, *values),
                               ("<loop index>", *names))
    return tuple(finals)
