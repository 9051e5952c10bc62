"""Scope analysis over gast trees.

- :func:`assigned_names`: names a list of statements binds in the current function scope
  (assignments, augmented assignments, for targets, ``with ... as``, imports, nested ``def``
  and ``class`` names, walrus targets, and the base name of an item assignment ``y[i] = v``
  or of an in-place method call statement ``y.add_(1)``, which update the tensor ``y``), not
  descending into nested scopes.
- :func:`read_names`: names loaded, including inside nested functions and lambdas (their free
  variables are read from this scope when they run).
- :func:`definitely_bound`: the names certainly bound before a statement runs, for a simple
  flow analysis over straight-line code, ``if`` (both branches), loops (bodies may not run)
  and ``try`` (handlers may start anywhere).
"""
from __future__ import annotations

import gast

__all__ = ["assigned_names", "declarations", "declared_nonlocal", "definitely_bound",
           "deleted_names", "read_names"]

_SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef,
           gast.ListComp, gast.SetComp, gast.DictComp, gast.GeneratorExp)


class _Assigned(gast.NodeVisitor):
    def __init__(self, item_targets: bool = True):
        self.names: dict = {}
        self.item_targets = item_targets

    def visit_Name(self, node):
        if isinstance(node.ctx, (gast.Store, gast.Del)):
            self.names.setdefault(node.id)

    def visit_Subscript(self, node):
        # ``y[i] = v`` updates the tensor ``y`` (a static program rebinds it to a new value)
        if isinstance(node.ctx, gast.Store) and self.item_targets:
            base = node.value
            while isinstance(base, gast.Subscript):
                base = base.value
            if isinstance(base, gast.Name):
                self.names.setdefault(base.id)
        self.generic_visit(node)

    def visit_Expr(self, node):
        # ``y.add_(1)`` (a method ending in one ``_``) updates the tensor ``y`` in place, like
        # ``y[i] = v``; another object's value is passed through unchanged
        call = node.value
        method = call.func if isinstance(call, gast.Call) else None
        if isinstance(method, gast.Call) and len(method.args) == 1 and \
                isinstance(method.func, gast.Attribute) and method.func.attr == "convert_call":
            method = method.args[0]  # (as the call transformer wrote it: convert_call(y.add_))
        if self.item_targets and isinstance(method, gast.Attribute) and \
                isinstance(method.value, gast.Name) and method.attr.endswith("_") and \
                not method.attr.startswith("_"):
            self.names.setdefault(method.value.id)
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        self.names.setdefault(node.name)
        for d in node.decorator_list:
            self.visit(d)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.names.setdefault(node.name)

    def visit_Lambda(self, node):
        pass

    def _comprehension(self, node):
        # only the walrus targets inside a comprehension bind in the enclosing scope
        for sub in gast.walk(node):
            if isinstance(sub, gast.NamedExpr) and isinstance(sub.target, gast.Name):
                self.names.setdefault(sub.target.id)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_alias(self, node):
        bound = node.asname or node.name.split(".")[0]
        if bound != "*":
            self.names.setdefault(bound)

    def visit_Global(self, node):
        pass

    visit_Nonlocal = visit_Global


def assigned_names(nodes, item_targets: bool = True) -> list:
    """Names bound by ``nodes`` (a node or a list), in first-binding order; with
    ``item_targets``, also the variables updated by item assignment (``y[i] = v``)."""
    visitor = _Assigned(item_targets)
    for node in nodes if isinstance(nodes, list) else [nodes]:
        visitor.visit(node)
    return list(visitor.names)


def read_names(nodes) -> set:
    """Names loaded anywhere inside ``nodes`` (nested scopes included)."""
    names = set()
    for node in nodes if isinstance(nodes, list) else [nodes]:
        for sub in gast.walk(node):
            if isinstance(sub, gast.Name) and isinstance(sub.ctx, gast.Load):
                names.add(sub.id)
    return names


def declared_nonlocal(nodes) -> set:
    """Names declared ``global`` or ``nonlocal`` in this scope (not in nested functions)."""
    return set(declarations(nodes))


def declarations(nodes) -> dict:
    """``name -> "global" | "nonlocal"`` for the names declared so in this scope (not in
    nested functions)."""
    found: dict = {}
    stack = [n for n in (nodes if isinstance(nodes, list) else [nodes])
             if not isinstance(n, _SCOPES)]
    while stack:
        node = stack.pop()
        if isinstance(node, (gast.Global, gast.Nonlocal)):
            kind = "global" if isinstance(node, gast.Global) else "nonlocal"
            found.update(dict.fromkeys(node.names, kind))
        stack.extend(c for c in gast.iter_child_nodes(node) if not isinstance(c, _SCOPES))
    return found


def deleted_names(nodes) -> list:
    """Names ``del`` unbinds in ``nodes`` (not in nested scopes), in order."""
    found: dict = {}
    stack = list(reversed(nodes if isinstance(nodes, list) else [nodes]))
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Del):
            found.setdefault(node.id)
        stack.extend(reversed(list(gast.iter_child_nodes(node))))
    return list(found)


def local_names(function) -> set:
    """The local variables of ``function``: its parameters and the names it binds, less those
    declared global or nonlocal."""
    return (_params(function.args) | set(assigned_names(function.body, item_targets=False))) \
        - declared_nonlocal(function.body)


def _params(args: gast.arguments) -> set:
    names = {a.id for a in args.posonlyargs + args.args + args.kwonlyargs}
    for extra in (args.vararg, args.kwarg):
        if extra is not None:
            names.add(extra.id)
    return names


def _flow(stmts, bound: frozenset, target, found: list) -> frozenset:
    """Walk ``stmts`` with ``bound`` names bound on entry; record in ``found`` the set bound
    before ``target``; return the names bound after the statements."""
    for stmt in stmts:
        if stmt is target:
            found.append(bound)
        if isinstance(stmt, gast.If):
            after_body = _flow(stmt.body, bound, target, found)
            after_else = _flow(stmt.orelse, bound, target, found)
            bound = after_body & after_else
        elif isinstance(stmt, (gast.For, gast.AsyncFor, gast.While)):
            inner = bound | frozenset(assigned_names(stmt.target)) \
                if isinstance(stmt, (gast.For, gast.AsyncFor)) else bound
            _flow(stmt.body, inner, target, found)
            _flow(stmt.orelse, bound, target, found)
        elif isinstance(stmt, gast.Try):
            _flow(stmt.body, bound, target, found)
            for handler in stmt.handlers:
                _flow(handler.body, bound, target, found)
            _flow(stmt.orelse, bound, target, found)
            _flow(stmt.finalbody, bound, target, found)
        elif isinstance(stmt, (gast.With, gast.AsyncWith)):
            inner = bound | frozenset(assigned_names([i.optional_vars for i in stmt.items
                                                      if i.optional_vars is not None]))
            bound = _flow(stmt.body, inner, target, found)
            continue
        else:
            deleted = frozenset(n.id for n in gast.walk(stmt) if isinstance(n, gast.Name)
                                and isinstance(n.ctx, gast.Del))
            bound = (bound | frozenset(assigned_names(stmt))) - deleted
            continue
        bound = bound | _always_bound(stmt)
    return bound


def _always_bound(stmt) -> frozenset:
    """Names a compound statement binds on every path (its test's walrus targets)."""
    test = getattr(stmt, "test", None) if isinstance(stmt, gast.If) else None
    return frozenset(assigned_names(test)) if test is not None else frozenset()


def definitely_bound(function: gast.FunctionDef, target, outer: frozenset = frozenset()) -> set:
    """Names certainly bound when ``target`` (a statement somewhere in ``function``'s body,
    at any nesting depth but not inside a nested function) starts."""
    found: list = []
    _flow(function.body, frozenset(_params(function.args)) | outer, target, found)
    return set(found[0]) if found else set()
