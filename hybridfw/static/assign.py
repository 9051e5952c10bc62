"""Writes to persistable state: the ``assign_param`` operator.

``assign_param(param, value)`` (no outputs, no attributes) writes ``value`` into the eager tensor
that the program holds as parameter ``param`` (``program.params[param]``), in place, when the
program runs, and counts the write in the tensor's storage version as an eager in-place op does.
The static interpreter appends it for in-place updates of captured tensors (BatchNorm's running
statistics, see :mod:`.builder`); reads of the tensor recorded after the update read ``value``,
so the program stays in single assignment and the write is the only effect.

Passes treat it as a side effect (:mod:`.passes.analysis`): dead-code elimination keeps it,
constant folding never takes an assigned parameter for a constant, and CSE and fusion leave
alone the operators that read an assigned parameter, which must run before the write.

Example::

    >>> import hybridfw as hf
    >>> count = hf.tensor(0)
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     _ = count.add_(1)
    >>> print(prog)
    param param0 : () int64
    t1 = add(param0, 1) : () int64
    assign_param(param0, t1)
    >>> for _ in range(3):
    ...     _ = hf.static.Executor().run(prog)
    >>> count.item()
    3
"""
from __future__ import annotations

from .executor import OP_COMPILERS

__all__: list = []


def _compile_assign_param(op, block, slots, xp):
    param, value = op.inputs
    tensor = block.program.params.get(param)
    if tensor is None:
        raise KeyError(f"assign_param: {param!r} is not a parameter of the program, so there is "
                       "no tensor to write")
    target_slot, value_slot = slots[param], slots[value]

    def step(env):
        target, new = env[target_slot], env[value_slot]
        if new.shape != target.shape:
            raise ValueError(f"assign_param: the new value of {param!r} ({value!r}) has shape "
                             f"{tuple(new.shape)}, the parameter {tuple(target.shape)}")
        xp.copyto(target, new)
        tensor._storage.version += 1  # as an eager in-place write: saved copies go stale
    return step


OP_COMPILERS["assign_param"] = _compile_assign_param
