"""Eager Tensor: creation, attributes, conversion, dtype promotion, indexing, in-place ops.

Expected values are hand-computed or computed independently with numpy; where torch is
importable, dtype promotion is cross-checked against it (torch is only an extra oracle).
"""
import numpy as np
import pytest

import hybridfw as hf


def _np(t):
    return np.asarray(t.detach().numpy())


# =============================================================================== creation
@pytest.mark.parametrize("data, expected", [
    ([1.0, 2.0], "float32"),
    (2.5, "float32"),
    ([[1, 2.5], [3, 4]], "float32"),   # mixed ints and floats -> default float
    ([1, 2, 3], "int64"),
    (7, "int64"),
    ([[1, 2], [3, 4]], "int64"),
    ([True, False], "bool"),
    (True, "bool"),
])
def test_tensor_infers_pytorch_dtype_from_python_data(data, expected):
    t = hf.tensor(data)
    assert t.dtype == expected
    assert t.dtype is hf.as_dtype(expected)
    np.testing.assert_array_equal(t.numpy(), np.asarray(data).astype(expected))
    assert t.shape == np.asarray(data).shape


@pytest.mark.parametrize("np_dtype", ["float64", "float32", "float16", "int32", "int64", "bool"])
def test_tensor_from_numpy_array_keeps_its_dtype(np_dtype):
    a = np.arange(6).reshape(2, 3).astype(np_dtype)
    t = hf.tensor(a)
    assert t.dtype == np_dtype
    assert t.shape == (2, 3)
    np.testing.assert_array_equal(t.numpy(), a)


@pytest.mark.parametrize("scalar, expected", [
    (np.float64(2.5), "float64"), (np.float32(1.5), "float32"), (np.int32(3), "int32"),
    (np.int64(4), "int64"), (np.bool_(True), "bool"), (np.float16(0.5), "float16"),
])
def test_tensor_from_numpy_scalar_keeps_its_dtype(scalar, expected):
    # PyTorch: torch.tensor(np.float64(2.5)).dtype is torch.float64 (like a 0-d array)
    t = hf.tensor(scalar)
    assert t.shape == ()
    assert t.dtype == expected
    assert t.item() == scalar.item()
    assert hf.tensor(np.array(scalar)).dtype == expected


def test_tensor_from_empty_list():
    t = hf.tensor([])
    assert t.shape == (0,) and t.dtype is hf.float32 and t.numel() == 0


def test_tensor_copies_its_data():
    a = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    t = hf.tensor(a)
    a[0] = 100.0
    assert t.tolist() == [1.0, 2.0, 3.0]
    lst = [1, 2, 3]
    t2 = hf.tensor(lst)
    lst[0] = 9
    assert t2.tolist() == [1, 2, 3]


def test_tensor_with_dtype_and_requires_grad():
    t = hf.tensor([1, 2, 3], dtype="float64", requires_grad=True)
    assert t.dtype is hf.float64
    assert t.requires_grad and t.is_leaf
    assert t.detach().tolist() == [1.0, 2.0, 3.0]
    t = hf.tensor([1.7, -1.7], dtype=hf.int32)
    assert t.dtype is hf.int32
    assert t.tolist() == [1, -1]


def test_tensor_from_tensor_is_a_copy():
    x = hf.tensor([1.0, 2.0])
    y = hf.tensor(x)
    y[0] = 5.0
    assert x.tolist() == [1.0, 2.0]
    assert y.tolist() == [5.0, 2.0]


def test_from_numpy_shares_memory_both_ways():
    a = np.arange(4, dtype=np.float64)
    t = hf.from_numpy(a)
    assert t.dtype is hf.float64
    a[1] = 10.0
    assert t.tolist() == [0.0, 10.0, 2.0, 3.0]
    t[2] = -1.0
    assert a[2] == -1.0
    t.add_(1)
    np.testing.assert_array_equal(a, [1.0, 11.0, 0.0, 4.0])
    assert np.shares_memory(t.numpy(), a)


def test_from_numpy_rejects_non_arrays():
    with pytest.raises(TypeError):
        hf.from_numpy([1, 2, 3])


@pytest.mark.parametrize("factory, fill", [(hf.zeros, 0), (hf.ones, 1)])
def test_zeros_ones_shapes_and_dtypes(factory, fill):
    for args in [(2, 3), ((2, 3),), ([2, 3],)]:
        t = factory(*args)
        assert t.shape == (2, 3)
        assert t.dtype is hf.float32
        np.testing.assert_array_equal(t.numpy(), np.full((2, 3), fill, np.float32))
    assert factory(4, dtype="int32").dtype is hf.int32
    assert factory(4, dtype=hf.float64).dtype is hf.float64
    assert factory(4, dtype=hf.bool).tolist() == [bool(fill)] * 4
    assert factory(()).shape == ()
    assert factory(0).shape == (0,)


def test_empty_has_shape_and_dtype():
    t = hf.empty(3, 2, dtype="float64")
    assert t.shape == (3, 2)
    assert t.dtype is hf.float64


def test_full_infers_dtype_from_value():
    t = hf.full((2, 2), 7)
    assert t.dtype is hf.int64 and t.tolist() == [[7, 7], [7, 7]]
    t = hf.full((3,), 1.5)
    assert t.dtype is hf.float32 and t.tolist() == [1.5, 1.5, 1.5]
    t = hf.full((2,), True)
    assert t.dtype is hf.bool and t.tolist() == [True, True]
    t = hf.full((2,), 3, dtype="float64")
    assert t.dtype is hf.float64 and t.tolist() == [3.0, 3.0]


def test_like_factories():
    x = hf.tensor([[1, 2, 3]], dtype="int32")
    z = hf.zeros_like(x)
    assert z.shape == (1, 3) and z.dtype is hf.int32 and z.tolist() == [[0, 0, 0]]
    o = hf.ones_like(x, dtype="float64")
    assert o.dtype is hf.float64 and o.tolist() == [[1.0, 1.0, 1.0]]
    f = hf.full_like(x, 4)
    assert f.dtype is hf.int32 and f.tolist() == [[4, 4, 4]]
    f = hf.full_like(hf.ones(2), 0.5)
    assert f.dtype is hf.float32 and f.tolist() == [0.5, 0.5]
    # the result is a new tensor
    z[0, 0] = 9
    assert x.tolist() == [[1, 2, 3]]


def test_arange():
    t = hf.arange(5)
    assert t.dtype is hf.int64 and t.tolist() == [0, 1, 2, 3, 4]
    assert hf.arange(2, 6).tolist() == [2, 3, 4, 5]
    assert hf.arange(10, 0, -3).tolist() == [10, 7, 4, 1]
    assert hf.arange(1, 2, 5).tolist() == [1]
    assert hf.arange(3, 3).shape == (0,)
    t = hf.arange(0, 1, 0.25)
    assert t.dtype is hf.float32 and t.tolist() == [0.0, 0.25, 0.5, 0.75]
    t = hf.arange(4, dtype="float64")
    assert t.dtype is hf.float64 and t.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert hf.arange(0.5, 3).tolist() == [0.5, 1.5, 2.5]


def test_linspace_and_eye():
    t = hf.linspace(0, 1, 5)
    assert t.dtype is hf.float32 and t.shape == (5,)
    np.testing.assert_allclose(t.numpy(), [0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(hf.linspace(-1, 1, 3).numpy(), [-1.0, 0.0, 1.0])
    assert hf.linspace(2, 3, 1).tolist() == [2.0]
    e = hf.eye(3)
    assert e.dtype is hf.float32
    np.testing.assert_array_equal(e.numpy(), np.eye(3))
    e = hf.eye(2, 3, dtype="int64")
    assert e.dtype is hf.int64 and e.tolist() == [[1, 0, 0], [0, 1, 0]]


def test_rand_randn_randint_shapes_ranges_dtypes():
    hf.manual_seed(123)
    r = hf.rand(1000)
    assert r.shape == (1000,) and r.dtype is hf.float32
    a = r.numpy()
    assert a.min() >= 0.0 and a.max() < 1.0
    assert 0.4 < a.mean() < 0.6
    n = hf.randn(50, 40)
    assert n.shape == (50, 40) and n.dtype is hf.float32
    b = n.numpy()
    assert abs(b.mean()) < 0.1 and 0.9 < b.std() < 1.1
    assert hf.randn(3, dtype="float64").dtype is hf.float64
    assert hf.rand((2, 3)).shape == (2, 3)
    i = hf.randint(3, 7, (500,))
    assert i.dtype is hf.int64 and i.shape == (500,)
    v = i.numpy()
    assert v.min() >= 3 and v.max() <= 6
    assert set(v.tolist()) == {3, 4, 5, 6}
    j = hf.randint(4, (2, 3))
    assert j.shape == (2, 3) and j.numpy().min() >= 0 and j.numpy().max() < 4


def test_manual_seed_reproducibility():
    def draw():
        return (hf.rand(5).numpy().copy(), hf.randn(2, 3).numpy().copy(),
                hf.randint(0, 100, (6,)).numpy().copy())

    hf.manual_seed(7)
    a = draw()
    hf.manual_seed(7)
    b = draw()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    hf.manual_seed(8)
    c = draw()
    assert not np.array_equal(a[0], c[0])
    # consecutive draws differ
    hf.manual_seed(7)
    assert not np.array_equal(hf.rand(5).numpy(), hf.rand(5).numpy())


# =============================================================================== attributes
def test_basic_attributes():
    x = hf.zeros(2, 3, 4)
    assert isinstance(x.shape, tuple)
    assert x.shape == (2, 3, 4)
    assert all(type(s) is int for s in x.shape)
    assert x.ndim == 3
    assert x.numel() == 24
    assert x.dtype is hf.float32
    assert x.device == hf.device("cpu")
    assert x.device.type == "cpu"
    assert x.requires_grad is False
    assert x.grad is None
    assert x.is_leaf
    s = hf.tensor(3.0)
    assert s.shape == () and s.ndim == 0 and s.numel() == 1
    assert hf.zeros(0, 3).numel() == 0


def test_is_leaf_and_requires_grad_propagation():
    x = hf.ones(3, requires_grad=True)
    c = hf.ones(3)
    assert x.is_leaf and x.requires_grad
    y = x * 2
    assert y.requires_grad and not y.is_leaf
    z = c * 2  # no input requires grad: a leaf that doesn't require grad (as in PyTorch)
    assert not z.requires_grad and z.is_leaf


def test_T_property():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = hf.tensor(a)
    assert x.T.shape == (3, 2)
    np.testing.assert_array_equal(x.T.numpy(), a.T)
    b = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(hf.tensor(b).T.numpy(), b.transpose(2, 1, 0))
    assert hf.ones(5).T.shape == (5,)


# =============================================================================== conversion
def test_numpy_shares_memory_and_dtype():
    x = hf.tensor([1, 2, 3], dtype="int32")
    a = x.numpy()
    assert isinstance(a, np.ndarray) and a.dtype == np.int32
    a[0] = 42
    assert x.tolist() == [42, 2, 3]


def test_numpy_on_tensor_requiring_grad_raises():
    x = hf.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError):
        x.numpy()
    np.testing.assert_array_equal(x.detach().numpy(), [1.0, 1.0])
    # item() and tolist() are fine on tensors that require grad (as in PyTorch)
    assert x.tolist() == [1.0, 1.0]
    assert x.sum().item() == 2.0


def test_item_and_tolist():
    v = hf.tensor(2.5).item()
    assert type(v) is float and v == 2.5
    v = hf.tensor([7]).item()
    assert type(v) is int and v == 7
    v = hf.tensor([[True]]).item()
    assert type(v) is bool and v is True
    with pytest.raises((ValueError, RuntimeError)):
        hf.tensor([1.0, 2.0]).item()
    assert hf.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    lst = hf.tensor([0.5, 1.5]).tolist()
    assert lst == [0.5, 1.5] and all(type(v) is float for v in lst)
    assert hf.tensor(3).tolist() == 3


def test_to_dtype_and_astype():
    x = hf.tensor([1.7, -1.7, 2.0])
    y = x.to(hf.float64)
    assert y.dtype is hf.float64
    np.testing.assert_allclose(y.numpy(), [1.7, -1.7, 2.0], rtol=1e-6)
    i = x.to("int32")
    assert i.dtype is hf.int32 and i.tolist() == [1, -1, 2]  # truncation toward zero
    assert x.astype("int64").dtype is hf.int64
    assert x.astype(hf.float16).dtype is hf.float16
    b = hf.tensor([0.0, 2.0]).to(hf.bool)
    assert b.dtype is hf.bool and b.tolist() == [False, True]
    # conversion makes a new tensor; the source is unchanged
    i[0] = 100
    np.testing.assert_allclose(x.numpy(), [1.7, -1.7, 2.0], rtol=1e-6)
    # float/double/long/int/bool shortcuts
    assert x.double().dtype is hf.float64 and x.long().dtype is hf.int64
    assert x.int().dtype is hf.int32 and hf.tensor([1]).float().dtype is hf.float32


def test_to_device_cpu_and_cpu_method():
    x = hf.tensor([1.0, 2.0])
    assert x.to("cpu") is x   # already there: no copy, same object (as in PyTorch)
    assert x.to(hf.device("cpu")) is x
    assert x.cpu() is x
    y = x.to("cpu", hf.float64)
    assert y.dtype is hf.float64 and y.device == "cpu"


def test_to_takes_non_blocking():
    """``.to(device, non_blocking=True)`` (the usual DataLoader-loop call) and
    ``.cuda(non_blocking=True)`` are accepted as in PyTorch (they raised TypeError), eagerly and
    in a static program."""
    x = hf.tensor([1.0, 2.0])
    assert x.to("cpu", non_blocking=True) is x
    assert x.to(hf.device("cpu"), hf.float64, non_blocking=True).dtype is hf.float64

    @hf.jit.to_static
    def f(t):
        return t.to("cpu", non_blocking=True) * 2

    assert f(x).tolist() == [2.0, 4.0]
    if hf.cuda.is_available():
        assert x.cuda(non_blocking=True).device.type == "cuda"


def test_detach_shares_storage_and_drops_history():
    x = hf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.is_leaf and d.grad is None
    d[0] = 100.0
    assert y.detach().tolist() == [100.0, 4.0, 6.0]
    dx = x.detach()
    with hf.no_grad():
        dx.add_(1)
    assert x.detach().tolist() == [2.0, 3.0, 4.0]
    assert np.shares_memory(dx.numpy(), x.detach().numpy())


def test_data_ptr_tells_shared_memory_apart():
    """torch's data_ptr(): the address of the first element (it was missing)."""
    x = hf.arange(6.0).reshape(2, 3)
    assert x.data_ptr() == x.detach().data_ptr() == x.data.data_ptr() == x[0].data_ptr()
    assert x[1].data_ptr() - x.data_ptr() == 3 * 4
    assert x.clone().data_ptr() != x.data_ptr()
    a = np.zeros(3, np.float32)
    assert hf.from_numpy(a).data_ptr() == a.ctypes.data


def test_as_tensor_shares_a_numpy_arrays_memory_where_dtype_and_device_agree():
    a = np.arange(4.0)
    t = hf.as_tensor(a)
    a[0] = 9.0
    assert t.dtype is hf.float64 and t.tolist() == [9.0, 1.0, 2.0, 3.0]
    assert hf.as_tensor(a, dtype="float64", device="cpu").data_ptr() == a.ctypes.data
    copied = hf.as_tensor(a, dtype=hf.float32)       # another dtype: a copy
    a[1] = 9.0
    assert copied.tolist() == [9.0, 1.0, 2.0, 3.0]
    frozen = np.arange(3)
    frozen.flags.writeable = False                   # read-only memory: a copy
    assert hf.as_tensor(frozen).data_ptr() != frozen.ctypes.data


def test_data_setter_keeps_a_tensor_requiring_grad_floating_point():
    x = hf.tensor([1.0, 2.0], requires_grad=True)
    x.data = hf.tensor([5.0, 6.0])
    (x * x).sum().backward()
    assert x.grad.tolist() == [10.0, 12.0] and x.is_leaf
    with pytest.raises(RuntimeError, match="requires grad .* got dtype hybridfw.int64"):
        x.data = hf.tensor([5, 6])
    with pytest.raises(TypeError, match="expected a Tensor, got list"):
        x.data = [1.0, 2.0]
    assert x.dtype is hf.float32

def test_clone_is_an_independent_copy_that_keeps_gradient_flow():
    x = hf.tensor([1.0, 2.0], requires_grad=True)
    c = x.clone()
    assert c.requires_grad and not c.is_leaf
    assert not np.shares_memory(c.detach().numpy(), x.detach().numpy())
    (c * hf.tensor([3.0, 4.0])).sum().backward()
    assert x.grad.tolist() == [3.0, 4.0]
    plain = hf.tensor([1, 2])
    p = plain.clone()
    p[0] = 5
    assert plain.tolist() == [1, 2] and p.dtype is hf.int64


def test_requires_grad_():
    x = hf.zeros(3)
    r = x.requires_grad_()
    assert r is x and x.requires_grad
    x.requires_grad_(False)
    assert not x.requires_grad
    x.requires_grad = True
    assert x.requires_grad


def test_dtype_strings_accepted():
    assert hf.float32 == "float32"
    assert hf.int64 == "int64"
    assert hf.as_dtype("float64") is hf.float64
    assert hf.as_dtype("bool") is hf.bool
    assert hf.zeros(2, dtype="float16").dtype is hf.float16
    assert hf.tensor([1, 2], dtype="float32").dtype is hf.float32
    assert hf.arange(3, dtype="int32").dtype is hf.int32
    assert hf.ones(2).to("float64").dtype is hf.float64
    assert hf.ones(2).astype("bool").dtype is hf.bool
    assert hf.ones(2).sum(dtype="float64").dtype is hf.float64


# =============================================================================== promotion
# operand spec: ('t', dtype) a 1-d tensor, ('z', dtype) a 0-d tensor, ('s', value) a Python scalar
PROMOTION_CASES = [
    # (a, b, op, expected)
    (("t", "float32"), ("s", 2.5), "add", "float32"),
    (("t", "float32"), ("s", 2), "mul", "float32"),
    (("t", "float16"), ("s", 2.5), "mul", "float16"),
    (("t", "float64"), ("s", 2.5), "add", "float64"),
    (("t", "int32"), ("s", 2.5), "add", "float32"),
    (("t", "int32"), ("s", 2), "add", "int32"),
    (("t", "int32"), ("s", True), "mul", "int32"),
    (("t", "int64"), ("t", "int64"), "div", "float32"),
    (("t", "int32"), ("s", 2), "div", "float32"),
    (("t", "int64"), ("s", 2), "floordiv", "int64"),
    (("t", "int64"), ("s", 2), "pow", "int64"),
    (("t", "int64"), ("s", 2.0), "pow", "float32"),
    (("t", "bool"), ("s", 1), "add", "int64"),
    (("t", "bool"), ("s", 1.5), "add", "float32"),
    (("t", "bool"), ("t", "bool"), "mul", "bool"),
    (("t", "bool"), ("t", "int32"), "add", "int32"),
    (("t", "float16"), ("z", "float32"), "add", "float16"),
    (("t", "float16"), ("z", "float64"), "mul", "float16"),
    (("t", "float32"), ("t", "float64"), "add", "float64"),
    (("t", "float16"), ("t", "float32"), "sub", "float32"),
    (("t", "float16"), ("t", "int64"), "add", "float16"),
    (("t", "int32"), ("t", "int64"), "add", "int64"),
    (("t", "uint8"), ("t", "int8"), "add", "int16"),
    (("t", "int32"), ("z", "int64"), "add", "int32"),
    (("t", "int32"), ("z", "float64"), "add", "float64"),
    (("t", "bool"), ("z", "int32"), "add", "int32"),
    (("z", "float32"), ("t", "int64"), "add", "float32"),
    (("z", "float32"), ("z", "float64"), "add", "float64"),
    (("z", "float16"), ("z", "float32"), "mul", "float32"),
    (("z", "int64"), ("s", 2.5), "add", "float32"),
    (("z", "int32"), ("s", 2), "add", "int32"),
    (("z", "float64"), ("s", 2), "sub", "float64"),
    (("s", 3), ("t", "int32"), "sub", "int32"),
    (("s", 1.5), ("t", "int64"), "mul", "float32"),
    (("s", 2), ("t", "bool"), "add", "int64"),
]

_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "floordiv": lambda a, b: a // b,
    "pow": lambda a, b: a ** b,
}


def _make_hf(spec):
    kind, v = spec
    if kind == "s":
        return v
    values = [1, 2, 3] if v != "bool" else [True, False, True]
    if kind == "t":
        return hf.tensor(values, dtype=v)
    return hf.tensor(values[1], dtype=v)


def _case_id(case):
    a, b, op, exp = case
    return f"{a[0]}{a[1]}-{op}-{b[0]}{b[1]}"


@pytest.mark.parametrize("case", PROMOTION_CASES, ids=[_case_id(c) for c in PROMOTION_CASES])
def test_type_promotion_table(case):
    a, b, op, expected = case
    x, y = _make_hf(a), _make_hf(b)
    out = _OPS[op](x, y)
    assert out.dtype == expected, f"{a} {op} {b}: got {out.dtype}, expected {expected}"
    # values agree with a float64 numpy computation
    fx = np.asarray(x.numpy() if isinstance(x, hf.Tensor) else x, dtype=np.float64)
    fy = np.asarray(y.numpy() if isinstance(y, hf.Tensor) else y, dtype=np.float64)
    ref = _OPS[op](fx, fy)
    if expected in ("float16",):
        np.testing.assert_allclose(out.numpy().astype(np.float64), ref, rtol=1e-3)
    else:
        np.testing.assert_allclose(out.numpy().astype(np.float64), ref, rtol=1e-6)


@pytest.mark.parametrize("case", PROMOTION_CASES, ids=[_case_id(c) for c in PROMOTION_CASES])
def test_type_promotion_matches_torch(case):
    torch = pytest.importorskip("torch")
    a, b, op, expected = case

    def make_torch(spec):
        kind, v = spec
        if kind == "s":
            return v
        dt = getattr(torch, v)
        values = [1, 2, 3] if v != "bool" else [True, False, True]
        return torch.tensor(values, dtype=dt) if kind == "t" else torch.tensor(values[1], dtype=dt)

    tout = _OPS[op](make_torch(a), make_torch(b))
    hout = _OPS[op](_make_hf(a), _make_hf(b))
    assert str(tout.dtype).replace("torch.", "") == expected  # the table itself is right
    assert hout.dtype == str(tout.dtype).replace("torch.", "")
    np.testing.assert_allclose(hout.numpy().astype(np.float64),
                               tout.numpy().astype(np.float64), rtol=1e-3)


def test_float_tensor_times_python_float_does_not_upcast_values():
    x = hf.tensor([0.1, 0.2], dtype="float32")
    y = x * 3.3
    assert y.dtype is hf.float32
    np.testing.assert_array_equal(y.numpy(), np.array([0.1, 0.2], np.float32) * np.float32(3.3))


# =============================================================================== comparisons/logic
def test_comparisons_give_bool():
    x = hf.tensor([1, 2, 3])
    y = hf.tensor([3.0, 2.0, 1.0])
    cases = [
        (x < 2.5, [True, True, False]),
        (x <= 2, [True, True, False]),
        (x > y, [False, False, True]),
        (x >= y, [False, True, True]),
        (x == y, [False, True, False]),
        (x != y, [True, False, True]),
        (x == 2, [False, True, False]),
        (2 < x, [False, False, True]),
        (hf.eq(x, y), [False, True, False]),
        (hf.gt(x, 1), [False, True, True]),
    ]
    for out, expected in cases:
        assert out.dtype is hf.bool
        assert out.tolist() == expected
    # broadcasting comparison
    m = hf.tensor([[1.0], [2.0]]) < hf.tensor([1.5, 2.5, 0.5])
    assert m.shape == (2, 3) and m.dtype is hf.bool
    assert m.tolist() == [[True, True, False], [False, True, False]]


def test_bool_logic_operators():
    a = hf.tensor([True, True, False, False])
    b = hf.tensor([True, False, True, False])
    for out, expected in [(a & b, [True, False, False, False]),
                          (a | b, [True, True, True, False]),
                          (a ^ b, [False, True, True, False]),
                          (~a, [False, False, True, True])]:
        assert out.dtype is hf.bool
        assert out.tolist() == expected
    x = hf.tensor([1.0, 5.0, 3.0])
    m = (x > 2) & (x < 4)
    assert m.dtype is hf.bool and m.tolist() == [False, False, True]
    assert (~(x > 2)).tolist() == [True, False, False]


def test_integer_bitwise_operators():
    a = hf.tensor([12, 10])
    b = hf.tensor([10, 6])
    assert (a & b).tolist() == [8, 2]
    assert (a | b).tolist() == [14, 14]
    assert (~a).tolist() == [-13, -11]
    assert (a & b).dtype is hf.int64


def test_arithmetic_operators_values_and_broadcasting():
    a = np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]], np.float32)
    b = np.array([2.0, 3.0, -4.0], np.float32)
    x, y = hf.tensor(a), hf.tensor(b)
    np.testing.assert_allclose((x + y).numpy(), a + b)
    np.testing.assert_allclose((x - y).numpy(), a - b)
    np.testing.assert_allclose((x * y).numpy(), a * b)
    np.testing.assert_allclose((x / y).numpy(), a / b)
    np.testing.assert_allclose((x // y).numpy(), a // b)
    np.testing.assert_allclose((x % y).numpy(), np.mod(a, b))  # sign of divisor, like PyTorch
    np.testing.assert_allclose((x ** 2).numpy(), a ** 2)
    np.testing.assert_allclose((2 ** y).numpy(), 2 ** b)
    np.testing.assert_allclose((1 - x).numpy(), 1 - a)
    np.testing.assert_allclose((1 / y).numpy(), 1 / b)
    np.testing.assert_allclose((-x).numpy(), -a)
    np.testing.assert_allclose(abs(x).numpy(), np.abs(a))
    np.testing.assert_allclose((x @ y).numpy(), a @ b, rtol=1e-6)
    assert (x + y).shape == (2, 3)
    # integer floor division and remainder with negative operands follow Python (PyTorch) rules
    i = hf.tensor([7, -7, 7, -7])
    j = hf.tensor([2, 2, -2, -2])
    assert (i // j).tolist() == [3, -4, -4, 3]
    assert (i % j).tolist() == [1, 1, -1, -1]


# =============================================================================== indexing
@pytest.fixture
def arr():
    return np.arange(24, dtype=np.float32).reshape(4, 6)


@pytest.mark.parametrize("index", [
    1, -1, (2, 3), (-1, -2), slice(1, 3), (slice(None), 1), (slice(None, None, 2),),
    (Ellipsis, 0), (None, 1), (1, None), (slice(1, None), slice(None, 4, 3)),
    (Ellipsis, None), (0, Ellipsis, 2),
])
def test_basic_indexing_reads(arr, index):
    x = hf.tensor(arr)
    out = x[index]
    np.testing.assert_array_equal(out.numpy(), arr[index])
    assert out.shape == arr[index].shape
    assert out.dtype is hf.float32


def _adv_indices():
    return [
        ([0, 2], lambda: hf.tensor([0, 2])),
        ([3, 0, 3], lambda: [3, 0, 3]),
        ((slice(None), [5, 1]), lambda: (slice(None), hf.tensor([5, 1]))),
        (([0, 1], [2, 3]), lambda: (hf.tensor([0, 1]), hf.tensor([2, 3]))),
        (np.array([[0, 1], [2, 3]]), lambda: hf.tensor([[0, 1], [2, 3]])),
        ((1, [0, 5]), lambda: (1, hf.tensor([0, 5]))),
        (([-1, 0], slice(2, 4)), lambda: (hf.tensor([-1, 0]), slice(2, 4))),
        (np.array([True, False, True, False]), lambda: hf.tensor([True, False, True, False])),
        ((slice(None), np.array([True, False] * 3)),
         lambda: (slice(None), hf.tensor([True, False] * 3))),
    ]


@pytest.mark.parametrize("np_index, make_index", _adv_indices())
def test_advanced_indexing_reads(arr, np_index, make_index):
    x = hf.tensor(arr)
    out = x[make_index()]
    expected = arr[np_index] if not isinstance(np_index, list) else arr[np.array(np_index)]
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out.numpy(), expected)


def test_bool_mask_indexing_same_shape(arr):
    x = hf.tensor(arr)
    m = x > 10.5
    out = x[m]
    assert out.shape == (13,)
    np.testing.assert_array_equal(out.numpy(), arr[arr > 10.5])


def test_basic_index_is_a_view_advanced_index_is_a_copy(arr):
    x = hf.tensor(arr.copy())
    v = x[1]
    v[2] = -100.0
    assert x[1, 2].item() == -100.0
    s = x[:, 1:3]
    s.mul_(0)
    assert x[:, 1:3].numpy().sum() == 0
    c = x[hf.tensor([0, 3])]
    c[0, 0] = 555.0
    assert x[0, 0].item() != 555.0


def test_setitem_basic_and_broadcasting():
    x = hf.zeros(3, 4)
    ref = np.zeros((3, 4), np.float32)
    x[0] = 1.0
    ref[0] = 1.0
    x[:, 1] = hf.tensor([5.0, 6.0, 7.0])
    ref[:, 1] = [5.0, 6.0, 7.0]
    x[1:] = hf.tensor([1.0, 2.0, 3.0, 4.0])          # broadcast a row over two rows
    ref[1:] = [1.0, 2.0, 3.0, 4.0]
    x[..., 3] = hf.tensor([[9.0], [8.0], [7.0]]).reshape(3)
    ref[..., 3] = [9.0, 8.0, 7.0]
    x[2, 0] = -1
    ref[2, 0] = -1
    x[:2, :2] = hf.tensor([[10.0], [20.0]])            # (2,1) broadcast to (2,2)
    ref[:2, :2] = [[10.0], [20.0]]
    np.testing.assert_array_equal(x.numpy(), ref)
    assert x.dtype is hf.float32


def test_setitem_value_with_leading_unit_dims_and_its_gradient():
    """As numpy and PyTorch: a value may carry extra leading 1 dims; its gradient keeps them."""
    x = hf.zeros(2, 3)
    v = hf.tensor([[1.0, 2.0, 3.0]], requires_grad=True)  # (1, 3) into x[0] of shape (3,)
    x[0] = v * 2
    ref = np.zeros((2, 3), np.float32)
    ref[0] = np.array([[2.0, 4.0, 6.0]])
    np.testing.assert_array_equal(x.detach().numpy(), ref)
    (x * hf.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), [[2.0, 4.0, 6.0]])
    s = hf.ones(1, 1, 1, requires_grad=True)  # one value broadcast over a (2, 2) slice
    y = hf.zeros(2, 3)
    y[:, 1:] = s * 3
    y.sum().backward()
    np.testing.assert_array_equal(s.grad.numpy(), [[[12.0]]])
    with pytest.raises(ValueError, match=r"index_put: value of shape \(2, 3\)"):
        x[0] = hf.ones(2, 3)


def test_setitem_advanced():
    x = hf.zeros(4, 3)
    ref = np.zeros((4, 3), np.float32)
    x[hf.tensor([0, 2])] = hf.tensor([1.0, 2.0, 3.0])
    ref[[0, 2]] = [1.0, 2.0, 3.0]
    x[[1, 3], [0, 2]] = hf.tensor([7.0, 8.0])
    ref[[1, 3], [0, 2]] = [7.0, 8.0]
    x[x > 2.5] = 0.5
    ref[ref > 2.5] = 0.5
    x[hf.tensor([True, False, False, True]), 1] = -3.0
    ref[[True, False, False, True], 1] = -3.0
    np.testing.assert_array_equal(x.numpy(), ref)


def test_setitem_with_numpy_and_list_values_and_casting():
    x = hf.zeros(2, 3)
    x[0] = np.array([1.0, 2.0, 3.0])
    x[1] = [4, 5, 6]
    assert x.dtype is hf.float32
    assert x.tolist() == [[1, 2, 3], [4, 5, 6]]
    i = hf.zeros(3, dtype="int64")
    i[1] = 7
    assert i.tolist() == [0, 7, 0] and i.dtype is hf.int64


# =============================================================================== in-place
def test_inplace_methods_return_self_and_update_values():
    x = hf.tensor([1.0, 2.0, 3.0])
    assert x.add_(1) is x
    assert x.tolist() == [2.0, 3.0, 4.0]
    x.add_(hf.tensor([1.0, 1.0, 1.0]), alpha=2)
    assert x.tolist() == [4.0, 5.0, 6.0]
    assert x.mul_(hf.tensor(0.5)) is x
    assert x.tolist() == [2.0, 2.5, 3.0]
    x.sub_(1).div_(2)
    assert x.tolist() == [0.5, 0.75, 1.0]
    assert x.fill_(7) is x
    assert x.tolist() == [7.0, 7.0, 7.0]
    assert x.zero_() is x
    assert x.tolist() == [0.0, 0.0, 0.0]
    assert x.dtype is hf.float32


def test_inplace_broadcasting_of_the_other_operand():
    x = hf.ones(2, 3)
    x.add_(hf.tensor([1.0, 2.0, 3.0]))
    x.mul_(hf.tensor([[1.0], [10.0]]))
    np.testing.assert_array_equal(x.numpy(), [[2, 3, 4], [20, 30, 40]])


def test_inplace_cannot_change_shape():
    x = hf.ones(3)
    with pytest.raises((ValueError, RuntimeError)):
        x.add_(hf.ones(2, 3))
    assert x.shape == (3,) and x.tolist() == [1.0, 1.0, 1.0]


def test_inplace_cannot_upcast_integer_target():
    x = hf.tensor([1, 2, 3])
    with pytest.raises((TypeError, RuntimeError)):
        x.add_(0.5)
    assert x.tolist() == [1, 2, 3]
    x.add_(2)  # int into int is fine
    assert x.tolist() == [3, 4, 5]
    f = hf.ones(2)
    f.add_(hf.tensor([1, 2]))  # int into float is fine
    assert f.tolist() == [2.0, 3.0]


def test_copy_():
    x = hf.zeros(2, 3)
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert x.copy_(hf.tensor(src)) is x
    np.testing.assert_array_equal(x.numpy(), src)
    x.copy_(hf.tensor([1.0, 2.0, 3.0]))          # broadcast source
    np.testing.assert_array_equal(x.numpy(), [[1, 2, 3], [1, 2, 3]])
    x.copy_(hf.tensor([[1, 2, 3], [4, 5, 6]]))   # int source is cast to the target's dtype
    assert x.dtype is hf.float32
    np.testing.assert_array_equal(x.numpy(), [[1, 2, 3], [4, 5, 6]])
    i = hf.zeros(2, dtype="int32")
    i.copy_(hf.tensor([1.9, -1.9]))
    assert i.dtype is hf.int32 and i.tolist() == [1, -1]
    # the source stays independent
    s = hf.tensor([1.0, 2.0])
    d = hf.zeros(2)
    d.copy_(s)
    d[0] = 9.0
    assert s.tolist() == [1.0, 2.0]


def test_inplace_on_expanded_view_raises():
    x = hf.ones(1, 3)
    e = x.expand(4, 3)
    with pytest.raises(RuntimeError):
        e.add_(1)


def test_version_counter_detects_inplace_change_of_saved_input():
    w = hf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = hf.tensor([4.0, 5.0, 6.0])
    y = x * w             # mul saves x
    x.add_(1)             # bumps x's version
    with pytest.raises(RuntimeError, match="in.place|modified"):
        y.sum().backward()


def test_version_counter_detects_inplace_change_through_a_view():
    w = hf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = hf.tensor([4.0, 5.0, 6.0])
    y = x * w
    v = x[1:]             # a view shares x's storage and version counter
    v.mul_(2)
    with pytest.raises(RuntimeError, match="in.place|modified"):
        y.sum().backward()


def test_version_counter_detects_inplace_change_of_saved_output():
    x = hf.tensor([0.5, 1.0], requires_grad=True)
    y = x.exp()           # exp saves its output
    z = y * 1.0
    y.add_(1)
    with pytest.raises(RuntimeError, match="in.place|modified"):
        (y + z).sum().backward()


def test_inplace_change_of_unsaved_tensor_is_fine():
    w = hf.tensor([1.0, 2.0], requires_grad=True)
    x = hf.tensor([3.0, 4.0])
    y = x + w             # add saves nothing
    x.add_(10)
    (y * 1.0).sum().backward()
    assert w.grad.tolist() == [1.0, 1.0]


def test_inplace_add_on_nonleaf_records_gradient():
    x = hf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.add_(x)             # y = 3x
    y.sub_(1)
    assert y.requires_grad and not y.is_leaf
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 3.0]


def test_inplace_mul_on_nonleaf_records_gradient():
    # PyTorch: y.mul_(3) on a non-leaf is differentiable (grad 3 * 2 + 1 = 7).
    x = hf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.mul_(3)             # y = 6x
    y.add_(x)             # y = 7x
    y.sum().backward()
    assert x.grad.tolist() == [7.0, 7.0, 7.0]


def test_inplace_mul_by_tensor_requiring_grad():
    # PyTorch: w.grad is the value of y *before* the in-place multiply.
    x = hf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = hf.tensor([3.0, 3.0, 3.0], requires_grad=True)
    y = x * 2
    y.mul_(w)
    y.sum().backward()
    assert x.grad.tolist() == [6.0, 6.0, 6.0]
    assert w.grad.tolist() == [2.0, 4.0, 6.0]


def test_inplace_on_leaf_allowed_under_no_grad():
    x = hf.tensor([1.0, 2.0], requires_grad=True)
    with hf.no_grad():
        x.mul_(3)
        x[0] = 10.0
    assert x.is_leaf and x.requires_grad and x.grad_fn is None
    assert x.detach().tolist() == [10.0, 6.0]
    (x * x).sum().backward()
    assert x.grad.tolist() == [20.0, 12.0]


def test_format_of_zero_d_tensor_is_its_number():
    """``f"{loss}"`` of a 0-d tensor formats its number, as PyTorch's ``Tensor.__format__``
    (it gave the repr, ``tensor(0.25)``, without a format spec); more dims keep the repr."""
    loss, n = hf.tensor(0.25), hf.tensor(3, dtype=hf.int32)
    assert f"{loss}" == "0.25" and f"{loss:.3f}" == "0.250"
    assert f"{n}" == "3" and format(n, ">3") == "  3"
    assert f"{hf.tensor([1.0, 2.0])}" == repr(hf.tensor([1.0, 2.0]))
    torch = pytest.importorskip("torch")
    assert f"{torch.tensor(0.25)}" == f"{loss}" and f"{torch.tensor(3)}" == f"{n}"


def test_legacy_constructor_takes_sizes():
    """``hf.Tensor(2, 3)`` is a float32 tensor of that shape (zeros: hybridfw hands out no
    uninitialised memory), as ``torch.Tensor(out, in)`` in older layers' parameters; it
    raised TypeError, and ``hf.Tensor(3)`` was the 0-d tensor 3.0 where PyTorch gives 3
    elements. One sequence is the data."""
    assert hf.Tensor(2, 3).shape == (2, 3) and hf.Tensor(2, 3).dtype is hf.float32
    assert hf.Tensor(3).tolist() == [0.0, 0.0, 0.0] and hf.Tensor(np.int64(2)).shape == (2,)
    assert hf.Tensor([3]).tolist() == [3.0] and hf.Tensor((2, 3)).tolist() == [2.0, 3.0]
    assert hf.Tensor().shape == (0,)
    w = hf.nn.Parameter(hf.Tensor(4, 3))
    assert w.shape == (4, 3) and w.requires_grad
    with pytest.raises(TypeError, match="Tensor\\(\\): takes sizes"):
        hf.Tensor(2, 3.5)
    torch = pytest.importorskip("torch")
    for args in [(2, 3), (3,), ([3],), ((2, 3),), ()]:
        assert tuple(torch.Tensor(*args).shape) == hf.Tensor(*args).shape


@pytest.mark.parametrize("data, where", [
    ([[1, 2], [3]], "expected sequence of length 2 at dim 1 (got 1)"),
    ([[[1, 2], [3, 4]], [[1, 2], [3]]], "expected sequence of length 2 at dim 2 (got 1)"),
    ([[1.0, 2.0], 3.0], "expected sequence of length 2 at dim 1 (got a number)"),
    ([1, [2, 3]], "expected a number at dim 1, got a sequence of length 2"),
])
def test_ragged_nested_lists_name_where_they_stop_being_rectangular(data, where):
    # torch.tensor([[1, 2], [3]]): "expected sequence of length 2 at dim 1 (got 1)"; numpy's
    # "inhomogeneous shape" message named neither the op nor the place
    with pytest.raises(ValueError) as info:
        hf.tensor(data)
    assert str(info.value) == f"tensor: {where}"
