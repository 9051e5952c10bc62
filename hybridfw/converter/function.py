"""Converting one Python function: source -> gast -> transformers -> source -> code.

:func:`convert_function` parses the source of the function's code (``inspect.getsource`` of
``fn.__code__``: a ``functools.wraps`` wrapper is converted itself, not the function it
wraps), runs the transformers of :data:`~.transformers.PIPELINE` in order, emits the result with astunparse (the
readable converted source, :func:`converted_source`) and compiles the same tree, every node of
which carries the location of the user code it stands for (generated statements take the
location of the statement they replace) under the user's file name: tracebacks, ``linecache``
and our own errors show the user's file, line and source text, not generated code.
The new function gets the original's globals, defaults and closure cells (and one more cell,
``_jst``, for the runtime helpers). Results are cached per code object.
"""
from __future__ import annotations

import ast
import functools
import inspect
import io
import linecache
import re
import textwrap
import types

import astunparse
import gast

from .errors import ConversionError, register_code
from .templates import replace
from .transformers import PIPELINE
from .transformers.base import JST, Context

__all__ = ["ConvertedFunction", "convert_function", "converted_source"]

_cache: dict = {}


class _Unparser(astunparse.Unparser):
    """astunparse, except that a subscript by a tuple holding slices (``h[..., :3]``) is
    written without the parentheses that would make it invalid syntax."""

    def _Subscript(self, t):
        self.dispatch(t.value)
        self.write("[")
        if isinstance(t.slice, ast.Tuple) and t.slice.elts:
            for i, elt in enumerate(t.slice.elts):
                if i:
                    self.write(", ")
                self.dispatch(elt)
            if len(t.slice.elts) == 1:
                self.write(",")
        else:
            self.dispatch(t.slice)
        self.write("]")


def unparse(tree) -> str:
    out = io.StringIO()
    try:
        _Unparser(tree, file=out)
    except AttributeError:  # a node astunparse does not know (match statements): Python's own
        return ast.unparse(tree)
    return out.getvalue()


class ConvertedFunction:
    """What converting a function produced: ``source`` (the converted code, readable) and
    ``code`` (the compiled code object of the new function)."""

    __slots__ = ("code", "filename", "firstlineno", "source")

    def __init__(self, source, code, filename, firstlineno):
        self.source, self.code = source, code
        self.filename, self.firstlineno = filename, firstlineno


def _function_node(tree, fn):
    for node in tree.body:
        if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef)) and \
                node.name == fn.__code__.co_name:
            return node
    for node in tree.body:
        if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef)):
            return node
    raise ConversionError(f"to_static: could not find the definition of {fn.__qualname__} in "
                          f"its source", fn.__code__.co_filename, fn.__code__.co_firstlineno)


_DEFINITION = re.compile(r"^(\s*def\s)|(\s*async\s+def\s)|(.*(?<!\w)lambda(:|\s))|^(\s*@)")


def _source_lines(fn):
    """``(lines, first line number)`` of ``fn``'s definition, as :func:`inspect.getsourcelines`
    finds them, but read through :mod:`linecache` with the function's own globals (its module's
    loader) instead of :func:`inspect.getmodule`, whose first call looks at every module
    imported: ~25 ms of a first call. None where this does not find them (the caller then asks
    :mod:`inspect`, which says why)."""
    code = fn.__code__
    filename = code.co_filename
    if not filename or not isinstance(getattr(fn, "__globals__", None), dict):
        return None
    linecache.checkcache(filename)  # (an edited file is read again)
    lines = linecache.getlines(filename, fn.__globals__)
    lnum = code.co_firstlineno - 1
    if not lines or lnum >= len(lines):
        return None
    while lnum > 0 and not _DEFINITION.match(lines[lnum]):
        lnum -= 1
    return inspect.getblock(lines[lnum:]), lnum + 1


LAMBDA_NAME = "_hf_lambda"  # the name a converted lambda's function gets


def _lambda_node(fn):
    """``(function definition, first line)`` standing for the lambda ``fn``: its file parsed,
    the one lambda that starts on its line with its parameters, written as a ``def`` returning
    its expression. A ConversionError when the source is missing or the line holds several
    such lambdas (they cannot be told apart)."""
    code = fn.__code__
    where = (code.co_filename, code.co_firstlineno)
    lines = linecache.getlines(code.co_filename, fn.__globals__) \
        if isinstance(getattr(fn, "__globals__", None), dict) else []
    try:
        tree = gast.parse("".join(lines)) if lines else None
    except SyntaxError:
        tree = None
    if tree is None:
        raise ConversionError("to_static: the source of this lambda is not available", *where)
    count = code.co_argcount + code.co_kwonlyargcount + \
        bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    params = code.co_varnames[:count]
    found = []
    for node in gast.walk(tree):
        if isinstance(node, gast.Lambda) and node.lineno == code.co_firstlineno:
            args = node.args
            names = [a.id for a in args.posonlyargs + args.args] + \
                ([args.vararg.id] if args.vararg else []) + [a.id for a in args.kwonlyargs] + \
                ([args.kwarg.id] if args.kwarg else [])
            if sorted(names) == sorted(params):
                found.append(node)
    if len(found) != 1:
        raise ConversionError("to_static: lambdas are called as they are, not converted, where "
                              "their line holds several with the same parameters", *where)
    node = found[0]
    ret = gast.Return(value=node.body)
    gast.copy_location(ret, node.body)
    fdef = gast.FunctionDef(name=LAMBDA_NAME, args=node.args, body=[ret], decorator_list=[],
                            returns=None, type_comment=None, type_params=[])
    gast.copy_location(fdef, node)
    return fdef, code.co_firstlineno


def _parse(fn):
    code = fn.__code__
    if fn.__name__ == "<lambda>":
        return _lambda_node(fn)
    try:  # (of the code itself: a functools.wraps wrapper's own, not the function it wraps)
        lines, first = _source_lines(fn) or inspect.getsourcelines(code)
    except (OSError, TypeError) as exc:
        raise ConversionError(f"to_static: the source of {fn.__qualname__} is not available "
                              f"({exc})", code.co_filename, code.co_firstlineno) from None
    source = textwrap.dedent("".join(lines))
    tree = gast.parse(source)
    node = _function_node(tree, fn)
    for sub in gast.walk(node):
        if getattr(sub, "lineno", None) is not None:
            sub.lineno += first - 1
            if getattr(sub, "end_lineno", None) is not None:
                sub.end_lineno += first - 1
    node.decorator_list = []  # to_static and friends would convert again
    return node, first


def convert_function(fn) -> ConvertedFunction:
    """Convert ``fn`` (cached per code object)."""
    code = fn.__code__
    hit = _cache.get(code)
    if hit is not None:
        return hit
    node, first = _parse(fn)
    ctx = Context(code.co_filename, fn.__qualname__)
    generators = _hide_generators(node)
    for _, transform, _ in PIPELINE:
        node = transform(node, ctx)
    _restore_generators(node, generators)
    converted_source = unparse(gast.gast_to_ast(node)).strip() + "\n"
    # a factory binds the free variables (the original's and ``_jst``) as cells
    # (the factory is never run: its code is only a container; declaring the function's name
    # global there keeps a recursive call reading the global, as in the original)
    template = "def factory(params):\n    fn_def\n    return fn_name"
    if node.name not in code.co_freevars:
        template = "def factory(params):\n    global fn_name\n    fn_def\n    return fn_name"
    factory = replace(template, factory="_hf_factory", params=[JST, *code.co_freevars],
                      fn_def=[node], fn_name=node.name)
    module = gast.Module(body=factory, type_ignores=[])
    for sub in gast.walk(module):
        if hasattr(sub, "_attributes") and "lineno" in sub._attributes and \
                getattr(sub, "lineno", None) is None:
            sub.lineno, sub.col_offset = first, 0
            sub.end_lineno, sub.end_col_offset = first, 0
    tree = gast.gast_to_ast(module)
    ast.fix_missing_locations(tree)
    module_code = compile(tree, code.co_filename, "exec", dont_inherit=True)
    factory_code = next(c for c in module_code.co_consts if isinstance(c, types.CodeType))
    fn_code = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType)
                   and c.co_name == node.name)
    register_code(fn_code)
    result = ConvertedFunction(converted_source, fn_code, code.co_filename, first)
    _cache[code] = result
    return result


def _hide_generators(node) -> dict:
    """Empty the bodies of the generator functions defined inside ``node`` (their own scope
    yields), each replaced by a marker: a generator runs as Python while the program is traced,
    and its loops turned into graph loops could not yield. Returns marker -> body."""
    hidden: dict = {}
    inside: set = set()  # ids of nodes in a hidden body (a generator in one stays with it)
    for sub in list(gast.walk(node)):
        if sub is node or id(sub) in inside or \
                not isinstance(sub, (gast.FunctionDef, gast.AsyncFunctionDef)):
            continue
        own = [n for n in sub.body]
        yields = False
        while own and not yields:
            item = own.pop()
            if isinstance(item, (gast.Yield, gast.YieldFrom)):
                yields = True
            elif not isinstance(item, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda,
                                       gast.ClassDef)):
                own.extend(gast.iter_child_nodes(item))
        if yields:
            marker = f"__hybridfw_generator_body_{len(hidden)}__"
            hidden[marker] = sub.body
            inside.update(id(n) for stmt in sub.body for n in gast.walk(stmt))
            sub.body = [gast.copy_location(gast.Expr(value=gast.Constant(marker, None)),
                                           sub.body[0])]
    return hidden


def _restore_generators(node, hidden: dict) -> None:
    """Put back the bodies :func:`_hide_generators` took out (the transformers may have copied
    the function definitions; the markers find them)."""
    if not hidden:
        return
    for sub in gast.walk(node):
        if isinstance(sub, (gast.FunctionDef, gast.AsyncFunctionDef)) and len(sub.body) == 1:
            stmt = sub.body[0]
            if isinstance(stmt, gast.Expr) and isinstance(stmt.value, gast.Constant) and \
                    stmt.value.value in hidden:
                sub.body = hidden[stmt.value.value]


def converted_source(fn) -> str:
    while isinstance(fn, functools.partial):  # (its function's source)
        fn = fn.func
    return convert_function(fn).source


def instantiate(fn, converted: ConvertedFunction, jst_module):
    """A function running ``converted``'s code with ``fn``'s globals, defaults and cells."""
    code = converted.code
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    cells[JST] = types.CellType(jst_module)
    closure = []
    for name in code.co_freevars:
        if name not in cells:
            raise ConversionError(f"to_static: converted code of {fn.__qualname__} reads a free "
                                  f"variable {name!r} the original does not have",
                                  converted.filename, converted.firstlineno)
        closure.append(cells[name])
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                             tuple(closure) or None)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__doc__ = fn.__doc__
    new.__module__ = fn.__module__
    new.__dict__.update(getattr(fn, "__dict__", {}))
    new.__hf_converted__ = True
    return new
