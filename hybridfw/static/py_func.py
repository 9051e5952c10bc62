"""Python callbacks in programs: :func:`py_func` and its ``py_func`` operator.

``py_func`` operator: inputs are variable names, outputs are variable names, attrs ``fn`` (the
Python callable), ``out_specs`` (per output, ``(shape, dtype)`` as declared; ``-1`` dims are
known at run time) and ``has_side_effects``. When the program runs, the executor calls
``fn(*input_arrays)`` (numpy arrays, cupy arrays on a GPU) and takes what it returns as the
outputs, after checking each against its spec.

- Static autodiff treats its outputs as constants: no gradient flows through a callback.
- Dead-code elimination removes it when nothing reads its outputs, unless
  ``has_side_effects`` is set (printing, assertions), which keeps it always.
- The printer shows the function's qualified name. A saved program keeps only that name
  (:func:`~hybridfw.static.save_program` warns, since a deployment runs without the Python code);
  a loaded program calling it raises a clear error when it runs. Nothing named in a file is ever
  imported or executed.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..dtypes import as_dtype
from ..ops.registry import TensorLike
from .control_flow import active_program, to_variable
from .executor import OP_COMPILERS
from .ir import Operator, Variable
from .printer import function_name

__all__ = ["py_func", "UnavailableFunction"]


class UnavailableFunction:
    """What a loaded program holds in place of a Python function it was saved with: calling it
    raises an error naming the function."""

    def __init__(self, qualified_name: str):
        self.__module__, _, self.__qualname__ = qualified_name.rpartition(".")
        self.qualified_name = qualified_name

    def __call__(self, *arrays):
        raise RuntimeError(
            f"py_func: this program calls the Python function {self.qualified_name!r}, which a "
            "saved program does not hold (only its name); rebuild the program from the Python "
            "code to run it")

    def __repr__(self) -> str:
        return f"<unavailable Python function {self.qualified_name}>"


def _specs(out_specs, where: str) -> tuple:
    specs = []
    for i, spec in enumerate(out_specs):
        try:
            shape, dtype = spec
            shape = tuple(-1 if s is None else int(s) for s in shape)
            dtype = as_dtype(dtype)
        except (TypeError, ValueError):
            raise TypeError(f"{where}: out_specs[{i}] must be a (shape, dtype) pair, got "
                            f"{spec!r}") from None
        if any(s < -1 for s in shape):
            raise ValueError(f"{where}: out_specs[{i}] has an invalid dim in shape {shape}")
        specs.append((shape, dtype))
    return tuple(specs)


def py_func(fn: Callable, inputs, out_specs, *, has_side_effects: bool = False) -> list:
    """Call ``fn(*arrays)`` on the run-time values of ``inputs``; return its results as a list
    of values, one per ``(shape, dtype)`` in ``out_specs`` (``None``/-1 dims: any size).

    In a program (an input is a static Variable, or a program is being built) this appends a
    ``py_func`` operator (see the module docstring); otherwise ``fn`` runs now on the tensors'
    arrays and the results come back as tensors. ``fn`` must return one array per spec (a tuple
    or list of them; a single array when there is one spec; ``None`` or ``()`` when there are
    none), of the declared dtype and shape, and must not modify its inputs.
    ``has_side_effects=True`` keeps the operator in the program even when nothing reads its
    outputs (``print``, ``assert``). No gradient flows through it.

    Example::

        >>> import numpy as np
        >>> import hybridfw as hf
        >>> prog = hf.static.Program()
        >>> with hf.static.program_guard(prog):
        ...     x = hf.static.data("x", [None])
        ...     y, = hf.static.py_func(np.sort, [x], [((None,), "float32")])
        >>> hf.static.Executor().run(prog, feed={"x": hf.tensor([3.0, 1.0, 2.0])},
        ...                          fetch_list=[y])[0].tolist()
        [1.0, 2.0, 3.0]
    """
    if not callable(fn):
        raise TypeError(f"py_func: fn must be callable, got {type(fn).__name__}")
    name = function_name(fn)
    where = f"py_func({name})"
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    specs = _specs(out_specs, where)
    program = next((v.block.program for v in inputs if isinstance(v, Variable)), None) or \
        active_program()
    if program is None:
        return _eager(fn, name, inputs, specs)
    operands = []
    for i, value in enumerate(inputs):
        if not isinstance(value, TensorLike):
            raise TypeError(f"{where}: inputs[{i}] must be a tensor or Variable, got "
                            f"{type(value).__name__}")
        operands.append(to_variable(program, value).name)
    for operand in operands:  # (print(y) of a y one branch of an if left unassigned)
        if operand in program.stale:
            raise ValueError(f"{where}: {program.stale[operand]}")
        if operand in program.maybe_undefined:
            from .builder import require_defined
            require_defined(program, operand)
    block = program.current_block()
    outs = [block.create_var(shape, dtype) for shape, dtype in specs]
    block.append_op(Operator("py_func", operands, [o.name for o in outs],
                             {"fn": fn, "out_specs": specs,
                              "has_side_effects": bool(has_side_effects)}))
    return outs


def _eager(fn, name, inputs, specs) -> list:
    from ..dygraph.tensor import tensor, wrap_array
    arrays, xp = [], np
    for value in inputs:
        t = value if isinstance(value, TensorLike) else tensor(value)
        arrays.append(t._data)
        xp = t.device.xp
    return [wrap_array(r) for r in check_results(name, fn(*arrays), specs, arrays, xp)]


def check_results(name: str, results, specs, inputs, xp) -> list:
    """``fn``'s results as a list of arrays of ``xp`` matching ``specs`` (copies where they
    would share memory with an input), or a ``TypeError``/``ValueError`` naming ``fn``."""
    if results is None:
        results = []
    elif not isinstance(results, (tuple, list)):
        results = [results]
    results = list(results)
    if len(results) != len(specs):
        raise ValueError(f"py_func: {name} returned {len(results)} value(s), but out_specs "
                         f"declares {len(specs)}")
    checked = []
    for i, (value, (shape, dtype)) in enumerate(zip(results, specs)):
        if value.__class__ is not xp.ndarray:
            if not isinstance(value, (np.ndarray, np.generic, xp.ndarray)):
                raise TypeError(f"py_func: {name} returned a {type(value).__name__} as output "
                                f"{i}; expected an array of dtype {dtype.name} and shape {shape}")
            value = xp.asarray(value)
        if value.dtype != dtype.np:
            raise TypeError(f"py_func: {name} returned dtype {value.dtype} as output {i}, "
                            f"declared {dtype.name}")
        if value.ndim != len(shape) or any(s not in (-1, v) for s, v in zip(shape, value.shape)):
            raise ValueError(f"py_func: {name} returned shape {tuple(value.shape)} as output "
                             f"{i}, declared {shape}")
        if value.base is not None or any(value is a for a in inputs):
            value = value.copy()  # it may view an input, whose memory is reused after the call
        checked.append(value)
    return checked


def _compile_py_func(op, block, slots, xp):
    fn, specs = op.attrs["fn"], op.attrs["out_specs"]
    name = function_name(fn)
    inputs = [slots[n] for n in op.inputs]
    outputs = [slots[n] for n in op.outputs]

    def step(env):
        arrays = [env[s] for s in inputs]
        for s, value in zip(outputs, check_results(name, fn(*arrays), specs, arrays, xp)):
            env[s] = value
    return step


OP_COMPILERS["py_func"] = _compile_py_func
