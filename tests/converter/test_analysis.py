"""Scope analysis (hybridfw.converter.analysis.scope): assigned_names, read_names,
declared_nonlocal and definitely_bound."""
import textwrap

import gast

from hybridfw.converter.analysis import assigned_names, declared_nonlocal, definitely_bound
from hybridfw.converter.analysis.scope import read_names


def body(source: str) -> list:
    return gast.parse(textwrap.dedent(source)).body


def function(source: str) -> gast.FunctionDef:
    (fn,) = body(source)
    return fn


def find(fn, predicate):
    """The first statement in ``fn`` (any depth, own scope) for which ``predicate`` holds."""
    for node in gast.walk(fn):
        if isinstance(node, gast.stmt) and node is not fn and predicate(node):
            return node
    raise AssertionError("statement not found")


def marker(label):
    """The statement ``mark(label)``."""
    def is_marker(node):
        return isinstance(node, gast.Expr) and isinstance(node.value, gast.Call) and \
            getattr(node.value.func, "id", None) == "mark" and \
            node.value.args[0].value == label
    return is_marker


def bound_at(source, label="here"):
    fn = function(source)
    return definitely_bound(fn, find(fn, marker(label)))


# ---- assigned_names ------------------------------------------------------------------------
def test_assignments_in_first_binding_order():
    stmts = body("""
        b = 1
        a, (c, *d) = x
        e += 1
        f: int = 2
        g: int
        b = 3
        [h, i] = y
    """)
    assert assigned_names(stmts) == ["b", "a", "c", "d", "e", "f", "g", "h", "i"]


def test_item_assignment_binds_the_base_name():
    assert assigned_names(body("y[i] = v")) == ["y"]
    assert assigned_names(body("y[i][j] = v")) == ["y"]
    assert assigned_names(body("y[i] += v")) == ["y"]
    assert assigned_names(body("y[idx[0]] = v")) == ["y"]  # idx is only read
    # an attribute store binds nothing; a subscript of an attribute neither
    assert assigned_names(body("obj.attr = v")) == []
    assert assigned_names(body("obj.items[0] = v")) == []


def test_in_place_method_call_statements_bind_the_base_name():
    assert assigned_names(body("y.add_(1)")) == ["y"]
    assert assigned_names(body("_jst.convert_call(y.mul_)(2.0)")) == ["y"]  # as converted
    assert assigned_names(body("y.add_(1)"), item_targets=False) == []
    # not in place: a plain method, a private one, an attribute chain, a value used
    assert assigned_names(body("y.add(1)")) == []
    assert assigned_names(body("y._set_(1)")) == []
    assert assigned_names(body("obj.w.zero_()")) == []
    assert assigned_names(body("z = y.add_(1)")) == ["z"]


def test_loop_with_and_del_targets():
    stmts = body("""
        for i, (j, k) in pairs:
            s = i
        else:
            t = 0
        while cond:
            w = 1
        with open(p) as fh, lock() as (l1, l2), other():
            u = 2
        del gone
    """)
    assert assigned_names(stmts) == ["i", "j", "k", "s", "t", "w", "fh", "l1", "l2", "u", "gone"]


def test_walrus_including_inside_comprehensions_but_not_comprehension_targets():
    assert assigned_names(body("if (n := len(a)) > 3:\n    pass")) == ["n"]
    assert assigned_names(body("ys = [y for x in xs if (y := f(x))]")) == ["ys", "y"]
    assert assigned_names(body("s = {k: v for k, v in d}")) == ["s"]
    assert assigned_names(body("g = sum(q for q in xs)")) == ["g"]


def test_imports():
    stmts = body("""
        import os
        import numpy as np
        import a.b.c
        import x.y as xy
        from m import f, g as h
        from star import *
    """)
    assert assigned_names(stmts) == ["os", "np", "a", "xy", "f", "h"]


def test_nested_scopes_bind_their_name_only():
    stmts = body("""
        @decorate(dec := 1)
        def inner(p, q=(dflt := 2)):
            local = 1
            return p
        class K:
            attr = 1
        lam = lambda z: (inner_w := z)
    """)
    names = assigned_names(stmts)
    assert "inner" in names and "K" in names and "lam" in names and "dec" in names
    assert not {"local", "p", "q", "attr", "z", "inner_w"} & set(names)


def test_global_and_nonlocal_declarations_bind_nothing_themselves():
    stmts = body("global a\nnonlocal b\nc = 1")
    assert assigned_names(stmts) == ["c"]
    assert declared_nonlocal(stmts) == {"a", "b"}
    assert declared_nonlocal(body("if x:\n    global g")) == {"g"}


def test_single_node_argument():
    (stmt,) = body("a = b = 1")
    assert assigned_names(stmt) == ["a", "b"]


# ---- read_names ------------------------------------------------------------------------------
def test_read_names():
    stmts = body("""
        y = f(x) + y
        obj.attr = z[k]
        w = 1
    """)
    assert read_names(stmts) == {"f", "x", "y", "obj", "z", "k"}


def test_read_names_descend_into_nested_functions_and_lambdas():
    stmts = body("""
        def inner():
            return free1 + local
        g = lambda: free2
    """)
    assert {"free1", "free2", "local"} <= read_names(stmts)
    assert "g" not in read_names(stmts) and "inner" not in read_names(stmts)


# ---- definitely_bound ------------------------------------------------------------------------
def test_straight_line_and_parameters():
    bound = bound_at("""
        def f(a, /, b, *args, c, **kw):
            d = 1
            mark("here")
            e = 2
    """)
    assert bound == {"a", "b", "args", "c", "kw", "d"}


def test_if_else_binds_only_what_both_branches_bind():
    bound = bound_at("""
        def f(c):
            if c:
                both = 1
                only_if = 1
            else:
                both = 2
                only_else = 2
            mark("here")
    """)
    assert bound == {"c", "both"}
    # without else: nothing from the body
    assert bound_at("def f(c):\n    if c:\n        y = 1\n    mark('here')") == {"c"}


def test_inside_branches():
    src = """
        def f(c):
            a = 1
            if c:
                b = 1
                mark("in if")
            else:
                mark("in else")
    """
    assert bound_at(src, "in if") == {"c", "a", "b"}
    assert bound_at(src, "in else") == {"c", "a"}


def test_walrus_in_if_test_bound_after_the_if():
    assert "n" in bound_at("def f(a):\n    if (n := len(a)):\n        pass\n    mark('here')")


def test_loops_may_not_run():
    src = """
        def f(xs, c):
            for i in xs:
                in_for = i
                mark("for body")
            else:
                mark("for else")
            while c:
                in_while = 1
                mark("while body")
            mark("after")
    """
    assert bound_at(src, "for body") == {"xs", "c", "i", "in_for"}
    assert bound_at(src, "for else") == {"xs", "c"}
    assert bound_at(src, "while body") == {"xs", "c", "in_while"}
    assert bound_at(src, "after") == {"xs", "c"}


def test_try_handlers_may_start_anywhere():
    src = """
        def f(x):
            try:
                a = 1
                mark("body")
            except ValueError as err:
                mark("handler")
            else:
                mark("else")
            finally:
                mark("finally")
            mark("after")
    """
    assert bound_at(src, "body") == {"x", "a"}
    assert bound_at(src, "handler") == {"x"}
    assert bound_at(src, "finally") == {"x"}
    assert bound_at(src, "after") == {"x"}  # conservative: nothing from the try


def test_with_binds_its_target_and_body():
    src = """
        def f(m):
            with m as (a, b), m:
                mark("body")
                c = 1
            mark("after")
    """
    assert bound_at(src, "body") == {"m", "a", "b"}
    assert bound_at(src, "after") == {"m", "a", "b", "c"}


def test_outer_names_and_missing_target():
    fn = function("def f(x):\n    mark('here')")
    target = find(fn, marker("here"))
    assert definitely_bound(fn, target, frozenset({"outer"})) == {"x", "outer"}
    other = body("pass")[0]
    assert definitely_bound(fn, other) == set()


def test_deleted_name_is_not_bound():
    assert "y" not in bound_at("def f():\n    y = 0\n    del y\n    mark('here')")


def test_declared_nonlocal_does_not_descend_into_nested_functions():
    stmts = body("""
        y = 0
        def inner():
            nonlocal y
            y = 1
    """)
    assert declared_nonlocal(stmts) == set()
