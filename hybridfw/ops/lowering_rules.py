"""Helpers for the ops' lowering rules (the optional ``lower`` slot of an :class:`OpDef`).

A lowering rule tells :mod:`hybridfw.static.lowering` how to write one op in the Python source
that ``numba.njit`` compiles. Two kinds:

- :func:`elementwise_rule`: ``rule(ctx, *operands, **attrs) -> expression`` for one element. The
  operands are scalar expressions, already cast to the op's compute dtype (the ``compute_dtype``
  its ``infer`` gives, else the promoted dtype of its operands, as the kernel sees them);
  ``ctx.dtype`` names that dtype's constructor (``np.float32``) and ``ctx.const(x)`` writes a
  number in it. The lowering casts the expression to the op's result dtype, loops over the
  broadcast output shape and inlines chains of such ops into one loop.
- :func:`array_rule`: ``rule(ctx, *operands, **attrs) -> local name`` for a whole value; ``ctx``
  gives the operands' shapes, materialized arrays, element access and loops (see
  ``hybridfw.static.lowering.emit.ArrayContext``).

A rule raises :class:`Unsupported` (with the reason) for operands it cannot handle; the op then
stays an executor call.
"""
from __future__ import annotations

__all__ = ["Unsupported", "array_rule", "elementwise_rule", "ufunc_rule"]


class Unsupported(Exception):
    """An op (or operand combination) the lowering cannot compile; the message says why."""


def elementwise_rule(fn=None, *, values=None):
    """Mark ``fn`` as an elementwise rule; ``values`` lists the operand indices cast to the
    compute dtype (default: all; ``where`` leaves its condition alone)."""
    def mark(f):
        f.elementwise = True
        f.values = None if values is None else tuple(values)
        return f
    return mark if fn is None else mark(fn)


def array_rule(fn):
    """Mark ``fn`` as a rule producing a whole value (reductions, matmul)."""
    fn.elementwise = False
    fn.values = None
    return fn


def ufunc_rule(fname: str):
    """The rule of an op whose kernel is the ufunc ``np.<fname>`` (numba compiles ufuncs on
    scalars with numpy's own type rules)."""
    def rule(ctx, *args):
        return f"np.{fname}({', '.join(args)})"
    rule.__name__ = f"{fname}_lower"
    return elementwise_rule(rule)
