"""Every ``return`` to a single exit: a flag and a value.

::

    def f(x):                          def f(x):
        if c:                              do_return = False
            return a            ->         retval = _jst.UNDEFINED_RETURN
        b                                  if c:
        return d                               do_return = True
                                               retval = a
                                           if not do_return:
                                               b
                                               do_return = True
                                               retval = d
                                           return _jst.return_value(retval)

A ``return`` inside a loop also ``break``s (the break pass turns that into the loop's flag);
after a loop that may return, an enclosing loop breaks too, and the rest of the function is
guarded by ``not do_return``. Functions whose only ``return`` is their last statement are left
as they are.
"""
from __future__ import annotations

import gast

from ..templates import replace
from .base import FUNCTIONS, LOOPS, Context, copy_location


def _contains_return(nodes) -> bool:
    stack = [n for n in nodes if not isinstance(n, FUNCTIONS)]
    while stack:
        node = stack.pop()
        if isinstance(node, gast.Return):
            return True
        stack.extend(c for c in gast.iter_child_nodes(node) if not isinstance(c, FUNCTIONS))
    return False


class _Rewriter:
    def __init__(self, flag: str, value: str):
        self.flag, self.value = flag, value

    def block(self, stmts: list, in_loop: bool) -> list:
        out = []
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, gast.Return):
                value = stmt.value if stmt.value is not None else gast.Constant(None, None)
                new = replace("flag = True\nretval = value", flag=self.flag,
                              retval=self.value, value=value)
                if in_loop:
                    new += [gast.Break()]
                out.extend(copy_location(new, stmt))
                return out  # the rest of the block is unreachable
            if not _contains_return([stmt]):
                out.append(stmt)
                continue
            self.compound(stmt, in_loop)
            out.append(stmt)
            rest = stmts[i + 1:]
            if isinstance(stmt, LOOPS) and in_loop:
                out.extend(copy_location(replace("if flag:\n    break", flag=self.flag), stmt))
            if rest:
                guarded = self.block(rest, in_loop)
                out.extend(copy_location(replace("if not flag:\n    body", flag=self.flag,
                                                 body=guarded), rest[0]))
            return out
        return out

    def compound(self, stmt, in_loop: bool) -> None:
        if isinstance(stmt, LOOPS):
            stmt.body = self.block(stmt.body, True) or [gast.Pass()]
            stmt.orelse = self.block(stmt.orelse, in_loop)
            return
        for field in ("body", "orelse", "finalbody"):
            block = getattr(stmt, field, None)
            if isinstance(block, list) and block:
                setattr(stmt, field, self.block(block, in_loop) or [gast.Pass()])
        for handler in getattr(stmt, "handlers", ()):
            handler.body = self.block(handler.body, in_loop) or [gast.Pass()]
        for case in getattr(stmt, "cases", ()):  # a match statement's cases
            case.body = self.block(case.body, in_loop) or [gast.Pass()]


def _single_exit(body: list) -> bool:
    """Only the last top-level statement returns (or nothing does)."""
    return not _contains_return(body[:-1]) and (
        not body or isinstance(body[-1], gast.Return) or not _contains_return(body[-1:]))


def _always_returns(body) -> bool:
    """Whether every path through ``body`` ends in a ``return`` (or a ``raise``)."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (gast.Return, gast.Raise)):
        return True
    if isinstance(last, gast.If):
        return _always_returns(last.body) and _always_returns(last.orelse)
    return False


class _Functions(gast.NodeTransformer):
    def __init__(self, ctx: Context):
        self.ctx = ctx

    def visit_FunctionDef(self, node):
        self.generic_visit(node)  # nested functions first, each on its own
        if _single_exit(node.body):
            return node
        flag, value = self.ctx.new_name("do_return"), self.ctx.new_name("retval")
        always = _always_returns(node.body)
        body = _Rewriter(flag, value).block(node.body, False)
        head = copy_location(replace("flag = False\nretval = _jst.UNDEFINED_RETURN", flag=flag,
                                     retval=value), node.body[0])
        exit_ = "return _jst.return_value(retval, True)" if always else \
            "return _jst.return_value(retval)"
        tail = copy_location(replace(exit_, retval=value), node.body[-1])
        node.body = head + body + tail
        return node


def transform(node, ctx: Context):
    return _Functions(ctx).visit(node)
