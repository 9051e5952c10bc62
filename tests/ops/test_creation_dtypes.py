"""The dtypes PyTorch infers for creation calls: numpy scalars and 0-d tensors read as the
numbers they hold in ``arange``/``full``, nested data promotes its elements' dtypes in
``tensor``, and ``arange``'s integer form truncates as PyTorch does (a step that truncates to 0
is refused).

Every case checks hand-computed values; where torch is importable it is a second oracle.
"""
import numpy as np
import pytest

import hybridfw as hf

# (call on a namespace ``lib`` with ``T = lib.tensor``; dtype name; values)
CALLS = [
    ("lib.arange(T(3))", "int64", [0, 1, 2]),
    ("lib.arange(np.int64(3))", "int64", [0, 1, 2]),
    ("lib.arange(np.int32(1), np.int64(4), np.int64(2))", "int64", [1, 3]),
    ("lib.arange(0, T(4))", "int64", [0, 1, 2, 3]),
    ("lib.arange(T(1), 4)", "int64", [1, 2, 3]),
    ("lib.arange(0, 4, T(2))", "int64", [0, 2]),
    ("lib.arange(T(True))", "int64", [0]),
    ("lib.arange(T(2.5))", "float32", [0.0, 1.0, 2.0]),
    ("lib.arange(np.float64(3))", "float32", [0.0, 1.0, 2.0]),
    ("lib.full((2,), np.int64(5))", "int64", [5, 5]),
    ("lib.full((2,), np.int32(5))", "int64", [5, 5]),
    ("lib.full((2,), np.uint8(3))", "int64", [3, 3]),
    ("lib.full((2,), T(5))", "int64", [5, 5]),
    ("lib.full((2,), T(5, dtype=lib.int32))", "int64", [5, 5]),
    ("lib.full((2,), T(True))", "bool", [True, True]),
    ("lib.full((2,), np.bool_(True))", "float32", [1.0, 1.0]),  # PyTorch reads it as a float
    ("lib.full((2,), np.float64(1.5))", "float32", [1.5, 1.5]),
    ("lib.full((2,), T(1.5, dtype=lib.float64))", "float32", [1.5, 1.5]),
    ("lib.tensor([np.float64(1.5)])", "float64", [1.5]),
    ("lib.tensor([np.int32(1)])", "int32", [1]),
    ("lib.tensor([np.int32(1), 2])", "int64", [1, 2]),
    ("lib.tensor([np.int32(1), 2.5])", "float32", [1.0, 2.5]),
    ("lib.tensor([np.int16(1), np.int32(2)])", "int32", [1, 2]),
    ("lib.tensor([True, np.int8(3)])", "int8", [1, 3]),
    ("lib.tensor([1, np.uint8(3)])", "int64", [1, 3]),
    ("lib.tensor([np.float16(1.5)])", "float16", [1.5]),
    ("lib.tensor([[np.float64(1.0)], [2.0]])", "float64", [[1.0], [2.0]]),
    ("lib.tensor([1, T(2.5)])", "float32", [1.0, 2.5]),
    ("lib.tensor([T(1), T(2.5)])", "float32", [1.0, 2.5]),
    ("lib.tensor([T(2, dtype=lib.int32), 1])", "int64", [2, 1]),
    ("lib.tensor([T(2.5, dtype=lib.float64), 1])", "float64", [2.5, 1.0]),
    ("lib.tensor([np.float64(1.5), T(1.0)])", "float64", [1.5, 1.0]),
    ("lib.tensor([])", "float32", []),
    ("lib.tensor([[1, 2], [3, 4]])", "int64", [[1, 2], [3, 4]]),
    ("lib.tensor([[True], [False]])", "bool", [[True], [False]]),
    ("lib.tensor([0.1, 2])", "float32", [0.1, 2.0]),
    ("lib.arange(0.5, 3.2, 1, dtype=lib.int64)", "int64", [0, 1, 2]),
    ("lib.arange(0, 5, 1.5, dtype=lib.int64)", "int64", [0, 1, 2, 3, 4]),
    ("lib.arange(0, 5, 1.5, dtype=lib.int32)", "int32", [0, 1, 2, 3]),
    ("lib.arange(0.7, 9, 1.6, dtype=lib.int64)", "int64", list(range(9))),
    ("lib.arange(0.7, 9, 1.6, dtype=lib.int32)", "int32", list(range(6))),
    ("lib.arange(-0.5, -5, -1.5, dtype=lib.int64)", "int64", [0, -1, -2, -3, -4]),
    ("lib.arange(5, 0, -2)", "int64", [5, 3, 1]),
    ("lib.arange(0, 1, 0.25)", "float32", [0.0, 0.25, 0.5, 0.75]),
    ("lib.arange(2**62, 2**62 + 2)", "int64", [2**62, 2**62 + 1]),
]


def _run(lib, call):
    return eval(call, {"lib": lib, "T": lib.tensor, "np": np})


@pytest.mark.parametrize("call, dtype, values", CALLS)
def test_dtype_and_values(call, dtype, values):
    out = _run(hf, call)
    assert out.dtype is getattr(hf, dtype)
    np.testing.assert_array_equal(out.numpy(), np.array(values, dtype=getattr(hf, dtype).np))


@pytest.mark.parametrize("call, dtype, values", CALLS)
def test_matches_torch(call, dtype, values):
    torch = pytest.importorskip("torch")
    try:
        want = _run(torch, call)
    except TypeError:  # torch 2.13 refuses arange(1, tensor(4)) in some argument positions
        pytest.skip("torch refuses this argument form")
    assert str(want.dtype) == f"torch.{dtype}"
    np.testing.assert_array_equal(want.numpy(), np.array(values, dtype=getattr(hf, dtype).np))


@pytest.mark.parametrize("args", [(0, 5, 0.5), (0, 1, 0.3), (0, -3, -0.5)])
def test_integer_arange_refuses_a_step_that_truncates_to_zero(args):
    with pytest.raises(ValueError, match=r"arange: step must be nonzero \(start=0.*step="):
        hf.arange(*args, dtype=hf.int64)
    with pytest.raises(ValueError, match="arange: step must be nonzero"):
        hf.arange(0, 5, 0)


def test_arange_refuses_bounds_against_the_step():
    with pytest.raises(RuntimeError, match="arange: the bounds and the step's sign"):
        hf.arange(5, 1)
    with pytest.raises(RuntimeError, match="arange"):
        hf.arange(0, 3, -1)
    assert hf.arange(0).shape == (0,)
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError):
        torch.arange(0, 5, 0.5, dtype=torch.int64)
    with pytest.raises(RuntimeError):
        torch.arange(5, 1)


def test_tensor_of_unsupported_elements_names_them():
    with pytest.raises(TypeError, match="NoneType"):
        hf.tensor([1, None])


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_float_arange_is_start_plus_i_step_rounded_once(dtype):
    # PyTorch's start + i * step worked in float64; numpy's float32 arange adds a rounded
    # step (arange(0, 1, 0.3)[3] was 0.90000004 where PyTorch gives 0.9)
    for start, end, step in [(0, 1, 0.3), (0, 0.7, 0.1), (-1.3, 2.2, 0.4), (2.5, -2, -0.7)]:
        got = hf.arange(start, end, step, dtype=dtype).numpy()
        n = int(np.ceil((end - start) / step))
        want = (start + np.arange(n, dtype=np.float64) * step).astype(dtype)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_integer_linspace_truncates_toward_zero_as_torch(dtype):
    # bounds and values truncate toward 0 and the second half counts back from the end
    # (numpy floors: -3 for the second value of linspace(-5, 5, 5), PyTorch gives -2)
    cases = {(-5, 5, 5): [-5, -2, 0, 2, 5], (0.5, 9.5, 3): [0, 4, 9], (0, 10, 4): [0, 3, 6, 10],
             (-3.3, 7.1, 3): [-3, 2, 7], (7, -3, 4): [7, 3, 0, -3], (2.7, 0, 1): [2],
             (0, 1, 0): []}
    for (start, end, steps), want in cases.items():
        got = hf.linspace(start, end, steps, dtype=dtype)
        assert got.dtype == getattr(hf, dtype) and got.tolist() == want, (start, end, steps)
    torch = pytest.importorskip("torch")
    for start, end, steps in [(-5, 5, 7), (0.5, 9.5, 100), (-1e3, 3.7, 33), (3, 1000, 15)]:
        want = torch.linspace(start, end, steps, dtype=getattr(torch, dtype)).tolist()
        assert hf.linspace(start, end, steps, dtype=dtype).tolist() == want


NEW_CALLS = [  # (call on x = float64 [1.0] and i = int32 [1]; dtype; values) -- PyTorch's rules
    ("x.new_tensor([0.1, 2])", "float64", [0.1, 2.0]),  # built as float64, not via float32
    ("i.new_tensor([1.7, -2.5])", "int32", [1, -2]),
    ("i.new_tensor(3, dtype=lib.float16)", "float16", 3.0),
    ("i.new_tensor(x * 3)", "int32", [3]),
    ("x.new_tensor([[True], [False]])", "float64", [[1.0], [0.0]]),
    ("i.new_empty(2, 3)", "int32", np.zeros((2, 3))),
    ("x.new_empty((2,), dtype=lib.bool)", "bool", [False, False]),
]


@pytest.mark.parametrize("call, dtype, values", NEW_CALLS)
def test_new_tensor_and_new_empty(call, dtype, values):
    """``Tensor.new_tensor``/``new_empty`` exist (they raised AttributeError) and take this
    tensor's dtype unless ``dtype`` is given; ``new_empty`` gives zeros (README)."""
    def run(lib):
        names = {"lib": lib, "x": lib.tensor([1.0], dtype=lib.float64),
                 "i": lib.tensor([1], dtype=lib.int32)}
        return eval(call, names)  # noqa: S307
    out = run(hf)
    assert out.dtype is getattr(hf, dtype)
    np.testing.assert_array_equal(out.numpy(), np.array(values, dtype=getattr(hf, dtype).np))
    torch = pytest.importorskip("torch")
    want = run(torch)
    assert str(want.dtype) == f"torch.{dtype}" and tuple(want.shape) == out.shape
    if "empty" not in call:
        np.testing.assert_array_equal(out.numpy(), want.numpy())


def test_new_tensor_is_a_copy_without_history():
    x = hf.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y.new_tensor(y)
    assert not z.requires_grad and z.is_leaf and z.tolist() == [2.0, 4.0]
    z.add_(1)
    assert y.tolist() == [2.0, 4.0]
    w = y.new_tensor([1.0], requires_grad=True)
    assert w.requires_grad and w.is_leaf and w.dtype is hf.float32
