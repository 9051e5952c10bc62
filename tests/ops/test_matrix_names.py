"""PyTorch names for matrices (``hybridfw.ops.composite_matrix``): diagonal, trace, diag and
norm (torch.norm's vector norms and Frobenius default), as hf. functions and methods.

Every case checks an independent numpy computation; where torch is importable it is a second
oracle (values, dtypes and shapes).
"""
import numpy as np
import pytest

import hybridfw as hf

INF = float("inf")
A = np.arange(24.0).reshape(2, 3, 4) - 7.0
M = np.array([[1.0, -2.0, 3.0], [4.0, 0.0, -6.0]])
V = np.array([3, -1, 2])

# (call on a namespace ``lib`` with a (2, 3, 4), m (2, 3) float32, v int64; numpy expectation)
CALLS = [
    ("lib.diagonal(m)", np.diagonal(M)),
    ("m.diagonal(1)", np.diagonal(M, 1)),
    ("m.diagonal(-1)", np.diagonal(M, -1)),
    ("m.diagonal(3)", np.diagonal(M, 3)),
    ("lib.diagonal(a, 0, 1, 2)", np.diagonal(A, 0, 1, 2)),
    ("a.diagonal(offset=1, dim1=2, dim2=0)", np.diagonal(A, 1, 2, 0)),
    ("lib.diagonal(a, -1, -1, -2)", np.diagonal(A, -1, -1, -2)),
    ("lib.trace(m)", np.trace(M)),
    ("lib.trace(v.reshape(3, 1) * v)", np.trace(np.outer(V, V))),
    ("lib.diag(v)", np.diag(V)),
    ("v.diag(2)", np.diag(V, 2)),
    ("lib.diag(v, -1)", np.diag(V, -1)),
    ("lib.diag(m, 1)", np.diag(M, 1)),
    ("m.diag(-1)", np.diag(M, -1)),
    ("lib.norm(a)", np.linalg.norm(A.ravel())),
    ("lib.norm(m, p='fro', dim=(0, 1))", np.linalg.norm(M)),
    ("a.norm(2, dim=1)", np.linalg.norm(A, 2, axis=1)),
    ("lib.norm(a, 1, dim=(0, 2), keepdim=True)", np.abs(A).sum((0, 2), keepdims=True)),
    ("lib.norm(m, float('inf'))", np.abs(M).max()),
    ("m.norm(float('-inf'), dim=1)", np.abs(M).min(1)),
    ("lib.norm(m, 0, dim=0)", np.count_nonzero(M, 0).astype(np.float32)),
    ("a.norm(3, 2)", (np.abs(A) ** 3).sum(2) ** (1 / 3)),
    ("lib.norm(m, 0.5)", np.sqrt(np.abs(M)).sum() ** 2),
    ("lib.norm(m, dtype=lib.float64)", np.linalg.norm(M)),
]


def _run(lib, call):
    return eval(call, {"lib": lib, "a": lib.tensor(A, dtype=lib.float32),
                       "m": lib.tensor(M, dtype=lib.float32), "v": lib.tensor(V)})


@pytest.mark.parametrize("call, expected", CALLS)
def test_values(call, expected):
    got = _run(hf, call)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)
    assert got.shape == np.shape(expected)
    kind = np.asarray(expected).dtype.kind
    assert got.dtype is ({"i": hf.int64}.get(kind) or
                         (hf.float64 if "float64" in call else hf.float32))


@pytest.mark.parametrize("call, expected", CALLS)
def test_matches_torch(call, expected):
    torch = pytest.importorskip("torch")
    got, ours = _run(torch, call), _run(hf, call)
    np.testing.assert_allclose(got.numpy(), ours.numpy(), rtol=1e-6)
    assert got.shape == ours.shape
    assert str(got.dtype).split(".")[-1] == str(ours.dtype).split(".")[-1]


GRADS = [
    lambda t: hf.diagonal(t, 1, 0, 2) * 3,
    lambda t: t.diagonal(-1, 2, 1),
    lambda t: hf.trace(t[0]),
    lambda t: hf.diag(t[0, 0], -2),
    lambda t: t[1].diag(1),
    lambda t: hf.norm(t),
    lambda t: t.norm(2, dim=(0, 2)),
    lambda t: hf.norm(t, 1, 1),
    lambda t: hf.norm(t, INF, dim=2),
    lambda t: hf.norm(t, -INF),
    lambda t: hf.norm(t, 3.5, dim=0, keepdim=True),
]


@pytest.mark.parametrize("k", range(len(GRADS)))
def test_gradients(k):
    t = hf.tensor(np.random.default_rng(k).normal(size=(2, 3, 4)), requires_grad=True)
    assert hf.autograd.gradcheck(GRADS[k], [t])


def test_gradients_match_torch():
    torch = pytest.importorskip("torch")
    data = np.random.default_rng(5).normal(size=(3, 4))
    for fn in (lambda lib, t: (lib.diag(t, 1) * lib.arange(3.0)).sum(),
               lambda lib, t: lib.trace(t[:, :3] * t[:, 1:]),
               lambda lib, t: lib.norm(t, 3, dim=1).sum(),
               lambda lib, t: lib.diag(lib.diagonal(t, -1), 1).sum()):
        x, y = hf.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
        fn(hf, x).backward()
        fn(torch, y).backward()
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-12)


def test_to_static():
    @hf.jit.to_static
    def f(a):
        return hf.diag(hf.diagonal(a, 1)) + hf.trace(a[:, :2]) + a[:, :2].norm(dim=1)

    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    expected = np.diag(np.diagonal(a, 1)) + np.trace(a[:, :2]) + np.linalg.norm(a[:, :2], axis=1)
    np.testing.assert_allclose(f(hf.tensor(a)).numpy(), expected, rtol=1e-6)


def test_errors():
    with pytest.raises(ValueError, match="diagonal.*shape \\(3,\\)"):
        hf.diagonal(hf.zeros(3))
    with pytest.raises(ValueError, match="diagonal: dim1"):
        hf.zeros(2, 2).diagonal(0, 1, -1)
    with pytest.raises(ValueError, match="trace.*\\(2, 2, 2\\)"):
        hf.trace(hf.zeros(2, 2, 2))
    with pytest.raises(ValueError, match="diag.*\\(2, 2, 2\\)"):
        hf.diag(hf.zeros(2, 2, 2))
    with pytest.raises(TypeError, match="norm.*int64"):
        hf.norm(hf.tensor([1, 2]))
    with pytest.raises(ValueError, match="norm.*nuc"):
        hf.norm(hf.zeros(2, 2), "nuc")


@pytest.mark.parametrize("p", [2, "fro", 3, 1.5])
def test_norm_gradient_at_zero_is_zero(p):
    # PyTorch's subgradient at 0 (a root's inf times the zero input was NaN); elsewhere x/|x|
    x = hf.zeros(3, requires_grad=True)
    hf.norm(x, p).backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]
    rows = hf.tensor([[0.0, 0.0], [3.0, 4.0]], requires_grad=True)
    hf.norm(rows, 2, dim=1).sum().backward()
    np.testing.assert_allclose(rows.grad.numpy(), [[0.0, 0.0], [0.6, 0.8]], rtol=1e-6)
