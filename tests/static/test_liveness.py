"""Liveness of fixed programs: definitions, last uses, sub-block uses, fetch targets."""
import pytest

import hybridfw as hf
from hybridfw.static.ir import Operator, Program
from hybridfw.static.liveness import analyze_block, op_reads, op_writes


def _chain():
    prog = Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [4])
        a = x * 2.0          # op 0
        b = a + 1.0          # op 1
        c = b.relu()         # op 2
        d = c * a            # op 3: a is read again here
        e = d.sum()          # op 4
    return prog, (x, a, b, c, d, e)


def test_chain_intervals_and_fetch_targets_live_to_the_end():
    prog, (_, a, b, c, d, e) = _chain()
    live = analyze_block(prog.global_block(), live_out=[e.name])
    assert live.num_ops == 5
    assert live.interval(a.name) == (0, 3)
    assert live.interval(b.name) == (1, 2)
    assert live.interval(c.name) == (2, 3)
    assert live.interval(d.name) == (3, 4)
    assert live.interval(e.name) == (4, 5)  # fetched: read one past the last operator
    assert live.reads[3] == (c.name, a.name) and live.writes[3] == (d.name,)


def test_inputs_have_a_last_use_but_no_definition():
    prog, (x, *_) = _chain()
    live = analyze_block(prog.global_block())
    assert x.name not in live.definition and live.last_use[x.name] == 0
    with pytest.raises(KeyError, match="not defined in this block"):
        live.interval(x.name)


def test_unread_value_dies_where_it_is_defined_and_dying_lists():
    prog, (_, a, b, c, d, e) = _chain()
    live = analyze_block(prog.global_block())  # nothing fetched: e is never read
    assert live.interval(e.name) == (4, 4)
    assert live.dying() == [[], [], [b.name], [a.name, c.name], [d.name, e.name]]
    assert live.is_live(a.name, 2) and not live.is_live(b.name, 3)


def _with_sub_block():
    """x -> a; op 1 is a control-flow op whose sub-block reads ``a`` and ``b`` from outside
    and assigns the outer ``b``; op 2 reads only the control-flow output."""
    prog = Program()
    block = prog.global_block()
    x = block.create_var((3,), "float32", "x")
    prog.feeds.append("x")
    block.create_var((3,), "float32", "a")
    block.create_var((3,), "float32", "b")
    block.create_var((3,), "float32", "out")
    block.create_var((3,), "float32", "z")
    block.append_op(Operator("mul", ["x", 2.0], ["a"]))
    block.append_op(Operator("add", ["x", 1.0], ["b"]))
    sub = prog.new_block()
    sub.create_var((3,), "float32", "inner")
    sub.append_op(Operator("mul", ["a", "b"], ["inner"]))
    sub.append_op(Operator("add", ["inner", 1.0], ["b"]))  # writes an outer name
    block.append_op(Operator("mystery_cf", ["x"], ["out"], blocks=[sub]))
    block.append_op(Operator("relu", ["out"], ["z"]))
    return prog, x


def test_sub_block_reads_count_at_the_control_flow_operator():
    prog, _ = _with_sub_block()
    block = prog.global_block()
    cf = block.ops[2]
    assert op_reads(cf, block) == ("x", "a", "b")        # inner values are not visible here
    assert op_writes(cf, block) == ("out", "b")
    live = analyze_block(block, live_out=["z"])
    assert live.interval("a") == (0, 2)
    assert live.last_use["b"] == 2 and live.assignments["b"] == 2
    assert "inner" not in live.definition
    assert live.interval("z") == (3, 4)
