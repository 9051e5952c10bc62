"""Sorting with PyTorch's names (``hybridfw.ops.sorting``): sort, argsort, msort, topk and
randperm, built on one non-differentiable ``argsort`` primitive plus gather.

Every case checks an independent numpy computation (or hand-computed values); where torch is
importable it is a second oracle.
"""
import numpy as np
import pytest

import hybridfw as hf

from .conftest import check_matches_torch

NAN = float("nan")
X = np.array([[3.0, NAN, 1.0, 3.0, -0.5], [0.0, -1.0, -1.0, 2.0, NAN]])
TIES = np.array([[2, 1, 2, 1, 2, 0], [5, 5, 5, 5, 5, 5]])


def _desc(a, axis):
    """Stable descending order, NaN first (an independent numpy computation: sort the keys
    (not-NaN, -value) lexicographically with lexsort, which is stable)."""
    a = np.moveaxis(a, axis, -1)
    order = np.stack([np.lexsort((-row, ~np.isnan(row))) if row.dtype.kind == "f" else
                      np.lexsort((-row.astype(np.int64),)) for row in a.reshape(-1, a.shape[-1])])
    return np.moveaxis(order.reshape(a.shape), -1, axis)


# (call on a namespace ``lib`` with x (floats with NaN), t (ties, int64); numpy expectation)
CALLS = [
    ("lib.sort(x).values", np.sort(X, -1)),
    ("lib.sort(x).indices", np.argsort(X, -1, kind="stable")),
    ("x.sort(0, descending=True).indices", _desc(X, 0)),
    ("x.sort(descending=True).values", np.take_along_axis(X, _desc(X, 1), 1)),
    ("lib.sort(t, stable=True).indices", np.argsort(TIES, -1, kind="stable")),
    ("lib.sort(t, descending=True, stable=True).indices", _desc(TIES, 1)),
    ("lib.argsort(x, dim=1)", np.argsort(X, 1, kind="stable")),
    ("t.argsort(descending=True, stable=True)", _desc(TIES, 1)),
    ("lib.argsort(t.to(lib.uint8), descending=True, stable=True)", _desc(TIES, 1)),
    ("lib.argsort(t > 1, stable=True)", np.argsort(TIES > 1, -1, kind="stable")),
    ("lib.sort(t > 1, descending=True, stable=True).values", np.sort(TIES > 1, -1)[:, ::-1]),
    ("lib.msort(x)", np.sort(X, 0)),
    ("t.msort()", np.sort(TIES, 0)),
    ("lib.topk(x, 2).values", np.take_along_axis(X, _desc(X, 1)[:, :2], 1)),
    ("x.topk(3, dim=1, largest=False).indices", np.argsort(X, 1, kind="stable")[:, :3]),
    ("lib.topk(t, 1, 0).indices", _desc(TIES, 0)[:1]),
    ("lib.topk(x, 0).values", np.zeros((2, 0))),
    ("lib.sort(lib.tensor(2.5)).values", 2.5),
    ("lib.topk(lib.tensor([1.0, 4.0, 2.0]), k=2, sorted=True).values", [4.0, 2.0]),
]


def _run(lib, call):
    return eval(call, {"lib": lib, "x": lib.tensor(X), "t": lib.tensor(TIES)})


@pytest.mark.parametrize("call, expected", CALLS)
def test_values(call, expected):
    got = _run(hf, call)
    np.testing.assert_array_equal(got.numpy(), expected)
    assert got.shape == np.shape(expected)


@pytest.mark.parametrize("call, expected", CALLS)
def test_matches_torch(call, expected):
    check_matches_torch(_run, call)


def test_hand_computed_and_named_tuples():
    r = hf.sort(hf.tensor([3, 1, 2]), descending=True)
    assert type(r).__name__ == "sort" and r.values.tolist() == [3, 2, 1]
    assert r.indices.tolist() == [0, 2, 1] and r.indices.dtype is hf.int64
    values, indices = hf.topk(hf.tensor([[1.0, 5.0, 3.0]]), 2)
    assert values.tolist() == [[5.0, 3.0]] and indices.tolist() == [[1, 2]]
    assert type(hf.topk(hf.tensor([1.0]), 1)).__name__ == "topk"
    assert hf.argsort(hf.tensor([NAN, -1.0, 0.0])).tolist() == [1, 2, 0]  # NaN largest
    assert hf.argsort(hf.tensor([NAN, -1.0, 0.0]), descending=True).tolist() == [0, 2, 1]


def test_gradients():
    x = hf.tensor(np.random.default_rng(0).normal(size=(3, 5)), requires_grad=True)
    assert hf.autograd.gradcheck(lambda t: hf.sort(t, dim=0).values * 2, [x])
    assert hf.autograd.gradcheck(lambda t: t.topk(2, largest=False).values, [x])
    assert hf.autograd.gradcheck(lambda t: hf.msort(t), [x])
    y = hf.tensor([3.0, 1.0, 2.0], requires_grad=True)
    (hf.topk(y, 2).values * hf.tensor([10.0, 1.0])).sum().backward()
    assert y.grad.tolist() == [10.0, 0.0, 1.0]


def test_to_static():
    @hf.jit.to_static
    def f(a):
        values, indices = a.sort(dim=1, descending=True)
        return values + hf.topk(a, 1).values + indices.float()

    a = np.array([[0.5, 2.0, -1.0], [3.0, 3.0, 1.0]], np.float32)
    order = np.array([[1, 0, 2], [0, 1, 2]])
    expected = np.take_along_axis(a, order, 1) + a.max(1, keepdims=True) + order
    np.testing.assert_array_equal(f(hf.tensor(a)).numpy(), expected)
    a2 = hf.tensor([[1.0, 4.0, 2.0]], requires_grad=True)
    f(a2).sum().backward()
    np.testing.assert_array_equal(a2.grad.numpy(), [[1.0, 4.0, 1.0]])  # max broadcast 3x


def test_randperm():
    hf.manual_seed(3)
    p = hf.randperm(10)
    assert p.dtype is hf.int64 and sorted(p.tolist()) == list(range(10))
    hf.manual_seed(3)
    assert hf.randperm(10).tolist() == p.tolist()
    assert hf.randperm(0).shape == (0,) and hf.randperm(4, dtype=hf.int32).dtype is hf.int32
    perms = {tuple(hf.randperm(3).tolist()) for _ in range(60)}
    assert len(perms) == 6


def test_errors():
    x = hf.tensor(X)
    with pytest.raises(ValueError, match=r"topk: k \(6\).*size 5"):
        hf.topk(x, 6)
    with pytest.raises(IndexError, match="argsort"):
        x.sort(dim=2)
    with pytest.raises(TypeError, match="topk: k"):
        x.topk(1.5)
    with pytest.raises(ValueError, match="randperm"):
        hf.randperm(-1)


def test_onnx_export_matches_eager(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")

    def f(a):
        v, i = a.sort(dim=1, descending=True)
        return v + i.float() + hf.argsort(a, 0).float() + hf.topk(a, 2, largest=False).values.sum(1, keepdim=True)

    hf.onnx.export(f, tmp_path / "sort.onnx", input_spec=[hf.jit.InputSpec([None, 4])])
    a = np.array([[3, 1, 3, 0], [2, 2, 5, -1], [2, 2, 5, -1]], np.float32)  # ties: stable
    session = ort.InferenceSession(str(tmp_path / "sort.onnx"))
    (got,) = session.run(None, {session.get_inputs()[0].name: a})
    np.testing.assert_array_equal(got, f(hf.tensor(a)).numpy())


def test_argsort_primitive_takes_a_negative_dim():
    # the primitive itself (a program may hold it with dim=-1): the same order as dim=ndim-1
    from hybridfw.ops.registry import apply
    from hybridfw.ops.sorting import argsort_op
    x = hf.tensor(np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]], dtype=np.float32))
    for descending in (False, True):
        got = apply(argsort_op, x, dim=-1, descending=descending).tolist()
        assert got == apply(argsort_op, x, dim=1, descending=descending).tolist()
    assert apply(argsort_op, x, dim=-1, descending=True).tolist() == [[0, 2, 1], [1, 2, 0]]
