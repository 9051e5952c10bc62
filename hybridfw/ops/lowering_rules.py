"""Helpers for the ops' lowering rules (the optional ``lower`` slot of an :class:`OpDef`).

A lowering rule tells :mod:`hybridfw.static.lowering` how to write one op in the Python source
that ``numba.njit`` compiles. Two kinds:

- :func:`elementwise_rule`: ``rule(ctx, *operands, **attrs) -> expression`` for one element. The
  operands are scalar expressions, already cast to the op's compute dtype (the ``compute_dtype``
  its ``infer`` gives, else the promoted dtype of its operands, as the kernel sees them);
  ``ctx.dtype`` names that dtype's constructor (``np.float32``) and ``ctx.const(x)`` writes a
  number in it; ``ctx.ufunc(name, *args)`` writes the call of numpy's ufunc ``name``, or of its
  vectorizable float32 version (``hybridfw.static.lowering.vmath``) where there is one, and
  ``ctx.vector(name, *args)`` that version alone (None when there is none). The lowering casts the expression to the op's result dtype, loops over the
  broadcast output shape and inlines chains of such ops into one loop.
- :func:`array_rule`: ``rule(ctx, *operands, **attrs) -> local name`` for a whole value; ``ctx``
  gives the operands' shapes, materialized arrays, element access, loops and ``gemm`` (a call
  of numpy's BLAS for the product of two operands, reading a transposed view in place; None
  where that BLAS was not found; see
  ``hybridfw.static.lowering.emit.ArrayContext``). ``inlines=True`` marks a rule that reads its
  operands element by element only (``concat``): an elementwise operand is then computed inside
  the rule's own loops instead of into a temporary.
- :func:`view_rule`: ``rule(in_shape, out_shape, *operands, **attrs) -> mapping`` for a view
  (a basic ``getitem``, ``permute``): ``mapping(idx)`` gives, for the index expressions ``idx``
  of one result element, those of the element of operand 0 it is (``mapping.transposes = True``
  marks a matrix transpose, which a matrix product then reads in place). Nothing is copied: readers
  index the operand directly. The other operands (index tensors) arrive as
  :class:`ScalarIndex` when they are 0-d integers; any other stays interpreted.

A rule raises :class:`Unsupported` (with the reason) for operands it cannot handle; the op then
stays an executor call.
"""
from __future__ import annotations

__all__ = ["ScalarIndex", "Unsupported", "array_rule", "elementwise_rule", "ufunc_rule",
           "view_rule"]


class Unsupported(Exception):
    """An op (or operand combination) the lowering cannot compile; the message says why."""


def elementwise_rule(fn=None, *, values=None, cuda=None):
    """Mark ``fn`` as an elementwise rule; ``values`` lists the operand indices cast to the
    compute dtype (default: all; ``where`` leaves its condition alone). ``cuda`` (optional) is
    the same element as a CUDA C expression template (``{0}``, ``{1}``: the operands, already of
    the compute type; ``{t}``: that C type), used for cupy ``ElementwiseKernel`` s."""
    def mark(f):
        f.elementwise = True
        f.values = None if values is None else tuple(values)
        f.cuda = cuda
        return f
    return mark if fn is None else mark(fn)


# CUDA C of the ufuncs with one obvious C form (NaN propagates through maximum/minimum, as in
# numpy); the others (floor_divide, remainder, power: Python's integer semantics) have none and
# keep the per-op kernels on the GPU.
_CUDA_UFUNCS = {
    "add": "({0} + {1})", "subtract": "({0} - {1})", "multiply": "({0} * {1})",
    "true_divide": "({0} / {1})", "negative": "(-{0})", "exp": "exp({0})", "log": "log({0})",
    "log1p": "log1p({0})", "sqrt": "sqrt({0})", "sin": "sin({0})", "cos": "cos({0})",
    "tanh": "tanh({0})", "absolute": "({0} < 0 ? -{0} : {0})",
    "maximum": "(({0} > {1} || {0} != {0}) ? {0} : {1})",
    "minimum": "(({0} < {1} || {0} != {0}) ? {0} : {1})",
    "equal": "({0} == {1})", "not_equal": "({0} != {1})", "less": "({0} < {1})",
    "less_equal": "({0} <= {1})", "greater": "({0} > {1})", "greater_equal": "({0} >= {1})",
}


def array_rule(fn=None, *, inlines=False):
    """Mark ``fn`` as a rule producing a whole value (reductions, matmul, concat)."""
    def mark(f):
        f.elementwise = False
        f.values = None
        f.inlines = inlines
        return f
    return mark if fn is None else mark(fn)


class ScalarIndex:
    """A 0-d integer tensor used as an index in a compiled region (what a view rule gets for
    each index operand): ``ndim`` 0, ``dtype`` its hybridfw dtype, ``checked(n)`` writes the
    bounds check for a dim of size ``n`` (an ``IndexError`` as the interpreter raises) and
    returns the position, negative values counted from the end."""

    ndim = 0
    shape = ()

    def __init__(self, dtype, expr: str, emit_line, temp):
        self.dtype, self._expr, self._line, self._temp = dtype, expr, emit_line, temp

    def checked(self, n: int) -> str:
        k = self._temp("ix")
        self._line(f"{k} = np.int64({self._expr})")
        self._line(f"if {k} < {-n} or {k} >= {n}:")
        self._line(f"    raise IndexError('getitem: an index tensor is out of range for a dim "
                   f"of size {n}')")
        self._line(f"{k} = {k} + {n} if {k} < 0 else {k}")
        return k


def view_rule(fn):
    """Mark ``fn`` as the index mapping of a view op (see the module docstring)."""
    fn.elementwise = False
    fn.view = True
    fn.values = None
    return fn


def ufunc_rule(fname: str):
    """The rule of an op whose kernel is the ufunc ``np.<fname>`` (numba compiles ufuncs on
    scalars with numpy's own type rules)."""
    def rule(ctx, *args):
        return ctx.ufunc(fname, *args)
    rule.__name__ = f"{fname}_lower"
    return elementwise_rule(rule, cuda=_CUDA_UFUNCS.get(fname))
