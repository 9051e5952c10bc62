"""float32 ``exp``, ``tanh`` and ``sigmoid`` that LLVM vectorizes, for the compiled regions.

numba compiles ``np.exp`` of a float32 to a call of the C library's ``expf`` per element: the
call stops LLVM from vectorizing the loop, so a fused loop over a (32, 128) LSTM gate ran ~3x
slower than numpy's SIMD kernels (which make a temporary per op). These are written in float32
arithmetic only (Cephes' polynomials), so a loop calling them is vectorized like one of adds:

- ``exp32``: ``exp(x) = 2**n * exp(r)``, ``n = round(x / ln 2)``, ``|r| <= ln(2) / 2``; ``exp(r)``
  by a degree-7 polynomial, ``2**n`` built from its exponent bits (two factors, so results in
  float32's subnormal range and the overflow to ``inf`` come out as numpy's). At most 1 ulp from
  the exact value (numpy's own float32 ``exp`` is within 2); ``nan`` stays ``nan``.
- ``tanh32``: an odd polynomial for ``|x| < 0.625``, else ``1 - 2 / (exp(2|x|) + 1)`` with the
  sign of ``x``; within 2 ulp of numpy's ``tanh``.
- ``sigmoid32``: ``tanh(x / 2) / 2 + 1 / 2``, the interpreter kernel's formula.

Only imported by generated modules (so numba is there). The lowering writes them for float32
operands (:meth:`hybridfw.static.lowering.emit.ElementContext.ufunc`); float64 keeps numba's
``np.exp``/``np.tanh`` (the C library's, within 1 ulp).
"""
from __future__ import annotations

import llvmlite.ir as lir
import numba
import numpy as np
from numba import types
from numba.extending import intrinsic

__all__ = ["exp32", "sigmoid32", "tanh32"]

_F = np.float32
_LOG2E = _F(1.44269504088896341)
_LN2_HI, _LN2_LO = _F(0.693359375), _F(-2.12194440e-4)  # ln 2 = hi + lo, hi exact in 9 bits
_EXP_P = tuple(_F(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                                  4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1))
_TANH_P = tuple(_F(c) for c in (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2,
                                   1.33314422036e-1, -3.33332819422e-1))
_EXP_MAX, _EXP_MIN = _F(88.8), _F(-104.0)  # beyond: inf and 0 (below the smallest subnormal)
_HALF, _ONE, _TWO, _ZERO = _F(0.5), _F(1.0), _F(2.0), _F(0.0)
_TANH_SMALL = _F(0.625)


@intrinsic
def _int32_bits_as_float32(typingctx, bits):
    """The float32 whose bit pattern is the low 32 bits of the integer ``bits`` (LLVM
    ``trunc`` + ``bitcast``, vectorizable; numba computes int32 arithmetic in int64)."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        value = args[0]
        if value.type.width > 32:
            value = builder.trunc(value, lir.IntType(32))
        return builder.bitcast(value, lir.FloatType())
    return types.float32(bits), codegen


_jit = numba.njit(error_model="numpy", cache=True)


@_jit
def exp32(x):
    x = _EXP_MAX if x > _EXP_MAX else x
    x = _EXP_MIN if x < _EXP_MIN else x
    fn = np.floor(x * _LOG2E + _HALF)
    fn = fn if fn == fn else _ZERO  # nan: any n (the polynomial carries the nan)
    r = (x - fn * _LN2_HI) - fn * _LN2_LO
    p = ((((_EXP_P[0] * r + _EXP_P[1]) * r + _EXP_P[2]) * r + _EXP_P[3]) * r + _EXP_P[4]) * r \
        + _EXP_P[5]
    y = p * (r * r) + r + _ONE
    n = np.int32(fn)
    half = n >> 1  # 2**n as 2**half * 2**(n - half): both factors normal numbers
    scale1 = _int32_bits_as_float32((half + 127) << 23)
    scale2 = _int32_bits_as_float32((n - half + 127) << 23)
    return y * scale1 * scale2


@_jit
def tanh32(x):
    a = abs(x)
    z = x * x
    small = ((((_TANH_P[0] * z + _TANH_P[1]) * z + _TANH_P[2]) * z + _TANH_P[3]) * z
             + _TANH_P[4]) * z * x + x
    big = _ONE - _TWO / (exp32(_TWO * a) + _ONE)
    big = big if x >= _ZERO else -big
    small = small if a != _ZERO else x  # -0.0 stays -0.0
    return small if a < _TANH_SMALL else big


@_jit
def sigmoid32(x):
    return tanh32(x * _HALF) * _HALF + _HALF
