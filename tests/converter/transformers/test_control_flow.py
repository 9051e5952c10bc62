"""control_flow: ``if``/``while``/``for`` become nested functions of the variables they assign
and ``_jst.convert_ifelse``/``convert_while``/``convert_for`` calls; names that may be unbound
before the construct are first set to ``_jst.Undefined``."""
import textwrap

import gast
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.converter.function import unparse
from hybridfw.converter.testing import assert_same_result as same
from hybridfw.converter.testing import node_source as src
from hybridfw.converter.transformers import break_continue, control_flow
from hybridfw.converter.transformers.base import Context


def convert(source: str, with_breaks=False):
    node = gast.parse(textwrap.dedent(source)).body[0]
    ctx = Context()
    if with_breaks:
        node = break_continue.transform(node, ctx)
    node = control_flow.transform(node, ctx)
    return node, unparse(gast.gast_to_ast(node)).strip()



def defs(node) -> dict:
    return {s.name: s for s in node.body if isinstance(s, gast.FunctionDef)}


def runtime_calls(node, helper):
    return [n for n in gast.walk(node) if isinstance(n, gast.Call) and
            isinstance(n.func, gast.Attribute) and n.func.attr == helper and
            getattr(n.func.value, "id", None) == "_jst"]


def guarded(text) -> list:
    """Names given an Undefined guard."""
    return [line.split("_jst.Undefined(")[1].strip("')") for line in text.splitlines()
            if "_jst.Undefined(" in line]


def t(*values):
    return hf.tensor(list(values), dtype=hf.float64)



# ---- structure: if -----------------------------------------------------------------------
def test_if_else_branches_become_functions_of_the_assigned_names():
    node, text = convert("""
        def f(x):
            y = 0
            if x.sum() > 0:
                y = x * 2
                z = 1
            else:
                y = -x
                z = 2
            return y, z
    """)
    fns = defs(node)
    assert set(fns) == {"_hf_if_true_0", "_hf_if_false_1"}
    for fn in fns.values():
        assert [a.id for a in fn.args.args] == ["y", "z"]
        assert src(fn.body[-1]) == "return (y, z)"
    assert src(fns["_hf_if_true_0"].body[0]) == "y = (x * 2)"
    assert src(fns["_hf_if_false_1"].body[0]) == "y = (- x)"
    assert "(y, z) = _jst.convert_ifelse((x.sum() > 0), _hf_if_true_0, _hf_if_false_1, " \
           "(y, z), ('y', 'z'))" in text
    assert not [n for n in gast.walk(node) if isinstance(n, gast.If)]


def test_if_without_else_gets_a_pass_branch():
    node, _ = convert("def f(x):\n    if x:\n        x = x + 1\n    return x\n")
    false_fn = defs(node)["_hf_if_false_1"]
    assert [type(s).__name__ for s in false_fn.body] == ["Pass", "Return"]


def test_if_assigning_nothing_is_an_expression_statement():
    node, text = convert("def f(x):\n    if x:\n        print(x)\n    return x\n")
    assert "_jst.convert_ifelse(x, _hf_if_true_0, _hf_if_false_1, (), ())" in text
    (call,) = runtime_calls(node, "convert_ifelse")
    assert any(isinstance(s, gast.Expr) and s.value is call for s in node.body)
    assert src(defs(node)["_hf_if_true_0"].body[-1]) == "return ()"


def test_undefined_guards_only_for_names_that_may_be_unbound():
    _, text = convert("""
        def f(x, c):
            before = 1
            if c:
                x = x + 1        # a parameter: bound
                before = 2       # bound before the if
                fresh = 3        # may be unbound
            return x
    """)
    assert guarded(text) == ["fresh"]
    assert "try:\n        fresh\n    except NameError:\n        fresh = _jst.Undefined('fresh')" \
        in text


def test_guard_after_if_else_that_binds_on_both_paths():
    _, text = convert("""
        def f(c, d):
            if c:
                y = 1
            else:
                y = 2
            if d:
                y = 3
                z = 4
            return y
    """)
    assert guarded(text) == ["y", "z"]  # the first if: y may be unbound; the second: only z


def test_elif_chain_nested_functions():
    node, text = convert("""
        def f(x):
            if x > 1:
                y = 1
            elif x > 0:
                y = 2
            else:
                y = 3
            return y
    """)
    assert len(runtime_calls(node, "convert_ifelse")) == 2
    # the inner if's helper functions are not carried as state by the outer one
    assert "('y',)" in text and "_hf_if_true_0', " not in text


# ---- structure: loops ----------------------------------------------------------------------
def test_while_becomes_cond_and_body_functions():
    node, text = convert("""
        def f(x):
            i = 0
            while x.sum() < 10:
                x = x * 2
                i = i + 1
            return x, i
    """)
    fns = defs(node)
    cond, body = fns["_hf_while_cond_0"], fns["_hf_while_body_1"]
    assert [a.id for a in cond.args.args] == ["x", "i"]
    assert src(cond.body[0]) == "return (x.sum() < 10)"
    assert src(body.body[-1]) == "return (x, i)"
    assert "(x, i) = _jst.convert_while(_hf_while_cond_0, _hf_while_body_1, (x, i), " \
           "('x', 'i'))" in text
    assert guarded(text) == []


def test_while_else_without_break_follows_the_loop():
    node, _ = convert("def f(x):\n    while x:\n        x = x - 1\n    else:\n        x = 5\n"
                      "    return x\n")
    assert src(node.body[3]) == "x = 5"


def test_for_body_takes_the_item_first_and_binds_the_target():
    node, text = convert("""
        def f(xs):
            total = 0
            for i, (a, b) in enumerate(xs):
                total = total + a * b
            return total
    """)
    (body,) = defs(node).values()
    assert [p.id for p in body.args.args] == ["_hf_item_0", "total", "i", "a", "b"]
    assert src(body.body[0]) == "(i, (a, b)) = _hf_item_0"
    assert "(total, i, a, b) = _jst.convert_for(enumerate(xs), _hf_for_body_1, " \
           "(total, i, a, b), ('total', 'i', 'a', 'b'), None)" in text
    assert guarded(text) == ["i", "a", "b"]  # the loop may not run: targets may be unbound


def test_for_with_break_gets_a_test_function():
    node, _ = convert("""
        def f(xs):
            s = 0
            for x in xs:
                if x < 0:
                    break
                s = s + x
            return s
    """, with_breaks=True)
    (test_fn,) = [fn for name, fn in defs(node).items() if name.startswith("_hf_for_test_")]
    assert src(test_fn.body[0]) == "return _jst.convert_logical_not(_hf_break_0)"
    (call,) = runtime_calls(node, "convert_for")
    assert src(call.args[-1]) == test_fn.name
    assert [p.id for p in test_fn.args.args] == [e.value for e in call.args[3].elts]
    assert "_hf_break_0" in [e.value for e in call.args[3].elts]


def test_global_and_nonlocal_names_are_not_state():
    _, text = convert("""
        def f(x):
            global counter
            if x:
                counter = counter + 1
                y = 1
            return x
    """)
    # counter is no state of the branches: they declare it global, and the call names it as
    # a global they write (refused when a tensor decides the if)
    assert "('y',)" in text and "('y', 'counter')" not in text
    assert text.count("global counter") == 3  # the function's own and each branch's
    assert "('y',), ('counter',))" in text


def test_nested_functions_get_their_own_state_and_guards():
    node, _ = convert("""
        def outer(x):
            def inner(y):
                if y:
                    z = 1
                return y
            return inner(x)
    """)
    inner = node.body[0]
    assert isinstance(inner, gast.FunctionDef) and inner.name == "inner"
    assert guarded(src(inner)) == ["z"]
    assert len(runtime_calls(inner, "convert_ifelse")) == 1


def test_generated_code_located_at_the_construct():
    node, _ = convert("def f(x):\n    y = 0\n    if x:\n        y = 1\n    return y\n")
    call_stmt = node.body[3]
    assert isinstance(call_stmt, gast.Assign) and call_stmt.lineno == 3
    assert defs(node)["_hf_if_true_0"].lineno == 3
    assert defs(node)["_hf_if_true_0"].body[0].lineno == 4  # user statements keep theirs


# ---- end to end ----------------------------------------------------------------------------
def python_flow(n, flag):
    out = []
    if flag:
        label = "on"
    else:
        label = "off"
    i = 0
    while i < n:
        i += 1
    for k in range(n):
        out.append(k * 2)
    return label, i, out


def test_python_values_run_as_python():
    f = hf.jit.to_static(python_flow)
    for args in ((3, True), (0, False)):
        assert f(*args) == python_flow(*args)


def tensor_if_one_branch_binds(x):
    if x.sum() > 0:
        y = x * 2
    else:
        y = x - 1
    if x.max() > 2:
        z = y + 1
    else:
        z = y
    return z


def tensor_while_several(x):
    i = 0
    acc = x * 0
    while acc.sum() < 20:
        acc = acc + x
        i = i + 1
    return acc, i


def tensor_for_over_rows(x):
    total = x[0] * 0
    for row in x:
        if row.sum() > 0:
            total = total + row
    return total


def python_range_tensor_state(x, n):
    for i in range(n):
        x = x * 2 if x.sum() < 10 else x - 1
    return x


@pytest.mark.parametrize("fn, inputs", [
    (tensor_if_one_branch_binds, [(t(1.0, 2.0),), (t(-1.0, 3.0),), (t(-5.0, -1.0),)]),
    (tensor_while_several, [(t(1.0, 2.0),), (t(5.0, 5.0),), (t(30.0, 1.0),)]),
    (tensor_for_over_rows, [(hf.tensor([[1.0, 2.0], [-3.0, 0.0], [4.0, 4.0]],
                                       dtype=hf.float64),)]),
    (python_range_tensor_state, [(t(1.0, 2.0), 4), (t(9.0, 2.0), 4)]),
])
def test_tensor_control_flow_equal_eager(fn, inputs):
    f = hf.jit.to_static(fn)
    for args in inputs:
        eager = fn(*args)
        conv = f(*args)
        if fn is tensor_while_several:  # the trip count: a value of the program, returned
            same(eager[0], conv[0])       # as the Python int it is in eager code
            assert type(conv[1]) is int and conv[1] == eager[1]
        else:
            same(eager, conv)


def unbound_on_one_path(c):
    if c:
        y = 1
    return y


def test_read_of_a_name_unbound_on_the_path_taken():
    f = hf.jit.to_static(unbound_on_one_path)
    assert f(True) == 1
    with pytest.raises(UnboundLocalError, match="'y'"):
        f(False)


def bound_in_a_tensor_for_body(x, n):
    for i in range(n):
        z = x * i
    return z + i


def bound_in_a_tensor_while_body(x, n):
    t = n * 0
    while t < n:
        z = x + t
        t = t + 1
    return z


@pytest.mark.parametrize("fn", [bound_in_a_tensor_for_body, bound_in_a_tensor_while_body])
def test_read_after_a_tensor_loop_that_did_not_run(fn):
    """A name only the body of a loop on a tensor binds is unbound after zero iterations: as
    eager, UnboundLocalError (not the zeros standing in for it), from the same program."""
    f = hf.jit.to_static(fn)
    x = hf.tensor([1.0, 2.0])
    for n in (3, 1):
        np.testing.assert_array_equal(f(x, hf.tensor(n)).numpy(), fn(x, hf.tensor(n)).numpy())
    with pytest.raises(UnboundLocalError):
        fn(x, hf.tensor(0))
    with pytest.raises(UnboundLocalError, match="'z'.*loop on a tensor condition.*did not enter"):
        f(x, hf.tensor(0))
    assert f.cache_info().misses == 1


def deleted_then_bound_in_if(c):
    y = 0
    del y
    if c:
        y = 1
    return y


def test_name_deleted_then_bound_in_an_if():
    assert hf.jit.to_static(deleted_then_bound_in_if)(True) == 1


COUNTS = {"n": 0}


def item_assignment_to_global_in_if(x):
    if x > 0:
        COUNTS["n"] += 1
    return x


def test_item_assignment_to_a_global_dict_inside_if():
    COUNTS["n"] = 0
    assert hf.jit.to_static(item_assignment_to_global_in_if)(1) == 1
    assert COUNTS["n"] == 1


def nonlocal_in_inner_function(a):
    y = 0
    if a > 0:
        y = 2

    def bump():
        nonlocal y
        y = y + 1
    return y


def test_name_declared_nonlocal_only_in_an_inner_function_is_still_state():
    assert nonlocal_in_inner_function(1) == 2
    assert hf.jit.to_static(nonlocal_in_inner_function)(1) == 2
