"""prod takes PyTorch's ``dtype=`` (the input is cast first), as a function and a method (the
method refused the keyword)."""
import numpy as np
import pytest

import hybridfw as hf


def _cases(lib):
    x = lib.tensor([[1.5, 2.5], [3.0, -1.0]])
    return [x.prod(1, dtype=lib.int64), lib.prod(x, dtype=lib.float64),
            lib.tensor([True, True]).prod(dtype=lib.float32),
            lib.prod(lib.tensor([[2, 3]]), 1, True, dtype=lib.float16)]


EXPECTED = [([2, -3], "int64"), (-11.25, "float64"), (1.0, "float32"), ([[6.0]], "float16")]


def test_prod_dtype():
    for got, (values, dtype) in zip(_cases(hf), EXPECTED):
        np.testing.assert_array_equal(got.numpy(), values)
        assert str(got.dtype).endswith(dtype)


def test_prod_dtype_gradient_reaches_the_input():
    x = hf.tensor([2.0, 3.0], requires_grad=True)
    x.prod(dtype=hf.float64).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 2.0])
    assert x.grad.dtype is hf.float32


def test_matches_torch():
    torch = pytest.importorskip("torch")
    for got, ref in zip(_cases(hf), _cases(torch)):
        np.testing.assert_array_equal(got.numpy(), ref.numpy())
        assert str(got.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]


@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_integer_dtype_is_the_result_dtype(dtype):
    """An integer or bool ``dtype=`` is the result's dtype (the product of the cast input was
    promoted to int64 again: ``prod(1, dtype=int32)`` gave int64)."""
    x = hf.tensor([[1.5, 2.5, -3.0], [3.0, -1.0, 0.5]])
    got = x.prod(1, dtype=dtype)
    assert got.dtype == dtype
    assert hf.prod(x, dtype=dtype).dtype == dtype
    expected = np.prod(x.numpy().astype(dtype), axis=1).astype(dtype)
    np.testing.assert_array_equal(got.numpy(), expected)
    torch = pytest.importorskip("torch")
    ref = torch.tensor(x.numpy()).prod(1, dtype=getattr(torch, dtype))
    np.testing.assert_array_equal(got.numpy(), ref.numpy())
    assert str(ref.dtype).endswith(dtype)
