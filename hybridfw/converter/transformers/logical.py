"""Boolean logic that tensors decide at run time, with Python's short-circuit semantics:

- ``a and b`` -> ``_jst.convert_logical_and(lambda: a, lambda: b)`` (``or`` likewise): the
  right side is evaluated only when the left does not decide, also for tensors (it is built
  into one branch of a ``cond``);
- ``not a`` -> ``_jst.convert_logical_not(a)``;
- ``a < b <= c`` -> ``_jst.convert_compare(lambda: a, '<', lambda: b, '<=', lambda: c)``
  (each operand evaluated once, the chain stopping at the first false link);
- ``x if c else y`` -> ``_jst.convert_ifexp(c, lambda: x, lambda: y)``;
- ``x is None`` / ``x is not None`` -> ``_jst.convert_is_none(x, False / True)``.

An operand holding an assignment expression (``:=``) must bind the user's variable, not a
local of a lambda: the first operand (always evaluated) is evaluated where it stands and
handed over as ``(lambda v: lambda: v)(a)``; an expression with one in another operand stays
Python's (the walrus pass has rewritten those that are an ``if`` test or an assigned value).
"""
from __future__ import annotations

import gast

from ..templates import replace_expr
from .base import Context, copy_location
from .walrus import has_walrus

_OPS = {gast.Eq: "==", gast.NotEq: "!=", gast.Lt: "<", gast.LtE: "<=", gast.Gt: ">",
        gast.GtE: ">=", gast.Is: "is", gast.IsNot: "is not", gast.In: "in",
        gast.NotIn: "not in"}


def _thunk(expr):
    if has_walrus(expr):  # evaluated here, the lambda only hands the value over
        return replace_expr("(lambda value: lambda: value)(expr)", value="_hf_value",
                            expr=expr)
    return gast.Lambda(args=gast.arguments(args=[], posonlyargs=[], vararg=None,
                                           kwonlyargs=[], kw_defaults=[], kwarg=None,
                                           defaults=[]), body=expr)


class _Logical(gast.NodeTransformer):
    def visit_BoolOp(self, node):
        self.generic_visit(node)
        if any(has_walrus(v) for v in node.values[1:]):
            return node
        helper = "_jst.convert_logical_and" if isinstance(node.op, gast.And) else \
            "_jst.convert_logical_or"
        result = node.values[-1]
        for left in reversed(node.values[:-1]):  # a and b and c -> and(a, and(b, c))
            result = replace_expr("helper(left, right)", helper=helper, left=_thunk(left),
                                  right=_thunk(result))
        return copy_location(result, node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, gast.Not):
            return copy_location(replace_expr("_jst.convert_logical_not(x)", x=node.operand),
                                 node)
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], (gast.Is, gast.IsNot)) and \
                isinstance(node.comparators[0], gast.Constant) and \
                node.comparators[0].value is None:  # x is None: see convert_is_none
            return copy_location(replace_expr(
                "_jst.convert_is_none(x, negate)", x=node.left,
                negate=gast.Constant(isinstance(node.ops[0], gast.IsNot), None)), node)
        if len(node.ops) == 1 or any(has_walrus(c) for c in node.comparators[1:]):
            return node
        args = [_thunk(node.left)]
        for op, right in zip(node.ops, node.comparators):
            args += [gast.Constant(_OPS[type(op)], None), _thunk(right)]
        call = replace_expr("_jst.convert_compare()")
        call.args = args
        return copy_location(call, node)

    def visit_IfExp(self, node):
        self.generic_visit(node)
        if has_walrus(node.body) or has_walrus(node.orelse):
            return node
        return copy_location(replace_expr("_jst.convert_ifexp(test, body, orelse)",
                                          test=node.test, body=_thunk(node.body),
                                          orelse=_thunk(node.orelse)), node)


def transform(node, ctx: Context):
    return _Logical().visit(node)
