"""Algebraic simplification: neutral elements, permute and reshape chains."""
import numpy as np

import hybridfw as hf
from hybridfw.static.passes import algebraic

RNG = np.random.default_rng(0)


def test_neutral_elements_disappear_when_shape_and_dtype_are_unchanged(apply_pass, golden,
                                                                         same_results):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [2, 3])
        i = hf.static.data("i", [2, 3], "int32")
        a = ((((((x * 1.0) * 1) + 0.0) - 0) / 1.0) + 0).exp()
        b = 1.0 * (0.0 + x)
        c = i / 1        # a float result: kept
        d = i * 1.0      # a float result: kept
        e = 0.0 - x      # not an identity
        f = 1.0 / x      # not an identity
        g = i + 0        # int32 in, int32 out: removed
        y = a + b + c + d + e + f + g
    out = apply_pass(algebraic.run, prog, [y])
    golden(out, """
        input x : (2, 3) float32
        input i : (2, 3) int32
        t6 = exp(x) : (2, 3) float32
        t9 = div(i, 1) : (2, 3) float32
        t10 = mul(i, 1.0) : (2, 3) float32
        t11 = sub(0.0, x) : (2, 3) float32
        t12 = div(1.0, x) : (2, 3) float32
        t14 = add(t6, x) : (2, 3) float32
        t15 = add(t14, t9) : (2, 3) float32
        t16 = add(t15, t10) : (2, 3) float32
        t17 = add(t16, t11) : (2, 3) float32
        t18 = add(t17, t12) : (2, 3) float32
        t19 = add(t18, i) : (2, 3) float32
    """)
    feed = {"x": RNG.standard_normal((2, 3)).astype(np.float32),
            "i": np.arange(6, dtype=np.int32).reshape(2, 3)}
    same_results(prog, out, feed, [y])


def test_fetched_identities_stay(apply_pass):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        y = x * 1.0
    out = apply_pass(algebraic.run, prog, [y])
    assert str(out) == str(prog)


def test_permute_and_reshape_chains(apply_pass, golden, same_results):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [2, 3, 4])
        n = hf.static.data("n", [-1, 6])
        a = x.permute(1, 0, 2).permute(1, 0, 2)        # identity: gone
        b = x.permute(2, 0, 1).permute(2, 0, 1)        # composes to (1, 2, 0)
        t = x.transpose(0, 1)
        c = t.transpose(0, 1) + t.sum()                 # the inner permute has another reader
        r = x.reshape(6, 4).reshape(4, 6).reshape(24)   # one reshape
        s = x.reshape(24).reshape(2, 3, 4)              # back to x's shape: gone
        u = n.reshape(-1).reshape(-1, 3)                # unknown dims, same inference: one
        v = n.reshape(4, 6).reshape(-1)                 # (24,) would become (-1,): kept
        y = a.sum() + b.sum() + c.sum() + r.sum() + s.sum() + u.sum() + v.sum()
    out = apply_pass(algebraic.run, prog, [y])
    golden(out, """
        input x : (2, 3, 4) float32
        input n : (-1, 6) float32
        t3 = permute(x) {dims=(1, 2, 0)} : (3, 4, 2) float32
        t4 = permute(x) {dims=(1, 0, 2)} : (3, 2, 4) float32
        t6 = sum(t4) {dim=None, keepdim=False} : () float32
        t7 = add(x, t6) : (2, 3, 4) float32
        t10 = reshape(x) {shape=(24,)} : (24,) float32
        t14 = reshape(n) {shape=(-1, 3)} : (-1, 3) float32
        t15 = reshape(n) {shape=(4, 6)} : (4, 6) float32
        t16 = reshape(t15) {shape=(-1,)} : (24,) float32
        t17 = sum(x) {dim=None, keepdim=False} : () float32
        t18 = sum(t3) {dim=None, keepdim=False} : () float32
        t19 = add(t17, t18) : () float32
        t20 = sum(t7) {dim=None, keepdim=False} : () float32
        t21 = add(t19, t20) : () float32
        t22 = sum(t10) {dim=None, keepdim=False} : () float32
        t23 = add(t21, t22) : () float32
        t24 = sum(x) {dim=None, keepdim=False} : () float32
        t25 = add(t23, t24) : () float32
        t26 = sum(t14) {dim=None, keepdim=False} : () float32
        t27 = add(t25, t26) : () float32
        t28 = sum(t16) {dim=None, keepdim=False} : () float32
        t29 = add(t27, t28) : () float32
    """)
    feed = {"x": RNG.standard_normal((2, 3, 4)).astype(np.float32),
            "n": RNG.standard_normal((4, 6)).astype(np.float32)}
    same_results(prog, out, feed, [y, b])


def test_a_chain_of_three_permutes_is_one(apply_pass, same_results):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [2, 3, 4])
        y = x.permute(1, 2, 0).permute(0, 2, 1).permute(2, 0, 1)
    out = apply_pass(algebraic.run, prog, [y])
    (op,) = out.global_block().ops
    assert op.inputs == ("x",) and op.attrs["dims"] == (2, 1, 0)
    same_results(prog, out, {"x": RNG.standard_normal((2, 3, 4)).astype(np.float32)}, [y])


def test_identities_inside_a_branch_rename_the_branch_result(apply_pass, same_results):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        y = hf.static.nn.cond(x.sum() > 0, lambda: (x * 2.0) * 1.0, lambda: x + 0.0)
    out = apply_pass(algebraic.run, prog, [y])
    cond = out.global_block().ops[-1]
    assert [op.type for b in cond.blocks for op in b.ops] == ["mul"]
    assert cond.attrs["false_outputs"] == ("x",)
    for sign in (1, -1):
        same_results(prog, out, {"x": sign * np.arange(3, dtype=np.float32)}, [y])
