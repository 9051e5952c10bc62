"""float32 ``exp``, ``tanh`` and ``sigmoid`` that LLVM vectorizes, for the compiled regions.

numba compiles ``np.exp`` of a float32 to a call of the C library's ``expf`` per element: the
call stops LLVM from vectorizing the loop, so a fused loop over a (32, 128) LSTM gate ran ~3x
slower than numpy's SIMD kernels (which make a temporary per op). These are written in float32
arithmetic only (Cephes' polynomials), so a loop using them is vectorized like one of adds:

- ``exp32``: ``exp(x) = 2**n * exp(r)``, ``n = round(x / ln 2)``, ``|r| <= ln(2) / 2``; ``exp(r)``
  by a degree-7 polynomial, ``2**n`` built from its exponent bits (two factors, so results in
  float32's subnormal range and the overflow to ``inf`` come out as numpy's). At most 1 ulp from
  the exact value (numpy's own float32 ``exp`` is within 2); ``nan`` stays ``nan``.
- ``tanh32``: an odd polynomial for ``|x| < 0.625``, else ``1 - 2 / (exp(2|x|) + 1)`` with the
  sign of ``x``; within 2 ulp of numpy's ``tanh``; ``-0.0`` stays ``-0.0``.
- ``sigmoid32``: ``e / (1 + e)`` or ``1 / (1 + e)`` with ``e = exp(-|x|)``, the interpreter
  kernel's formula (exact for x << 0 too).

Each is a numba *intrinsic*: its LLVM instructions are written straight into the caller (plain
IEEE float32 operations, no fast-math), so every use is inlined however many a region has (as
numba functions, LLVM stopped inlining them after a few calls in one region and the remaining
loops ran scalar, 10x slower) and nothing is compiled per helper. Only imported by generated
modules (so numba is there). The lowering writes them for float32 operands
(:meth:`hybridfw.static.lowering.emit._ElementContext.ufunc`); float64 keeps numba's
``np.exp``/``np.tanh`` (the C library's, within 1 ulp).
"""
from __future__ import annotations

import llvmlite.ir as lir
import numpy as np
from numba import types
from numba.extending import intrinsic

__all__ = ["exp32", "sigmoid32", "tanh32"]

_FLOAT = lir.FloatType()
_INT = lir.IntType(32)
_LOG2E = 1.44269504088896341
_LN2_HI, _LN2_LO = 0.693359375, -2.12194440e-4  # ln 2 = hi + lo, hi exact in 9 bits
_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
          1.6666665459e-1, 5.0000001201e-1)
_TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
           -3.33332819422e-1)
_EXP_MAX, _EXP_MIN = 88.8, -104.0  # beyond: inf and 0 (below the smallest subnormal)
_TANH_SMALL = 0.625


def _c(value) -> lir.Constant:
    """A float32 constant (rounded to float32 first, as ``np.float32(value)``)."""
    return lir.Constant(_FLOAT, float(np.float32(value)))


def _horner(b, x, coefficients):
    acc = _c(coefficients[0])
    for coefficient in coefficients[1:]:
        acc = b.fadd(b.fmul(acc, x), _c(coefficient))
    return acc


def _exp_ir(b, x):
    x = b.select(b.fcmp_ordered(">", x, _c(_EXP_MAX)), _c(_EXP_MAX), x)
    x = b.select(b.fcmp_ordered("<", x, _c(_EXP_MIN)), _c(_EXP_MIN), x)
    floor = b.module.declare_intrinsic("llvm.floor", [_FLOAT])
    fn = b.call(floor, [b.fadd(b.fmul(x, _c(_LOG2E)), _c(0.5))])
    fn = b.select(b.fcmp_ordered("==", fn, fn), fn, _c(0.0))  # nan: any n (r carries the nan)
    r = b.fsub(b.fsub(x, b.fmul(fn, _c(_LN2_HI))), b.fmul(fn, _c(_LN2_LO)))
    y = b.fadd(b.fadd(b.fmul(_horner(b, r, _EXP_P), b.fmul(r, r)), r), _c(1.0))
    n = b.fptosi(fn, _INT)
    half = b.ashr(n, lir.Constant(_INT, 1))  # 2**n = 2**half * 2**(n - half), both normal
    bias = lir.Constant(_INT, 127)
    shift = lir.Constant(_INT, 23)
    scale1 = b.bitcast(b.shl(b.add(half, bias), shift), _FLOAT)
    scale2 = b.bitcast(b.shl(b.add(b.sub(n, half), bias), shift), _FLOAT)
    return b.fmul(b.fmul(y, scale1), scale2)


def _tanh_ir(b, x):
    fabs = b.module.declare_intrinsic("llvm.fabs", [_FLOAT])
    a = b.call(fabs, [x])
    z = b.fmul(x, x)
    small = b.fadd(b.fmul(b.fmul(_horner(b, z, _TANH_P), z), x), x)
    small = b.select(b.fcmp_ordered("==", a, _c(0.0)), x, small)  # -0.0 stays -0.0
    e = _exp_ir(b, b.fmul(a, _c(2.0)))
    big = b.fsub(_c(1.0), b.fdiv(_c(2.0), b.fadd(e, _c(1.0))))
    big = b.select(b.fcmp_ordered(">=", x, _c(0.0)), big, b.fsub(_c(-0.0), big))
    return b.select(b.fcmp_ordered("<", a, _c(_TANH_SMALL)), small, big)


def _sigmoid_ir(b, x):
    # the interpreter kernel's formula: e = exp(-|x|); 1/(1+e) for x >= 0, e/(1+e) below
    negative = b.fcmp_ordered("<", x, _c(0.0))
    e = _exp_ir(b, b.select(negative, x, b.fsub(_c(-0.0), x)))
    return b.fdiv(b.select(negative, e, _c(1.0)), b.fadd(e, _c(1.0)))


def _float32_intrinsic(emit, name):
    def typer(typingctx, x):
        if x != types.float32:
            return None

        def codegen(context, builder, signature, args):
            return emit(builder, args[0])
        return types.float32(types.float32), codegen
    typer.__name__ = name
    return intrinsic(typer)


exp32 = _float32_intrinsic(_exp_ir, "exp32")
tanh32 = _float32_intrinsic(_tanh_ir, "tanh32")
sigmoid32 = _float32_intrinsic(_sigmoid_ir, "sigmoid32")
