"""hf.set_default_dtype / hf.get_default_dtype against torch.set_default_dtype."""
import pytest

import hybridfw as hf


@pytest.fixture
def restore_default_dtype():
    try:
        yield
    finally:
        hf.set_default_dtype(hf.float32)


def _default_dtype_uses(lib):
    nn = lib.nn
    return {
        "tensor": lib.tensor([1.5]), "tensor_0d": lib.tensor(1.5), "tensor_empty": lib.tensor([]),
        "Tensor": lib.Tensor([1, 2]), "zeros": lib.zeros(2), "ones": lib.ones(2),
        "empty": lib.empty(2), "rand": lib.rand(2), "randn": lib.randn(2),
        "full_float": lib.full((2,), 1.5), "full_int": lib.full((2,), 1),
        "arange_float": lib.arange(0., 3), "arange_int": lib.arange(3),
        "linspace": lib.linspace(0, 1, 3), "eye": lib.eye(2),
        "int_times_float": lib.tensor([1, 2]) * 1.5, "bool_plus_float": lib.tensor([True]) + 1.5,
        "int_div_int": lib.tensor([1, 2]) / lib.tensor([1, 2]),
        "int_sqrt": lib.tensor([1, 2]).sqrt(), "int_pow_half": lib.tensor([2]) ** 0.5,
        "float32_times_float": lib.tensor([1.], dtype=lib.float32) * 1.5,
        "where_scalars": lib.where(lib.tensor([True, False]), 1.5, 2),
        "linear_weight": nn.Linear(2, 2).weight, "linear_bias": nn.Linear(2, 2).bias,
        "conv_weight": nn.Conv2d(1, 1, 2).weight, "layer_norm": nn.LayerNorm(2).weight,
        "batch_norm_mean": nn.BatchNorm1d(2).running_mean,
        "embedding": nn.Embedding(3, 2).weight, "lstm": nn.LSTM(2, 2).weight_ih_l0,
    }


@pytest.mark.parametrize("name", ["float64", "float16"])
def test_default_dtype_follows_torch(name, restore_default_dtype):
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(getattr(torch, name))
    try:
        want = {k: str(v.dtype).split(".")[1] for k, v in _default_dtype_uses(torch).items()}
    finally:
        torch.set_default_dtype(torch.float32)
    hf.set_default_dtype(getattr(hf, name))
    assert hf.get_default_dtype() is getattr(hf, name)
    got = {k: v.dtype.name for k, v in _default_dtype_uses(hf).items()}
    assert got == want
    assert want["tensor"] == name  # the comparison is not vacuous


def test_default_dtype_round_trip_and_cached_promotion(restore_default_dtype):
    x = hf.tensor([1, 2])
    assert (x * 1.5).dtype is hf.float32  # promotion results are cached per operand kinds
    hf.set_default_dtype("float64")
    assert (x * 1.5).dtype is hf.float64
    hf.set_default_dtype(hf.float32)
    assert (x * 1.5).dtype is hf.float32 and hf.get_default_dtype() is hf.float32


@pytest.mark.parametrize("bad", [hf.int32, hf.int64, hf.bool, "int64", None, "complex64"])
def test_set_default_dtype_refuses_non_float(bad, restore_default_dtype):
    with pytest.raises(TypeError, match="only floating-point types"):
        hf.set_default_dtype(bad)
    assert hf.get_default_dtype() is hf.float32
