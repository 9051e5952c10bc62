"""What the transformers share: the conversion context and small AST helpers."""
from __future__ import annotations

import itertools

import gast

__all__ = [
    "FUNCTIONS",
    "JST",
    "LOOPS",
    "Context",
    "copy_location",
    "is_generated",
    "runtime_call",
]

JST = "_jst"  # the name the converted code reaches the runtime helpers by
_PREFIX = "_hf_"

FUNCTIONS = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda)
LOOPS = (gast.For, gast.While, gast.AsyncFor)


class Context:
    """Per-conversion state: the source file (for errors) and a name generator."""

    def __init__(self, filename: str = "<unknown>", function_name: str = "<fn>"):
        self.filename = filename
        self.function_name = function_name
        self._counter = itertools.count()

    def new_name(self, stem: str) -> str:
        return f"{_PREFIX}{stem}_{next(self._counter)}"


def is_generated(name: str) -> bool:
    return name.startswith(_PREFIX) or name == JST


def runtime_call(node) -> bool:
    """Whether ``node`` is a call of a runtime helper (``_jst.something(...)``)."""
    return isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) and \
        isinstance(node.func.value, gast.Name) and node.func.value.id == JST


def _first_line_of(old):
    """``old``'s location cut to its first line: generated code stands for the line a
    statement starts on (CPython places a multi-line method call on its last line)."""
    lineno = getattr(old, "lineno", None)
    col = getattr(old, "col_offset", None)
    end_col = getattr(old, "end_col_offset", None)
    if getattr(old, "end_lineno", None) != lineno or end_col is None:
        end_col = col
    return lineno, col, lineno, end_col


def copy_location(new, old):
    """Give ``new`` (a node or list of nodes) and every node inside it lacking a location
    the location of ``old``'s first line."""
    location = _first_line_of(old)
    for root in new if isinstance(new, list) else [new]:
        for node in gast.walk(root):
            if hasattr(node, "_attributes") and "lineno" in node._attributes and \
                    getattr(node, "lineno", None) is None:
                node.lineno, node.col_offset, node.end_lineno, node.end_col_offset = location
    return new
