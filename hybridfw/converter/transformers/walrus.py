"""Assignment expressions (``:=``) where later passes would move them into a function of
their own (where they would bind a local of that function, not the user's variable).

- A ``while`` test holding one is evaluated as statements, before the loop and again at the
  end of its body (which has no jumps left: see break_continue; a break flag is the test's
  first operand, so the test is not evaluated again after a break)::

      while (m := x.max()) > 1:          _hf_test = (m := x.max()) > 1
          body                    ->     while _hf_test:
                                             body
                                             _hf_test = (m := x.max()) > 1

- An ``and``/``or`` (or a conditional expression) that is the whole test of an ``if`` or the
  whole value of an assignment and holds one in an operand evaluated only on some paths
  becomes the ifs Python's short-circuit means (which the control-flow pass converts)::

      if a and (m := f(a)) > 0:          _hf_test = a
          body                    ->     if _hf_test:
                                             _hf_test = (m := f(a)) > 0
                                         if _hf_test:
                                             body

Elsewhere the logical pass leaves an expression holding one as Python's (see
:func:`has_walrus`).
"""
from __future__ import annotations

import copy

import gast

from ..templates import replace
from .base import FUNCTIONS, Context, copy_location

__all__ = ["has_walrus", "transform"]


def has_walrus(node) -> bool:
    """Whether ``node`` holds an assignment expression binding in the enclosing function
    (one inside a lambda or a nested function binds there)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, gast.NamedExpr):
            return True
        stack.extend(c for c in gast.iter_child_nodes(n) if not isinstance(c, FUNCTIONS))
    return False


def _conditional(expr) -> bool:
    """Whether ``expr`` (a BoolOp or IfExp) has a walrus in a part evaluated on some paths."""
    if isinstance(expr, gast.BoolOp):
        return any(has_walrus(v) for v in expr.values[1:]) or _conditional(expr.values[0])
    if isinstance(expr, gast.IfExp):
        return has_walrus(expr.body) or has_walrus(expr.orelse) or _conditional(expr.test)
    return False


def _evaluate(target: str, expr) -> list:
    """Statements assigning ``expr`` to ``target`` with Python's short-circuit order."""
    if isinstance(expr, gast.BoolOp) and _conditional(expr):
        test = "target" if isinstance(expr.op, gast.And) else "not target"
        out = _evaluate(target, expr.values[0])
        rest = expr.values[1:]
        value = rest[0] if len(rest) == 1 else gast.BoolOp(op=expr.op, values=rest)
        out += replace(f"if {test}:\n    body", target=target, body=_evaluate(target, value))
        return out
    if isinstance(expr, gast.IfExp) and _conditional(expr):
        flag = target + "_if"
        return _evaluate(flag, expr.test) + replace(
            "if flag:\n    body\nelse:\n    orelse", flag=flag,
            body=_evaluate(target, expr.body), orelse=_evaluate(target, expr.orelse))
    return replace("target = value", target=target, value=expr)


class _Walrus(gast.NodeTransformer):
    def __init__(self, ctx: Context):
        self.ctx = ctx

    def visit_While(self, node):
        if not has_walrus(node.test) or node.orelse:
            return self.generic_visit(node)
        flag = self.ctx.new_name("test")
        before = copy_location(replace("flag = test", flag=flag, test=node.test), node.test)
        again = copy_location(replace("flag = test", flag=flag,
                                      test=copy.deepcopy(node.test)), node.test)
        node.test = copy_location(gast.Name(id=flag, ctx=gast.Load(), annotation=None,
                                            type_comment=None), node.test)
        node.body = node.body + again
        out = []
        for stmt in before:
            visited = self.visit(stmt)
            out.extend(visited if isinstance(visited, list) else [visited])
        return out + [self.generic_visit(node)]

    def visit_If(self, node):
        self.generic_visit(node)
        if not _conditional(node.test):
            return node
        flag = self.ctx.new_name("test")
        before = copy_location(_evaluate(flag, node.test), node.test)
        node.test = copy_location(gast.Name(id=flag, ctx=gast.Load(), annotation=None,
                                            type_comment=None), node.test)
        return before + [node]

    def visit_Assign(self, node):
        if len(node.targets) > 1 or not _conditional(node.value):
            return node  # (a = b = ... with a conditional walrus: left as Python's)
        value = self.ctx.new_name("value")
        return copy_location(_evaluate(value, node.value) + replace(
            "target = value", target=node.targets[0], value=value), node)


def transform(node, ctx: Context):
    return _Walrus(ctx).visit(node)
