"""AST templates (hybridfw.converter.templates): placeholders filled with names, dotted names,
tuples, parameter lists, AST nodes and spliced statement lists; template locations cleared."""
import ast
import copy

import gast
import pytest

from hybridfw.converter.function import unparse
from hybridfw.converter.templates import attribute, load, name, replace, replace_expr, store


def src(stmts) -> str:
    module = gast.Module(body=stmts if isinstance(stmts, list) else [stmts], type_ignores=[])
    text = unparse(gast.gast_to_ast(module)).strip()
    tree = gast.gast_to_ast(copy.deepcopy(module))
    for node in ast.walk(tree):  # template nodes have no location: give them one to compile
        if "lineno" in node._attributes and getattr(node, "lineno", None) is None:
            node.lineno, node.col_offset, node.end_lineno, node.end_col_offset = 1, 0, 1, 0
    compile(tree, "<template>", "exec")  # the result is valid Python
    return text


def expr_src(node) -> str:
    return src([gast.Expr(value=node)])


def test_rename_in_load_and_store():
    stmts = replace("target = helper(value) + target", target="y", helper="g", value="x")
    assert src(stmts) == "y = (g(x) + y)"
    (assign,) = stmts
    assert isinstance(assign.targets[0].ctx, gast.Store)
    assert isinstance(assign.value.right.ctx, gast.Load)


def test_dotted_name_becomes_attribute_load():
    (stmt,) = replace("out = helper(a)", out="y", helper="_jst.mod.f", a="x")
    func = stmt.value.func
    assert isinstance(func, gast.Attribute) and func.attr == "f"
    assert isinstance(func.value, gast.Attribute) and func.value.attr == "mod"
    assert isinstance(func.value.value, gast.Name) and func.value.value.id == "_jst"
    assert src(stmt) == "y = _jst.mod.f(x)"


def test_dotted_name_in_a_store_is_refused():
    with pytest.raises(ValueError, match="dotted"):
        replace("target = 1", target="a.b")


def test_tuple_of_names_as_target_and_as_value():
    (stmt,) = replace("names = call(names)", names=["a", "b"], call="f")
    target = stmt.targets[0]
    assert isinstance(target, gast.Tuple) and isinstance(target.ctx, gast.Store)
    assert [e.id for e in target.elts] == ["a", "b"]
    assert all(isinstance(e.ctx, gast.Store) for e in target.elts)
    arg = stmt.value.args[0]
    assert isinstance(arg, gast.Tuple) and isinstance(arg.ctx, gast.Load)
    assert all(isinstance(e.ctx, gast.Load) for e in arg.elts)
    assert src(stmt) == "(a, b) = f((a, b))"


def test_empty_tuple_and_mixed_nodes_in_tuple():
    (stmt,) = replace("out = values", out="y", values=["a", gast.Constant(1, None)])
    assert src(stmt) == "y = (a, 1)"
    (stmt,) = replace("out = values", out="y", values=[])
    assert src(stmt) == "y = ()"


def test_ast_node_inserted_as_a_copy():
    node = gast.BinOp(left=load("a"), op=gast.Add(), right=gast.Constant(1, None))
    (stmt,) = replace("out = value * value", out="y", value=node)
    assert src(stmt) == "y = ((a + 1) * (a + 1))"
    assert stmt.value.left is not node and stmt.value.right is not node
    assert stmt.value.left is not stmt.value.right
    node.right.value = 99  # the original stays the caller's
    assert src(stmt) == "y = ((a + 1) * (a + 1))"


def test_statement_list_spliced_for_a_lone_placeholder():
    body = replace("a = 1\nb = 2")
    stmts = replace("if cond:\n    body\nelse:\n    pass", cond="c", body=body)
    assert src(stmts) == "if c:\n    a = 1\n    b = 2\nelse:\n    pass"
    # at top level too, and an empty list removes the placeholder
    assert src(replace("x = 0\nbody\ny = 1", body=body)) == "x = 0\na = 1\nb = 2\ny = 1"
    assert src(replace("x = 0\nbody", body=[])) == "x = 0"


def test_parameter_list_and_function_name():
    (fn,) = replace("def fn(params):\n    return params", fn="_hf_f_0", params=["a", "b"])
    assert isinstance(fn, gast.FunctionDef) and fn.name == "_hf_f_0"
    assert [a.id for a in fn.args.args] == ["a", "b"]
    assert all(isinstance(a.ctx, gast.Param) for a in fn.args.args)
    assert src(fn) == "def _hf_f_0(a, b):\n    return (a, b)"
    (fn,) = replace("def fn(first, params):\n    pass", fn="g", first="item", params=[])
    assert [a.id for a in fn.args.args] == ["item"]


def test_keyword_and_global_names_renamed():
    (stmt,) = replace("f(key=value)", key="axis", value="x")
    assert src(stmt) == "f(axis=x)"
    (stmt,) = replace("global a, b", a="renamed")
    assert stmt.names == ["renamed", "b"]


def test_template_locations_cleared():
    stmts = replace("if c:\n    y = f(x)\nelse:\n    y = 2", c="cond", x=load("z"))
    seen = 0
    for stmt in stmts:
        for node in gast.walk(stmt):
            for attr in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
                if hasattr(node, attr):
                    seen += 1
                    assert getattr(node, attr) is None, (type(node).__name__, attr)
    assert seen > 0


def test_parsed_template_is_not_mutated_between_uses():
    first = replace("out = f(a)", out="y", a="x")
    first[0].targets[0].id = "changed"
    second = replace("out = f(a)", out="q", a="w")
    assert src(second) == "q = f(w)"
    assert src(replace("out = f(a)")) == "out = f(a)"


def test_replace_expr():
    node = replace_expr("helper(lambda: value)", helper="_jst.h", value=load("x"))
    assert isinstance(node, gast.Call)
    assert isinstance(node.args[0], gast.Lambda)
    assert expr_src(node) == "_jst.h((lambda : x))"
    with pytest.raises(ValueError):
        replace_expr("a = 1\nb = 2")


def test_name_helpers():
    assert isinstance(load("a").ctx, gast.Load) and load("a").id == "a"
    assert isinstance(store("a").ctx, gast.Store)
    assert isinstance(name("a", gast.Del()).ctx, gast.Del)
    assert expr_src(attribute("a.b.c")) == "a.b.c"
    assert isinstance(attribute("a"), gast.Name)
