"""``mm bmm mv dot outer`` (methods and ``hf.`` functions) and ``hf.reciprocal``, with
PyTorch's operand checks (a shape problem is a ValueError, a dtype one a TypeError, as the API
contract settles; PyTorch raises RuntimeError for both).

Every case checks an independent numpy computation; where torch is importable it is a second
oracle.
"""
import numpy as np
import pytest

import hybridfw as hf

RNG = np.random.default_rng(0)
A = RNG.standard_normal((2, 3))
B = RNG.standard_normal((3, 4))
P = RNG.standard_normal((5, 2, 3))
Q = RNG.standard_normal((5, 3, 4))
V = RNG.standard_normal(3)
W = RNG.standard_normal(3)

CALLS = [
    ("lib.mm(a, b)", A @ B),
    ("a.mm(b)", A @ B),
    ("lib.bmm(p, q)", P @ Q),
    ("p.bmm(q)", P @ Q),
    ("lib.mv(a, v)", A @ V),
    ("a.mv(v)", A @ V),
    ("lib.dot(v, w)", V @ W),
    ("v.dot(w)", V @ W),
    ("lib.outer(v, w)", np.outer(V, W)),
    ("v.outer(w)", np.outer(V, W)),
    ("lib.outer(lib.tensor([1, 2]), lib.tensor([1.5]))", [[1.5], [3.0]]),
    ("lib.dot(lib.tensor([1, 2]), lib.tensor([3, 4]))", 11),
    ("lib.reciprocal(lib.tensor([2.0, 4.0]))", [0.5, 0.25]),
]

BAD = [
    ("lib.mm(a, a)", ValueError),
    ("lib.mm(a, v)", ValueError),
    ("lib.mm(a, b.float())", TypeError),
    ("lib.bmm(p, q[:4])", ValueError),
    ("lib.bmm(a, b)", ValueError),
    ("lib.mv(a, b)", ValueError),
    ("lib.mv(a, lib.ones(4, dtype=lib.float64))", ValueError),
    ("lib.dot(v, lib.ones(4, dtype=lib.float64))", ValueError),
    ("lib.dot(v, w.float())", TypeError),
    ("lib.outer(a, v)", ValueError),
]


def _run(lib, call):
    scope = {"lib": lib, "a": lib.tensor(A), "b": lib.tensor(B), "p": lib.tensor(P),
             "q": lib.tensor(Q), "v": lib.tensor(V), "w": lib.tensor(W)}
    return eval(call, scope)


@pytest.mark.parametrize("call, expected", CALLS)
def test_values(call, expected):
    np.testing.assert_allclose(_run(hf, call).numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("call, expected", CALLS)
def test_matches_torch(call, expected):
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(_run(torch, call).numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("call, error", BAD)
def test_operand_checks(call, error):
    with pytest.raises(error, match=call.split("(")[0].split(".")[1]):
        _run(hf, call)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        _run(torch, call)


def test_gradients():
    a, b = hf.tensor(A, requires_grad=True), hf.tensor(B, requires_grad=True)
    v, w = hf.tensor(V, requires_grad=True), hf.tensor(W, requires_grad=True)
    (hf.mm(a, b).sum() + hf.dot(v, w) + hf.outer(v, w).sum()).backward()
    np.testing.assert_allclose(a.grad.numpy(), np.ones((2, 4)) @ B.T)
    np.testing.assert_allclose(v.grad.numpy(), W + W.sum())
    np.testing.assert_allclose(w.grad.numpy(), V + V.sum())
