"""Constant folding: operators whose inputs are all constants are evaluated once, now.

A *constant* is a Python number, a parameter the program owns (``program.owned``: made by
``program.constant`` from Python data, so nobody else can change it) that does not require grad
and that no ``assign_param`` writes, or the result of an operator folded before. A captured
tensor that does not require grad (a module's buffer, a global tensor) is no constant: its
owner may update it in place between calls (BatchNorm's running statistics, ``load_state_dict``,
``w.mul_(10)``), and every call must read its current value. A pure registry op of the global block (no random
draws, no side effects, not ``to_device``) whose tensor inputs are all constants is run through
its registry kernel exactly as the executor would run it (same casts to the compute dtype, same
result dtype), and its output becomes a constant parameter under the same name, so readers and
fetch targets are unchanged.
Folded values that only fed other folded operators are dropped. Results bigger than
:data:`MAX_FOLDED_ELEMENTS` and bigger than every input (``full``, ``broadcast_to`` of a scalar)
are left to run time, so folding never bloats the parameters. An operator whose kernel raises is
left alone: the error belongs to the run that executes it.

Operators inside sub-blocks are not folded (their results would have to move to the global block
and into the captured inputs of every enclosing operator).

Example::

    >>> import hybridfw as hf
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     x = hf.static.data("x", [3])
    ...     y = x + hf.arange(3.0) * 2.0
    >>> print(run(prog, fetch=[y]))
    input x : (3,) float32
    param t1 : (3,) float32
    t2 = add(x, t1) : (3,) float32
"""
from __future__ import annotations

import numpy as np

from ...dygraph.tensor import wrap_array
from ...ops.infer import numel
from ...ops.registry import TensorMeta, get_op
from ..ir import Program, Variable
from .analysis import assigned_state, is_pure, readers, resolve_fetch
from .clone import working_copy
from .rewrite import erase_ops

__all__ = ["run", "MAX_FOLDED_ELEMENTS", "NOT_FOLDED"]

MAX_FOLDED_ELEMENTS = 1 << 16
NOT_FOLDED = frozenset({"to_device"})  # its result belongs on another device than the program's


def run(program: Program, fetch=None) -> Program:
    """A copy of ``program`` with its constant computations replaced by constant parameters."""
    fetch = set(resolve_fetch(program, fetch))
    program = working_copy(program)
    block = program.global_block()
    xp = program.device.xp
    assigned = assigned_state(program)  # buffers the program writes are no constants
    constants = {name: t._data for name, t in program.params.items()
                 if name in program.owned and not getattr(t, "requires_grad", False)
                 and name not in assigned}
    folded: dict = {}
    for op in block.ops:
        for i in op.inputs:  # (most operators read a computed value: found at the first input)
            if i.__class__ is str:
                if i not in constants and i not in folded:
                    break
            elif not isinstance(i, (int, float)):
                break
        else:
            if op.type not in NOT_FOLDED and is_pure(block, op):
                value = _evaluate(block, op, {**constants, **folded}, xp)
                if value is not None:
                    folded[op.outputs[0]] = value
    if not folded:
        return program
    erase_ops(block, [op for op in block.ops if any(name in folded for name in op.outputs)])
    still_read = readers(program)
    for name, value in folded.items():
        if name in still_read or name in fetch:
            tensor = wrap_array(value, program.device)
            block.vars[name] = Variable(block, name, tensor.shape, tensor.dtype, persistable=True)
            program.params[name] = tensor
            program._captured[id(tensor)] = name
            program.owned.add(name)
    return program


def _evaluate(block, op, values: dict, xp):
    """The operator's result, computed as the executor would; None when it is too big to keep
    or its kernel fails."""
    opdef = get_op(op.type)
    out = block.var(op.outputs[0])
    arrays = [values[i] if isinstance(i, str) else i for i in op.inputs]
    sizes = [a.size for a in arrays if hasattr(a, "size")]
    if -1 in out.shape or (numel(out.shape) > MAX_FOLDED_ELEMENTS
                           and numel(out.shape) > max(sizes, default=0)):
        return None
    metas = [TensorMeta(block.var(i).shape, block.var(i).dtype) if isinstance(i, str) else i
             for i in op.inputs]
    _, dtype, compute_dtype = opdef.infer(*metas, **op.attrs)
    if compute_dtype is not None:
        arrays = [a.astype(compute_dtype.np) if isinstance(i, str) and m.dtype is not compute_dtype
                  and m.dtype.name != "bool" else a
                  for i, a, m in zip(op.inputs, arrays, metas)]
    try:
        with np.errstate(all="ignore"):
            result = opdef.kernel(xp, *arrays, **op.attrs)
    except Exception:  # noqa: BLE001 - the run that executes the operator reports it
        return None
    result = xp.asarray(result)
    if result.dtype != dtype.np:
        result = result.astype(dtype.np)
    return result.copy() if opdef.view or result.base is not None else result

