"""addmv addr addbmm tensordot take_along_dim tensor_split cross nanmean
(``hybridfw.ops.composite_more``)
and the in-place forms ported optimizers and scripts call
(addcmul_ addcdiv_ lerp_ square_ nan_to_num_ cumsum_ addmv_ addr_ addbmm_) against PyTorch:
values, dtypes, gradients (eager and ``hf.jit.to_static``) and errors."""
import math

import numpy as np
import pytest

import hybridfw as hf

from .conftest import check_static_equals_eager

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(3)
ARRAYS = dict(m=RNG.standard_normal((3, 4)), v=RNG.standard_normal(4), w=RNG.standard_normal(3),
              b1=RNG.standard_normal((2, 3, 5)), b2=RNG.standard_normal((2, 5, 4)),
              t=RNG.standard_normal((3, 4, 5)), u=RNG.standard_normal((4, 5, 2)))
IDX = np.array([[0, 3], [2, 2], [1, 0]])

CALLS = [
    ("lib.addmv(w, m, v)", True),
    ("w.addmv(m, v, beta=0.5, alpha=2.0)", True),
    ("lib.addr(m, w, v, alpha=-1.5)", True),
    ("m.addr(w, v, beta=0)", True),
    ("lib.addbmm(m, b1, b2)", True),
    ("m[0].addbmm(b1, b2, beta=2.0, alpha=0.5)", True),
    ("lib.tensordot(t, u)", True),
    ("lib.tensordot(t, u.permute(1, 0, 2), dims=1)", True),
    ("lib.tensordot(t, m, dims=([0, 1], [0, 1]))", True),
    ("lib.tensordot(v, w, dims=0)", True),
    ("lib.take_along_dim(m, idx, 1)", True),
    ("m.take_along_dim(idx.reshape(1, 6)[:, :4] % 3, dim=0)", True),
    ("lib.take_along_dim(t, idx[:, None, :], 2)", True),
    ("lib.take_along_dim(m, idx)", True),
    ("lib.tensor_split(t, 3, dim=2)", True),
    ("t.tensor_split([1, 3, 9], dim=1)", True),
    ("lib.tensor_split(m, (3, 1), 1)", True),
    ("lib.tensor_split(m, lib.tensor([-2]), dim=-1)", True),
    ("lib.cross(t[:, :3], u.permute(2, 0, 1)[:1, :3].expand(3, 3, 5), dim=1)", True),
    ("t[:, :3, 0].cross(m[:, :3], dim=-1)", True),
    ("lib.nanmean(lib.where(m > 0.5, m * math.nan, m))", True),
    ("lib.where(t > 0.5, t * math.nan, t).nanmean(dim=(0, 2), keepdim=True)", True),
    ("lib.where(m > -9, m * math.nan, m).nanmean(1)", False),
]


def _flat(result):
    return list(result) if isinstance(result, tuple) else [result]


def _env(lib, grad=False):
    env = {k: lib.tensor(a, requires_grad=grad) for k, a in ARRAYS.items()}
    return {"lib": lib, "idx": lib.tensor(IDX), "math": math, **env}


@pytest.mark.parametrize("call, differentiable", CALLS)
def test_matches_torch(call, differentiable):
    tenv, henv = _env(torch, True), _env(hf, True)
    want, got = _flat(eval(call, tenv)), _flat(eval(call, henv))
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert g.shape == tuple(w.shape)
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12,
                                   atol=1e-14)
    if not differentiable:
        return
    weights = [RNG.standard_normal(tuple(w.shape)) for w in want]
    sum(((w * torch.tensor(k)).sum() for w, k in zip(want, weights))).backward()
    sum(((g * hf.tensor(k)).sum() for g, k in zip(got, weights))).backward()
    for name in ARRAYS:
        t, h = tenv[name].grad, henv[name].grad
        if h is None:  # (beta=0: PyTorch gives input a zero gradient, we none)
            assert t is None or not t.any(), name
        else:
            np.testing.assert_allclose(h.numpy(), t.numpy(), rtol=1e-10, atol=1e-14)


INPLACE = [
    "y.addcmul_(m, m * 2, value=0.5)",
    "y.addcdiv_(m, m * m + 1, value=-2.0)",
    "y.lerp_(m * 3, 0.25)",
    "y.lerp_(m * 3, lib.sigmoid(m))",
    "y.square_()",
    "y.cumsum_(1)",
    "y[:, 0].addmv_(m, v, beta=0.5)",
    "y.addr_(w, v, alpha=2.0)",
    "y.addbmm_(b1, b2, beta=0.5)",
]


@pytest.mark.parametrize("call", INPLACE)
def test_inplace_values_and_gradients(call):
    def run(lib):
        env = _env(lib, True)
        env["y"] = env["m"] * 1.0  # a non-leaf: in-place allowed, gradient flows to m
        out = eval(call, env)
        target = env["y"]
        (target * lib.tensor(np.arange(12.0).reshape(3, 4))).sum().backward()
        return out, target, {k: env[k].grad for k in ARRAYS}

    (tout, ty, tgrads), (hout, hy, hgrads) = run(torch), run(hf)
    np.testing.assert_allclose(hy.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(hout.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    for k in ARRAYS:
        if tgrads[k] is None:
            assert hgrads[k] is None or not hgrads[k].numpy().any(), k
        else:
            np.testing.assert_allclose(hgrads[k].numpy(), tgrads[k].numpy(), rtol=1e-10,
                                       atol=1e-14)


def test_nan_to_num_inplace():
    x = hf.tensor([math.nan, math.inf, -1.0])
    assert x.nan_to_num_(nan=2.0, posinf=9.0) is x
    assert x.tolist() == [2.0, 9.0, -1.0]


def test_to_static_forward_and_backward():
    def f(m, v, w, b1, b2, t, u):
        pieces = hf.tensor_split(t, 2, dim=2)
        y = m * 1.0
        y.addcmul_(m, m, value=0.1)
        return (hf.addmv(w, m, v).sum() + hf.addr(m, w, v).sum()
                + hf.addbmm(m[:, :4], b1, b2).sum() + hf.tensordot(t, u).sum()
                + hf.take_along_dim(m, hf.tensor(IDX), 1).sum()
                + pieces[0].sum() * pieces[1].mean() + y.sum())

    names = ("m", "v", "w", "b1", "b2", "t", "u")
    check_static_equals_eager(f, names, lambda: _env(hf, True))


def test_errors():
    env = _env(hf)
    m, v, w, t = env["m"], env["v"], env["w"], env["t"]
    with pytest.raises(ValueError, match="matrix and a vector"):
        hf.addmv(w, m, m)
    with pytest.raises(ValueError, match="two vectors"):
        hf.addr(m, m, v)
    with pytest.raises(ValueError, match="3-d"):
        hf.addbmm(m, m, m)
    with pytest.raises(ValueError, match="differ in size"):
        hf.tensordot(t, t, dims=1)
    with pytest.raises(ValueError, match="as many dims"):
        hf.tensordot(t, t, dims=([0], [0, 1]))
    with pytest.raises(ValueError, match="same number of dims"):
        hf.take_along_dim(m, hf.tensor([0, 1]), 1)
    with pytest.raises(ValueError, match="positive"):
        hf.tensor_split(m, 0)
    with pytest.raises(ValueError, match="size 3"):
        hf.cross(m, m, dim=1)
    with pytest.raises(TypeError, match="dtype"):
        hf.cross(m[:, :3], m[:, :3].float(), dim=1)
    with pytest.raises(ValueError, match="number of dims"):
        hf.cross(m[:, :3], v[:3], dim=1)
    with pytest.raises(TypeError, match="floating-point"):
        hf.nanmean(hf.tensor([1, 2]))
    with pytest.warns(UserWarning, match="dim"):
        assert hf.cross(m[:, :3], m[:, :3]).shape == (3, 3)
