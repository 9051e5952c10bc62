"""scatter / scatter_ / scatter_add / scatter_add_ against PyTorch and numpy, with gradients
with respect to input and src, bounds errors, static programs and ONNX."""
import numpy as np
import pytest

import hybridfw as hf

from .conftest import check_matches_torch

IDX = [[2, 0], [1, 1]]
UNIQUE = [[2, 0], [1, 2]]
SRC = [[1.0, 2.0, 9.0], [3.0, 4.0, 8.0]]


@pytest.mark.parametrize("call", [
    lambda lib: lib.zeros(2, 3).scatter(1, lib.tensor(UNIQUE), lib.tensor(SRC)),
    lambda lib: lib.scatter(lib.zeros(2, 3), 1, lib.tensor(IDX), 7.0),
    lambda lib: lib.zeros(2, 3).scatter(1, lib.tensor(IDX), value=7.0),
    lambda lib: lib.ones(2, 3).scatter_add(1, lib.tensor(IDX), lib.tensor(SRC)),
    lambda lib: lib.scatter_add(lib.ones(3, 2), 0, lib.tensor([[2, 0], [2, 2]]),
                                lib.tensor([[1.0, 2.0], [3.0, 4.0]])),
    lambda lib: lib.zeros(2, 3).scatter(-1, lib.tensor(IDX), lib.tensor(SRC), reduce="add"),
    lambda lib: lib.zeros(2, 3, dtype=lib.int64).scatter_add(1, lib.tensor(IDX),
                                                              lib.tensor([[1, 2], [3, 4]])),
])
def test_scatter_matches_torch(call):
    check_matches_torch(lambda lib, _: call(lib), None)


def test_scatter_against_numpy_loop():
    rng = np.random.default_rng(0)
    a, src = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    index = rng.integers(0, 4, size=(3, 5))
    expected = a.copy()
    for i in range(3):
        for j in range(5):
            expected[index[i, j], j] += src[i, j]
    got = hf.tensor(a).scatter_add(0, hf.tensor(index), hf.tensor(src))
    np.testing.assert_allclose(got.numpy(), expected)


def test_in_place_scatter_and_scatter_add():
    x = hf.zeros(2, 3)
    assert x.scatter_(1, hf.tensor(IDX), value=2.0) is x
    np.testing.assert_array_equal(x.numpy(), [[2.0, 0.0, 2.0], [0.0, 2.0, 0.0]])
    assert x.scatter_add_(0, hf.tensor([[1, 0, 1]]), hf.ones(1, 3)) is x
    np.testing.assert_array_equal(x.numpy(), [[2.0, 1.0, 2.0], [1.0, 2.0, 1.0]])
    x.scatter_(1, hf.tensor([[0], [0]]), hf.tensor([[5.0], [6.0]]))
    np.testing.assert_array_equal(x[:, 0].numpy(), [5.0, 6.0])


def test_scatter_gradients_vs_finite_differences_and_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    a_np, s_np = rng.standard_normal((2, 3)), rng.standard_normal((2, 2))
    a = hf.tensor(a_np, requires_grad=True)
    s = hf.tensor(s_np, requires_grad=True)
    assert hf.autograd.gradcheck(lambda a, s: a.scatter(1, hf.tensor(UNIQUE), s), (a, s))
    assert hf.autograd.gradcheck(lambda a, s: a.scatter_add(1, hf.tensor(IDX), s), (a, s))
    w = rng.standard_normal((2, 3))
    (a.scatter(1, hf.tensor(UNIQUE), s) * hf.tensor(w)).sum().backward()
    ta = torch.tensor(a_np, requires_grad=True)
    ts = torch.tensor(s_np, requires_grad=True)
    (ta.scatter(1, torch.tensor(UNIQUE), ts) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy())
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy())


def test_scatter_errors():
    x = hf.zeros(2, 3)
    with pytest.raises(IndexError, match="scatter: index -1 is out of bounds for dimension 1 "
                                         "with size 3"):
        x.scatter(1, hf.tensor([[-1], [0]]), 1.0)
    with pytest.raises(RuntimeError, match="scatter_add: index 3 is out of bounds"):
        x.scatter_add(1, hf.tensor([[3], [0]]), hf.ones(2, 1))
    with pytest.raises(TypeError, match="scatter: index must be an integer tensor"):
        x.scatter(1, hf.tensor([[0.0]]), 1.0)
    with pytest.raises(TypeError, match="scatter: src must have the input's dtype"):
        x.scatter(1, hf.tensor([[0]]), hf.ones(1, 1, dtype=hf.float64))
    with pytest.raises(ValueError, match="scatter: index shape"):
        x.scatter(1, hf.tensor([[0], [0], [0]]), 1.0)
    with pytest.raises(TypeError, match="exactly one of src"):
        x.scatter(1, hf.tensor([[0]]))


def test_scatter_in_to_static_matches_eager():
    @hf.jit.to_static
    def f(a, index, s):
        return (a.scatter(1, index, s) + a.scatter_add(1, index, s)).sum()

    a = hf.tensor(np.arange(6.0).reshape(2, 3), dtype=hf.float32, requires_grad=True)
    s = hf.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    index = hf.tensor(UNIQUE)
    out = f(a, index, s)
    out.backward()
    a2 = hf.tensor(np.arange(6.0).reshape(2, 3), dtype=hf.float32, requires_grad=True)
    s2 = hf.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    ref = (a2.scatter(1, index, s2) + a2.scatter_add(1, index, s2)).sum()
    ref.backward()
    assert out.item() == ref.item()
    np.testing.assert_array_equal(a.grad.numpy(), a2.grad.numpy())
    np.testing.assert_array_equal(s.grad.numpy(), s2.grad.numpy())
