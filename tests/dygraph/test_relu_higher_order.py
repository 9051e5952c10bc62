"""Gradients of relu to third order: the second gradient stays connected to the input (its
derivative is zero), so a third gradient is zeros, as PyTorch's, not an error."""
import numpy as np
import pytest

import hybridfw as hf
import hybridfw.nn.functional as F

X = np.array([-1.5, -0.3, 0.4, 2.0, 0.7])


def _f(x):
    return F.relu(x) * x + F.relu(x * x - 1.0) * x


def _grads(x_np):
    x = hf.tensor(x_np, requires_grad=True)
    (g,) = hf.autograd.grad(_f(x).sum(), x, create_graph=True)
    (h,) = hf.autograd.grad(g.sum(), x, create_graph=True)
    assert h.requires_grad
    (k,) = hf.autograd.grad(h.sum(), x)
    return g.detach().numpy(), h.detach().numpy(), k.numpy()


def _first_grad(x_np):
    x = hf.tensor(x_np, requires_grad=True)
    (g,) = hf.autograd.grad(_f(x).sum(), x)
    return g.numpy()


def test_second_and_third_order_against_finite_differences():
    g, h, k = _grads(X)
    eps = 1e-6
    fd = np.array([(_first_grad(X + eps * e) - _first_grad(X - eps * e)).sum() / (2 * eps)
                   for e in np.eye(len(X))])
    np.testing.assert_allclose(h, fd, rtol=1e-6, atol=1e-6)
    # by hand: d2/dx2 [relu(x) x] = 2 (x > 0); d2/dx2 [relu(x^2 - 1) x] = 6x (x^2 > 1)
    np.testing.assert_allclose(h, 2 * (X > 0) + 6 * X * (X * X > 1), rtol=1e-12)
    np.testing.assert_array_equal(k, 6 * (X * X > 1))


def test_third_order_of_relu_alone_is_zeros():
    x = hf.tensor(X, requires_grad=True)
    (g,) = hf.autograd.grad(F.relu(x).sum(), x, create_graph=True)
    (h,) = hf.autograd.grad(g.sum(), x, create_graph=True)
    (k,) = hf.autograd.grad(h.sum(), x)
    np.testing.assert_array_equal(h.detach().numpy(), np.zeros(5))
    np.testing.assert_array_equal(k.numpy(), np.zeros(5))


def test_matches_torch():
    torch = pytest.importorskip("torch")
    t = torch.tensor(X, requires_grad=True)
    y = torch.relu(t) * t + torch.relu(t * t - 1.0) * t
    (g,) = torch.autograd.grad(y.sum(), t, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), t, create_graph=True)
    (k,) = torch.autograd.grad(h.sum(), t)
    ours = _grads(X)
    for a, b in zip(ours, (g, h, k)):
        np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-12)
