"""Error types and messages: a shape problem is a ValueError, a dtype problem a TypeError, an
out-of-range index an IndexError, and each message names the op and the shapes/dtypes."""
import re

import pytest

import hybridfw as hf


def _raises(exc_type, fn, *fragments):
    with pytest.raises(exc_type) as info:
        fn()
    msg = str(info.value)
    for f in fragments:
        assert f in msg, f"{f!r} not in error message {msg!r}"
    return msg


# =============================================================================== shapes
def test_matmul_shape_mismatch():
    _raises(ValueError, lambda: hf.ones(3, 4) @ hf.ones(5, 2), "matmul", "(3, 4)", "(5, 2)")
    _raises(ValueError, lambda: hf.matmul(hf.ones(3, 4), hf.ones(5, 2)), "matmul", "(3, 4)",
            "(5, 2)")
    _raises(ValueError, lambda: hf.ones(2, 3, 4) @ hf.ones(3), "matmul", "(2, 3, 4)", "(3,)")


@pytest.mark.parametrize("op, name", [
    (lambda a, b: a + b, "add"), (lambda a, b: a - b, "sub"), (lambda a, b: a * b, "mul"),
    (lambda a, b: a / b, "div"), (lambda a, b: hf.maximum(a, b), "maximum"),
])
def test_broadcast_failure_names_op_and_shapes(op, name):
    _raises(ValueError, lambda: op(hf.ones(2, 3), hf.ones(4)), name, "(2, 3)", "(4,)")


def test_comparison_broadcast_failure():
    _raises(ValueError, lambda: hf.ones(2, 3) < hf.ones(2), "(2, 3)", "(2,)")


def test_reshape_to_wrong_size():
    _raises(ValueError, lambda: hf.ones(2, 3).reshape(4, 2), "reshape", "(2, 3)", "(4, 2)")
    _raises(ValueError, lambda: hf.ones(2, 3).view(5), "(2, 3)", "5")
    _raises(ValueError, lambda: hf.ones(2, 3).reshape(-1, -1), "reshape")
    _raises(ValueError, lambda: hf.ones(2, 3).reshape(4, -1), "reshape", "(2, 3)")


def test_cat_and_stack_mismatch():
    _raises(ValueError, lambda: hf.cat([hf.ones(2, 3), hf.ones(2, 4)], dim=0), "cat", "(2, 3)",
            "(2, 4)")
    _raises(ValueError, lambda: hf.cat([hf.ones(2, 3), hf.ones(3)]), "cat", "(2, 3)", "(3,)")
    _raises(ValueError, lambda: hf.cat([]), "cat")
    _raises(ValueError, lambda: hf.stack([hf.ones(2, 3), hf.ones(2, 4)]), "stack", "(2, 3)",
            "(2, 4)")


def test_other_shape_errors():
    _raises(ValueError, lambda: hf.ones(3).expand(2, 4), "(3,)", "(2, 4)")
    _raises(ValueError, lambda: hf.ones(2, 3).permute(0, 0), "permute", "(2, 3)")
    _raises(ValueError, lambda: hf.split(hf.ones(5), [2, 2]), "split")
    _raises(ValueError, lambda: hf.einsum("ij,jk->ik", hf.ones(2, 3), hf.ones(4, 5)), "einsum")


def test_setitem_value_shape_mismatch():
    x = hf.zeros(3, 4)

    def assign():
        x[0] = hf.ones(5)
    _raises(ValueError, assign, "(5,)", "(4,)")
    assert x.numpy().sum() == 0


# =============================================================================== indices
def test_index_out_of_bounds():
    _raises(IndexError, lambda: hf.ones(3)[5], "getitem", "5", "3")
    _raises(IndexError, lambda: hf.ones(3)[-4], "getitem")
    _raises(IndexError, lambda: hf.ones(2, 3)[0, 7], "getitem", "7")
    _raises(IndexError, lambda: hf.ones(3)[0, 0], "getitem")                 # too many indices
    _raises(IndexError, lambda: hf.ones(3)[hf.tensor([0, 5])], "getitem", "5")
    _raises(IndexError, lambda: hf.ones(3)[hf.tensor([0.0])], "getitem")    # float index


def test_dim_out_of_range_is_index_error():
    _raises(IndexError, lambda: hf.ones(2, 3).sum(dim=2), "sum", "2")
    _raises(IndexError, lambda: hf.ones(2, 3).transpose(0, 3), "transpose", "3")
    _raises(IndexError, lambda: hf.ones(3).squeeze(3), "squeeze")
    _raises(IndexError, lambda: hf.ones(2, 3).cumsum(3), "cumsum", "3")
    _raises(IndexError, lambda: hf.ones(2, 3).max(dim=-3), "max")


# =============================================================================== dtypes
def test_bitwise_ops_on_float_are_type_errors():
    _raises(TypeError, lambda: hf.ones(2) & hf.ones(2), "bitwise_and", "float32")
    _raises(TypeError, lambda: hf.ones(2) | hf.tensor([True, False]), "bitwise_or", "float32")
    _raises(TypeError, lambda: ~hf.ones(2, dtype="float64"), "bitwise_not", "float64")


def test_requires_grad_on_int_is_type_error():
    _raises(TypeError, lambda: hf.ones(2, dtype="int64").requires_grad_(), "int64")
    _raises(TypeError, lambda: hf.tensor([1, 2], requires_grad=True), "int64")
    _raises(TypeError, lambda: hf.zeros(2, dtype="bool", requires_grad=True), "bool")


def test_other_dtype_errors():
    _raises(TypeError, lambda: hf.ones(2, dtype="float32") @ hf.ones(2, dtype="float64"),
            "matmul", "float32", "float64")
    _raises(TypeError, lambda: hf.where(hf.ones(2), hf.ones(2), hf.ones(2)), "where", "float32")
    _raises(TypeError, lambda: hf.ones(2, dtype="int64").mean(), "mean", "int64")
    _raises(TypeError, lambda: hf.zeros(2, dtype="complex64"), "complex64")
    _raises(TypeError, lambda: hf.ones(2, 3).gather(1, hf.tensor([[0], [1]], dtype="float32")),
            "gather", "float32")
    _raises(TypeError, lambda: hf.randint(0, 3, (2,), dtype="complex64"), "complex64")


def test_inplace_result_type_error():
    x = hf.tensor([1, 2, 3])
    msg = _raises(TypeError, lambda: x.add_(0.5), "int64")
    assert re.search("float32|float", msg)
    assert x.tolist() == [1, 2, 3]


# =============================================================================== misc runtime
def test_ambiguous_truth_value():
    with pytest.raises(RuntimeError):
        bool(hf.ones(2))
    assert bool(hf.ones(1)) is True
    assert bool(hf.zeros(())) is False


def test_item_of_many_elements():
    with pytest.raises((ValueError, RuntimeError)) as info:
        hf.ones(2, 2).item()
    assert "(2, 2)" in str(info.value) or "4" in str(info.value)


# =============================================================================== devices
@pytest.mark.skipif(hf.cuda.is_available(), reason="a GPU is available")
def test_to_cuda_without_gpu_raises_runtime_error():
    x = hf.ones(2)
    _raises(RuntimeError, lambda: x.to("cuda"), "CUDA")
    _raises(RuntimeError, lambda: x.cuda(), "CUDA")
    _raises(RuntimeError, lambda: x.to(hf.device("cuda:0")), "CUDA")
    _raises(RuntimeError, lambda: hf.zeros(2, device="cuda"), "CUDA")
    _raises(RuntimeError, lambda: hf.tensor([1.0], device="cuda"), "CUDA")
    assert x.device == "cpu"


def test_unknown_device_type():
    _raises(ValueError, lambda: hf.device("tpu"), "tpu")
    with pytest.raises(ValueError):
        hf.device("cuda:x")
    with pytest.raises(ValueError):
        hf.zeros(2, device="mps:0x")


# ====================================================== composites name the op the user called
def test_view_expand_masked_fill_errors_name_their_op():
    _raises(ValueError, lambda: hf.zeros(2, 3).view(5), "view", "(5,)", "(2, 3)")
    _raises(ValueError, lambda: hf.zeros(2, 3).view((4, -1)), "view", "(2, 3)")
    _raises(ValueError, lambda: hf.zeros(2, 3).expand(4, 3), "expand", "(2, 3)", "(4, 3)")
    _raises(ValueError, lambda: hf.zeros(2, 3).expand(3), "expand", "fewer dims")
    _raises(ValueError, lambda: hf.zeros(2, 3).broadcast_to((4, 3)), "broadcast_to", "(2, 3)")
    _raises(ValueError, lambda: hf.zeros(2, 3).masked_fill(hf.zeros(4, dtype=hf.bool), 1.0),
            "masked_fill", "(2, 3)", "(4,)")
    _raises(TypeError, lambda: hf.zeros(2).masked_fill(hf.zeros(2), 1.0),
            "masked_fill", "bool", "float32")
    # the valid forms still work
    assert hf.zeros(2, 3).view(3, -1).shape == (3, 2)
    assert hf.zeros(1, 3).expand(-1, 3).shape == (1, 3)
    assert hf.zeros(3).masked_fill(hf.ones(2, 3, dtype=hf.bool), 1.0).tolist() == [[1.0] * 3] * 2
