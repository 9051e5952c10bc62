"""The gradient of einsum for an operand with a repeated label (``'ii->'``, ``'ii->i'``,
``'bii->bi'``): the gradient of its diagonal, placed on the diagonal (zeros elsewhere), written
in registry ops, so double backward and static programs work too. Checked against central finite
differences of numpy's einsum, element by element; torch is a second oracle when importable."""
import numpy as np
import pytest

import hybridfw as hf

CASES = [
    ("ii->", [(3, 3)]),
    ("ii->i", [(3, 3)]),
    ("bii->bi", [(2, 3, 3)]),
    ("bii->b", [(2, 3, 3)]),
    ("ii", [(3, 3)]),
    ("iii->", [(2, 2, 2)]),
    ("iji->j", [(2, 3, 2)]),
    ("iij,jk->ik", [(3, 3, 2), (2, 4)]),
    ("ii,ij->j", [(3, 3), (3, 2)]),
]


def _inputs(shapes):
    rng = np.random.default_rng(len(shapes) * 7 + sum(map(len, shapes)))
    return [rng.standard_normal(s) for s in shapes]


def _numeric_grads(eq, arrays, weight, eps=1e-6):
    """d/dx sum(weight * einsum(eq, ...)) by central differences, per element."""
    grads = []
    for k, a in enumerate(arrays):
        grad = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            values = []
            for step in (eps, -eps):
                shifted = [b.copy() for b in arrays]
                shifted[k][idx] += step
                values.append((weight * np.einsum(eq, *shifted)).sum())
            grad[idx] = (values[0] - values[1]) / (2 * eps)
        grads.append(grad)
    return grads


@pytest.mark.parametrize("eq, shapes", CASES)
def test_gradient_matches_finite_differences(eq, shapes):
    arrays = _inputs(shapes)
    weight = np.random.default_rng(1).standard_normal(np.einsum(eq, *arrays).shape)
    xs = [hf.tensor(a, requires_grad=True) for a in arrays]
    (hf.einsum(eq, *xs) * hf.tensor(weight)).sum().backward()
    for x, want in zip(xs, _numeric_grads(eq, arrays, weight)):
        np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6, atol=1e-8)


def test_trace_gradient_is_the_identity():
    x = hf.eye(2, requires_grad=True)
    hf.einsum("ii->", x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.eye(2))
    torch = pytest.importorskip("torch")
    t = torch.eye(2, requires_grad=True)
    torch.einsum("ii->", t).backward()
    np.testing.assert_array_equal(t.grad.numpy(), np.eye(2))


@pytest.mark.parametrize("eq, shapes", CASES)
def test_matches_torch(eq, shapes):
    torch = pytest.importorskip("torch")
    arrays = _inputs(shapes)
    xs = [hf.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    hf.einsum(eq, *xs).sum().backward()
    torch.einsum(eq, *ts).sum().backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_double_backward():
    """f(x) = einsum('ii,ij->j', x, x).sum() = sum_a x_aa S_a (S_a = sum_j x_aj): its gradient
    is G_ab = delta_ab S_a + x_aa, and d/dx_cd sum(W * G) = W_cc + delta_cd sum_b W_cb."""
    a = _inputs([(3, 3)])[0]
    w = np.random.default_rng(2).standard_normal((3, 3))
    x = hf.tensor(a, requires_grad=True)
    (g,) = hf.autograd.grad(hf.einsum("ii,ij->j", x, x).sum(), [x], create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), np.diag(a.sum(1)) + np.diag(a)[:, None],
                               rtol=1e-12)
    (h,) = hf.autograd.grad((g * hf.tensor(w)).sum(), [x])
    want = np.diag(w)[:, None] + np.diag(w.sum(1))
    np.testing.assert_allclose(h.numpy(), want, rtol=1e-12)


def _trace_sum(x):
    return hf.einsum("bii->b", x).sum()


def test_static_program_backward():
    arrays = _inputs([(2, 3, 3)])
    x = hf.tensor(arrays[0], requires_grad=True)
    hf.jit.to_static(_trace_sum)(x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(np.eye(3), (2, 3, 3)))


@pytest.mark.parametrize("eq", ["ij->j", "ij->", "ii", "...j->...", "ij->ij", "ii->i"])
@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_integer_single_operand_sums_to_int64(eq, dtype):
    """One integer or bool operand with a label summed out is a sum: int64, as PyTorch (it
    kept int32, and bool gave any() instead of the count); no sum keeps the dtype."""
    a = (np.arange(9).reshape(3, 3) % 4).astype(dtype)
    out = hf.einsum(eq, hf.from_numpy(a))
    summed = eq not in ("ij->ij", "ii->i")
    assert out.dtype is (hf.int64 if summed else getattr(hf, dtype))
    np.testing.assert_array_equal(out.numpy(), np.einsum(eq, a.astype(np.int64)))
    torch = pytest.importorskip("torch")
    ref = torch.einsum(eq, torch.from_numpy(a))
    assert str(ref.dtype) == f"torch.{out.dtype.name}"
    np.testing.assert_array_equal(out.numpy(), ref.numpy())
