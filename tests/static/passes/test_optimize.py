"""The pass list: order, switches, debug output, verification after every pass, and whole models
that compute the same after all passes."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.static import passes
from hybridfw.static.passes import PASSES, clone_program, optimize


def _small():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        x.exp()  # unused
        y = ((x * 1.0) * 2.0 + 1.0).relu()
    return prog, y


def test_the_passes_and_their_order():
    assert [p.name for p in PASSES] == ["algebraic", "cse", "constant_folding", "dce",
                                        "slice_gradients", "batch_matmul", "batch_projections",
                                        "transposed_operands", "fusion", "inplace"]
    assert all(p.why for p in PASSES)


def test_all_passes(golden):
    prog, y = _small()
    before = str(prog)
    out = optimize(prog, fetch=[y])
    assert str(prog) == before
    golden(out, """
        input x : (3,) float32
        t4 = fused_elementwise(x) {ops=(('mul', ('in0', 2.0), ()), ('add', ('op0', 1.0), ()), ('relu', ('op1',), ())), dtype=hybridfw.float32} : (3,) float32
    """)  # noqa: E501


def test_passes_can_be_switched_off_by_name():
    prog, y = _small()
    out = optimize(prog, fetch=[y], disable=("fusion", "dce"))
    assert [op.type for op in out.global_block().ops] == ["exp", "mul", "add", "relu"]
    assert out.inplace == {"t3": "t2"}  # t4 is fetched: it gets memory of its own
    untouched = optimize(prog, fetch=[y], disable=[p.name for p in PASSES])
    assert untouched is not prog and str(untouched) == str(prog)


def test_unknown_pass_names_are_refused():
    prog, y = _small()
    with pytest.raises(ValueError, match=r"unknown pass name\(s\) \['cse2'\]; the passes are"):
        optimize(prog, disable=("cse2",))
    with pytest.raises(TypeError, match=r"disable takes a tuple of pass names, e.g. \('cse',\)"):
        optimize(prog, disable="cse")


def test_debug_prints_the_program_after_each_pass(capsys):
    prog, y = _small()
    optimize(prog, fetch=[y], debug=True, disable=("cse",))
    text = capsys.readouterr().out
    headers = [line for line in text.splitlines() if line.startswith("---- after")]
    assert headers == [f"---- after {p.name} ----" for p in PASSES if p.name != "cse"]
    assert "t0 = exp(x)" in text.split("---- after dce")[0]
    assert "t0 = exp(x)" not in text.split("---- after dce")[1]


def test_a_pass_that_breaks_the_program_is_named(monkeypatch):
    def broken(program, fetch=None):
        program = clone_program(program)
        program.global_block().ops.pop(1)
        return program
    monkeypatch.setattr(passes, "PASSES", (passes.Pass("broken", broken, "for the test"),))
    prog, y = _small()
    with pytest.raises(ValueError, match=r"optimize: the program is broken after pass 'broken': "
                                         r"verify: block 0, op 1 .* input 't1' is not defined"):
        optimize(prog, fetch=[y])
    assert len(optimize(prog, fetch=[y], verify=False).global_block().ops) == 4


def test_a_broken_input_program_is_reported_before_any_pass():
    prog, y = _small()
    prog.global_block().ops[1].inputs = ("nope", 1.0)
    with pytest.raises(ValueError, match="broken before any pass"):
        optimize(prog, fetch=[y])


def test_operators_without_outputs_pass_through(golden):
    prog = hf.static.Program()
    c = prog.constant(np.array([1.0, 2.0], np.float32))  # a constant only the program holds
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [2])
        hf.static.nn.cond(x.sum() > 0, lambda: None, lambda: None)
        y = x + c * 2.0
    golden(optimize(prog, fetch=[y]), """
        input x : (2,) float32
        param t3 : (2,) float32
        t4 = add(x, t3) : (2,) float32
    """)


# ---- whole models ----------------------------------------------------------------------------
def _mlp_training_step():
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [-1, 4])
        target = hf.static.data("target", [-1], "int64")
        loss = nn.functional.cross_entropy(model(x) * 1.0, target)
        grads = hf.static.gradients(loss, list(model.parameters()))
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((5, 4)).astype(np.float32),
            "target": np.array([0, 2, 1, 1, 0], np.int64)}
    return prog, feed, [loss, *grads]


def _cnn_inference():
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 10))
    model.eval()
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        y = nn.functional.softmax(model(hf.static.data("x", [-1, 1, 8, 8])), dim=-1)
    feed = {"x": np.random.default_rng(1).standard_normal((2, 1, 8, 8)).astype(np.float32)}
    return prog, feed, [y]


def _transformer_layer():
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16)
    layer.eval()
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        y = layer(hf.static.data("src", [5, 2, 8]))
    feed = {"src": np.random.default_rng(3).standard_normal((5, 2, 8)).astype(np.float32)}
    return prog, feed, [y]


def _dropout_training():
    model = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5), nn.ReLU())
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        y = model(hf.static.data("x", [4, 6])).sum()
        (g,) = hf.static.gradients(y, [model[0].weight])
    return prog, {"x": np.ones((4, 6), np.float32)}, [y, g]


def _loop_with_gradients():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        _, s = hf.static.nn.while_loop(
            lambda i, s: i < 4,
            lambda i, s: (i + 1, hf.static.nn.cond(i > 1, lambda: (s * 0.5).tanh() * 1.0,
                                                   lambda: (s + 1.0).T.T)), [0, x])
        loss = (s * s).sum() + (s * s).sum()
        (dx,) = hf.static.gradients(loss, [x])
    return prog, {"x": np.array([-1.0, 0.5, 2.0], np.float32)}, [loss, dx]


@pytest.mark.parametrize("build", [_mlp_training_step, _cnn_inference, _transformer_layer,
                                   _dropout_training, _loop_with_gradients])
def test_models_compute_the_same_after_all_passes(build):
    hf.manual_seed(0)
    prog, feed, fetch = build()
    out = optimize(prog, fetch=fetch)
    assert len(out.global_block().ops) < len(prog.global_block().ops)
    results = []
    for program in (prog, out):
        hf.manual_seed(1)  # dropout draws the same masks in both runs
        results.append(hf.static.Executor().run(program, feed=feed, fetch_list=fetch,
                                                return_numpy=True))
    for want, got in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_passes_share_optimizes_private_copy_and_clone_outside_it():
    from hybridfw.static.passes import cse
    from hybridfw.static.passes.clone import private_copy, working_copy
    prog, y = _small()
    assert working_copy(prog) is not prog                 # outside optimize: a clone
    seen = []
    with private_copy(prog) as make_private:
        assert working_copy(prog) is prog                 # the private copy itself
        other = clone_program(prog)
        assert working_copy(other) is not other
        make_private(other)                               # a pass returned a new program
        assert working_copy(other) is other and working_copy(prog) is not prog
        seen.append(cse.run(other, fetch=[y]) is other)   # rewritten in place
    assert seen == [True]
    assert working_copy(other) is not other               # the block is over
    # optimize leaves its input alone, and returns a new program even with every pass off
    before = str(prog)
    out = optimize(prog, fetch=[y])
    assert str(prog) == before and out is not prog
    assert optimize(prog, fetch=[y], disable=tuple(p.name for p in PASSES)) is not prog


def test_optimize_without_a_copy_rewrites_the_program_it_is_handed():
    """copy=False (to_static hands over the program it traced): the same result, computed in
    the given program rather than in a copy of it."""
    prog, y = _small()
    expected = str(optimize(prog, fetch=[y]))
    out = optimize(prog, fetch=[y], copy=False)
    assert out is prog and str(out) == expected
    feed = {"x": np.array([-1.0, 0.5, 2.0], np.float32)}
    (got,) = hf.static.Executor().run(out, feed=feed, fetch_list=[y.name], return_numpy=True)
    np.testing.assert_allclose(got, np.maximum(feed["x"] * 2 + 1, 0), rtol=1e-6)


@pytest.mark.parametrize("with_cond", [False, True])
def test_cloning_some_operators_is_erasing_the_others_from_a_full_copy(with_cond):
    from hybridfw.static.passes.rewrite import drop_unreachable_blocks, erase_ops
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        a = x * 2.0
        b = hf.static.nn.cond(x.sum() > 0, lambda: a + 1.0, lambda: a - 1.0) if with_cond \
            else a + 1.0
        (b * b).exp()
    keep = set(range(0, len(prog.global_block().ops), 2))
    full = clone_program(prog)
    erase_ops(full.global_block(), [op for i, op in enumerate(full.global_block().ops)
                                    if i not in keep])
    drop_unreachable_blocks(full)
    part = clone_program(prog, keep=keep)
    drop_unreachable_blocks(part)
    assert str(part) == str(full)
    assert [list(b.vars) for b in part.blocks] == [list(b.vars) for b in full.blocks]
    assert all(v.block is b for b in part.blocks for v in b.vars.values())
    assert next(part._counter) == next(full._counter)
