"""hf.autograd.functional (jacobian, hessian, vjp as torch.autograd.functional): it was
missing. Expected values are worked by hand (and equal torch 2.13's)."""
import numpy as np
import pytest

import hybridfw as hf

F = hf.autograd.functional
A = np.array([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]])
B = np.array([0.3, -0.6])


def test_jacobian_shapes_and_values_for_tensors_and_tuples():
    a, b = hf.tensor(A), hf.tensor(B)
    j = F.jacobian(lambda x: hf.tanh(x) * 2, a)
    assert j.shape == (3, 2, 3, 2) and not j.requires_grad
    np.testing.assert_allclose(j.numpy().reshape(6, 6), np.diag(2 / np.cosh(A.ravel()) ** 2))
    jx, jy = F.jacobian(lambda x, y: (x @ y).exp(), (a, b))
    e = np.exp(A @ B)
    np.testing.assert_allclose(jx.numpy(), np.einsum("i,ij,jk->ijk", e, np.eye(3), np.ones(
        (3, 2)) * B))
    np.testing.assert_allclose(jy.numpy(), e[:, None] * A)
    (s_x, s_y), (p_x, p_y) = F.jacobian(lambda x, y: (x.sum(), x * y), (a, b))
    assert s_x.tolist() == np.ones((3, 2)).tolist() and s_y.tolist() == [0.0, 0.0]
    assert p_x.shape == (3, 2, 3, 2) and p_y.shape == (3, 2, 2)
    np.testing.assert_allclose(p_y.numpy(), np.einsum("ij,jk->ijk", A, np.eye(2)))
    with pytest.raises(RuntimeError, match="does not depend on input 1"):
        F.jacobian(lambda x, y: x * 2, (a, b), strict=True)


def test_hessian_and_vjp():
    b = hf.tensor(B)
    h = F.hessian(lambda x: (x ** 3).sum() + x[0] * x[1], b)
    np.testing.assert_allclose(h.numpy(), np.diag(6 * B) + [[0, 1], [1, 0]])
    out, g = F.vjp(lambda x: hf.sin(x) * x, hf.tensor(A), hf.ones(3, 2))
    np.testing.assert_allclose(out.numpy(), np.sin(A) * A)
    np.testing.assert_allclose(g.numpy(), np.cos(A) * A + np.sin(A))
    j = F.jacobian(lambda x: x ** 3, b, create_graph=True)
    assert j.requires_grad
    with pytest.raises(RuntimeError, match="one element"):
        F.hessian(lambda x: x * 2, b)
    with pytest.raises(TypeError, match="only floating point"):
        F.jacobian(lambda x: x * 2, hf.tensor([1, 2]))
