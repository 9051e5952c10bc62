"""List growth as rebinding: ``l.append(x)`` -> ``l = _jst.convert_append(l, x)`` (and
``l.extend(xs)`` -> ``l = _jst.convert_extend(l, xs)``, ``l.insert(i, x)`` ->
``l = _jst.convert_insert(l, i, x)``) and
``y = l.pop(...)`` -> ``l, y = _jst.convert_pop(l, ...)``; and a list comprehension with one
``for`` and no condition, ``[f(p) for p in pairs]``, ->
``_jst.convert_list_comprehension(pairs, lambda p: f(p))``, which is a Python comprehension
unless ``pairs`` is a tensor, or a list grown in a loop a tensor decided (then it is a
converted ``for`` loop appending to a new list).

The rebinding makes the list an assigned name of the loop or branch around it, so the
control-flow pass carries it as state; at run time a plain Python list stays a list (appended
in place, same object), while inside a tensor-decided loop it becomes a tensor array.
"""
from __future__ import annotations

import gast

from ..analysis import local_names
from ..templates import replace, replace_expr
from .base import Context, copy_location


def _method_call(node, method: str):
    """``name.method(...)`` with ``name`` a plain variable: return the variable name."""
    if isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) and \
            node.func.attr == method and isinstance(node.func.value, gast.Name) and \
            not node.keywords:
        return node.func.value.id
    return None


def _params(target):
    """The parameter names of a lambda binding ``target`` (a name or a flat tuple of names)."""
    if isinstance(target, gast.Name):
        return [target.id]
    if isinstance(target, (gast.Tuple, gast.List)) and all(isinstance(e, gast.Name)
                                                            for e in target.elts):
        return [e.id for e in target.elts]
    return None


class _Lists(gast.NodeTransformer):
    """(Only lists that are local variables are rebound: rebinding a global or a closure
    variable would make it a local of the function.)"""

    def __init__(self):
        self.locals: list = []

    def visit_FunctionDef(self, node):
        self.locals.append(local_names(node))
        self.generic_visit(node)
        self.locals.pop()
        return node

    def _local(self, name) -> bool:
        return bool(self.locals) and name in self.locals[-1]

    def visit_ListComp(self, node):
        self.generic_visit(node)
        if len(node.generators) != 1:
            return node
        gen = node.generators[0]
        params = _params(gen.target)
        if gen.is_async or params is None or \
                any(isinstance(n, gast.NamedExpr) for part in [node.elt, *gen.ifs]
                    for n in gast.walk(part)):
            return node  # (a walrus must bind in the function, not in a lambda)

        def over_item(expr):
            if isinstance(gen.target, gast.Name):
                return replace_expr("lambda params: expr", params=params, expr=expr)
            # unpack each item: (lambda a, b: expr)(*item)
            return replace_expr("lambda item: (lambda params: expr)(*item)", params=params,
                                expr=expr, item="_hf_comprehension_item")
        if not gen.ifs:
            new = replace_expr("_jst.convert_list_comprehension(iterable, fn)",
                               iterable=gen.iter, fn=over_item(node.elt))
        else:  # [f(p) for p in xs if c(p)]: the condition a function of the item too
            test = gen.ifs[0] if len(gen.ifs) == 1 else gast.BoolOp(op=gast.And(),
                                                                    values=gen.ifs)
            new = replace_expr("_jst.convert_list_comprehension(iterable, fn, test)",
                               iterable=gen.iter, fn=over_item(node.elt),
                               test=over_item(test))
        return copy_location(new, node)

    def visit_Expr(self, node):
        self.generic_visit(node)
        target = _method_call(node.value, "append")
        if target is not None and len(node.value.args) == 1 and self._local(target):
            new = replace("target = _jst.convert_append(target, value)", target=target,
                          value=node.value.args[0])
            return copy_location(new, node)
        target = _method_call(node.value, "extend")
        if target is not None and len(node.value.args) == 1 and self._local(target):
            new = replace("target = _jst.convert_extend(target, value)", target=target,
                          value=node.value.args[0])
            return copy_location(new, node)
        target = _method_call(node.value, "insert")
        if target is not None and len(node.value.args) == 2 and self._local(target):
            new = replace("target = _jst.convert_insert(target, index, value)", target=target,
                          index=node.value.args[0], value=node.value.args[1])
            return copy_location(new, node)
        target = _method_call(node.value, "pop")
        if target is not None and len(node.value.args) <= 1 and self._local(target):
            new = replace("target, _ = _jst.convert_pop(target, args)", target=target,
                          args=node.value.args[0] if node.value.args else
                          gast.Constant(None, None))
            return copy_location(new, node)
        return node

    def visit_Assign(self, node):
        self.generic_visit(node)
        target = _method_call(node.value, "pop")
        if target is not None and len(node.value.args) <= 1 and len(node.targets) == 1 and \
                self._local(target):
            new = replace("lst, out = _jst.convert_pop(lst, args)", lst=target,
                          out=node.targets[0],
                          args=node.value.args[0] if node.value.args else
                          gast.Constant(None, None))
            return copy_location(new, node)
        return node


def transform(node, ctx: Context):
    return _Lists().visit(node)
