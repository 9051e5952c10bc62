"""Integer ``floor_divide`` and ``remainder`` for the compiled regions, refusing a zero divisor
as the ops' interpreter kernels do (numba's ``np.floor_divide`` of integers gives 0 there, as
numpy's does). Only imported by generated modules (so numba is there); the lowering writes them
for integer operands (:meth:`hybridfw.static.lowering.emit._ElementContext.integer_division`).
"""
from __future__ import annotations

import numba
import numpy as np

from ...ops.elementwise import IntegerDivisionByZeroError

__all__ = ["floor_divide_int", "remainder_int"]


@numba.njit
def floor_divide_int(a, b):
    if b == 0:
        raise IntegerDivisionByZeroError("floor_divide: integer division by zero (a divisor is 0)")
    return np.floor_divide(a, b)


@numba.njit
def remainder_int(a, b):
    if b == 0:
        raise IntegerDivisionByZeroError("remainder: integer division by zero (a divisor is 0)")
    return np.remainder(a, b)
