"""AST templates: new code is written as Python source with placeholder names, parsed once, and
filled with AST nodes -- never assembled from strings.

Example::

    >>> import gast
    >>> from hybridfw.converter.templates import replace
    >>> stmts = replace("target = helper(value)", target="y", helper="_jst.f",
    ...                 value=gast.Constant(1, None))
    >>> len(stmts)
    1
"""
from __future__ import annotations

import copy
import functools

import gast

__all__ = ["attribute", "load", "name", "replace", "replace_expr", "store"]


@functools.cache
def _parse(template: str):
    return gast.parse(template).body


def load(identifier: str) -> gast.Name:
    return gast.Name(id=identifier, ctx=gast.Load(), annotation=None, type_comment=None)


def store(identifier: str) -> gast.Name:
    return gast.Name(id=identifier, ctx=gast.Store(), annotation=None, type_comment=None)


def name(identifier: str, ctx) -> gast.Name:
    return gast.Name(id=identifier, ctx=ctx, annotation=None, type_comment=None)


def attribute(dotted: str):
    """``a.b.c`` as a Load expression."""
    first, *rest = dotted.split(".")
    node = load(first)
    for part in rest:
        node = gast.Attribute(value=node, attr=part, ctx=gast.Load())
    return node


class _Substitute(gast.NodeTransformer):
    def __init__(self, replacements: dict):
        self.replacements = replacements

    def _value(self, key: str, ctx):
        value = self.replacements[key]
        if isinstance(value, str):
            if "." in value:
                if not isinstance(ctx, gast.Load):
                    raise ValueError(f"template: {key!r} -> dotted name {value!r} in a store")
                return attribute(value)
            return name(value, ctx)
        if isinstance(value, (list, tuple)) and not isinstance(ctx, gast.Load):
            # a tuple of names as an assignment target
            return gast.Tuple(elts=[name(v, ctx) if isinstance(v, str) else v for v in value],
                              ctx=ctx)
        if isinstance(value, (list, tuple)):
            return gast.Tuple(elts=[load(v) if isinstance(v, str) else v for v in value],
                              ctx=gast.Load())
        return copy.deepcopy(value)

    def visit_Name(self, node):
        if node.id in self.replacements:
            return self._value(node.id, node.ctx)
        return node

    def visit_Expr(self, node):
        # a placeholder standing alone as a statement splices a list of statements
        if isinstance(node.value, gast.Name) and node.value.id in self.replacements:
            value = self.replacements[node.value.id]
            if isinstance(value, list) and (not value or isinstance(value[0], gast.stmt)):
                return value
        self.generic_visit(node)
        return node

    def _rename_def(self, node):
        if node.name in self.replacements:
            node.name = self.replacements[node.name]
        self.generic_visit(node)
        return node

    visit_FunctionDef = _rename_def

    def visit_arguments(self, node):
        # placeholder parameter lists: ``def f(args): ...`` / ``lambda args: ...`` with
        # args -> list of names
        new_args = []
        for a in node.args:
            if isinstance(a, gast.Name) and a.id in self.replacements and \
                    isinstance(self.replacements[a.id], (list, tuple)):
                new_args.extend(name(v, gast.Param()) for v in self.replacements[a.id])
            else:
                new_args.append(self.visit(a))
        node.args = new_args
        return node

    def visit_Global(self, node):
        node.names = [self.replacements.get(n, n) if isinstance(self.replacements.get(n, n), str)
                      else n for n in node.names]
        return node

    def visit_keyword(self, node):
        if node.arg in self.replacements and isinstance(self.replacements[node.arg], str):
            node.arg = self.replacements[node.arg]
        self.generic_visit(node)
        return node


def replace(template: str, **replacements) -> list:
    """The statements of ``template`` with each placeholder name replaced: a str renames (a
    dotted str becomes an attribute load), a list/tuple of names becomes a tuple (or a
    parameter list), an AST node is inserted (a copy), and a list of statements replaces a
    placeholder that stands alone as a statement."""
    body = copy.deepcopy(_parse(template))
    for stmt in body:  # template locations mean nothing; callers give the user's location
        for node in gast.walk(stmt):
            for attr in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
                if hasattr(node, attr):
                    setattr(node, attr, None)
    sub = _Substitute(replacements)
    out = []
    for stmt in body:
        result = sub.visit(stmt)
        out.extend(result if isinstance(result, list) else [result])
    return out


def replace_expr(template: str, **replacements):
    """Like :func:`replace` for a template that is a single expression."""
    (stmt,) = replace(template, **replacements)
    return stmt.value
