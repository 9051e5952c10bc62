"""sigmoid keeps its relative precision in the negative tail (0.5*tanh(x/2)+0.5 cancelled: 0 at
x=-20, so binary_cross_entropy on it hit the log clamp), in eager, static and compiled code."""
import numpy as np
import pytest

import hybridfw as hf

X = np.array([-100.0, -30.0, -20.0, -12.0, -7.0, -1e-3, 0.0, 1e-3, 7.0, 20.0, 100.0])


def exact(x):
    x = np.asarray(x, np.float64)
    return np.where(x < 0, np.exp(x) / (1 + np.exp(x)), 1 / (1 + np.exp(-x)))


@pytest.mark.parametrize("dtype, rtol", [("float32", 2e-7), ("float64", 1e-15)])
def test_relative_precision_in_both_tails(dtype, rtol):
    got = hf.tensor(X.astype(dtype)).sigmoid().numpy()
    np.testing.assert_allclose(got, exact(X).astype(dtype), rtol=rtol, atol=0)
    assert np.isnan(hf.tensor(np.array([np.nan], dtype)).sigmoid().numpy()[0])


def _bce_of_sigmoid(x, y):
    return hf.nn.functional.binary_cross_entropy(x.sigmoid(), y)


@pytest.mark.parametrize("backend", ["interpreted", "compiled"])
def test_static_and_compiled_code_agree(backend):
    if backend == "compiled":
        pytest.importorskip("numba")
    x = hf.tensor(X.astype(np.float32))
    f = hf.jit.to_static(lambda_free_sigmoid, backend=backend)
    np.testing.assert_allclose(f(x).numpy(), exact(X).astype(np.float32) * 2, rtol=2e-7, atol=0)
    loss = _bce_of_sigmoid(hf.tensor([-20.0, -30.0]), hf.tensor([1.0, 0.0]))
    np.testing.assert_allclose(loss.item(), 20.0 / 2, rtol=1e-5)  # not the log clamp at 100


def lambda_free_sigmoid(x):
    return x.sigmoid() * 2.0
