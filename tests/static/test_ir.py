"""The IR's own bookkeeping: the cached input names of an operator."""
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
