"""sum(dtype=...) gives that dtype: an int32 dtype gave int64 (the primitive promotes integer
sums to int64); the int32 sum wraps around as PyTorch's does."""
import numpy as np
import pytest

import hybridfw as hf


def _cases(lib):
    x = lib.tensor([[2 ** 30, 2 ** 30], [1, 2]], dtype=lib.int32)
    return [x.sum(dtype=lib.int32), lib.sum(x, 1, dtype=lib.int32),
            lib.tensor([True, True]).sum(dtype=lib.int32), x.sum(), x.sum(dtype=lib.float64)]


EXPECTED = [(np.int32(-2147483645), "int32"), ([-2147483648, 3], "int32"), (2, "int32"),
            (2 ** 31 + 3, "int64"), (2 ** 31 + 3, "float64")]


def test_sum_dtype():
    for got, (values, dtype) in zip(_cases(hf), EXPECTED):
        np.testing.assert_array_equal(got.numpy(), values)
        assert str(got.dtype).endswith(dtype)


def test_sum_dtype_in_a_static_program():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3], "bool")
        out = x.sum(dtype="int32")
    assert out.dtype is hf.int32
    got, = hf.static.Executor().run(prog, feed={"x": np.array([True, False, True])},
                                    fetch_list=[out], return_numpy=True)
    assert got.dtype == np.int32 and got == 2


def test_matches_torch():
    torch = pytest.importorskip("torch")
    with np.errstate(over="ignore"):
        for got, ref in zip(_cases(hf), _cases(torch)):
            np.testing.assert_array_equal(got.numpy(), ref.numpy())
            assert str(got.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
