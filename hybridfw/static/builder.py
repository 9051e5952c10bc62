"""Building programs: the static interpreter of the op registry, ``program_guard`` and ``data``.

Inside ``program_guard(prog)`` every registry op appends an Operator to the current block instead
of computing: inference and validation run now (clear errors at build time), eager tensors that
appear as operands (parameters, buffers) are captured as persistable Variables, Python scalars
stay inline.

In-place updates: of a Variable, they compute a new value the Python object is rebound to; of a
captured eager tensor (``running_mean.mul_(0.9)`` in BatchNorm), they compute the new value and
append an ``assign_param`` operator (see :mod:`.assign`) that writes it into the tensor when the
program runs. Later reads of that tensor in the same block (or blocks nested in it) read the new
value. Several updates of one tensor in one block make one ``assign_param``, of the last value.
"""
from __future__ import annotations

import contextlib
import numbers

import numpy as np

from ..dtypes import as_dtype
from ..dygraph.autograd import GradMode, GradModeContext
from ..ops.registry import TensorLike, get_op, use_interpreter
from . import ir
from .ir import Operator, Program, Variable

__all__ = ["StaticInterpreter", "program_guard", "data", "default_main_program",
           "current_program", "set_origin_provider", "check_same_program"]

_SCALARS = (int, float, bool)


def check_same_program(program: Program, var: Variable) -> None:
    """A Variable of another program than the one being built is refused: its name would
    stand for whatever value of that name this program has."""
    block = var._block()  # (None: a scratch block dropped since; nothing to compare)
    if block is not None and block.program is not program:
        raise ValueError(f"{var!r} is a value of another program than the one being built "
                         f"(hf.static.program_guard); a program can only use its own values")


def _escaped(op: str, name: str, program: Program | None = None) -> str:
    origin = None
    for block in program.blocks if program is not None else ():
        maker = next((o for o in block.ops if name in o.outputs), None)
        if maker is not None:
            origin = maker.origin
            break
    else:
        origin = program.dropped_origins.get(name) if program is not None else None
    made = ""
    if origin is not None:
        filename, lineno, line = origin
        made = f" (at {filename}, line {lineno}" + (f": {line.strip()})" if line else ")")
    return (f"{op}: value {name!r} is not defined here: it was made inside the body of a loop "
            f"or branch a tensor decides{made} and left it other than as a variable the body "
            "assigns (stored into an object's attribute, or appended to a list inside another "
            "container); assign it to a local variable in the body, and store it after the loop")


def _all_numbers(operands, numbers: set) -> bool:
    """Whether the Variables among ``operands`` (at least one) all stand for Python numbers."""
    found = False
    for o in operands:
        if isinstance(o, Variable):
            if o.name not in numbers:
                return False
            found = True
    return found


class StaticInterpreter:
    """Record ops into ``program``'s current block."""

    name = "static"

    def __init__(self, program: Program):
        self.program = program

    def _operand(self, value):
        if isinstance(value, Variable):
            check_same_program(self.program, value)
            return value
        if isinstance(value, TensorLike):  # an eager tensor: parameter, buffer or constant
            return self.program.value_of(value)
        if value.__class__ in _SCALARS:
            return value
        return self.program.constant(value)

    def apply(self, op, args, attrs):
        if any(isinstance(a, np.generic) for a in args) and \
                any(isinstance(a, (Variable, TensorLike)) for a in args):
            # a numpy scalar beside a tensor: the Python number it holds, as eager reads it
            args = tuple(a.item() if isinstance(a, np.generic) else a for a in args)
        operands = tuple(self._operand(a) for a in args)
        block = self.program.current_block()
        guarded, stale = self.program.maybe_undefined, self.program.stale
        for o in operands:
            if o.__class__ is Variable:
                if block.find_var(o.name) is None:
                    raise ValueError(_escaped(op.name, o.name, self.program))
                if guarded and o.name in guarded:
                    require_defined(self.program, o.name)
                if stale and o.name in stale:
                    raise ValueError(f"{op.name}: {stale[o.name]}")
        shape, dtype, _ = op.infer(*operands, **attrs)
        out = block.create_var(shape, dtype)
        block.append_op(Operator(op.name, [o.name if isinstance(o, Variable) else o
                                           for o in operands], [out.name], attrs))
        if op.name in _TRACKED_VIEWS and len(operands) == 1 and operands[0].__class__ is Variable:
            self.program.view_links.setdefault(operands[0].name, []).append((out, op, attrs))
            self.program.view_bases[out.name] = (operands[0], op, attrs)
        numbers = self.program.python_scalars
        if numbers and _all_numbers(operands, numbers):  # x.item() + 1: a number too
            numbers.add(out.name)
        return out

    def apply_inplace(self, op, target, args, attrs):
        """Static programs are functional: compute a new value and rebind ``target`` to it (a
        captured eager tensor: record the write, see the module docstring)."""
        if not isinstance(target, Variable):
            if isinstance(target, TensorLike):
                return self._update_captured(op, target, args, attrs)
            raise TypeError(f"{op.name}: in-place update of a {type(target).__name__} inside a "
                            "static program; only Variables and tensors can be updated there")
        out = self.apply(op, args, attrs)
        if target.name in self.program.python_scalars:  # a Python number: `n += x` rebinds n
            return out
        if tuple(out.shape) != tuple(target.shape) and -1 not in target.shape:
            raise ValueError(f"{op.name}: in-place result of shape {out.shape} does not match "
                             f"the target of shape {target.shape}")
        if out.dtype is not target.dtype:  # the dtype rule of eager in-place ops (and PyTorch)
            if out.dtype.category > target.dtype.category:
                raise TypeError(f"{op.name}: result type {out.dtype} can't be cast to the "
                                f"in-place output type {target.dtype}")
            out = self.apply(get_op("cast"), (out,), {"dtype": target.dtype})
        if not GradMode.enabled and target.requires_grad:
            out = self._keep_gradient_path(target, out)
        old_name = target.name
        if out.block.idx != 0:  # (to_static refuses to write such an update of an argument back)
            self.program.updated_in_blocks.add(old_name)
        rebind(target, out)
        # as in eager code, views of the old value see the update, and an update of a view
        # writes through to the value it views
        self._refresh_views(old_name, target)
        source = self.program.view_bases.get(old_name)
        if source is not None:
            if source[0].block is out.block:
                self._write_through(target, *source)
            else:
                self.program.stale[source[0].name] = _stale_message(
                    "a view of it was updated in place", source[0].name)
        return target

    def _keep_gradient_path(self, old, new):
        """The value a tensor that needs gradients holds after an in-place update under
        ``hf.no_grad()``: ``new``, through which later uses send their gradient to ``old``, as
        in eager code, where the update records nothing and the tensor (a leaf, say) keeps its
        place in the graph (``Embedding(max_norm=...)`` renormalizes its weight this way)."""
        with GradModeContext(True):
            return self.apply(get_op("updated_under_no_grad"), (old, new), {})

    def _refresh_views(self, old_name: str, value: Variable) -> None:
        """Each view taken of ``old_name`` (now ``value``'s previous value) is taken again
        from ``value``; the Python object the user holds becomes the new view. A view taken
        outside the branch or loop body making the update cannot follow it: a later use of
        it is an error (never a stale value)."""
        links = self.program.view_links
        for view, op, attrs in links.pop(old_name, ()):
            previous = view.name
            if view.block is not value.block:
                self.program.stale[previous] = _stale_message(
                    "it is a view, and the value it views was updated in place", previous)
                continue
            rebind(view, self.apply(op, (value,), attrs))
            links[value.name][-1] = (view, op, attrs)  # (the user's object, not the fresh one)
            self._refresh_views(previous, view)

    def _write_through(self, view: Variable, base: Variable, op, attrs) -> None:
        """``base`` updated with the new value of ``view`` (one of its views)."""
        if op.name == "getitem":
            self.apply_inplace(get_op("index_put"), base, (base, view), {"spec": attrs["spec"]})
        elif op.name == "permute":
            order = [0] * len(attrs["dims"])
            for i, d in enumerate(attrs["dims"]):
                order[d % len(order)] = i
            self.apply_inplace(get_op("permute"), base, (view,), {"dims": tuple(order)})
        elif list(base.shape).count(-1) <= 1:  # reshape
            self.apply_inplace(get_op("reshape"), base, (view,), {"shape": tuple(base.shape)})
        else:
            raise ValueError(f"in-place update of a view ({op.name}) of a value whose shape "
                             f"{tuple(base.shape)} has several dims known only at run time: "
                             "the update cannot reach that value in a static program; update "
                             "the value itself, or use an out-of-place operation")

    def _update_captured(self, op, target, args, attrs):
        program = self.program
        operands = tuple(self._operand(a) for a in args)
        shape, dtype, _ = op.infer(*operands, **attrs)  # checked before anything is recorded
        if len(shape) != len(target.shape) or any(
                a != b and a != -1 for a, b in zip(shape, target.shape)):
            raise ValueError(f"{op.name}: in-place output of shape {tuple(target.shape)} does not "
                             f"match the broadcast shape {tuple(shape)}")
        if dtype is not target.dtype and dtype.category > target.dtype.category:
            raise TypeError(f"{op.name}: result type {dtype} can't be cast to the in-place "
                            f"output type {target.dtype}")
        out = self.apply(op, operands, attrs)
        if out.dtype is not target.dtype:
            out = self.apply(get_op("cast"), (out,), {"dtype": target.dtype})
        if not GradMode.enabled and getattr(target, "requires_grad", False):
            out = self._keep_gradient_path(self._operand(target), out)
        param = program.capture(target).name
        block = program.current_block()
        # one write per tensor and block: a second update moves the first write to its end
        for existing in block.ops:
            if existing.type == "assign_param" and existing.inputs[0] == param:
                block.ops.remove(existing)
                existing.inputs = (param, out.name)
                block.append_op(existing)
                break
        else:
            block.append_op(Operator("assign_param", [param, out.name], []))
        program._updated[id(target)] = out.name
        return target


def set_origin_provider(provider):
    """Set (or, with None, clear) the function that gives each new operator its origin; returns
    the one set before (so a caller can restore it).

    ``provider()`` is called once per operator appended to a program and returns
    ``(filename, lineno, source_line)`` (the user's line that built it) or None.
    ``hf.jit.to_static`` sets one that walks the Python stack to the user's code; errors raised
    while the program runs (and shape errors for the fed shapes) then name that line.

    Example::

        >>> import hybridfw as hf
        >>> hf.static.set_origin_provider(lambda: ("model.py", 3, "y = x * 2"))
        >>> prog = hf.static.Program()
        >>> with hf.static.program_guard(prog):
        ...     y = hf.static.data("x", [2]) * 2
        >>> hf.static.set_origin_provider(None)
        >>> prog.global_block().ops[0].origin
        ('model.py', 3, 'y = x * 2')
    """
    if provider is not None and not callable(provider):
        raise TypeError(f"set_origin_provider: expected a callable or None, got "
                        f"{type(provider).__name__}")
    previous, ir._origin_provider = ir._origin_provider, provider
    return previous


_guard_stack: list = []
_default_program = [Program()]


def default_main_program() -> Program:
    return _default_program[0]


def current_program() -> Program | None:
    return _guard_stack[-1] if _guard_stack else None


@contextlib.contextmanager
def program_guard(main_program: Program, startup_program: Program | None = None):
    """Ops inside the block are recorded into ``main_program`` (``startup_program`` is accepted
    for Paddle compatibility; parameters are captured from their eager values)."""
    if not isinstance(main_program, Program):
        raise TypeError(f"program_guard: expected a hf.static.Program, got "
                        f"{type(main_program).__name__}")
    _guard_stack.append(main_program)
    try:
        with use_interpreter(StaticInterpreter(main_program)):
            yield main_program
    finally:
        _guard_stack.pop()


def data(name: str, shape, dtype="float32") -> Variable:
    """An input of the current program, fed by name at run time; ``None``/-1 dims are dynamic."""
    program = current_program()
    if program is None:
        raise RuntimeError("hf.static.data must be called inside hf.static.program_guard(...)")
    if not isinstance(name, str) or not name:
        raise TypeError(f"data: name must be a non-empty string (the key to feed the input "
                        f"by), got {name!r}")
    if not isinstance(shape, (list, tuple)) or any(
            s is not None and (isinstance(s, bool) or not isinstance(s, numbers.Integral))
            for s in shape):
        raise TypeError(f"data {name!r}: shape must be a list or tuple of ints (None or -1 "
                        f"for a dim known only at run time), got {shape!r}")
    shape = tuple(-1 if s is None else int(s) for s in shape)
    for s in shape:
        if s < -1:
            raise ValueError(f"data {name!r}: invalid dim {s} in shape {shape}")
    block = program.global_block()
    if name in block.vars:
        raise ValueError(f"data: a variable named {name!r} already exists in the program")
    var = block.create_var(shape, as_dtype(dtype), name)
    program.feeds.append(name)
    return var


def _stale_message(what: str, name: str) -> str:
    return (f"value {name!r} cannot be used here: {what} inside the body of a branch or loop a "
            "tensor decides, but it was made outside that body, so in a static program the "
            "update cannot reach it (in eager code it would). Take the view inside the body, "
            "or update with out-of-place operations (y = y + 1) instead")


# operators whose result is a view of their only input in eager code
_TRACKED_VIEWS = frozenset({"getitem", "reshape", "permute"})


def rebind(target: Variable, out: Variable) -> None:
    """The Python object ``target`` (which a user holds) becomes the value ``out``; the value
    it stood for keeps its name, under a new object (earlier operators read it)."""
    target.block.vars[target.name] = Variable(target.block, target.name, target.shape,
                                              target.dtype, target.persistable)
    target.name = out.name
    target.block = out.block
    target.persistable = False
    target.dtype = out.dtype
    target.shape = out.shape
    out.block.vars[out.name] = target


def require_defined(program, name: str) -> None:
    """Append, to the current block, a check that value ``name`` (one of
    ``program.maybe_undefined``) was assigned on the path this run took: the use of a variable
    an ``if`` on a tensor condition assigns in one branch only raises, as eager Python does,
    ``UnboundLocalError`` when the other branch ran (rather than reading the zeros standing in
    for it there)."""
    from .py_func import py_func
    flag, variable, where = program.maybe_undefined[name]
    at = f" at {where[0]}, line {where[1]}" if where else ""
    # (where[2] == "loop": a loop body assigns it, and this run did not enter the loop)
    why = f"the loop on a tensor condition{at} assigns it only in its body, which this run " \
          "did not enter" if where and where[2:] == ("loop",) else \
          f"the if on a tensor condition{at} assigns it only in the branch this run did not take"

    def run(assigned):
        if not bool(assigned):
            raise UnboundLocalError(
                f"cannot access local variable {variable!r} where it is not associated with a "
                f"value: {why}")
        return ()
    run.__qualname__ = f"defined({variable})"
    py_func(run, [program.current_block().var(flag)], [], has_side_effects=True)
