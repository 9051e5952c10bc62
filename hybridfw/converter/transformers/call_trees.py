"""Calls go through the runtime: ``f(a, b)`` -> ``_jst.convert_call(f)(a, b)``.

``convert_call`` decides at run time: user functions, methods and Modules are converted
(recursively), builtins with tensor-aware forms (``print``, ``len``, ``range``, ``int``, ...)
get those, numpy functions given static values become Python-callback operators, and anything
else (framework and library functions) is called as it is. Zero-argument ``super()`` becomes
``super(__class__, self)``, since converted code is compiled outside its class body.
``with`` context managers are checked by ``_jst.convert_with``. ``x.shape`` reads become
``_jst.convert_shape(x)`` (dims a static value knows only at run time are values there).
"""
from __future__ import annotations

import gast

from ..templates import load, replace_expr
from .base import Context, copy_location, runtime_call


def _is_str(node) -> bool:
    return isinstance(node, gast.Constant) and isinstance(node.value, str)


def _jst_attribute(name: str):
    return gast.Attribute(value=load("_jst"), attr=name, ctx=gast.Load())


class _Calls(gast.NodeTransformer):
    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.first_params: list = []

    def visit_FunctionDef(self, node):
        args = node.args.posonlyargs + node.args.args
        self.first_params.append(args[0].id if args else None)
        self.generic_visit(node)
        self.first_params.pop()
        return node

    def visit_Lambda(self, node):
        self.first_params.append(None)
        self.generic_visit(node)
        self.first_params.pop()
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if runtime_call(node):
            return node
        func = node.func
        if isinstance(func, gast.Attribute) and func.attr == "format" and \
                _is_str(func.value) and not node.keywords and \
                not any(isinstance(a, gast.Starred) for a in node.args):
            # "{} {}".format(x, y): formatted on every run where a value is static (as an
            # f-string, see visit_JoinedStr)
            call = gast.Call(func=_jst_attribute("format_string"), args=[func.value, *node.args],
                             keywords=[])
            return copy_location(call, node)
        if isinstance(func, gast.Name) and func.id == "super" and not node.args and \
                not node.keywords:
            first = self.first_params[-1] if self.first_params else None
            if first is not None:
                node.args = [load("__class__"), load(first)]
            return node
        node.func = copy_location(replace_expr("_jst.convert_call(f)", f=func), func)
        return node

    def visit_Attribute(self, node):
        """``x.shape`` -> ``_jst.convert_shape(x)``: dims a static value knows only when the
        program runs are values of the program (see :func:`~hybridfw.converter.runtime.calls.
        convert_shape`); anything else's ``shape`` is left as it is."""
        self.generic_visit(node)
        if node.attr == "shape" and isinstance(node.ctx, gast.Load):
            return copy_location(replace_expr("_jst.convert_shape(x)", x=node.value), node)
        return node

    def visit_BinOp(self, node):
        """``"a=%s" % x`` -> ``_jst.format_percent("a=%s", x)``: formatted on every run where a
        value is static (as an f-string)."""
        self.generic_visit(node)
        if isinstance(node.op, gast.Mod) and _is_str(node.left):
            call = gast.Call(func=_jst_attribute("format_percent"), args=[node.left, node.right],
                             keywords=[])
            return copy_location(call, node)
        return node

    def visit_JoinedStr(self, node):  # noqa: C901 - one pass over the parts
        """``f"a {x:.2f} {y!r}"`` -> ``_jst.format_string("a {0:.2f} {1!r}", x, y)``: the same
        text for Python values, formatted on every run for a static value a converted print
        shows (see :func:`~hybridfw.converter.runtime.calls.format_string`)."""
        for part in node.values:  # (not the format specs: they stay f-string parts)
            if isinstance(part, gast.FormattedValue):
                part.value = self.visit(part.value)
        template, values = [], []
        for part in node.values:
            if isinstance(part, gast.Constant):
                template.append(str(part.value).replace("{", "{{").replace("}", "}}"))
                continue
            if not isinstance(part, gast.FormattedValue):
                return node
            field = _field(part, len(values))
            if field is None:
                return node
            values.append(part.value)
            if part.format_spec is not None and not _constant_spec(part):
                # a spec with fields of its own ({x:{width}.2f}): nested fields of the template
                spec = []
                for v in _spec_parts(part):
                    if isinstance(v, gast.Constant):
                        spec.append(str(v.value).replace("{", "{{").replace("}", "}}"))
                        continue
                    nested = _field(v, len(values))
                    if nested is None or (v.format_spec is not None and
                                          not _constant_spec(v)):
                        return node  # (deeper nesting: Python refuses it too)
                    v.value = self.visit(v.value)
                    spec.append(nested)
                    values.append(v.value)
                field = field[:-1] + ":" + "".join(spec) + "}"
            template.append(field)
        call = gast.Call(func=_jst_attribute("format_string"),
                         args=[gast.Constant(value="".join(template), kind=None), *values],
                         keywords=[])
        return copy_location(call, node)

    def visit_withitem(self, node):
        self.generic_visit(node)
        node.context_expr = copy_location(
            replace_expr("_jst.convert_with(manager)", manager=node.context_expr),
            node.context_expr)
        return node


def _spec_parts(part) -> list:
    spec = part.format_spec
    return spec.values if isinstance(spec, gast.JoinedStr) else [spec]


def _constant_spec(part) -> bool:
    return all(isinstance(v, gast.Constant) for v in _spec_parts(part))


def _field(part, index: int):
    """``{index!r:spec}`` for a FormattedValue whose spec (if any) is constant text; with a
    spec holding fields, ``{index!r}`` (the caller adds the spec); None for anything else."""
    if not isinstance(part, gast.FormattedValue):
        return None
    field = "{" + str(index)
    if part.conversion not in (-1, None):
        field += "!" + chr(part.conversion)
    if part.format_spec is not None and _constant_spec(part):
        field += ":" + "".join(str(v.value) for v in _spec_parts(part)).replace(
            "{", "{{").replace("}", "}}")
    return field + "}"


def transform(node, ctx: Context):
    return _Calls(ctx).visit(node)
