"""return_statements: every ``return`` to one exit at the end (a flag and a value); returns
inside loops also break, and what follows runs under ``not flag``."""
import textwrap

import gast
import pytest

import hybridfw as hf
from hybridfw.converter.function import unparse
from hybridfw.converter.testing import assert_same_result as same
from hybridfw.converter.testing import node_source as src
from hybridfw.converter.transformers import return_statements
from hybridfw.converter.transformers.base import Context

FLAG, VALUE = "_hf_do_return_0", "_hf_retval_1"


def parse(source: str):
    return gast.parse(textwrap.dedent(source)).body[0]


def convert(source: str):
    node = return_statements.transform(parse(source), Context())
    return node, unparse(gast.gast_to_ast(node)).strip()


def own_returns(fn):
    """Return statements of ``fn`` itself (not of nested functions)."""
    out, stack = [], list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (gast.FunctionDef, gast.Lambda)):
            continue
        if isinstance(node, gast.Return):
            out.append(node)
        stack.extend(gast.iter_child_nodes(node))
    return out



def t(*values):
    return hf.tensor(list(values), dtype=hf.float64)



# ---- structure -----------------------------------------------------------------------------
@pytest.mark.parametrize("source", [
    "def f(x):\n    y = x + 1\n    return y",
    "def f(x):\n    y = x + 1",
])
def test_single_exit_left_as_it_is(source):
    _, text = convert(source)
    assert text == src(parse(source))
    assert "_hf_" not in text


def test_return_nested_in_the_last_statement_is_converted():
    # falling off the end is another exit (None): one return at the end covers both
    node, _ = convert("def f(x):\n    if x:\n        return 1\n")
    assert len(own_returns(node)) == 1
    assert src(node.body[-1]) == f"return _jst.return_value({VALUE})"


def test_early_return_becomes_flag_and_value():
    node, _ = convert("""
        def f(x):
            if x > 0:
                return x
            y = x * 2
            return y
    """)
    returns = own_returns(node)
    assert len(returns) == 1 and returns[0] is node.body[-1]
    # every path ends in a return: the exit says so (no "was a value returned" flag needed)
    assert src(node.body[-1]) == f"return _jst.return_value({VALUE}, True)"
    assert [src(s) for s in node.body[:2]] == [f"{FLAG} = False",
                                               f"{VALUE} = _jst.UNDEFINED_RETURN"]
    if_ = node.body[2]
    assert [src(s) for s in if_.body] == [f"{FLAG} = True", f"{VALUE} = x"]
    guard = node.body[3]
    assert isinstance(guard, gast.If) and src(guard.test) == f"(not {FLAG})"
    assert [src(s) for s in guard.body] == ["y = (x * 2)", f"{FLAG} = True", f"{VALUE} = y"]


def test_bare_return_gives_none_and_unreachable_code_dropped():
    _, text = convert("""
        def f(x):
            if x:
                return
                dead = 1
            return 2
    """)
    assert f"{VALUE} = None" in text
    assert "dead" not in text


def test_return_in_loop_breaks_and_outer_loops_break_too():
    node, _ = convert("""
        def f(xs):
            for a in xs:
                for b in a:
                    if b:
                        return b
                    c = b
                d = a
            return 0
    """)
    outer = node.body[2]
    inner = outer.body[0]
    if_ = inner.body[0]
    assert [type(s).__name__ for s in if_.body] == ["Assign", "Assign", "Break"]
    # the rest of the inner body is guarded
    assert src(inner.body[1].test) == f"(not {FLAG})"
    # after the inner loop: break out of the outer one, then the guarded rest
    assert src(outer.body[1]) == f"if {FLAG}:\n    break"
    assert src(outer.body[2].test) == f"(not {FLAG})"
    assert len(own_returns(node)) == 1


def test_return_in_loop_else_and_try():
    node, text = convert("""
        def f(xs):
            for a in xs:
                pass
            else:
                return 1
            try:
                return 2
            except ValueError:
                return 3
            return 4
    """)
    loop = node.body[2]
    assert [type(s).__name__ for s in loop.orelse] == ["Assign", "Assign"]  # no break: else
    assert len(own_returns(node)) == 1
    assert text.count(f"{FLAG} = True") == 4


def test_while_loop_gets_break():
    node, _ = convert("""
        def f(x):
            while x > 0:
                x = x - 1
                if x == 3:
                    return x
            return -1
    """)
    loop = node.body[2]
    assert isinstance(loop, gast.While)
    breaks = [n for n in gast.walk(loop) if isinstance(n, gast.Break)]
    assert len(breaks) == 1


def test_nested_functions_converted_on_their_own():
    node, _ = convert("""
        def outer(x):
            def inner(y):
                if y:
                    return 1
                return 2
            return inner(x)
    """)
    inner = node.body[0]
    assert isinstance(inner, gast.FunctionDef)
    assert src(inner.body[0]) == f"{FLAG} = False"  # the inner one has flags
    assert src(node.body[-1]) == "return inner(x)"  # the outer one has a single exit
    assert len(own_returns(node)) == 1 and len(own_returns(inner)) == 1


def test_locations_of_generated_statements():
    node, _ = convert("def f(x):\n    if x:\n        return 1\n    return 2\n")
    assert node.body[0].lineno == 2  # initializations at the first statement
    assert node.body[-1].lineno == 4  # the exit at the last one


# ---- end to end ----------------------------------------------------------------------------
def early_return_python(a):
    if a > 5:
        return "big"
    if a < 0:
        return
    return a * 2


def test_python_values():
    f = hf.jit.to_static(early_return_python)
    for a in (7, -1, 2):
        assert f(a) == early_return_python(a)


def search_nested(x):
    for i in range(3):
        for j in range(3):
            if x.sum() > 10:
                return x * 0 + i * 10 + j
            x = x + 1
    return -x


def return_in_tensor_while(x):
    while x.sum() < 100:
        x = x * 2
        if x.max() > 30:
            return x - 1
    return x


def return_in_tensor_if(x):
    y = x * 3
    if y.sum() > 0:
        return y
    return -y


@pytest.mark.parametrize("fn, inputs", [
    (search_nested, [t(1.0, 2.0), t(-20.0, 1.0), t(20.0, 1.0)]),
    (return_in_tensor_while, [t(1.0, 2.0), t(40.0, 1.0), t(200.0, 1.0)]),
    (return_in_tensor_if, [t(1.0, 2.0), t(-1.0, -2.0)]),
])
def test_tensor_values_equal_eager_with_one_program(fn, inputs):
    f = hf.jit.to_static(fn)
    for x in inputs:
        same(fn(x), f(x))
    assert f.cache_info().misses == 1  # one program takes every path at run time


def return_from_python_loop_on_tensor(x, limit):
    for i in range(limit):
        if x.sum() > i:
            return x * i
    return x


def test_tensor_decided_return_in_python_loop():
    f = hf.jit.to_static(return_from_python_loop_on_tensor)
    for x in (t(0.5, 0.5), t(-5.0, 0.0), t(1.0, 1.0)):
        same(return_from_python_loop_on_tensor(x, 3), f(x, 3))


def returns_a_pair_or_one(x):
    if x.sum() > 0:
        return x, x * 2
    return x


def test_returns_of_different_structures_are_refused_naming_the_return():
    # the error speaks of the returned value and its two structures, not of the return
    # transformer's own variable or of branches the user did not write
    from hybridfw.converter import ConversionError
    with pytest.raises(ConversionError) as info:
        hf.jit.to_static(returns_a_pair_or_one)(t(1.0, 2.0))
    message = str(info.value)
    assert "the value returned is a tuple of 2 (a tensor of shape (2,)" in message
    assert "on another" in message and "_hf_" not in message
    assert "return x\n" in message + "\n"
