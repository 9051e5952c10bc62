"""The IR's own bookkeeping: the cached input names of an operator; Program's helpers."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.static.ir import Operator


def test_input_names_follow_reassigned_inputs():
    op = Operator("add", ["x", 1.0], ["y"])
    assert op.input_names() == ("x",)
    assert op.input_names() is op.input_names()        # cached while inputs stay the same
    op.inputs = ("x", "z")                              # a pass renames or adds an input
    assert op.input_names() == ("x", "z")
    op.inputs = (2.0, "w")
    assert op.input_names() == ("w",)


def test_input_names_of_a_list_are_never_cached():
    op = Operator("add", ["x", 1.0], ["y"])
    op.inputs = ["a", 1.0]                              # a list may change in place
    assert op.input_names() == ("a",)
    op.inputs[1] = "b"
    assert op.input_names() == ("a", "b")


def test_a_copied_operator_gets_its_own_attributes_and_tuples():
    op = Operator("add", ["x", 1.0], ["y"], {"k": 1})
    op.input_names()
    op.inputs = ["a", "b"]                              # a list, as a careless edit may leave
    copy = op._copy(dict(op.attrs))
    assert copy.inputs == ("a", "b") and copy.outputs == ("y",)
    assert copy.input_names() == ("a", "b")
    copy.attrs["k"] = 2
    assert op.attrs == {"k": 1}


def test_paddle_style_program_helpers_clone_list_vars_all_parameters():
    """Program.clone(), block(i), num_blocks, list_vars() and all_parameters(), as Paddle's
    (they were missing)."""
    lin = hf.nn.Linear(2, 3)
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, 2])
        y = lin(x)
        hf.static.nn.cond(y.sum() > 0, lambda: y, lambda: y * 2.0)
    assert prog.num_blocks == 3 and prog.block(1) is prog.blocks[1]
    assert {v.name for v in prog.list_vars()} >= {"x", y.name}
    assert [tuple(p.shape) for p in prog.all_parameters()] == [(3, 2), (3,)]
    copy = prog.clone()
    assert copy is not prog and str(copy) == str(prog)
    with hf.static.program_guard(copy):
        hf.static.data("z", [1])
    assert "z" not in prog.global_block().vars
    xv = np.ones((4, 2), np.float32)
    (got,) = hf.static.Executor().run(copy, feed={"x": xv, "z": np.zeros(1, np.float32)},
                                      fetch_list=[y])   # the original's Variable
    np.testing.assert_allclose(got.numpy(), lin(hf.tensor(xv)).detach().numpy(), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="for_test=True"):
        prog.clone(for_test=True)
