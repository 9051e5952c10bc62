"""Integer ``//`` and ``%`` by zero raise (PyTorch: ``RuntimeError('ZeroDivisionError')``) with
an error that is both a ZeroDivisionError and a RuntimeError, eagerly, in place and in static
programs; floats keep inf/nan.

Every case checks hand-computed values; where torch is importable it is a second oracle.
"""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.ops.elementwise import IntegerDivisionByZeroError

X = [7, -8]

ZERO_DIVISIONS = [
    ("x // 0", "floor_divide"),
    ("x % 0", "remainder"),
    ("x // T([1, 0])", "floor_divide"),
    ("x % T([0, 3])", "remainder"),
    ("x % T([True, False])", "remainder"),
    ("5 // T([0, 1])", "floor_divide"),
    ("T([1, 2], dtype=lib.int32) // T(0, dtype=lib.int32)", "floor_divide"),
    ("T([1, 2], dtype=lib.uint8) % 0", "remainder"),
    ("lib.floor_divide(x, 0)", "floor_divide"),
    ("lib.remainder(x, T([0, 1]))", "remainder"),
]


def _run(lib, call):
    return eval(call, {"lib": lib, "T": lib.tensor, "x": lib.tensor(X)})


def test_error_class():
    assert issubclass(IntegerDivisionByZeroError, ZeroDivisionError)
    assert issubclass(IntegerDivisionByZeroError, RuntimeError)


@pytest.mark.parametrize("call, op", ZERO_DIVISIONS)
def test_integer_division_by_zero_raises(call, op):
    with pytest.raises(IntegerDivisionByZeroError, match=f"{op}: integer division by zero"):
        _run(hf, call)


@pytest.mark.parametrize("call, op", ZERO_DIVISIONS)
def test_torch_raises_too(call, op):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        _run(torch, call)


def test_nonzero_divisors_and_floats_are_unchanged():
    x = hf.tensor(X)
    np.testing.assert_array_equal((x // hf.tensor([2, 3])).numpy(), [3, -3])
    np.testing.assert_array_equal((x % hf.tensor([2, 3])).numpy(), [1, 1])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal((x.float() // 0).numpy(), [np.inf, -np.inf])
        np.testing.assert_array_equal((x // 0.0).numpy(), [np.inf, -np.inf])
        assert np.isnan((x.float() % hf.tensor([0.0, 1.0])).numpy()[0])


@pytest.mark.parametrize("op", ["//=", "%="])
def test_in_place_by_zero_raises_and_leaves_the_target(op):
    x = hf.tensor(X)
    with pytest.raises(IntegerDivisionByZeroError):
        if op == "//=":
            x //= hf.tensor([1, 0])
        else:
            x %= 0
    np.testing.assert_array_equal(x.numpy(), X)


def _divide(a, b):
    c = a * 2 + 1
    return (c // b) % (b + 1)


def _update(a, b):
    c = a * 1
    c %= b
    return c


@pytest.mark.parametrize("backend", ["interpreted", "compiled"])
def test_static_programs_raise(backend):
    f = hf.jit.to_static(_divide, backend=backend)
    np.testing.assert_array_equal(f(hf.tensor([3, 4]), hf.tensor([2, 3])).numpy(), [0, 3])
    with pytest.raises(IntegerDivisionByZeroError, match="floor_divide"):
        f(hf.tensor([3, 4]), hf.tensor([2, 0]))
    g = hf.jit.to_static(_update, backend=backend)
    np.testing.assert_array_equal(g(hf.tensor([7, 8]), hf.tensor([2, 3])).numpy(), [1, 2])
    with pytest.raises(IntegerDivisionByZeroError, match="remainder"):
        g(hf.tensor([7, 8]), hf.tensor([0, 3]))
    with pytest.raises(IntegerDivisionByZeroError, match="remainder"):
        g(hf.tensor([7, 8]), 0)
