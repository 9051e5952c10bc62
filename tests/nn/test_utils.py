"""``hf.nn.utils``: gradient clipping (get_total_norm, clip_grads_with_norm_, clip_grad_norm_)
and parameters_to_vector / vector_to_parameters, against numpy and torch."""
import math
import warnings

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.nn import utils

GRADS = [np.array([1.0, -0.5, 3.0]), np.array([[2.0, 0.25], [-4.0, 0.0]])]


def params_with(grads, dtype="float32"):
    ps = []
    for g in grads:
        p = hf.zeros(*g.shape, dtype=dtype, requires_grad=True)
        p.grad = hf.tensor(g, dtype=dtype)
        ps.append(p)
    return ps


def numpy_norm(grads, p):
    flat = np.abs(np.concatenate([g.ravel() for g in grads]))
    if p == math.inf:
        return flat.max()
    if p == -math.inf:
        return flat.min()
    return (flat ** p).sum() ** (1 / p)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf, -math.inf, -1.5, 0.5])
def test_clip_grad_norm_matches_numpy(norm_type):
    ps = params_with(GRADS, "float64")
    total = utils.clip_grad_norm_(ps, 0.1, norm_type=norm_type)
    expected = numpy_norm(GRADS, norm_type)
    np.testing.assert_allclose(float(total), expected, rtol=1e-12)
    coef = min(1.0, 0.1 / (expected + 1e-6))
    for p, g in zip(ps, GRADS):
        np.testing.assert_allclose(p.grad.numpy(), g * coef, rtol=1e-12)


def test_negative_inf_norm_is_smallest_abs_value():
    ps = params_with([np.array([3.0, -2.0]), np.array([0.5, 8.0])])
    assert float(utils.clip_grad_norm_(ps, 100.0, norm_type=-math.inf)) == 0.5
    assert ps[0].grad.tolist() == [3.0, -2.0]  # 100 / 0.5 > 1: left alone


def test_float16_norm_accumulates_in_float32():
    ps = params_with([np.full(10, 30.0)] * 10, "float16")
    total = utils.clip_grad_norm_(ps, 1.0)
    assert total.dtype == hf.float16
    assert float(total) == 300.0
    np.testing.assert_allclose(ps[0].grad.numpy().astype(np.float32), 30.0 / 300,
                               rtol=1e-3)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, -math.inf, 0.0, 2.5, -1.5])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_clip_grad_norm_matches_torch(norm_type, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    grads = [rng.normal(scale=20, size=s) for s in [(7,), (3, 5), (4,) * 3]]
    ps = params_with(grads, dtype)
    tps = []
    for g in grads:
        t = torch.zeros(g.shape, dtype=getattr(torch, dtype), requires_grad=True)
        t.grad = torch.tensor(g, dtype=getattr(torch, dtype))
        tps.append(t)
    total = utils.clip_grad_norm_(ps, 1.5, norm_type=norm_type)
    expected = torch.nn.utils.clip_grad_norm_(tps, 1.5, norm_type=norm_type)
    assert total.dtype == hf.as_dtype(dtype)
    rtol = 1e-5 if dtype == "float32" else 2e-3
    np.testing.assert_allclose(float(total), float(expected), rtol=rtol)
    for p, t in zip(ps, tps):
        np.testing.assert_allclose(p.grad.numpy().astype(np.float64),
                                   t.grad.double().numpy(), rtol=rtol, atol=1e-3)


def test_get_total_norm_and_clip_grads_with_norm():
    ps = params_with(GRADS, "float64")
    total = utils.get_total_norm([p.grad for p in ps], norm_type=1.0)
    assert float(total) == pytest.approx(10.75)
    assert [p.grad.tolist() for p in ps] == [g.tolist() for g in GRADS]  # reads only
    utils.clip_grads_with_norm_(ps, 1.075, total)
    np.testing.assert_allclose(ps[0].grad.numpy(), GRADS[0] * 1.075 / (10.75 + 1e-6))
    assert float(utils.get_total_norm([])) == 0.0
    assert float(utils.get_total_norm(hf.tensor([3.0, 4.0]))) == 5.0
    with pytest.raises(RuntimeError, match="get_total_norm.*non-finite"):
        utils.get_total_norm([hf.tensor([math.inf])], error_if_nonfinite=True)
    with pytest.raises(RuntimeError, match="clip_grad_norm_.*non-finite"):
        utils.clip_grad_norm_(params_with([np.array([math.nan])]), 1.0, error_if_nonfinite=True)


def test_clip_grad_norm_generator_and_deprecated_alias():
    ps = params_with(GRADS)
    total = utils.clip_grad_norm_((p for p in ps), 1.0)  # a generator is read once
    np.testing.assert_allclose(float(utils.get_total_norm([p.grad for p in ps])), 1.0,
                               rtol=1e-5)
    assert float(total) == pytest.approx(numpy_norm(GRADS, 2))
    with pytest.warns(UserWarning, match="empty generator"):
        utils.clip_grad_norm_((p for p in []), 1.0)
    ps = params_with(GRADS)
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        total = utils.clip_grad_norm(ps, 1.0, norm_type=1.0)
    assert float(total) == pytest.approx(10.75)


def test_parameters_to_vector_roundtrip():
    lin = hf.nn.Linear(3, 2)
    vec = utils.parameters_to_vector(lin.parameters())
    np.testing.assert_array_equal(
        vec.detach().numpy(), np.concatenate([lin.weight.detach().numpy().ravel(),
                                              lin.bias.detach().numpy()]))
    vec.sum().backward()  # on the graph, as PyTorch's
    assert lin.weight.grad.tolist() == [[1.0] * 3] * 2
    utils.vector_to_parameters(hf.arange(8.0), lin.parameters())
    assert lin.weight.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert lin.bias.tolist() == [6.0, 7.0]
    assert lin.weight.requires_grad
    with pytest.raises(TypeError, match="vector_to_parameters.*ndarray"):
        utils.vector_to_parameters(np.zeros(8), lin.parameters())


# ---- Tensor.grad assignment -------------------------------------------------------------
def test_grad_assignment_checks_shape_and_dtype():
    w = hf.zeros(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="different size"):
        w.grad = hf.zeros(3, 2)
    with pytest.raises(RuntimeError, match="different type"):
        w.grad = hf.zeros(2, 3, dtype="float64")
    with pytest.raises(TypeError, match="Tensor or None"):
        w.grad = np.zeros((2, 3), np.float32)
    assert w.grad is None
    w.grad = hf.ones(2, 3)
    assert w.grad.tolist() == [[1.0] * 3] * 2
    w.grad = None
    assert w.grad is None
    (w * 2).sum().backward()
    assert w.grad.tolist() == [[2.0] * 3] * 2


def test_grad_assignment_errors_match_torch():
    torch = pytest.importorskip("torch")
    t = torch.zeros(2, 3, requires_grad=True)
    for bad in (torch.zeros(3, 2), torch.zeros(2, 3, dtype=torch.float64)):
        with pytest.raises(RuntimeError) as expected:
            t.grad = bad
        w = hf.zeros(2, 3, requires_grad=True)
        with pytest.raises(RuntimeError) as got:
            w.grad = hf.tensor(bad.numpy())
        phrase = "different size" if "size" in str(expected.value) else "different type"
        assert phrase in str(got.value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t.grad = None
