"""addmm baddbmm logit xlogy aminmax rot90 index_add argwhere tril_indices triu_indices
(``hybridfw.ops.composite_more``) and their Tensor methods against PyTorch: values, dtypes,
shapes, gradients (eager and through ``hf.jit.to_static``), in-place forms and errors."""
import math

import numpy as np
import pytest

import hybridfw as hf

from .conftest import check_static_equals_eager

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((4, 5))
C = RNG.standard_normal((3, 5))
P = np.array([[0.05, 0.1, 0.5, 0.9], [0.95, 0.0, 1.0, 0.3], [0.2, 0.7, 0.1, 0.6]])
BA = RNG.standard_normal((2, 3, 4))
BB = RNG.standard_normal((2, 4, 5))
IDX = np.array([2, 0, 2, 1])
I = np.array([[1, 0, 3], [0, 0, 2]])

# (call on ``lib`` with tensors a b c p ba bb (float64), idx i (int64)), differentiable?
CALLS = [
    ("lib.addmm(c, a, b)", True),
    ("lib.addmm(c[0], a, b, beta=0.5, alpha=-2.0)", True),
    ("c.addmm(a, b, beta=0)", True),
    ("lib.addmm(i[:, :2] * 3, i, i.T, alpha=2)", False),
    ("lib.addmm(i[:, :2] * 4, i, i.T, beta=0.5, alpha=1.7)", False),
    ("lib.baddbmm(c, ba, bb)", True),
    ("ba.bmm(bb).baddbmm(ba, bb, beta=2.0, alpha=0.5)", True),
    ("lib.logit(p)", False),  # (0 and 1 give inf: checked below without them)
    ("lib.logit(p, eps=0.1)", True),
    ("p.logit(1e-6)", True),
    ("lib.logit(i)", False),
    ("lib.xlogy(a, p)", True),
    ("lib.xlogy(p * 0, p)", True),
    ("a.xlogy(3.0)", True),
    ("lib.xlogy(2, p)", True),
    ("lib.xlogy(i, i)", False),
    ("lib.xlogy(lib.tensor([0.0, 1.0, 0.0]), lib.tensor([math.nan, math.nan, 0.0]))", False),
    ("lib.aminmax(a)", True),
    ("lib.aminmax(a, dim=1)", True),
    ("i.aminmax(dim=0, keepdim=True)", False),
    ("lib.rot90(a)", True),
    ("lib.rot90(ba, 2, (2, 0))", True),
    ("ba.rot90(-1, [2, 0])", True),
    ("lib.rot90(a, 7, (1, 0))", True),
    ("lib.rot90(a, 0)", True),
    ("lib.index_add(a, 1, idx, c[:, :4])", True),
    ("a.index_add(0, idx[:2], c[:2, :4], alpha=3.0)", True),
    ("i.index_add(1, idx[:3], i * 2)", False),
    ("lib.argwhere(i)", False),
    ("(a > 0).argwhere()", False),
    ("lib.tril_indices(3, 4)", False),
    ("lib.tril_indices(4, 3, -1)", False),
    ("lib.triu_indices(3, 4, 1)", False),
    ("lib.triu_indices(3, 3, -5, dtype=lib.int32)", False),
    ("lib.tril_indices(0, 3)", False),
]


def _flat(result):
    return list(result) if isinstance(result, tuple) else [result]


def _env(lib, grad=False):
    floats = {k: lib.tensor(v, requires_grad=grad) for k, v in
              dict(a=A, b=B, c=C, p=P, ba=BA, bb=BB).items()}
    return {"lib": lib, "math": math, "idx": lib.tensor(IDX), "i": lib.tensor(I), **floats}


@pytest.mark.parametrize("call, differentiable", CALLS)
def test_matches_torch(call, differentiable):
    tenv, henv = _env(torch, differentiable), _env(hf, differentiable)
    want, got = _flat(eval(call, tenv)), _flat(eval(call, henv))
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert g.shape == tuple(w.shape)
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12)
    if not differentiable:
        return
    weights = [RNG.standard_normal(tuple(w.shape)) for w in want]
    sum(((w * torch.tensor(k)).sum() for w, k in zip(want, weights))).backward()
    sum(((g * hf.tensor(k)).sum() for g, k in zip(got, weights))).backward()
    for name in ("a", "b", "c", "p", "ba", "bb"):
        t, h = tenv[name].grad, henv[name].grad
        if h is None:  # (addmm with beta=0: PyTorch gives input a zero gradient, we none)
            assert t is None or not t.any(), name
        else:
            np.testing.assert_allclose(h.numpy(), t.numpy(), rtol=1e-10, atol=1e-14)


def test_named_tuple():
    result = hf.aminmax(hf.tensor(A), dim=0)
    assert result.min is result[0] and result.max is result[1]


@pytest.mark.parametrize("call", ["c.addmm_(a, b, beta=0.5)", "ba.bmm(bb).baddbmm_(ba, bb)",
                                  "p.logit_(0.1)", "a.xlogy_(p)",
                                  "a.index_add_(1, idx, c[:, :4], alpha=2.0)"])
def test_inplace(call):
    tenv, henv = _env(torch), _env(hf)
    target = call.split(".")[0]
    want, got = eval(call, tenv), eval(call, henv)
    np.testing.assert_allclose(henv[target].numpy(), tenv[target].numpy(), rtol=1e-12)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_to_static_forward_and_backward():
    def f(a, b, c, p, ba, bb):
        low = hf.aminmax(a, dim=1).min
        return (hf.addmm(c, a, b, beta=0.5).sum() + hf.baddbmm(c, ba, bb, alpha=2.0).sum()
                + hf.logit(p, eps=0.1).sum() + hf.xlogy(p, p + 1).sum() + low.sum()
                + hf.rot90(a, 1).sum(0).mul(hf.arange(3.0)).sum()
                + hf.index_add(a, 1, hf.tensor(IDX), c[:, :4]).pow(2).sum())

    names = ("a", "b", "c", "p", "ba", "bb")
    check_static_equals_eager(f, names, lambda: _env(hf, True))


def test_errors():
    a, b, c = hf.tensor(A), hf.tensor(B), hf.tensor(C)
    with pytest.raises(ValueError, match="matrices"):
        hf.addmm(c, a[0], b)
    with pytest.raises(ValueError, match="broadcast"):
        hf.addmm(hf.ones(2, 3, 5, dtype=hf.float64), a, b)
    with pytest.raises(TypeError, match="dtype"):
        hf.addmm(c, a.float(), b)
    with pytest.raises(ValueError, match="3-d"):
        hf.baddbmm(c, a, b)
    with pytest.raises(ValueError, match="2 rotation dims"):
        hf.rot90(a, 1, (0,))
    with pytest.raises(ValueError, match="differ"):
        hf.rot90(a, 1, (1, -1))
    with pytest.raises(ValueError, match="at least 2 dims"):
        hf.rot90(a[0])
    with pytest.raises(ValueError, match="source"):
        hf.index_add(a, 0, hf.tensor([0]), c)
    with pytest.raises(TypeError, match="same dtype"):
        hf.index_add(a, 1, hf.tensor(IDX), c[:, :4].float())
    with pytest.raises(TypeError, match="index"):
        hf.index_add(a, 1, hf.tensor(IDX).double(), c[:, :4])
    with pytest.raises(ValueError, match="non-negative"):
        hf.tril_indices(-1, 3)


def test_to_static_with_a_run_time_batch():
    def f(a):
        return hf.addmm(a[:, :2], a, a[:3, :2]).sum(1) + hf.rot90(a, 1, (0, 1))[1] + \
            hf.xlogy(a, a * a).sum(1)

    g = hf.jit.to_static(f, input_spec=[hf.jit.InputSpec([None, 3], "float64")])
    for n in (3, 4):
        a = hf.tensor(RNG.standard_normal((n, 3)))
        np.testing.assert_allclose(g(a).numpy(), f(a).numpy(), rtol=1e-12)


def test_beta_zero_ignores_input_but_differentiates_it_as_torch():
    """With beta=0 the input is ignored, NaN included, and its gradient is zeros (it was None:
    the input was left out of the graph)."""
    for fn in (lambda c, a: hf.addmm(c, a, a, beta=0),
               hf.jit.to_static(lambda c, a: hf.addmm(c, a, a, beta=0))):
        c = hf.tensor([[math.nan, 1.0], [1.0, 1.0]], requires_grad=True)
        y = fn(c, hf.ones(2, 2))
        np.testing.assert_array_equal(y.detach().numpy(), np.full((2, 2), 2.0))
        y.sum().backward()
        np.testing.assert_array_equal(c.grad.numpy(), np.zeros((2, 2)))
