"""Constant folding: computations on constants run once and become constant parameters."""
import numpy as np

import hybridfw as hf
from hybridfw import nn
from hybridfw.ops import creation
from hybridfw.ops.registry import apply
from hybridfw.static.passes import constant_folding

FEED = {"x": np.array([0.5, -1.0, 2.0], np.float32)}


def test_constant_subgraphs_become_parameters_under_their_names(apply_pass, golden,
                                                                 same_results):
    lin = nn.Linear(2, 3)
    prog = hf.static.Program()
    c = prog.constant(np.array([1.0, 2.0, 3.0], np.float32))  # constants only it holds
    k = prog.constant(np.array([1, 2, 3], np.int32))
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        y = x * (c * 2.0 + 1.0).exp() + (k + 0.5)  # int32 + 0.5 computes in float32
        z = x + hf.full((3,), 2.0)                 # an op without inputs
        w = lin.weight.sum(dim=0)                  # a trainable parameter is not a constant
        p = apply(creation.bernoulli, c * 0.1)     # a random draw is never folded
    fetch = [y, z, w]
    out = apply_pass(constant_folding.run, prog, [*fetch, p])
    golden(out, """
        input x : (3,) float32
        param const0 : (3,) float32
        param const1 : (3,) int32
        param param10 : (3, 2) float32
        param t4 : (3,) float32
        param t6 : (3,) float32
        param t8 : (3,) float32
        param t12 : (3,) float32
        t5 = mul(x, t4) : (3,) float32
        t7 = add(t5, t6) : (3,) float32
        t9 = add(x, t8) : (3,) float32
        t11 = sum(param10) {dim=0, keepdim=False} : (2,) float32
        t13 = bernoulli(t12) : (3,) float32
    """)
    assert not any(out.params[n].requires_grad for n in ("t4", "t6", "t8", "t12"))
    same_results(prog, out, FEED, fetch)


def test_intermediate_folded_values_are_not_kept(apply_pass):
    prog = hf.static.Program()
    c = prog.constant(np.array([1.0, 2.0], np.float32))
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [2])
        y = x + ((c + 1.0) * 3.0).sqrt()
    out = apply_pass(constant_folding.run, prog, [y])
    folded = [n for n in out.params if n not in prog.params]
    assert folded == [prog.global_block().ops[-2].outputs[0]]  # only the sqrt result
    np.testing.assert_array_equal(out.params[folded[0]].numpy(),
                                  np.sqrt((np.array([1, 2], np.float32) + 1) * 3))


def test_a_folded_fetch_target_stays_fetchable(apply_pass, same_results):
    prog = hf.static.Program()
    c = prog.constant(np.array([1.0, 4.0], np.float32))
    with hf.static.program_guard(prog):
        y = (c * c).sqrt()
    out = apply_pass(constant_folding.run, prog, [y])
    assert out.global_block().ops == [] and y.name in out.params
    same_results(prog, out, {}, [y])


def test_big_results_and_failing_kernels_are_left_to_run_time(apply_pass):
    k = hf.tensor([1, 2], dtype="int32")
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        big = hf.full((300, 300), 1.0)        # bigger than every input and the limit
        bad = k ** -1                         # numpy refuses negative int powers
    out = apply_pass(constant_folding.run, prog, [big, bad])
    assert [op.type for op in out.global_block().ops] == ["full", "pow"]


def test_operators_in_sub_blocks_are_not_folded(apply_pass, same_results):
    c = hf.tensor([1.0, 2.0, 3.0])
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        y = hf.static.nn.cond(x.sum() > 0, lambda: x + c * 2.0, lambda: x)
    out = apply_pass(constant_folding.run, prog, [y])
    assert str(out) == str(prog)
    same_results(prog, out, FEED, [y])


def test_captured_tensors_are_read_when_the_program_runs(apply_pass):
    """A tensor the program captured (a global, a module's buffer) may be updated in place
    after the program was built: computations on it stay in the program, and a run sees the
    update, as eager code would."""
    c = hf.tensor([1.0, 4.0])
    bn = nn.BatchNorm1d(2).eval()
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3, 2])
        y = x * c.reshape(1, 2).sqrt()
        z = bn(x)
    out = apply_pass(constant_folding.run, prog, [y, z])
    assert str(out) == str(prog)  # nothing folded
    feed = {"x": np.arange(6, dtype=np.float32).reshape(3, 2)}
    with hf.no_grad():
        c.mul_(4.0)
        bn.running_mean.fill_(2.0)
        bn.running_var.fill_(4.0)
    got_y, got_z = hf.static.Executor().run(out, feed=feed, fetch_list=[y, z])
    np.testing.assert_allclose(got_y, feed["x"] * np.sqrt([4.0, 16.0]), rtol=1e-6)
    np.testing.assert_allclose(got_z, (feed["x"] - 2.0) / np.sqrt(4.0 + 1e-5), rtol=1e-5)
