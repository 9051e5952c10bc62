"""Refuse, at conversion time, constructs that cannot become a static program: generators.

Constructs that are only unsupported when a tensor decides them (``try``/``except`` around
tensor-dependent control flow, recursion on tensor conditions, ``with`` on unknown context
managers) are checked by the runtime helpers, which know the values.
"""
from __future__ import annotations

import gast

from ..errors import UnsupportedConstructError
from .base import FUNCTIONS, Context


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
    return node
