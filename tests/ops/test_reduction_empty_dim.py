"""``dim=()`` (or ``[]``) reduces over every dim, as in PyTorch (``keepdim=True`` gives all-1
dims); where PyTorch refuses it (``prod``, ``logsumexp`` without keepdim) it is refused with the
same kind of error.

Every case checks hand-computed values; where torch is importable it is a second oracle.
"""
import numpy as np
import pytest

import hybridfw as hf

_X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 7.0]])

# (method call on x, expected value, expected shape)
CASES = [
    ("x.sum(dim=())", _X.sum(), ()),
    ("x.sum(dim=[], keepdim=True)", _X.sum(keepdims=True), (1, 1)),
    ("x.mean(dim=())", _X.mean(), ()),
    ("x.mean((), True)", _X.mean(keepdims=True), (1, 1)),
    ("x.amax(dim=())", 7.0, ()),
    ("x.amin(dim=(), keepdim=True)", [[1.0]], (1, 1)),
    ("x.var(dim=())", _X.var(ddof=1), ()),
    ("x.std(dim=(), keepdim=True)", _X.std(ddof=1, keepdims=True), (1, 1)),
    ("x.var(dim=(), correction=0)", _X.var(), ()),
    ("lib.sum(x, dim=())", _X.sum(), ()),
    ("lib.amax(x, ())", 7.0, ()),
    ("lib.logsumexp(x, dim=(), keepdim=True)", [[np.log(np.exp(_X).sum())]], (1, 1)),
    ("x.int().sum(dim=())", 22, ()),
    ("lib.tensor(3.0).sum(dim=())", 3.0, ()),
    ("lib.tensor(3.0).logsumexp(dim=())", 3.0, ()),
]


@pytest.mark.parametrize("call, expected, shape", CASES)
def test_empty_dim_reduces_over_all_dims(call, expected, shape):
    out = eval(call, {"x": hf.tensor(_X, dtype=hf.float32), "lib": hf})
    assert out.shape == shape
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("call, expected, shape", CASES)
def test_matches_torch(call, expected, shape):
    torch = pytest.importorskip("torch")
    want = eval(call, {"x": torch.tensor(_X, dtype=torch.float32), "lib": torch})
    assert tuple(want.shape) == shape
    np.testing.assert_allclose(want.numpy(), expected, rtol=1e-6)


def test_refused_where_pytorch_refuses():
    x = hf.tensor(_X)
    with pytest.raises(TypeError, match="prod"):
        x.prod(dim=())
    with pytest.raises(RuntimeError, match="logsumexp"):
        x.logsumexp(dim=())
    with pytest.raises(ValueError, match="size 0"):
        hf.ones(0, 3).amax(dim=())
    torch = pytest.importorskip("torch")
    t = torch.tensor(_X)
    with pytest.raises(TypeError):
        t.prod(dim=())
    with pytest.raises(RuntimeError):
        t.logsumexp(dim=())


def test_gradient_and_static_program():
    x = hf.tensor(_X, requires_grad=True)
    x.mean(dim=()).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3), 1 / 6))

    @hf.jit.to_static
    def f(x):
        return x.sum(dim=()) + x.amax(dim=(), keepdim=True)

    out = f(hf.tensor(_X))
    assert out.shape == (1, 1)
    np.testing.assert_allclose(out.numpy(), [[_X.sum() + 7.0]])
