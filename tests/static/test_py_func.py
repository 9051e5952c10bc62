"""py_func: Python callbacks run when the program runs, checked against their declared outputs,
pass no gradient, survive passes by their side effects, and save by name only."""
import warnings

import numpy as np
import pytest

import hybridfw as hf

S = hf.static


def _top2(a):
    """Two outputs: the sorted values (float) and the argsort (int64)."""
    order = np.argsort(a, kind="stable")
    return a[order], order.astype(np.int64)


def test_callback_outputs_with_run_time_dims_and_dtypes():
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None])
        values, order = S.py_func(_top2, [x], [((None,), "float32"), ((-1,), np.int64)])
        y = values * 2.0
    assert (values.shape, order.dtype) == ((-1,), hf.int64)
    assert "py_func(x) {fn=test_py_func._top2" in str(prog).replace("tests.static.", "")
    S.verify(prog)
    for data in ([3.0, 1.0, 2.0], [5.0, -1.0]):
        got_y, got_order = S.Executor().run(prog, feed={"x": hf.tensor(data)},
                                            fetch_list=[y, order], return_numpy=True)
        np.testing.assert_array_equal(got_y, np.sort(data) * 2.0)
        np.testing.assert_array_equal(got_order, np.argsort(data))


def test_eager_inputs_call_the_function_now():
    values, order = S.py_func(_top2, [hf.tensor([2.0, 1.0])],
                              [((2,), "float32"), ((2,), "int64")])
    assert isinstance(values, hf.Tensor) and values.tolist() == [1.0, 2.0]
    assert order.tolist() == [1, 0]


@pytest.mark.parametrize("fn,error,match", [
    (lambda a: a.astype(np.float64), TypeError, "returned dtype float64 as output 0, declared "
                                                "float32"),
    (lambda a: a[:1], ValueError, r"returned shape \(1,\) as output 0, declared \(3,\)"),
    (lambda a: (a, a), ValueError, "returned 2 value.*declares 1"),
    (lambda a: 3.0, TypeError, "returned a float as output 0"),
])
def test_returned_values_are_checked_and_errors_name_the_function(fn, error, match):
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [3])
        y, = S.py_func(fn, [x], [((3,), "float32")])
    with pytest.raises(error, match=r"py_func: \S*test_py_func\.<lambda> " + match):
        S.Executor().run(prog, feed={"x": np.ones(3, np.float32)}, fetch_list=[y])


def test_exceptions_of_the_function_keep_their_type():
    def check(a):
        if a.sum() < 0:
            raise AssertionError("negative sum")

    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [2])
        S.py_func(check, [x], [], has_side_effects=True)
    S.Executor().run(prog, feed={"x": np.ones(2, np.float32)})
    with pytest.raises(AssertionError, match="negative sum"):
        S.Executor().run(prog, feed={"x": -np.ones(2, np.float32)})


def test_no_gradient_flows_through_a_callback():
    w = hf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [3], "float64")
        squared, = S.py_func(np.square, [x * w], [((3,), "float64")])
        loss = (squared * w).sum() + (x * w).sum()
        gx, gw = S.gradients(loss, [x, w])
    xv = np.array([0.5, -1.0, 2.0])
    got_x, got_w = S.Executor().run(prog, feed={"x": xv}, fetch_list=[gx, gw],
                                    return_numpy=True)
    xe = hf.tensor(xv, requires_grad=True)
    ((xe * w).detach().square() * w).sum().add((xe * w).sum()).backward()
    np.testing.assert_allclose(got_x, xe.grad.numpy())
    np.testing.assert_allclose(got_w, w.grad.numpy())


def test_dead_code_elimination_keeps_only_used_or_side_effecting_callbacks():
    seen = []
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [2])
        S.py_func(np.exp, [x], [((2,), "float32")])  # unused, no side effects
        S.py_func(lambda a: seen.append(a.copy()), [x], [], has_side_effects=True)
        y = x + 1.0
    optimized = S.optimize(prog, fetch=[y])
    kinds = [op.type for op in optimized.global_block().ops]
    assert kinds.count("py_func") == 1 and "fn=test_py_func" in str(optimized).replace(
        "tests.static.", "")
    S.Executor().run(optimized, feed={"x": np.array([1.0, 2.0], np.float32)}, fetch_list=[y])
    np.testing.assert_array_equal(seen[0], [1.0, 2.0])


def test_side_effects_run_every_iteration_of_a_loop():
    seen = []
    prog = S.Program()
    with S.program_guard(prog):
        n = S.data("n", [], "int64")

        def body(i):
            S.py_func(lambda a: seen.append(int(a)), [i], [], has_side_effects=True)
            return i + 1
        S.nn.while_loop(lambda i: i < n, body, [hf.tensor(0)])
    S.Executor().run(S.optimize(prog, fetch=[]), feed={"n": hf.tensor(3)})
    assert seen == [0, 1, 2]


def test_save_warns_once_and_the_loaded_program_refuses_to_run_the_function(tmp_path):
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None])
        y, = S.py_func(np.sort, [x], [((None,), "float32")])
        z, = S.py_func(np.sort, [y], [((None,), "float32")])
    path = tmp_path / "cb.hfp"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        S.save_program(prog, path)
    assert len(caught) == 1 and caught[0].category is UserWarning
    assert "numpy.sort" in str(caught[0].message)
    loaded = S.load_program(path)
    S.verify(loaded)
    assert str(loaded) == str(prog)
    with pytest.raises(RuntimeError, match="calls the Python function 'numpy.sort', which a "
                                           "saved program does not hold"):
        S.Executor().run(loaded, feed={"x": np.ones(2, np.float32)}, fetch_list=[z.name])


def test_a_function_named_in_a_file_is_never_imported():
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [1])
        y, = S.py_func(np.exp, [x], [((1,), "float32")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = S.program_to_dict(prog)
    d["blocks"][0]["ops"][0]["attrs"]["fn"] = {"function": "os.system"}
    loaded = S.program_from_dict(d, {})
    with pytest.raises(RuntimeError, match="'os.system'"):
        S.Executor().run(loaded, feed={"x": np.ones(1, np.float32)}, fetch_list=[y.name])


def test_verifier_checks_declared_outputs_and_bad_specs_are_refused():
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [2])
        with pytest.raises(TypeError, match=r"out_specs\[0\] must be a \(shape, dtype\) pair"):
            S.py_func(np.exp, [x], ["float32"])
        with pytest.raises(TypeError, match="fn must be callable"):
            S.py_func("exp", [x], [])
        y, = S.py_func(np.exp, [x], [((2,), "float32")])
    prog.global_block().vars[y.name].shape = (3,)
    with pytest.raises(ValueError, match="declared .3,. float32 but its out_spec says .2,."):
        S.verify(prog)
