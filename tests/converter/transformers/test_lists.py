"""lists: ``l.append(x)`` -> ``l = _jst.convert_append(l, x)``, ``l.pop(...)`` ->
``l, y = _jst.convert_pop(l, ...)``: list growth rebinds the list, so loops carry it."""

import gast
import pytest

import hybridfw as hf
from hybridfw.converter.function import unparse
from hybridfw.converter.testing import assert_same_result as same
from hybridfw.converter.testing import run_transforms
from hybridfw.converter.transformers import lists


def convert(source: str):
    return run_transforms(source, lists.transform)


def body_text(source: str) -> list:
    _, text = convert(source)
    return [line.strip() for line in text.splitlines()[1:] if line.strip()]


def t(*values):
    return hf.tensor(list(values), dtype=hf.float64)



# ---- structure -----------------------------------------------------------------------------
def test_append_rebinds_the_list():
    assert body_text("def f(l, x):\n    l.append(x * 2)") == \
        ["l = _jst.convert_append(l, (x * 2))"]


def test_pop_statement_and_pop_assignment():
    assert body_text("def f(l):\n    l.pop()\n    l.pop(0)") == \
        ["(l, _) = _jst.convert_pop(l, None)", "(l, _) = _jst.convert_pop(l, 0)"]
    assert body_text("def f(l):\n    y = l.pop()\n    z = l.pop(i)") == \
        ["(l, y) = _jst.convert_pop(l, None)", "(l, z) = _jst.convert_pop(l, i)"]


def test_extend_rebinds_the_list():
    assert body_text("def f(l, xs):\n    l.extend(xs)") == ["l = _jst.convert_extend(l, xs)"]


def test_insert_rebinds_the_list():
    assert body_text("def f(l, x):\n    l.insert(len(l), x)") == \
        ["l = _jst.convert_insert(l, len(l), x)"]


def test_pop_into_a_tuple_or_subscript_target():
    assert body_text("def f(l):\n    a, b = l.pop()") == \
        ["(l, (a, b)) = _jst.convert_pop(l, None)"]
    assert body_text("def f(l, d):\n    d['k'] = l.pop()") == \
        ["(l, d['k']) = _jst.convert_pop(l, None)"]


def test_rewritten_inside_nested_blocks():
    _, text = convert("""
        def f(xs):
            out = []
            for x in xs:
                if x:
                    out.append(x)
                else:
                    while out:
                        out.pop()
            return out
    """)
    assert "out = _jst.convert_append(out, x)" in text
    assert "(out, _) = _jst.convert_pop(out, None)" in text
    assert ".append(" not in text and ".pop(" not in text


@pytest.mark.parametrize("stmt", [
    "self.items.append(x)",      # not a plain variable
    "l.append(x, y)",            # not list.append's signature
    "l.append(item=x)",          # keywords
    "l.extend(xs, ys)",          # not list.extend's signature
    "y = l.pop(0, None)",        # dict.pop with a default
    "a = b = l.pop()",           # several targets
    "y = l.append(x)",           # the value of append is used
    "y = f(l.pop())",            # pop inside an expression
    "l.insert(x)",               # not list.insert's signature
])
def test_left_alone(stmt):
    assert body_text(f"def f(l, x, y, xs):\n    {stmt}") == [stmt]


@pytest.mark.parametrize("source", [
    "LOG.append(x)",                                        # a global: not declared, not bound
    "global LOG\n    LOG = []\n    LOG.append(x)",         # declared global
    "y = LOG.pop()",
])
def test_non_local_lists_not_rebound(source):
    _, text = convert(f"def f(x):\n    {source}")
    assert "convert_append" not in text and "convert_pop" not in text


def test_closure_and_nonlocal_lists_not_rebound_in_the_inner_function():
    node, _ = convert("""
        def outer(x):
            acc = []
            def inner(v):
                acc.append(v)
            def inner2(v):
                nonlocal acc
                acc.append(v)
            acc.append(x)
            return inner
    """)
    inner, inner2 = node.body[1], node.body[2]
    assert unparse(gast.gast_to_ast(inner.body[0])).strip() == "acc.append(v)"
    assert unparse(gast.gast_to_ast(inner2.body[1])).strip() == "acc.append(v)"


def test_own_list_rebound_although_an_inner_function_declares_it_nonlocal():
    node, _ = convert("""
        def outer(x):
            acc = []
            def inner(v):
                nonlocal acc
                acc = acc + [v]
            acc.append(x)
            return inner
    """)
    assert unparse(gast.gast_to_ast(node.body[2])).strip() == \
        "acc = _jst.convert_append(acc, x)"


def test_comprehension_with_conditions_becomes_runtime_call():
    assert body_text("def f(xs):\n    return [g(p) for p in xs if p if h(p)]") == \
        ["return _jst.convert_list_comprehension(xs, (lambda p: g(p)), "
         "(lambda p: (p and h(p))))"]


def test_simple_comprehension_becomes_runtime_call():
    assert body_text("def f(xs):\n    return [g(p) for p in xs]") == \
        ["return _jst.convert_list_comprehension(xs, (lambda p: g(p)))"]
    (line,) = body_text("def f(pairs):\n    return [a * b for a, b in pairs]")
    assert line.startswith("return _jst.convert_list_comprehension(pairs, (lambda "
                           "_hf_comprehension_item: (lambda a, b: (a * b))(*_hf_comprehension_item)")


@pytest.mark.parametrize("expr", [
    "[p for p in xs if (q := p)]",        # a walrus (it would bind in a lambda)
    "[p * q for p in xs for q in xs]",    # two generators
    "[p for p, (q, r) in xs]",            # a nested target
    "{p for p in xs}",                    # not a list
])
def test_other_comprehensions_left_alone(expr):
    (line,) = body_text(f"def f(xs):\n    return {expr}")
    assert "_jst" not in line


def test_location_of_the_call_kept():
    node, _ = convert("def f(l, x):\n    pass\n    l.append(x)\n")
    for sub in gast.walk(node.body[1]):
        if hasattr(sub, "lineno"):
            assert sub.lineno == 3


# ---- end to end ----------------------------------------------------------------------------
def python_list_ops(n):
    out = []
    for i in range(n):
        out.append(i * i)
    last = out.pop()
    out.pop(0)
    return out, last


def test_python_lists_keep_python_semantics():
    f = hf.jit.to_static(python_list_ops)
    assert f(5) == python_list_ops(5) == ([1, 4, 9], 16)


def same_object(xs):
    alias = xs
    xs.append(1)
    return alias is xs


def test_append_to_a_python_list_keeps_the_same_object():
    assert hf.jit.to_static(same_object)([0]) is True


def grow_in_tensor_while(x):
    outs = [x]
    while x.sum() < 20:
        x = x * 2
        outs.append(x)
    return hf.stack(outs).sum(0), x


def grow_in_tensor_if(x):
    outs = [x]
    if x.sum() > 0:
        outs.append(x * 2)
    else:
        outs.append(x * 3)
    return hf.cat(outs)


def pop_in_python_loop(x, n):
    stack = []
    for i in range(n):
        stack.append(x * i)
        stack.append(x + i)
        top = stack.pop()
    return hf.stack(stack), top


def comprehension_over_tensor(x):
    rows = [r * 2 for r in x]
    return hf.stack(rows), [i + 1 for i in range(3)]


@pytest.mark.parametrize("fn, inputs", [
    (grow_in_tensor_while, [(t(1.0, 2.0),), (t(4.0, 5.0),), (t(30.0, 1.0),)]),
    (grow_in_tensor_if, [(t(1.0, 2.0),), (t(-1.0, -2.0),)]),
    (pop_in_python_loop, [(t(1.0, 2.0), 3)]),
    (comprehension_over_tensor, [(hf.tensor([[1.0, 2.0], [3.0, -4.0]], dtype=hf.float64),)]),
])
def test_tensor_lists_equal_eager(fn, inputs):
    f = hf.jit.to_static(fn)
    for args in inputs:
        same(fn(*args), f(*args))


LOG = []


def append_to_global(x):
    LOG.append(1)
    return x


def make_closure_appender():
    acc = []

    def append_to_closure(x):
        acc.append(x)
        return x
    return append_to_closure, acc


def test_append_to_a_global_list():
    LOG.clear()
    assert hf.jit.to_static(append_to_global)(3) == 3
    assert LOG == [1]


def test_append_to_a_closure_list():
    fn, acc = make_closure_appender()
    assert hf.jit.to_static(fn)(3) == 3
    assert acc == [3]


def comprehension_walrus(xs):
    ys = [(last := x * 2) for x in xs]
    return ys, last


def test_walrus_in_a_rewritten_comprehension_binds_in_the_function():
    assert hf.jit.to_static(comprehension_walrus)([1, 2]) == ([2, 4], 4)
