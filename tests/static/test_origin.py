"""Operator origins: the user's line that built each operator, kept by passes and save/load,
and named (with the operator) by errors raised while a program runs."""
import linecache
import sys

import numpy as np
import pytest

import hybridfw as hf

S = hf.static


def _this_file_line():
    """The origin provider a converter would set: the innermost frame of this file."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename != __file__:
        frame = frame.f_back
    if frame is None:
        return None
    line = linecache.getline(__file__, frame.f_lineno)
    return (__file__, frame.f_lineno, line)


@pytest.fixture
def origins():
    S.set_origin_provider(_this_file_line)
    try:
        yield
    finally:
        S.set_origin_provider(None)


def _masked_reshape():
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None])
        masked = x[x > 0]                 # its size is known only at run time
        y = masked.reshape(2, 2) + 1.0
    return prog, y


def test_every_operator_gets_the_line_that_built_it(origins):
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [3], "float64")
        y = S.nn.cond(x.sum() > 0, lambda: x * 2.0, lambda: x.exp())
        (g,) = S.gradients(y.sum(), [x])
    ops = [op for block in prog.blocks for op in block.ops]
    assert all(op.origin is not None and op.origin[0] == __file__ for op in ops)
    texts = {}
    for op in prog.global_block().ops:
        texts.setdefault(op.type, op.origin[2].strip())
    backward = prog.global_block().ops[-1]
    assert backward.type == "cond"
    assert backward.origin[2].strip() == "(g,) = S.gradients(y.sum(), [x])"
    assert texts["cond"].startswith("y = S.nn.cond(")
    assert texts["sum"] == "y = S.nn.cond(x.sum() > 0, lambda: x * 2.0, lambda: x.exp())"
    S.set_origin_provider(None)
    with S.program_guard(prog):
        z = g * 2.0
    assert prog.global_block().ops[-1].origin is None and z.shape == (3,)
    with pytest.raises(TypeError, match="expected a callable or None"):
        S.set_origin_provider("nope")


def test_passes_and_save_load_keep_origins(origins, tmp_path):
    prog, y = _masked_reshape()
    S.set_origin_provider(None)
    optimized = S.optimize(prog, fetch=[y])
    path = tmp_path / "p.hfp"
    S.save_program(optimized, path)
    for program in (optimized, S.load_program(path)):
        lines = {op.origin[1] for op in program.global_block().ops}
        assert all(op.origin[0] == __file__ for op in program.global_block().ops)
        assert lines <= {op.origin[1] for op in prog.global_block().ops}


def test_a_kernel_error_names_the_operator_and_the_users_line(origins):
    prog, y = _masked_reshape()
    S.set_origin_provider(None)
    with pytest.raises(ValueError) as info:
        S.Executor().run(prog, feed={"x": np.array([1.0, -1.0, 2.0], np.float32)},
                         fetch_list=[y])
    text = str(info.value)
    assert text.startswith("reshape: cannot reshape array of size 2")  # (as eager: op first)
    assert "while running operator t2 = reshape(t1) (block 0, op 2)" in text
    assert f'File "{__file__}", line ' in text
    assert text.rstrip().endswith("masked.reshape(2, 2) + 1.0")
    # the same program runs when the size is right
    out, = S.Executor().run(prog, feed={"x": np.arange(1.0, 5.0, dtype=np.float32)},
                            fetch_list=[y], return_numpy=True)
    np.testing.assert_array_equal(out, [[2.0, 3.0], [4.0, 5.0]])


def test_a_size_wrong_only_for_the_fed_shape_names_the_users_line(origins):
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None, 3])
        y = x.reshape(2, 3)
    S.set_origin_provider(None)
    with pytest.raises(ValueError, match=r"reshape: shape \(2, 3\) is invalid for input of shape "
                                         r"\(3, 3\)[^\n]*\n  File .*\n    y = x.reshape\(2, 3\)"):
        S.Executor().run(prog, feed={"x": np.ones((3, 3), np.float32)}, fetch_list=[y])


def test_an_error_inside_a_loop_body_names_the_body_operator(origins):
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None])
        n = S.data("n", [], "int64")

        def body(i, v):
            picked = x[x > 0].reshape(2)  # fails when x has other than 2 positive values
            return i + 1, v + picked.sum()
        _, total = S.nn.while_loop(lambda i, v: i < n, body, [0, hf.tensor(0.0)])
    S.set_origin_provider(None)
    feed = {"x": np.array([1.0, 2.0, 3.0], np.float32), "n": np.array(2)}
    with pytest.raises(ValueError, match=r"(?s)while running operator \S+ = reshape\(\S+\) "
                                         r"\(block 2, op \d+\).*picked = x\[x > 0\]"):
        S.Executor().run(prog, feed=feed, fetch_list=[total])


class _TwoArgumentError(Exception):
    def __init__(self, code, detail):
        super().__init__(code, detail)


def test_exception_types_are_kept_and_operators_without_origin_are_still_named():
    def fail(a):
        raise _TwoArgumentError(7, "custom")

    programs = [S.Program(), S.Program()]
    with S.program_guard(programs[0]):
        y = hf.gather(S.data("x", [2]), 0, hf.tensor([5]))
    with S.program_guard(programs[1]):
        S.py_func(fail, [S.data("x", [2])], [], has_side_effects=True)
    assert all(op.origin is None for p in programs for op in p.global_block().ops)
    exe = S.Executor()
    feed = {"x": np.ones(2, np.float32)}
    with pytest.raises(IndexError, match=r"(?s)gather: index 5 is out of bounds.*while running "
                                         r"operator t\d+ = gather\(x, \w+\) \(block 0, op 0\)$"):
        exe.run(programs[0], feed=feed, fetch_list=[y])
    with pytest.raises(_TwoArgumentError) as info:  # cannot be rebuilt: the note says where
        exe.run(programs[1], feed=feed)
    assert info.value.args == (7, "custom")
    assert any("while running operator py_func(x)" in note for note in info.value.__notes__)
    assert "try" not in exe.compile(programs[0], feed=feed, fetch_list=[y]).source


def _tanh_layer(x, w):
    h = (x @ w).tanh()
    return h * 2.0


def test_to_static_backward_operators_name_the_forward_line():
    """A to_static program's backward operators carry the line of the forward operator they
    differentiate (the converted function has returned when the gradients are built)."""
    x = hf.tensor(np.ones((2, 3), np.float32))
    w = hf.tensor(np.full((3, 4), 0.5, np.float32), requires_grad=True)
    f = hf.jit.to_static(_tanh_layer, backend="interpreted")
    f(x, w).sum().backward()
    backward = f.get_concrete_program(x, w).backward_program
    lines = {op.origin[2].strip() for op in backward.global_block().ops if op.origin}
    assert all(op.origin is not None and op.origin[0] == __file__
               for op in backward.global_block().ops), [op.type for op in
                                                        backward.global_block().ops]
    assert lines <= {"h = (x @ w).tanh()", "return h * 2.0"} and "h = (x @ w).tanh()" in lines


def test_set_origin_provider_returns_the_previous_one():
    first = S.set_origin_provider(_this_file_line)
    try:
        assert S.set_origin_provider(None) is _this_file_line
    finally:
        S.set_origin_provider(first)
