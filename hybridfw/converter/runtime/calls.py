"""Calls in converted code: ``convert_call(f)`` returns what to call instead of ``f``.

- user functions (``functools.wraps`` wrappers included: the wrapper's own code, which calls
  the wrapped function converted), ``functools.partial`` objects of them, methods and
  ``hf.nn.Module`` subclasses defined outside hybridfw are converted (recursively, cached per
  code object), unless marked ``hf.jit.not_to_static``;
- builtins with tensor-aware forms (:mod:`.python_builtins`): ``print``, ``len``, ``range``,
  ``enumerate``, ``zip``, ``int``, ``float``, ``bool``, ``isinstance``, ``type`` (``hf.Tensor``
  for a static value);
- numpy functions applied to static values become Python-callback operators of the program
  (run on the real arrays each time it runs); ``x.numpy()`` of a static value is that value
  itself (a tensor of the program); ``x.item()``, ``x.tolist()``, ``float(x)``, ``int(x)`` and
  ``bool(x)`` give 0-d values standing for Python numbers (no gradient flows through them, as
  none flows through a number in eager code; to_static returns them as Python numbers);
- everything else (framework, library and builtin functions, classes) is called as it is.
"""
from __future__ import annotations

import dis
import functools
import inspect
import types

import numpy as np

from ...static.ir import Variable
from ..errors import ConversionError, UnsupportedConstructError, located
from .control_flow import is_static
from .python_builtins import _BUILTINS, _array_aware, _numel, _size

__all__ = ["MAX_RECURSION", "convert_call", "not_to_static"]

MAX_RECURSION = 64
_NOT_TO_STATIC = "__hf_not_to_static__"


def not_to_static(fn):
    """Leave ``fn`` as plain Python when converted code calls it."""
    setattr(fn, _NOT_TO_STATIC, True)
    return fn


def _library_module(module_name: str) -> bool:
    root = (module_name or "").split(".")[0]
    if root in ("hybridfw", "numpy", "builtins", "gast", "astunparse", "typing", "abc",
                "functools", "collections", "itertools", "math", "operator", "copy", "re",
                "os", "sys", "logging", "warnings", "inspect", "random", "time", "contextlib",
                "dataclasses", "enum", "json", "pathlib"):
        return True
    spec_path = getattr(__import__("sys").modules.get(root), "__file__", "") or ""
    return "site-packages" in spec_path or "dist-packages" in spec_path


def _user_function(fn) -> bool:
    # (a functools.wraps wrapper has the wrapped function's __module__: where its code is
    # defined is its globals' module; a library's wrapper, hf.no_grad's say, is called as it is)
    return isinstance(fn, types.FunctionType) and fn.__name__ != "<lambda>" and \
        not getattr(fn, _NOT_TO_STATIC, False) and \
        not getattr(fn, "__hf_converted__", False) and \
        not _library_module(getattr(fn, "__module__", "") or "") and \
        not _library_module(fn.__globals__.get("__name__", "") or "") and \
        not inspect.isgeneratorfunction(fn)


def _user_partial(fn) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return _user_function(fn)


_depth: dict = {}


def _converted(fn):
    from ..errors import is_converted_code
    from ..function import convert_function, instantiate
    from . import jst_module
    if isinstance(fn, functools.partial):  # the function converted, the bound arguments kept
        return functools.partial(_converted(fn.func), *fn.args, **fn.keywords)
    if is_converted_code(fn.__code__):
        return fn
    if fn.__name__ == "<lambda>":  # converted when its source tells it apart, else as it is
        try:
            converted = convert_function(fn)
        except ConversionError:
            return fn
    else:
        converted = convert_function(fn)
    new = instantiate(fn, converted, jst_module())

    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        key = fn.__code__
        depth = _depth.get(key, 0)
        if depth >= MAX_RECURSION:
            raise UnsupportedConstructError(
                f"recursion deeper than {MAX_RECURSION} calls of {fn.__qualname__} while "
                "tracing (recursion that ends on a tensor condition never ends while a "
                "program is built)", fn.__code__.co_filename, fn.__code__.co_firstlineno,
                hint="end the recursion on Python values, or write it as a loop")
        _depth[key] = depth + 1
        if traced_modules:
            traced_modules[-1][id(new)] = new
        try:
            return new(*args, **kwargs)
        finally:
            _depth[key] = depth
    return guarded


# what a trace in progress calls, by id: modules (their programs depend on their parameters and
# attributes: see StaticFunction._check_modules) and converted functions (on the globals they
# read: StaticFunction._check_globals); one dict per trace in progress
traced_modules: list = []


@functools.lru_cache(maxsize=None)
def global_names(code) -> tuple:
    """The global names ``code`` (and the code nested in it) reads but never assigns."""
    reads, writes = set(), set()
    stack = [code]
    while stack:
        c = stack.pop()
        for ins in dis.get_instructions(c):
            if ins.opname == "LOAD_GLOBAL":
                reads.add(ins.argval)
            elif ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
                writes.add(ins.argval)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return tuple(sorted(reads - writes))


def convert_call(fn):
    array_aware = _array_aware().get(id(fn))
    if array_aware is not None and array_aware[0] is fn:
        return array_aware[1]
    special = _BUILTINS.get(id(fn)) if fn.__class__ is types.BuiltinFunctionType or \
        isinstance(fn, type) else None
    if special is not None and special[0] is fn:
        return special[1]
    if isinstance(fn, types.MethodType):
        target = fn.__self__  # (a Variable's methods, item and numpy included, are its own)
        if target.__class__ is Variable and fn.__name__ in ("size", "numel") and \
                -1 in target.shape:  # dims known when the program runs: see convert_shape
            return (_size if fn.__name__ == "size" else _numel)(target)
        if _user_function(fn.__func__):
            if traced_modules and _plain_object(target):  # (its attributes are watched)
                traced_modules[-1][id(target)] = target
            return types.MethodType(_converted(fn.__func__), target)
        wrapped = _grad_mode_wrapped(fn.__func__)
        return fn if wrapped is None else types.MethodType(wrapped, target)
    if _user_function(fn) or (isinstance(fn, functools.partial) and _user_partial(fn)):
        return _converted(fn)
    wrapped = _grad_mode_wrapped(fn)
    if wrapped is not None:
        return wrapped
    if _is_numpy(fn):
        return _numpy_call(fn)
    module_cls = _module_class()
    if isinstance(fn, module_cls) and traced_modules:
        traced_modules[-1][id(fn)] = fn
    if isinstance(fn, module_cls) and not _library_module(type(fn).__module__):
        forward = type(fn).forward
        converted = None
        if _user_function(forward):
            converted = types.MethodType(_converted(forward), fn)
        else:
            wrapped = _grad_mode_wrapped(forward)
            if wrapped is not None:
                converted = types.MethodType(wrapped, fn)
        if converted is None:
            return fn
        if not fn._forward_pre_hooks and not fn._forward_hooks:
            return converted
        # its hooks around the converted forward, as Module.__call__ runs them
        return lambda *args, **kwargs: fn._call_hooked(converted, args, kwargs, _hook)
    if not isinstance(fn, (type, types.FunctionType, types.BuiltinFunctionType)) and \
            not isinstance(fn, module_cls) and _user_function(
                getattr(type(fn), "__call__", None)):
        # an instance of a user class with __call__ (not a Module): its __call__ converted
        if traced_modules:
            traced_modules[-1][id(fn)] = fn
        return types.MethodType(_converted(type(fn).__call__), fn)
    return fn


def _hook(hook):
    """A module hook, converted. A forward hook ``hook(module, args, output)`` that returns
    None on the paths a tensor decides (leaving the output as it is there) gives the output
    on those paths, decided when the program runs (Module's ``result is not None`` is
    Python's, which sees a value on every path while the program is built)."""
    converted = convert_call(hook)

    def call(module, *rest):
        result = converted(module, *rest)
        if len(rest) == 2 and is_static(result):
            from .control_flow import convert_ifelse
            from .logical import convert_is_none
            returned = convert_is_none(result, negate=True)
            if is_static(returned):
                result.block.program.maybe_undefined.pop(result.name, None)
                (result,) = convert_ifelse(returned, lambda r: (r,), lambda r: (rest[1],),
                                           (result,), ("<hook output>",))
        return result
    return call


def _plain_object(value) -> bool:
    """An instance of a user class that is not a Module (a config object, a helper): a trace
    bakes in its plain attribute values, so the converted function watches them."""
    cls = type(value)
    return hasattr(value, "__dict__") and not isinstance(
        value, (type, types.ModuleType, types.FunctionType, types.MethodType,
                _module_class())) and not _library_module(getattr(cls, "__module__", "") or "")


def _grad_mode_wrapped(fn):
    """For a user function decorated with a grad mode (``@hf.no_grad()``, whose wrapper is
    library code, called as it is): that function converted, run in that mode; else None."""
    mode = getattr(fn, "__hf_grad_mode__", None)
    inner = getattr(fn, "__wrapped__", None)
    if mode is None or inner is None or not _user_function(inner):
        return None
    converted = _converted(inner)

    @functools.wraps(inner)
    def in_mode(*args, **kwargs):
        with mode():
            return converted(*args, **kwargs)
    return in_mode


@functools.lru_cache(maxsize=1)
def _module_class():
    from ...nn import Module
    return Module


def _is_numpy(fn) -> bool:
    if isinstance(fn, np.ufunc):
        return True
    module = getattr(fn, "__module__", None) or ""
    return module == "numpy" or module.startswith("numpy.")


def _numpy_call(fn):
    def call(*args, **kwargs):
        static = [a for a in args if is_static(a)] + \
            [v for v in kwargs.values() if is_static(v)]
        if not static:
            return fn(*args, **kwargs)
        return numpy_callback(fn, args, kwargs)
    return call


def numpy_callback(fn, args, kwargs):
    """``fn(*args, **kwargs)`` on the run-time values of the static arguments, as a
    Python-callback operator; its outputs' shapes/dtypes come from calling ``fn`` on
    stand-in arrays now."""
    from ...static import py_func
    slots = [i for i, a in enumerate(args) if is_static(a)]
    keys = [k for k, v in kwargs.items() if is_static(v)]
    inputs = [args[i] for i in slots] + [kwargs[k] for k in keys]

    returns_tuple = []

    def run(*arrays):
        full = list(args)
        for i, arr in zip(slots, arrays):
            full[i] = arr
        kw = dict(kwargs)
        for k, arr in zip(keys, arrays[len(slots):]):
            kw[k] = arr
        out = fn(*full, **kw)
        returns_tuple[:] = [isinstance(out, tuple)]
        return tuple(np.asarray(o) for o in out) if isinstance(out, tuple) else \
            (np.asarray(out),)

    def probe(fill):
        arrays = [np.full(tuple(fill if s == -1 else s for s in v.shape), 1, v.dtype.np)
                  for v in inputs]
        return run(*arrays)
    try:
        first, second = probe(1), probe(2)
    except Exception as exc:  # noqa: BLE001 - report where it happened
        raise located(f"{getattr(fn, '__name__', fn)}() on the values of a static tensor: "
                      f"calling it on stand-in arrays to learn its output failed ({exc})",
                      type(exc) if isinstance(exc, (TypeError, ValueError)) else RuntimeError)
    specs = [(tuple(a if a == b else -1 for a, b in zip(x.shape, y.shape))
              if x.ndim == y.ndim else x.shape, x.dtype) for x, y in zip(first, second)]
    run.__qualname__ = f"numpy.{getattr(fn, '__name__', 'function')}"
    outs = py_func(run, inputs, specs)
    return tuple(outs) if returns_tuple[0] else outs[0]
