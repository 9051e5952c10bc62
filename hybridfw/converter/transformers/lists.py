"""List growth as rebinding: ``l.append(x)`` -> ``l = _jst.convert_append(l, x)`` and
``y = l.pop(...)`` -> ``l, y = _jst.convert_pop(l, ...)``.

The rebinding makes the list an assigned name of the loop or branch around it, so the
control-flow pass carries it as state; at run time a plain Python list stays a list (appended
in place, same object), while inside a tensor-decided loop it becomes a tensor array.
"""
from __future__ import annotations

import gast

from ..templates import replace
from .base import Context, copy_location


def _method_call(node, method: str):
    """``name.method(...)`` with ``name`` a plain variable: return the variable name."""
    if isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) and \
            node.func.attr == method and isinstance(node.func.value, gast.Name) and \
            not node.keywords:
        return node.func.value.id
    return None


class _Lists(gast.NodeTransformer):
    def visit_Expr(self, node):
        target = _method_call(node.value, "append")
        if target is not None and len(node.value.args) == 1:
            new = replace("target = _jst.convert_append(target, value)", target=target,
                          value=node.value.args[0])
            return copy_location(new, node)
        target = _method_call(node.value, "pop")
        if target is not None and len(node.value.args) <= 1:
            new = replace("target, _ = _jst.convert_pop(target, args)", target=target,
                          args=node.value.args[0] if node.value.args else
                          gast.Constant(None, None))
            return copy_location(new, node)
        return node

    def visit_Assign(self, node):
        target = _method_call(node.value, "pop")
        if target is not None and len(node.value.args) <= 1 and len(node.targets) == 1:
            new = replace("lst, out = _jst.convert_pop(lst, args)", lst=target,
                          out=node.targets[0],
                          args=node.value.args[0] if node.value.args else
                          gast.Constant(None, None))
            return copy_location(new, node)
        return node


def transform(node, ctx: Context):
    return _Lists().visit(node)
