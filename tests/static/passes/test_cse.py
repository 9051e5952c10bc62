"""Common-subexpression elimination: each pure computation once, random draws never merged."""
import numpy as np

import hybridfw as hf
from hybridfw.static.passes import cse

X = np.array([-1.5, 0.0, 2.0], np.float32)
W = np.array([0.5, -0.0, 3.0], np.float32)


def test_duplicates_merge_and_constants_compare_by_type_and_sign(apply_pass, golden,
                                                                   same_results):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        w = hf.static.data("w", [3])
        a = (x + 1.0) * 2.0
        b = (x + 1.0) * 2.0   # the same chain: both levels merge
        c = x + 1             # an int constant is another expression
        d = x * 0.0
        e = x * -0.0          # -0.0 gives other signed zeros than 0.0
        f = x + w
        g = w + x             # add is commutative
        h = x - w
        k = w - x             # sub is not
        y = a + b + c + d + e + f + g + h + k
    out = apply_pass(cse.run, prog, [y])
    golden(out, """
        input x : (3,) float32
        input w : (3,) float32
        t0 = add(x, 1.0) : (3,) float32
        t1 = mul(t0, 2.0) : (3,) float32
        t4 = add(x, 1) : (3,) float32
        t5 = mul(x, 0.0) : (3,) float32
        t6 = mul(x, -0.0) : (3,) float32
        t7 = add(x, w) : (3,) float32
        t9 = sub(x, w) : (3,) float32
        t10 = sub(w, x) : (3,) float32
        t11 = add(t1, t1) : (3,) float32
        t12 = add(t11, t4) : (3,) float32
        t13 = add(t12, t5) : (3,) float32
        t14 = add(t13, t6) : (3,) float32
        t15 = add(t14, t7) : (3,) float32
        t16 = add(t15, t7) : (3,) float32
        t17 = add(t16, t9) : (3,) float32
        t18 = add(t17, t10) : (3,) float32
    """)
    same_results(prog, out, {"x": X, "w": W}, [y])


def test_attributes_must_match(apply_pass):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [2, 3])
        y = x.sum(dim=0).sum() + x.sum(dim=1).sum() + x.sum(dim=0).sum()
    out = apply_pass(cse.run, prog, [y])
    assert [op.attrs.get("dim") for op in out.global_block().ops if op.type == "sum"] == \
        [0, None, 1, None]


def test_random_draws_are_never_merged(apply_pass):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        y = hf.rand(3) + hf.rand(3)
    out = apply_pass(cse.run, prog, [y])
    assert [op.type for op in out.global_block().ops] == ["uniform", "uniform", "add"]


def test_fetch_targets_are_not_merged_away(apply_pass, same_results):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        a = x.exp()
        b = x.exp()
    out = apply_pass(cse.run, prog, [a, b])
    assert len(out.global_block().ops) == 2
    same_results(prog, out, {"x": X}, [a, b])


def test_a_branch_reuses_an_outer_value_and_captures_it(apply_pass, golden, same_results):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        s = x.exp()
        y = hf.static.nn.cond(x.sum() > 0, lambda: x.exp() * 2.0, lambda: x.exp() - 1.0) + s
    out = apply_pass(cse.run, prog, [y])
    golden(out, """
        input x : (3,) float32
        t0 = exp(x) : (3,) float32
        t1 = sum(x) {dim=None, keepdim=False} : () float32
        t2 = gt(t1, 0) : () bool
        t7 = cond(t2, x, t0) {true_outputs=('t4',), false_outputs=('t6',)} : (3,) float32
          block 1:
            t4 = mul(t0, 2.0) : (3,) float32
          block 2:
            t6 = sub(t0, 1.0) : (3,) float32
        t8 = add(t7, t0) : (3,) float32
    """)
    for sign in (1, -1):
        same_results(prog, out, {"x": sign * X}, [y])


def test_sibling_branches_do_not_share_and_inner_values_do_not_leak(apply_pass, same_results):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        y = hf.static.nn.cond(x.sum() > 0, lambda: x.exp() * 2.0, lambda: x.exp() - 1.0)
        z = y + x.exp()
    out = apply_pass(cse.run, prog, [z])
    assert str(out) == str(prog)
    same_results(prog, out, {"x": X}, [z])


def test_a_branch_result_that_merges_is_renamed_in_the_cond(apply_pass, same_results):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        s = x * 2.0
        y = hf.static.nn.cond(x.sum() > 0, lambda: x * 2.0, lambda: x - 1.0)
        z = y + s
    out = apply_pass(cse.run, prog, [z])
    cond = next(op for op in out.global_block().ops if op.type == "cond")
    assert cond.attrs["true_outputs"] == (s.name,) and s.name in cond.inputs
    for sign in (1, -1):
        same_results(prog, out, {"x": sign * X}, [z])
