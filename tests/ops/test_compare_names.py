"""PyTorch names for comparing and cleaning (``hybridfw.ops.composite_compare`` and aliases):
eq ne lt le gt ge methods, logical_and/or/xor, isclose, allclose, nan_to_num, count_nonzero,
clamp_min, clamp_max, hf.clone, hf.t, nelement, element_size, view_as, expand_as, type_as.

Every case checks an independent numpy computation; where torch is importable it is a second
oracle (values, dtypes and shapes).
"""
import numpy as np
import pytest

import hybridfw as hf

from .conftest import check_matches_torch

INF, NAN = float("inf"), float("nan")
X = np.array([[0.0, 1.5, -2.0], [NAN, INF, -INF]])
Y = np.array([[0.0, 1.5 + 1e-7, 2.0], [NAN, INF, INF]])
I = np.array([[0, 3, -1], [2, 0, 5]])
F32 = np.finfo(np.float32)

# (call on a namespace ``lib`` with x, y float32, i int64; numpy expectation)
CALLS = [
    ("x.eq(y)", X == Y), ("x.ne(y)", X != Y), ("x.lt(y)", X < Y), ("x.le(1.5)", X <= 1.5),
    ("x.gt(y)", X > Y), ("i.ge(1)", I >= 1),
    ("lib.logical_and(x, i)", (X != 0) & (I != 0)),
    ("lib.logical_or(i, x)", (I != 0) | (X != 0)),
    ("lib.logical_xor(x, y)", (X != 0) ^ (Y != 0)),
    ("i.logical_and(i > 1)", (I != 0) & (I > 1)),
    ("i.logical_or(i * 0)", I != 0),
    ("i.logical_xor(x)", (I != 0) ^ (X != 0)),
    ("lib.logical_not(i)", I == 0),
    ("lib.isclose(x, y)", np.isclose(X, Y, 1e-5, 1e-8)),
    ("lib.isclose(x, y, equal_nan=True)", np.isclose(X, Y, 1e-5, 1e-8, equal_nan=True)),
    ("x.isclose(y, rtol=0.0, atol=0.0)", X == Y),
    ("lib.isclose(i, i + 1, atol=1)", np.ones((2, 3), bool)),
    ("lib.nan_to_num(x)", np.nan_to_num(X.astype(np.float32))),
    ("x.nan_to_num(nan=-1.0, posinf=9.0)", np.nan_to_num(X.astype(np.float32), nan=-1.0,
                                                          posinf=9.0, neginf=F32.min)),
    ("x.double().nan_to_num(neginf=-7.0)", np.nan_to_num(X, neginf=-7.0)),
    ("lib.nan_to_num(i)", I),
    ("lib.count_nonzero(x)", np.count_nonzero(X)),
    ("lib.count_nonzero(x, dim=0)", np.count_nonzero(X, axis=0)),
    ("i.count_nonzero(dim=(0, 1))", np.count_nonzero(I)),
    ("i.count_nonzero(1)", np.count_nonzero(I, axis=1)),
    ("lib.clamp_min(i, 1)", np.maximum(I, 1)),
    ("lib.clamp_max(y, 1.0)", np.minimum(Y.astype(np.float32), 1.0)),
    ("i.clamp_min(0)", np.maximum(I, 0)),
    ("x.clamp_max(0.5)", np.minimum(X.astype(np.float32), 0.5)),
    ("i.clamp_min(lib.tensor([0, 1, 2]))", np.maximum(I, [0, 1, 2])),
    ("lib.clone(i)", I), ("lib.t(i)", I.T), ("lib.t(lib.tensor([1, 2]))", [1, 2]),
    ("i.view_as(lib.zeros(3, 2))", I.reshape(3, 2)),
    ("lib.tensor([1, 2, 3]).expand_as(i)", np.broadcast_to([1, 2, 3], (2, 3))),
    ("i.type_as(x)", I.astype(np.float32)),
]


def _run(lib, call):
    return eval(call, {"lib": lib, "x": lib.tensor(X, dtype=lib.float32),
                       "y": lib.tensor(Y, dtype=lib.float32), "i": lib.tensor(I)})


def _expected_dtype(expected):
    e = np.asarray(expected)
    return {"b": "bool", "i": "int64"}.get(e.dtype.kind, "float32" if e.dtype == np.float32
                                           else "float64")


@pytest.mark.parametrize("call, expected", CALLS)
def test_values(call, expected):
    got = _run(hf, call)
    np.testing.assert_array_equal(got.numpy(), expected)
    assert got.shape == np.shape(expected)
    if "double" not in call and not isinstance(expected, list):
        want = _expected_dtype(expected)
        if want == "float64":
            want = "float32"
        assert str(got.dtype).endswith(want), (got.dtype, want)


@pytest.mark.parametrize("call, expected", CALLS)
def test_matches_torch(call, expected):
    check_matches_torch(_run, call)


def test_allclose_and_small_names():
    x = hf.tensor([1.0, INF, NAN])
    assert hf.allclose(x, x + 0, equal_nan=True) and x.allclose(x, equal_nan=True)
    assert not hf.allclose(x, x) and not x.allclose(x + 1e-3)
    assert hf.allclose(hf.tensor([INF]), hf.tensor([INF]))  # equal infinities are close
    assert hf.ones(2, 3).nelement() == 6 and hf.tensor(1.0).nelement() == 1
    assert [hf.zeros(1, dtype=d).element_size() for d in
            (hf.float16, hf.float32, hf.float64, hf.int32, hf.int64, hf.bool)] == [2, 4, 8, 4, 8, 1]


def test_gradients():
    x = hf.tensor([[0.3, -1.2, 2.0], [0.7, -0.1, 1.1]], dtype=hf.float64, requires_grad=True)
    for fn in (lambda t: t.clamp_min(0.5), lambda t: hf.clamp_max(t, 0.5),
               lambda t: hf.nan_to_num(t * 2), lambda t: hf.clone(t) * t, lambda t: hf.t(t)):
        assert hf.autograd.gradcheck(fn, [x])
    x = hf.tensor([NAN, 2.0, INF], requires_grad=True)
    hf.nan_to_num(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0, 0.0])  # torch's convention


def test_to_static():
    @hf.jit.to_static
    def f(a, b):
        return (hf.logical_xor(a, b).float() + hf.isclose(a, b).float()
                + hf.nan_to_num(a / b) + a.clamp_min(0.0) + hf.count_nonzero(a, 0).float())

    a = np.array([[0.0, 1.0], [2.0, -3.0]], np.float32)
    b = np.array([[0.0, 1.0], [0.0, 3.0]], np.float32)
    with np.errstate(all="ignore"):
        expected = (((a != 0) ^ (b != 0)) + np.isclose(a, b) + np.nan_to_num(a / b)
                    + np.maximum(a, 0) + np.count_nonzero(a, 0))
    np.testing.assert_allclose(f(hf.tensor(a), hf.tensor(b)).numpy(), expected)


def test_errors():
    with pytest.raises(TypeError, match="isclose.*int64.*float32"):
        hf.isclose(hf.tensor([1]), hf.tensor([1.0]))
    with pytest.raises(ValueError, match="isclose"):
        hf.isclose(hf.tensor([1.0]), hf.tensor([1.0]), rtol=-1.0)
    with pytest.raises(ValueError, match="t: expects"):
        hf.t(hf.zeros(2, 2, 2))
    with pytest.raises(ValueError):
        hf.logical_and(hf.zeros(2), hf.zeros(3))
    with pytest.raises(IndexError, match="count_nonzero|sum"):
        hf.count_nonzero(hf.zeros(2), dim=3)
