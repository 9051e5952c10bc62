"""float16 einsum accumulates in float32 and rounds once, as matmul and PyTorch do (numpy's
einsum summed in float16: 0.5 off on a 512-long dot product of magnitude ~80); operands of
different dtypes raise TypeError, as in PyTorch and hf.matmul (they were promoted silently)."""
import numpy as np
import pytest

import hybridfw as hf


def _operands():
    rng = np.random.RandomState(0)
    return rng.randn(16, 512).astype(np.float16), rng.randn(512, 8).astype(np.float16)


def test_half_einsum_is_the_float32_result_rounded():
    a, b = _operands()
    expected = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    out = hf.einsum("ij,jk->ik", hf.tensor(a), hf.tensor(b))
    assert out.dtype is hf.float16
    np.testing.assert_array_equal(out.numpy(), expected)
    np.testing.assert_array_equal(out.numpy(), (hf.tensor(a) @ hf.tensor(b)).numpy())


def test_half_einsum_gradient_also_accumulates_in_float32():
    a, b = _operands()
    x = hf.tensor(a, requires_grad=True)
    hf.einsum("ij,jk->ik", x, hf.tensor(b)).sum().backward()
    expected = np.broadcast_to(b.astype(np.float32).sum(1), a.shape).astype(np.float16)
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_matches_torch():
    torch = pytest.importorskip("torch")
    a, b = _operands()
    ref = torch.einsum("ij,jk->ik", torch.tensor(a), torch.tensor(b)).numpy().astype(np.float64)
    got = hf.einsum("ij,jk->ik", hf.tensor(a), hf.tensor(b)).numpy().astype(np.float64)
    assert np.abs(got - ref).max() <= 0.0625  # at most about one float16 ulp at this scale


def test_einsum_of_mixed_dtypes_raises_type_error():
    x = hf.ones(2, 3)
    with pytest.raises(TypeError, match=r"einsum: expected operands of one dtype.*int64"):
        hf.einsum("ij,kj->ik", x, x.long())
    with pytest.raises(TypeError, match="einsum"):
        hf.einsum("ij,ij->", x, x.double())
    np.testing.assert_array_equal(hf.einsum("ij->j", x.long()).numpy(), [2, 2, 2])
