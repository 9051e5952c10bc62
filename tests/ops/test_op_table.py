"""Table-driven op tests (in the style of PyTorch's OpInfo / JAX's grad_test_spec).

Every row of :data:`OPS` describes one use of the public API: a function of hybridfw tensors,
an independent numpy reference, the inputs (shape + domain, or a fixed index array), the dtypes
to run, whether it is differentiable (and to which order) and its tolerances. From the one table
the tests below are generated:

1. ``test_forward``            values, shape and dtype (PyTorch promotion rules) vs numpy;
2. ``test_shape_inference``    for every op the row executes (forward and backward), the static
                               ``op.infer`` shape agrees with the shape the kernel produced;
3. ``test_grad``               float64 gradient vs central finite differences along a random
                               direction; ``test_grad_float32`` checks dtype/shape of float32
                               gradients and their values against the float64 ones;
4. ``test_grad_second_order``  double backward vs finite differences of the first gradient;
5. ``test_gpu_matches_cpu``    (``@pytest.mark.gpu``) every row on CUDA vs CPU;
6. ``test_torch_oracle``       rows with a ``torch_fn`` (kinks, ties, indexing semantics) vs
                               PyTorch, values and gradient conventions (skipped without torch).

Row fields: ``name`` (the pytest id), ``fn`` (hybridfw), ``ref`` (numpy, fed float64 copies of
float inputs and ints/bools as they are), ``inputs`` (:class:`Inp` / :class:`Fixed`),
``dtypes`` (the dtypes the forward test runs), ``out_dtype`` (dtype name -> expected output
dtype name, or a tuple for several outputs), ``grad`` / ``order`` (1 or 2), ``tol`` (forward
``{dtype: (rtol, atol)}``), ``gtol`` (gradient (rtol, atol)), ``fd`` (False where the inputs sit
on a kink: no finite differences) and ``torch_fn``.
"""
from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.dygraph.eager import EagerInterpreter
from hybridfw.ops import creation as _K
from hybridfw.ops import shape_ops as _S
from hybridfw.ops.registry import apply as _apply

F16, F32, F64, I32, I64, BOOL = "float16", "float32", "float64", "int32", "int64", "bool"
FLOATS = (F32, F64)
FLOATS_INT = (F32, F64, I64)
ALL_NUM = (F32, F64, I32, I64)


# ============================================================================= table machinery
class Inp:
    """A generated tensor input. ``domain``: real, positive, nonzero, unit (in (-1, 1)), int
    (integer values), bool, with_zeros (nonzero values with a few exact zeros); or exact
    ``values`` (differentiable, e.g. to sit on a kink). ``dtype``, when
    given, overrides the row's dtype (mixed-dtype rows, bool masks, int tensors)."""

    def __init__(self, shape=None, domain="real", dtype=None, values=None):
        self.values = None if values is None else np.asarray(values, dtype=np.float64)
        self.shape = tuple(shape) if values is None else self.values.shape
        self.domain = "fixed" if values is not None else domain
        self.dtype = dtype
        if domain == "bool":
            self.dtype = BOOL

    @property
    def differentiable(self):
        return self.dtype is None or self.dtype.startswith("float")

    def __repr__(self):
        return f"Inp({self.shape}, {self.domain!r}, {self.dtype})"


class Fixed:
    """A fixed array (index tensors): passed as an hf tensor, never differentiated."""

    differentiable = False

    def __init__(self, value):
        self.value = np.asarray(value)

    def __repr__(self):
        return f"Fixed({self.value.tolist()})"


def _is_float(dt):
    return str(dt).startswith("float")


def same(d):
    return d


def floaty(d):
    """float ops (exp, /, ...) of int/bool inputs compute in the default float32."""
    return d if _is_float(d) else F32


def acc(d):
    """sum/prod/cumsum of int or bool accumulate in int64."""
    return d if _is_float(d) else I64


def to_bool(d):
    return BOOL


def const(dt):
    return lambda d: dt


class Row:
    def __init__(self, name, fn, ref, inputs, dtypes=FLOATS, grad=True, order=1,
                 out_dtype=same, tol=None, gtol=(1e-6, 1e-7), fd=True, torch_fn=None):
        self.name = name
        self.fn = fn
        self.ref = ref
        self.inputs = list(inputs)
        self.dtypes = tuple(dtypes)
        self.grad = grad
        self.order = order if grad else 0
        self.out_dtype = out_dtype
        self.tol = {F32: (1e-5, 1e-5), F64: (1e-10, 1e-12), F16: (1e-3, 1e-3)}
        self.tol.update(tol or {})
        self.gtol = gtol
        # fd=False: the inputs sit where the function is not differentiable (ties, kinks):
        # no finite differences, the gradient convention is checked against PyTorch instead.
        self.fd = fd
        self.torch_fn = torch_fn

    def __repr__(self):
        return f"Row({self.name})"


# ============================================================================= the table
def torch_mod():
    """PyTorch, only as an extra oracle (rows' ``torch_fn`` are called from a test that has
    already done ``pytest.importorskip('torch')``)."""
    import torch
    return torch


def _scatter_ref(x, dim, idx, src, add):
    out = x.copy()
    for pos in np.ndindex(*idx.shape):
        dst = list(pos)
        dst[dim] = idx[pos]
        out[tuple(dst)] = out[tuple(dst)] + src[pos] if add else src[pos]
    return out


def _gather_ref(x, dim, idx):
    out = np.empty(idx.shape, dtype=x.dtype)
    for pos in np.ndindex(*idx.shape):
        src = list(pos)
        src[dim] = idx[pos]
        out[pos] = x[tuple(src)]
    return out


def _logsumexp_ref(x, axis, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def _split_ref(x, sizes, axis):
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


def _setitem(index):
    """fn/ref pair for ``y = x.clone(); y[index] = v; return y`` with a static index."""
    def fn(x, v):
        y = x.clone()
        y[index] = v
        return y

    def ref(x, v):
        y = x.copy()
        y[index] = v
        return y
    return fn, ref


def _set_pair(x, v, i, j):
    y = x.clone()
    y[i, j] = v
    return y


def _set_pair_ref(x, v, i, j):
    y = x.copy()
    y[i, j] = v
    return y


def _set_mask(x, m, v):
    y = x.clone()
    y[m] = v
    return y


IDX_REPEAT = np.array([3, 0, 3, 1], dtype=np.int64)
IDX_2D = np.array([[0, 2], [2, 4]], dtype=np.int64)
IDX_I = np.array([0, 2, 2], dtype=np.int64)
IDX_J = np.array([1, 1, 3], dtype=np.int64)
IDX_NEG = np.array([-1, 0, -2], dtype=np.int64)
GATHER_1 = np.array([[0, 3], [1, 1], [3, 0]], dtype=np.int64)          # (3,2) on (3,4) dim 1
GATHER_0 = np.array([[0, 1, 2, 0], [2, 2, 0, 1]], dtype=np.int64)      # (2,4) on (3,4) dim 0
GATHER_SMALL = np.array([[2, 2], [0, 1]], dtype=np.int64)               # (2,2) on (3,4) dim 1
SCATTER_1 = np.array([[0, 3], [1, 2], [3, 0]], dtype=np.int64)         # no repeats in a row
SEL_REPEAT = np.array([2, 0, 2], dtype=np.int64)
PUT_I = np.array([0, 2, 3], dtype=np.int64)
PUT_J = np.array([1, 1, 4], dtype=np.int64)

def _searchsorted_rows_ref(s, v, side):
    return np.stack([np.searchsorted(a, b, side=side) for a, b in zip(s, v)])


def _cumulative_extreme_ref(x, dim, largest):
    """Running max (min) along ``dim`` and where it was taken: the latest position among
    equal values, as PyTorch's cummax/cummin."""
    x = np.moveaxis(x, dim, -1)
    values, indices = x.copy(), np.zeros(x.shape, dtype=np.int64)
    for j in range(1, x.shape[-1]):
        take = x[..., j] >= values[..., j - 1] if largest else x[..., j] <= values[..., j - 1]
        values[..., j] = np.where(take, x[..., j], values[..., j - 1])
        indices[..., j] = np.where(take, j, indices[..., j - 1])
    return np.moveaxis(values, -1, dim), np.moveaxis(indices, -1, dim)


def _unique_ref(x):
    values, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    return values, inverse.reshape(x.shape), counts


SORTED_ROWS = np.array([[0, 1, 1, 4, 7], [2, 2, 3, 3, 9]], dtype=np.int64)
PROBES = np.array([[1, 5, -1, 7], [3, 2, 10, 2]], dtype=np.int64)
COUNTED = np.array([2, 0, 2, 5, 1], dtype=np.int64)


A34 = Inp((3, 4))
R = "real"

OPS = [
    # ------------------------------------------------------------------ binary arithmetic
    Row("add", lambda x, y: x + y, np.add, [A34, A34], ALL_NUM, order=2),
    Row("add_broadcast_3d", lambda x, y: x + y, np.add, [Inp((3, 1, 4)), Inp((2, 4))], order=2),
    Row("add_fn", lambda x, y: hf.add(x, y), np.add, [Inp((2, 3)), Inp((3,))], FLOATS_INT),
    Row("add_alpha", lambda x, y: x.add(y, alpha=2), lambda x, y: x + 2 * y, [A34, A34]),
    Row("sub_broadcast", lambda x, y: x - y, np.subtract, [A34, Inp((4,))], ALL_NUM, order=2),
    Row("rsub_scalar", lambda x: 3.0 - x, lambda x: 3.0 - x, [A34], FLOATS_INT,
        out_dtype=floaty),
    Row("mul", lambda x, y: x * y, np.multiply, [A34, Inp((1, 4))], ALL_NUM, order=2),
    Row("mul_self", lambda x: x * x, lambda x: x * x, [A34], order=2),
    Row("mul_pyfloat", lambda x: x * 0.5, lambda x: x * 0.5, [A34], (F32, F64, I32, I64, BOOL),
        out_dtype=floaty),
    Row("add_pyfloat", lambda x: x + 2.5, lambda x: x + 2.5, [A34], (F32, F64, I32, I64, BOOL),
        out_dtype=floaty),
    Row("add_pyint", lambda x: x + 3, lambda x: x + 3, [A34], (F32, F64, I32, I64, BOOL),
        out_dtype=lambda d: I64 if d == BOOL else d),
    Row("radd_pyint", lambda x: 3 + x, lambda x: 3 + x, [A34], (F32, I32)),
    Row("div", lambda x, y: x / y, np.true_divide, [A34, Inp((3, 4), "nonzero")],
        (F32, F64, I32, I64), out_dtype=floaty, order=2),
    Row("div_broadcast", lambda x, y: hf.div(x, y), np.true_divide,
        [Inp((2, 3, 4)), Inp((3, 1), "nonzero")], order=2),
    Row("div_pyint", lambda x: x / 2, lambda x: x / 2, [A34], (F32, F64, I64),
        out_dtype=floaty),
    Row("rdiv_scalar", lambda x: 2.0 / x, lambda x: 2.0 / x, [Inp((3, 4), "nonzero")],
        (F32, F64, I64), out_dtype=floaty, order=2),
    Row("reciprocal", lambda x: x.reciprocal(), lambda x: 1.0 / x, [Inp((3, 4), "nonzero")],
        order=2),
    Row("floor_divide", lambda x, y: x // y, np.floor_divide, [A34, Inp((3, 4), "nonzero")],
        ALL_NUM, grad=False),
    Row("floor_divide_pyfloat", lambda x: x // 2.5, lambda x: np.floor_divide(x, 2.5), [A34],
        FLOATS_INT, grad=False, out_dtype=floaty),
    Row("remainder", lambda x, y: x % y, np.remainder, [A34, Inp((3, 4), "nonzero")], ALL_NUM),
    Row("pow_tensor_tensor", lambda x, y: x ** y, np.power,
        [Inp((3, 4), "positive"), A34], order=2),
    Row("pow_broadcast", lambda x, y: hf.pow(x, y), np.power,
        [Inp((3, 4), "positive"), Inp((4,))], order=2),
    Row("pow_scalar_int", lambda x: x ** 3, lambda x: x ** 3, [A34], (F32, F64, I32, I64),
        order=2),
    Row("pow_scalar_float", lambda x: x.pow(2.5), lambda x: x ** 2.5, [Inp((3, 4), "positive")],
        order=2),
    Row("pow_scalar_neg", lambda x: x ** -1.5, lambda x: x ** -1.5, [Inp((3, 4), "positive")],
        order=2),
    Row("rpow_scalar", lambda x: 2.0 ** x, lambda x: 2.0 ** x, [A34], FLOATS_INT,
        out_dtype=floaty, order=2),
    Row("maximum", lambda x, y: hf.maximum(x, y), np.maximum, [A34, Inp((4,))], ALL_NUM,
        order=2),
    Row("minimum", lambda x, y: hf.minimum(x, y), np.minimum, [A34, A34], ALL_NUM, order=2),
    Row("max_binary", lambda x, y: hf.max(x, y), np.maximum, [A34, A34]),
    Row("maximum_int_ties", lambda x, y: x.maximum(y), np.maximum,
        [Inp((3, 4), "int"), Inp((3, 4), "int")], (F32, I64), grad=False),
    # ------------------------------------------------------------------ promotion
    Row("add_f32_f64", lambda x, y: x + y, np.add,
        [Inp((3, 4), dtype=F32), Inp((3, 4), dtype=F64)], (F64,), out_dtype=const(F64)),
    Row("add_f32_0d_f64", lambda x, y: x + y, np.add,
        [Inp((3, 4), dtype=F32), Inp((), dtype=F64)], (F32,), out_dtype=const(F32)),
    Row("add_int_0d_float", lambda x, y: x + y, np.add, [Inp((3, 4), dtype=I64), Inp(())]),
    Row("add_int_float", lambda x, y: x * y, np.multiply, [Inp((3, 4), dtype=I64), A34]),
    Row("add_i32_i64", lambda x, y: x + y, np.add,
        [Inp((3, 4), dtype=I32), Inp((3, 4), dtype=I64)], (I64,), grad=False),
    Row("add_bool_i32", lambda x, y: x + y, np.add,
        [Inp((3, 4), "bool"), Inp((3, 4), dtype=I32)], (I32,), grad=False),
    # ------------------------------------------------------------------ comparisons, logic
    Row("eq", lambda x, y: x == y, np.equal, [Inp((3, 4), "int"), Inp((3, 4), "int")],
        (F32, I64, BOOL), grad=False, out_dtype=to_bool),
    Row("ne", lambda x, y: x != y, np.not_equal, [Inp((3, 4), "int"), Inp((4,), "int")],
        (F32, I32), grad=False, out_dtype=to_bool),
    Row("lt", lambda x, y: x < y, np.less, [Inp((3, 4), "int"), Inp((3, 4), "int")],
        (F32, F64, I64), grad=False, out_dtype=to_bool),
    Row("le", lambda x, y: x <= y, np.less_equal, [Inp((3, 4), "int"), Inp((3, 1), "int")],
        (F32, I64), grad=False, out_dtype=to_bool),
    Row("gt_scalar", lambda x: x > 0.5, lambda x: x > 0.5, [A34], (F32, I64), grad=False,
        out_dtype=to_bool),
    Row("ge_int_float", lambda x, y: x >= y, np.greater_equal,
        [Inp((3, 4), "int", dtype=I64), Inp((3, 4), "int")], (F32,), grad=False,
        out_dtype=to_bool),
    Row("and", lambda x, y: x & y, np.bitwise_and, [A34, A34], (BOOL, I64, I32), grad=False),
    Row("or", lambda x, y: x | y, np.bitwise_or, [A34, Inp((4,))], (BOOL, I64), grad=False),
    Row("xor", lambda x, y: x ^ y, np.bitwise_xor, [A34, A34], (BOOL, I64), grad=False),
    Row("invert", lambda x: ~x, np.invert, [A34], (BOOL, I32, I64), grad=False),
    Row("logical_not", lambda x: x.logical_not(), np.logical_not, [A34], (BOOL, I64, F32),
        grad=False, out_dtype=to_bool),
    # ------------------------------------------------------------------ unary math
    Row("exp", lambda x: x.exp(), np.exp, [A34], (F32, F64, I32, I64), out_dtype=floaty,
        order=2),
    Row("log", lambda x: hf.log(x), np.log, [Inp((3, 4), "positive")], FLOATS_INT,
        out_dtype=floaty, order=2),
    Row("log1p", lambda x: x.log1p(), np.log1p, [Inp((3, 4), "unit")], order=2),
    Row("sqrt", lambda x: hf.sqrt(x), np.sqrt, [Inp((3, 4), "positive")], FLOATS_INT,
        out_dtype=floaty, order=2),
    Row("rsqrt", lambda x: x.rsqrt(), lambda x: 1.0 / np.sqrt(x), [Inp((3, 4), "positive")],
        FLOATS_INT, out_dtype=floaty, order=2),
    Row("sin", lambda x: x.sin(), np.sin, [A34], FLOATS_INT, out_dtype=floaty, order=2),
    Row("cos", lambda x: hf.cos(x), np.cos, [A34], order=2),
    Row("log2", lambda x: x.log2(), np.log2, [Inp((3, 4), "positive")], FLOATS_INT,
        out_dtype=floaty, order=2),
    Row("log10", lambda x: hf.log10(x), np.log10, [Inp((3, 4), "positive")], order=2),
    Row("exp2", lambda x: hf.exp2(x), np.exp2, [A34], FLOATS_INT, out_dtype=floaty, order=2),
    Row("expm1", lambda x: x.expm1(), np.expm1, [A34], order=2),
    Row("tan", lambda x: hf.tan(x), np.tan, [Inp((3, 4), "unit")], order=2),
    Row("atan", lambda x: x.atan(), np.arctan, [A34], FLOATS_INT, out_dtype=floaty, order=2),
    Row("asin", lambda x: hf.asin(x), np.arcsin, [Inp((3, 4), "unit")], order=2),
    Row("acos", lambda x: x.acos(), np.arccos, [Inp((3, 4), "unit")], order=2),
    Row("sinh", lambda x: hf.sinh(x), np.sinh, [A34], order=2),
    Row("atan2", lambda y, x: hf.atan2(y, x), np.arctan2, [A34, A34], FLOATS_INT,
        out_dtype=floaty, order=2),
    Row("arctan2_method_broadcast", lambda y, x: y.arctan2(x), np.arctan2,
        [Inp((3, 1)), Inp((4,))], order=2),
    Row("cosh", lambda x: x.cosh(), np.cosh, [A34], order=2),
    Row("trunc", lambda x: hf.trunc(x), lambda x: np.trunc(x).astype(x.dtype), [A34],
        FLOATS_INT, grad=False),
    Row("frac", lambda x: x.frac(), lambda x: x - np.trunc(x), [A34], order=2),
    Row("erf_function", lambda x: hf.erf(x), np.vectorize(math.erf), [A34], order=2),
    Row("tanh", lambda x: x.tanh(), np.tanh, [A34], FLOATS_INT, out_dtype=floaty, order=2),
    Row("sigmoid", lambda x: hf.sigmoid(x), lambda x: 1.0 / (1.0 + np.exp(-x)), [A34],
        FLOATS_INT, out_dtype=floaty, order=2),
    Row("sigmoid_wide", lambda x: (x * 30.0).sigmoid(), lambda x: 1.0 / (1.0 + np.exp(-30 * x)),
        [A34], order=2, gtol=(1e-5, 1e-6)),
    Row("relu", lambda x: x.relu(), lambda x: np.maximum(x, 0), [A34], ALL_NUM, order=2),
    Row("abs", lambda x: x.abs(), np.abs, [Inp((3, 4), "nonzero")], ALL_NUM, order=2),
    Row("abs_builtin", lambda x: abs(x), np.abs, [Inp((3, 4), "nonzero")], order=2),
    Row("neg", lambda x: -x, np.negative, [A34], ALL_NUM, order=2),
    Row("neg_fn", lambda x: hf.neg(x), np.negative, [A34], order=2),
    Row("square", lambda x: x.square(), np.square, [A34], ALL_NUM, order=2),
    Row("sign", lambda x: x.sign(), np.sign, [Inp((3, 4), "nonzero")], ALL_NUM),
    Row("floor", lambda x: x.floor(), np.floor, [A34], grad=False),
    Row("ceil", lambda x: hf.ceil(x), np.ceil, [A34], grad=False),
    Row("chain_exp_sin", lambda x, y: (x.sin() * y).exp() / (1.0 + y * y),
        lambda x, y: np.exp(np.sin(x) * y) / (1.0 + y * y), [A34, Inp((4,))], order=2),
    # ------------------------------------------------------------------ clamp, where, masks
    Row("clamp", lambda x: x.clamp(-0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5), [A34],
        (F32, F64, I64), out_dtype=floaty, order=2),
    Row("clamp_int_bounds", lambda x: x.clamp(-2, 2), lambda x: np.clip(x, -2, 2), [A34],
        ALL_NUM),
    Row("clamp_min", lambda x: hf.clamp(x, min=0.1), lambda x: np.maximum(x, 0.1), [A34]),
    Row("clip_max", lambda x: x.clip(max=0.3), lambda x: np.minimum(x, 0.3), [A34]),
    Row("clamp_tensor_bounds", lambda x, lo, hi: x.clamp(lo, hi),
        lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), [A34, Inp((4,)), Inp((3, 1))]),
    Row("where", lambda c, x, y: hf.where(c, x, y), np.where,
        [Inp((3, 4), "bool"), A34, Inp((4,))], ALL_NUM, order=2),
    Row("where_scalar", lambda c, x: hf.where(c, x, 0.0), lambda c, x: np.where(c, x, 0.0),
        [Inp((3, 4), "bool"), A34], FLOATS_INT, out_dtype=floaty),
    Row("where_from_compare", lambda x, y: hf.where(x > y, x * 2.0, y),
        lambda x, y: np.where(x > y, x * 2.0, y), [A34, A34]),
    Row("where_method", lambda c, x, y: x.where(c, y), np.where,
        [Inp((1, 4), "bool"), A34, A34]),
    Row("masked_fill", lambda x, m: x.masked_fill(m, -1.0), lambda x, m: np.where(m, -1.0, x),
        [A34, Inp((3, 4), "bool")], FLOATS_INT),
    Row("masked_fill_broadcast", lambda x, m: hf.masked_fill(x, m, 2.0),
        lambda x, m: np.where(m, 2.0, x), [A34, Inp((4,), "bool")]),
    Row("masked_fill_int_floatvalue", lambda x, m: x.masked_fill(m, 1.5),
        lambda x, m: np.where(m, 1, x), [A34, Inp((3, 4), "bool")], (I64, I32), grad=False),
    # ------------------------------------------------------------------ reductions
    Row("sum_all", lambda x: x.sum(), np.sum, [A34], (F32, F64, I32, I64, BOOL),
        out_dtype=acc, order=2),
    Row("sum_dim", lambda x: hf.sum(x, dim=1), lambda x: np.sum(x, 1), [A34], ALL_NUM,
        out_dtype=acc),
    Row("sum_keepdim", lambda x: x.sum(dim=1, keepdim=True), lambda x: np.sum(x, 1, keepdims=True),
        [A34], (F32, F64, BOOL), out_dtype=acc),
    Row("sum_dims_tuple", lambda x: x.sum(dim=(0, 2)), lambda x: np.sum(x, (0, 2)),
        [Inp((2, 3, 4))], FLOATS_INT, out_dtype=acc),
    Row("sum_neg_dim_keepdim", lambda x: x.sum(-1, keepdim=True),
        lambda x: np.sum(x, -1, keepdims=True), [Inp((2, 3, 4))]),
    Row("sum_dtype_f64", lambda x: x.sum(dtype=hf.float64), lambda x: np.sum(x), [A34],
        (F32, I64), out_dtype=const(F64)),
    Row("mean_all", lambda x: x.mean(), np.mean, [A34], order=2),
    Row("mean_dim_keepdim", lambda x: x.mean(dim=0, keepdim=True),
        lambda x: np.mean(x, 0, keepdims=True), [A34]),
    Row("mean_dims", lambda x: hf.mean(x, dim=(0, -1)), lambda x: np.mean(x, (0, 2)),
        [Inp((2, 3, 4))]),
    Row("amax_dim", lambda x: x.amax(dim=1), lambda x: np.max(x, 1), [A34], ALL_NUM),
    Row("amax_dims_keepdim", lambda x: hf.amax(x, dim=(0, 2), keepdim=True),
        lambda x: np.max(x, (0, 2), keepdims=True), [Inp((2, 3, 4))]),
    Row("amin_dim", lambda x: x.amin(dim=0), lambda x: np.min(x, 0), [A34]),
    Row("max_all", lambda x: x.max(), np.max, [A34], ALL_NUM),
    Row("min_all", lambda x: hf.min(x), np.min, [A34], ALL_NUM),
    Row("max_dim", lambda x: x.max(dim=1), lambda x: (np.max(x, 1), np.argmax(x, 1)), [A34],
        ALL_NUM, out_dtype=lambda d: (d, I64)),
    Row("max_dim_values", lambda x: hf.max(x, dim=-1).values, lambda x: np.max(x, -1),
        [Inp((2, 3, 4))]),
    Row("min_dim_keepdim", lambda x: hf.min(x, dim=0, keepdim=True),
        lambda x: (np.min(x, 0, keepdims=True), np.argmin(x, 0, keepdims=True)), [A34],
        ALL_NUM, out_dtype=lambda d: (d, I64)),
    Row("min_dim_indices", lambda x: x.min(1).indices, lambda x: np.argmin(x, 1), [A34],
        ALL_NUM, grad=False, out_dtype=const(I64)),
    Row("sort_dim1", lambda x: x.sort(dim=1),
        lambda x: (np.sort(x, 1), np.argsort(x, 1, kind="stable")), [A34], ALL_NUM,
        out_dtype=lambda d: (d, I64)),
    Row("sort_descending_fn", lambda x: hf.sort(x, 0, descending=True),
        lambda x: (np.take_along_axis(x, np.argsort(-x, 0, kind="stable"), 0),
                   np.argsort(-x, 0, kind="stable")), [A34], ALL_NUM,
        out_dtype=lambda d: (d, I64)),
    Row("argsort", lambda x: hf.argsort(x), lambda x: np.argsort(x, -1, kind="stable"), [A34],
        ALL_NUM, grad=False, out_dtype=const(I64)),
    Row("topk", lambda x: x.topk(2, dim=1),
        lambda x: (np.take_along_axis(x, np.argsort(-x, 1, kind="stable")[:, :2], 1),
                   np.argsort(-x, 1, kind="stable")[:, :2]), [A34], ALL_NUM,
        out_dtype=lambda d: (d, I64)),
    Row("topk_smallest_fn", lambda x: hf.topk(x, 3, dim=0, largest=False).values,
        lambda x: np.sort(x, 0), [A34]),
    Row("argmax_all", lambda x: x.argmax(), np.argmax, [A34], ALL_NUM, grad=False,
        out_dtype=const(I64)),
    Row("argmax_dim", lambda x: hf.argmax(x, dim=1), lambda x: np.argmax(x, 1), [A34],
        ALL_NUM, grad=False, out_dtype=const(I64)),
    Row("argmin_dim_keepdim", lambda x: x.argmin(dim=0, keepdim=True),
        lambda x: np.argmin(x, 0, keepdims=True), [A34], ALL_NUM, grad=False,
        out_dtype=const(I64)),
    Row("prod_dim", lambda x: x.prod(dim=1), lambda x: np.prod(x, 1), [A34], ALL_NUM,
        out_dtype=acc),
    Row("prod_all", lambda x: hf.prod(x), np.prod, [Inp((2, 3), "nonzero")], ALL_NUM,
        out_dtype=acc),
    Row("prod_with_zeros_dim", lambda x: x.prod(dim=1), lambda x: np.prod(x, 1),
        [Inp((3, 4), "with_zeros")]),
    Row("prod_with_zeros_keepdim", lambda x: x.prod(0, keepdim=True),
        lambda x: np.prod(x, 0, keepdims=True), [Inp((3, 4), "with_zeros")]),
    Row("prod_with_zero_all", lambda x: x.prod(), np.prod, [Inp((2, 3), "with_zeros")]),
    Row("var_all", lambda x: x.var(), lambda x: np.var(x, ddof=1), [A34], order=2),
    Row("var_dim", lambda x: hf.var(x, dim=1), lambda x: np.var(x, 1, ddof=1), [A34], order=2),
    Row("var_biased_keepdim", lambda x: x.var(dim=0, keepdim=True, correction=0),
        lambda x: np.var(x, 0, keepdims=True), [A34]),
    Row("var_unbiased_false", lambda x: hf.var(x, dim=(0, 2), unbiased=False),
        lambda x: np.var(x, (0, 2)), [Inp((2, 3, 4))]),
    Row("std_all", lambda x: x.std(), lambda x: np.std(x, ddof=1), [A34]),
    Row("std_dim", lambda x: hf.std(x, dim=0), lambda x: np.std(x, 0, ddof=1), [A34]),
    Row("logsumexp_dim", lambda x: hf.logsumexp(x, 1), lambda x: _logsumexp_ref(x, 1), [A34],
        order=2),
    Row("logsumexp_keepdim", lambda x: x.logsumexp(0, keepdim=True),
        lambda x: _logsumexp_ref(x, 0, True), [A34]),
    Row("logsumexp_dims", lambda x: hf.logsumexp(x, (0, 2)),
        lambda x: _logsumexp_ref(x, (0, 2)), [Inp((2, 3, 4))]),
    Row("logsumexp_large", lambda x: hf.logsumexp(x + 1000.0, 1),
        lambda x: _logsumexp_ref(x + 1000.0, 1), [A34]),
    Row("logsumexp_very_negative", lambda x: hf.logsumexp(x - 1000.0, 1),
        lambda x: _logsumexp_ref(x - 1000.0, 1), [A34]),
    Row("softmax_composite", lambda x: hf.exp(x - hf.logsumexp(x, 1, keepdim=True)),
        lambda x: np.exp(x - _logsumexp_ref(x, 1, True)), [A34], order=2),
    Row("cumsum_dim0", lambda x: x.cumsum(0), lambda x: np.cumsum(x, 0), [A34],
        (F32, F64, I32, I64, BOOL), out_dtype=acc),
    Row("cumsum_neg_dim", lambda x: hf.cumsum(x, dim=-1), lambda x: np.cumsum(x, -1),
        [Inp((2, 3, 4))], FLOATS_INT, out_dtype=acc),
    Row("cumprod_dim1", lambda x: x.cumprod(1), lambda x: np.cumprod(x, 1), [A34],
        (F32, F64, I32, I64), out_dtype=acc, order=2),
    Row("cumprod_with_zeros_fn", lambda x: hf.cumprod(x, dim=-1), lambda x: np.cumprod(x, -1),
        [Inp((3, 5), "with_zeros")], order=2),
    Row("cumprod_two_zeros", lambda x: x.cumprod(0), lambda x: np.cumprod(x, 0),
        [Inp(values=[2.0, 0.0, 3.0, 0.0, -1.5])], order=2, torch_fn=lambda x: x.cumprod(0)),
    # ------------------------------------------------------------------ shape ops
    Row("reshape", lambda x: x.reshape(4, 3), lambda x: x.reshape(4, 3), [A34], ALL_NUM),
    Row("reshape_minus1", lambda x: x.reshape(-1), lambda x: x.reshape(-1), [A34]),
    Row("reshape_tuple_fn", lambda x: hf.reshape(x, (6, 2)), lambda x: x.reshape(6, 2), [A34]),
    Row("view", lambda x: x.view(2, -1, 2), lambda x: x.reshape(2, -1, 2), [A34]),
    Row("reshape_noncontig", lambda x: x.permute(2, 0, 1).reshape(4, 6),
        lambda x: x.transpose(2, 0, 1).reshape(4, 6), [Inp((2, 3, 4))], ALL_NUM),
    Row("permute", lambda x: x.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1),
        [Inp((2, 3, 4))], ALL_NUM),
    # sizes a static program reads when it runs (converted code's x.shape[k] for a None dim):
    # the ops called directly, their sizes from another tensor's dim and from a 0-d int value
    Row("reshape_dynamic", lambda x, n: _apply(_S.reshape_dynamic, x, n, x.T,
                                               shape=(("dim", 2, 1), ("value", 1), -1)),
        lambda x, n: x.reshape(3, 2, 2), [A34, Fixed(np.int64(2))], ALL_NUM),
    Row("full_dims", lambda x, n: x.reshape(1, -1)[:, :2] +
        _apply(_K.full_dims, x, n, shape=(("dim", 0, 1), ("value", 1)), value=1.5,
               dtype=x.dtype, device="cpu"),
        lambda x, n: x.reshape(1, -1)[:, :2] + np.full((4, 2), 1.5), [A34, Fixed(np.int64(2))]),
    # gradient x.detach() + exp(x).detach() (2x without the detaches): checked against PyTorch
    Row("detach", lambda x: x * x.detach() + x.detach().exp(), lambda x: x * x + np.exp(x),
        [A34], fd=False, torch_fn=lambda x: x * x.detach() + x.detach().exp()),
    Row("permute_fn_neg", lambda x: hf.permute(x, (-1, 0, 1)), lambda x: x.transpose(2, 0, 1),
        [Inp((2, 3, 4))]),
    Row("transpose", lambda x: x.transpose(0, 1), lambda x: x.T, [A34], ALL_NUM),
    Row("transpose_fn_3d", lambda x: hf.transpose(x, -1, 0), lambda x: x.swapaxes(-1, 0),
        [Inp((2, 3, 4))]),
    Row("T", lambda x: x.T, lambda x: x.T, [A34]),
    Row("expand", lambda x: x.expand(3, 4), lambda x: np.broadcast_to(x, (3, 4)),
        [Inp((3, 1))], ALL_NUM),
    Row("expand_new_dims", lambda x: x.expand(2, 3, 4), lambda x: np.broadcast_to(x, (2, 3, 4)),
        [Inp((4,))]),
    Row("expand_minus1", lambda x: x.expand(-1, 4), lambda x: np.broadcast_to(x, (3, 4)),
        [Inp((3, 1))]),
    Row("broadcast_to", lambda x: hf.broadcast_to(x, (2, 3, 4)),
        lambda x: np.broadcast_to(x, (2, 3, 4)), [Inp((3, 1))]),
    Row("expand_then_mul", lambda x, y: x.expand(3, 4) * y,
        lambda x, y: np.broadcast_to(x, (3, 4)) * y, [Inp((3, 1)), A34], order=2),
    Row("squeeze_all", lambda x: x.squeeze(), lambda x: np.squeeze(x), [Inp((3, 1, 4, 1))],
        ALL_NUM),
    Row("squeeze_dim", lambda x: x.squeeze(1), lambda x: np.squeeze(x, 1), [Inp((3, 1, 4, 1))]),
    Row("squeeze_neg_dim_fn", lambda x: hf.squeeze(x, -1), lambda x: np.squeeze(x, -1),
        [Inp((3, 1, 4, 1))]),
    Row("squeeze_nonunit_noop", lambda x: x.squeeze(0), lambda x: x, [Inp((3, 1, 4, 1))]),
    Row("unsqueeze0", lambda x: x.unsqueeze(0), lambda x: x[None], [A34], ALL_NUM),
    Row("unsqueeze_neg", lambda x: hf.unsqueeze(x, -1), lambda x: x[..., None], [A34]),
    Row("unsqueeze_mid", lambda x: x.unsqueeze(1), lambda x: x[:, None], [A34]),
    Row("flatten", lambda x: x.flatten(), lambda x: x.reshape(-1), [Inp((2, 3, 4))], ALL_NUM),
    Row("flatten_start1", lambda x: x.flatten(1), lambda x: x.reshape(2, 12), [Inp((2, 3, 4))]),
    Row("flatten_fn_0_1", lambda x: hf.flatten(x, 0, 1), lambda x: x.reshape(6, 4),
        [Inp((2, 3, 4))]),
    Row("cat_dim0", lambda x, y: hf.cat([x, y], dim=0), lambda x, y: np.concatenate([x, y], 0),
        [Inp((2, 4)), Inp((3, 4))], ALL_NUM),
    Row("cat_three_dim1", lambda x, y, z: hf.cat([x, y, z], 1),
        lambda x, y, z: np.concatenate([x, y, z], 1), [Inp((3, 1)), Inp((3, 2)), Inp((3, 3))]),
    Row("cat_neg_dim", lambda x, y: hf.cat((x, y), dim=-1),
        lambda x, y: np.concatenate([x, y], -1), [Inp((2, 3, 1)), Inp((2, 3, 2))]),
    Row("stack_dim0", lambda x, y: hf.stack([x, y]), lambda x, y: np.stack([x, y]), [A34, A34],
        ALL_NUM),
    Row("stack_three_dim1", lambda x, y, z: hf.stack([x, y, z], dim=1),
        lambda x, y, z: np.stack([x, y, z], 1), [A34, A34, A34]),
    Row("stack_neg_dim", lambda x, y: hf.stack([x, y], dim=-1),
        lambda x, y: np.stack([x, y], -1), [A34, A34]),
    Row("split_size", lambda x: hf.split(x, 2, dim=1), lambda x: _split_ref(x, [2, 2, 1], 1),
        [Inp((3, 5))], ALL_NUM),
    Row("split_sections", lambda x: x.split([1, 3], dim=1),
        lambda x: _split_ref(x, [1, 3], 1), [A34]),
    Row("split_partial_use", lambda x: hf.split(x, 2)[1] * 3.0, lambda x: x[2:4] * 3.0,
        [Inp((5, 2))]),
    Row("chunk", lambda x: hf.chunk(x, 2, dim=0), lambda x: _split_ref(x, [3, 2], 0),
        [Inp((5, 3))], ALL_NUM),
    Row("chunk_method_dim1", lambda x: x.chunk(3, dim=1), lambda x: _split_ref(x, [2, 2, 2], 1),
        [Inp((2, 6))]),
    Row("narrow", lambda x: x.narrow(1, 1, 2), lambda x: x[:, 1:3], [A34]),
    # ------------------------------------------------------------------ indexing: reads
    Row("getitem_int", lambda x: x[1], lambda x: x[1], [Inp((4, 5))], ALL_NUM),
    Row("getitem_neg_int", lambda x: x[-1], lambda x: x[-1], [Inp((4, 5))]),
    Row("getitem_two_ints", lambda x: x[0, 1], lambda x: x[0, 1], [Inp((4, 5))], ALL_NUM),
    Row("getitem_slice", lambda x: x[1:3], lambda x: x[1:3], [Inp((4, 5))]),
    Row("getitem_step", lambda x: x[::2], lambda x: x[::2], [Inp((4, 5))], ALL_NUM),
    Row("getitem_slice_step_2d", lambda x: x[1:, ::2], lambda x: x[1:, ::2], [Inp((4, 5))]),
    Row("getitem_neg_slice", lambda x: x[-3:-1, 1:-1:3], lambda x: x[-3:-1, 1:-1:3],
        [Inp((4, 5))]),
    Row("getitem_empty_slice", lambda x: x[2:1], lambda x: x[2:1], [Inp((4, 5))]),
    Row("getitem_col", lambda x: x[:, 1], lambda x: x[:, 1], [Inp((4, 5))]),
    Row("getitem_none", lambda x: x[None], lambda x: x[None], [Inp((4, 5))]),
    Row("getitem_ellipsis_int", lambda x: x[..., 1], lambda x: x[..., 1], [Inp((3, 4, 5))]),
    Row("getitem_none_slices", lambda x: x[:, None, 1:4], lambda x: x[:, None, 1:4],
        [Inp((4, 5))]),
    Row("getitem_int_ellipsis_none", lambda x: x[1, ..., None], lambda x: x[1, ..., None],
        [Inp((3, 4, 5))]),
    Row("getitem_none_ellipsis_none", lambda x: x[None, ..., None],
        lambda x: x[None, ..., None], [Inp((4, 5))]),
    Row("getitem_list_repeat", lambda x: x[[0, 2, 0]], lambda x: x[[0, 2, 0]], [Inp((4, 5))],
        ALL_NUM),
    Row("getitem_tensor_repeat", lambda x, i: x[i], lambda x, i: x[i],
        [Inp((4, 5)), Fixed(IDX_REPEAT)], ALL_NUM),
    Row("getitem_tensor_2d_cols", lambda x, i: x[:, i], lambda x, i: x[:, i],
        [Inp((4, 5)), Fixed(IDX_2D)]),
    Row("getitem_tensor_pair", lambda x, i, j: x[i, j], lambda x, i, j: x[i, j],
        [Inp((4, 5)), Fixed(IDX_I), Fixed(IDX_J)]),
    Row("getitem_slice_list", lambda x: x[1:, [0, 2]], lambda x: x[1:, [0, 2]], [Inp((4, 5))]),
    Row("getitem_tensor_int", lambda x, i: x[i, 1], lambda x, i: x[i, 1],
        [Inp((4, 5)), Fixed(IDX_I)]),
    Row("getitem_neg_tensor", lambda x, i: x[i], lambda x, i: x[i],
        [Inp((4, 5)), Fixed(IDX_NEG)]),
    Row("getitem_nonadjacent_adv", lambda x: x[[0, 1], :, [1, 2]],
        lambda x: x[[0, 1], :, [1, 2]], [Inp((3, 4, 5))]),
    Row("getitem_ellipsis_list", lambda x: x[..., [1, 3, 1]], lambda x: x[..., [1, 3, 1]],
        [Inp((2, 3, 4))]),
    Row("getitem_bool_mask_2d", lambda x, m: x[m], lambda x, m: x[m],
        [Inp((4, 5)), Inp((4, 5), "bool")], ALL_NUM),
    Row("getitem_bool_mask_rows", lambda x, m: x[m], lambda x, m: x[m],
        [Inp((4, 5)), Inp((4,), "bool")]),
    Row("getitem_bool_mask_cols", lambda x, m: x[:, m], lambda x, m: x[:, m],
        [Inp((4, 5)), Inp((5,), "bool")]),
    Row("getitem_data_mask", lambda x: x[x > 0], lambda x: x[x > 0], [Inp((4, 5))]),
    Row("getitem_chain", lambda x: x[1:][:, [2, 0]][0], lambda x: x[1:][:, [2, 0]][0],
        [Inp((4, 5))]),
    # ------------------------------------------------------------------ indexing: writes
    Row("setitem_int", *_setitem(1), [Inp((4, 5)), Inp((5,))], ALL_NUM),
    Row("setitem_slice_broadcast", *_setitem((slice(None), slice(1, 3))),
        [Inp((4, 5)), Inp((4, 1))]),
    Row("setitem_step", *_setitem((slice(None, None, 2), 1)), [Inp((4, 5)), Inp((2,))]),
    Row("setitem_ellipsis", *_setitem((Ellipsis, 0)), [Inp((4, 5)), Inp((4,))]),
    Row("setitem_list", *_setitem([0, 2]), [Inp((4, 5)), Inp((2, 5))], ALL_NUM),
    Row("setitem_list_broadcast", *_setitem((slice(None), [4, 1])), [Inp((4, 5)), Inp((1, 2))]),
    Row("setitem_scalar", lambda x: _setitem(slice(1, 3))[0](x, 0.5),
        lambda x: _setitem(slice(1, 3))[1](x, 0.5), [Inp((4, 5))], ALL_NUM,
        out_dtype=same),
    Row("setitem_0d_tensor", *_setitem((2, 3)), [Inp((4, 5)), Inp(())]),
    Row("setitem_tensor_pair", lambda x, v, i, j: _set_pair(x, v, i, j),
        lambda x, v, i, j: _set_pair_ref(x, v, i, j),
        [Inp((4, 5)), Inp((3,)), Fixed(PUT_I), Fixed(PUT_J)]),
    Row("setitem_bool_mask_scalar", lambda x, m: _set_mask(x, m, 0.0),
        lambda x, m: np.where(m, 0.0, x), [Inp((4, 5)), Inp((4, 5), "bool")], FLOATS_INT),
    Row("setitem_bool_rows", lambda x, m, v: _set_mask(x, m, v),
        lambda x, m, v: np.where(m[:, None], v, x), [Inp((4, 5)), Inp((4,), "bool"),
                                                     Inp((5,))]),
    Row("setitem_then_use", lambda x, v: _setitem(1)[0](x, v * 2.0).exp(),
        lambda x, v: np.exp(_setitem(1)[1](x, v * 2.0)), [Inp((4, 5)), Inp((5,))]),
    # ------------------------------------------------------------------ gather / index_select
    Row("gather_dim1", lambda x, i: x.gather(1, i), lambda x, i: _gather_ref(x, 1, i),
        [A34, Fixed(GATHER_1)], ALL_NUM),
    Row("gather_dim0_fn", lambda x, i: hf.gather(x, 0, i), lambda x, i: _gather_ref(x, 0, i),
        [A34, Fixed(GATHER_0)]),
    Row("gather_smaller_index", lambda x, i: x.gather(1, i), lambda x, i: _gather_ref(x, 1, i),
        [A34, Fixed(GATHER_SMALL)]),
    Row("gather_neg_dim", lambda x, i: x.gather(-1, i), lambda x, i: _gather_ref(x, 1, i),
        [A34, Fixed(GATHER_1)]),
    Row("scatter_src_dim1", lambda x, i, s: x.scatter(1, i, s),
        lambda x, i, s: _scatter_ref(x, 1, i, s, add=False), [A34, Fixed(SCATTER_1),
                                                             Inp((3, 2))], order=2),
    Row("scatter_value_fn", lambda x, i: hf.scatter(x, 0, i, 2.5),
        lambda x, i: _scatter_ref(x, 0, i, np.full(i.shape, 2.5), add=False),
        [A34, Fixed(GATHER_0[:, :3][[0]])], ALL_NUM),
    Row("scatter_add_dim0", lambda x, i, s: x.scatter_add(0, i, s),
        lambda x, i, s: _scatter_ref(x, 0, i, s, add=True), [A34, Fixed(GATHER_0),
                                                            Inp((2, 4))], order=2),
    Row("index_select_dim1", lambda x, i: x.index_select(1, i), lambda x, i: np.take(x, i, 1),
        [A34, Fixed(SEL_REPEAT)], ALL_NUM),
    Row("index_select_dim0_fn", lambda x, i: hf.index_select(x, 0, i),
        lambda x, i: np.take(x, i, 0), [A34, Fixed(SEL_REPEAT)]),
    # ------------------------------------------------------------------ matmul / einsum
    Row("matmul_2d", lambda x, y: x @ y, np.matmul, [A34, Inp((4, 5))], FLOATS_INT, order=2),
    Row("linear_2d", lambda x, w: hf.nn.functional.linear(x, w), lambda x, w: x @ w.T,
        [A34, Inp((5, 4))], order=2),
    Row("linear_3d_bias", lambda x, w, b: hf.nn.functional.linear(x, w, b),
        lambda x, w, b: x @ w.T + b, [Inp((2, 3, 4)), Inp((5, 4)), Inp((5,))], order=2),
    Row("matmul_batched", lambda x, y: hf.matmul(x, y), np.matmul,
        [Inp((2, 3, 4)), Inp((2, 4, 5))], order=2),
    Row("matmul_batched_2d", lambda x, y: x.matmul(y), np.matmul,
        [Inp((2, 3, 4)), Inp((4, 5))], order=2),
    Row("matmul_batch_broadcast", lambda x, y: x @ y, np.matmul,
        [Inp((2, 1, 3, 4)), Inp((3, 4, 2))], order=2),
    Row("matmul_1d_2d", lambda x, y: x @ y, np.matmul, [Inp((4,)), Inp((4, 3))], order=2),
    Row("matmul_2d_1d", lambda x, y: x @ y, np.matmul, [A34, Inp((4,))], order=2),
    Row("matmul_1d_1d", lambda x, y: x @ y, np.matmul, [Inp((4,)), Inp((4,))], FLOATS_INT,
        order=2),
    Row("matmul_batched_1d", lambda x, y: x @ y, np.matmul, [Inp((2, 3, 4)), Inp((4,))],
        order=2),
    Row("matmul_1d_batched", lambda x, y: x @ y, np.matmul, [Inp((3,)), Inp((2, 3, 4))],
        order=2),
    Row("matmul_self", lambda x: x @ x.T, lambda x: x @ x.T, [A34], order=2),
    Row("linear_composite", lambda x, w, b: x @ w.T + b, lambda x, w, b: x @ w.T + b,
        [A34, Inp((5, 4)), Inp((5,))], order=2),
    Row("einsum_ij_jk", lambda x, y: hf.einsum("ij,jk->ik", x, y),
        lambda x, y: np.einsum("ij,jk->ik", x, y), [A34, Inp((4, 5))], FLOATS_INT, order=2),
    Row("einsum_bmm", lambda x, y: hf.einsum("bij,bjk->bik", x, y),
        lambda x, y: np.einsum("bij,bjk->bik", x, y), [Inp((2, 3, 4)), Inp((2, 4, 5))],
        order=2),
    Row("einsum_rowsum", lambda x: hf.einsum("ij->i", x), lambda x: np.einsum("ij->i", x),
        [A34], order=2),
    Row("einsum_dot", lambda x, y: hf.einsum("i,i->", x, y),
        lambda x, y: np.einsum("i,i->", x, y), [Inp((4,)), Inp((4,))], order=2),
    Row("einsum_transpose", lambda x: hf.einsum("ij->ji", x), lambda x: x.T, [A34]),
    Row("einsum_implicit", lambda x, y: hf.einsum("ij,jk", x, y), np.matmul,
        [A34, Inp((4, 2))]),
    Row("einsum_ellipsis", lambda x, y: hf.einsum("...ij,...jk->...ik", x, y), np.matmul,
        [Inp((2, 3, 4)), Inp((2, 4, 2))]),
    Row("einsum_outer", lambda x, y: hf.einsum("i,j->ij", x, y), np.outer,
        [Inp((3,)), Inp((4,))], order=2),
    Row("einsum_list_operands", lambda x, y: hf.einsum("ij,ij->j", [x, y]),
        lambda x, y: np.einsum("ij,ij->j", x, y), [A34, A34]),
    Row("einsum_diag", lambda x: hf.einsum("ii->i", x), lambda x: np.einsum("ii->i", x),
        [Inp((3, 3))], grad=False),
    # ------------------------------------------------------------------ 0-d and empty tensors
    Row("exp_0d", lambda x: x.exp(), np.exp, [Inp(())], FLOATS_INT, out_dtype=floaty, order=2),
    Row("mul_0d_0d", lambda x, y: x * y, np.multiply, [Inp(()), Inp(())], ALL_NUM, order=2),
    Row("mul_0d_2d", lambda x, y: x * y, np.multiply, [Inp(()), A34], ALL_NUM, order=2),
    Row("sum_0d_dim0", lambda x: x.sum(0), lambda x: x, [Inp(())], FLOATS_INT, out_dtype=acc),
    Row("cumsum_0d", lambda x: x.cumsum(0), lambda x: x, [Inp(())], FLOATS_INT, out_dtype=acc),
    Row("max_0d_dim", lambda x: x.max(dim=0), lambda x: (x, np.asarray(0)), [Inp(())],
        FLOATS_INT, out_dtype=lambda d: (d, I64)),
    Row("unsqueeze_0d", lambda x: x.unsqueeze(0), lambda x: x[None], [Inp(())]),
    Row("getitem_0d_none", lambda x: x[None], lambda x: x[None], [Inp(())]),
    Row("getitem_0d_ellipsis", lambda x: x[...] * 2.0, lambda x: x * 2.0, [Inp(())]),
    Row("matmul_0d_result_then_mul", lambda x, y: (x @ y) * x, lambda x, y: (x @ y) * x,
        [Inp((4,)), Inp((4,))], order=2),
    Row("sum_keepdim_all", lambda x: x.sum(dim=None, keepdim=True),
        lambda x: np.sum(x, keepdims=True), [A34], FLOATS_INT, out_dtype=acc),
    Row("mean_keepdim_all", lambda x: x.mean(keepdim=True), lambda x: np.mean(x, keepdims=True),
        [A34]),
    Row("sum_empty_dim", lambda x: x.sum(0), lambda x: np.sum(x, 0), [Inp((0, 3))], FLOATS_INT,
        out_dtype=acc),
    Row("prod_empty_dim", lambda x: x.prod(0), lambda x: np.prod(x, 0), [Inp((0, 3))],
        FLOATS_INT, out_dtype=acc),
    Row("cat_with_empty", lambda x, y: hf.cat([x, y]), lambda x, y: np.concatenate([x, y]),
        [Inp((0, 4)), A34]),
    Row("exp_empty", lambda x: x.exp(), np.exp, [Inp((2, 0))]),
    # ------------------------------------------------------------------ more promotion / stability
    Row("cat_mixed_dtype", lambda x, y: hf.cat([x, y], 1), lambda x, y: np.concatenate([x, y], 1),
        [Inp((3, 2), dtype=F32), Inp((3, 4), dtype=F64)], (F64,), out_dtype=const(F64)),
    Row("cat_int_float", lambda x, y: hf.cat([x, y]), lambda x, y: np.concatenate([x, y]),
        [Inp((2, 4), dtype=I64), Inp((3, 4))]),
    Row("where_mixed_dtype", lambda c, x, y: hf.where(c, x, y), np.where,
        [Inp((3, 4), "bool"), Inp((3, 4), dtype=F32), Inp((3, 4), dtype=F64)], (F64,),
        out_dtype=const(F64)),
    Row("sigmoid_extreme", lambda x: (x * 1000.0).sigmoid(),
        lambda x: 0.5 * np.tanh(500.0 * x) + 0.5, [A34], grad=False),
    Row("tanh_extreme", lambda x: (x * 1000.0).tanh(), lambda x: np.tanh(1000.0 * x), [A34],
        grad=False),
    Row("logsumexp_neginf", lambda x, m: hf.logsumexp(x.masked_fill(m, float("-inf")), 1),
        lambda x, m: np.logaddexp.reduce(np.where(m, -np.inf, x), axis=1),
        [A34, Fixed([[True, False, True, True], [False] * 4, [True, True, True, False]])]),
    Row("logsumexp_all_neginf_row", lambda x, m: hf.logsumexp(x.masked_fill(m, float("-inf")), 1),
        lambda x, m: np.logaddexp.reduce(np.where(m, -np.inf, x), axis=1),
        [A34, Fixed([[True] * 4, [False] * 4, [True, False, True, False]])], grad=False),
    # ------------------------------------------------------------------ nan / inf propagation
    Row("maximum_nan", lambda x, y: hf.maximum(x, y), np.maximum,
        [Inp(values=[np.nan, 1.0, 2.0]), Inp(values=[0.0, np.nan, 1.0])], grad=False),
    Row("amax_nan", lambda x: x.amax(dim=1), lambda x: np.max(x, 1),
        [Inp(values=[[1.0, np.nan, 0.0], [1.0, 2.0, 0.0]])], grad=False),
    Row("max_all_nan", lambda x: x.max(), np.max, [Inp(values=[1.0, np.nan, 3.0])], grad=False),
    Row("argmax_nan", lambda x: x.argmax(dim=1), lambda x: np.argmax(x, 1),
        [Inp(values=[[1.0, np.nan, 5.0], [1.0, 2.0, 0.0]])], grad=False, out_dtype=const(I64)),
    Row("clamp_nan", lambda x: x.clamp(-1.0, 1.0), lambda x: np.clip(x, -1.0, 1.0),
        [Inp(values=[np.nan, 2.0, -3.0])], grad=False),
    Row("relu_nan", lambda x: x.relu(), lambda x: np.where(np.isnan(x), x, np.maximum(x, 0)),
        [Inp(values=[np.nan, -1.0, 1.0])], grad=False),
    Row("sigmoid_inf", lambda x: x.sigmoid(), lambda x: np.array([0.0, 1.0, 0.5]),
        [Inp(values=[-np.inf, np.inf, 0.0])], grad=False),
    Row("log_special", lambda x: x.log(), lambda x: np.array([-np.inf, 0.0, np.inf]),
        [Inp(values=[0.0, 1.0, np.inf])], grad=False),
    Row("div_by_zero", lambda x, y: x / y, lambda x, y: np.array([np.inf, -np.inf, np.nan]),
        [Inp(values=[1.0, -1.0, 0.0]), Inp(values=[0.0, 0.0, 0.0])], grad=False),
    # ------------------------------------------------------------------ more indexing / shapes
    Row("getitem_int_slice_list", lambda x: x[0, :, [1, 2]], lambda x: x[0][:, [1, 2]],
        [Inp((3, 4, 5))], torch_fn=lambda x: x[0, :, [1, 2]]),
    Row("getitem_list_slice_int", lambda x: x[[0, 1], :, 1], lambda x: x[[0, 1], :, 1],
        [Inp((3, 4, 5))], torch_fn=lambda x: x[[0, 1], :, 1]),
    Row("getitem_tensor2d_slice", lambda x, i: x[i, 1:], lambda x, i: x[i, 1:],
        [Inp((4, 5)), Fixed(IDX_2D[:, :1] + 1)]),
    Row("getitem_mask_int", lambda x, m: x[m, 1], lambda x, m: x[m, 1],
        [Inp((4, 5)), Inp((4,), "bool")]),
    Row("setitem_neg_int_list", *_setitem((-1, [0, -1])), [Inp((4, 5)), Inp((2,))]),
    Row("stack_0d", lambda x, y: hf.stack([x, y]), lambda x, y: np.stack([x, y]),
        [Inp(()), Inp(())]),
    Row("cat_1d", lambda x, y: hf.cat([x, y]), lambda x, y: np.concatenate([x, y]),
        [Inp((2,)), Inp((3,))], ALL_NUM),
    Row("mean_dim_list", lambda x: x.mean(dim=[0, 1]), lambda x: np.mean(x, (0, 1)),
        [Inp((2, 3, 4))]),
    Row("add_bool_bool", lambda x, y: x + y, np.add, [A34, A34], (BOOL,), grad=False),
    Row("mul_bool_bool", lambda x, y: x * y, np.multiply, [A34, A34], (BOOL,), grad=False),
    Row("remainder_pyfloat", lambda x: x % 2.5, lambda x: np.remainder(x, 2.5), [A34],
        FLOATS_INT, out_dtype=floaty),
    Row("rpow_int", lambda x: 2 ** x, lambda x: 2 ** x, [Inp((3, 4), "positive")],
        (F32, F64, I64), order=2),
    Row("sqrt_int_pow", lambda x: x ** 0.5, lambda x: x ** 0.5, [Inp((3, 4), "positive")],
        (F32, I64), out_dtype=floaty),
    Row("einsum_transposed_operand", lambda x, y: hf.einsum("bij,bkj->bik", x, y),
        lambda x, y: np.einsum("bij,bkj->bik", x, y), [Inp((2, 3, 4)), Inp((2, 5, 4))],
        order=2),
    Row("einsum_full_contraction", lambda x, y: hf.einsum("ij,ij->", x, y),
        lambda x, y: np.einsum("ij,ij->", x, y), [A34, A34], order=2),
    # ------------------------------------------------------------------ kinks and ties: PyTorch's
    # gradient conventions (checked against torch when it is installed, no finite differences)
    Row("relu_at_zero", lambda x: x.relu(), lambda x: np.maximum(x, 0),
        [Inp(values=[-1.0, 0.0, 0.0, 2.0])], fd=False, torch_fn=lambda x: x.relu()),
    Row("abs_at_zero", lambda x: x.abs(), np.abs, [Inp(values=[-1.0, 0.0, 3.0])], fd=False,
        torch_fn=lambda x: x.abs()),
    Row("clamp_at_bounds", lambda x: x.clamp(-0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5),
        [Inp(values=[-0.5, 0.5, 0.2, 1.0, -2.0])], fd=False,
        torch_fn=lambda x: x.clamp(-0.5, 0.5)),
    Row("maximum_ties", lambda x, y: hf.maximum(x, y), np.maximum,
        [Inp(values=[1.0, 2.0, 3.0]), Inp(values=[1.0, 0.0, 3.0])], fd=False,
        torch_fn=lambda x, y: torch_mod().maximum(x, y)),
    Row("minimum_ties", lambda x, y: hf.minimum(x, y), np.minimum,
        [Inp(values=[1.0, 2.0, 3.0]), Inp(values=[1.0, 0.0, 3.0])], fd=False,
        torch_fn=lambda x, y: torch_mod().minimum(x, y)),
    Row("amax_ties", lambda x: x.amax(dim=1), lambda x: np.max(x, 1),
        [Inp(values=[[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])], fd=False,
        torch_fn=lambda x: x.amax(dim=1)),
    Row("max_all_ties", lambda x: x.max(), np.max, [Inp(values=[[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])],
        fd=False, torch_fn=lambda x: x.max()),
    Row("max_dim_ties", lambda x: x.max(dim=1).values, lambda x: np.max(x, 1),
        [Inp(values=[[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])], fd=False,
        torch_fn=lambda x: x.max(dim=1).values),
    Row("min_dim_ties_indices", lambda x: x.min(dim=0).indices, lambda x: np.argmin(x, 0),
        [Inp(values=[[1.0, 0.0, 3.0], [1.0, 0.0, 2.0]])], grad=False, out_dtype=const(I64),
        torch_fn=lambda x: x.min(dim=0).indices),
    Row("pow_zero_base", lambda x, y: x ** y, np.power,
        [Inp(values=[0.0, 1.0, 2.0, 0.0]), Inp(values=[2.0, 3.0, 0.5, 1.0])], fd=False,
        torch_fn=lambda x, y: x ** y),
    Row("pow_scalar_at_zero", lambda x: x ** 2.0, lambda x: x ** 2.0,
        [Inp(values=[0.0, 1.0, -2.0])], fd=False, torch_fn=lambda x: x ** 2.0),
    Row("floor_grad_zero", lambda x: x.floor() * 1.0, np.floor, [Inp(values=[0.5, -1.5, 2.0])],
        fd=False, torch_fn=lambda x: x.floor() * 1.0),
    Row("sign_grad_zero", lambda x: x.sign() * x, lambda x: np.sign(x) * x,
        [Inp(values=[0.5, 0.0, -2.0])], fd=False, torch_fn=lambda x: x.sign() * x),
    # ------------------------------------------------------------------ search (ops/search.py)
    Row("searchsorted_rows_right", lambda s, v: hf.searchsorted(s, v, right=True),
        lambda s, v: _searchsorted_rows_ref(s, v, "right"),
        [Fixed(SORTED_ROWS), Fixed(PROBES)], (I64,), grad=False),
    Row("searchsorted_1d", lambda s, v: hf.searchsorted(s, v),
        lambda s, v: np.searchsorted(s, v), [Fixed([-1.0, 0.0, 0.5]), A34], FLOATS, grad=False,
        out_dtype=const(I64)),
    Row("bucketize_right", lambda v, b: hf.bucketize(v, b, right=True),
        lambda v, b: np.searchsorted(b, v, side="right"), [A34, Fixed([-1.0, 0.0, 0.5])],
        FLOATS, grad=False, out_dtype=const(I64)),
    Row("bincount_weights", lambda i, w: hf.bincount(i, w, minlength=8),
        lambda i, w: np.bincount(i, w, minlength=8), [Fixed(COUNTED), Inp((5,))], FLOATS,
        grad=False),
    Row("bincount", lambda i: i.bincount(), np.bincount, [Fixed(COUNTED)], (I64,), grad=False),
    Row("unique_inverse_counts",
        lambda x: hf.unique(x, return_inverse=True, return_counts=True), _unique_ref,
        [Inp((3, 4), "int")], ALL_NUM, grad=False, out_dtype=lambda d: (d, I64, I64)),
    Row("unique_dim0", lambda x: x.unique(dim=0, return_inverse=True),
        lambda x: np.unique(x, axis=0, return_inverse=True)[:2],
        [Fixed([[1, 2], [0, 1], [1, 2], [0, 0]])], (I64,), grad=False),
    Row("isin", lambda x, t: hf.isin(x, t), np.isin, [Inp((3, 4), "int"), Fixed([2, -1, 3])],
        (F32, I64), grad=False, out_dtype=to_bool),
    Row("cummax_dim1", lambda x: x.cummax(1), lambda x: _cumulative_extreme_ref(x, 1, True),
        [A34], ALL_NUM, out_dtype=lambda d: (d, I64)),
    Row("cummin_ties_dim0", lambda x: hf.cummin(x, 0),
        lambda x: _cumulative_extreme_ref(x, 0, False), [Inp((4, 3), "int")], (F32, I64),
        grad=False, out_dtype=lambda d: (d, I64)),
    Row("kthvalue_dim1", lambda x: x.kthvalue(2, 1),
        lambda x: (np.sort(x, 1)[:, 1], np.argsort(x, 1, kind="stable")[:, 1]), [A34],
        ALL_NUM, out_dtype=lambda d: (d, I64)),
]


_names = [r.name for r in OPS]
assert len(set(_names)) == len(_names), "row names must be unique"
ROWS = {r.name: r for r in OPS}


# ============================================================================= input generation
def rng_for(*parts):
    return np.random.default_rng(zlib.crc32("/".join(map(str, parts)).encode()))


def make_array(spec, dtype, rng, override=True):
    if isinstance(spec, Fixed):
        return spec.value.copy()
    dt = (spec.dtype if override else None) or dtype
    shape, dom = spec.shape, spec.domain
    if dom == "fixed":
        return spec.values.astype(dt)
    if dt == BOOL:
        return np.asarray(rng.random(shape) < 0.5)
    if np.dtype(dt).kind in "iu":
        if dom == "positive":
            a = rng.integers(1, 6, shape)
        elif dom == "nonzero":
            a = rng.integers(1, 6, shape) * rng.choice([-1, 1], shape)
        else:
            a = rng.integers(-5, 6, shape)
        return np.asarray(a, dtype=dt)
    if dom == "real":
        a = rng.standard_normal(shape)
    elif dom == "positive":
        a = rng.uniform(0.5, 2.0, shape)
    elif dom == "nonzero":
        a = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    elif dom == "unit":
        a = rng.uniform(-0.9, 0.9, shape)
    elif dom == "int":
        a = rng.integers(-3, 4, shape).astype(np.float64)
    elif dom == "with_zeros":
        a = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
        flat = a.reshape(-1)
        n = flat.size
        # one zero in the first group, two in the last (for 3x4: row 0 and row 2 twice)
        for k in sorted({1 % n, n - 4 if n >= 4 else 0, n - 1}):
            flat[k] = 0.0
    else:
        raise ValueError(dom)
    return np.asarray(a, dtype=dt)


def make_inputs(row, dtype, tag):
    rng = rng_for(row.name, dtype, tag)
    return [make_array(s, dtype, rng) for s in row.inputs]


def ref_view(a):
    """What the numpy reference sees: floats computed in float64, ints/bools unchanged."""
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def to_numpy(t):
    return np.asarray(t.detach().cpu().numpy())


def run_hf(row, arrays, device="cpu"):
    ts = [hf.tensor(a, device=device) for a in arrays]
    return as_list(row.fn(*ts))


def _dtype_str(dt):
    return str(dt).replace("hybridfw.", "")


# ============================================================================= 1. forward
FWD_CASES = [pytest.param(r, d, id=f"{r.name}-{d}") for r in OPS for d in r.dtypes]


@pytest.mark.parametrize("row,dtype", FWD_CASES)
def test_forward(row, dtype):
    arrays = make_inputs(row, dtype, "fwd")
    out = run_hf(row, arrays)
    ref = [np.asarray(r) for r in as_list(row.ref(*[ref_view(a) for a in arrays]))]
    expected = row.out_dtype(dtype)
    expected = list(expected) if isinstance(expected, tuple) else [expected] * len(ref)
    assert len(out) == len(ref), f"{len(out)} outputs, expected {len(ref)}"
    for k, (o, r, edt) in enumerate(zip(out, ref, expected)):
        assert isinstance(o, hf.Tensor), f"output {k} is {type(o).__name__}, not a Tensor"
        assert _dtype_str(o.dtype) == edt, f"output {k}: dtype {o.dtype}, expected {edt}"
        assert tuple(o.shape) == r.shape, f"output {k}: shape {o.shape}, expected {r.shape}"
        got = to_numpy(o)
        assert got.shape == r.shape and got.dtype == np.dtype(edt), \
            f"output {k}: data {got.shape} {got.dtype} disagrees with the tensor's metadata"
        if _is_float(edt):
            rtol, atol = row.tol[edt]
            np.testing.assert_allclose(got, r, rtol=rtol, atol=atol,
                                       err_msg=f"output {k} of {row.name} [{dtype}]")
        else:
            np.testing.assert_array_equal(got, r, err_msg=f"output {k} of {row.name} [{dtype}]")


# ============================================================================= 2. shape inference
@pytest.fixture
def infer_log(monkeypatch):
    """Record, for every op the eager interpreter runs, the static ``infer`` shape/dtype next to
    the real output's."""
    log = []
    original = EagerInterpreter.apply

    def recording_apply(self, op, args, attrs):
        try:
            inferred = op.infer(*args, **attrs)
        except Exception:  # noqa: BLE001 - e.g. list args: the interpreter converts, recurses
            inferred = None
        out = original(self, op, args, attrs)
        if inferred is not None:
            log.append((op.name, tuple(inferred[0]), inferred[1], tuple(out.shape), out.dtype,
                        tuple(out._data.shape)))
        return out

    monkeypatch.setattr(EagerInterpreter, "apply", recording_apply)
    return log


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in OPS])
def test_shape_inference(row, infer_log):
    dtype = row.dtypes[0]
    arrays = make_inputs(row, dtype, "infer")
    ts = [hf.tensor(a) for a in arrays]
    diff = [t for t, s in zip(ts, row.inputs) if s.differentiable and t.dtype.is_floating_point]
    if row.grad:
        for t in diff:
            t.requires_grad_()
    outs = as_list(row.fn(*ts))
    n_forward = len(infer_log)
    if row.grad:
        loss = None
        for o in outs:
            if o.dtype.is_floating_point and o.requires_grad:
                term = (o * 1.5).sum()
                loss = term if loss is None else loss + term
        if loss is not None:
            hf.autograd.grad(loss, diff, allow_unused=True)
    if not any(o is t for o in outs for t in ts):  # a no-op (squeeze of a non-1 dim) may
        assert n_forward > 0, "the row ran no registry op"  # return its input itself
    bad = []
    for name, ishape, idtype, oshape, odtype, dshape in infer_log:
        ok = len(ishape) == len(oshape) and all(i == -1 or i == o for i, o in zip(ishape, oshape))
        ok = ok and oshape == dshape and idtype == odtype
        if not ok:
            bad.append(f"{name}: infer {ishape} {idtype}, actual {oshape} {odtype} (data {dshape})")
    assert not bad, "static inference disagrees with execution:\n" + "\n".join(bad)


# ============================================================================= 3. gradients
EPS = 1e-6
GRAD_ROWS = [r for r in OPS if r.grad and r.fd]


def _diff_indices(row):
    return [i for i, s in enumerate(row.inputs) if s.differentiable]


def _grad_arrays(row, dtype, tag):
    """Inputs for gradient tests: differentiable ones in ``dtype``, the others as specified."""
    rng = rng_for(row.name, tag)
    arrays = []
    for s in row.inputs:
        if s.differentiable:
            a = make_array(s, F64, rng, override=False).astype(dtype)
        else:
            a = make_array(s, F64, rng)
        arrays.append(a)
    return arrays, rng


def _randn(rng, shape):
    """Always an ndarray (a 0-d one for shape ()), never a Python/numpy scalar."""
    return np.asarray(rng.standard_normal(shape), dtype=np.float64)


def _float_outputs(outs):
    return [o for o in outs if o.dtype.is_floating_point]


def _weights(row, arrays, rng):
    outs = _float_outputs(run_hf(row, arrays))
    assert outs, f"{row.name} has no floating-point output to differentiate"
    return [_randn(rng, o.shape) for o in outs]


def _first_grads(row, arrays, diff, ws, create_graph=False):
    """(inputs, d/dinputs sum_k <out_k, w_k>) with None for unused inputs."""
    ts = [hf.tensor(a) for a in arrays]
    xs = [ts[i] for i in diff]
    for x in xs:
        x.requires_grad_()
    outs = _float_outputs(as_list(row.fn(*ts)))
    assert len(outs) == len(ws)
    loss = None
    for o, w in zip(outs, ws):
        term = (o * hf.tensor(w).astype(o.dtype)).sum()
        loss = term if loss is None else loss + term
    if not loss.requires_grad:
        return xs, [None] * len(xs)
    gs = hf.autograd.grad(loss, xs, create_graph=create_graph, allow_unused=True)
    assert isinstance(gs, tuple) and len(gs) == len(xs)
    return xs, list(gs)


def _objective(row, arrays, ws):
    with hf.no_grad():
        outs = _float_outputs(run_hf(row, arrays))
    return sum(float(np.sum(to_numpy(o).astype(np.float64) * w)) for o, w in zip(outs, ws))


def _shifted(arrays, diff, vs, s):
    out = list(arrays)
    for i, v in zip(diff, vs):
        out[i] = np.asarray(arrays[i] + s * v, dtype=arrays[i].dtype)
    return out


def _close(a, n, rtol, atol):
    return abs(a - n) <= atol + rtol * max(abs(a), abs(n), 1.0)


def _numeric_grad(f, arrays, i):
    a = arrays[i]
    g = np.zeros(a.shape)
    for pos in np.ndindex(*a.shape):
        e = np.zeros(a.shape)
        e[pos] = EPS
        hi, lo = list(arrays), list(arrays)
        hi[i], lo[i] = a + e, a - e
        g[pos] = (f(hi) - f(lo)) / (2 * EPS)
    return g


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in GRAD_ROWS])
def test_grad(row):
    arrays, rng = _grad_arrays(row, np.float64, "grad")
    diff = _diff_indices(row)
    ws = _weights(row, arrays, rng)
    xs, gs = _first_grads(row, arrays, diff, ws)
    for x, g in zip(xs, gs):
        if g is not None:
            assert isinstance(g, hf.Tensor)
            assert tuple(g.shape) == tuple(x.shape), f"grad shape {g.shape} != input {x.shape}"
            assert _dtype_str(g.dtype) == F64, f"grad dtype {g.dtype} for a float64 input"
    gnp = [np.zeros(arrays[i].shape) if g is None else to_numpy(g) for i, g in zip(diff, gs)]
    vs = [_randn(rng, arrays[i].shape) for i in diff]
    analytic = sum(float(np.sum(g * v)) for g, v in zip(gnp, vs))

    def f(arrs):
        return _objective(row, arrs, ws)

    numeric = (f(_shifted(arrays, diff, vs, EPS)) -
               f(_shifted(arrays, diff, vs, -EPS))) / (2 * EPS)
    if not _close(analytic, numeric, *row.gtol):
        detail = []
        for k, i in enumerate(diff):
            num = _numeric_grad(f, arrays, i)
            detail.append(f"input {i}:\n analytic={np.array2string(gnp[k], precision=5)}\n"
                          f" numeric ={np.array2string(num, precision=5)}")
        pytest.fail(f"{row.name}: directional derivative {analytic!r} vs finite differences "
                    f"{numeric!r}\n" + "\n".join(detail))


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in GRAD_ROWS])
def test_grad_float32(row):
    """float32 inputs get float32 gradients of the right shape, close to the float64 ones."""
    arrays64, rng = _grad_arrays(row, np.float64, "grad32")
    diff = _diff_indices(row)
    ws = _weights(row, arrays64, rng)
    arrays32 = [a.astype(np.float32) if i in diff else a for i, a in enumerate(arrays64)]
    # the float64 reference gradient at exactly the float32 point
    exact = [a.astype(np.float64) if i in diff else a for i, a in enumerate(arrays32)]
    _, g64 = _first_grads(row, exact, diff, ws)
    xs, g32 = _first_grads(row, arrays32, diff, ws)
    for k, (x, g, ref) in enumerate(zip(xs, g32, g64)):
        if ref is None:
            continue
        assert g is not None, f"no gradient for input {diff[k]} in float32"
        assert _dtype_str(g.dtype) == F32, f"grad of a float32 input has dtype {g.dtype}"
        assert tuple(g.shape) == tuple(x.shape)
        np.testing.assert_allclose(to_numpy(g), to_numpy(ref), rtol=1e-4, atol=1e-4,
                                   err_msg=f"float32 gradient of input {diff[k]}")


# ============================================================================= 4. second order
ORDER2_ROWS = [r for r in OPS if r.order >= 2 and r.fd]


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in ORDER2_ROWS])
def test_grad_second_order(row):
    arrays, rng = _grad_arrays(row, np.float64, "grad2")
    diff = _diff_indices(row)
    ws = _weights(row, arrays, rng)
    us = [_randn(rng, arrays[i].shape) for i in diff]
    vs = [_randn(rng, arrays[i].shape) for i in diff]

    def s_of(arrs):  # sum_i <g_i(x), u_i>, from first-order gradients
        _, gs = _first_grads(row, arrs, diff, ws)
        return sum(0.0 if g is None else float(np.sum(to_numpy(g) * u)) for g, u in zip(gs, us))

    xs, gs = _first_grads(row, arrays, diff, ws, create_graph=True)
    _, plain = _first_grads(row, arrays, diff, ws)
    for g, p in zip(gs, plain):  # create_graph must not change the first-order values
        if p is not None:
            np.testing.assert_allclose(to_numpy(g), to_numpy(p), rtol=1e-12, atol=1e-12)
    s = None
    for g, u in zip(gs, us):
        if g is not None and g.requires_grad:
            term = (g * hf.tensor(u)).sum()
            s = term if s is None else s + term
    if s is None:
        hs = [None] * len(xs)
    else:
        hs = hf.autograd.grad(s, xs, allow_unused=True)
    hnp = [np.zeros(arrays[i].shape) if h is None else to_numpy(h) for i, h in zip(diff, hs)]
    for h, i in zip(hnp, diff):
        assert h.shape == arrays[i].shape
    analytic = sum(float(np.sum(h * v)) for h, v in zip(hnp, vs))
    numeric = (s_of(_shifted(arrays, diff, vs, EPS)) -
               s_of(_shifted(arrays, diff, vs, -EPS))) / (2 * EPS)
    rtol, atol = row.gtol
    assert _close(analytic, numeric, rtol * 10, atol * 10), \
        f"{row.name}: second-order directional derivative {analytic!r} vs finite differences " \
        f"{numeric!r}"


# ============================================================================= 5. GPU vs CPU
@pytest.mark.gpu
@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in OPS])
def test_gpu_matches_cpu(row):
    if not hf.cuda.is_available():
        pytest.skip("CUDA is not available")
    for dtype in row.dtypes:
        arrays = make_inputs(row, dtype, "gpu")
        cpu_out = run_hf(row, arrays, "cpu")
        gpu_out = run_hf(row, arrays, "cuda")
        assert len(cpu_out) == len(gpu_out)
        for c, g in zip(cpu_out, gpu_out):
            assert g.device.type == "cuda", f"{row.name}: output on {g.device}"
            assert g.dtype == c.dtype and tuple(g.shape) == tuple(c.shape)
            if c.dtype.is_floating_point:
                rtol, atol = row.tol[_dtype_str(c.dtype)]
                np.testing.assert_allclose(to_numpy(g), to_numpy(c), rtol=rtol * 10,
                                           atol=atol * 10)
            else:
                np.testing.assert_array_equal(to_numpy(g), to_numpy(c))
    if row.grad:
        arrays, rng = _grad_arrays(row, np.float64, "gpu-grad")
        diff = _diff_indices(row)
        ws = _weights(row, arrays, rng)
        _, g_cpu = _first_grads(row, arrays, diff, ws)
        ts = [hf.tensor(a, device="cuda") for a in arrays]
        xs = [ts[i] for i in diff]
        for x in xs:
            x.requires_grad_()
        outs = _float_outputs(as_list(row.fn(*ts)))
        loss = None
        for o, w in zip(outs, ws):
            term = (o * hf.tensor(w, device="cuda")).sum()
            loss = term if loss is None else loss + term
        g_gpu = hf.autograd.grad(loss, xs, allow_unused=True) if loss.requires_grad \
            else [None] * len(xs)
        for gc, gg in zip(g_cpu, g_gpu):
            if gc is None:
                continue
            assert gg is not None and gg.device.type == "cuda"
            np.testing.assert_allclose(to_numpy(gg), to_numpy(gc), rtol=1e-9, atol=1e-10)


# ============================================================================= 6. PyTorch oracle
TORCH_ROWS = [r for r in OPS if r.torch_fn is not None]


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in TORCH_ROWS])
def test_torch_oracle(row):
    """Rows sitting on kinks/ties: values and PyTorch's gradient conventions."""
    torch = pytest.importorskip("torch")
    arrays, rng = _grad_arrays(row, np.float64, "torch")
    diff = _diff_indices(row) if row.grad else []
    outs = run_hf(row, arrays)
    tts = [torch.tensor(a) for a in arrays]
    for i in diff:
        tts[i].requires_grad_()
    touts = [t for t in as_list(row.torch_fn(*tts))]
    assert len(outs) == len(touts)
    for o, t in zip(outs, touts):
        assert tuple(o.shape) == tuple(t.shape)
        assert _dtype_str(o.dtype) == str(t.dtype).replace("torch.", "")
        np.testing.assert_allclose(to_numpy(o), t.detach().numpy(), rtol=1e-12, atol=0)
    if not diff:
        return
    ws = _weights(row, arrays, rng)
    _, gs = _first_grads(row, arrays, diff, ws)
    tloss = sum((t * torch.tensor(w)).sum() for t, w in zip(
        [t for t in touts if t.dtype.is_floating_point], ws))
    tgs = torch.autograd.grad(tloss, [tts[i] for i in diff], allow_unused=True)
    for k, (g, tg) in enumerate(zip(gs, tgs)):
        want = np.zeros(arrays[diff[k]].shape) if tg is None else tg.numpy()
        got = np.zeros(arrays[diff[k]].shape) if g is None else to_numpy(g)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15,
                                   err_msg=f"gradient of input {diff[k]} vs PyTorch")


def test_prod_double_backward_by_hand():
    # d/dx_j of sum_k prod_{i != k} x_i = sum_{k != j} prod_{i not in {j, k}} x_i
    x = hf.tensor([1.0, 2.0, 3.0], dtype=hf.float64, requires_grad=True)
    (g,) = hf.autograd.grad(x.prod(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), [6.0, 3.0, 2.0])
    (h,) = hf.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), [3.0 + 2.0, 3.0 + 1.0, 2.0 + 1.0])



# ============================================================================= 7. eager == static
STATIC_CASES = [pytest.param(r, id=r.name) for r in OPS]


def _check_static_output(k, var, eager, got):
    """Inferred shape (where known) and dtype, then values equal to eager's, NaNs included."""
    want = to_numpy(eager)
    assert isinstance(var, hf.static.Variable), f"output {k} is a {type(var).__name__}"
    assert var.dtype == eager.dtype, f"output {k}: static dtype {var.dtype}, eager {eager.dtype}"
    assert len(var.shape) == want.ndim and all(
        s in (-1, w) for s, w in zip(var.shape, want.shape)), \
        f"output {k}: static shape {var.shape}, eager {want.shape}"
    assert got.dtype == want.dtype and got.shape == want.shape, \
        f"output {k}: ran as {got.shape} {got.dtype}, eager gave {want.shape} {want.dtype}"
    np.testing.assert_array_equal(got, want, err_msg=f"output {k}: static != eager")


@pytest.mark.parametrize("row", STATIC_CASES)
def test_static_matches_eager(row):
    """The row's fn recorded into a Program (an ``hf.static.data`` per input, index arrays
    included) and run by the executor gives exactly the eager result, in the row's first dtype.
    Data-dependent sizes (boolean masks) are inferred as -1 and checked at run time."""
    arrays = make_inputs(row, row.dtypes[0], "static")
    eager = as_list(row.fn(*[hf.tensor(a) for a in arrays]))
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        xs = [hf.static.data(f"in{i}", a.shape, a.dtype) for i, a in enumerate(arrays)]
        outs = as_list(row.fn(*xs))
    assert len(outs) == len(eager), f"{len(outs)} static outputs, eager has {len(eager)}"
    feed = {f"in{i}": a for i, a in enumerate(arrays)}
    got = hf.static.Executor().run(prog, feed=feed, fetch_list=outs, return_numpy=True)
    for k, (var, e, g) in enumerate(zip(outs, eager, got)):
        _check_static_output(k, var, e, g)
