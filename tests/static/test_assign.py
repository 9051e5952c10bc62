"""assign_param: in-place updates of captured eager tensors (BatchNorm's running statistics)
write them when the program runs, through every pass, the planner and save/load."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn

S = hf.static


def _stats(bn):
    return [getattr(bn, k).numpy().copy()
            for k in ("running_mean", "running_var", "num_batches_tracked")]


@pytest.mark.parametrize("optimized", [False, True])
def test_batchnorm_training_in_a_program_updates_running_stats_like_eager(optimized):
    hf.manual_seed(0)
    eager, static = nn.BatchNorm2d(3), nn.BatchNorm2d(3)
    nn.init.uniform_(eager.weight, 0.5, 1.5)
    static.load_state_dict(eager.state_dict())
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None, 3, 4, 4])  # the count per channel is known at run time only
        y = static(x)
    if optimized:
        prog = S.optimize(prog, fetch=[y])
    S.verify(prog)
    exe = S.Executor(debug_poison=True)
    for batch in (2, 5):
        xv = hf.randn(batch, 3, 4, 4) * 2.0 + 1.0
        got, = exe.run(prog, feed={"x": xv}, fetch_list=[y], return_numpy=True)
        np.testing.assert_allclose(got, eager(xv).detach().numpy(), rtol=1e-5, atol=1e-5)
    for s, e in zip(_stats(static), _stats(eager)):
        np.testing.assert_allclose(s, e, rtol=1e-6)
    assert int(static.num_batches_tracked.item()) == 2


def test_later_reads_see_the_new_value_and_each_run_writes_the_tensor():
    buf = hf.tensor([1.0, 2.0])
    prog = S.Program()
    with S.program_guard(prog):
        before = buf * 1.0
        buf.mul_(3.0).add_(1.0)  # two updates: one write, of the last value
        after = buf * 1.0
    assert [op.type for op in prog.global_block().ops].count("assign_param") == 1
    assert "assign_param(param0, t" in str(prog)
    version = buf._storage.version
    for _ in range(2):
        b, a = S.Executor().run(prog, fetch_list=[before, after], return_numpy=True)
        np.testing.assert_array_equal(a, b * 3.0 + 1.0)
        np.testing.assert_array_equal(buf.numpy(), a)
    assert buf._storage.version == version + 2


def test_updates_inside_a_loop_body_write_every_iteration():
    count = hf.tensor(0)
    prog = S.Program()
    with S.program_guard(prog):
        n = S.data("n", [], "int64")

        def body(i):
            count.add_(2)
            return i + 1
        S.nn.while_loop(lambda i: i < n, body, [0])
    S.Executor().run(S.optimize(prog, fetch=[]), feed={"n": hf.tensor(4)})
    assert count.item() == 8


def _stale_reads():
    """Reads of the parameter itself around a write (as a view made before it would): the value
    read depends on where the operator runs."""
    buf = hf.tensor([1.0, 2.0])
    prog = S.Program()
    with S.program_guard(prog):
        param = prog.capture(buf)
        first = param * 2.0
        buf.add_(10.0)
        second = param * 2.0       # same expression, after the write
        fused = first + 1.0        # fusing first into it would read after the write
    return buf, prog, [first, second, fused]


def test_passes_neither_merge_nor_move_reads_across_the_write():
    buf, prog, fetch = _stale_reads()
    optimized = S.optimize(prog, fetch=fetch)
    assert "assign_param" in str(optimized)
    first, second, fused = S.Executor().run(optimized, fetch_list=[f.name for f in fetch],
                                            return_numpy=True)
    np.testing.assert_array_equal(first, [2.0, 4.0])
    np.testing.assert_array_equal(second, [22.0, 24.0])
    np.testing.assert_array_equal(fused, [3.0, 5.0])


def test_dead_code_elimination_keeps_the_write_and_folding_never_freezes_the_buffer():
    buf = hf.tensor([1.0])
    prog = S.Program()
    with S.program_guard(prog):
        buf.mul_(2.0)
    optimized = S.optimize(prog, fetch=[])
    assert [op.type for op in optimized.global_block().ops] == ["mul", "assign_param"]
    for _ in range(3):
        S.Executor().run(optimized)
    assert buf.item() == 8.0


def test_verifier_and_errors():
    buf = hf.tensor([1.0, 2.0])
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [2], "float64")
        with pytest.raises(TypeError, match="mul: result type .*float64 can't be cast to the "
                                            "in-place output type .*int64"):
            hf.tensor([1, 2]).mul_(x)
        buf.mul_(x)  # float64 into float32: cast, as in eager
        with pytest.raises(ValueError, match=r"in-place output of shape \(2,\)"):
            buf.add_(hf.ones(3, 2))
        S.data("y", [None])
    assign = next(op for op in prog.global_block().ops if op.type == "assign_param")
    assign.inputs = (assign.inputs[0], "y")  # a value whose size is only known at run time
    S.verify(prog)
    with pytest.raises(ValueError, match=r"the new value of 'param\d+' \('y'\) has shape \(3,\)"):
        S.Executor().run(prog, feed={"x": np.zeros(2), "y": np.zeros(3, np.float32)})
    assign.inputs = ("x", assign.inputs[1])
    with pytest.raises(ValueError, match="writes 'x', which is not a parameter"):
        S.verify(prog)


def test_save_load_round_trip_writes_the_loaded_tensors(tmp_path):
    hf.manual_seed(1)
    bn = nn.BatchNorm1d(4)
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None, 4])
        y = bn(x)
    before = _stats(bn)
    path = tmp_path / "bn.hfp"
    S.save_program(prog, path)
    loaded = S.load_program(path)
    S.verify(loaded)
    assert str(loaded) == str(prog)
    xv = hf.randn(6, 4)
    want, = S.Executor().run(prog, feed={"x": xv}, fetch_list=[y], return_numpy=True)
    got, = S.Executor().run(loaded, feed={"x": xv}, fetch_list=[y.name], return_numpy=True)
    np.testing.assert_array_equal(got, want)
    written = {name: t.detach().numpy() for name, t in loaded.params.items()}
    for name, t in prog.params.items():  # the loaded program wrote its own copies, the same way
        np.testing.assert_array_equal(written[name], t.detach().numpy())
    assert any(not np.array_equal(b, a) for b, a in zip(before, _stats(bn)))
