"""hybridfw.dtypes against PyTorch: hf.set_default_dtype / hf.get_default_dtype against
torch.set_default_dtype; and the promotion of numpy scalar operands: they count as the
Python numbers they hold, as PyTorch wraps them, in eager ops and in static programs alike
(they were 0-d tensors of their own dtype: ``int32_tensor * np.float64(0.5)`` was float64
where PyTorch gives float32, ``int32_0d + np.int64(3)`` int64 where it gives int32). numpy
bools stay bools (PyTorch reads them as floats: ``mask & np.True_`` raises there)."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw import static


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


# (tensor dtype, 0-d?, numpy scalar, expected dtype -- PyTorch's)
CASES = [
    ("int32", False, np.float64(0.5), "float32"),
    ("int64", False, np.float16(1.5), "float32"),
    ("int32", True, np.float64(2.5), "float32"),
    ("int32", True, np.int64(3), "int32"),
    ("bool", False, np.int32(3), "int64"),
    ("bool", True, np.int8(2), "int64"),
    ("bool", False, np.float64(0.5), "float32"),
    ("float16", False, np.float64(0.5), "float16"),
    ("float16", True, np.float32(0.5), "float16"),
    ("float32", False, np.int64(2), "float32"),
    ("int32", False, np.bool_(True), "int32"),
]


def _operand(lib, dtype, zero_d):
    data = np.array(3 if zero_d else [1, 2, 3]).astype(dtype)
    return lib.from_numpy(data)


@pytest.mark.parametrize("dtype, zero_d, scalar, expected", CASES)
def test_numpy_scalars_promote_as_python_numbers(dtype, zero_d, scalar, expected):
    x = _operand(hf, dtype, zero_d)
    for out in (x * scalar, scalar * x, hf.where(x > 1, x, scalar), x.clamp(max=scalar)):
        assert out.dtype == expected
    assert hf.result_type(x, scalar) == expected
    np.testing.assert_array_equal((x * scalar).numpy(), (x * scalar.item()).numpy())
    torch = pytest.importorskip("torch")
    if isinstance(scalar, np.bool_):
        return  # PyTorch reads a numpy bool as a float
    t = _operand(torch, dtype, zero_d)
    assert str((t * scalar).dtype) == f"torch.{expected}"
    np.testing.assert_array_equal((x * scalar).numpy(), (t * scalar).numpy())


def test_static_program_reads_numpy_scalars_as_eager_code():
    prog = static.Program()
    with static.program_guard(prog):
        v = static.data("x", [3], "int32")
        out = v * np.float64(0.5) + v[0] * np.int64(2)
    assert out.dtype == "float32"
    (got,) = static.Executor().run(prog, feed={"x": hf.tensor([1, 2, 3], dtype=hf.int32)},
                                   fetch_list=[out], return_numpy=True)
    x = hf.tensor([1, 2, 3], dtype=hf.int32)
    eager = x * np.float64(0.5) + x[0] * np.int64(2)
    assert eager.dtype == "float32"
    np.testing.assert_array_equal(np.asarray(got), eager.numpy())


FLOATS = ["float16", "float32", "float64"]
INTS = ["int8", "uint8", "int16", "int32", "int64"]


def test_finfo_and_iinfo_as_pytorch():
    """``hf.finfo``/``hf.iinfo`` exist (``hf.finfo(x.dtype).min`` is the usual attention-mask
    fill); every field and the repr equal PyTorch's."""
    assert hf.finfo(hf.float16).max == 65504.0 and hf.finfo().dtype == "float32"
    assert hf.finfo("float64").eps == np.finfo(np.float64).eps
    assert hf.finfo(hf.float16).resolution == 0.001  # exact, not rounded to float16
    assert (hf.iinfo(hf.int32).min, hf.iinfo(hf.uint8).max) == (-2**31, 255)
    with pytest.raises(TypeError, match="finfo.*int64.*iinfo"):
        hf.finfo(hf.int64)
    with pytest.raises(TypeError, match="iinfo.*float32.*finfo"):
        hf.iinfo(hf.float32)
    with pytest.raises(TypeError, match="iinfo.*bool"):
        hf.iinfo(hf.bool)
    torch = pytest.importorskip("torch")
    for name in FLOATS:
        ours, theirs = hf.finfo(getattr(hf, name)), torch.finfo(getattr(torch, name))
        assert repr(ours) == repr(theirs) and ours.dtype == str(theirs.dtype)
        for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
            assert getattr(ours, field) == getattr(theirs, field), (name, field)
    for name in INTS:
        ours, theirs = hf.iinfo(getattr(hf, name)), torch.iinfo(getattr(torch, name))
        assert repr(ours) == repr(theirs)
        assert (ours.bits, ours.max, ours.min, ours.dtype) == \
            (theirs.bits, theirs.max, theirs.min, theirs.dtype)


def test_byte_char_short_and_is_signed():
    """PyTorch's ``byte() char() short()`` casts, ``is_signed()`` and ``dtype.is_signed``
    (they raised AttributeError)."""
    x = hf.tensor([1.5, -2.0, 100.0])
    casts = {"byte": "uint8", "char": "int8", "short": "int16"}
    for method, dtype in casts.items():
        out = getattr(x, method)()
        assert out.dtype is getattr(hf, dtype)
        np.testing.assert_array_equal(out.numpy(), x.numpy().astype(dtype))
    assert hf.short is hf.int16
    signed = {d: getattr(hf, d).is_signed for d in FLOATS + INTS}
    assert signed == {**{d: True for d in FLOATS + INTS}, "uint8": False}
    assert not hf.bool.is_signed and not x.byte().is_signed() and x.is_signed()
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.5, -2.0, 100.0])
    for method in ("char", "short"):  # (byte() of a negative float is undefined in C)
        np.testing.assert_array_equal(getattr(x, method)().numpy(), getattr(t, method)().numpy())
    for d in FLOATS + INTS:
        assert getattr(hf, d).is_signed == getattr(torch, d).is_signed


def test_a_numpy_scalar_alone_is_a_0d_tensor_eager_and_static():
    """Beside a tensor a numpy scalar is the Python number it holds; alone (no tensor among the
    operands) it is a 0-d tensor of its dtype, as before, eagerly and in a static program."""
    y = hf.exp(np.float32(1.0))
    assert y.dtype is hf.float32 and y.shape == ()
    np.testing.assert_allclose(y.item(), np.exp(np.float32(1.0)), rtol=1e-6)
    assert hf.isnan(np.float64(1.0)).item() is False
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        z = hf.isnan(np.float64(np.nan))
    assert hf.static.Executor().run(prog, fetch_list=[z], return_numpy=True)[0].item() is True


@pytest.mark.parametrize("call", [
    "full((2,), 1e40)", "full((2,), float('nan'), dtype=hf.int64)",
    "zeros(2, dtype=hf.int64).fill_(float('inf'))",
    "zeros(2).masked_fill(hf.tensor([True, False]), 1e40)",
    "zeros(2, dtype=hf.int32).fill_(2 ** 40)", "full((2,), 300, dtype=hf.uint8)",
    "zeros(2, dtype=hf.float16).masked_fill(hf.tensor([True, False]), -1e9)",
])
def test_a_fill_value_that_does_not_fit_the_dtype_raises_as_torch(call):
    """numpy gave INT_MIN for NaN, inf for 1e40 in float32, or wrapped, silently (with a numpy
    RuntimeWarning at most); PyTorch refuses each with a RuntimeError."""
    with pytest.raises(RuntimeError, match="cannot be converted to .* without overflow"):
        eval("hf." + call, {"hf": hf})
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="cannot be converted"):
        eval("torch." + call.replace("hf.", "torch."), {"torch": torch})


def test_fill_values_that_fit_are_kept():
    assert hf.full((2,), float("inf")).tolist() == [float("inf")] * 2
    assert hf.full((2,), -1, dtype=hf.int8).tolist() == [-1, -1]
    x = hf.zeros(3, dtype=hf.int64).masked_fill(hf.tensor([True, False, True]), 2.7)
    assert x.tolist() == [2, 0, 2]
    y = hf.zeros(2, dtype=hf.float16)
    y[0] = 65504.0
    assert y.tolist() == [65504.0, 0.0]
