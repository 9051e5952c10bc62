"""searchsorted bucketize bincount unique isin cummax cummin kthvalue (``hybridfw.ops.search``)
against PyTorch: values, dtypes and shapes; gradients of the differentiable values; eager and
``hf.jit.to_static``; errors."""
import math

import numpy as np
import pytest

import hybridfw as hf

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(0)
SEQ = np.sort(RNG.integers(0, 10, (3, 4, 7)), -1)
VAL = RNG.integers(-1, 12, (3, 4, 5))
F = np.array([[3.0, 1.0, 2.0, 1.0, 3.0], [0.5, math.nan, -1.0, 0.5, math.nan]])
I = np.array([[1, 3, 3, 2, 3], [4, 1, 1, 0, 4], [1, 3, 3, 2, 3]])
W = np.array([0.5, 1.5, 2.0, 4.0, 8.0])

CALLS = [
    "lib.searchsorted(lib.tensor(SEQ[0, 0]), lib.tensor(VAL))",
    "lib.searchsorted(lib.tensor(SEQ[0, 0]), lib.tensor(VAL), right=True)",
    "lib.searchsorted(lib.tensor(SEQ), lib.tensor(VAL))",
    "lib.searchsorted(lib.tensor(SEQ), lib.tensor(VAL), side='right')",
    "lib.searchsorted(lib.tensor(SEQ).double(), lib.tensor(VAL) + 0.5, out_int32=True)",
    "lib.searchsorted(lib.tensor([1.0, 3.0, 5.0]), 3)",
    "lib.searchsorted(lib.tensor([5, 1, 3]), lib.tensor([3, 4]), sorter=lib.tensor([1, 2, 0]))",
    "lib.bucketize(lib.tensor(VAL), lib.tensor(SEQ[1, 2]))",
    "lib.bucketize(lib.tensor(F), lib.tensor([0.5, 2.0]), right=True)",
    "lib.bincount(lib.tensor(I[0]))",
    "lib.bincount(lib.tensor(I[1]), minlength=9)",
    "lib.bincount(lib.tensor(I[0]), lib.tensor(W))",
    "lib.bincount(lib.tensor(I[0]), lib.tensor(W).float())",
    "lib.bincount(lib.tensor(I[0]), lib.tensor(I[1]))",
    "lib.tensor(I[0]).bincount()",
    "lib.bincount(lib.tensor(I[0][:0]))",
    "lib.unique(lib.tensor(I))",
    "lib.unique(lib.tensor(I), return_inverse=True)",
    "lib.unique(lib.tensor(I), return_counts=True)",
    "lib.tensor(I).unique(return_inverse=True, return_counts=True)",
    "lib.unique(lib.tensor(I), dim=0, return_inverse=True, return_counts=True)",
    "lib.unique(lib.tensor(I), dim=1, return_inverse=True)",
    "lib.unique(lib.tensor(F[0]), sorted=False)",
    "lib.unique(lib.tensor(F), return_inverse=True, return_counts=True)",  # (NaNs stay apart)
    "lib.unique(lib.tensor(I) > 1)",
    "lib.isin(lib.tensor(I), lib.tensor([3, 0]))",
    "lib.isin(lib.tensor(I), lib.tensor([[3], [9]]), invert=True)",
    "lib.isin(lib.tensor(F), lib.tensor([1, 3]))",
    "lib.isin(lib.tensor(I), 3)",
    "lib.isin(2, lib.tensor(I))",
    "lib.isin(lib.tensor(I), lib.tensor(I[0][:0]))",
    "lib.cummax(lib.tensor(I), 1)",
    "lib.cummax(lib.tensor(I), dim=0)",
    "lib.tensor(F).cummax(1)",
    "lib.cummin(lib.tensor(F), -1)",
    "lib.tensor(I).cummin(1)",
    "lib.cummax(lib.tensor(I) > 2, 1)",
    "lib.cummax(lib.tensor(3.0), 0)",
    "lib.kthvalue(lib.tensor(F[0]), 2)",
    "lib.tensor(I).kthvalue(3, dim=0)",
    "lib.kthvalue(lib.tensor(I), 1, 1, keepdim=True)",
]


def _flat(result):
    return list(result) if isinstance(result, tuple) else [result]


def _run(lib, call):
    return eval(call, {"lib": lib, "SEQ": SEQ, "VAL": VAL, "F": F, "I": I, "W": W})


@pytest.mark.parametrize("call", CALLS)
def test_matches_torch(call):
    want, got = _flat(_run(torch, call)), _flat(_run(hf, call))
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert g.shape == tuple(w.shape)
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    if "cummax" in call or "cummin" in call or "kthvalue" in call:  # named tuples
        result = _run(hf, call)
        assert result.values is result[0] and result.indices is result[1]


def test_gradients_of_values():
    x = hf.tensor(RNG.standard_normal((3, 6)), requires_grad=True)
    assert hf.autograd.gradcheck(lambda t: hf.cummax(t, 1).values * hf.cummin(t, 0).values +
                                 hf.kthvalue(t, 2, 1, keepdim=True).values, [x])


def test_to_static_forward_and_backward():
    def f(x, seq):
        counts = hf.bincount(hf.bucketize(seq, hf.tensor([1, 4, 8])).flatten(), minlength=4)
        values, inverse = hf.unique(seq, return_inverse=True)
        run = hf.cummax(x, 1).values + hf.kthvalue(x, 2, 1, keepdim=True).values
        return (run * hf.isin(seq[:, :6], hf.tensor([2, 5])).double()).sum() + \
            counts.sum() + values.sum() + inverse.sum()

    x = hf.tensor(RNG.standard_normal((4, 6)), requires_grad=True)
    seq = hf.tensor(RNG.integers(0, 10, (4, 8)))
    eager = f(x, seq)
    eager.backward()
    grad = x.grad.numpy().copy()
    x.grad = None
    static = hf.jit.to_static(f)(x, seq)
    np.testing.assert_allclose(static.detach().numpy(), eager.detach().numpy(), rtol=1e-12)
    static.backward()
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-12)


def test_errors():
    with pytest.raises(TypeError, match="bincount"):
        hf.bincount(hf.tensor([1.0]))
    with pytest.raises(ValueError, match="1-d"):
        hf.bincount(hf.tensor([[1]]))
    with pytest.raises(ValueError, match="negative"):
        hf.bincount(hf.tensor([-1]))
    with pytest.raises(ValueError, match="weights"):
        hf.bincount(hf.tensor([1, 2]), hf.tensor([1.0]))
    with pytest.raises(ValueError, match="leading|share"):
        hf.searchsorted(hf.tensor(SEQ), hf.tensor(VAL[0]))
    with pytest.raises(ValueError, match="side"):
        hf.searchsorted(hf.tensor(SEQ), hf.tensor(VAL), right=True, side="left")
    with pytest.raises(ValueError, match="1-d"):
        hf.bucketize(hf.tensor(VAL), hf.tensor(SEQ))
    with pytest.raises(IndexError, match="out of range"):
        hf.kthvalue(hf.tensor(F), 6)
    with pytest.raises(IndexError):
        hf.cummax(hf.tensor(F), 2)


def test_onnx_export_of_bincount_and_unique(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from hybridfw.jit import InputSpec

    def fn(x, w):
        values, inverse, counts = hf.unique(x, return_inverse=True, return_counts=True)
        return (hf.bincount(x, minlength=9).double() * 2).sum() + hf.bincount(x, w).sum() + \
            (inverse * 10).sum() + values.sum() + counts.max()

    path = str(tmp_path / "count.onnx")
    hf.onnx.export(fn, path, input_spec=[InputSpec([None], dtype="int64"),
                                         InputSpec([None], dtype="float64")])
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    (got,) = session.run(None, {names[0]: I[1], names[1]: W})
    assert got == fn(hf.tensor(I[1]), hf.tensor(W)).item()


def test_to_static_with_a_run_time_batch():
    def f(x):
        return hf.kthvalue(x, 2, 0).values + hf.cummin(x, 0).values.sum(0)

    g = hf.jit.to_static(f, input_spec=[hf.jit.InputSpec([None, 3], "float64")])
    for n in (2, 5):
        x = hf.tensor(RNG.standard_normal((n, 3)))
        np.testing.assert_allclose(g(x).numpy(), f(x).numpy(), rtol=1e-12)


def test_isin_with_test_elements_of_run_time_length():
    # the last sorted position was clamped to shape[0] - 1 = -2 when the length was a None dim
    spec = [hf.jit.InputSpec([None], "int64"), hf.jit.InputSpec([None], "int64")]
    g = hf.jit.to_static(lambda x, t: hf.isin(x, t), input_spec=spec)
    for test in ([3, 9, 4], [5], [9, 1, 1, 3, 0]):
        x, t = hf.tensor([1, 5, 3, 9]), hf.tensor(test)
        assert g(x, t).tolist() == np.isin([1, 5, 3, 9], test).tolist()
