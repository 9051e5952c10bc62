"""clamp with tensor bounds: where the input equals a bound the gradient goes to the input
alone, as PyTorch (it was split half and half, as maximum/minimum split ties); NaN in the
input or a bound propagates."""
import numpy as np
import pytest

import hybridfw as hf

NAN = float("nan")
X = [1.0, 2.0, 3.0, NAN, 0.5, 2.0]
LO = [1.0, 1.0, 4.0, 0.0, NAN, 3.0]
HI = [1.0, 3.0, 5.0, 1.0, 1.0, NAN]
# hand-derived: x=1 ties both bounds -> x; 2 inside; 3 below 4 -> lo; NaN propagates
VALUES = [1.0, 2.0, 4.0, NAN, NAN, NAN]
GRAD_X = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
GRAD_LO = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]


def _clamp(x, lo, hi):
    return x.clamp(lo, hi)


@pytest.mark.parametrize("convert", [False, True])
def test_clamp_tensor_bounds_ties_and_nan(convert):
    fn = hf.jit.to_static(_clamp) if convert else _clamp
    x, lo, hi = (hf.tensor(v, requires_grad=True) for v in (X, LO, HI))
    out = fn(x, lo, hi)
    out.sum().backward()
    np.testing.assert_array_equal(out.detach().numpy(), VALUES)
    np.testing.assert_array_equal(x.grad.numpy(), GRAD_X)
    np.testing.assert_array_equal(lo.grad.numpy(), GRAD_LO)
    np.testing.assert_array_equal(hi.grad.numpy(), np.zeros(6))


def test_clamp_max_tie_goes_to_the_input():
    x, hi = hf.tensor([2.0, 3.0], requires_grad=True), hf.tensor([2.0, 1.0], requires_grad=True)
    hf.clamp(x, max=hi).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0])
    np.testing.assert_array_equal(hi.grad.numpy(), [0.0, 1.0])


def test_clamp_tensor_bounds_dtype_and_broadcast():
    out = hf.tensor([1, 5, 3]).clamp(hf.tensor([2, 2, 2]), hf.tensor(4))
    np.testing.assert_array_equal(out.numpy(), [2, 4, 3])
    assert out.dtype is hf.int64
    out = hf.tensor([[1, 5, 3]]).clamp(min=hf.tensor([[2.5], [0.0]]))
    assert out.dtype is hf.float32 and tuple(out.shape) == (2, 3)


def test_matches_torch():
    torch = pytest.importorskip("torch")
    x, lo, hi = (torch.tensor(v, requires_grad=True) for v in (X, LO, HI))
    x.clamp(lo, hi).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), GRAD_X)
    np.testing.assert_array_equal(lo.grad.numpy(), GRAD_LO)
