"""break_continue: ``break``/``continue`` to flag variables and guards; ``while`` tests get
``not flag and``, ``for`` loops record the flag as ``hf_break_flag``; ``else`` clauses run
under ``not flag``."""
import textwrap

import gast
import pytest

import hybridfw as hf
from hybridfw.converter.function import unparse
from hybridfw.converter.testing import assert_same_result as same
from hybridfw.converter.testing import node_source as src
from hybridfw.converter.transformers import break_continue
from hybridfw.converter.transformers.base import Context


def parse(source: str):
    return gast.parse(textwrap.dedent(source)).body[0]


def convert(source: str):
    node = break_continue.transform(parse(source), Context())
    return node, unparse(gast.gast_to_ast(node)).strip()



def jumps(node):
    return [n for n in gast.walk(node) if isinstance(n, (gast.Break, gast.Continue))]


def t(*values):
    return hf.tensor(list(values), dtype=hf.float64)



# ---- structure -----------------------------------------------------------------------------
def test_while_break_becomes_flag_in_the_test():
    node, _ = convert("""
        def f(x):
            while x > 0:
                x = x - 1
                if x == 3:
                    break
                y = x
            return x
    """)
    assert not jumps(node)
    init, loop = node.body[0], node.body[1]
    assert src(init) == "_hf_break_0 = False"
    assert src(loop.test) == "((not _hf_break_0) and (x > 0))"
    assert src(loop.body[1].body[0]) == "_hf_break_0 = True"
    guard = loop.body[2]
    assert src(guard.test) == "(not _hf_break_0)" and src(guard.body[0]) == "y = x"
    assert not hasattr(loop, "hf_break_flag")


def test_for_break_recorded_on_the_node():
    node, _ = convert("""
        def f(xs):
            for x in xs:
                if x:
                    break
            return x
    """)
    assert not jumps(node)
    loop = node.body[1]
    assert src(node.body[0]) == "_hf_break_0 = False"
    assert isinstance(loop, gast.For) and loop.hf_break_flag == "_hf_break_0"
    assert src(loop.iter) == "xs"  # the iteration itself is unchanged


def test_continue_flag_reset_at_the_start_of_each_iteration():
    node, _ = convert("""
        def f(xs):
            s = 0
            for x in xs:
                if x < 0:
                    continue
                s = s + x
            return s
    """)
    assert not jumps(node)
    loop = node.body[1]
    assert src(loop.body[0]) == "_hf_continue_0 = False"
    assert src(loop.body[1].body[0]) == "_hf_continue_0 = True"
    assert src(loop.body[2]) == "if (not _hf_continue_0):\n    s = (s + x)"
    assert not hasattr(loop, "hf_break_flag")  # continue alone does not stop the loop


def test_break_and_continue_in_one_loop():
    node, text = convert("""
        def f(x):
            while x < 10:
                x = x + 1
                if x % 2:
                    continue
                if x > 6:
                    break
            return x
    """)
    assert not jumps(node)
    assert "_hf_continue_0" in text and "_hf_break_1" in text
    assert src(node.body[1].test) == "((not _hf_break_1) and (x < 10))"


def test_for_else_with_break_runs_else_under_the_flag():
    node, _ = convert("""
        def f(xs):
            for x in xs:
                if x:
                    break
            else:
                x = None
            return x
    """)
    loop, after = node.body[1], node.body[2]
    assert loop.orelse == []
    assert src(after) == "if (not _hf_break_0):\n    x = None"


def test_else_without_break_runs_after_the_loop():
    node, _ = convert("""
        def f(xs):
            for x in xs:
                if x:
                    continue
            else:
                x = None
            return x
    """)
    loop = node.body[0]
    # without a break the else clause always runs: it is hoisted after the loop, where a
    # break or continue in it belongs to the enclosing loop
    assert loop.orelse == [] and src(node.body[1]) == "x = None"


def test_inner_loop_jumps_are_its_own():
    node, _ = convert("""
        def f(xs):
            for a in xs:
                for b in a:
                    if b:
                        break
                c = a
            return c
    """)
    outer = node.body[0]
    assert isinstance(outer, gast.For) and not hasattr(outer, "hf_break_flag")
    assert src(outer.body[0]) == "_hf_break_0 = False"  # the inner flag, inside the outer body
    assert outer.body[1].hf_break_flag == "_hf_break_0"
    assert src(outer.body[2]) == "c = a"  # not guarded: the inner break does not reach here


def test_jumps_inside_try_and_with_rewritten():
    node, _ = convert("""
        def f(xs, m):
            for x in xs:
                with m:
                    if x:
                        continue
                try:
                    if x > 1:
                        break
                except ValueError:
                    break
                y = x
            return y
    """)
    assert not jumps(node)
    loop = node.body[1]
    assert loop.hf_break_flag == "_hf_break_1"


def test_loops_in_nested_functions_converted_separately():
    node, _ = convert("""
        def f(xs):
            def inner(ys):
                for y in ys:
                    break
            while xs:
                xs = xs[1:]
            return inner
    """)
    assert not jumps(node)
    assert isinstance(node.body[1], gast.While) and src(node.body[1].test) == "xs"


# ---- end to end ----------------------------------------------------------------------------
def for_else(xs, stop):
    found = -1
    for x in xs:
        if x == stop:
            found = x
            break
    else:
        found = 100
    return found


def test_python_for_else_with_and_without_break():
    f = hf.jit.to_static(for_else)
    assert f([1, 2, 3], 2) == for_else([1, 2, 3], 2) == 2
    assert f([1, 2, 3], 9) == for_else([1, 2, 3], 9) == 100


def tensor_for_else(x):
    for i in range(5):
        if x.sum() > 3:
            break
        x = x + 1
    else:
        x = x * 100
    return x


def tensor_while_continue(x):
    while x.sum() < 20:
        x = x + 1
        if x.sum() < 10:
            continue
        x = x * 2
    return x


def tensor_loop_break_keeps_target(x):
    k = 0
    for i in range(6):
        k = i
        if (x * i).sum() > 4:
            break
    return x * k


def nested_break_inner_only(x):
    total = x * 0
    for i in range(3):
        for j in range(4):
            if (x + j).sum() > 5:
                break
            total = total + j
        total = total + 10 * i
    return total


@pytest.mark.parametrize("fn, inputs", [
    # (breaks on the first iteration, part way, never -> else)
    (tensor_for_else, [t(2.0, 2.0), t(0.0, 1.0), t(-9.0, -9.0)]),
    (tensor_while_continue, [t(1.0, 2.0), t(5.0, 2.0), t(30.0, 0.0)]),
    (tensor_loop_break_keeps_target, [t(1.0, 1.0), t(3.0, 3.0), t(-1.0, 0.0)]),
    (nested_break_inner_only, [t(0.0, 0.0), t(2.0, 1.0), t(9.0, 0.0)]),
])
def test_tensor_values_equal_eager_with_one_program(fn, inputs):
    f = hf.jit.to_static(fn)
    for x in inputs:
        same(fn(x), f(x))
    assert f.cache_info().misses == 1


def break_in_inner_loop_else(xs):
    n = 0
    for a in xs:
        for b in a:
            n = n + b
        else:  # noqa: PLW0120 - the break below is the outer loop's
            break  # breaks the outer loop
    return n


def test_break_in_inner_loop_else_clause():
    assert hf.jit.to_static(break_in_inner_loop_else)([[1, 2], [3]]) == \
        break_in_inner_loop_else([[1, 2], [3]]) == 3
