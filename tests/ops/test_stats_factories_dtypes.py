"""median, var_mean / std_mean, logspace, randint_like, rand_like/randn_like(requires_grad=),
hf.result_type and hf.promote_types, against PyTorch and numpy."""
import numpy as np
import pytest

import hybridfw as hf

X = [[1.0, 5.0, 3.0, 2.0], [2.0, 2.0, 0.0, -1.0], [7.0, -3.0, 4.0, 4.0]]


# ---- median ----------------------------------------------------------------------------------
@pytest.mark.parametrize("data", [[4.0, 1.0, 3.0, 2.0], [5.0, 1.0, 3.0], X,
                                  [[1.0, float("nan"), 0.0], [3.0, 2.0, 1.0]], 3.0])
def test_median_without_dim_is_the_lower_median(data):
    torch = pytest.importorskip("torch")
    got = hf.tensor(data).median()
    assert got.shape == ()
    np.testing.assert_array_equal(got.numpy(), torch.tensor(data).median().numpy())
    flat = np.sort(np.ravel(data))
    if not np.isnan(flat).any():
        assert got.item() == flat[(flat.size - 1) // 2]


@pytest.mark.parametrize("dim, keepdim", [(0, False), (1, False), (-1, True), (0, True)])
def test_median_with_dim_values_and_indices_match_torch(dim, keepdim):
    torch = pytest.importorskip("torch")
    data = X + [[float("nan"), 1.0, 2.0, 3.0]]
    got = hf.median(hf.tensor(data), dim, keepdim)
    ref = torch.median(torch.tensor(data), dim, keepdim)
    np.testing.assert_array_equal(got.values.numpy(), ref.values.numpy())
    np.testing.assert_array_equal(got.indices.numpy(), ref.indices.numpy())
    assert got.indices.dtype == hf.int64
    values, indices = hf.tensor(data).median(dim=dim, keepdim=keepdim)  # a named tuple
    np.testing.assert_array_equal(values.numpy(), ref.values.numpy())


def test_median_gradient_and_static():
    x = hf.tensor([[3.0, 1.0, 2.0], [0.5, 4.0, 6.0]], dtype=hf.float64, requires_grad=True)
    x.median(dim=1).values.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0, 1], [0, 1, 0]])
    assert hf.autograd.gradcheck(lambda a: a.median(), (hf.tensor(
        [[3.0, 1.0, 2.0], [0.5, 4.0, 6.0]], dtype=hf.float64, requires_grad=True),))

    @hf.jit.to_static
    def f(a):
        return a.median(dim=0).values + a.median()

    a = hf.tensor(X)
    np.testing.assert_array_equal(f(a).numpy(), (a.median(dim=0).values + a.median()).numpy())


# ---- var_mean / std_mean ---------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [{}, {"dim": 1}, {"dim": 0, "keepdim": True},
                                    {"dim": (0, 1), "correction": 0}, {"correction": 2}])
@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
def test_var_mean_std_mean_match_torch(name, kwargs):
    torch = pytest.importorskip("torch")
    got = getattr(hf, name)(hf.tensor(X, dtype=hf.float64), **kwargs)
    ref = getattr(torch, name)(torch.tensor(X, dtype=torch.float64), **kwargs)
    assert isinstance(got, tuple) and len(got) == 2
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-12)
    a = np.asarray(X)
    if not kwargs:
        np.testing.assert_allclose(got[1].item(), a.mean())
        spread = a.var(ddof=1)
        np.testing.assert_allclose(got[0].item(), spread if name == "var_mean" else spread ** 0.5)


def test_var_mean_gradient_and_static():
    a = hf.tensor(np.asarray(X), requires_grad=True)
    assert hf.autograd.gradcheck(lambda t: hf.var_mean(t, 1)[0] + hf.std_mean(t, 1)[1], (a,))

    @hf.jit.to_static
    def f(t):
        var, mean = hf.var_mean(t, dim=0)
        return var + mean

    t = hf.tensor(X)
    var, mean = hf.var_mean(t, dim=0)
    np.testing.assert_allclose(f(t).numpy(), (var + mean).numpy())


# ---- factories -------------------------------------------------------------------------------
def test_logspace_matches_numpy_and_torch():
    torch = pytest.importorskip("torch")
    got = hf.logspace(-3, 3, 50)
    assert got.dtype == hf.float32
    np.testing.assert_allclose(got.numpy(), np.logspace(-3, 3, 50), rtol=1e-6)
    np.testing.assert_allclose(hf.logspace(0, 4, 5, base=2.0, dtype=hf.float64).numpy(),
                               [1.0, 2.0, 4.0, 8.0, 16.0])
    np.testing.assert_allclose(hf.logspace(-1, 2, 7).numpy(), torch.logspace(-1, 2, 7).numpy(),
                               rtol=1e-6)
    assert hf.logspace(0, 1, 3, requires_grad=True).requires_grad


def test_randint_like_shape_dtype_range():
    hf.manual_seed(0)
    r = hf.randint_like(hf.zeros(200, 3), 5)
    assert r.shape == (200, 3) and r.dtype == hf.float32
    assert set(np.unique(r.numpy())) == {0.0, 1.0, 2.0, 3.0, 4.0}
    r = hf.randint_like(hf.zeros(100, dtype=hf.int32), 3, 6)
    assert r.dtype == hf.int32 and r.numpy().min() >= 3 and r.numpy().max() < 6
    assert hf.randint_like(hf.zeros(2), 4, dtype=hf.int64).dtype == hf.int64


def test_rand_like_and_randn_like_requires_grad():
    for fn in (hf.rand_like, hf.randn_like):
        t = fn(hf.zeros(2, 3), requires_grad=True)
        assert t.requires_grad and t.is_leaf and t.shape == (2, 3)
        assert not fn(hf.zeros(2)).requires_grad


# ---- dtypes ----------------------------------------------------------------------------------
@pytest.mark.parametrize("a, b", [("int32", "float16"), ("uint8", "int8"), ("bool", "int8"),
                                  ("int64", "float32"), ("float16", "float64")])
def test_promote_types_matches_torch(a, b):
    torch = pytest.importorskip("torch")
    got = hf.promote_types(getattr(hf, a if a != "bool" else "bool_"), b)
    assert str(got).split(".")[-1] == str(
        torch.promote_types(getattr(torch, a), getattr(torch, b))).split(".")[-1]


@pytest.mark.parametrize("make", [lambda lib: (lib.tensor([1, 2]), 1.0),
                                  lambda lib: (lib.tensor([1, 2], dtype=lib.int32), 5),
                                  lambda lib: (lib.tensor([1.0], dtype=lib.float16),
                                               lib.tensor(2.0, dtype=lib.float64)),
                                  lambda lib: (lib.tensor([True]), lib.tensor([1], dtype=lib.int8))])
def test_result_type_matches_torch(make):
    torch = pytest.importorskip("torch")
    got = hf.result_type(*make(hf))
    assert str(got).split(".")[-1] == str(torch.result_type(*make(torch))).split(".")[-1]


def test_randint_takes_float_and_bool_dtypes_as_torch():
    hf.manual_seed(0)
    r = hf.randint(2, 6, (500,), dtype="float32")
    assert r.dtype == hf.float32 and r.shape == (500,)
    v = r.numpy()
    assert set(np.unique(v)) == {2.0, 3.0, 4.0, 5.0}
    assert hf.randint(3, (4,), dtype=hf.float64).dtype == hf.float64
    b = hf.randint(0, 2, (200,), dtype="bool")
    assert b.dtype == hf.bool and b.numpy().any() and not b.numpy().all()
    hf.manual_seed(1)
    a = hf.randint(0, 10, (5,), dtype="float16").numpy()
    hf.manual_seed(1)
    assert np.array_equal(a, hf.randint(0, 10, (5,)).numpy().astype(np.float16))
