"""PyTorch compatibility of the op API: argument names (keyword calls ported from PyTorch),
0-d tensors with ``dim`` 0/-1, integer powers with negative tensor exponents, bool sign,
float16 accumulation, var/logsumexp edge cases, aliases (``t()``, ``masked_fill_``,
``hf.float``...) and index dtype errors.

Every case checks hand-computed values; where torch is importable it is a second oracle.
"""
import contextlib
import math

import numpy as np
import pytest

import hybridfw as hf


def _np(t):
    return np.asarray(t.detach().numpy())


def _x(lib):
    return lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])


# ======================================================================= keyword argument names
_X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
_C = np.array([[True, False, True], [False, True, True]])

# (call on a namespace ``lib`` with x (2, 3), v (4,), c (bool mask), idx, i1; expected value)
KEYWORD_CALLS = [
    ("lib.pow(input=x, exponent=2)", _X ** 2),
    ("lib.pow(x, exponent=2)", _X ** 2),
    ("x.pow(exponent=2)", _X ** 2),
    ("lib.where(condition=c, input=x, other=x * 0)", np.where(_C, _X, 0)),
    ("lib.where(c, x, other=x * 0)", np.where(_C, _X, 0)),
    ("lib.sum(input=x, dim=0)", _X.sum(0)),
    ("lib.mean(input=x, dim=1)", _X.mean(1)),
    ("lib.prod(input=x, dim=1)", _X.prod(1)),
    ("lib.max(input=x)", _X.max()),
    ("lib.max(input=x, dim=0).values", _X.max(0)),
    ("lib.min(input=x, dim=1, keepdim=True).indices", np.zeros((2, 1))),
    ("lib.max(input=x, other=x * 0 + 3)", np.maximum(_X, 3)),
    ("lib.maximum(input=x, other=x * 0 + 3)", np.maximum(_X, 3)),
    ("lib.minimum(input=x, other=x * 0 + 3)", np.minimum(_X, 3)),
    ("lib.argmax(input=x, dim=1)", [2, 2]),
    ("lib.argmin(input=x, dim=1, keepdim=True)", [[0], [0]]),
    ("lib.var(input=x, dim=1, correction=0)", _X.var(1)),
    ("lib.std(input=x, dim=1)", _X.std(1, ddof=1)),
    ("lib.logsumexp(input=x, dim=1)", np.log(np.exp(_X).sum(1))),
    ("lib.cumsum(input=x, dim=1)", _X.cumsum(1)),
    ("lib.clamp(input=x, min=2)", np.clip(_X, 2, None)),
    ("lib.clip(input=x, max=2)", np.clip(_X, None, 2)),
    ("lib.gather(input=x, dim=1, index=idx)", [[1.0, 2.0], [6.0, 4.0]]),
    ("lib.index_select(input=x, dim=1, index=i1)", _X[:, [2, 0]]),
    ("lib.masked_fill(input=x, mask=c, value=0.0)", np.where(_C, 0, _X)),
    ("lib.squeeze(input=x.reshape(1, 6), dim=0)", _X.reshape(6)),
    ("lib.unsqueeze(input=x, dim=0)", _X[None]),
    ("lib.flatten(input=x, start_dim=0, end_dim=1)", _X.reshape(6)),
    ("lib.transpose(input=x, dim0=0, dim1=1)", _X.T),
    ("lib.permute(input=x, dims=(1, 0))", _X.T),
    ("lib.reshape(input=x, shape=(3, 2))", _X.reshape(3, 2)),
    ("lib.reshape(x, (3, 2))", _X.reshape(3, 2)),
    ("lib.broadcast_to(input=v, size=(2, 4))", np.broadcast_to(np.arange(4.0), (2, 4))),
    ("lib.broadcast_to(v, (2, 4))", np.broadcast_to(np.arange(4.0), (2, 4))),
    ("lib.narrow(input=x, dim=1, start=1, length=2)", _X[:, 1:]),
    ("lib.split(tensor=x, split_size_or_sections=1, dim=0)[1]", _X[1:]),
    ("lib.chunk(input=x, chunks=3, dim=1)[2]", _X[:, 2:]),
    ("lib.matmul(input=x, other=x.T)", _X @ _X.T),
    ("lib.abs(input=-x)", _X),
    ("lib.exp(input=x)", np.exp(_X)),
    ("lib.add(x, x, alpha=2)", 3 * _X),
    ("lib.sub(input=x, other=x, alpha=2)", -_X),
    ("lib.zeros_like(input=x)", np.zeros((2, 3))),
    ("lib.ones_like(input=x)", np.ones((2, 3))),
    ("lib.full_like(input=x, fill_value=3.0)", np.full((2, 3), 3.0)),
    ("lib.empty_like(input=x).shape", (2, 3)),
    ("lib.rand_like(input=x).shape", (2, 3)),
    ("lib.randn_like(input=x).shape", (2, 3)),
    ("lib.arange(end=3)", [0, 1, 2]),
    ("lib.arange(start=0, end=3, step=1)", [0, 1, 2]),
    ("lib.arange(1, end=6, step=2)", [1, 3, 5]),
    ("lib.randint(high=3, size=(5,)).shape", (5,)),
    ("x.reshape(shape=(3, 2))", _X.reshape(3, 2)),
    ("x.reshape(3, 2)", _X.reshape(3, 2)),
    ("x.view(size=(3, 2))", _X.reshape(3, 2)),
    ("x.view(3, 2)", _X.reshape(3, 2)),
    ("x.view((6,))", _X.reshape(6)),
    ("v.expand(size=(3, 4))", np.broadcast_to(np.arange(4.0), (3, 4))),
    ("v.expand(3, -1)", np.broadcast_to(np.arange(4.0), (3, 4))),
    ("v.broadcast_to(size=(3, 4))", np.broadcast_to(np.arange(4.0), (3, 4))),
    ("x.permute(dims=(1, 0))", _X.T),
    ("x.permute(1, 0)", _X.T),
    ("x.split(split_size=2, dim=1)[1]", _X[:, 2:]),
    ("x.new_zeros(size=(2,))", [0.0, 0.0]),
]


@pytest.mark.parametrize("call, expected", KEYWORD_CALLS, ids=[c for c, _ in KEYWORD_CALLS])
def test_pytorch_keyword_names(call, expected):
    def env(lib):
        return dict(lib=lib, x=_x(lib), v=lib.tensor([0.0, 1.0, 2.0, 3.0]),
                    c=lib.tensor(_C.tolist()), idx=lib.tensor([[0, 1], [2, 0]]),
                    i1=lib.tensor([2, 0]))

    out = eval(call, {}, env(hf))  # noqa: S307 - the table's own expressions
    if isinstance(expected, tuple):
        assert tuple(out) == expected
    else:
        np.testing.assert_allclose(_np(out).astype(np.float64), expected, rtol=1e-6)
    torch = pytest.importorskip("torch")
    ref = eval(call, {}, env(torch))  # noqa: S307
    if isinstance(expected, tuple):
        assert tuple(ref) == expected
    elif "rand" not in call:
        np.testing.assert_allclose(_np(out).astype(np.float64),
                                   ref.detach().numpy().astype(np.float64), rtol=1e-6)


def test_keyword_names_match_torch_signatures():
    """Each public hf function taking a tensor first names it as torch does (``input``,
    ``tensor`` for split, ``tensors`` for cat/stack), where torch's signature is readable."""
    import inspect
    torch = pytest.importorskip("torch")
    checked = 0
    for name in hf.ops.functions.__all__:
        fn, tfn = getattr(hf, name), getattr(torch, name, None)
        try:
            tparams = list(inspect.signature(tfn).parameters)
        except (TypeError, ValueError):  # a C builtin: first word of its documented signature
            doc = (getattr(tfn, "__doc__", None) or "").strip().split("\n")[0]
            if not doc.startswith(name + "("):
                continue
            tparams = [doc[len(name) + 1:].split(",")[0].split(":")[0].split("=")[0].strip()]
        hparams = list(inspect.signature(fn).parameters)
        if tparams and tparams[0] in ("input", "tensor", "tensors", "condition"):
            assert hparams[0] == tparams[0], (name, hparams, tparams)
            checked += 1
    assert checked > 40


def test_sizes_given_twice_is_refused():
    x = hf.ones(2, 3)
    with pytest.raises(TypeError, match="reshape"):
        x.reshape(3, 2, shape=(3, 2))
    with pytest.raises(TypeError, match="expand"):
        hf.ones(3).expand(2, 3, size=(2, 3))


def test_keyword_names_build_static_graphs():
    """The same functions take PyTorch's keywords on static Variables."""
    from hybridfw import static
    prog = static.Program()
    with static.program_guard(prog):
        x = static.data("x", [2, 3])
        y = hf.sum(input=hf.pow(x, exponent=2), dim=1) + x.reshape(shape=(3, 2)).sum() \
            + hf.where(condition=x > 2, input=x, other=x * 0).view(size=(6,)).sum()
    exe = static.Executor()
    (out,) = exe.run(prog, feed={"x": hf.tensor(_X.tolist())}, fetch_list=[y],
                     return_numpy=True)
    expected = (_X ** 2).sum(1) + _X.sum() + np.where(_X > 2, _X, 0).sum()
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6)


# ============================================================================ 0-d tensors, dim 0/-1
ZERO_D_CALLS = [  # (call on t = tensor(3.), expected value; every result is 0-d)
    ("t.sum(-1)", 3.0), ("t.sum(0)", 3.0), ("t.sum((0,))", 3.0), ("t.mean(0)", 3.0),
    ("t.mean(-1, keepdim=True)", 3.0), ("t.max(-1).values", 3.0), ("t.max(-1).indices", 0),
    ("t.min(0).values", 3.0), ("t.min(0).indices", 0), ("t.argmax(0)", 0), ("t.argmin(-1)", 0),
    ("t.prod(0)", 3.0), ("t.cumsum(0)", 3.0), ("t.cumsum(-1)", 3.0), ("t.amax(0)", 3.0),
    ("t.amin(-1)", 3.0), ("t.var(0)", math.nan), ("t.std(0)", math.nan),
    ("t.var(0, correction=0)", 0.0), ("t.logsumexp(0)", 3.0), ("t.logsumexp(-1)", 3.0),
    ("t.squeeze(0)", 3.0), ("t.squeeze(-1)", 3.0), ("t.transpose(0, 0)", 3.0),
    ("t.transpose(-1, 0)", 3.0), ("t.gather(0, lib.tensor(0))", 3.0),
    ("t.gather(-1, lib.tensor(0))", 3.0), ("t.index_select(0, lib.tensor([0]))", 3.0),
    ("t.index_select(0, lib.tensor(0))", 3.0), ("t.log_softmax(-1)", 0.0),
]


@pytest.mark.parametrize("call, expected", ZERO_D_CALLS, ids=[c for c, _ in ZERO_D_CALLS])
def test_zero_d_dim_zero_or_minus_one(call, expected):
    out = eval(call, {}, dict(t=hf.tensor(3.0), lib=hf))  # noqa: S307
    assert out.shape == ()
    np.testing.assert_allclose(_np(out).astype(np.float64), expected)
    torch = pytest.importorskip("torch")
    warns = "var(0)" in call or "std(0)" in call  # torch warns of no degrees of freedom
    with pytest.warns(UserWarning) if warns else contextlib.nullcontext():
        ref = eval(call, {}, dict(t=torch.tensor(3.0), lib=torch))  # noqa: S307
    assert tuple(ref.shape) == ()
    np.testing.assert_allclose(_np(out).astype(np.float64), float(ref))


@pytest.mark.parametrize("call", ["x.sum(0)", "x.mean(-1)", "x.max(0).values", "x.prod(0)",
                                  "x.cumsum(-1)", "x.logsumexp(0)", "x.squeeze(0)",
                                  "x.transpose(0, -1)", "x.gather(0, hf.tensor(0))",
                                  "x.index_select(0, hf.tensor([0])).sum()", "x.amin(0)"])
def test_zero_d_dim_gradients(call):
    x = hf.tensor(3.0, requires_grad=True)
    eval(call, {}, dict(x=x, hf=hf)).backward()  # noqa: S307
    assert x.grad.shape == ()
    assert float(x.grad) == 1.0


def test_zero_d_out_of_range_and_unsplittable():
    t = hf.tensor(3.0)
    with pytest.raises(IndexError, match=r"sum: dim 1 .*-1 <= dim < 1"):
        t.sum(1)
    with pytest.raises(IndexError, match="cumsum"):
        t.cumsum(-2)
    with pytest.raises(ValueError, match="repeats"):
        t.sum((0, -1))
    for call, op in [(lambda: t.split(1), "split"), (lambda: t.chunk(1), "chunk"),
                     (lambda: t.narrow(0, 0, 1), "narrow"), (lambda: hf.cat([t, t]), "cat")]:
        with pytest.raises(ValueError, match=op):
            call()
    with pytest.raises(ValueError, match="index_select"):
        t.index_select(0, hf.tensor([0, 0]))


# ====================================================================== integer powers, sign
def test_integer_power_with_negative_tensor_exponents():
    out = hf.tensor([2, 3]) ** hf.tensor([-1, 2])
    assert out.dtype is hf.int64 and out.tolist() == [0, 9]
    assert (2 ** hf.tensor([-1, 2])).tolist() == [0, 4]
    special = hf.tensor([1, -1, -1, 0, 2]) ** hf.tensor([-3, -3, -2, -1, -1])
    assert special.tolist() == [1, -1, 1, 0, 0]
    assert ((-1) ** hf.tensor([-1, -2, 3])).tolist() == [-1, 1, -1]
    int32 = hf.tensor([2, 3], dtype="int32") ** hf.tensor(-1, dtype="int32")
    assert int32.dtype is hf.int32 and int32.tolist() == [0, 0]
    assert hf.pow(hf.tensor([True, False]), hf.tensor([-1, 2])).tolist() == [1, 0]
    assert (hf.tensor([2.0, 4.0]) ** hf.tensor([-1, 2])).tolist() == [0.5, 16.0]
    with pytest.raises(ValueError, match="pow"):  # a negative Python exponent stays refused
        hf.tensor([2, 3]) ** -1
    torch = pytest.importorskip("torch")
    assert (torch.tensor([2, 3]) ** torch.tensor([-1, 2])).tolist() == [0, 9]
    assert (torch.tensor([1, -1, -1, 0, 2]) ** torch.tensor([-3, -3, -2, -1, -1])).tolist() \
        == special.tolist()
    assert (2 ** torch.tensor([-1, 2])).tolist() == [0, 4]


def test_integer_power_in_place_with_negative_exponents():
    from hybridfw.ops import elementwise as E
    from hybridfw.ops.registry import apply_inplace
    y = hf.tensor([2, 1, -1])
    apply_inplace(E.pow_, y, y, hf.tensor([-2, -2, -3]))
    assert y.tolist() == [0, 1, -1]


def test_sign_of_bool_is_itself():
    b = hf.tensor([True, False])
    out = b.sign()
    assert out.dtype is hf.bool and out.tolist() == [True, False]
    assert hf.sign(b).tolist() == [True, False]
    torch = pytest.importorskip("torch")
    assert torch.tensor([True, False]).sign().tolist() == out.tolist()


# ======================================================================== float16 accumulation
def test_float16_cumsum_and_sum_accumulate_in_float32():
    ones = hf.ones(3000, dtype=hf.float16)
    c = ones.cumsum(0)
    assert c.dtype is hf.float16 and float(c[-1]) == 3000.0
    assert float(c[2047]) == 2048.0
    cols = hf.ones(3000, 4, dtype=hf.float16).sum(0)
    assert cols.dtype is hf.float16 and cols.tolist() == [3000.0] * 4
    assert float(hf.ones(3000, dtype=hf.float16).mean()) == 1.0
    torch = pytest.importorskip("torch")
    assert float(torch.ones(3000, dtype=torch.float16).cumsum(0)[-1]) == 3000.0
    assert torch.ones(3000, 4, dtype=torch.float16).sum(0).tolist() == cols.tolist()


# ============================================================================ var, logsumexp
def test_var_with_correction_at_least_n_is_inf():
    x = hf.tensor([1.0, 2.0])
    assert math.isinf(float(x.var(correction=2)))
    assert math.isinf(float(x.var(correction=3)))
    assert math.isnan(float(hf.tensor([1.0, 1.0]).var(correction=2)))  # 0 / 0
    assert float(x.var(correction=1)) == 0.5
    torch = pytest.importorskip("torch")
    with pytest.warns(UserWarning):
        assert math.isinf(float(torch.tensor([1.0, 2.0]).var(correction=2)))


def test_logsumexp_over_an_empty_dim_is_minus_inf():
    out = hf.zeros(2, 0).logsumexp(1)
    assert out.shape == (2,) and out.tolist() == [-math.inf, -math.inf]
    assert hf.zeros(2, 0).logsumexp(1, keepdim=True).shape == (2, 1)
    assert float(hf.zeros(0).logsumexp(0)) == -math.inf
    torch = pytest.importorskip("torch")
    assert torch.zeros(2, 0).logsumexp(1).tolist() == out.tolist()


@pytest.mark.parametrize("dtype", ["bool", "int32", "int64"])
def test_logsumexp_of_integers_and_bools_is_float32(dtype):
    """Integer and bool inputs give float32 (a bool input raised TypeError from a subtraction
    with a bool operand)."""
    a = (np.arange(6).reshape(2, 3) % 3).astype(dtype)
    out = hf.logsumexp(hf.from_numpy(a), 1)
    assert out.dtype is hf.float32
    want = np.log(np.exp(a.astype(np.float64)).sum(1))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    torch = pytest.importorskip("torch")
    ref = torch.logsumexp(torch.from_numpy(a), 1)
    assert ref.dtype == torch.float32
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6)


# ================================================================================ aliases
def test_t_transposes_at_most_two_dims():
    m = hf.tensor([[1, 2], [3, 4], [5, 6]])
    assert m.t().tolist() == [[1, 3, 5], [2, 4, 6]]
    assert hf.tensor([1.0, 2.0]).t().tolist() == [1.0, 2.0]
    assert hf.tensor(1.0).t().shape == ()
    with pytest.raises(ValueError, match="t: .*at most 2 dims"):
        hf.ones(2, 2, 2).t()
    x = hf.ones(2, 3, requires_grad=True)
    (x.t() * hf.tensor([[1.0, 2.0]] * 3)).sum().backward()
    assert x.grad.tolist() == [[1.0] * 3, [2.0] * 3]
    torch = pytest.importorskip("torch")
    assert torch.tensor([[1, 2], [3, 4], [5, 6]]).t().tolist() == m.t().tolist()


def test_masked_fill_in_place():
    x = hf.tensor([[1.0, 2.0], [3.0, 4.0]])
    same = x.masked_fill_(hf.tensor([True, False]), -1.0)  # the mask broadcasts over rows
    assert same is x
    assert x.tolist() == [[-1.0, 2.0], [-1.0, 4.0]]
    i = hf.tensor([1, 2, 3])
    i.masked_fill_(i > 1, 0)
    assert i.tolist() == [1, 0, 0] and i.dtype is hf.int64
    leaf = hf.ones(2, requires_grad=True)
    y = leaf * 2
    y.masked_fill_(hf.tensor([True, False]), 0.0)
    y.sum().backward()
    assert leaf.grad.tolist() == [0.0, 2.0]
    torch = pytest.importorskip("torch")
    tx = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    tx.masked_fill_(torch.tensor([True, False]), -1.0)
    assert tx.tolist() == x.tolist()


def test_dtype_aliases():
    assert hf.float is hf.float32 and hf.int is hf.int32 and hf.long is hf.int64
    assert hf.double is hf.float64 and hf.half is hf.float16
    assert hf.ones(2, dtype=hf.float).dtype is hf.float32
    assert hf.zeros(2, dtype=hf.int).dtype is hf.int32
    torch = pytest.importorskip("torch")
    assert (torch.float, torch.int, torch.long, torch.double, torch.half) == \
        (torch.float32, torch.int32, torch.int64, torch.float64, torch.float16)


# ============================================================================== index dtypes
def test_index_select_with_a_float_index_is_a_type_error():
    with pytest.raises(TypeError, match=r"index_select: .*integer.*float32"):
        hf.ones(3).index_select(0, hf.tensor([0.0]))
    with pytest.raises(TypeError, match="index_select"):
        hf.ones(3).index_select(0, hf.tensor([True]))
    assert hf.ones(3, 2).index_select(0, hf.tensor(1)).shape == (1, 2)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        torch.ones(3).index_select(0, torch.tensor([0.0]))


def test_equal_method_and_is_floating_point_unflatten_functions():
    a = hf.tensor([1.0, 2.0])
    assert a.equal(hf.tensor([1.0, 2.0])) is True
    assert a.equal(hf.tensor([1.0, 3.0])) is False and a.equal(hf.ones(3)) is False
    assert hf.is_floating_point(a) is True
    assert hf.is_floating_point(hf.tensor([1])) is False
    assert hf.unflatten(hf.arange(6), 0, (2, 3)).tolist() == [[0, 1, 2], [3, 4, 5]]


@pytest.mark.parametrize("call", ["x.softmax(-1, dtype=lib.float64)",
                                  "lib.softmax(x, 1, dtype=lib.float64)",
                                  "x.log_softmax(dim=0, dtype=lib.float64)",
                                  "lib.log_softmax(x, -1, lib.float64)",
                                  "lib.softmax(x.long(), -1, dtype=lib.float32)"])
def test_softmax_dtype_argument(call):
    """``Tensor.softmax`` and ``hf.softmax`` take PyTorch's ``dtype`` (the input is cast first;
    the keyword raised TypeError; ``F.softmax`` already had it)."""
    out = eval(call, {}, dict(x=hf.tensor(_X.tolist()), lib=hf))  # noqa: S307
    torch = pytest.importorskip("torch")
    ref = eval(call, {}, dict(x=torch.tensor(_X.tolist()), lib=torch))  # noqa: S307
    assert str(out.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    np.testing.assert_allclose(_np(out), ref.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["bool", "int32", "float16"])
def test_square_dtype_as_pow_two(dtype):
    """``square`` is PyTorch's ``pow(x, 2)``: a bool tensor squares to int64 (it stayed bool);
    the method and the function agree."""
    a = np.array([[True, False], [True, True]]).astype(dtype)
    want = "int64" if dtype == "bool" else dtype
    for out in (hf.from_numpy(a).square(), hf.square(hf.from_numpy(a))):
        assert out.dtype == want
        np.testing.assert_array_equal(out.numpy(), a.astype(want) ** 2)
    torch = pytest.importorskip("torch")
    assert str(torch.from_numpy(a).square().dtype) == f"torch.{want}"
