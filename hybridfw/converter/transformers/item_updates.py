"""Augmented assignment to an item: ``y[i] += v`` -> ``y[i] = _jst.convert_item_update(y, i,
"+", v)``. Python runs it as ``y[i] = y[i].__iadd__(v)``: in place on a view of ``y``, then the
item written back. In a program the in-place update of a view taken inside a tensor-decided
branch cannot write through to a ``y`` from outside it, so there the item is computed out of
place (``y[i] + v``) and the assignment alone updates ``y`` (eager code keeps the in-place
form). Only targets whose value and index are names, attributes, constants and slices of them
are rewritten (they are read twice: no side effects may repeat).
"""
from __future__ import annotations

import gast

from ..templates import replace
from .base import Context, copy_location

_OPS = {gast.Add: "+", gast.Sub: "-", gast.Mult: "*", gast.Div: "/", gast.FloorDiv: "//",
        gast.Mod: "%", gast.Pow: "**", gast.BitAnd: "&", gast.BitOr: "|", gast.BitXor: "^"}


def _plain(node) -> bool:
    """An expression with no side effects to repeat: names, attributes, constants, slices and
    tuples of them, negated numbers."""
    if isinstance(node, (gast.Name, gast.Constant)):
        return True
    if isinstance(node, gast.Attribute):
        return _plain(node.value)
    if isinstance(node, gast.Slice):
        return all(part is None or _plain(part) for part in (node.lower, node.upper, node.step))
    if isinstance(node, gast.Tuple):
        return all(_plain(e) for e in node.elts)
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
        return _plain(node.operand)
    return False


def _index_value(node):
    """The index of a subscript as a value to pass: its slices as ``slice(...)`` calls."""
    if isinstance(node, gast.Slice):
        parts = [gast.Constant(None, None) if p is None else _index_value(p)
                 for p in (node.lower, node.upper, node.step)]
        return gast.Call(func=gast.Name("slice", gast.Load(), None, None), args=parts,
                         keywords=[])
    if isinstance(node, gast.Tuple):
        return gast.Tuple(elts=[_index_value(e) for e in node.elts], ctx=gast.Load())
    return node


class _ItemUpdates(gast.NodeTransformer):
    def visit_AugAssign(self, node):
        self.generic_visit(node)
        target = node.target
        op = _OPS.get(type(node.op))
        if op is None or not isinstance(target, gast.Subscript) or \
                not _plain(target.value) or not _plain(target.slice):
            return node
        store = gast.Subscript(value=target.value, slice=target.slice, ctx=gast.Store())
        new = replace("target = _jst.convert_item_update(value, index, op, operand)",
                      target=store, value=target.value, index=_index_value(target.slice),
                      op=gast.Constant(op, None), operand=node.value)
        return copy_location(new, node)


def transform(node, ctx: Context):
    return _ItemUpdates().visit(node)
