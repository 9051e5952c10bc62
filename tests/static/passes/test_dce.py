"""Dead-code elimination: what the fetch targets need stays, the rest goes."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.static.passes import analysis, dce

FEED = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}


def _program():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [2, 3])
        a = x.exp()
        a.sum(dim=1)  # read by nothing
        hf.rand(3)    # an unused random draw
        y = (a * 2.0).relu()
    return prog, y


def test_keeps_only_what_the_fetch_targets_need(apply_pass, golden, same_results):
    prog, y = _program()
    out = apply_pass(dce.run, prog, [y])
    golden(out, """
        input x : (2, 3) float32
        t0 = exp(x) : (2, 3) float32
        t3 = mul(t0, 2.0) : (2, 3) float32
        t4 = relu(t3) : (2, 3) float32
    """)
    same_results(prog, out, FEED, [y])


def test_without_fetch_targets_every_sink_is_kept(apply_pass):
    prog, _ = _program()
    assert str(apply_pass(dce.run, prog)) == str(prog)
    assert analysis.resolve_fetch(prog, None) == ("t1", "t2", "t4")


def test_fetching_an_intermediate_keeps_its_producers(apply_pass, same_results):
    prog, y = _program()
    out = apply_pass(dce.run, prog, ["t1", y])
    assert [op.type for op in out.global_block().ops] == ["exp", "sum", "mul", "relu"]
    same_results(prog, out, FEED, ["t1", y])


def test_side_effects_stay_even_when_unread(apply_pass, monkeypatch):
    prog, y = _program()
    monkeypatch.setattr(analysis, "SIDE_EFFECT_OPS", {"sum"})
    kept = apply_pass(dce.run, prog, [y])
    assert "sum" in [op.type for op in kept.global_block().ops]


def test_an_op_writing_a_persistable_variable_stays(apply_pass):
    prog, y = _program()
    prog.global_block().vars["t1"].persistable = True  # state that outlives the run
    kept = apply_pass(dce.run, prog, [y])
    assert "t1" in [op.outputs[0] for op in kept.global_block().ops]


def test_unknown_fetch_targets_are_refused():
    prog, _ = _program()
    with pytest.raises(ValueError, match="fetch target 'nope' is not a variable"):
        dce.run(prog, ["nope"])


def test_dead_control_flow_goes_with_its_blocks_and_branches_are_pruned(apply_pass, golden,
                                                                          same_results):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        s = x.sum()
        hf.static.nn.cond(s > 0, lambda: x * 2.0, lambda: x - 1.0)  # result unused

        def true_fn():
            x.exp()  # unused inside the branch
            return x + 1.0
        y = hf.static.nn.cond(s > 1, true_fn, lambda: x * 3.0)
    out = apply_pass(dce.run, prog, [y])
    golden(out, """
        input x : (3,) float32
        t0 = sum(x) {dim=None, keepdim=False} : () float32
        t5 = gt(t0, 1) : () bool
        t9 = cond(t5, x) {true_outputs=('t7',), false_outputs=('t8',)} : (3,) float32
          block 1:
            t7 = add(x, 1.0) : (3,) float32
          block 2:
            t8 = mul(x, 3.0) : (3,) float32
    """)
    for value in (-1.0, 1.0):
        same_results(prog, out, {"x": np.full(3, value, np.float32)}, [y])


def test_values_a_loop_saves_for_backward_stay(apply_pass, same_results):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        _, s = hf.static.nn.while_loop(lambda i, s: i < 3,
                                       lambda i, s: (i + 1, (s * 0.5).tanh()), [0, x])
        (dx,) = hf.static.gradients(s.sum(), [x])
    out = apply_pass(dce.run, prog, [dx])
    same_results(prog, out, {"x": np.linspace(-1, 1, 3).astype(np.float32)}, [dx])


def test_unread_constants_are_dropped_but_trainable_parameters_stay(apply_pass):
    lin = nn.Linear(3, 3)
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        lin(x)  # unused: its parameters stay (trainable)
        (x + hf.tensor([1.0, 2.0, 3.0])).exp()  # unused: its constant goes
        y = x * 2.0
    out = apply_pass(dce.run, prog, [y])
    assert set(out.params) == set(prog.trainable_params())
    assert len(prog.params) == 3
