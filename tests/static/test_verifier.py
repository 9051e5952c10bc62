"""The IR verifier: silent on good programs, a clear ValueError for each broken invariant."""
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.static import Operator, verify
from hybridfw.static.passes import clone_program


def _simple():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [-1, 3])
        y = (x * 2.0 + hf.tensor([1.0, 2.0, 3.0])).relu()
    return prog, y


def _control_flow():
    lin = nn.Linear(3, 3)
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [-1, 3])
        y = hf.static.nn.cond(x.sum() > 0, lambda: lin(x) * 2.0, lambda: -x)
        _, s = hf.static.nn.while_loop(
            lambda i, s: i < 3,
            lambda i, s: (i + 1, hf.static.nn.cond(i > 1, lambda: s.tanh(), lambda: s + 1.0)),
            [0, y])
        grads = hf.static.gradients(s.sum(), [x, lin.weight])
    return prog, grads


def _ops(prog, block=0):
    return prog.blocks[block].ops


def test_good_programs_pass():
    verify(_simple()[0])
    prog, grads = _control_flow()
    verify(prog)
    verify(hf.static.optimize(prog, fetch=grads))
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8, 2))
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        model(hf.static.data("x", [-1, 1, 4, 4]))
    verify(prog)


def test_only_programs_are_verified():
    with pytest.raises(TypeError, match="expected a hf.static.Program"):
        verify("t0 = add(x, 1)")


# ---- definitions ------------------------------------------------------------------------------
def test_an_undefined_input():
    prog, _ = _simple()
    _ops(prog)[0].inputs = ("nope", 2.0)
    with pytest.raises(ValueError, match=r"block 0, op 0 \(t0 = mul\(nope, 2.0\)\): input 'nope' "
                                         "is not defined"):
        verify(prog)


def test_a_use_before_its_definition():
    prog, _ = _simple()
    ops = _ops(prog)
    ops[0], ops[1] = ops[1], ops[0]
    with pytest.raises(ValueError, match=r"op 0 \(t2 = add\(t0, param1\)\): input 't0' is not "
                                         "defined before it"):
        verify(prog)


def test_an_input_of_the_wrong_kind():
    prog, _ = _simple()
    _ops(prog)[0].inputs = ("x", [2.0])
    with pytest.raises(ValueError, match="input 1 is a list; expected a variable name or a "
                                         "Python number"):
        verify(prog)


def test_a_value_defined_twice():
    prog, _ = _simple()
    _ops(prog)[1].outputs = ("t0",)
    with pytest.raises(ValueError, match=r"op 1 \(t0 = add\(t0, param1\)\): output 't0' is "
                                         r"already defined by block 0, op 0"):
        verify(prog)


def test_writing_a_feed_or_parameter():
    prog, _ = _simple()
    _ops(prog)[0].outputs = ("x",)
    with pytest.raises(ValueError, match="writes 'x', which is a feed or parameter"):
        verify(prog)


def test_an_output_without_a_variable():
    prog, _ = _simple()
    del prog.global_block().vars["t3"]
    with pytest.raises(ValueError, match="output 't3' has no Variable in block 0"):
        verify(prog)


# ---- inference ------------------------------------------------------------------------------
def test_a_declared_shape_or_dtype_that_inference_disagrees_with():
    prog, _ = _simple()
    prog.global_block().vars["t0"].shape = (2, 3)
    with pytest.raises(ValueError, match=r"output 't0' is declared \(2, 3\) float32 but mul "
                                         r"infers \(-1, 3\) float32"):
        verify(prog)
    prog, _ = _simple()
    prog.global_block().vars["t3"].dtype = hf.float64
    with pytest.raises(ValueError, match="declared .* float64 but relu infers .* float32"):
        verify(prog)


def test_inputs_the_op_refuses():
    prog, _ = _simple()
    _ops(prog)[0].attrs = {"alpha": 2}
    with pytest.raises(ValueError, match="op 0 .*: inference fails on its inputs: TypeError"):
        verify(prog)


def test_an_unknown_op_type_and_a_registry_op_with_two_outputs():
    prog, _ = _simple()
    _ops(prog)[0].type = "frobnicate"
    with pytest.raises(ValueError, match="unknown op type 'frobnicate'"):
        verify(prog)
    prog, _ = _simple()
    _ops(prog)[0].outputs = ("t0", "x2")
    prog.global_block().create_var((3,), "float32", "x2")
    with pytest.raises(ValueError, match="registry op 'mul' must have exactly one output"):
        verify(prog)


def test_a_fused_op_that_disagrees_with_its_declared_dtype():
    prog, y = _simple()
    out = hf.static.optimize(prog, fetch=[y])
    (fused,) = [op for op in _ops(out) if op.type == "fused_elementwise"]
    fused.attrs = {**fused.attrs, "dtype": hf.float64}
    with pytest.raises(ValueError, match="declares dtype hybridfw.float64"):
        verify(out)


# ---- variables ------------------------------------------------------------------------------
def test_variable_bookkeeping():
    prog, _ = _simple()
    block = prog.global_block()
    block.vars["t0"].name = "zz"
    with pytest.raises(ValueError, match="block 0 lists variable 'zz' under the name 't0'"):
        verify(prog)
    prog, _ = _cond_program()
    prog.global_block().vars["t0"].block = prog.blocks[1]
    with pytest.raises(ValueError, match="'t0' is listed in block 0 but says it belongs to "
                                         "block 1"):
        verify(prog)
    prog, _ = _cond_program()
    prog.blocks[1].create_var((3,), "float32", "t0")
    with pytest.raises(ValueError, match="'t0' is declared in block 0 and again in block 1"):
        verify(prog)


def test_feeds_and_parameters_must_be_declared():
    prog, _ = _simple()
    prog.feeds.append("ghost")
    with pytest.raises(ValueError, match="feed 'ghost' is not a variable of the global block"):
        verify(prog)
    prog, _ = _simple()
    prog.global_block().vars["param1"].persistable = False
    with pytest.raises(ValueError, match="parameter 'param1' is not marked persistable"):
        verify(prog)
    prog, _ = _simple()
    prog.params["param1"] = hf.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match=r"'param1' is declared \(3,\) float32 but its value is "
                                         r"\(2,\) float32"):
        verify(prog)


# ---- blocks ---------------------------------------------------------------------------------
def _cond_program():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        y = hf.static.nn.cond(x.sum() > 0, lambda: x * 2.0, lambda: x - 1.0)
    return prog, y


def test_blocks_must_nest():
    prog, _ = _cond_program()
    prog.blocks[2].parent = prog.blocks[1]
    with pytest.raises(ValueError, match=r"its sub-block 2 has parent block 1, expected block 0"):
        verify(prog)
    prog, _ = _cond_program()
    prog.blocks[1].idx = 5
    with pytest.raises(ValueError, match=r"program.blocks\[1\] says it is block 5"):
        verify(prog)


def test_every_block_is_held_by_exactly_one_operator():
    prog, _ = _cond_program()
    cond = _ops(prog)[-1]
    cond.blocks = (cond.blocks[0],)
    with pytest.raises(ValueError, match="block 2 is not held by any operator"):
        verify(prog)
    prog, _ = _cond_program()
    cond = _ops(prog)[-1]
    cond.blocks = (cond.blocks[0], cond.blocks[0])
    with pytest.raises(ValueError, match="block 1 is held by two operators"):
        verify(prog)


def test_sub_blocks_read_outer_values_only_through_captures():
    prog, _ = _cond_program()
    cond = _ops(prog)[-1]
    cond.inputs = cond.inputs[:1]  # drop the captured x
    with pytest.raises(ValueError, match=r"sub-block 1 reads 'x' \(in op mul -> t2\), defined "
                                         "outside it, but the operator does not list it"):
        verify(prog)


def test_an_inner_value_is_not_visible_outside_its_block():
    prog, y = _cond_program()
    with hf.static.program_guard(prog):
        z = y + 1.0
    _ops(prog)[-1].inputs = ("t2", 1.0)  # t2 lives in the true branch
    with pytest.raises(ValueError, match=f"op 3 \\({z.name} = add\\(t2, 1.0\\)\\): input 't2' "
                                         "is not defined"):
        verify(prog)


def test_block_arguments_are_defined_inside_their_loop_only():
    prog, _ = _control_flow()
    verify(prog)
    loop = next(op for op in _ops(prog) if op.type == "while")
    arg = loop.attrs["body_args"][1]
    with hf.static.program_guard(prog):
        prog.global_block().append_op(Operator("exp", [arg], ["leak"]))
        prog.global_block().create_var((-1, 3), "float32", "leak")
    with pytest.raises(ValueError, match=f"input '{arg}' is not defined"):
        verify(prog)


# ---- in-place annotations ----------------------------------------------------------------------
def test_inplace_annotations_must_be_consistent():
    prog, _ = _simple()
    prog.inplace = {"t3": "t2"}
    verify(prog)
    for mapping, message in [({"nope": "t2"}, "'nope' is not the output of any operator"),
                             ({"t3": "t0"}, "relu -> t3 does not read it"),
                             ({"t0": "x"}, "may not reuse 'x', a feed or parameter")]:
        bad = clone_program(prog)
        bad.inplace = mapping
        with pytest.raises(ValueError, match=message):
            verify(bad)

