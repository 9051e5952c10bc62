"""Refuse, at conversion time, constructs that cannot become a static program: generators and
async code.

Constructs that are only unsupported when a tensor decides them are checked by the runtime
helpers, which know the values: recursion on tensor conditions, ``with`` on unknown context
managers, and ``try``/``except`` around control flow a tensor decides -- for that, this pass
wraps the body of each ``try`` that has handlers in ``with _jst.try_block():``, so the helpers
know they are inside one (a handler could never see an error the program raises at run time).
"""
from __future__ import annotations

import gast

from ..errors import UnsupportedConstructError
from ..templates import replace
from .base import FUNCTIONS, Context, copy_location


def _own_nodes(function):
    """Nodes of ``function``'s own scope (not of nested functions)."""
    stack = [n for n in function.body if not isinstance(n, FUNCTIONS)]
    while stack:
        node = stack.pop()
        yield node
        for child in gast.iter_child_nodes(node):
            if not isinstance(child, FUNCTIONS):
                stack.append(child)


def transform(node: gast.FunctionDef, ctx: Context) -> gast.FunctionDef:
    for sub in _own_nodes(node):
        if isinstance(sub, (gast.Yield, gast.YieldFrom)):
            raise UnsupportedConstructError("a generator (yield)", ctx.filename,
                                            getattr(sub, "lineno", None))
        if isinstance(sub, (gast.Await, gast.AsyncFor, gast.AsyncWith)):
            raise UnsupportedConstructError("async code (await/async for/async with)",
                                            ctx.filename, getattr(sub, "lineno", None))
    if isinstance(node, gast.AsyncFunctionDef):
        raise UnsupportedConstructError("an async function", ctx.filename, node.lineno)
    return _TryBlocks().visit(node)


class _TryBlocks(gast.NodeTransformer):
    def visit_Try(self, node):
        self.generic_visit(node)
        if node.handlers:
            node.body = copy_location(replace("with _jst.try_block():\n    body",
                                              body=node.body), node)
        return node
