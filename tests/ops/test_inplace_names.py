"""PyTorch's in-place methods ``abs_ exp_ sqrt_ uniform_ normal_`` (apply_inplace: the
storage version is bumped and gradients flow through non-leaf tensors; the random ones follow
hf.manual_seed).

Every case checks numpy values; where torch is importable it is a second oracle.
"""
import numpy as np
import pytest

import hybridfw as hf

X = np.array([[-1.5, 0.25], [4.0, -9.0]])


@pytest.mark.parametrize("name, ref", [("abs_", np.abs), ("exp_", np.exp),
                                       ("sqrt_", lambda a: np.sqrt(np.abs(a)))])
def test_values_in_place(name, ref):
    data = np.abs(X) if name == "sqrt_" else X
    x = hf.tensor(data)
    out = getattr(x, name)()
    assert out is x
    np.testing.assert_allclose(x.numpy(), ref(data), rtol=1e-15)
    torch = pytest.importorskip("torch")
    t = torch.tensor(data)
    getattr(t, name)()
    np.testing.assert_allclose(x.numpy(), t.numpy(), rtol=1e-15)


def test_gradients_through_non_leaf():
    x = hf.tensor(X, requires_grad=True)
    y = x * 2
    y.abs_()
    y.exp_()
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.sign(X) * np.exp(np.abs(2 * X)))
    assert hf.autograd.gradcheck(lambda t: (t * 1).abs_().sqrt_(), [hf.tensor(X, requires_grad=True)])


def test_errors():
    with pytest.raises(TypeError, match="exp.*int64"):
        hf.tensor([1, 2]).exp_()
    with pytest.raises(RuntimeError, match="leaf"):
        hf.tensor([1.0], requires_grad=True).abs_()
    with pytest.raises(TypeError, match="uniform_.*int64"):
        hf.tensor([1, 2]).uniform_()
    with pytest.raises(ValueError, match="normal_: std"):
        hf.zeros(2).normal_(0.0, -1.0)
    with pytest.raises(TypeError, match="uniform_"):
        hf.zeros(2).uniform_(low=1.0)


def test_random_fills():
    hf.manual_seed(4)
    u = hf.zeros(4000, dtype=hf.float64).uniform_(-2.0, 3.0)
    assert u.dtype is hf.float64 and u.min().item() >= -2.0 and u.max().item() < 3.0
    assert abs(u.mean().item() - 0.5) < 0.1
    hf.manual_seed(4)
    assert np.array_equal(hf.zeros(4000, dtype=hf.float64).uniform_(**{"from": -2.0, "to": 3.0})
                          .numpy(), u.numpy())
    hf.manual_seed(4)
    v = hf.empty(2, 3).uniform_()
    hf.manual_seed(4)
    np.testing.assert_array_equal(v.numpy(), hf.rand(2, 3).numpy())  # the same draws as rand
    hf.manual_seed(5)
    n = hf.zeros(2, 5000).normal_(3.0, 0.5)
    assert n.dtype is hf.float32 and n.shape == (2, 5000)
    assert abs(n.mean().item() - 3.0) < 0.03 and abs(n.numpy().std() - 0.5) < 0.02
    h = hf.zeros(3, dtype=hf.float16).normal_()
    assert h.dtype is hf.float16


def test_to_static():
    @hf.jit.to_static
    def f(a):
        y = a * 2
        y.abs_()
        y.sqrt_()
        return y.exp_()

    np.testing.assert_allclose(f(hf.tensor(X)).numpy(), np.exp(np.sqrt(np.abs(2 * X))),
                               rtol=1e-14)
