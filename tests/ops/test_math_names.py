"""PyTorch math names (``hybridfw.ops.composite_math``): lerp addcmul addcdiv logaddexp hypot
fmod diff repeat_interleave meshgrid, and the random bernoulli / normal.

Every case checks an independent numpy computation; where torch is importable it is a second
oracle (values, dtypes and shapes).
"""
import warnings

import numpy as np
import pytest

import hybridfw as hf

INF = float("inf")
A = np.array([[-3.0, 3.0, -4.0, 5.5], [0.25, 1000.0, -INF, 7.0]])
B = np.array([[2.0, -2.0, 2.0, -2.0], [0.5, 1000.0, -INF, 3.0]])
W = np.array([0.0, 0.3, 0.5, 1.0])
I = np.array([[-7, 7, 9, -9], [1, 4, 9, 16]])
J = np.array([3, 3, -4, -4])

# (call on a namespace ``lib`` with a, b (2, 4) float64, w (4,), i (2, 4) and j (4,) int64)
CALLS = [
    ("lib.lerp(a[:, :2], b[:, :2], 0.25)", A[:, :2] + 0.25 * (B[:, :2] - A[:, :2])),
    ("a[:, :2].lerp(b[:, :2], 0.75)", A[:, :2] + 0.75 * (B[:, :2] - A[:, :2])),
    ("lib.lerp(a[0], b[0], w)", A[0] + W * (B[0] - A[0])),
    ("lib.addcmul(a, a, b, value=0.5)", A + 0.5 * A * B),
    ("a.addcmul(w, b)", A + W * B),
    ("lib.addcmul(i, i, j, value=2)", I + 2 * I * J),
    ("lib.addcdiv(a, w, b, value=-2.0)", A - 2.0 * W / B),
    ("b.addcdiv(a, b)", B + A / B),
    ("lib.logaddexp(a, b)", np.logaddexp(A, B)),
    ("b.logaddexp(w)", np.logaddexp(B, W)),
    ("lib.hypot(a, b)", np.hypot(A, B)),
    ("lib.hypot(a * 1e300, b * 1e300)", np.hypot(A * 1e300, B * 1e300)),
    ("lib.hypot(a * 1e-300, w * 1e-300)", np.hypot(A * 1e-300, W * 1e-300)),
    ("lib.fmod(a, b)", np.fmod(A, B)),
    ("a.fmod(2.5)", np.fmod(A, 2.5)),
    ("lib.fmod(i, j)", np.fmod(I, J)),
    ("i.fmod(-5)", np.fmod(I, -5)),
    ("lib.diff(i)", np.diff(I)),
    ("i.diff(n=2, dim=0)", np.diff(I, 2, 0)),
    ("lib.diff(i, 3, dim=1, prepend=i[:, :1], append=i)",
     np.diff(np.concatenate([I[:, :1], I, I], 1), 3, 1)),
    ("lib.diff(i > 1)", np.diff(I > 1)),
    ("lib.diff(w, n=5)", np.diff(W, 5)),
    ("lib.repeat_interleave(i, 2)", np.repeat(I, 2)),
    ("i.repeat_interleave(3, dim=1)", np.repeat(I, 3, 1)),
    ("lib.repeat_interleave(a, 2, dim=-2)", np.repeat(A, 2, 0)),
    ("lib.repeat_interleave(lib.tensor(5), 3)", [5, 5, 5]),
    ("lib.repeat_interleave(i, lib.tensor([0, 2, 1, 3]), dim=1)", np.repeat(I, [0, 2, 1, 3], 1)),
    ("a.repeat_interleave(lib.tensor([2, 1]), dim=0)", np.repeat(A, [2, 1], 0)),
    ("lib.repeat_interleave(w, lib.tensor([1, 0, 0, 2]))", np.repeat(W, [1, 0, 0, 2])),
    ("lib.stack(lib.meshgrid(b[0], w[:3], indexing='ij'))",
     np.stack(np.meshgrid(B[0], W[:3], indexing="ij"))),
    ("lib.stack(lib.meshgrid(j, j[:3], j[:2], indexing='xy'))",
     np.stack(np.meshgrid(J, J[:3], J[:2], indexing="xy"))),
    ("lib.stack(lib.meshgrid([j[:2], j], indexing='xy'))",
     np.stack(np.meshgrid(J[:2], J, indexing="xy"))),
]


def _run(lib, call):
    return eval(call, {"lib": lib, "a": lib.tensor(A), "b": lib.tensor(B), "w": lib.tensor(W),
                       "i": lib.tensor(I), "j": lib.tensor(J)})


@pytest.mark.parametrize("call, expected", CALLS)
def test_values(call, expected):
    with np.errstate(all="ignore"):
        got = _run(hf, call)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-13)
    assert got.shape == np.shape(expected)
    assert got.dtype.np == np.asarray(expected).dtype


@pytest.mark.parametrize("call, expected", CALLS)
def test_matches_torch(call, expected):
    torch = pytest.importorskip("torch")
    with np.errstate(all="ignore"):
        got, ours = _run(torch, call), _run(hf, call)
    np.testing.assert_allclose(got.numpy(), ours.numpy(), rtol=1e-13)
    assert str(got.dtype).split(".")[-1] == str(ours.dtype).split(".")[-1]


GRADS = [
    lambda x, y: hf.lerp(x, y, 0.3), lambda x, y: hf.lerp(x, y, 0.8),
    lambda x, y: x.lerp(y, hf.sigmoid(x)), lambda x, y: hf.addcmul(x, x, y, value=3.0),
    lambda x, y: x.addcdiv(y, x * x + 1, value=0.5), lambda x, y: hf.logaddexp(x, y * 3),
    lambda x, y: hf.hypot(x, y), lambda x, y: hf.fmod(x * 3, y + 5),
    lambda x, y: hf.fmod(-x * 3, y - 5), lambda x, y: hf.diff(x * y, n=2, dim=0),
    lambda x, y: hf.repeat_interleave(x, 2, 1) * hf.repeat_interleave(y, 2, 1),
    lambda x, y: hf.stack(hf.meshgrid(x[0], y[1], indexing="xy")),
]


@pytest.mark.parametrize("k", range(len(GRADS)))
def test_gradients(k):
    rng = np.random.default_rng(k)
    x = hf.tensor(rng.uniform(0.2, 2.0, (3, 4)), requires_grad=True)
    y = hf.tensor(rng.uniform(-2.0, -0.2, (3, 4)), requires_grad=True)
    assert hf.autograd.gradcheck(GRADS[k], [x, y])


def test_to_static():
    @hf.jit.to_static
    def f(a, b):
        g0, g1 = hf.meshgrid(a[0], b[0], indexing="ij")
        return (hf.logaddexp(a, b) + hf.fmod(a, b) + hf.hypot(a, b) + a.lerp(b, 0.7)
                + hf.addcdiv(a, a, b).sum() + hf.diff(a, append=b[:, :1])
                + hf.repeat_interleave(a, 1, 0) + (g0 * g1).sum())

    a = np.array([[1.5, -2.0], [3.0, 0.5]])
    b = np.array([[0.7, 1.2], [-1.1, 2.0]])
    expected = (np.logaddexp(a, b) + np.fmod(a, b) + np.hypot(a, b) + a + 0.7 * (b - a)
                + (a + a / b).sum() + np.diff(a, append=b[:, :1]) + a
                + np.outer(a[0], b[0]).sum())
    np.testing.assert_allclose(f(hf.tensor(a), hf.tensor(b)).numpy(), expected, rtol=1e-12)


def test_logaddexp_gradient_at_ties_splits_evenly():
    a = hf.tensor([2.0, 0.0], requires_grad=True)
    b = hf.tensor([2.0, 1.0], requires_grad=True)
    hf.logaddexp(a, b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [0.5, 1 / (1 + np.e)], rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), [0.5, np.e / (1 + np.e)], rtol=1e-6)
    assert hf.logaddexp(a, b).tolist() == pytest.approx([2 + np.log(2), np.logaddexp(0, 1)])


def test_meshgrid_default_warns_and_is_ij():
    with pytest.warns(UserWarning, match="indexing"):
        x, y = hf.meshgrid(hf.arange(2), hf.arange(3))
    assert x.shape == y.shape == (2, 3) and x.tolist() == [[0, 0, 0], [1, 1, 1]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hf.meshgrid(hf.arange(2), indexing="ij")


def test_random():
    hf.manual_seed(11)
    draws = hf.bernoulli(hf.full((20000,), 0.3, dtype=hf.float64))
    assert draws.dtype is hf.float64 and set(np.unique(draws.numpy())) <= {0.0, 1.0}
    assert abs(draws.mean().item() - 0.3) < 0.02
    hf.manual_seed(11)
    assert np.array_equal(hf.bernoulli(hf.full((20000,), 0.3, dtype=hf.float64)).numpy(),
                          draws.numpy())
    assert hf.bernoulli(hf.tensor([0.0, 1.0])).tolist() == [0.0, 1.0]
    assert hf.zeros(5).bernoulli(1.0).tolist() == [1.0] * 5
    hf.manual_seed(2)
    n = hf.normal(hf.full((2, 20000), 3.0), hf.tensor([[0.5], [2.0]]))
    assert n.shape == (2, 20000) and n.dtype is hf.float32
    np.testing.assert_allclose(n.numpy().mean(1), [3.0, 3.0], atol=0.05)
    np.testing.assert_allclose(n.numpy().std(1), [0.5, 2.0], rtol=0.03)
    hf.manual_seed(2)
    assert np.array_equal(hf.normal(hf.full((2, 20000), 3.0), hf.tensor([[0.5], [2.0]])).numpy(),
                          n.numpy())
    assert hf.normal(0.0, 1.0, (3, 2)).shape == (3, 2)
    assert hf.normal(1.0, hf.ones(4)).shape == (4,)
    m = hf.zeros(3, requires_grad=True)
    hf.normal(m, 2.0).sum().backward()
    assert m.grad.tolist() == [1.0, 1.0, 1.0]


def test_errors():
    with pytest.raises(ZeroDivisionError, match="fmod"):
        hf.fmod(hf.tensor([1, 2]), 0)
    with pytest.raises(ZeroDivisionError):
        hf.fmod(hf.tensor([1, 2]), hf.tensor([1, 0]))
    with pytest.raises(TypeError, match="addcdiv.*int64"):
        hf.addcdiv(hf.tensor([1.0]), hf.tensor([1]), hf.tensor([2]))
    with pytest.raises(TypeError, match="lerp.*float64"):
        hf.lerp(hf.tensor([1.0]), hf.tensor([1.0], dtype=hf.float64), 0.5)
    with pytest.raises(ValueError):
        hf.hypot(hf.zeros(2), hf.zeros(3))
    with pytest.raises(ValueError, match="meshgrid: indexing"):
        hf.meshgrid(hf.arange(2), indexing="yx")
    with pytest.raises(ValueError, match="meshgrid.*\\(2, 2\\)"):
        hf.meshgrid(hf.zeros(2, 2), indexing="ij")
    with pytest.raises(TypeError, match="meshgrid.*dtype"):
        hf.meshgrid(hf.zeros(2), hf.arange(2), indexing="ij")
    with pytest.raises(ValueError, match="repeat_interleave"):
        hf.repeat_interleave(hf.zeros(2), -1)
    with pytest.raises(ValueError, match="diff"):
        hf.diff(hf.tensor(1.0))
    with pytest.raises(TypeError, match="bernoulli"):
        hf.bernoulli(hf.tensor([1, 0]))
    with pytest.raises(TypeError, match="normal"):
        hf.normal(0.0, 1.0)


QUADRANTS_Y = np.array([1.0, 1.0, -1.0, -1.0, 0.0, 0.0, -0.0, 2.0, INF, 0.0])
QUADRANTS_X = np.array([1.0, -1.0, -1.0, 1.0, 1.0, -1.0, -1.0, 0.0, INF, 0.0])


def test_atan2():
    y, x = hf.tensor(QUADRANTS_Y), hf.tensor(QUADRANTS_X)
    expected = np.arctan2(QUADRANTS_Y, QUADRANTS_X)
    np.testing.assert_array_equal(hf.atan2(y, x).numpy(), expected)
    np.testing.assert_array_equal(y.arctan2(x).numpy(), expected)
    assert hf.atan2(y, x)[:4].tolist() == pytest.approx([np.pi / 4, 3 * np.pi / 4,
                                                         -3 * np.pi / 4, -np.pi / 4])
    b = hf.atan2(hf.tensor([True, True, False]), hf.tensor([True, False, False]))
    assert b.dtype is hf.float32 and b.tolist() == pytest.approx([np.pi / 4, np.pi / 2, 0.0])
    assert hf.atan2(hf.tensor([1, -1]), 0.0).dtype is hf.float32
    with pytest.raises(ValueError, match="atan2"):
        hf.atan2(hf.zeros(2), hf.zeros(3))
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(torch.atan2(torch.tensor(QUADRANTS_Y),
                                              torch.tensor(QUADRANTS_X)).numpy(), expected)


def test_atan2_onnx(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")

    def f(y, x):
        return hf.atan2(y, x)

    spec = [hf.jit.InputSpec([None], "float32")] * 2  # ONNX Runtime's Atan is float32 only
    hf.onnx.export(f, tmp_path / "atan2.onnx", input_spec=spec)
    session = ort.InferenceSession(str(tmp_path / "atan2.onnx"))
    names = [i.name for i in session.get_inputs()]
    # left out: a zero y left of the origin (the ONNX rule gives +pi for -0.0) and both
    # infinite (NaN there)
    keep = (QUADRANTS_Y != 0) & np.isfinite(QUADRANTS_Y)
    keep |= (QUADRANTS_X >= 0) & np.isfinite(QUADRANTS_Y)
    ys, xs = QUADRANTS_Y[keep].astype(np.float32), QUADRANTS_X[keep].astype(np.float32)
    (got,) = session.run(None, dict(zip(names, (ys, xs))))
    np.testing.assert_allclose(got, np.arctan2(ys, xs), rtol=1e-6)


def test_repeat_interleave_per_element_gradient_and_errors():
    # each row's gradient is the sum over its copies (by hand)
    x = hf.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = hf.repeat_interleave(x, hf.tensor([1, 2]), dim=0)
    (y * hf.arange(6.0).reshape(3, 2)).sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0], [6.0, 8.0]]
    with pytest.raises(ValueError, match="3 repeats for dim 0 of size 2"):
        hf.repeat_interleave(x, hf.tensor([1, 2, 3]), dim=0)
    with pytest.raises(ValueError, match="non-negative"):
        hf.repeat_interleave(x, hf.tensor([1, -1]), dim=0)
    with pytest.raises(TypeError, match="1-d integer tensor"):
        hf.repeat_interleave(x, hf.tensor([1.0, 2.0]), dim=0)
    # in a static program: repeats known while building are fine; computed ones are refused
    reps = hf.tensor([2, 0])

    def known(t):
        return hf.repeat_interleave(t, reps, dim=0)

    def computed(t, r):
        return hf.repeat_interleave(t, r, dim=0)

    out = hf.jit.to_static(known)(x.detach())
    np.testing.assert_array_equal(out.numpy(), [[1.0, 2.0], [1.0, 2.0]])
    with pytest.raises(ValueError, match="computed by the program"):
        hf.jit.to_static(computed)(x.detach(), reps)


def test_fmod_and_logaddexp_take_bool_operands():
    """A bool divisor or operand counts as 0/1, as PyTorch's functions take it (they raised
    the ``-`` operator's bool-subtraction TypeError from inside the composite)."""
    x = hf.tensor([-2.5, 3.5, 1.0])
    m = hf.tensor([True, True, False])
    np.testing.assert_array_equal(hf.fmod(x, True).numpy(), np.fmod(x.numpy(), 1.0))
    with np.errstate(invalid="ignore"):
        want = np.fmod(x.numpy(), m.numpy().astype(np.float32))
    np.testing.assert_array_equal(hf.fmod(x, m).numpy(), want)
    np.testing.assert_allclose(hf.logaddexp(x, m).numpy(),
                               np.logaddexp(x.numpy(), m.numpy().astype(np.float32)), rtol=1e-6)
    assert hf.logaddexp(m, x).dtype is hf.float32
    torch = pytest.importorskip("torch")
    t, tm = torch.tensor([-2.5, 3.5, 1.0]), torch.tensor([True, True, False])
    np.testing.assert_array_equal(hf.fmod(x, m).numpy(), torch.fmod(t, tm).numpy())
    np.testing.assert_array_equal(hf.fmod(x, True).numpy(), torch.fmod(t, True).numpy())
    np.testing.assert_allclose(hf.logaddexp(x, m).numpy(), torch.logaddexp(t, tm).numpy(),
                               rtol=1e-6)
