"""cumprod (values and PyTorch's gradient with zeros), float32 cumsum precision, div with
rounding_mode / true_divide, and the in-place pow_ / neg_."""
import numpy as np
import pytest

import hybridfw as hf

from .conftest import check_matches_torch


# ---- cumprod ---------------------------------------------------------------------------------
def test_cumprod_values_function_and_method():
    x = np.array([[1.5, -2.0, 0.5, 3.0], [2.0, 0.0, 4.0, -1.0]])
    np.testing.assert_allclose(hf.cumprod(hf.tensor(x), 1).numpy(), np.cumprod(x, 1))
    np.testing.assert_allclose(hf.tensor(x).cumprod(dim=0).numpy(), np.cumprod(x, 0))
    assert hf.tensor([1, 2, 3], dtype=hf.int32).cumprod(0).dtype == hf.int64
    assert hf.tensor([1, 2, 3]).cumprod(0, dtype=hf.float64).dtype == hf.float64
    assert hf.tensor(3.0).cumprod(0).item() == 3.0


@pytest.mark.parametrize("values", [[2.0, 0.0, 3.0, -1.0, 1.5], [0.0, 2.0, 0.0, 3.0, 4.0],
                                    [1.0, 2.0, -3.0, 0.5, 2.5], [2.0, 3.0, 0.0, 0.0, 0.0]])
def test_cumprod_gradient_matches_torch_with_zeros(values):
    torch = pytest.importorskip("torch")
    w = np.array([0.3, -1.2, 0.7, 1.1, 0.5])
    h = hf.tensor(values, dtype=hf.float64, requires_grad=True)
    t = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    (h.cumprod(0) * hf.tensor(w)).sum().backward()
    (t.cumprod(0) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_cumprod_gradcheck_and_second_order_vs_torch():
    torch = pytest.importorskip("torch")
    a = hf.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    assert hf.autograd.gradcheck(lambda x: x.cumprod(1), (a,))
    values, w = [2.0, 0.0, 3.0, 0.0, -1.5], np.array([0.3, -1.2, 0.7, 1.1, 0.5])
    h = hf.tensor(values, dtype=hf.float64, requires_grad=True)
    (g,) = hf.autograd.grad((h.cumprod(0) * hf.tensor(w)).sum(), [h], create_graph=True)
    hessian = np.stack([hf.autograd.grad(g[i], [h], retain_graph=True)[0].numpy()
                        for i in range(5)])
    expected = torch.autograd.functional.hessian(
        lambda t: (t.cumprod(0) * torch.tensor(w)).sum(),
        torch.tensor(values, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(hessian, expected, atol=1e-12)


def test_cumprod_in_to_static_matches_eager():
    @hf.jit.to_static
    def f(x):
        return x.cumprod(1).sum()

    x = hf.tensor([[2.0, 0.0, 3.0], [1.0, -2.0, 0.5]], requires_grad=True)
    x2 = hf.tensor(x.detach().numpy().copy(), requires_grad=True)
    f(x).backward()
    x2.cumprod(1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy())


# ---- cumsum precision ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [hf.float32, hf.float16])
def test_float_cumsum_accumulates_in_float64(dtype):
    n = 10**5 if dtype is hf.float32 else 2000
    out = hf.full((n,), 0.1, dtype=dtype).cumsum(0)
    assert out.dtype is dtype
    expected = np.cumsum(np.full(n, 0.1, dtype=dtype.np).astype(np.float64))
    np.testing.assert_allclose(out.numpy().astype(np.float64), expected,
                               rtol=1e-7 if dtype is hf.float32 else 1e-3)
    if dtype is hf.float32:
        assert out[-1].item() == pytest.approx(10000.0, abs=1e-3)


def test_float32_cumsum_matches_torch():
    check_matches_torch(lambda lib, _: lib.full((10**5,), 0.1).cumsum(0)[-5:], None)


# ---- div -------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
@pytest.mark.parametrize("a, b", [([-7, 7, -6, 6, 0, -1], [2, 2, 3, -3, 5, 4]),
                                  ([-7.5, 7.0, -6.0, 6.0, 0.0, -0.5], [2.0, 2.0, 4.0, -4.0, 5.0,
                                                                         3.0])])
def test_div_rounding_modes_match_torch(mode, a, b):
    check_matches_torch(lambda lib, _: lib.div(lib.tensor(a), lib.tensor(b), rounding_mode=mode),
                        None)
    check_matches_torch(lambda lib, _: lib.tensor(a).div(lib.tensor(b), rounding_mode=mode),
                        None)
    check_matches_torch(lambda lib, _: lib.tensor(a).div(3, rounding_mode=mode), None)


def test_div_rounding_mode_errors_and_aliases():
    with pytest.raises(ValueError, match="div: rounding_mode must be"):
        hf.div(hf.tensor([1.0]), 2.0, rounding_mode="round")
    with pytest.raises(ZeroDivisionError):
        hf.div(hf.tensor([1, 2]), hf.tensor([1, 0]), rounding_mode="trunc")
    np.testing.assert_array_equal(hf.true_divide(hf.tensor([1, 3]), 2).numpy(), [0.5, 1.5])
    np.testing.assert_array_equal(hf.tensor([1, 3]).true_divide(2).numpy(), [0.5, 1.5])
    x = hf.tensor([-7.0, 7.0])
    x.div_(2, rounding_mode="floor")
    np.testing.assert_array_equal(x.numpy(), [-4.0, 3.0])


def test_div_rounding_gradient_zero_and_static():
    x = hf.tensor([1.5, -2.5], requires_grad=True)
    hf.div(x, 2.0, rounding_mode="trunc").sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])

    @hf.jit.to_static
    def f(a, b):
        return hf.div(a, b, rounding_mode="trunc")

    a, b = hf.tensor([-7, 7, -6]), hf.tensor([2, 2, 4])
    np.testing.assert_array_equal(f(a, b).numpy(), [-3, 3, -1])


# ---- pow_ / neg_ -------------------------------------------------------------------------------
def test_pow_and_neg_in_place():
    x = hf.tensor([1.0, -2.0, 3.0])
    assert x.pow_(2) is x
    np.testing.assert_array_equal(x.numpy(), [1.0, 4.0, 9.0])
    assert x.neg_() is x
    np.testing.assert_array_equal(x.numpy(), [-1.0, -4.0, -9.0])
    w = hf.tensor([1.0, 2.0], requires_grad=True)
    y = w * 1.0
    y.pow_(3)
    y.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 12.0])
    w.grad = None
    z = w * 2.0
    z.neg_()
    z.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [-2.0, -2.0])
    with pytest.raises(RuntimeError):
        w.neg_()  # a leaf that requires grad
