"""leaky_relu, hardtanh and relu6 to third order: as relu (test_relu_higher_order), their second
gradient stays connected to the input, so a third gradient is zeros as PyTorch's."""
import numpy as np
import pytest

import hybridfw as hf
import hybridfw.nn.functional as F

X = np.array([-7.0, -1.5, -0.3, 0.4, 0.65, 1.9, 2.5, 6.5])  # away from the kinks
CASES = {
    # name: (f, f'' by hand for f(x) * x, i.e. 2 f'(x) away from the kinks)
    "leaky_relu": (lambda m, x: m.leaky_relu(x, 0.2), lambda x: 2 * np.where(x > 0, 1, 0.2)),
    "hardtanh": (lambda m, x: m.hardtanh(x, -0.5, 0.7),
                 lambda x: 2.0 * ((x > -0.5) & (x < 0.7))),
    "relu6": (lambda m, x: m.relu6(x * 3), lambda x: 6.0 * ((x > 0) & (x < 2))),
}


def _grads(f, x_np):
    x = hf.tensor(x_np, requires_grad=True)
    (g,) = hf.autograd.grad((f(F, x) * x).sum(), x, create_graph=True)
    (h,) = hf.autograd.grad(g.sum(), x, create_graph=True)
    assert h.requires_grad
    (k,) = hf.autograd.grad(h.sum(), x)
    return g.detach().numpy(), h.detach().numpy(), k.numpy()


def _first(f, x_np):
    x = hf.tensor(x_np, requires_grad=True)
    (g,) = hf.autograd.grad((f(F, x) * x).sum(), x)
    return g.numpy()


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_finite_differences_and_by_hand(name):
    f, second = CASES[name]
    _, h, k = _grads(f, X)
    eps = 1e-6
    fd = np.array([(_first(f, X + eps * e) - _first(f, X - eps * e)).sum() / (2 * eps)
                   for e in np.eye(len(X))])
    np.testing.assert_allclose(h, fd, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(h, second(X), rtol=1e-12)
    np.testing.assert_array_equal(k, np.zeros_like(X))


def test_gradient_at_the_kinks_as_pytorch():
    x = hf.tensor([0.0, -0.5, 0.7], requires_grad=True)
    (F.leaky_relu(x, 0.2).sum() + F.hardtanh(x, -0.5, 0.7).sum()).backward()
    # leaky_relu: the slope at 0; hardtanh: 0 at both bounds (and 1 strictly inside)
    np.testing.assert_allclose(x.grad.numpy(), [0.2 + 1.0, 0.2, 1.0])


def test_hardtanh_bounds_are_checked():
    with pytest.raises(ValueError, match=r"hardtanh: min_val \(1.0\) cannot be greater"):
        F.hardtanh(hf.ones(2), 1.0, -1.0)


def test_hardtanh_static_matches_eager():
    def f(x):
        return F.hardtanh(x, -0.5, 0.7) * 2 + F.relu6(x * 4)
    x = np.linspace(-2, 2, 9)
    eager = f(hf.tensor(x))
    static = hf.jit.to_static(f)(hf.tensor(x))
    np.testing.assert_allclose(static.numpy(), eager.numpy(), rtol=1e-12)
    np.testing.assert_allclose(eager.numpy(), np.clip(x, -0.5, 0.7) * 2 + np.clip(x * 4, 0, 6))


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    torch = pytest.importorskip("torch")
    f, _ = CASES[name]
    t = torch.tensor(X, requires_grad=True)
    (g,) = torch.autograd.grad((f(torch.nn.functional, t) * t).sum(), t, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), t, create_graph=True)
    (k,) = torch.autograd.grad(h.sum(), t)
    for ours, theirs in zip(_grads(f, X), (g, h, k)):
        np.testing.assert_allclose(ours, theirs.detach().numpy(), rtol=1e-12)
