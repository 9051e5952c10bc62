"""hf.static.nn.cond / while_loop: eager Python, static operators, shapes, nesting, errors."""
import numpy as np
import pytest

import hybridfw as hf

S = hf.static


def run(prog, feed, fetch):
    S.verify(prog)
    return S.Executor(debug_poison=True).run(prog, feed=feed, fetch_list=fetch, return_numpy=True)


# ---- eager ---------------------------------------------------------------------------------------
def test_eager_cond_and_while_run_plain_python():
    x = hf.tensor([1.0, -2.0])
    assert S.nn.cond(True, lambda: 1, lambda: 2) == 1
    out = S.nn.cond(x.sum() > 0, lambda: x * 2.0, lambda: x - 1.0)
    np.testing.assert_allclose(out.numpy(), [0.0, -3.0])
    i, total = S.nn.while_loop(lambda i, s: i < 4, lambda i, s: (i + 1, s + i), [0, 0])
    assert (i, total) == (4, 6)
    (y,) = S.nn.while_loop(lambda v: v.sum() < 10, lambda v: v * 2.0, (hf.ones(2),))
    np.testing.assert_allclose(y.numpy(), [8.0, 8.0])


def test_eager_control_flow_is_differentiated_by_eager_autograd():
    w = hf.tensor([0.5, 1.5], requires_grad=True)
    (v,) = S.nn.while_loop(lambda v: v.sum() < 5, lambda v: v * w + 1.0, [hf.ones(2)])
    S.nn.cond(v.sum() > 0, lambda: v.sum(), lambda: -v.sum()).backward()
    assert w.grad is not None and np.isfinite(w.grad.numpy()).all()


# ---- cond ---------------------------------------------------------------------------------------
def two_branches(x):
    return S.nn.cond(x.sum() > 0,
                     lambda: ((x * 2.0).relu(), {"n": x.sum()}),
                     lambda: (x.tanh() - 1.0, {"n": x.sum() * 0.0}))


def test_cond_takes_each_branch_and_matches_eager():
    prog = S.Program()
    with S.program_guard(prog):
        a, d = two_branches(S.data("x", [None, 3]))
    assert a.shape == (-1, 3) and d["n"].shape == ()
    for value in (np.ones((2, 3), np.float32), -np.ones((4, 3), np.float32)):
        out_a, out_n = run(prog, {"x": value}, [a, d["n"]])
        ref_a, ref_d = two_branches(hf.tensor(value))
        np.testing.assert_allclose(out_a, ref_a.numpy(), rtol=1e-6)
        np.testing.assert_allclose(out_n, ref_d["n"].numpy(), rtol=1e-6)


def test_cond_operator_lists_what_its_branches_read_and_prints_its_blocks():
    w = hf.ones(3)
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [3])
        y = S.nn.cond(x.sum() > 0, lambda: x * w, lambda: x)
    op = prog.global_block().ops[-1]
    assert op.type == "cond" and len(op.blocks) == 2
    assert op.inputs[1:] == (x.name, prog._captured[id(w)])
    assert op.attrs["false_outputs"] == (x.name,)
    text = str(prog)
    assert f"{y.name} = cond(" in text and "  block 1:" in text and "  block 2:" in text


def test_cond_merges_differing_dims_into_minus_one():
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [6, 4])
        y = S.nn.cond(x.sum() > 0, lambda: x[:2], lambda: x[:5])
    assert y.shape == (-1, 4)
    xv = np.arange(24, dtype=np.float32).reshape(6, 4)
    assert run(prog, {"x": xv}, [y])[0].shape == (2, 4)
    assert run(prog, {"x": -xv}, [y])[0].shape == (5, 4)


def test_cond_turns_python_numbers_and_eager_tensors_into_constants():
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [], "float64")
        y = S.nn.cond(x > 0, lambda: x, lambda: 0)   # 0 takes x's dtype
        z = S.nn.cond(x > 0, lambda: hf.tensor(5.0), lambda: 7.0)
    assert y.dtype == hf.float64 and z.dtype == hf.float32
    assert run(prog, {"x": np.array(-3.0)}, [y, z]) == [0.0, 7.0]
    assert run(prog, {"x": np.array(2.0)}, [y, z]) == [2.0, 5.0]


def test_cond_errors_name_the_output_and_both_sides():
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [3])
        p = x.sum() > 0
        with pytest.raises(ValueError, match=r"same structure.*\(tensor, tensor\) from true_fn "
                                             r"and tensor from false_fn"):
            S.nn.cond(p, lambda: (x, x), lambda: x)
        with pytest.raises(TypeError, match=r"output\[1\] has dtype hybridfw.float32 in true_fn "
                                            r"but hybridfw.int64 in false_fn"):
            S.nn.cond(p, lambda: (x, x), lambda: (x, x.long()))
        with pytest.raises(ValueError, match=r"has shape \(3,\) in true_fn but \(1, 3\) in "
                                             r"false_fn; the number of dims must agree"):
            S.nn.cond(p, lambda: x, lambda: x.unsqueeze(0))
        with pytest.raises(TypeError, match="pred must be a bool tensor with one element"):
            S.nn.cond(x, lambda: x, lambda: x)
        with pytest.raises(TypeError, match="true_fn must be a callable"):
            S.nn.cond(p, x, lambda: x)
    # a failed construct leaves no block behind
    assert len(prog.blocks) == 1


# ---- while_loop ---------------------------------------------------------------------------------
def doubling(x, limit):
    return S.nn.while_loop(lambda i, v: v.sum() < limit,
                           lambda i, v: (i + 1, v * 2.0 + 1.0), [0, x])


def test_while_with_data_dependent_trip_count_runs_one_program_many_times():
    prog = S.Program()
    with S.program_guard(prog):
        i, y = doubling(S.data("x", [3]), S.data("limit", []))
    assert i.dtype == hf.int64 and y.shape == (3,)
    xv = np.array([0.5, 1.0, 0.25], np.float32)
    for lim in (0.0, 3.0, 50.0, 1000.0):
        ei, ey = doubling(hf.tensor(xv), lim)
        out_i, out_y = run(prog, {"x": xv, "limit": np.array(lim, np.float32)}, [i, y])
        assert out_i == ei
        np.testing.assert_allclose(out_y, ey.numpy())


def test_while_loop_variable_whose_dims_change_becomes_minus_one():
    prog = S.Program()
    with S.program_guard(prog):
        n = S.data("n", [], "int64")
        x = S.data("x", [1, 2])
        _, grown = S.nn.while_loop(lambda k, v: k < n,
                                   lambda k, v: (k + 1, hf.cat([v, v * 2.0], dim=0)), [0, x])
    assert grown.shape == (-1, 2)
    assert len(prog.blocks) == 3  # the first, fixed-shape build was discarded
    body = prog.global_block().ops[-1].blocks[1]
    assert body.var(body.ops[-1].outputs[0]).shape == (-1, 2)
    out = run(prog, {"n": np.array(3), "x": np.ones((1, 2), np.float32)}, [grown])[0]
    np.testing.assert_allclose(out[:, 0], [1, 2, 2, 4, 2, 4, 4, 8])


def test_nested_cond_in_while_in_cond():
    def compute(x, n):
        def body(i, v):
            v = S.nn.cond(i % 2 == 0, lambda: v + 1.0, lambda: v * 3.0)
            return i + 1, v
        return S.nn.cond(x.sum() > 0,
                         lambda: S.nn.while_loop(lambda i, v: i < n, body, [0, x])[1],
                         lambda: -x)
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [2])
        n = S.data("n", [], "int64")
        y = compute(x, n)
    for xv, nv in ((np.ones(2, np.float32), 0), (np.ones(2, np.float32), 5),
                   (-np.ones(2, np.float32), 3)):
        ref = compute(hf.tensor(xv), nv).numpy()
        np.testing.assert_allclose(run(prog, {"x": xv, "n": np.array(nv)}, [y])[0], ref)


def test_nested_while_loops():
    def compute(n, m):
        def outer_body(i, total):
            _, row = S.nn.while_loop(lambda j, s: j < m, lambda j, s: (j + 1, s + i * j), [0, 0])
            return i + 1, total + row
        return S.nn.while_loop(lambda i, t: i < n, outer_body, [0, 0])[1]
    prog = S.Program()
    with S.program_guard(prog):
        n, m = S.data("n", [], "int64"), S.data("m", [], "int64")
        total = compute(n, m)
    for nv, mv in ((0, 3), (3, 0), (4, 5)):
        assert run(prog, {"n": np.array(nv), "m": np.array(mv)}, [total])[0] == compute(nv, mv)


def test_while_loop_keeps_the_container_type_and_nested_structure():
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [2])
        out = S.nn.while_loop(lambda k, pair: k < 3,
                              lambda k, pair: (k + 1, (pair[1], pair[0] + pair[1])),
                              (0, (x, x)))
    assert isinstance(out, tuple) and isinstance(out[1], tuple)
    a, b = run(prog, {"x": np.ones(2, np.float32)}, list(out[1]))
    np.testing.assert_allclose(a, [3.0, 3.0])
    np.testing.assert_allclose(b, [5.0, 5.0])


def test_while_errors_name_the_loop_variable():
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [3])
        with pytest.raises(TypeError, match=r"loop variable\[1\] has dtype hybridfw.float32 "
                                            r"but body_fn returns hybridfw.float64"):
            S.nn.while_loop(lambda k, v: k < 3, lambda k, v: (k + 1, v.double()), [0, x])
        with pytest.raises(ValueError, match=r"must return 2 loop variable\(s\).*got 3 values"):
            S.nn.while_loop(lambda k, v: k < 3, lambda k, v: (k, v, v), [0, x])
        with pytest.raises(TypeError, match="cond_fn's result must be a bool tensor"):
            S.nn.while_loop(lambda k, v: v, lambda k, v: (k, v), [0, x])
        with pytest.raises(ValueError, match=r"loop variable\[1\] has shape \(3,\) in "
                                             r"loop_vars but \(1, 3\)"):
            S.nn.while_loop(lambda k, v: k < 3, lambda k, v: (k, v.unsqueeze(0)), [0, x])
        with pytest.raises(TypeError, match="loop_vars must be a non-empty list"):
            S.nn.while_loop(lambda: True, lambda: (), [])
    assert len(prog.blocks) == 1


def test_while_loop_refuses_a_condition_fixed_while_building():
    # x.shape[0] < 10 is a Python bool, decided once: as a constant True the program would loop
    # until memory ran out; eager code re-evaluates it (and stops at 16 rows)
    def doubling(x):
        return hf.static.nn.while_loop(lambda x: x.shape[0] < 10,
                                       lambda x: hf.cat([x, x], 0), [x])

    assert doubling(hf.ones(2, 3))[0].shape == (16, 3)
    for fixed in (lambda x: x.shape[0] < 10, lambda x: False):
        prog = hf.static.Program()
        with pytest.raises(TypeError, match=r"cond_fn returned (True|False), a value fixed"):
            with hf.static.program_guard(prog):
                x = hf.static.data("x", [2, 3])
                hf.static.nn.while_loop(fixed, lambda x: x * 2, [x])


# ---- eager checks that match the static ones ----------------------------------------------------
def test_eager_cond_and_while_refuse_predicates_a_program_would_refuse():
    # code written eagerly ran with a float or many-element tensor predicate and only failed
    # once built into a program; Python predicates stay Python
    x = hf.tensor([1.0, -2.0])
    with pytest.raises(TypeError, match="cond: pred must be a bool tensor with one element, "
                                        r"got shape \(\) and dtype hybridfw.float32"):
        S.nn.cond(x.sum(), lambda: x, lambda: -x)
    with pytest.raises(TypeError, match=r"cond: pred must be a bool tensor .* shape \(2,\)"):
        S.nn.cond(x > 0, lambda: x, lambda: -x)
    with pytest.raises(TypeError, match="while_loop: cond_fn's result must be a bool tensor"):
        S.nn.while_loop(lambda i: i, lambda i: [i - 1], [hf.tensor(3)])
    assert S.nn.cond(1, lambda: "yes", lambda: "no") == "yes"
    assert S.nn.cond(hf.tensor([True]), lambda: "yes", lambda: "no") == "yes"
    assert S.nn.while_loop(lambda i: i < 3, lambda i: [i + 1], [0]) == [3]


def test_eager_while_loop_keeps_each_variables_dtype_and_structure_as_a_program_does():
    with pytest.raises(TypeError, match=r"while_loop: loop variable\[1\] has dtype "
                                        r"hybridfw.float32 but body_fn returns hybridfw.float64"):
        S.nn.while_loop(lambda i, s: i < 3, lambda i, s: [i + 1, s.double()],
                        [hf.tensor(0), hf.ones(2)])
    with pytest.raises(ValueError, match="while_loop: body_fn must return the structure of "
                                         "loop_vars"):
        S.nn.while_loop(lambda i, p: i < 3, lambda i, p: [i + 1, p[0]],
                        [hf.tensor(0), (hf.ones(2), hf.ones(2))])
    i, s = S.nn.while_loop(lambda i, s: i < 3, lambda i, s: [i + 1, hf.cat([s, s])],
                           [hf.tensor(0), hf.ones(1)])  # a size may change, as in a program
    assert s.shape == (8,)
