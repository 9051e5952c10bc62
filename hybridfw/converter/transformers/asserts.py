"""``assert test, msg`` -> ``_jst.convert_assert(test, lambda: msg)``: checked on every run of
the program when ``test`` is a tensor (the message is built only when the check fails)."""
from __future__ import annotations

import gast

from ..templates import replace
from .base import Context, copy_location


class _Asserts(gast.NodeTransformer):
    def visit_Assert(self, node):
        msg = node.msg if node.msg is not None else gast.Constant(None, None)
        new = replace("_jst.convert_assert(test, lambda: msg)", test=node.test, msg=msg)
        return copy_location(new, node)


def transform(node, ctx: Context):
    return _Asserts().visit(node)
