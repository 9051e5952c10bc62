"""Integer floor_divide/remainder in compiled regions refuse a zero divisor, as the
interpreter's kernels do (numba's integer division by zero gives 0)."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.ops.elementwise import IntegerDivisionByZeroError


def _chain(a, b):
    c = a * 2 + 1
    return (c // b) % (b + 1)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_compiled_integer_division_checks_the_divisor(dtype, need_numba):
    f = hf.jit.to_static(_chain, backend="compiled")
    a = hf.tensor([3, 4], dtype=dtype)
    out = f(a, hf.tensor([2, 3], dtype=dtype))
    np.testing.assert_array_equal(out.numpy(), [0, 3])  # [7, 9] // [2, 3] % [3, 4]
    report = f.compile_report()
    assert "floor_divide" in report and "remainder" in report and "interpreted:" not in report
    with pytest.raises(IntegerDivisionByZeroError, match="floor_divide: integer division by "):
        f(a, hf.tensor([2, 0], dtype=dtype))
