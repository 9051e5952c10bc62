"""``break`` and ``continue`` to flag variables, so loops have no jumps left.

::

    while test:                         brk = False
        a                               while not brk and test:
        if c:                               cont = False
            continue           ->           a
        if d:                               if c:
            break                               cont = True
        b                                   if not cont:
                                                if d:
                                                    brk = True
                                                if not brk:
                                                    b

A ``for`` loop keeps its form and gets the break flag as an extra test, recorded on the node
(``hf_break_flag``) for the control-flow pass; its ``else`` clause runs when the flag is not
set. Statements after one that may set a flag run under ``if not flag``.
"""
from __future__ import annotations

import gast

from ..templates import replace
from .base import FUNCTIONS, LOOPS, Context, copy_location


def _jumps(nodes, kind) -> bool:
    """Whether ``nodes`` hold a ``kind`` (Break/Continue) of the loop they are in."""
    stack = [n for n in nodes if not isinstance(n, FUNCTIONS)]
    while stack:
        node = stack.pop()
        if isinstance(node, kind):
            return True
        stack.extend(c for c in gast.iter_child_nodes(node)
                     if not isinstance(c, FUNCTIONS + LOOPS))
    return False


def _rewrite(stmts: list, kind, flag: str) -> list:
    """Replace each ``kind`` jump in ``stmts`` by ``flag = True``, guarding what follows."""
    out = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, kind):
            out.extend(copy_location(replace("flag = True", flag=flag), stmt))
            return out  # the rest of the block is unreachable
        if not _jumps([stmt], kind):
            out.append(stmt)
            continue
        for field in ("body", "orelse", "finalbody"):
            block = getattr(stmt, field, None)
            if isinstance(block, list) and block and not isinstance(stmt, LOOPS):
                setattr(stmt, field, _rewrite(block, kind, flag) or [gast.Pass()])
        for handler in getattr(stmt, "handlers", ()):
            handler.body = _rewrite(handler.body, kind, flag) or [gast.Pass()]
        for case in getattr(stmt, "cases", ()):  # a match statement's cases
            case.body = _rewrite(case.body, kind, flag) or [gast.Pass()]
        out.append(stmt)
        rest = stmts[i + 1:]
        if rest:
            out.extend(copy_location(replace("if not flag:\n    body", flag=flag,
                                             body=_rewrite(rest, kind, flag)), rest[0]))
        return out
    return out


class _Loops(gast.NodeTransformer):
    def __init__(self, ctx: Context):
        self.ctx = ctx

    def _loop(self, node):
        self.generic_visit(node)  # inner loops first: their jumps are their own
        before, after = [], []
        if node.orelse and not _jumps(node.body, gast.Break):
            # without a break the else clause always runs after the loop: hoist it, so a
            # break or continue in it is seen as the enclosing loop's
            after, node.orelse = node.orelse, []
        if _jumps(node.body, gast.Continue):
            flag = self.ctx.new_name("continue")
            node.body = copy_location(replace("flag = False", flag=flag), node) + \
                _rewrite(node.body, gast.Continue, flag)
        if _jumps(node.body, gast.Break):
            flag = self.ctx.new_name("break")
            before = copy_location(replace("flag = False", flag=flag), node)
            node.body = _rewrite(node.body, gast.Break, flag)
            if isinstance(node, gast.While):
                node.test = copy_location(replace("not flag and test", flag=flag,
                                                  test=node.test)[0].value, node.test)
            else:
                node.hf_break_flag = flag
            if node.orelse:
                after = copy_location(replace("if not flag:\n    body", flag=flag,
                                              body=node.orelse), node.orelse[0])
                node.orelse = []
        return before + [node] + after

    visit_While = visit_For = _loop


def transform(node, ctx: Context):
    return _Loops(ctx).visit(node)
