"""Every unary and binary elementwise op of the registry on 0-d inputs of each float dtype,
eagerly and through ``hf.jit.to_static``: the value of the same op on one-element 1-d inputs
(the n-d path), and numpy's own formulas for the ops whose kernels chain ``out=`` writes
(``rsqrt``, ``sigmoid``: those failed on every 0-d input; ``exclusive_prod``, prod's gradient,
gave 1 dim)."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.ops.registry import TensorMeta, all_ops, apply

_RANDOM = {"bernoulli"}  # draws: no value to compare


def _elementwise(arity: int) -> list:
    """Registry ops whose inference takes ``arity`` tensors and no attributes, gives a 0-d
    result for 0-d inputs and keeps an n-d shape (so reductions are left out)."""
    names = []
    for name, op in sorted(all_ops().items()):
        if op.variadic or name in _RANDOM:
            continue
        try:
            zero = op.infer(*[TensorMeta((), hf.float32)] * arity)[0]
            full = op.infer(*[TensorMeta((2, 3), hf.float32)] * arity)[0]
        except Exception:  # noqa: BLE001 - takes other operands or attributes: not elementwise
            continue
        if tuple(zero) == () and tuple(full) == (2, 3):
            names.append(name)
    return names


UNARY = _elementwise(1)
BINARY = _elementwise(2)
FLOATS = ["float16", "float32", "float64"]


def test_the_scan_finds_the_ops():
    assert {"rsqrt", "sigmoid", "exp", "sqrt", "relu", "erf", "log_sigmoid"} <= set(UNARY)
    assert {"add", "div", "pow", "floor_divide", "remainder", "maximum"} <= set(BINARY)


_VALUES = {"binary_cross_entropy": (0.7, 0.3)}  # its target is a probability, in [0, 1]


def _inputs(arity, dtype, name=None):
    values = _VALUES.get(name) or [0.7 + 0.4 * i for i in range(arity)]
    return [np.array(v, dtype=dtype) for v in values]


def _static(op):
    def call(*xs):
        return apply(op, *xs)
    return hf.jit.to_static(call)


def _check(name, arity, dtype):
    op = all_ops()[name]
    values = _inputs(arity, dtype, name)
    eager = apply(op, *[hf.tensor(v) for v in values])
    assert eager.shape == ()
    reference = apply(op, *[hf.tensor(v.reshape(1)) for v in values])
    rtol = 1e-3 if dtype == "float16" else 1e-6
    np.testing.assert_allclose(eager.numpy().astype("float64"),
                               reference.numpy().reshape(()).astype("float64"), rtol=rtol)
    static = _static(op)(*[hf.tensor(v) for v in values])
    assert static.shape == () and static.dtype is eager.dtype
    np.testing.assert_allclose(static.numpy().astype("float64"),
                               eager.numpy().astype("float64"), rtol=rtol)
    return eager


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", UNARY)
def test_unary_on_0d(name, dtype):
    _check(name, 1, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", BINARY)
def test_binary_on_0d(name, dtype):
    _check(name, 2, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rsqrt_and_sigmoid_on_0d_match_numpy(dtype):
    x = np.array(4.0, dtype=dtype)
    rtol = 1e-3 if dtype == "float16" else 1e-6
    np.testing.assert_allclose(hf.tensor(x).rsqrt().numpy(), 0.5, rtol=rtol)
    np.testing.assert_allclose(hf.sigmoid(hf.tensor(x)).numpy(), 1 / (1 + np.exp(-4.0)),
                               rtol=rtol)
    np.testing.assert_allclose(hf.ones(3, dtype=dtype).sum().sigmoid().numpy(),
                               1 / (1 + np.exp(-3.0)), rtol=rtol)


def test_prod_gradient_of_a_0d_input_in_a_static_program():
    @hf.jit.to_static
    def f(x):
        return x.prod()

    x = hf.tensor(3.0, requires_grad=True)
    f(x).backward()
    assert x.grad.shape == () and x.grad.item() == 1.0
