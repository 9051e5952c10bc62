"""Elementwise fusion: groups of elementwise ops run as one fused_elementwise operator, with
results bitwise equal to the unfused program."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.ops.registry import apply, get_op
from hybridfw.static.passes import fusion

SPECIAL = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-300, -2.5, 0.75, 3.0]


def _model(dtype):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [-1, 3], dtype)
        b = hf.static.data("b", [3], dtype)
        h = (x * b + 1.0).tanh()
        shared = h.exp()              # read twice: a group boundary
        s = shared.sum()              # not elementwise
        y = hf.where(shared > 1.5, shared.clamp(max=3.0), -shared) * s + h.sigmoid()
    return prog, y


def _feed(dtype, rows=4):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, 3)).astype(dtype)
    return {"x": x, "b": rng.standard_normal(3).astype(dtype)}


def test_elementwise_groups_become_one_operator(apply_pass, golden, same_results):
    prog, y = _model("float64")
    out = apply_pass(fusion.run, prog, [y])
    golden(out, """
        input x : (-1, 3) float64
        input b : (3,) float64
        t2 = fused_elementwise(x, b) {ops=(('mul', ('in0', 'in1'), ()), ('add', ('op0', 1.0), ()), ('tanh', ('op1',), ())), dtype=hybridfw.float64} : (-1, 3) float64
        t3 = exp(t2) : (-1, 3) float64
        t4 = sum(t3) {dim=None, keepdim=False} : () float64
        t11 = fused_elementwise(t3, t4, t2) {ops=(('gt', ('in0', 1.5), ()), ('clamp', ('in0',), (('max', 3.0), ('min', None))), ('neg', ('in0',), ()), ('where', ('op0', 'op1', 'op2'), ()), ('mul', ('op3', 'in1'), ()), ('sigmoid', ('in2',), ()), ('add', ('op4', 'op5'), ())), dtype=hybridfw.float64} : (-1, 3) float64
    """)
    for rows in (1, 4):
        same_results(prog, out, _feed(np.float64, rows), [y])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_results_are_bitwise_equal_with_special_values(apply_pass, same_results, dtype):
    prog, y = _model(dtype)
    out = apply_pass(fusion.run, prog, [y])
    feed = {"x": np.array(SPECIAL, dtype).reshape(3, 3), "b": np.array([1.0, -0.0, 2.0], dtype)}
    same_results(prog, out, feed, [y])
    same_results(prog, out, _feed(dtype), [y])


def test_mixed_dtypes_cast_as_the_executor_does(apply_pass, same_results):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        i = hf.static.data("i", [4], "int32")
        x = hf.static.data("x", [4], "float64")
        a = (i * 2.5 + 1).exp()                    # int32 * float -> float32
        m = (i > 1) & (x < 2.0)                    # bools, and a non-fusible bitwise_and
        y = hf.where(m, a, x.sqrt()) - (i + 3)    # float32 with float64 -> float64
        z = (i * 3 - 1).abs().maximum(i)           # stays int32
    out = apply_pass(fusion.run, prog, [y, z])
    assert [op.type for op in out.global_block().ops] == [
        "gt", "lt", "bitwise_and", "fused_elementwise", "fused_elementwise"]
    feed = {"i": np.array([-3, 0, 2, 7], np.int32), "x": np.array([0.5, 4.0, -1.0, 1.5])}
    got = same_results(prog, out, feed, [y, z])
    assert got[0].dtype == np.float64 and got[1].dtype == np.int32


def test_fetched_or_shared_intermediates_are_not_fused_away(apply_pass, same_results):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        a = x * 2.0
        b = a + 1.0       # fetched: ends a group
        y = b.exp()
        z = a.relu() + y  # a has two readers: not inside any group
    out = apply_pass(fusion.run, prog, [b, z])
    types = [(op.type, op.outputs[0]) for op in out.global_block().ops]
    assert types == [("mul", a.name), ("add", b.name), ("fused_elementwise", z.name)]
    same_results(prog, out, {"x": np.array([-1.0, 0.5, 2.0], np.float32)}, [b, z])


def test_fusion_inside_control_flow(apply_pass, same_results):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        _, s = hf.static.nn.while_loop(
            lambda i, s: i < 4,
            lambda i, s: (i + 1, hf.static.nn.cond(i > 1, lambda: (s * 0.5).tanh() + 1.0,
                                                   lambda: (s - 1.0).abs())), [0, x])
    out = apply_pass(fusion.run, prog, [s])
    inner = [op.type for block in out.blocks[1:] for op in block.ops]
    assert inner.count("fused_elementwise") == 2
    same_results(prog, out, {"x": np.array([-1.0, 0.5, 2.0], np.float32)}, [s])


def test_a_chain_allocates_one_array():
    calls = []

    class CountingNumpy:
        __name__ = "counting_numpy"

        def __getattr__(self, name):
            return getattr(np, name)

        def empty(self, *args, **kwargs):
            calls.append(args)
            return np.empty(*args, **kwargs)

    ops = (("mul", ("in0", 2.0), ()), ("add", ("op0", "in1"), ()), ("tanh", ("op1",), ()),
           ("exp", ("op2",), ()), ("sub", ("op3", "in0"), ()))
    x, b = np.linspace(-1, 1, 6).reshape(2, 3), np.arange(3.0)
    out = get_op("fused_elementwise").kernel(CountingNumpy(), x, b, ops=ops, dtype="float64")
    assert len(calls) == 1
    np.testing.assert_array_equal(out, np.exp(np.tanh(x * 2.0 + b)) - x)


def test_equal_numbers_of_other_types_do_not_share_a_plan():
    kernel = get_op("fused_elementwise").kernel
    i = np.array([1, 2], np.int32)
    as_int = kernel(np, i, ops=(("mul", ("in0", 1), ()),), dtype="int32")
    as_float = kernel(np, i, ops=(("mul", ("in0", 1.0), ()),), dtype="float32")
    assert as_int.dtype == np.int32 and as_float.dtype == np.float32


def test_the_fused_op_validates_its_description():
    x = hf.ones(3)
    fused = get_op("fused_elementwise")
    with pytest.raises(ValueError, match="invalid operand 'op0'"):
        apply(fused, x, ops=(("exp", ("op0",), ()),), dtype="float32")
    with pytest.raises(ValueError, match="'sum', which is not fusible"):
        apply(fused, x, ops=(("sum", ("in0",), ()),), dtype="float32")
    with pytest.raises(TypeError, match="declares dtype hybridfw.float64"):
        apply(fused, x, ops=(("exp", ("in0",), ()),), dtype="float64")
    got = apply(fused, x, ops=(("exp", ("in0",), ()), ("neg", ("op0",), ())), dtype="float32")
    np.testing.assert_array_equal(got.numpy(), -np.exp(np.ones(3, np.float32)))


def test_asking_for_a_gradient_through_a_fused_op_says_why_not(apply_pass):
    prog, y = _model("float32")
    out = apply_pass(fusion.run, prog, [y])
    with hf.static.program_guard(out):
        x = out.global_block().var("x")
        target = out.global_block().var(y.name).sum()
        with pytest.raises(RuntimeError, match="fused_elementwise has no gradient"):
            hf.static.gradients(target, [x])


def test_small_groups_stay_unfused_by_default(monkeypatch):
    monkeypatch.setattr(fusion, "MIN_ELEMENTS", 256)
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        small = (hf.static.data("s", [4, 4]) * 2.0 + 1.0).relu()
        large = (hf.static.data("l", [64, 64]) * 2.0 + 1.0).relu()
        dynamic = (hf.static.data("d", [-1, 2]) * 2.0 + 1.0).relu()
    types = [op.type for op in fusion.run(prog, [small, large, dynamic]).global_block().ops]
    assert types.count("fused_elementwise") == 2  # the (64, 64) and the (-1, 2) groups
    assert types.count("relu") == 1 and types.count("mul") == 1
