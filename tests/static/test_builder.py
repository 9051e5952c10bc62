"""Building programs with program_guard/data and running them on the executor."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn


def test_program_matches_eager_for_a_small_model():
    hf.manual_seed(0)
    lin = nn.Linear(3, 4)
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, 3], "float32")
        y = (lin(x).relu() * 2.0).sum(dim=1)
    assert x.shape == (-1, 3) and y.shape == (-1,)
    exe = hf.static.Executor()
    for n in (2, 5):
        xv = hf.randn(n, 3)
        (out,) = exe.run(prog, feed={"x": xv}, fetch_list=[y])
        ref = (lin(xv).relu() * 2.0).sum(dim=1).detach().numpy()
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)


def test_parameters_are_captured_once_and_printed():
    lin = nn.Linear(2, 2)
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [1, 2])
        lin(lin(x))
    assert len(prog.params) == 2
    text = str(prog)
    assert text.splitlines()[0] == "input x : (1, 2) float32"
    assert text.count("linear(") == 2


def test_build_time_errors_name_the_op_and_shapes():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3, 4])
        with pytest.raises(ValueError, match=r"matmul: shapes \(3, 4\) and \(3, 4\)"):
            x @ x


def test_feed_validation():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, 2])
        y = x + 1.0
    exe = hf.static.Executor()
    with pytest.raises(ValueError, match="missing feed"):
        exe.run(prog, feed={}, fetch_list=[y])
    with pytest.raises(ValueError, match=r"expects shape \(-1, 2\)"):
        exe.run(prog, feed={"x": np.ones((2, 3), np.float32)}, fetch_list=[y])
    with pytest.raises(TypeError, match="expects dtype"):
        exe.run(prog, feed={"x": np.ones((2, 2), np.float64)}, fetch_list=[y])


def test_variables_refuse_python_truth_values():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [2])
        with pytest.raises(TypeError, match="hf.static.nn.cond"):
            bool(x > 0)


def test_inplace_update_rebinds_the_variable():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        y = x * 1.0
        before = y
        y += 2.0
        assert y is before
        z = y * 3.0
    (out,) = hf.static.Executor().run(prog, feed={"x": np.arange(3, dtype=np.float32)},
                                      fetch_list=[z])
    np.testing.assert_allclose(out.numpy(), (np.arange(3) + 2.0) * 3.0)


def test_mean_and_var_over_dynamic_dims_use_run_time_sizes():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, 3])
        outs = [x.mean(), x.var(dim=0), x.mean(dim=1), x.std()]
    exe = hf.static.Executor()
    for n in (2, 5):
        xv = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        got = exe.run(prog, feed={"x": xv}, fetch_list=outs)
        want = [xv.mean(), xv.var(0, ddof=1), xv.mean(1), xv.std(ddof=1)]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-5)


def test_gradients_needing_unknown_sizes_read_them_or_are_refused_clearly():
    from hybridfw.ops.indexing import _getitem_grad
    from hybridfw.ops.registry import TensorMeta
    from hybridfw.ops.shape_ops import _concat_grad
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, 3])
        assert _concat_grad(x, None, x, x, dim=0, input_index=1).shape == (-1, 3)
        assert _getitem_grad(x[0], None, x, spec=(("int", 0),)).shape == (-1, 3)
        unknown = TensorMeta((-1, 3), x.dtype)  # no value to read the run-time shape from
        with pytest.raises(ValueError, match=r"run-time shape of an input known only as "
                                             r"\(-1, 3\)"):
            _concat_grad(x, None, unknown, unknown, dim=0, input_index=1)


def test_random_draws_and_fills_take_a_dynamic_batch_dim_at_run_time():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, 8])
        dropped = nn.functional.dropout(x, 0.5)
        noise = hf.randn_like(x) + hf.zeros_like(x) + hf.ones_like(x)
    assert dropped.shape == noise.shape == (-1, 8)
    exe = hf.static.Executor()
    for batch in (3, 5):
        xv = hf.randn(batch, 8)
        hf.manual_seed(7)
        got_dropped, got_noise = exe.run(prog, feed={"x": xv}, fetch_list=[dropped, noise],
                                         return_numpy=True)
        hf.manual_seed(7)
        ref_dropped = nn.functional.dropout(xv, 0.5)
        ref_noise = hf.randn_like(xv) + 1.0
        assert got_noise.shape == (batch, 8)
        np.testing.assert_array_equal(got_dropped, ref_dropped.numpy())
        np.testing.assert_allclose(got_noise, ref_noise.numpy(), rtol=1e-6)


def test_a_value_of_another_program_is_refused_not_taken_by_name():
    """Both programs have a 't0': using the inner program's value in the outer one read the
    outer program's 't0' (x * 2) silently."""
    outer, inner = hf.static.Program(), hf.static.Program()
    with hf.static.program_guard(outer):
        x = hf.static.data("x", [2])
        with hf.static.program_guard(inner):
            v = hf.static.data("u", [2]) * 3.0
        y = x * 2.0
        assert y.name == v.name
        for build in (lambda: x + v, lambda: hf.cat([x, v]),
                      lambda: hf.static.nn.cond(x.sum() > 0, lambda: v, lambda: x)):
            with pytest.raises(ValueError, match=r"Variable\(t0: \(2,\) float32\) is a value of "
                                                 r"another program than the one being built"):
                build()
    (got,) = hf.static.Executor().run(outer, feed={"x": np.ones(2, np.float32)}, fetch_list=[y])
    assert got.tolist() == [2.0, 2.0]


def test_a_programs_value_used_outside_program_guard_is_named():
    """x + 1 or x.sum() after the program_guard block ended reached numpy with the Variable:
    "operand 'Variable' does not support ufuncs", "'DType' object has no attribute 'kind'"."""
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [2])
    for use in (lambda: x + 1, lambda: hf.ones(2) * x, lambda: x.sum(), lambda: hf.cat([x, x]),
                lambda: nn.functional.relu(x)):
        with pytest.raises(TypeError, match=r"Variable\(x: \(2,\) float32\) is a value of a "
                                            r"static program, used while no program is being "
                                            r"built; use it inside hf.static.program_guard"):
            use()


@pytest.mark.parametrize("shape", [3, [2, "a"], [2.5], (True, 2), "23"])
def test_data_refuses_a_shape_that_is_not_a_list_of_ints(shape):
    # [2.5] used to become (2,), 3 and [2, 'a'] failed inside int() or iter() unnamed
    with hf.static.program_guard(hf.static.Program()):
        with pytest.raises(TypeError, match=r"data 'x': shape must be a list or tuple of ints"):
            hf.static.data("x", shape)


def test_data_takes_numpy_ints_and_none_or_minus_one_for_dynamic_dims():
    with hf.static.program_guard(hf.static.Program()):
        x = hf.static.data("x", (None, np.int64(3), -1))
    assert x.shape == (-1, 3, -1)


@pytest.mark.parametrize("name", ["", None, 3])
def test_data_refuses_a_name_that_is_not_a_non_empty_string(name):
    # '' and None made a variable with a generated name but listed the given one as the
    # input, so printing the program raised KeyError and no feed could reach it
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        with pytest.raises(TypeError, match="data: name must be a non-empty string"):
            hf.static.data(name, [2])
        hf.static.data("x", [2])
    assert prog.feeds == ["x"] and "input x" in str(prog)
