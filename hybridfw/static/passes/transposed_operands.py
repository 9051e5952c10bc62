"""A transposed matrix many products read on their right is copied once, contiguous.

numpy hands ``a @ w.T`` (``w.T`` a transposed view) to BLAS with its transpose flag, and for
the thin products of a recurrence that kernel was measured ~35% slower here than the same
product with a contiguous right operand: ``(32, 512) @ (512, 128)`` 53.6 µs against 39.4
(OpenBLAS, one thread), and ``(32, 128) @ (128, 512)`` 51.9 against 35.7. An unrolled LSTM's
backward reads ``W_hh.T`` at every step (``dgates @ W_hh.T``, on the critical path): 50 such
products. Copying the transpose once (~60 µs for a 128 x 512 matrix) makes each of them the
fast kind. A transposed left operand showed no such difference (the weight gradients'
``h.T @ g``), so left operands are left alone.

Matched: a 2-D ``permute(v, (1, 0))`` of the global block read as the right operand of at least
:data:`MIN_READS` ``matmul`` s there, none of them fetched; the copy (the registry's ``copy``
op, which makes a C-contiguous array) sits right after the permute and those matmuls read it.
The products may differ by rounding only (BLAS can block the sums differently).
"""
from __future__ import annotations

from ..ir import Operator, Program
from .analysis import readers, resolve_fetch
from .clone import working_copy

__all__ = ["MIN_READS", "run"]

MIN_READS = 5  # the copy costs about what four of the products save


def run(program: Program, fetch=None) -> Program:
    """A copy of ``program`` with each often-read transposed right operand copied once."""
    program = working_copy(program)
    block = program.global_block()
    protected = set(resolve_fetch(program, fetch))
    read = readers(program)
    copies = {}  # id(permute op) -> the copy operator after it
    for op in block.ops:
        if op.type != "permute" or tuple(op.attrs.get("dims", ())) not in ((1, 0), (-1, -2)):
            continue
        out = op.outputs[0]
        var = block.vars.get(out)
        if var is None or len(var.shape) != 2 or out in protected:
            continue
        right = [user for user in read.get(out, ()) if user.type == "matmul" and
                 len(user.inputs) == 2 and user.inputs[1] == out and user.inputs[0] != out and
                 any(user is o for o in block.ops)]
        if len(right) < MIN_READS:
            continue
        copied = block.create_var(tuple(var.shape), var.dtype).name
        copies[id(op)] = Operator("copy", [out], [copied], origin=op.origin)
        for user in right:
            user.inputs = (user.inputs[0], copied) if isinstance(user.inputs, tuple) else \
                [user.inputs[0], copied]
    if not copies:
        return program
    ops = []
    for op in block.ops:
        ops.append(op)
        if id(op) in copies:
            ops.append(copies[id(op)])
    block.ops = ops
    return program
