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


_SIGMOID = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731
# (in-place method, numpy value, derivative of the value): unary ops and clamp's aliases
_MORE = [
    ("relu_", lambda a: np.maximum(a, 0), lambda a: (a > 0) * 1.0),
    ("sigmoid_", _SIGMOID, lambda a: _SIGMOID(a) * (1 - _SIGMOID(a))),
    ("tanh_", np.tanh, lambda a: 1 - np.tanh(a) ** 2),
    ("log_", lambda a: np.log(np.abs(a)), lambda a: 1 / a),
    ("log1p_", lambda a: np.log1p(np.abs(a)), lambda a: 1 / (1 + np.abs(a))),
    ("expm1_", np.expm1, np.exp),
    ("rsqrt_", lambda a: 1 / np.sqrt(np.abs(a)), lambda a: -0.5 * np.abs(a) ** -1.5),
    ("sin_", np.sin, np.cos),
    ("cos_", np.cos, lambda a: -np.sin(a)),
    ("floor_", np.floor, lambda a: 0 * a),
    ("ceil_", np.ceil, lambda a: 0 * a),
    ("trunc_", np.trunc, lambda a: 0 * a),
    ("sign_", np.sign, lambda a: 0 * a),
]


@pytest.mark.parametrize("name, ref, slope", _MORE, ids=[m[0] for m in _MORE])
def test_more_unary_methods_in_place_with_gradients(name, ref, slope):
    """relu_, sigmoid_, tanh_... were missing (AttributeError) where torch has them."""
    data = np.abs(X) if name in ("log_", "log1p_", "rsqrt_") else X
    x = hf.tensor(data, requires_grad=True)
    y = x * 1.0
    assert getattr(y, name)() is y
    np.testing.assert_allclose(y.detach().numpy(), ref(data), rtol=1e-12)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slope(data), rtol=1e-12)
    torch = pytest.importorskip("torch")
    t = torch.tensor(data)
    getattr(t, name)()
    np.testing.assert_allclose(y.detach().numpy(), t.numpy(), rtol=1e-12)


def test_clip_and_clamp_min_max_in_place():
    x = hf.tensor(X)
    assert x.clip_(-1.0, 1.0) is x and x.tolist() == [[-1.0, 0.25], [1.0, -1.0]]
    assert hf.tensor(X).clamp_min_(0.0).tolist() == [[0.0, 0.25], [4.0, 0.0]]
    assert hf.tensor(X).clamp_max_(0.0).tolist() == [[-1.5, 0.0], [0.0, -9.0]]
    with pytest.raises(TypeError, match="sigmoid.*int64"):
        hf.tensor([1, 2]).sigmoid_()
    with pytest.raises(RuntimeError, match="tanh: a leaf tensor that requires grad"):
        hf.tensor([1.0], requires_grad=True).tanh_()


def test_clamp_in_place_with_tensor_bounds():
    """Tensor ``min``/``max`` in ``clamp_`` (they raised a numpy ufunc TypeError): values,
    gradients to the input and the bound, and PyTorch's refusals (a float bound on an int
    tensor, a bound that would grow the tensor)."""
    data = [[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]]
    x = hf.tensor(data, requires_grad=True)
    lo = hf.tensor([0.0, 0.0, 2.0], requires_grad=True)
    y = x * 2
    assert y.clamp_(min=lo, max=hf.tensor(3.5)) is y
    expected = np.clip(np.array(data) * 2, [0.0, 0.0, 2.0], 3.5)
    np.testing.assert_array_equal(y.detach().numpy(), expected)
    (y * hf.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    np.testing.assert_array_equal(lo.grad.numpy(), [0.0, 2.0, 3.0])
    z = hf.tensor([1, 5, -3])
    z.clamp_max_(hf.tensor(2, dtype=hf.int32)).clip_(hf.tensor([0, 0, 0]))
    assert z.tolist() == [1, 2, 0] and z.dtype is hf.int64
    with pytest.raises(TypeError, match="clamp_.*float32.*int64"):
        z.clamp_(hf.tensor([0.5, 0.5, 0.5]))
    with pytest.raises(ValueError, match=r"clamp_.*\(3,\).*\(2, 3\)"):
        hf.zeros(3).clamp_(hf.zeros(2, 3))
    torch = pytest.importorskip("torch")
    tx = torch.tensor(data, requires_grad=True)
    tlo = torch.tensor([0.0, 0.0, 2.0], requires_grad=True)
    ty = tx * 2
    ty.clamp_(min=tlo, max=torch.tensor(3.5))
    (ty * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_array_equal(lo.grad.numpy(), tlo.grad.numpy())
