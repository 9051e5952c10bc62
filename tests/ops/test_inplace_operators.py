"""Augmented assignment (``//= %= **= &= |= ^=``, beside ``+= -= *= /=``) is in place, as in
PyTorch: it keeps the object, writes through views, refuses a result of a higher dtype category
than the target, records gradients, and works in static programs.

Every case checks hand-computed values; where torch is importable it is a second oracle.
"""
import numpy as np
import pytest

import hybridfw as hf

# (operator, right operand, expected x after ``v = x[1:]; v <op> right``), x = [4, 6, 8]
CASES = [
    ("//=", 3, [4, 2, 2]),
    ("%=", 3, [4, 0, 2]),
    ("**=", 3, [4, 216, 512]),
    ("&=", 3, [4, 2, 0]),
    ("|=", 3, [4, 7, 11]),
    ("^=", 3, [4, 5, 11]),
]


def _floordiv(v, w):
    v //= w
    return v


def _mod(v, w):
    v %= w
    return v


def _pow(v, w):
    v **= w
    return v


def _and(v, w):
    v &= w
    return v


def _or(v, w):
    v |= w
    return v


def _xor(v, w):
    v ^= w
    return v


_UPDATES = {"//=": _floordiv, "%=": _mod, "**=": _pow, "&=": _and, "|=": _or, "^=": _xor}


def _augmented(op):
    return _UPDATES[op]


@pytest.mark.parametrize("op, right, expected", CASES)
def test_writes_through_a_view_and_keeps_identity(op, right, expected):
    x = hf.tensor([4, 6, 8])
    v = x[1:]
    result = _augmented(op)(v, right)
    assert result is v
    np.testing.assert_array_equal(x.numpy(), expected)
    np.testing.assert_array_equal(v.numpy(), expected[1:])


@pytest.mark.parametrize("op, right, expected", CASES)
def test_tensor_operand_matches_torch(op, right, expected):
    x = hf.tensor([4, 6, 8])
    _augmented(op)(x, hf.tensor([1, right, right]))
    manual = {"//=": [4, 2, 2], "%=": [0, 0, 2], "**=": [4, 216, 512], "&=": [0, 2, 0],
              "|=": [5, 7, 11], "^=": [5, 5, 11]}[op]
    np.testing.assert_array_equal(x.numpy(), manual)
    torch = pytest.importorskip("torch")
    t = torch.tensor([4, 6, 8])
    _augmented(op)(t, torch.tensor([1, right, right]))
    np.testing.assert_array_equal(x.numpy(), t.numpy())


def test_bool_logic_in_place():
    x = hf.tensor([True, True, False])
    y = x
    y &= hf.tensor([True, False, False])
    assert y is x
    np.testing.assert_array_equal(x.numpy(), [True, False, False])
    y |= hf.tensor([False, False, True])
    np.testing.assert_array_equal(x.numpy(), [True, False, True])
    y ^= True
    np.testing.assert_array_equal(x.numpy(), [False, True, False])


def test_float_floordiv_mod_pow_in_place():
    x = hf.tensor([7.5, -7.5, 2.0])
    x //= 2
    np.testing.assert_array_equal(x.numpy(), [3.0, -4.0, 1.0])
    x %= 3
    np.testing.assert_array_equal(x.numpy(), [0.0, 2.0, 1.0])
    x **= 2
    np.testing.assert_array_equal(x.numpy(), [0.0, 4.0, 1.0])
    assert x.dtype is hf.float32


@pytest.mark.parametrize("op", ["//=", "%=", "**="])
def test_higher_dtype_category_is_refused(op):
    x = hf.tensor([4, 6, 8])
    with pytest.raises(TypeError, match="can't be cast to the in-place output type"):
        _augmented(op)(x, 1.5)
    np.testing.assert_array_equal(x.numpy(), [4, 6, 8])


@pytest.mark.parametrize("op", ["&=", "|=", "^="])
def test_bitwise_on_float_is_refused(op):
    x = hf.tensor([1.0, 2.0])
    with pytest.raises(TypeError):
        _augmented(op)(x, 1)


def test_lower_category_is_cast_to_the_target():
    x = hf.tensor([7.0, 9.0])
    x //= hf.tensor([2.0, 4.0], dtype=hf.float64)
    assert x.dtype is hf.float32
    np.testing.assert_array_equal(x.numpy(), [3.0, 2.0])


def test_gradient_through_in_place_pow_and_mod():
    a = hf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 1
    b %= 100.0  # d(b % c)/db = 1
    b **= 2
    b.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [2.0, 4.0, 6.0])


@pytest.mark.parametrize("op, right, expected", CASES)
def test_static_program_writes_through_a_view(op, right, expected):
    update = _augmented(op)

    @hf.jit.to_static
    def f(x):
        y = x * 1
        v = y[1:]
        update(v, right)
        return y

    np.testing.assert_array_equal(f(hf.tensor([4, 6, 8])).numpy(), expected)


def test_static_in_place_keeps_the_dtype_rule():
    @hf.jit.to_static
    def refused(x):
        y = x * 1
        y //= 1.5
        return y

    with pytest.raises(TypeError, match="can't be cast to the in-place output type"):
        refused(hf.tensor([4, 6]))

    @hf.jit.to_static
    def cast(x, w):
        y = x * 1
        y //= w
        return y

    out = cast(hf.tensor([7.0, 9.0]), hf.tensor([2.0, 4.0], dtype=hf.float64))
    assert out.dtype is hf.float32  # as eager: cast back to the target's dtype
    np.testing.assert_array_equal(out.numpy(), [3.0, 2.0])


@pytest.mark.parametrize("other", [np.array([-3, 2, 100], np.int8), np.array(-3, np.int8),
                                   np.array([300, -1, 7], np.int32), np.array(-2, np.int16)])
@pytest.mark.parametrize("op", ["__iadd__", "__isub__", "__imul__", "__iand__", "__ior__"])
def test_unsigned_target_with_signed_tensor_wraps_as_torch(op, other):
    """uint8 in place with a signed tensor computes in the promoted type (or, for a 0-d
    operand, in uint8) and wraps into uint8, as PyTorch (it raised numpy's "Cannot cast ufunc
    output from int16 to uint8"); eager equals the static program."""
    base = np.array([250, 3, 128], np.uint8)
    x = hf.from_numpy(base.copy())
    assert getattr(x, op)(hf.from_numpy(other)) is x and x.dtype is hf.uint8
    wide = np.result_type(base, other) if other.ndim else np.uint8
    ufunc = {"__iadd__": np.add, "__isub__": np.subtract, "__imul__": np.multiply,
             "__iand__": np.bitwise_and, "__ior__": np.bitwise_or}[op]
    expected = ufunc(base.astype(wide), other.astype(wide)).astype(np.uint8)
    np.testing.assert_array_equal(x.numpy(), expected)

    @hf.jit.to_static
    def f(t, o):
        t = t.clone()
        return getattr(t, op)(o)

    np.testing.assert_array_equal(f(hf.from_numpy(base.copy()), hf.from_numpy(other)).numpy(),
                                  expected)
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(base.copy())
    getattr(t, op)(torch.from_numpy(other))
    np.testing.assert_array_equal(x.numpy(), t.numpy())
