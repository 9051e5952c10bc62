"""hf.quantile / hf.nanquantile (and their methods) against PyTorch: values, shapes and
gradients, eagerly and under to_static."""
import itertools

import numpy as np
import pytest

import hybridfw as hf

INTERPOLATIONS = ["linear", "lower", "higher", "midpoint", "nearest"]


def _data():
    x = np.random.default_rng(0).standard_normal((3, 5, 4)).astype(np.float32)
    x[0, 1, 2] = np.nan
    x[1, 2, 3] = x[1, 2, 0]  # a tie
    return x


def _q(module, q):
    return module.tensor(q) if isinstance(q, np.ndarray) else q


@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_values_and_shapes_match_torch(name, interpolation):
    torch = pytest.importorskip("torch")
    x = _data()
    qs = [0.5, 0.3, np.array([0.0, 0.1, 0.5, 0.625, 1.0], np.float32), np.array(0.75, np.float32)]
    for q, dim, keepdim in itertools.product(qs, [None, 0, 1, -1], [False, True]):
        want = getattr(torch, name)(torch.from_numpy(x), _q(torch, q), dim=dim, keepdim=keepdim,
                                    interpolation=interpolation).numpy()
        got = getattr(hf.tensor(x), name)(_q(hf, q), dim, keepdim, interpolation=interpolation)
        assert got.shape == want.shape, (q, dim, keepdim)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-7, equal_nan=True,
                                   err_msg=str((q, dim, keepdim)))


def test_all_nan_slice_scalar_input_and_float64():
    torch = pytest.importorskip("torch")
    x = np.array([[np.nan, np.nan], [1.0, np.nan]])
    for name in ("quantile", "nanquantile"):
        want = getattr(torch, name)(torch.from_numpy(x), 0.5, dim=1).numpy()
        got = getattr(hf, name)(hf.tensor(x), 0.5, dim=1)
        assert got.dtype == hf.float64
        np.testing.assert_array_equal(got.numpy(), want)
    assert hf.quantile(hf.tensor(2.5), 0.3).item() == 2.5
    for dim, keepdim in itertools.product([None, 0], [False, True]):
        assert hf.quantile(hf.tensor(2.5), hf.tensor([0.3, 0.6]), dim, keepdim).tolist() == \
            [2.5, 2.5]


@pytest.mark.parametrize("interpolation", ["linear", "midpoint", "nearest"])
def test_gradients_match_torch_eager_and_to_static(interpolation):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    q = np.array([0.2, 0.5, 0.9], np.float32)
    w = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    tx = torch.from_numpy(x).requires_grad_()
    (torch.quantile(tx, torch.from_numpy(q), dim=1, interpolation=interpolation)
     * torch.from_numpy(w)).sum().backward()

    def loss(x, q, w):
        return (hf.quantile(x, q, dim=1, interpolation=interpolation) * w).sum()

    for fn in (loss, hf.jit.to_static(loss)):
        hx = hf.tensor(x, requires_grad=True)
        fn(hx, hf.tensor(q), hf.tensor(w)).backward()
        np.testing.assert_allclose(hx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_to_static_with_dynamic_sizes_equals_eager():
    def f(x):
        return x.quantile(0.4, dim=1), hf.nanquantile(x, hf.tensor([0.1, 0.9]), dim=0)

    converted = hf.jit.to_static(f, input_spec=[hf.jit.InputSpec([None, None])])
    for shape in ((3, 7), (5, 2)):
        x = hf.randn(*shape)
        for a, b in zip(converted(x), f(x)):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    assert converted.cache_info().misses == 1


def test_errors_name_the_function():
    x = hf.randn(3, 4)
    with pytest.raises(ValueError, match=r"quantile: q must be in the range \[0, 1\]"):
        hf.quantile(x, 1.5)
    with pytest.raises(ValueError, match=r"quantile: q values must be in the range"):
        hf.quantile(x, hf.tensor([0.5, -0.1]))
    with pytest.raises(TypeError, match=r"nanquantile: q must have the input's dtype"):
        hf.nanquantile(x, hf.tensor([0.5], dtype=hf.float64))
    with pytest.raises(TypeError, match=r"quantile: input must be float32 or float64"):
        hf.quantile(hf.tensor([1, 2]), 0.5)
    with pytest.raises(ValueError, match=r"quantile: interpolation must be one of"):
        hf.quantile(x, 0.5, interpolation="cubic")
    with pytest.raises(ValueError, match=r"quantile: q must be a scalar or a 1-D tensor"):
        hf.quantile(x, hf.ones(2, 2) * 0.5)
    with pytest.raises(ValueError, match=r"quantile: input of shape \(0, 3\) must be non-empty"):
        hf.quantile(hf.ones(0, 3), 0.5, dim=0)
