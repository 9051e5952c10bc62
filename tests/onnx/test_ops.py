"""Per-op ONNX lowering rules: every registry op has a rule or a stated reason it is not
exportable, and the rules compute what numpy computes (ONNX Runtime against numpy, on values
chosen to hit the edge cases: negative operands of floor division, ints mixed with floats,
bools, ties, padding)."""
import numpy as np
import pytest

import hybridfw as hf
import hybridfw.static  # noqa: F401 - registers fused_elementwise
from hybridfw.jit import InputSpec
from hybridfw.ops.registry import OnnxNotExportable, all_ops, apply, get_op

from .conftest import run_ort

F = hf.nn.functional
RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = (RNG.standard_normal((3, 4)) + 0.1).astype(np.float32)
POS = (np.abs(A) + 0.5).astype(np.float32)
I = np.array([[-7, 5, 0, 9], [3, -4, 8, -1], [2, 6, -9, 4]], dtype=np.int64)
J = np.array([[2, -3, 5, 4], [-2, 3, 3, 7], [5, 4, 2, -3]], dtype=np.int64)
M = A > 0
C = RNG.standard_normal((3, 4, 5)).astype(np.float32)
IMG = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)


def _np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _np_scatter(a, index, src, add=False):
    out, index = a.copy(), np.asarray(index)
    rows = np.arange(index.shape[0])[:, None]
    if add:
        np.add.at(out, (rows, index), src)
    else:
        out[rows, index] = src
    return out


# id -> (function of tensors, inputs, numpy reference of the same arrays)
CASES = {
    "add_int_float": (lambda a, i: a + i, [A, I], lambda a, i: a + i),
    "sub_scalar": (lambda a: 3.0 - a, [A], lambda a: 3.0 - a),
    "mul_bool": (lambda a, m: a * m, [A, M], lambda a, m: a * m),
    "div_ints": (lambda i, j: i / j, [I, J], lambda i, j: (i / j).astype(np.float32)),
    "floor_divide_ints": (lambda i, j: i // j, [I, J], lambda i, j: i // j),
    "cumprod_floats_with_zero": (lambda a: (a * (a > -1.0)).cumprod(1), [A],
                                 lambda a: np.cumprod(a * (a > -1.0), 1)),
    "cumprod_ints": (lambda i: i.cumprod(1), [I], lambda i: np.cumprod(i, 1)),
    "scatter_src": (lambda a: a.scatter(1, hf.tensor([[2, 0], [1, 3], [0, 0]]), a[:, :2] * 2.0),
                    [A], lambda a: _np_scatter(a, [[2, 0], [1, 3], [0, 0]], a[:, :2] * 2.0)),
    "scatter_value": (lambda a: a.scatter(1, hf.tensor([[2, 0], [1, 3], [0, 1]]), 5.0), [A],
                      lambda a: _np_scatter(a, [[2, 0], [1, 3], [0, 1]], np.full((3, 2), 5.0))),
    "scatter_add": (lambda a: a.scatter_add(1, hf.tensor([[2, 2], [1, 3], [0, 0]]), a[:, :2]),
                    [A], lambda a: _np_scatter(a, [[2, 2], [1, 3], [0, 0]], a[:, :2], True)),
    "div_trunc_ints": (lambda i, j: hf.div(i, j, rounding_mode="trunc"), [I, J],
                       lambda i, j: np.trunc(i / j).astype(np.int64)),
    "floor_divide_floats": (lambda a, b: a // b, [A, B], lambda a, b: a // b),
    "remainder_ints": (lambda i, j: i % j, [I, J], lambda i, j: i % j),
    "remainder_floats": (lambda a, b: a % b, [A, B], lambda a, b: np.mod(a, b)),
    "pow": (lambda p: p ** 1.5, [POS], lambda p: p ** 1.5),
    "maximum_minimum": (lambda a, b: hf.maximum(a, b) - hf.minimum(a, b), [A, B],
                        lambda a, b: np.maximum(a, b) - np.minimum(a, b)),
    "compare": (lambda a, b: (a < b) & (a <= 0.5) | (a == b) ^ (a != 0.1) | (a >= b) & (a > 0),
                [A, B], lambda a, b: (a < b) & (a <= 0.5) | (a == b) ^ (a != 0.1) |
                (a >= b) & (a > 0)),
    "bitwise_ints": (lambda i, j: (i & j) | (i ^ ~j), [I, J], lambda i, j: (i & j) | (i ^ ~j)),
    "not_bool": (lambda m: ~m, [M], lambda m: ~m),
    "unary_math": (lambda p: p.exp() + p.log() + p.sqrt() + p.rsqrt() + p.log1p() + p.sin() +
                   p.cos() + p.tanh() + p.sigmoid(), [POS],
                   lambda p: np.exp(p) + np.log(p) + np.sqrt(p) + 1 / np.sqrt(p) + np.log1p(p) +
                   np.sin(p) + np.cos(p) + np.tanh(p) + 1 / (1 + np.exp(-p))),
    "sign_abs_neg_relu": (lambda a: a.sign() + a.abs() - (-a).relu(), [A],
                          lambda a: np.sign(a) + np.abs(a) - np.maximum(-a, 0)),
    "rounding": (lambda a: (a * 3).floor() + (a * 3).ceil() + (a * 2).round(),
                 [np.array([0.5, 1.5, -0.5, 2.5, -1.7, 0.2], np.float32)],
                 lambda a: np.floor(a * 3) + np.ceil(a * 3) + np.round(a * 2)),
    "isnan_isinf_isfinite": (lambda a: a.isnan() | a.isinf() & ~a.isfinite(),
                             [np.array([1.0, np.nan, np.inf, -np.inf], np.float32)],
                             lambda a: np.isnan(a) | np.isinf(a) & ~np.isfinite(a)),
    "isfinite_int": (lambda i: hf.isfinite(i), [I], lambda i: np.ones(i.shape, bool)),
    "clamp": (lambda a: a.clamp(-0.5, 0.7) + a.clamp(min=0.1), [A],
              lambda a: np.clip(a, -0.5, 0.7) + np.maximum(a, 0.1)),
    "hardtanh": (lambda a: hf.nn.functional.hardtanh(a, -0.5, 0.7) + hf.nn.functional.relu6(a),
                 [A], lambda a: np.clip(a, -0.5, 0.7) + np.clip(a, 0, 6)),
    "where": (lambda m, a, i: hf.where(m, a, i), [M, A, I],
              lambda m, a, i: np.where(m, a, i).astype(np.float32)),
    "cast": (lambda a: (a * 3).astype(hf.int32), [A], lambda a: (a * 3).astype(np.int32)),
    "getitem_basic": (lambda a: a[1:, None, ::2][..., -1], [A],
                      lambda a: a[1:, None, ::2][..., -1]),
    "getitem_int_and_tensor": (lambda a, i: a[1, i], [A, np.array([3, 0, -1], np.int64)],
                               lambda a, i: a[1, i]),
    "getitem_tensor_middle": (lambda a, i: a[:, i], [A, np.array([[0, 2], [3, 3]], np.int64)],
                              lambda a, i: a[:, i]),
    "getitem_two_tensors": (lambda c, i, j: a_two(c, i, j), [C, np.array([0, -1, 2], np.int64),
                                                             np.array([1, 3, -2], np.int64)],
                            lambda c, i, j: a_two(c, i, j)),
    "getitem_bool_mask": (lambda a, m: a[m], [A, np.array([True, False, True])],
                          lambda a, m: a[m]),
    "gather": (lambda a, i: a.gather(1, i), [A, np.array([[0, 3], [1, 1], [2, 0]], np.int64)],
               lambda a, i: np.take_along_axis(a, i, 1)),
    "reshape_permute": (lambda a: a.reshape(2, 6).transpose(0, 1).reshape(-1, 3).permute(1, 0), [A],
                        lambda a: a.reshape(2, 6).T.reshape(-1, 3).transpose(1, 0)),
    "expand_cat": (lambda a: hf.cat([a[:, :1].expand(3, 5), a], dim=1), [A],
                   lambda a: np.concatenate([np.broadcast_to(a[:, :1], (3, 5)), a], axis=1)),
    "matmul_einsum": (lambda a, b: a @ b.transpose(0, 1) + hf.einsum("ij,kj->ik", a, b), [A, B],
                      lambda a, b: 2 * a @ b.T),
    "reductions": (lambda a: a.sum() + a.sum(dim=1) + a.amax(dim=0).sum() - a.amin() +
                   a.prod(dim=1) + a.mean(dim=1, keepdim=True).squeeze(1), [A],
                   lambda a: a.sum() + a.sum(1) + a.max(0).sum() - a.min() + a.prod(1) +
                   a.mean(1)),
    "sum_ints": (lambda i: i.sum(dim=0), [I.astype(np.int32)], lambda i: i.sum(0, np.int64)),
    "arg_reductions": (lambda a: a.argmax(dim=1) * 10 + a.argmin(), [A],
                       lambda a: a.argmax(1) * 10 + a.argmin()),
    "cumsum": (lambda a: a.cumsum(dim=1), [A], lambda a: a.cumsum(1)),
    "creation": (lambda a: a + hf.arange(4) + hf.linspace(0, 1, 4) + hf.eye(3, 4) +
                 hf.full((3, 4), 2.0) + hf.zeros_like(a), [A],
                 lambda a: a + np.arange(4) + np.linspace(0, 1, 4) + np.eye(3, 4) + 2.0),
    "softmaxes": (lambda a: F.softmax(a, dim=0) + F.log_softmax(a, dim=1), [A],
                  lambda a: _np_softmax(a, 0) + np.log(_np_softmax(a, 1))),
    "log_sigmoid_erf": (lambda a: F.logsigmoid(a) + apply(get_op("erf"), a), [A], None),
    "pad": (lambda a: F.pad(a, (1, 2, -1, 1), value=0.5), [A],
            lambda a: np.pad(a[1:], ((0, 1), (1, 2)), constant_values=0.5)),
    "nll_loss": (lambda a, t: F.nll_loss(a, t, reduction="none", ignore_index=1),
                 [A, np.array([0, 1, 3], np.int64)],
                 lambda a, t: np.where(t != 1, -a[np.arange(3), t], 0).astype(np.float32)),
    "bce": (lambda p, y: F.binary_cross_entropy(p, y, reduction="none"),
            [np.array([0.0, 0.2, 0.9, 1.0], np.float32),
             np.array([0.0, 1.0, 0.5, 0.0], np.float32)], None),
    "one_hot": (lambda i: F.one_hot(i, 4), [np.array([0, 3, 1], np.int64)],
                lambda i: np.eye(4, dtype=np.int64)[i]),
    "index_put": (lambda a, b: _index_put(a, b), [A, B], lambda a, b: _np_index_put(a, b)),
}


def a_two(c, i, j):
    """Adjacent index tensors (numpy's rules; tensors or arrays alike)."""
    return c[i, j] + c[1:, i[:, None], j[None, :]].sum()


def _index_put(a, b):
    a = a.clone()
    a[1:, ::2] = b[:2, :2]
    a[0] = 5.0
    return a


def _np_index_put(a, b):
    a = a.copy()
    a[1:, ::2] = b[:2, :2]
    a[0] = 5.0
    return a


def _as_function(fn, count):
    """A ``def`` calling ``fn`` (to_static converts functions; lambdas are only called)."""
    if count == 1:
        def one(a):
            return fn(a)
        return one
    if count == 2:
        def two(a, b):
            return fn(a, b)
        return two

    def three(a, b, c):
        return fn(a, b, c)
    return three


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_rule_matches_numpy_and_hybridfw(name, tmp_path):
    fn, arrays, reference = CASES[name]
    fn = _as_function(fn, len(arrays))
    specs = [InputSpec(a.shape, hf.as_dtype(a.dtype)) for a in arrays]
    path = tmp_path / "op.onnx"
    hf.onnx.export(fn, path, input_spec=specs, verify=True, example_inputs=arrays)
    got = run_ort(path, *arrays)[0]
    with hf.no_grad():
        expected = fn(*(hf.from_numpy(a.copy()) for a in arrays)).numpy()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    if reference is not None:
        np.testing.assert_allclose(got, reference(*arrays), rtol=1e-5, atol=1e-6)


def test_pooling_and_conv_rules_match_numpy(tmp_path):
    def fn(x):
        return F.max_pool2d(x, 2) + F.avg_pool2d(x, 2, stride=2)
    path = tmp_path / "pool.onnx"
    hf.onnx.export(fn, path, input_spec=[InputSpec([None, 3, 6, 6])])
    (got,) = run_ort(path, IMG)
    windows = IMG.reshape(2, 3, 3, 2, 3, 2)
    np.testing.assert_allclose(got, windows.max(axis=(3, 5)) + windows.mean(axis=(3, 5)),
                               rtol=1e-5, atol=1e-6)


def test_random_ops_lower_to_onnx_random_ops(tmp_path):
    def fn(x):
        return hf.rand_like(x) * 0.0 + hf.rand(2, 3) + hf.randn(2, 3) * 0.0 + \
            hf.randint(0, 5, (2, 3)).float()
    path = tmp_path / "random.onnx"
    model = hf.onnx.export(fn, path, input_spec=[InputSpec([None, 3])])
    kinds = {n.op_type for n in model.graph.node}
    assert {"RandomUniformLike", "RandomUniform", "RandomNormal"} <= kinds
    (got,) = run_ort(path, np.zeros((2, 3), np.float32))
    assert got.shape == (2, 3) and (got >= 0).all() and (got < 6).all()


def test_every_registry_op_has_a_rule_or_a_reason():
    for name, op in all_ops().items():
        rule = op.onnx
        if isinstance(rule, OnnxNotExportable):
            assert len(rule.reason) > 20, name
        else:
            assert isinstance(rule, str) or callable(rule), f"op {name!r} has no ONNX rule"
    not_exportable = {n for n, op in all_ops().items() if isinstance(op.onnx, OnnxNotExportable)}
    assert all(n.endswith(("_backward", "_grad", "_indices")) or n in
               {"sum_to_like", "exclusive_prod"} for n in not_exportable), not_exportable
