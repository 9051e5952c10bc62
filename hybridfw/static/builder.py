"""Building programs: the static interpreter of the op registry, ``program_guard`` and ``data``.

Inside ``program_guard(prog)`` every registry op appends an Operator to the current block instead
of computing: inference and validation run now (clear errors at build time), eager tensors that
appear as operands (parameters, buffers) are captured as persistable Variables, Python scalars
stay inline.
"""
from __future__ import annotations

import contextlib

from ..dtypes import as_dtype
from ..ops.registry import TensorLike, use_interpreter
from .ir import Operator, Program, Variable

__all__ = ["StaticInterpreter", "program_guard", "data", "default_main_program",
           "current_program"]

_SCALARS = (int, float, bool)


class StaticInterpreter:
    """Record ops into ``program``'s current block."""

    name = "static"

    def __init__(self, program: Program):
        self.program = program

    def _operand(self, value):
        if isinstance(value, Variable):
            return value
        if isinstance(value, TensorLike):  # an eager tensor: parameter, buffer or constant
            return self.program.capture(value)
        if value.__class__ in _SCALARS:
            return value
        return self.program.constant(value)

    def apply(self, op, args, attrs):
        operands = tuple(self._operand(a) for a in args)
        shape, dtype, _ = op.infer(*operands, **attrs)
        block = self.program.current_block()
        out = block.create_var(shape, dtype)
        block.append_op(Operator(op.name, [o.name if isinstance(o, Variable) else o
                                           for o in operands], [out.name], attrs))
        return out

    def apply_inplace(self, op, target, args, attrs):
        """Static programs are functional: compute a new value and rebind ``target`` to it."""
        if not isinstance(target, Variable):
            raise TypeError(f"{op.name}: in-place update of a {type(target).__name__} inside a "
                            "static program; only Variables can be updated there")
        out = self.apply(op, args, attrs)
        if tuple(out.shape) != tuple(target.shape) and -1 not in target.shape:
            raise ValueError(f"{op.name}: in-place result of shape {out.shape} does not match "
                             f"the target of shape {target.shape}")
        block = out.block
        old_name = target.name
        # the old value keeps its name (earlier operators read it); the Python object the user
        # holds becomes the new value
        target.block.vars[old_name] = Variable(target.block, old_name, target.shape,
                                               target.dtype, target.persistable)
        target.name = out.name
        target.block = block
        target.persistable = False
        target.dtype = out.dtype
        block.vars[out.name] = target
        return target


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
