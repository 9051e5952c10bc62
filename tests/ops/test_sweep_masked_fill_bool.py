"""masked_fill on a bool tensor casts the value as PyTorch does: any nonzero number (0.5,
-inf) is True (0.5 became False, -inf raised OverflowError)."""
import numpy as np
import pytest

import hybridfw as hf

MASK = [False, True, True, False]
X = [True, False, False, False]


@pytest.mark.parametrize("value, expected", [
    (0.5, [True, True, True, False]),
    (float("-inf"), [True, True, True, False]),
    (0.0, [True, False, False, False]),
    (2, [True, True, True, False]),
])
def test_masked_fill_on_bool_tensors(value, expected):
    out = hf.tensor(X).masked_fill(hf.tensor(MASK), value)
    assert out.dtype is hf.bool
    np.testing.assert_array_equal(out.numpy(), expected)
    inplace = hf.tensor(X)
    inplace.masked_fill_(hf.tensor(MASK), value)
    np.testing.assert_array_equal(inplace.numpy(), expected)


def test_masked_fill_on_int_tensors_truncates_toward_zero():
    out = hf.masked_fill(hf.tensor([1, 2, 3]), hf.tensor([True, False, True]), -2.7)
    np.testing.assert_array_equal(out.numpy(), [-2, 2, -2])
    assert out.dtype is hf.int64


def test_masked_fill_on_bool_in_a_static_program():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [4], "bool")
        out = x.masked_fill(x == False, 0.5)  # noqa: E712
    got, = hf.static.Executor().run(prog, feed={"x": np.array(X)}, fetch_list=[out],
                                    return_numpy=True)
    np.testing.assert_array_equal(got, [True] * 4)


def test_matches_torch():
    torch = pytest.importorskip("torch")
    for value in (0.5, float("-inf"), 0.0):
        ref = torch.tensor(X).masked_fill(torch.tensor(MASK), value).numpy()
        got = hf.tensor(X).masked_fill(hf.tensor(MASK), value).numpy()
        np.testing.assert_array_equal(got, ref)


def test_masked_fill_value_tensor_must_be_0d():
    x = hf.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match=r"masked_fill: value must be a number or a 0-d tensor.*\(2,\)"):
        x.masked_fill(hf.tensor([True, False]), x)
    out = x.masked_fill(hf.tensor([True, False]), hf.tensor(5.0, dtype=hf.float64))
    np.testing.assert_array_equal(out.numpy(), [5.0, 2.0])
    assert out.dtype is hf.float32
