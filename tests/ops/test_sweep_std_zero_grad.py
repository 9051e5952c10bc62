"""std (and std_mean) of values with no spread: the gradient is 0 as in PyTorch, not NaN
(sqrt's gradient 1 / (2 * 0) times the variance's 0)."""
import numpy as np
import pytest

import hybridfw as hf


def _std_grad(fn, values, **kwargs):
    x = hf.tensor(values, requires_grad=True)
    out = fn(x, **kwargs)
    out = out[0] if isinstance(out, tuple) else out
    out.sum().backward()
    return out.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("kwargs", [{}, {"dim": 1}, {"dim": 1, "correction": 0}])
def test_std_of_constant_rows_has_zero_gradient(kwargs):
    value, grad = _std_grad(hf.std, [[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]], **kwargs)
    if kwargs:
        assert value[0] == 0.0
        np.testing.assert_array_equal(grad[0], [0.0, 0.0, 0.0])
        # the other row keeps the ordinary gradient (x - mean) / ((n - c) * std)
        row = np.array([1.0, 2.0, 4.0])
        c = kwargs.get("correction", 1)
        std = np.sqrt(((row - row.mean()) ** 2).sum() / (3 - c))
        np.testing.assert_allclose(grad[1], (row - row.mean()) / ((3 - c) * std), rtol=1e-6)
    assert np.isfinite(grad).all()


def test_std_of_a_0d_tensor_without_correction_and_std_mean():
    _, grad = _std_grad(lambda x: x.std(correction=0), 3.0)
    assert grad == 0.0
    _, grad = _std_grad(hf.std_mean, [5.0, 5.0])
    np.testing.assert_array_equal(grad, [0.0, 0.0])


def _column_std(x):
    return x.std(dim=0)


def test_std_zero_gradient_under_to_static():
    f = hf.jit.to_static(_column_std)
    x = hf.tensor([[1.0, 3.0], [1.0, 5.0]], requires_grad=True)
    f(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0.0, -np.sqrt(0.5)], [0.0, np.sqrt(0.5)]],
                               rtol=1e-6)


def test_matches_torch():
    torch = pytest.importorskip("torch")
    v = [[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]]
    t = torch.tensor(v, requires_grad=True)
    t.std(dim=1).sum().backward()
    _, grad = _std_grad(hf.std, v, dim=1)
    np.testing.assert_allclose(grad, t.grad.numpy(), rtol=1e-6)
