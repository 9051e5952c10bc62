"""Acceptance-style checks of the public API contract (/work/shared/API.md) against PyTorch."""
from __future__ import annotations

import collections

import numpy as np
import pytest

import hybridfw as hf

torch = pytest.importorskip("torch")
F = hf.nn.functional
TF = torch.nn.functional


def dname(dt):
    return str(dt).split(".")[-1]


def A(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    return np.asarray(t.detach().numpy())


def same(h, t, rtol=1e-5, atol=1e-6, dtype=True):
    assert tuple(h.shape) == tuple(t.shape), (h.shape, t.shape)
    if dtype:
        assert dname(h.dtype) == dname(t.dtype), (h.dtype, t.dtype)
    np.testing.assert_allclose(A(h).astype(np.float64) if A(h).dtype != bool else A(h),
                               A(t).astype(np.float64) if A(t).dtype != bool else A(t),
                               rtol=rtol, atol=atol)


RNG = np.random.default_rng(0)


def arr(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def pair(*shape, requires_grad=False):
    a = arr(*shape)
    return (hf.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad))


# ---------------------------------------------------------------- creation

def test_tensor_creation_defaults():
    same(hf.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0]))
    same(hf.tensor([1, 2]), torch.tensor([1, 2]))
    same(hf.tensor([True, False]), torch.tensor([True, False]))
    same(hf.tensor(3.5), torch.tensor(3.5))
    same(hf.tensor([[1, 2]], dtype=hf.float64), torch.tensor([[1, 2]], dtype=torch.float64))
    same(hf.tensor([1, 2], dtype="float32"), torch.tensor([1, 2], dtype=torch.float32))
    t = hf.tensor([1.0], requires_grad=True)
    assert t.requires_grad and t.is_leaf and t.grad is None
    assert str(hf.tensor([1.0], device="cpu").device).startswith("cpu")


def test_from_numpy_keeps_dtype():
    for dt in (np.float64, np.float32, np.int32, np.int64, np.bool_):
        a = np.zeros(3, dtype=dt)
        same(hf.from_numpy(a), torch.from_numpy(a))


@pytest.mark.parametrize("fn", ["zeros", "ones", "empty"])
def test_zeros_ones_empty(fn):
    h, t = getattr(hf, fn)(2, 3), getattr(torch, fn)(2, 3)
    assert h.shape == (2, 3) and dname(h.dtype) == dname(t.dtype)
    h = getattr(hf, fn)((2, 3), dtype=hf.int64)
    assert h.shape == (2, 3) and dname(h.dtype) == "int64"
    h = getattr(hf, fn)([4], dtype="float64")
    assert h.shape == (4,) and dname(h.dtype) == "float64"
    if fn != "empty":
        same(getattr(hf, fn)(2, 3), getattr(torch, fn)(2, 3))


def test_full_and_likes():
    same(hf.full((2, 3), 1.5), torch.full((2, 3), 1.5))
    same(hf.full((2,), 7), torch.full((2,), 7))
    same(hf.full((2,), True), torch.full((2,), True))
    same(hf.full((2, 2), 3, dtype=hf.float32), torch.full((2, 2), 3, dtype=torch.float32))
    h, t = pair(2, 3)
    same(hf.zeros_like(h), torch.zeros_like(t))
    same(hf.ones_like(h), torch.ones_like(t))
    same(hf.full_like(h, 2.5), torch.full_like(t, 2.5))
    same(hf.ones_like(h, dtype=hf.int64), torch.ones_like(t, dtype=torch.int64))
    hi = hf.tensor([1, 2])
    same(hf.full_like(hi, 3), torch.full_like(torch.tensor([1, 2]), 3))


@pytest.mark.parametrize("args,kw", [((5,), {}), ((1, 5), {}), ((0, 10, 3), {}), ((0.0, 1.0, 0.25), {}),
                                     ((5,), {"dtype": "float32"}), ((2.5,), {}), ((1, 4, 0.5), {}),
                                     ((0,), {"end": 4}) if False else ((4,), {"dtype": "float64"}),
                                     ((10, 0, -2), {})])
def test_arange(args, kw):
    tkw = {k: getattr(torch, v) for k, v in kw.items()}
    same(hf.arange(*args, **kw), torch.arange(*args, **tkw))


def test_arange_keywords():
    same(hf.arange(0, 6, step=2), torch.arange(0, 6, step=2))
    same(hf.arange(start=1, end=4) if _accepts_end() else hf.arange(1, 4), torch.arange(start=1, end=4))


def _accepts_end():
    return True


def test_linspace_eye_rand():
    same(hf.linspace(0, 1, 5), torch.linspace(0, 1, 5))
    same(hf.linspace(-1.0, 1.0, steps=7), torch.linspace(-1.0, 1.0, steps=7))
    same(hf.linspace(0, 10, 3, dtype=hf.float64), torch.linspace(0, 10, 3, dtype=torch.float64))
    same(hf.eye(3), torch.eye(3))
    same(hf.eye(2, 4), torch.eye(2, 4))
    same(hf.eye(3, dtype=hf.int64), torch.eye(3, dtype=torch.int64))
    for fn in ("rand", "randn"):
        h = getattr(hf, fn)(3, 4)
        assert h.shape == (3, 4) and dname(h.dtype) == "float32"
        assert getattr(hf, fn)((2, 5)).shape == (2, 5)
        assert dname(getattr(hf, fn)(2, dtype=hf.float64).dtype) == "float64"
    r = hf.rand(1000).numpy()
    assert r.min() >= 0 and r.max() < 1
    r = hf.randint(0, 5, (100,))
    assert r.shape == (100,) and dname(r.dtype) == "int64"
    assert r.numpy().min() >= 0 and r.numpy().max() < 5
    r = hf.randint(3, 4, (2, 2))
    assert (r.numpy() == 3).all()
    assert hf.randint(10, (3,)).shape == (3,)
    assert hf.randint(low=0, high=3, size=(4,)).shape == (4,)


def test_manual_seed_reproducible():
    hf.manual_seed(123)
    a = hf.randn(5).numpy(), hf.rand(3).numpy(), hf.randint(0, 100, (4,)).numpy()
    hf.manual_seed(123)
    b = hf.randn(5).numpy(), hf.rand(3).numpy(), hf.randint(0, 100, (4,)).numpy()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    hf.manual_seed(123)
    d1 = F.dropout(hf.ones(100), p=0.5).numpy()
    hf.manual_seed(123)
    d2 = F.dropout(hf.ones(100), p=0.5).numpy()
    np.testing.assert_array_equal(d1, d2)


def test_dtypes_names():
    for n in ("float32", "float64", "float16", "int32", "int64", "bool"):
        assert dname(getattr(hf, n)) == n
        assert hf.zeros(2, dtype=n).dtype == getattr(hf, n)
    assert dname(hf.zeros(1).dtype) == "float32"
    assert dname(hf.tensor(1).dtype) == "int64"
    assert dname(hf.tensor([1.5]).astype("float16").dtype) == "float16"


# ---------------------------------------------------------------- attributes / conversion

def test_attributes():
    h, t = pair(2, 3, 4)
    assert h.shape == (2, 3, 4) and isinstance(h.shape, tuple)
    assert all(type(s) is int for s in h.shape)
    assert h.ndim == 3 and h.numel() == 24 and isinstance(h.numel(), int)
    same(h.T, t.permute(2, 1, 0)) if False else None
    m, mt = pair(2, 3)
    same(m.T, mt.T)
    v, vt = pair(3)
    same(v.T, vt.T)
    assert h.requires_grad is False and h.grad is None and h.is_leaf


def test_conversions():
    h = hf.tensor([[1.5, 2.0]])
    assert isinstance(h.numpy(), np.ndarray)
    assert h.tolist() == [[1.5, 2.0]]
    assert hf.tensor([1, 2]).tolist() == [1, 2] and type(hf.tensor([1, 2]).tolist()[0]) is int
    assert type(hf.tensor([True]).tolist()[0]) is bool
    x = hf.tensor(2.5).item()
    assert type(x) is float and x == 2.5
    assert type(hf.tensor([3]).item()) is int
    assert type(hf.tensor(True).item()) is bool
    assert hf.tensor(1.0).tolist() == 1.0
    with pytest.raises((ValueError, RuntimeError)):
        hf.tensor([1.0, 2.0]).item()
    assert dname(h.to(hf.float64).dtype) == "float64"
    assert dname(h.to("float64").dtype) == "float64"
    assert dname(h.to(dtype=hf.int32).dtype) == "int32"
    assert str(h.to("cpu").device).startswith("cpu")
    assert str(h.to(hf.device("cpu")).device).startswith("cpu")
    assert str(h.to(device="cpu").device).startswith("cpu")
    assert dname(h.astype(hf.int64).dtype) == "int64"
    assert dname(h.astype("int32").dtype) == "int32"
    assert h.cpu().device == h.device
    c = h.clone()
    c[0, 0] = 9.0
    assert h.numpy()[0, 0] == 1.5
    r = hf.tensor([1.0], requires_grad=True)
    d = (r * 2).detach()
    assert not d.requires_grad and d.is_leaf
    q = hf.tensor([1.0])
    assert q.requires_grad_() is q and q.requires_grad
    q.requires_grad_(False)
    assert not q.requires_grad


def test_to_float_to_int_truncates():
    same(hf.tensor([1.7, -1.7]).to(hf.int64), torch.tensor([1.7, -1.7]).to(torch.int64))
    same(hf.tensor([1, 0, 2]).to(hf.bool), torch.tensor([1, 0, 2]).to(torch.bool))


# ---------------------------------------------------------------- operators

def _binops():
    import operator as o
    return [o.add, o.sub, o.mul, o.truediv, o.pow]


@pytest.mark.parametrize("op", _binops())
def test_binary_broadcast_float(op):
    a, b = arr(2, 3), np.abs(arr(3)) + 0.5
    ha, hb, ta, tb = hf.tensor(a), hf.tensor(b), torch.tensor(a), torch.tensor(b)
    same(op(hb.abs() if op.__name__ == "pow" else ha, hb), op(tb.abs() if op.__name__ == "pow" else ta, tb), rtol=1e-5)
    same(op(hb, 2), op(tb, 2), rtol=1e-5)
    same(op(2.0, hb), op(2.0, tb), rtol=1e-5)
    same(op(hb, 2.5), op(tb, 2.5), rtol=1e-5)


def test_int_ops_and_promotion():
    ha, ta = hf.tensor([7, -7, 5]), torch.tensor([7, -7, 5])
    hb, tb = hf.tensor([2, 2, -3]), torch.tensor([2, 2, -3])
    same(ha // hb, ta // tb)
    same(ha % hb, ta % tb)
    same(ha / hb, ta / tb)
    same(ha + hb, ta + tb)
    same(ha * 2, ta * 2)
    same(ha * 2.5, ta * 2.5)
    same(ha + hf.tensor([1.0, 2.0, 3.0]), ta + torch.tensor([1.0, 2.0, 3.0]))
    same(ha // 2, ta // 2)
    same(ha % 3, ta % 3)
    same(ha ** 2, ta ** 2)
    same(-ha, -ta)
    same(abs(ha), abs(ta))
    same(ha.abs(), ta.abs())
    hf_ = hf.tensor([7.5, -7.5])
    tf_ = torch.tensor([7.5, -7.5])
    same(hf_ // 2, tf_ // 2)
    same(hf_ % 2, tf_ % 2)
    same(hf.tensor([1], dtype=hf.int32) + hf.tensor([1]), torch.tensor([1], dtype=torch.int32) + torch.tensor([1]))
    same(hf.tensor([1.0], dtype=hf.float64) + hf.tensor([1.0]),
         torch.tensor([1.0], dtype=torch.float64) + torch.tensor([1.0]))
    same(hf.tensor([True, False]) + hf.tensor([1, 1]), torch.tensor([True, False]) + torch.tensor([1, 1]))


def test_matmul_operator_and_function():
    a, b = arr(2, 3, 4), arr(4, 5)
    same(hf.tensor(a) @ hf.tensor(b), torch.tensor(a) @ torch.tensor(b), rtol=1e-4, atol=1e-5)
    same(hf.matmul(hf.tensor(a), hf.tensor(b)), torch.matmul(torch.tensor(a), torch.tensor(b)), rtol=1e-4, atol=1e-5)
    v = arr(4)
    same(hf.tensor(a) @ hf.tensor(v), torch.tensor(a) @ torch.tensor(v), rtol=1e-4, atol=1e-5)
    same(hf.tensor(v) @ hf.tensor(v), torch.tensor(v) @ torch.tensor(v), rtol=1e-4, atol=1e-5)


def test_comparisons_and_logic():
    a, b = arr(4), arr(4)
    ha, hb, ta, tb = hf.tensor(a), hf.tensor(b), torch.tensor(a), torch.tensor(b)
    import operator as o
    for op in (o.eq, o.ne, o.lt, o.le, o.gt, o.ge):
        same(op(ha, hb), op(ta, tb))
        same(op(ha, 0.0), op(ta, 0.0))
    m1, m2 = ha > 0, hb > 0
    t1, t2 = ta > 0, tb > 0
    same(m1 & m2, t1 & t2)
    same(m1 | m2, t1 | t2)
    same(~m1, ~t1)
    same(m1 ^ m2, t1 ^ t2)


# ---------------------------------------------------------------- math

@pytest.mark.parametrize("name", ["exp", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
                                  "relu", "abs", "neg"])
def test_unary_math(name):
    a = np.abs(arr(3, 4)) + 0.1
    if name in ("sin", "cos", "tanh", "sigmoid", "relu", "abs", "neg"):
        a = arr(3, 4)
    same(getattr(hf, name)(hf.tensor(a)), getattr(torch, name)(torch.tensor(a)), rtol=1e-5)
    same(getattr(hf.tensor(a), name)(), getattr(torch.tensor(a), name)(), rtol=1e-5)


def test_unary_on_int_promotes():
    same(hf.exp(hf.tensor([1, 2])), torch.exp(torch.tensor([1, 2])))
    same(hf.sqrt(hf.tensor([4, 9])), torch.sqrt(torch.tensor([4, 9])))


def test_pow_clamp_clip():
    h, t = pair(3, 4)
    same(hf.pow(h, 2), torch.pow(t, 2))
    same(h.pow(3), t.pow(3), rtol=1e-5)
    same(hf.pow(h.abs(), hf.tensor(0.5)), torch.pow(t.abs(), torch.tensor(0.5)))
    same(hf.pow(2, h), torch.pow(2, t), rtol=1e-5)
    same(hf.clamp(h, -0.5, 0.5), torch.clamp(t, -0.5, 0.5))
    same(hf.clamp(h, min=0.0), torch.clamp(t, min=0.0))
    same(hf.clamp(h, max=0.1), torch.clamp(t, max=0.1))
    same(h.clamp(min=-0.2, max=0.3), t.clamp(min=-0.2, max=0.3))
    same(hf.clip(h, -0.5, 0.5), torch.clip(t, -0.5, 0.5))
    same(h.clip(min=0.0), t.clip(min=0.0))
    hi = hf.tensor([1, 5, 9])
    same(hi.clamp(2, 6), torch.tensor([1, 5, 9]).clamp(2, 6))


def test_maximum_minimum_where():
    (h1, t1), (h2, t2) = pair(3, 4), pair(4)
    same(hf.maximum(h1, h2), torch.maximum(t1, t2))
    same(hf.minimum(h1, h2), torch.minimum(t1, t2))
    same(hf.where(h1 > 0, h1, h2), torch.where(t1 > 0, t1, t2))
    same(hf.where(h1 > 0, h1, 0.0), torch.where(t1 > 0, t1, 0.0))
    same(hf.where(h1 > 0, 1.0, 0.0), torch.where(t1 > 0, 1.0, 0.0))
    same(hf.where(hf.tensor([True, False]), hf.tensor([1, 2]), hf.tensor([3, 4])),
         torch.where(torch.tensor([True, False]), torch.tensor([1, 2]), torch.tensor([3, 4])))


def test_where_grad():
    (h1, t1), (h2, t2) = pair(3, 4, requires_grad=True), pair(4, requires_grad=True)
    hf.where(h1 > 0, h1 * 2, h2).sum().backward()
    torch.where(t1 > 0, t1 * 2, t2).sum().backward()
    same(h1.grad, t1.grad)
    same(h2.grad, t2.grad)


@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
                                       ("ii->i", [(3, 3)]), ("ij->ji", [(2, 3)]), ("i,j->ij", [(2,), (3,)]),
                                       ("ij->", [(2, 3)]), ("...ij,...jk->...ik", [(2, 2, 3), (3, 4)]),
                                       ("ij,ij->i", [(2, 3), (2, 3)])])
def test_einsum(eq, shapes):
    arrs = [arr(*s) for s in shapes]
    same(hf.einsum(eq, *[hf.tensor(a) for a in arrs]), torch.einsum(eq, *[torch.tensor(a) for a in arrs]),
         rtol=1e-4, atol=1e-5)


def test_einsum_grad():
    (ha, ta), (hb, tb) = pair(2, 3, requires_grad=True), pair(3, 4, requires_grad=True)
    hf.einsum("ij,jk->ik", ha, hb).sum().backward()
    torch.einsum("ij,jk->ik", ta, tb).sum().backward()
    same(ha.grad, ta.grad, rtol=1e-5)
    same(hb.grad, tb.grad, rtol=1e-5)


# ---------------------------------------------------------------- reductions

@pytest.mark.parametrize("name", ["sum", "mean", "prod", "var", "std", "max", "min", "argmax", "argmin"])
def test_reduction_full(name):
    h, t = pair(3, 4)
    same(getattr(hf, name)(h), getattr(torch, name)(t), rtol=1e-5)
    same(getattr(h, name)(), getattr(t, name)(), rtol=1e-5)


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "var", "std", "argmax", "argmin", "logsumexp"])
@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, True), (-1, False), ((0, 1), False), ((0, 1), True)])
def test_reduction_dim(name, dim, keepdim):
    if isinstance(dim, tuple) and name in ("prod", "argmax", "argmin"):
        pytest.skip("torch takes a single dim")
    h, t = pair(3, 4)
    same(getattr(hf, name)(h, dim=dim, keepdim=keepdim), getattr(torch, name)(t, dim=dim, keepdim=keepdim), rtol=1e-5)
    same(getattr(h, name)(dim=dim, keepdim=keepdim), getattr(t, name)(dim=dim, keepdim=keepdim), rtol=1e-5)
    if name not in ("var", "std"):  # torch's positional form there is (dim, unbiased, keepdim)
        same(getattr(h, name)(dim, keepdim), getattr(t, name)(dim, keepdim), rtol=1e-5)
    else:
        same(getattr(hf, name)(h, dim), getattr(torch, name)(t, dim), rtol=1e-5)


def test_reduction_int_dtypes():
    hi, ti = hf.tensor([[1, 2], [3, 4]]), torch.tensor([[1, 2], [3, 4]])
    same(hi.sum(), ti.sum())
    same(hi.sum(dim=0), ti.sum(dim=0))
    same(hi.prod(), ti.prod())
    same(hi.max(), ti.max())
    same(hi.argmax(), ti.argmax())
    same(hf.tensor([True, True, False]).sum(), torch.tensor([True, True, False]).sum())
    same(hi.cumsum(dim=0), ti.cumsum(dim=0))
    hi32 = hf.tensor([1, 2], dtype=hf.int32)
    same(hi32.sum(), torch.tensor([1, 2], dtype=torch.int32).sum())
    same(hi.float().mean() if hasattr(hi, "float") else hi.to(hf.float32).mean(), ti.float().mean())


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_dim_named_tuple(name):
    h, t = pair(3, 4)
    r = getattr(h, name)(dim=1)
    rt = getattr(t, name)(dim=1)
    assert isinstance(r, tuple) and len(r) == 2
    same(r.values, rt.values)
    same(r.indices, rt.indices)
    v, i = getattr(hf, name)(h, dim=0, keepdim=True)
    same(v, getattr(torch, name)(t, dim=0, keepdim=True)[0])
    same(i, getattr(torch, name)(t, dim=0, keepdim=True)[1])
    r = getattr(h, name)(1)
    same(r[0], rt[0])
    # binary form
    h2, t2 = pair(3, 4)
    same(getattr(hf, name)(h, h2), getattr(torch, name)(t, t2))


def test_max_grad_and_dim_grad():
    h, t = pair(3, 4, requires_grad=True)
    h.max(dim=1).values.sum().backward()
    t.max(dim=1).values.sum().backward()
    same(h.grad, t.grad)


@pytest.mark.parametrize("kw", [{}, {"correction": 0}, {"correction": 1}, {"unbiased": False}, {"dim": 1},
                                {"dim": 0, "correction": 0, "keepdim": True}])
def test_var_std_correction(kw):
    h, t = pair(4, 5)
    same(h.var(**kw), t.var(**kw), rtol=1e-5)
    same(hf.std(h, **kw), torch.std(t, **kw), rtol=1e-5)


def test_logsumexp_cumsum():
    h, t = pair(3, 4)
    same(hf.logsumexp(h, dim=1), torch.logsumexp(t, dim=1))
    same(hf.logsumexp(h, 0, keepdim=True), torch.logsumexp(t, 0, keepdim=True))
    same(h.logsumexp(dim=-1), t.logsumexp(dim=-1))
    big = hf.tensor([1000.0, 1000.0])
    np.testing.assert_allclose(hf.logsumexp(big, dim=0).item(), 1000 + np.log(2), rtol=1e-6)
    same(hf.cumsum(h, dim=1), torch.cumsum(t, dim=1), rtol=1e-5)
    same(h.cumsum(0), t.cumsum(0), rtol=1e-5)
    same(h.cumsum(dim=-1), t.cumsum(dim=-1), rtol=1e-5)
    hg, tg = pair(3, 4, requires_grad=True)
    (hf.cumsum(hg, dim=1) * hf.tensor(np.arange(4.0, dtype=np.float32))).sum().backward()
    (torch.cumsum(tg, dim=1) * torch.arange(4.0)).sum().backward()
    same(hg.grad, tg.grad)
    hg, tg = pair(3, 4, requires_grad=True)
    hf.logsumexp(hg, dim=1).sum().backward()
    torch.logsumexp(tg, dim=1).sum().backward()
    same(hg.grad, tg.grad)


@pytest.mark.parametrize("name,kw", [("sum", {"dim": 1}), ("mean", {"dim": 0}), ("prod", {"dim": 1}),
                                     ("var", {"dim": 1}), ("std", {}), ("sum", {}), ("mean", {"dim": (0, 1)})])
def test_reduction_grads(name, kw):
    h, t = pair(3, 4, requires_grad=True)
    getattr(h, name)(**kw).sum().backward()
    getattr(t, name)(**kw).sum().backward()
    same(h.grad, t.grad, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- shape ops

def test_shape_methods():
    h, t = pair(2, 3, 4)
    same(h.reshape(6, 4), t.reshape(6, 4))
    same(h.reshape((4, -1)), t.reshape((4, -1)))
    same(hf.reshape(h, (24,)), torch.reshape(t, (24,)))
    same(h.view(2, 12), t.view(2, 12))
    same(h.view(-1), t.view(-1))
    same(h.flatten(), t.flatten())
    same(h.flatten(1), t.flatten(1))
    same(hf.flatten(h, start_dim=0, end_dim=1), torch.flatten(t, start_dim=0, end_dim=1))
    same(h.unsqueeze(0), t.unsqueeze(0))
    same(hf.unsqueeze(h, dim=-1), torch.unsqueeze(t, dim=-1))
    s, st = pair(1, 3, 1)
    same(s.squeeze(), st.squeeze())
    same(s.squeeze(0), st.squeeze(0))
    same(hf.squeeze(s, dim=-1), torch.squeeze(st, dim=-1))
    same(s.squeeze(1), st.squeeze(1))  # no-op on non-1 dim
    same(h.transpose(0, 2), t.transpose(0, 2))
    same(hf.transpose(h, 1, -1), torch.transpose(t, 1, -1))
    same(h.permute(2, 0, 1), t.permute(2, 0, 1))
    same(h.permute((1, 2, 0)), t.permute((1, 2, 0)))
    same(hf.permute(h, (2, 1, 0)), torch.permute(t, (2, 1, 0)))
    e, et = pair(3, 1)
    same(e.expand(3, 4), et.expand(3, 4))
    same(e.expand(2, -1, 4), et.expand(2, -1, 4))
    same(e.expand((3, 5)), et.expand((3, 5)))
    same(hf.broadcast_to(e, (2, 3, 4)), torch.broadcast_to(et, (2, 3, 4)))
    same(e.broadcast_to((3, 2)), et.broadcast_to((3, 2)))


def test_cat_stack_split_chunk():
    (a, ta), (b, tb) = pair(2, 3), pair(2, 3)
    same(hf.cat([a, b]), torch.cat([ta, tb]))
    same(hf.cat((a, b), dim=1), torch.cat((ta, tb), dim=1))
    same(hf.cat([a, b], -1), torch.cat([ta, tb], -1))
    same(hf.stack([a, b]), torch.stack([ta, tb]))
    same(hf.stack([a, b], dim=2), torch.stack([ta, tb], dim=2))
    same(hf.stack((a, b), -1), torch.stack((ta, tb), -1))
    x, tx = pair(7, 4)
    for args, kw in [((3,), {}), ((2,), {"dim": 1}), (([2, 5],), {}), (([1, 3],), {"dim": 1}), ((7,), {})]:
        hs, ts = hf.split(x, *args, **kw), torch.split(tx, *args, **kw)
        assert isinstance(hs, (tuple, list)) and len(hs) == len(ts)
        for p, q in zip(hs, ts):
            same(p, q)
    hs = hf.split(x, split_size_or_sections=[3, 4], dim=0)
    assert [p.shape for p in hs] == [(3, 4), (4, 4)]
    hs = x.split(2)
    assert [p.shape for p in hs] == [tuple(q.shape) for q in tx.split(2)]
    for args, kw in [((3,), {}), ((2,), {"dim": 1}), ((4,), {})]:
        hs, ts = hf.chunk(x, *args, **kw), torch.chunk(tx, *args, **kw)
        assert len(hs) == len(ts)
        for p, q in zip(hs, ts):
            same(p, q)
    assert len(x.chunk(3, dim=0)) == 3
    assert len(hf.chunk(x, chunks=2, dim=1)) == 2


def test_shape_grads():
    (a, ta), (b, tb) = pair(2, 3, requires_grad=True), pair(2, 3, requires_grad=True)
    w = arr(4, 3)
    (hf.cat([a, b]) * hf.tensor(w)).sum().backward()
    (torch.cat([ta, tb]) * torch.tensor(w)).sum().backward()
    same(a.grad, ta.grad)
    same(b.grad, tb.grad)
    x, tx = pair(5, 2, requires_grad=True)
    p = hf.split(x, [2, 3])
    q = torch.split(tx, [2, 3])
    (p[1] * 3).sum().backward()
    (q[1] * 3).sum().backward()
    same(x.grad, tx.grad)
    y, ty = pair(3, 1, requires_grad=True)
    (y.expand(3, 4) * hf.tensor(arr(3, 4) * 0 + 2)).sum().backward()
    (ty.expand(3, 4) * 2).sum().backward()
    same(y.grad, ty.grad)


# ---------------------------------------------------------------- indexing

def _idx_cases():
    return [
        (1,), (slice(None), 1), (slice(1, None), slice(None, None, 2)), (-1,), (None, 0),
        (Ellipsis, 1), (0, Ellipsis, None), (slice(None), None, slice(0, 2)),
    ]


@pytest.mark.parametrize("idx", _idx_cases())
def test_index_read_basic(idx):
    h, t = pair(3, 4, 5)
    same(h[idx], t[idx])


def test_index_read_advanced():
    h, t = pair(4, 5)
    same(h[h > 0], t[t > 0])
    m = arr(4) > 0
    same(h[hf.tensor(m)], t[torch.tensor(m)])
    i = np.array([0, 2, 2])
    same(h[hf.tensor(i)], t[torch.tensor(i)])
    same(h[:, hf.tensor(i)], t[:, torch.tensor(i)])
    same(h[hf.tensor([0, 1]), hf.tensor([2, 3])], t[torch.tensor([0, 1]), torch.tensor([2, 3])])
    same(h[[0, 3]], t[[0, 3]])
    same(h[hf.tensor([[0, 1], [2, 3]])], t[torch.tensor([[0, 1], [2, 3]])])
    same(h[1, hf.tensor([0, 4])], t[1, torch.tensor([0, 4])])
    same(h[hf.tensor(-1)], t[torch.tensor(-1)])


def test_index_read_grad():
    h, t = pair(4, 5, requires_grad=True)
    idx = [0, 2, 0]
    (h[hf.tensor(idx)] * 2).sum().backward()
    (t[torch.tensor(idx)] * 2).sum().backward()
    same(h.grad, t.grad)
    h, t = pair(4, 5, requires_grad=True)
    h[h > 0].sum().backward()
    t[t > 0].sum().backward()
    same(h.grad, t.grad)
    h, t = pair(4, 5, requires_grad=True)
    h[1:, ::2].sum().backward()
    t[1:, ::2].sum().backward()
    same(h.grad, t.grad)


def test_index_write():
    a = arr(4, 5)
    h, t = hf.tensor(a), torch.tensor(a)
    h[0] = 1.0
    t[0] = 1.0
    h[:, 1] = hf.tensor(np.arange(4, dtype=np.float32))
    t[:, 1] = torch.arange(4, dtype=torch.float32)
    h[h < 0] = 0.0
    t[t < 0] = 0.0
    h[hf.tensor([1, 3]), 2] = -5.0
    t[torch.tensor([1, 3]), 2] = -5.0
    h[..., -1] = 7
    t[..., -1] = 7
    h[2:4, 0:2] = hf.tensor([[9.0, 8.0]])
    t[2:4, 0:2] = torch.tensor([[9.0, 8.0]])
    h[hf.tensor([True, False, False, True])] = hf.tensor(np.ones(5, dtype=np.float32) * 3)
    t[torch.tensor([True, False, False, True])] = torch.ones(5) * 3
    same(h, t)
    hi = hf.tensor([1, 2, 3])
    hi[1] = 10
    assert hi.tolist() == [1, 10, 3] and dname(hi.dtype) == "int64"


def test_index_write_autograd():
    h, t = pair(3, requires_grad=True)
    hy = h * 2
    ty = t * 2
    hy[0] = 0.0
    ty[0] = 0.0
    hy.sum().backward()
    ty.sum().backward()
    same(h.grad, t.grad)


def test_gather_index_select_masked_fill():
    h, t = pair(3, 4)
    idx = np.array([[0, 1, 1, 0], [2, 0, 1, 1]])
    same(hf.gather(h, 0, hf.tensor(idx)), torch.gather(t, 0, torch.tensor(idx)))
    idx1 = np.array([[3, 0], [1, 1], [2, 2]])
    same(h.gather(1, hf.tensor(idx1)), t.gather(1, torch.tensor(idx1)))
    same(hf.gather(h, dim=1, index=hf.tensor(idx1)), torch.gather(t, dim=1, index=torch.tensor(idx1)))
    same(h.gather(dim=1, index=hf.tensor(idx1)), t.gather(dim=1, index=torch.tensor(idx1)))
    same(hf.index_select(h, 1, hf.tensor([3, 0, 3])), torch.index_select(t, 1, torch.tensor([3, 0, 3])))
    same(h.index_select(dim=0, index=hf.tensor([2, 0])), t.index_select(dim=0, index=torch.tensor([2, 0])))
    same(hf.masked_fill(h, h > 0, 0.0), torch.masked_fill(t, t > 0, 0.0))
    same(h.masked_fill(mask=h < 0, value=-1.0), t.masked_fill(mask=t < 0, value=-1.0))
    m = np.array([True, False, True, False])
    same(h.masked_fill(hf.tensor(m), float("-inf")), t.masked_fill(torch.tensor(m), float("-inf")))
    hg, tg = pair(3, 4, requires_grad=True)
    (hg.gather(1, hf.tensor(idx1)) * 2).sum().backward()
    (tg.gather(1, torch.tensor(idx1)) * 2).sum().backward()
    same(hg.grad, tg.grad)
    hg, tg = pair(3, 4, requires_grad=True)
    hg.index_select(0, hf.tensor([0, 0, 2])).sum().backward()
    tg.index_select(0, torch.tensor([0, 0, 2])).sum().backward()
    same(hg.grad, tg.grad)
    hg, tg = pair(3, 4, requires_grad=True)
    hg.masked_fill(hg > 0, 0.0).sum().backward()
    tg.masked_fill(tg > 0, 0.0).sum().backward()
    same(hg.grad, tg.grad)


# ---------------------------------------------------------------- method / function parity

@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "abs",
                                  "sum", "mean", "max", "min", "argmax", "argmin", "prod", "var", "std",
                                  "cumsum", "logsumexp", "reshape", "flatten", "squeeze", "unsqueeze",
                                  "transpose", "permute", "expand", "broadcast_to", "split", "chunk", "gather",
                                  "index_select", "masked_fill", "clamp", "clip", "pow", "matmul", "rsqrt",
                                  "log1p"])
def test_method_and_function_exist(name):
    assert callable(getattr(hf, name)), name
    assert callable(getattr(hf.Tensor, name)), name


# ---------------------------------------------------------------- autograd

def test_backward_with_grad_and_retain():
    h, t = pair(3, requires_grad=True)
    g = arr(3)
    (h * h).backward(hf.tensor(g))
    (t * t).backward(torch.tensor(g))
    same(h.grad, t.grad)
    h, t = pair(3, requires_grad=True)
    (h * 3).backward(grad=hf.tensor(g))
    same(h.grad, hf.tensor(g * 3))
    h, t = pair(3, requires_grad=True)
    hy, ty = (h.exp()).sum(), (t.exp()).sum()
    hy.backward(retain_graph=True)
    hy.backward()
    ty.backward(retain_graph=True)
    ty.backward()
    same(h.grad, t.grad)  # accumulates


def test_nonscalar_backward_without_grad_raises():
    h = hf.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises((RuntimeError, ValueError)):
        (h * 2).backward()


def test_no_grad_enable_grad():
    h = hf.tensor([1.0], requires_grad=True)
    with hf.no_grad():
        y = h * 2
        assert not y.requires_grad
        with hf.enable_grad():
            z = h * 2
            assert z.requires_grad
    assert (h * 2).requires_grad

    @hf.no_grad()
    def f(x):
        return x * 2
    assert not f(h).requires_grad
    assert not (h * 2).is_leaf


def test_autograd_grad():
    h, t = pair(3, requires_grad=True)
    (hg,) = hf.autograd.grad((h ** 3).sum(), h)
    (tg,) = torch.autograd.grad((t ** 3).sum(), t)
    same(hg, tg, rtol=1e-5)
    assert h.grad is None
    go = arr(3)
    hg = hf.autograd.grad(h * h, [h], grad_outputs=hf.tensor(go))
    tg = torch.autograd.grad(t * t, [t], grad_outputs=torch.tensor(go))
    same(hg[0], tg[0])
    hg = hf.autograd.grad([h * h], [h], grad_outputs=[hf.tensor(go)])
    same(hg[0], tg[0])
    # create_graph -> second derivative
    (hg,) = hf.autograd.grad((h ** 3).sum(), h, create_graph=True)
    (tg,) = torch.autograd.grad((t ** 3).sum(), t, create_graph=True)
    assert hg.requires_grad
    (hgg,) = hf.autograd.grad(hg.sum(), h)
    (tgg,) = torch.autograd.grad(tg.sum(), t)
    same(hgg, tgg, rtol=1e-5)
    # two inputs
    (h2, t2) = pair(3, requires_grad=True)
    a, b = hf.autograd.grad((h * h2).sum(), [h, h2])
    ta, tb = torch.autograd.grad((t * t2).sum(), [t, t2])
    same(a, ta)
    same(b, tb)


def test_double_backward_via_backward():
    h, t = pair(3, requires_grad=True)
    (g,) = hf.autograd.grad((h.sin() * h).sum(), h, create_graph=True)
    (tg,) = torch.autograd.grad((t.sin() * t).sum(), t, create_graph=True)
    g.sum().backward()
    tg.sum().backward()
    same(h.grad, t.grad, rtol=1e-5)


def test_grad_of_broadcast_and_int_pow():
    (a, ta), (b, tb) = pair(2, 3, requires_grad=True), pair(3, requires_grad=True)
    ((a * b + b / (a.abs() + 1)) ** 2).mean().backward()
    ((ta * tb + tb / (ta.abs() + 1)) ** 2).mean().backward()
    same(a.grad, ta.grad, rtol=1e-4)
    same(b.grad, tb.grad, rtol=1e-4)


# ---------------------------------------------------------------- devices

def test_devices():
    d = hf.device("cpu")
    assert d.type == "cpu"
    assert isinstance(hf.cuda.is_available(), bool)
    c = hf.device("cuda:1")
    assert c.type == "cuda" and c.index == 1
    assert hf.device("cuda").type == "cuda"
    assert hf.zeros(2, device="cpu").device == hf.device("cpu")
    assert hf.tensor([1.0]).device.type == "cpu"
    hf.set_default_device("cpu")
    assert hf.ones(1).device.type == "cpu"


# ---------------------------------------------------------------- memory

def test_memory_api():
    import gc
    gc.collect()
    base = hf.memory.allocated()
    assert isinstance(base, int)
    hf.memory.reset_peak()
    x = hf.zeros(1000, dtype=hf.float32)
    assert hf.memory.allocated() - base == 4000
    v = x[:500]
    assert hf.memory.allocated() - base == 4000
    del v
    assert hf.memory.peak() >= base + 4000
    del x
    assert hf.memory.allocated() == base
    assert hf.memory.allocated(device="cpu") == hf.memory.allocated()
    assert hf.memory.peak(device=None) >= base
    hf.memory.reset_peak()
    assert hf.memory.peak() == hf.memory.allocated()
    s = hf.memory.stats()
    assert isinstance(s, dict)


# ---------------------------------------------------------------- nn layers

def _copy_from_torch(hm, tm):
    sd = {k: hf.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()}
    res = hm.load_state_dict(sd)
    return res


def _check_sd(hm, tm):
    hsd, tsd = hm.state_dict(), tm.state_dict()
    assert list(hsd.keys()) == list(tsd.keys())
    for k in tsd:
        assert tuple(hsd[k].shape) == tuple(tsd[k].shape), k
        assert dname(hsd[k].dtype) == dname(tsd[k].dtype), k
    hp = [(n, tuple(p.shape)) for n, p in hm.named_parameters()]
    tp = [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    assert hp == tp


LAYERS = [
    ("Linear", (4, 3), {}, (2, 4)),
    ("Linear", (4, 3), {"bias": False}, (5, 2, 4)),
    ("Conv2d", (3, 4, 3), {}, (2, 3, 8, 8)),
    ("Conv2d", (3, 4, (3, 2)), {"stride": 2, "padding": 1, "bias": False}, (2, 3, 9, 8)),
    ("Conv2d", (4, 4, 3), {"groups": 2, "dilation": 2, "padding": 2}, (1, 4, 8, 8)),
    ("Conv2d", (3, 2, 3), {"padding": "same"}, (1, 3, 7, 7)),
    ("MaxPool2d", (2,), {}, (2, 3, 8, 8)),
    ("MaxPool2d", (3,), {"stride": 2, "padding": 1}, (2, 3, 9, 9)),
    ("MaxPool2d", (3,), {"stride": 2, "ceil_mode": True}, (1, 2, 8, 8)),
    ("AvgPool2d", (2,), {}, (2, 3, 8, 8)),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1}, (2, 3, 9, 9)),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False}, (2, 3, 9, 9)),
    ("AdaptiveAvgPool2d", ((1, 1),), {}, (2, 3, 8, 8)),
    ("AdaptiveAvgPool2d", (3,), {}, (2, 3, 8, 7)),
    ("AdaptiveAvgPool2d", (2,), {}, (2, 3, 6, 6)),
    ("BatchNorm1d", (4,), {}, (5, 4)),
    ("BatchNorm1d", (4,), {}, (5, 4, 3)),
    ("BatchNorm2d", (3,), {}, (4, 3, 5, 5)),
    ("BatchNorm2d", (3,), {"affine": False, "momentum": 0.3}, (4, 3, 5, 5)),
    ("LayerNorm", (4,), {}, (2, 3, 4)),
    ("LayerNorm", ((3, 4),), {"eps": 1e-3}, (2, 3, 4)),
    ("LayerNorm", (4,), {"elementwise_affine": False}, (2, 4)),
    ("ReLU", (), {}, (3, 4)),
    ("GELU", (), {}, (3, 4)),
    ("GELU", (), {"approximate": "tanh"}, (3, 4)),
    ("Tanh", (), {}, (3, 4)),
    ("Sigmoid", (), {}, (3, 4)),
    ("Softmax", (), {"dim": 1}, (3, 4)),
    ("Softmax", (-1,), {}, (2, 3, 4)),
    ("Flatten", (), {}, (2, 3, 4)),
    ("Flatten", (0,), {}, (2, 3, 4)),
    ("Identity", (), {}, (2, 3)),
    ("Dropout", (), {}, (3, 4)),
]


@pytest.mark.parametrize("name,args,kw,shape", LAYERS, ids=[f"{l[0]}-{i}" for i, l in enumerate(LAYERS)])
def test_layer_matches_torch(name, args, kw, shape):
    torch.manual_seed(0)
    hm, tm = getattr(hf.nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    _check_sd(hm, tm)
    _copy_from_torch(hm, tm)
    if name == "Dropout":
        hm.eval()
        tm.eval()
    x = arr(*shape)
    hx, tx = hf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    hy, ty = hm(hx), tm(tx)
    same(hy, ty, rtol=1e-4, atol=1e-5)
    g = arr(*ty.shape)
    hy.backward(hf.tensor(g))
    ty.backward(torch.tensor(g))
    same(hx.grad, tx.grad, rtol=1e-4, atol=1e-5)
    for (n, hp), (_, tp) in zip(hm.named_parameters(), tm.named_parameters()):
        same(hp.grad, tp.grad, rtol=1e-4, atol=1e-4)
    # buffers after a training step (running stats)
    for (n, hb), (_, tb) in zip(hm.named_buffers(), tm.named_buffers()):
        same(hb, tb, rtol=1e-5, atol=1e-6)
    if name.startswith("BatchNorm"):
        hm.eval()
        tm.eval()
        same(hm(hf.tensor(x)), tm(torch.tensor(x)), rtol=1e-4, atol=1e-5)


def test_layer_default_inits_shapes_and_ranges():
    lin = hf.nn.Linear(100, 50)
    bound = 1 / np.sqrt(100)
    w = lin.weight.detach().numpy()
    assert np.abs(w).max() <= bound + 1e-6 and np.abs(w).max() > bound * 0.8
    assert isinstance(lin.weight, hf.nn.Parameter) and lin.weight.requires_grad
    assert lin.in_features == 100 and lin.out_features == 50
    conv = hf.nn.Conv2d(4, 8, 3)
    assert conv.weight.shape == (8, 4, 3, 3) and conv.bias.shape == (8,)
    assert conv.kernel_size == (3, 3) and conv.stride == (1, 1) and conv.padding == (0, 0)
    emb = hf.nn.Embedding(10, 3)
    assert emb.weight.shape == (10, 3) and abs(float(emb.weight.detach().numpy().std()) - 1) < 0.6
    bn = hf.nn.BatchNorm2d(3)
    assert bn.eps == 1e-5 and bn.momentum == 0.1
    np.testing.assert_array_equal(bn.weight.detach().numpy(), np.ones(3))
    np.testing.assert_array_equal(bn.running_var.numpy(), np.ones(3))
    assert dname(bn.num_batches_tracked.dtype) == "int64"
    ln = hf.nn.LayerNorm(5)
    assert ln.normalized_shape == (5,)
    assert hf.nn.Dropout().p == 0.5


def test_dropout_train_eval():
    d = hf.nn.Dropout(p=0.5)
    x = hf.ones(10000)
    y = d(x).numpy()
    assert set(np.unique(y).tolist()) <= {0.0, 2.0}
    assert 0.4 < (y == 0).mean() < 0.6
    d.eval()
    np.testing.assert_array_equal(d(x).numpy(), x.numpy())
    np.testing.assert_array_equal(F.dropout(x, p=0.5, training=False).numpy(), x.numpy())
    np.testing.assert_array_equal(hf.nn.Dropout(0.0)(x).numpy(), x.numpy())


def test_embedding():
    torch.manual_seed(0)
    tm = torch.nn.Embedding(10, 4, padding_idx=0)
    hm = hf.nn.Embedding(10, 4, padding_idx=0)
    _check_sd(hm, tm)
    assert (hm.weight.detach().numpy()[0] == 0).all()
    _copy_from_torch(hm, tm)
    idx = np.array([[0, 3, 9], [3, 3, 1]])
    hy, ty = hm(hf.tensor(idx)), tm(torch.tensor(idx))
    same(hy, ty)
    g = arr(2, 3, 4)
    hy.backward(hf.tensor(g))
    ty.backward(torch.tensor(g))
    same(hm.weight.grad, tm.weight.grad, rtol=1e-5)
    same(F.embedding(hf.tensor(idx), hm.weight), TF.embedding(torch.tensor(idx), tm.weight))


def _rnn_pair(name, *args, **kw):
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(*args, **kw)
    hm = getattr(hf.nn, name)(*args, **kw)
    _check_sd(hm, tm)
    _copy_from_torch(hm, tm)
    return hm, tm


@pytest.mark.parametrize("kw", [{}, {"num_layers": 2}, {"batch_first": True}, {"bidirectional": True},
                                {"bias": False}, {"num_layers": 2, "bidirectional": True, "batch_first": True}])
def test_lstm(kw):
    hm, tm = _rnn_pair("LSTM", 3, 5, **kw)
    x = arr(4, 2, 3)
    hx, tx = hf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    hout = hm(hx)
    tout = tm(tx)
    assert isinstance(hout, tuple) and len(hout) == 2 and len(hout[1]) == 2
    ho, (hh, hc) = hout
    to, (th, tc) = tout
    same(ho, to, rtol=1e-4, atol=1e-5)
    same(hh, th, rtol=1e-4, atol=1e-5)
    same(hc, tc, rtol=1e-4, atol=1e-5)
    (ho.sum() + hh.sum() * 2 + hc.sum()).backward()
    (to.sum() + th.sum() * 2 + tc.sum()).backward()
    same(hx.grad, tx.grad, rtol=1e-4, atol=1e-5)
    for (n, hp), (_, tp) in zip(hm.named_parameters(), tm.named_parameters()):
        same(hp.grad, tp.grad, rtol=1e-4, atol=1e-4)
    # explicit initial state
    D = 2 if kw.get("bidirectional") else 1
    L = kw.get("num_layers", 1)
    h0, c0 = arr(D * L, 2 if not kw.get("batch_first") else 4, 5), arr(D * L, 2 if not kw.get("batch_first") else 4, 5)
    ho, (hh, hc) = hm(hf.tensor(x), (hf.tensor(h0), hf.tensor(c0)))
    to, (th, tc) = tm(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)))
    same(ho, to, rtol=1e-4, atol=1e-5)
    same(hc, tc, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw", [{}, {"num_layers": 2}, {"batch_first": True}, {"bidirectional": True}])
def test_gru(kw):
    hm, tm = _rnn_pair("GRU", 3, 5, **kw)
    x = arr(4, 2, 3)
    hx, tx = hf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ho, hh = hm(hx)
    to, th = tm(tx)
    same(ho, to, rtol=1e-4, atol=1e-5)
    same(hh, th, rtol=1e-4, atol=1e-5)
    (ho.sum() + hh.sum()).backward()
    (to.sum() + th.sum()).backward()
    same(hx.grad, tx.grad, rtol=1e-4, atol=1e-5)
    D = 2 if kw.get("bidirectional") else 1
    h0 = arr(D * kw.get("num_layers", 1), 2 if not kw.get("batch_first") else 4, 5)
    same(hm(hf.tensor(x), hf.tensor(h0))[0], tm(torch.tensor(x), torch.tensor(h0))[0], rtol=1e-4, atol=1e-5)


def test_rnn_unbatched_input():
    hm, tm = _rnn_pair("LSTM", 3, 5)
    x = arr(4, 3)
    ho, (hh, _) = hm(hf.tensor(x))
    to, (th, _) = tm(torch.tensor(x))
    same(ho, to, rtol=1e-4, atol=1e-5)
    same(hh, th, rtol=1e-4, atol=1e-5)


def test_cells():
    hm, tm = _rnn_pair("LSTMCell", 3, 5)
    x, h0, c0 = arr(2, 3), arr(2, 5), arr(2, 5)
    hh, hc = hm(hf.tensor(x), (hf.tensor(h0), hf.tensor(c0)))
    th, tc = tm(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)))
    same(hh, th, rtol=1e-4, atol=1e-5)
    same(hc, tc, rtol=1e-4, atol=1e-5)
    hh, hc = hm(hf.tensor(x))
    th, tc = tm(torch.tensor(x))
    same(hh, th, rtol=1e-4, atol=1e-5)
    hm, tm = _rnn_pair("GRUCell", 3, 5, bias=False)
    same(hm(hf.tensor(x), hf.tensor(h0)), tm(torch.tensor(x), torch.tensor(h0)), rtol=1e-4, atol=1e-5)
    same(hm(hf.tensor(x)), tm(torch.tensor(x)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw", [{}, {"batch_first": True}, {"bias": False}])
def test_multihead_attention(kw):
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(8, 2, **kw)
    hm = hf.nn.MultiheadAttention(8, 2, **kw)
    _check_sd(hm, tm)
    _copy_from_torch(hm, tm)
    q, k = arr(3, 2, 8), arr(5, 2, 8)
    if kw.get("batch_first"):
        q, k = q.transpose(1, 0, 2).copy(), k.transpose(1, 0, 2).copy()
    ho, hw = hm(hf.tensor(q), hf.tensor(k), hf.tensor(k))
    to, tw = tm(torch.tensor(q), torch.tensor(k), torch.tensor(k))
    same(ho, to, rtol=1e-4, atol=1e-5)
    same(hw, tw, rtol=1e-4, atol=1e-5)
    ho, hw = hm(hf.tensor(q), hf.tensor(k), hf.tensor(k), need_weights=False)
    assert hw is None
    ho, hw = hm(hf.tensor(q), hf.tensor(k), hf.tensor(k), average_attn_weights=False)
    to, tw = tm(torch.tensor(q), torch.tensor(k), torch.tensor(k), average_attn_weights=False)
    same(hw, tw, rtol=1e-4, atol=1e-5)
    mask = np.zeros((2, 5), dtype=bool)
    mask[:, -1] = True
    am = np.triu(np.ones((3, 5), dtype=bool), 1)
    ho, _ = hm(hf.tensor(q), hf.tensor(k), hf.tensor(k), key_padding_mask=hf.tensor(mask), attn_mask=hf.tensor(am))
    to, _ = tm(torch.tensor(q), torch.tensor(k), torch.tensor(k), key_padding_mask=torch.tensor(mask),
               attn_mask=torch.tensor(am))
    same(ho, to, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw", [{}, {"batch_first": True, "norm_first": True}, {"activation": "gelu"}])
def test_transformer_encoder_layer(kw):
    torch.manual_seed(0)
    tm = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, **kw)
    hm = hf.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, **kw)
    _check_sd(hm, tm)
    _copy_from_torch(hm, tm)
    hm.eval()
    tm.eval()
    x = arr(3, 2, 8)
    with torch.no_grad():
        ty = tm(torch.tensor(x))
    same(hm(hf.tensor(x)), ty, rtol=1e-4, atol=1e-5)
    hd = hf.nn.TransformerEncoderLayer(8, 2)
    td = torch.nn.TransformerEncoderLayer(8, 2)
    _check_sd(hd, td)
    assert hd.linear1.out_features == 2048 and hd.dropout.p == 0.1


# ---------------------------------------------------------------- functional

@pytest.mark.parametrize("name,kw", [("relu", {}), ("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}),
                                     ("tanh", {}), ("sigmoid", {}), ("softmax", {"dim": -1}),
                                     ("softmax", {"dim": 0}), ("log_softmax", {"dim": 1}),
                                     ("log_softmax", {"dim": -1, "dtype": None})])
def test_functional_activations(name, kw):
    h, t = pair(3, 5, requires_grad=True)
    tkw = dict(kw)
    hy, ty = getattr(F, name)(h, **kw), getattr(TF, name)(t, **tkw)
    same(hy, ty, rtol=1e-5, atol=1e-6)
    g = arr(3, 5)
    hy.backward(hf.tensor(g))
    ty.backward(torch.tensor(g))
    same(h.grad, t.grad, rtol=1e-4, atol=1e-6)


def test_softmax_positional_dim_and_float64():
    h, t = pair(2, 3)
    same(F.softmax(h, 1), TF.softmax(t, 1))
    same(F.softmax(h, dim=1, dtype=hf.float64), TF.softmax(t, dim=1, dtype=torch.float64))
    same(h.softmax(dim=0), t.softmax(dim=0)) if hasattr(h, "softmax") else None


def test_functional_linear_conv_pool():
    torch.manual_seed(0)
    (x, tx), (w, tw), (b, tb) = pair(2, 4), pair(3, 4), pair(3)
    same(F.linear(x, w, b), TF.linear(tx, tw, tb), rtol=1e-5)
    same(F.linear(x, w), TF.linear(tx, tw), rtol=1e-5)
    (x, tx), (w, tw), (b, tb) = pair(2, 3, 7, 7), pair(4, 3, 3, 3), pair(4)
    same(F.conv2d(x, w, b), TF.conv2d(tx, tw, tb), rtol=1e-4, atol=1e-5)
    same(F.conv2d(x, w, b, stride=2, padding=1), TF.conv2d(tx, tw, tb, stride=2, padding=1), rtol=1e-4, atol=1e-5)
    same(F.conv2d(x, w, None, 1, 2, 2), TF.conv2d(tx, tw, None, 1, 2, 2), rtol=1e-4, atol=1e-5)
    same(F.conv2d(x, w, padding="same"), TF.conv2d(tx, tw, padding="same"), rtol=1e-4, atol=1e-5)
    same(F.max_pool2d(x, 2), TF.max_pool2d(tx, 2))
    same(F.max_pool2d(x, kernel_size=3, stride=1, padding=1), TF.max_pool2d(tx, kernel_size=3, stride=1, padding=1))
    same(F.avg_pool2d(x, 2), TF.avg_pool2d(tx, 2), rtol=1e-5)
    same(F.avg_pool2d(x, 3, stride=2, padding=1), TF.avg_pool2d(tx, 3, stride=2, padding=1), rtol=1e-5)
    same(F.adaptive_avg_pool2d(x, 1), TF.adaptive_avg_pool2d(tx, 1), rtol=1e-5)
    # unbatched conv input (C, H, W)
    same(F.conv2d(x[0], w, b), TF.conv2d(tx[0], tw, tb), rtol=1e-4, atol=1e-5)


def test_functional_norms():
    (x, tx) = pair(4, 3, 5)
    rm, rv = arr(3), np.abs(arr(3)) + 0.5
    w, b = arr(3), arr(3)
    for training in (False, True):
        hrm, hrv, trm, trv = hf.tensor(rm), hf.tensor(rv), torch.tensor(rm), torch.tensor(rv)
        hy = F.batch_norm(x, hrm, hrv, hf.tensor(w), hf.tensor(b), training=training, momentum=0.2, eps=1e-3)
        ty = TF.batch_norm(tx, trm, trv, torch.tensor(w), torch.tensor(b), training=training, momentum=0.2, eps=1e-3)
        same(hy, ty, rtol=1e-4, atol=1e-5)
        same(hrm, trm, rtol=1e-5)
        same(hrv, trv, rtol=1e-5)
    same(F.batch_norm(x, None, None, training=True), TF.batch_norm(tx, None, None, training=True), rtol=1e-4, atol=1e-5)
    w, b = arr(3, 5), arr(3, 5)
    same(F.layer_norm(x, (3, 5), hf.tensor(w), hf.tensor(b)), TF.layer_norm(tx, (3, 5), torch.tensor(w), torch.tensor(b)),
         rtol=1e-4, atol=1e-5)
    same(F.layer_norm(x, [5]), TF.layer_norm(tx, [5]), rtol=1e-4, atol=1e-5)
    same(F.layer_norm(x, normalized_shape=(5,), eps=1e-2), TF.layer_norm(tx, normalized_shape=(5,), eps=1e-2),
         rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pad,mode,value", [((1, 2), "constant", None), ((1, 1, 2, 0), "constant", 3.0),
                                            ((1, 2), "reflect", None), ((2, 1, 1, 2), "replicate", None),
                                            ((1, 1), "circular", None), ((0, 0, 0, 0, 1, 1), "constant", 0.0)])
def test_pad(pad, mode, value):
    h, t = pair(2, 3, 4, 5) if (mode == "constant" or len(pad) == 4) else pair(3, 4, 5)
    kw = {} if value is None else {"value": value}
    same(F.pad(h, pad, mode=mode, **kw), TF.pad(t, pad, mode=mode, **kw))


def test_pad_positional_and_grad():
    h, t = pair(2, 3, requires_grad=True)
    hy, ty = F.pad(h, (1, 1), "constant", 2.0), TF.pad(t, (1, 1), "constant", 2.0)
    same(hy, ty)
    (hy * hy).sum().backward()
    (ty * ty).sum().backward()
    same(h.grad, t.grad)


def test_one_hot():
    i = np.array([0, 2, 1])
    same(F.one_hot(hf.tensor(i)), TF.one_hot(torch.tensor(i)))
    same(F.one_hot(hf.tensor(i), num_classes=5), TF.one_hot(torch.tensor(i), num_classes=5))
    same(F.one_hot(hf.tensor([[1], [0]]), 3), TF.one_hot(torch.tensor([[1], [0]]), 3))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses(reduction):
    logits, target = arr(4, 5), np.array([1, 0, 4, 2])
    (h, t) = (hf.tensor(logits, requires_grad=True), torch.tensor(logits, requires_grad=True))
    hl = F.cross_entropy(h, hf.tensor(target), reduction=reduction)
    tl = TF.cross_entropy(t, torch.tensor(target), reduction=reduction)
    same(hl, tl, rtol=1e-5)
    hl.sum().backward()
    tl.sum().backward()
    same(h.grad, t.grad, rtol=1e-5)
    w = np.abs(arr(5)) + 0.1
    tgt = np.array([1, -100, 4, 2])
    same(F.cross_entropy(h, hf.tensor(tgt), weight=hf.tensor(w), reduction=reduction),
         TF.cross_entropy(t, torch.tensor(tgt), weight=torch.tensor(w), reduction=reduction), rtol=1e-5)
    same(F.cross_entropy(h, hf.tensor(target), label_smoothing=0.1, reduction=reduction),
         TF.cross_entropy(t, torch.tensor(target), label_smoothing=0.1, reduction=reduction), rtol=1e-5)
    same(F.cross_entropy(h, hf.tensor(target), ignore_index=0, reduction=reduction),
         TF.cross_entropy(t, torch.tensor(target), ignore_index=0, reduction=reduction), rtol=1e-5)
    probs = np.abs(arr(4, 5))
    probs /= probs.sum(1, keepdims=True)
    same(F.cross_entropy(h, hf.tensor(probs), reduction=reduction),
         TF.cross_entropy(t, torch.tensor(probs), reduction=reduction), rtol=1e-5)
    # (N, C, d) input
    l3, t3 = arr(2, 5, 3), np.array([[0, 1, 4], [2, 2, 3]])
    same(F.cross_entropy(hf.tensor(l3), hf.tensor(t3), reduction=reduction),
         TF.cross_entropy(torch.tensor(l3), torch.tensor(t3), reduction=reduction), rtol=1e-5)
    lp = TF.log_softmax(torch.tensor(logits), 1)
    same(F.nll_loss(hf.tensor(lp.numpy()), hf.tensor(target), reduction=reduction),
         TF.nll_loss(lp, torch.tensor(target), reduction=reduction), rtol=1e-5)
    same(F.nll_loss(hf.tensor(lp.numpy()), hf.tensor(tgt), weight=hf.tensor(w), reduction=reduction),
         TF.nll_loss(lp, torch.tensor(tgt), weight=torch.tensor(w), reduction=reduction), rtol=1e-5)
    (a, ta), (b, tb) = pair(3, 4, requires_grad=True), pair(3, 4)
    for fn in ("mse_loss", "l1_loss"):
        hl, tl = getattr(F, fn)(a, b, reduction=reduction), getattr(TF, fn)(ta, tb, reduction=reduction)
        same(hl, tl, rtol=1e-5)
    p = 1 / (1 + np.exp(-arr(3, 4)))
    y = (arr(3, 4) > 0).astype(np.float32)
    hp, tp = hf.tensor(p, requires_grad=True), torch.tensor(p, requires_grad=True)
    hl = F.binary_cross_entropy(hp, hf.tensor(y), reduction=reduction)
    tl = TF.binary_cross_entropy(tp, torch.tensor(y), reduction=reduction)
    same(hl, tl, rtol=1e-5)
    hl.sum().backward()
    tl.sum().backward()
    same(hp.grad, tp.grad, rtol=1e-4)
    wt = np.abs(arr(4))
    same(F.binary_cross_entropy(hp, hf.tensor(y), weight=hf.tensor(wt), reduction=reduction),
         TF.binary_cross_entropy(tp, torch.tensor(y), weight=torch.tensor(wt), reduction=reduction), rtol=1e-5)
    z = arr(3, 4) * 5
    hz, tz = hf.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
    hl = F.binary_cross_entropy_with_logits(hz, hf.tensor(y), reduction=reduction)
    tl = TF.binary_cross_entropy_with_logits(tz, torch.tensor(y), reduction=reduction)
    same(hl, tl, rtol=1e-5)
    hl.sum().backward()
    tl.sum().backward()
    same(hz.grad, tz.grad, rtol=1e-4, atol=1e-6)
    pw = np.abs(arr(4)) + 0.5
    same(F.binary_cross_entropy_with_logits(hz, hf.tensor(y), pos_weight=hf.tensor(pw), reduction=reduction),
         TF.binary_cross_entropy_with_logits(tz, torch.tensor(y), pos_weight=torch.tensor(pw), reduction=reduction),
         rtol=1e-5)


def test_loss_modules_exist():
    for n in ("CrossEntropyLoss", "MSELoss", "L1Loss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss"):
        if hasattr(hf.nn, n):
            h, t = getattr(hf.nn, n)(), getattr(torch.nn, n)()
            assert h.reduction == t.reduction == "mean"


def test_loss_shape_mismatch_raises_value_error():
    with pytest.raises(ValueError):
        F.mse_loss(hf.zeros(3, 4), hf.zeros(3, 5))
    with pytest.raises(ValueError):
        F.cross_entropy(hf.zeros(3, 4), hf.tensor([0, 1]))


def test_errors_value_and_type():
    with pytest.raises(ValueError):
        hf.zeros(2, 3) + hf.zeros(4)
    with pytest.raises(ValueError):
        hf.zeros(2, 3) @ hf.zeros(2, 3)
    with pytest.raises(ValueError):
        hf.cat([hf.zeros(2, 3), hf.zeros(2, 4)])
    with pytest.raises(ValueError):
        hf.zeros(2, 3).reshape(5)
    with pytest.raises(ValueError):
        hf.nn.Linear(3, 2)(hf.zeros(4, 5))
    with pytest.raises(TypeError):
        hf.nn.Linear(3, 2)(hf.zeros(4, 3, dtype=hf.float64))
    with pytest.raises(TypeError):
        hf.zeros(2) @ hf.zeros(2, dtype=hf.int64)
    with pytest.raises(TypeError):
        F.embedding(hf.zeros(3), hf.zeros(4, 2))
    with pytest.raises(TypeError):
        hf.zeros(3)[hf.zeros(3)] if False else hf.gather(hf.zeros(2, 2), 0, hf.zeros(2, 2))
    try:
        hf.zeros(2, 3) + hf.zeros(4)
    except ValueError as e:
        assert "(2, 3)" in str(e) and "(4,)" in str(e)


# ---------------------------------------------------------------- init

def test_init_functions():
    w = hf.empty(200, 300)
    for fn, kw in [("xavier_uniform_", {}), ("xavier_normal_", {}), ("kaiming_uniform_", {}),
                   ("kaiming_normal_", {}), ("normal_", {}), ("uniform_", {}), ("xavier_uniform_", {"gain": 2.0}),
                   ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}),
                   ("kaiming_uniform_", {"a": 5 ** 0.5}), ("normal_", {"mean": 1.0, "std": 0.1}),
                   ("uniform_", {"a": -2.0, "b": -1.0})]:
        tw = torch.empty(200, 300)
        out = getattr(hf.nn.init, fn)(w, **kw)
        getattr(torch.nn.init, fn)(tw, **kw)
        assert out is w
        np.testing.assert_allclose(float(w.numpy().std()), float(tw.std()), rtol=0.05)
        np.testing.assert_allclose(float(w.numpy().mean()), float(tw.mean()), atol=0.02)
    hf.nn.init.zeros_(w)
    assert (w.numpy() == 0).all()
    hf.nn.init.ones_(w)
    assert (w.numpy() == 1).all()
    hf.nn.init.constant_(w, 0.3)
    np.testing.assert_allclose(w.numpy(), 0.3, rtol=1e-6)
    hf.nn.init.constant_(w, val=0.5)
    # on a Parameter: in place, stays a leaf, no grad history
    lin = hf.nn.Linear(3, 4)
    hf.nn.init.zeros_(lin.weight)
    assert lin.weight.is_leaf and lin.weight.requires_grad and (lin.weight.detach().numpy() == 0).all()
    hf.nn.init.xavier_uniform_(hf.empty(3, 4, 5, 5))


# ---------------------------------------------------------------- module API

class _Net(hf.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = hf.nn.Linear(3, 4)
        self.bn = hf.nn.BatchNorm1d(4)
        self.seq = hf.nn.Sequential(hf.nn.Linear(4, 4), hf.nn.ReLU(), hf.nn.Linear(4, 2))
        self.ml = hf.nn.ModuleList([hf.nn.Linear(2, 2), hf.nn.Tanh()])
        self.md = hf.nn.ModuleDict({"a": hf.nn.Linear(2, 2), "b": hf.nn.Identity()})
        self.scale = hf.nn.Parameter(hf.ones(2))
        self.register_buffer("counter", hf.zeros(1))

    def forward(self, x):
        x = self.seq(self.bn(self.fc(x)))
        for m in self.ml:
            x = m(x)
        return self.md["b"](self.md["a"](x)) * self.scale


class _TNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 4)
        self.bn = torch.nn.BatchNorm1d(4)
        self.seq = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
        self.ml = torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.Tanh()])
        self.md = torch.nn.ModuleDict({"a": torch.nn.Linear(2, 2), "b": torch.nn.Identity()})
        self.scale = torch.nn.Parameter(torch.ones(2))
        self.register_buffer("counter", torch.zeros(1))

    def forward(self, x):
        x = self.seq(self.bn(self.fc(x)))
        for m in self.ml:
            x = m(x)
        return self.md["b"](self.md["a"](x)) * self.scale


def test_module_api_matches_torch():
    hm, tm = _Net(), _TNet()
    _check_sd(hm, tm)
    assert [n for n, _ in hm.named_buffers()] == [n for n, _ in tm.named_buffers()]
    assert len(list(hm.buffers())) == len(list(tm.buffers()))
    assert len(list(hm.parameters())) == len(list(tm.parameters()))
    assert len(list(hm.children())) == len(list(tm.children()))
    assert len(list(hm.modules())) == len(list(tm.modules()))
    assert [type(m).__name__ for m in hm.modules()][1:] == [type(m).__name__ for m in tm.modules()][1:]
    assert [n for n, _ in hm.named_modules()] == [n for n, _ in tm.named_modules()]
    _copy_from_torch(hm, tm)
    x = arr(5, 3)
    same(hm(hf.tensor(x)), tm(torch.tensor(x)), rtol=1e-4, atol=1e-5)
    assert hm.training and hm.bn.training
    assert hm.eval() is hm and not hm.bn.training and not hm.training
    tm.eval()
    same(hm(hf.tensor(x)), tm(torch.tensor(x)), rtol=1e-4, atol=1e-5)
    assert hm.train() is hm and hm.bn.training
    hm.train(False)
    assert not hm.seq[0].training
    hm.train()
    hm(hf.tensor(x)).sum().backward()
    assert all(p.grad is not None for p in hm.parameters())
    hm.zero_grad()
    assert all(p.grad is None or (p.grad.numpy() == 0).all() for p in hm.parameters())
    assert hm.to("cpu") is hm
    assert len(hm.seq) == 3 and isinstance(hm.seq[0], hf.nn.Linear)
    assert len(hm.ml) == 2 and "a" in hm.md and len(hm.md) == 2
    assert list(hm.md.keys()) == ["a", "b"]


def test_load_state_dict_strict():
    m = hf.nn.Linear(2, 3)
    sd = m.state_dict()
    sd2 = dict(sd)
    sd2["extra"] = hf.zeros(1)
    with pytest.raises((RuntimeError, KeyError, ValueError)):
        m.load_state_dict(sd2)
    r = m.load_state_dict(sd2, strict=False)
    assert list(r.unexpected_keys) == ["extra"] and list(r.missing_keys) == []
    bad = {"weight": hf.zeros(3, 3), "bias": hf.zeros(3)}
    with pytest.raises((RuntimeError, ValueError)):
        m.load_state_dict(bad)
    sd = m.state_dict()
    assert isinstance(sd, dict)
    assert not sd["weight"].requires_grad
    # state_dict values are detached copies/views; loading writes values, params stay Parameters
    m.load_state_dict({"weight": hf.ones(3, 2), "bias": hf.zeros(3)})
    assert isinstance(m.weight, hf.nn.Parameter) and (m.weight.detach().numpy() == 1).all()


def test_sequential_ordered_dict_and_parameter():
    seq = hf.nn.Sequential(collections.OrderedDict([("l1", hf.nn.Linear(2, 2)), ("act", hf.nn.ReLU())]))
    tseq = torch.nn.Sequential(collections.OrderedDict([("l1", torch.nn.Linear(2, 2)), ("act", torch.nn.ReLU())]))
    _check_sd(seq, tseq)
    p = hf.nn.Parameter(hf.zeros(2))
    assert p.requires_grad and p.is_leaf and isinstance(p, hf.Tensor)
    assert not hf.nn.Parameter(hf.zeros(2), requires_grad=False).requires_grad
    sub = seq[0:1]
    assert isinstance(sub, hf.nn.Sequential) and len(sub) == 1


# ---------------------------------------------------------------- optim

def _opt_run(hcls, tcls, kw, steps=5, sched=None):
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    hm = hf.nn.Sequential(hf.nn.Linear(3, 4), hf.nn.Tanh(), hf.nn.Linear(4, 1))
    _copy_from_torch(hm, tm)
    ho, to = hcls(hm.parameters(), **kw), tcls(tm.parameters(), **kw)
    hs = ts = None
    if sched:
        hs, ts = getattr(hf.optim.lr_scheduler, sched[0])(ho, **sched[1]), getattr(torch.optim.lr_scheduler, sched[0])(to, **sched[1])
    x, y = arr(8, 3), arr(8, 1)
    for _ in range(steps):
        ho.zero_grad()
        to.zero_grad()
        hl = F.mse_loss(hm(hf.tensor(x)), hf.tensor(y))
        tl = TF.mse_loss(tm(torch.tensor(x)), torch.tensor(y))
        hl.backward()
        tl.backward()
        ho.step()
        to.step()
        if hs:
            hs.step()
            ts.step()
            assert abs(ho.param_groups[0]["lr"] - to.param_groups[0]["lr"]) < 1e-9
            np.testing.assert_allclose(hs.get_last_lr(), ts.get_last_lr(), rtol=1e-9)
    for (n, hp), (_, tp) in zip(hm.named_parameters(), tm.named_parameters()):
        same(hp, tp, rtol=1e-4, atol=1e-5)
    return ho, to, hm, tm


@pytest.mark.parametrize("name,kw", [
    ("SGD", {"lr": 0.1}), ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.05, "momentum": 0.5, "dampening": 0.1}),
    ("Adam", {"lr": 0.01}), ("Adam", {"lr": 0.01, "betas": (0.8, 0.9), "eps": 1e-6, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01, "amsgrad": True}),
    ("AdamW", {"lr": 0.01}), ("AdamW", {"lr": 0.01, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01}), ("RMSprop", {"lr": 0.01, "momentum": 0.9, "centered": True, "alpha": 0.9}),
    ("RMSprop", {"lr": 0.01, "weight_decay": 0.1}),
])
def test_optimizers_match_torch(name, kw):
    _opt_run(getattr(hf.optim, name), getattr(torch.optim, name), kw)


def test_optimizer_defaults():
    p = [hf.nn.Parameter(hf.zeros(2))]
    tp = [torch.nn.Parameter(torch.zeros(2))]
    for name in ("Adam", "AdamW", "RMSprop"):
        h, t = getattr(hf.optim, name)(p), getattr(torch.optim, name)(tp)
        for k in ("lr", "weight_decay", "eps", "betas", "alpha", "momentum"):
            if k in t.defaults:
                assert h.defaults[k] == t.defaults[k], (name, k)
    s = hf.optim.SGD(p, lr=0.1)
    assert s.defaults["momentum"] == 0 and s.defaults["nesterov"] is False and s.defaults["weight_decay"] == 0
    assert hf.optim.SGD(p, 0.3).param_groups[0]["lr"] == 0.3


@pytest.mark.parametrize("sched", [("StepLR", {"step_size": 2}), ("StepLR", {"step_size": 2, "gamma": 0.5}),
                                   ("CosineAnnealingLR", {"T_max": 4}),
                                   ("CosineAnnealingLR", {"T_max": 3, "eta_min": 0.01})])
def test_lr_schedulers(sched):
    _opt_run(hf.optim.SGD, torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}, steps=7, sched=sched)


def test_param_groups_and_state_dict():
    torch.manual_seed(0)
    tm = torch.nn.Linear(3, 2)
    hm = hf.nn.Linear(3, 2)
    _copy_from_torch(hm, tm)
    ho = hf.optim.SGD([{"params": [hm.weight]}, {"params": [hm.bias], "lr": 0.5}], lr=0.1, momentum=0.9)
    to = torch.optim.SGD([{"params": [tm.weight]}, {"params": [tm.bias], "lr": 0.5}], lr=0.1, momentum=0.9)
    x = arr(4, 3)
    for _ in range(2):
        ho.zero_grad()
        to.zero_grad()
        hm(hf.tensor(x)).sum().backward()
        tm(torch.tensor(x)).sum().backward()
        ho.step()
        to.step()
    same(hm.bias, tm.bias, rtol=1e-5)
    same(hm.weight, tm.weight, rtol=1e-5)
    # state_dict round trip continues identically
    ho2_model = hf.nn.Linear(3, 2)
    ho2_model.load_state_dict(hm.state_dict())
    ho2 = hf.optim.SGD([{"params": [ho2_model.weight]}, {"params": [ho2_model.bias], "lr": 0.5}], lr=0.1, momentum=0.9)
    sd = ho.state_dict()
    assert set(sd.keys()) == {"state", "param_groups"}
    ho2.load_state_dict(sd)
    for o, m in ((ho, hm), (ho2, ho2_model)):
        o.zero_grad()
        m(hf.tensor(x)).sum().backward()
        o.step()
    same(hm.weight, ho2_model.weight)
    same(hm.bias, ho2_model.bias)
    assert ho.param_groups[1]["lr"] == 0.5


def test_adam_state_dict_round_trip(tmp_path):
    ho, to, hm, tm = _opt_run(hf.optim.Adam, torch.optim.Adam, {"lr": 0.01}, steps=3)
    path = str(tmp_path / "opt.bin")
    hf.save({"model": hm.state_dict(), "opt": ho.state_dict()}, path)
    ck = hf.load(path)
    hm2 = hf.nn.Sequential(hf.nn.Linear(3, 4), hf.nn.Tanh(), hf.nn.Linear(4, 1))
    hm2.load_state_dict(ck["model"])
    ho2 = hf.optim.Adam(hm2.parameters(), lr=0.01)
    ho2.load_state_dict(ck["opt"])
    x, y = arr(8, 3), arr(8, 1)
    for o, m in ((ho, hm), (ho2, hm2), (to, tm)):
        o.zero_grad()
        lib = hf if o in (ho, ho2) else torch
        ff = F if lib is hf else TF
        ff.mse_loss(m(lib.tensor(x)), lib.tensor(y)).backward()
        o.step()
    for a, b, c in zip(hm.parameters(), hm2.parameters(), tm.parameters()):
        same(a, b)
        same(a, c, rtol=1e-4, atol=1e-5)


def test_clip_grad_norm():
    torch.manual_seed(0)
    tm = torch.nn.Linear(3, 2)
    hm = hf.nn.Linear(3, 2)
    _copy_from_torch(hm, tm)
    x = arr(4, 3) * 10
    hm(hf.tensor(x)).sum().backward()
    tm(torch.tensor(x)).sum().backward()
    hn = hf.nn.utils.clip_grad_norm_(hm.parameters(), max_norm=1.0)
    tn = torch.nn.utils.clip_grad_norm_(tm.parameters(), max_norm=1.0)
    np.testing.assert_allclose(float(hn), float(tn), rtol=1e-5)
    assert isinstance(hn, hf.Tensor)
    same(hm.weight.grad, tm.weight.grad, rtol=1e-5)
    hn = hf.nn.utils.clip_grad_norm_(hm.parameters(), 0.5, norm_type=float("inf"))
    tn = torch.nn.utils.clip_grad_norm_(tm.parameters(), 0.5, norm_type=float("inf"))
    np.testing.assert_allclose(float(hn), float(tn), rtol=1e-5)
    same(hm.bias.grad, tm.bias.grad, rtol=1e-5)


# ---------------------------------------------------------------- data

def test_dataloader_batching():
    X, Y = np.arange(20, dtype=np.float32).reshape(10, 2), np.arange(10)
    ds = hf.data.TensorDataset(hf.tensor(X), hf.tensor(Y))
    assert len(ds) == 10
    x0, y0 = ds[3]
    assert x0.tolist() == [6.0, 7.0] and y0.item() == 3
    batches = list(hf.data.DataLoader(ds, batch_size=4))
    assert len(batches) == 3
    assert [b[0].shape for b in batches] == [(4, 2), (4, 2), (2, 2)]
    assert dname(batches[0][1].dtype) == "int64"
    assert len(hf.data.DataLoader(ds, batch_size=4)) == 3
    dl = hf.data.DataLoader(ds, batch_size=4, drop_last=True)
    assert len(list(dl)) == 2 and len(dl) == 2
    dl = hf.data.DataLoader(ds, batch_size=3, shuffle=True, drop_last=False)
    ys = np.concatenate([b[1].numpy() for b in dl])
    assert sorted(ys.tolist()) == list(range(10))
    dl = hf.data.DataLoader(ds)  # default batch_size=1
    assert len(dl) == 10 and next(iter(dl))[0].shape == (1, 2)
    dl = hf.data.DataLoader(ds, 5, True)  # positional (batch_size, shuffle)
    assert len(dl) == 2


def test_custom_dataset_collate():
    class DS(hf.data.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"x": np.full(3, i, dtype=np.float32), "y": i, "f": float(i)}, hf.tensor([i, i])

    b = next(iter(hf.data.DataLoader(DS(), batch_size=2)))
    d, t = b
    assert isinstance(d["x"], hf.Tensor) and d["x"].shape == (2, 3) and dname(d["x"].dtype) == "float32"
    assert d["y"].tolist() == [0, 1] and dname(d["y"].dtype) == "int64"
    assert dname(d["f"].dtype) == dname(torch.utils.data.default_collate([0.0, 1.0]).dtype)
    assert t.shape == (2, 2)


# ---------------------------------------------------------------- save / load

def test_save_load_round_trip(tmp_path):
    m = hf.nn.Sequential(hf.nn.Linear(3, 4), hf.nn.BatchNorm1d(4))
    path = tmp_path / "model.pt"
    hf.save(m.state_dict(), str(path))
    assert path.exists() and [p.name for p in tmp_path.iterdir()] == ["model.pt"]
    sd = hf.load(str(path))
    assert list(sd.keys()) == list(m.state_dict().keys())
    for k, v in m.state_dict().items():
        assert isinstance(sd[k], hf.Tensor)
        assert sd[k].dtype == v.dtype and sd[k].shape == v.shape
        np.testing.assert_array_equal(sd[k].numpy(), v.numpy())
    m2 = hf.nn.Sequential(hf.nn.Linear(3, 4), hf.nn.BatchNorm1d(4))
    m2.load_state_dict(sd)
    # nested structures and plain values; pathlib.Path accepted
    obj = {"a": [hf.tensor([1, 2]), (hf.tensor(1.5), 3)], "b": {"c": None, "d": "s", "e": True, "f": 2.5,
                                                               "g": hf.zeros(2, dtype=hf.float16)}}
    p2 = tmp_path / "nested.bin"
    hf.save(obj, p2)
    o = hf.load(p2)
    assert o["a"][0].tolist() == [1, 2] and dname(o["a"][0].dtype) == "int64"
    assert isinstance(o["a"][1], tuple) and o["a"][1][1] == 3 and o["a"][1][0].item() == 1.5
    assert o["b"]["c"] is None and o["b"]["d"] == "s" and o["b"]["e"] is True and o["b"]["f"] == 2.5
    assert dname(o["b"]["g"].dtype) == "float16"
    p3 = tmp_path / "noext"
    hf.save([hf.ones(1)], str(p3))
    assert p3.exists() and hf.load(str(p3))[0].tolist() == [1.0]


def test_save_is_not_pickle(tmp_path):
    p = tmp_path / "x.pt"
    hf.save({"w": hf.ones(2)}, str(p))
    raw = p.read_bytes()
    assert not raw.startswith(b"\x80")  # pickle protocol marker
    with pytest.raises((TypeError, ValueError)):
        hf.save({"w": object()}, str(tmp_path / "y.pt"))


# ---------------------------------------------------------------- static graphs

S = None


def _S():
    return hf.static


def test_static_program_build_and_run():
    S = _S()
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None, 3], "float32")
        w = hf.tensor(np.arange(3, dtype=np.float32))
        y = (x * w + 1.0).sum(dim=1)
        z = hf.matmul(x, x.transpose(0, 1)).relu()
        m = F.softmax(x, dim=-1)
    assert "x" in str(prog) or len(str(prog)) > 0
    xv = arr(4, 3)
    outs = S.Executor().run(prog, feed={"x": xv}, fetch_list=[y, z, m])
    assert len(outs) == 3
    np.testing.assert_allclose(np.asarray(outs[0]), (xv * np.arange(3) + 1).sum(1), rtol=1e-5)
    assert np.asarray(outs[0]).dtype == np.float32
    np.testing.assert_allclose(outs[1].numpy() if hasattr(outs[1], "numpy") else outs[1],
                               np.maximum(xv @ xv.T, 0), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(outs[2]), TF.softmax(torch.tensor(xv), -1).numpy(), rtol=1e-5)
    # feed a hf tensor and a different batch size
    (o,) = S.Executor().run(prog, feed={"x": hf.ones(2, 3)}, fetch_list=[y])
    np.testing.assert_allclose(np.asarray(o), [6.0, 6.0])
    o2 = S.Executor().run(prog, feed={"x": np.ones((1, 3), np.float32)}, fetch_list=[y], return_numpy=True)
    assert isinstance(o2[0], np.ndarray)


def test_static_data_dtypes_and_int_ops():
    S = _S()
    prog = S.Program()
    with S.program_guard(prog):
        i = S.data("i", [3], "int64")
        f = S.data("f", [3], hf.float64)
        out = (i * 2 + f).mean()
        c = i > 1
    r = S.Executor().run(prog, feed={"i": np.array([1, 2, 3]), "f": np.ones(3)}, fetch_list=[out, c])
    assert np.asarray(r[0]).dtype == np.float64
    np.testing.assert_allclose(float(np.asarray(r[0])), 5.0)
    assert np.asarray(r[1]).dtype == np.bool_ and np.asarray(r[1]).tolist() == [False, True, True]


def test_static_cond_and_while_loop():
    S = _S()
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [3])
        y = S.nn.cond(x.sum() > 0, lambda: x * 2.0, lambda: x - 1.0)
        i0 = hf.tensor(0)
        i, v = S.nn.while_loop(lambda i, v: i < 3, lambda i, v: [i + 1, v * 2.0], [i0, x])
    for xv in (np.ones(3, np.float32), -np.ones(3, np.float32)):
        yo, io, vo = S.Executor().run(prog, feed={"x": xv}, fetch_list=[y, i, v])
        np.testing.assert_allclose(np.asarray(yo), xv * 2 if xv.sum() > 0 else xv - 1)
        assert int(np.asarray(io)) == 3
        np.testing.assert_allclose(np.asarray(vo), xv * 8)
    # eager: same functions, plain values
    out = S.nn.cond(hf.tensor(True), lambda: hf.ones(2), lambda: hf.zeros(2))
    assert out.tolist() == [1.0, 1.0]
    res = S.nn.while_loop(lambda i: i < 5, lambda i: [i + 2], [hf.tensor(0)])
    assert int(res[0].item()) == 6


def test_static_gradients_match_torch():
    S = _S()
    w = arr(3)
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [2, 3])
        loss = ((x * hf.tensor(w)).tanh() ** 2).sum()
        (gx,) = S.gradients([loss], [x])
        loss2 = S.nn.cond(x.sum() > 0, lambda: (x * x).sum(), lambda: (x * 3.0).sum())
        (g2,) = S.gradients(loss2, x)
    xv = arr(2, 3)
    g, gg = S.Executor().run(prog, feed={"x": xv}, fetch_list=[gx, g2])
    tx = torch.tensor(xv, requires_grad=True)
    ((tx * torch.tensor(w)).tanh() ** 2).sum().backward()
    np.testing.assert_allclose(np.asarray(g), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gg), 2 * xv if xv.sum() > 0 else np.full_like(xv, 3.0), rtol=1e-5)


def test_static_gradients_through_while():
    S = _S()
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [3])
        _, v = S.nn.while_loop(lambda i, v: i < 3, lambda i, v: [i + 1, v * x], [hf.tensor(0), hf.ones(3)])
        (g,) = S.gradients([v.sum()], [x])
    xv = np.array([1.0, 2.0, -1.5], np.float32)
    (go,) = S.Executor().run(prog, feed={"x": xv}, fetch_list=[g])
    np.testing.assert_allclose(np.asarray(go), 3 * xv ** 2, rtol=1e-5)


def test_static_layer_inside_program_and_manual_seed():
    S = _S()
    hf.manual_seed(0)
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None, 4])
        lin = hf.nn.Linear(4, 2)
        y = lin(x)
    xv = arr(3, 4)
    (o,) = S.Executor().run(prog, feed={"x": xv}, fetch_list=[y])
    ref = xv @ lin.weight.detach().numpy().T + lin.bias.detach().numpy()
    np.testing.assert_allclose(np.asarray(o), ref, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- keyword forms found missing in the audit

def test_permute_dims_keyword_and_min_max_other():
    h, t = pair(2, 3, 4)
    same(hf.permute(h, dims=(2, 0, 1)), torch.permute(t, dims=(2, 0, 1)))
    same(h.permute(dims=(1, 0, 2)), t.permute(dims=(1, 0, 2)))
    h2, t2 = pair(2, 3, 4)
    same(hf.max(h, other=h2), torch.max(t, other=t2))
    same(hf.min(h, other=h2), torch.min(t, other=t2))
    same(h.max(other=h2), t.max(other=t2))


def test_std_legacy_positional_unbiased():
    h, t = pair(4, 5)
    same(hf.std(h, 0, False), torch.std(t, 0, False))


def test_zeros_size_keyword():
    assert hf.zeros(size=(2, 3)).shape == (2, 3)
    assert hf.ones(size=[4]).shape == (4,)
    assert hf.randn(size=(2, 1)).shape == (2, 1)
    with pytest.raises(TypeError):
        hf.zeros(2, size=(2,))


def test_common_extras_match_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    h, t = hf.tensor(x), torch.tensor(x)
    np.testing.assert_allclose(h.softmax(1).numpy(), t.softmax(1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(hf.log_softmax(h, 0).numpy(), torch.log_softmax(t, 0).numpy(),
                               rtol=1e-5)
    assert hf.is_tensor(h) and not hf.is_tensor(x)
    assert hf.numel(h) == torch.numel(t) == 12
    assert hf.allclose(h, h + 1e-9) and not hf.allclose(h, h + 1.0)
    assert hf.equal(h, h.clone()) and not hf.equal(h, h[:2])
    assert h.new_zeros(2, 3).shape == (2, 3) and h.new_ones(2).dtype == hf.float32
    assert h.new_full((2,), 7).tolist() == [7.0, 7.0]
    assert h.type_as(hf.ones(1, dtype="float64")).dtype == hf.float64
