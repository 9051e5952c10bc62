"""How a converted callable's arguments become program inputs and its results come back:
flattening (tensors fed, everything else part of the signature), the names of arguments in
errors, the containers a call may change, and rebuilding the results' structure (see
:mod:`hybridfw.jit.static_function`).
"""
from __future__ import annotations

import copy
import dataclasses
import inspect
import types

import numpy as np

from ..converter.errors import ConversionError
from ..converter.runtime.python_builtins import DeferredString
from ..converter.runtime.tensor_array import TensorArray
from ..converter.runtime.undefined import Unmerged, is_undefined
from ..converter.transformers.base import is_generated
from ..dygraph.tensor import Tensor
from ..nn.modules.module import Module
from ..static import Program
from ..static.builder import require_defined
from ..static.codegen import operator_at
from ..static.executor import operator_error
from ..static.ir import Variable

__all__: list = []  # (used by hybridfw.jit.static_function)


# ---- arguments ----------------------------------------------------------------------------------
def _flatten(value, leaves: list):
    """The hashable structure of ``value`` with its tensors collected into ``leaves``."""
    if isinstance(value, Tensor):
        leaves.append(value)
        return "T"
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_flatten(v, leaves) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _flatten(v, leaves)) for k, v in value.items()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # (its tensors are inputs as a tuple's are; an unhashable dataclass would otherwise
        # key by identity: a new trace on every call, its tensors baked in as constants)
        return ("dataclass", type(value).__qualname__, id(type(value)),
                tuple((f.name, _flatten(getattr(value, f.name), leaves))
                      for f in dataclasses.fields(value)))
    if _tensor_holder(value):
        return ("attrs", type(value).__qualname__, id(type(value)),
                tuple((k, _flatten(v, leaves)) for k, v in vars(value).items()))
    if isinstance(value, float):
        # repr tells -0.0 from 0.0 (equal as keys, different programs: 1 / x) and matches
        # nan to nan (never equal as a key: a new trace on every call)
        return ("py", type(value).__name__, repr(value))
    if value is None or isinstance(value, (bool, int, str, bytes)):
        return ("py", type(value).__name__, value)
    if isinstance(value, np.ndarray):
        return ("ndarray", value.shape, str(value.dtype), value.tobytes())
    try:
        hash(value)
        return ("obj", type(value).__qualname__, value)
    except TypeError:
        return ("id", type(value).__qualname__, id(value))


def _holds_tensor(value, depth: int = 0) -> bool:
    if isinstance(value, (Tensor, Variable)):  # (Variable: the copy a trace is given)
        return True
    if depth < 2 and isinstance(value, (list, tuple)):
        return any(_holds_tensor(v, depth + 1) for v in value)
    if depth < 2 and isinstance(value, dict):
        return any(_holds_tensor(v, depth + 1) for v in value.values())
    return False


def _tensor_holder(value) -> bool:
    """A plain object (of a user class compared by identity, not a Module) whose attributes
    hold tensors (a graph of edges and features): its tensors are inputs and its plain
    attributes part of the key, as a dataclass's fields, instead of the object keying by
    identity with its tensors baked in as constants (stale once an attribute is set anew)."""
    cls = type(value)
    if cls.__hash__ is not object.__hash__ or cls.__eq__ is not object.__eq__ or \
            isinstance(value, (Module, type, types.FunctionType, types.MethodType)) or \
            dataclasses.is_dataclass(value):
        return False
    attributes = getattr(value, "__dict__", None)
    return bool(attributes) and any(_holds_tensor(v) for v in attributes.values())


def _parameter_names(function, bound: bool) -> list:
    """The names of ``function``'s parameters (``self`` left out of a ``bound`` method's); empty
    where the signature is unknown."""
    try:
        names = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []
    return names[1:] if bound and names else names


def _argument_of(function, i, args, kwargs, bound: bool) -> str:
    """How the user calls the ``i``-th tensor of a call's arguments: the parameter's name
    from ``function``'s signature (``'images'``), with the index or key inside a container
    (``'pair[1]'``); ``'input i'`` where the signature is unknown."""
    names = _parameter_names(function, bound)
    found = []

    def walk(value, path):
        if isinstance(value, Tensor):
            found.append(path)
        elif isinstance(value, (list, tuple)):
            for k, v in enumerate(value):
                walk(v, f"{path}[{k}]")
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{path}[{k!r}]")
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                walk(getattr(value, f.name), f"{path}.{f.name}")
        elif _tensor_holder(value):
            for k, v in vars(value).items():
                walk(v, f"{path}.{k}")
    for k, value in enumerate(args):
        walk(value, repr(names[k]) if k < len(names) else f"#{k}")
    for key, value in kwargs.items():
        walk(value, repr(key))
    return found[i] if i < len(found) else f"input {i}"


def _containers(function, args, kwargs, bound: bool) -> list:
    """``(how the user names it, the list or dict, its state)`` for each list and dict among a
    call's (rebuilt) arguments, to see afterwards which ones the function changed."""
    names = _parameter_names(function, bound)
    found = []

    def walk(value, path):
        if isinstance(value, (list, dict)):
            found.append((path, value, _state(value)))
            for k, v in (value.items() if isinstance(value, dict) else enumerate(value)):
                walk(v, f"{path}[{k!r}]")
        elif _tensor_holder(value):  # (rebuilt as a copy too: its attributes)
            found.append((path, value, _state(vars(value))))
            for k, v in vars(value).items():
                walk(v, f"{path}.{k}")
    for k, value in enumerate(args):
        walk(value, repr(names[k]) if k < len(names) else f"#{k}")
    for key, value in kwargs.items():
        walk(value, repr(key))
    return found


def _state(container):
    items = container.items() if isinstance(container, dict) else enumerate(container)
    return tuple((k, id(v)) for k, v in items)


def _changed(before, after, kind) -> str:
    """What changed between two :func:`_state` s of a list (``kind`` 'list') or dict."""
    old, new = dict(before), dict(after)
    if kind == "list" and len(old) != len(new):
        return f"its length goes from {len(old)} to {len(new)}"
    parts = []
    added = [k for k in new if k not in old]
    removed = [k for k in old if k not in new]
    replaced = [k for k in new if k in old and new[k] != old[k]]
    for label, keys in (("adds", added), ("removes", removed), ("sets", replaced)):
        if keys:
            parts.append(f"{label} {'items' if kind == 'list' else 'keys'} "
                         f"{', '.join(repr(k) for k in keys)}")
    return "; ".join(parts)


def _caller_level() -> int:
    """The ``stacklevel`` of a warning that names the first frame outside hybridfw."""
    import os
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = inspect.currentframe().f_back, 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _rebuild(value, it):
    if isinstance(value, Tensor):
        return next(it)
    if isinstance(value, (list, tuple)):
        items = [_rebuild(v, it) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return {k: _rebuild(v, it) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        rebuilt = copy.copy(value)
        for f in dataclasses.fields(value):  # (object.__setattr__: frozen ones too)
            object.__setattr__(rebuilt, f.name, _rebuild(getattr(value, f.name), it))
        return rebuilt
    if _tensor_holder(value):
        rebuilt = object.__new__(type(value))
        for k, v in vars(value).items():
            object.__setattr__(rebuilt, k, _rebuild(v, it))
        return rebuilt
    return value


# ---- outputs ------------------------------------------------------------------------------------
class _Outputs:
    """How to rebuild the function's result from fetched arrays."""

    def __init__(self, program: Program, result):
        self.fetch: list = []   # fetched variable names
        self.structure = self._walk(program, result)

    def _walk(self, program, value):
        if isinstance(value, Variable):
            if program.global_block().find_var(value.name) is None:
                from ..static.builder import _escaped
                raise ConversionError(_escaped("return", value.name, program))
            if value.name in program.stale:
                raise ConversionError(f"return: {program.stale[value.name]}")
            guard = program.maybe_undefined.get(value.name)
            if guard is not None:  # assigned on one path of an if only
                if not is_generated(guard[1]):  # return y: eager raises UnboundLocalError
                    require_defined(program, value.name)
                else:  # the function returned on one path only: None on the other, as eager
                    self.fetch += [value.name, guard[0]]
                    kind = "scalar" if value.name in program.python_scalars else "leaf"
                    return ("maybe", (kind, len(self.fetch) - 2), len(self.fetch) - 1)
            self.fetch.append(value.name)
            # x.item(), float(x), ...: a Python number, as the eager function returns
            return ("scalar" if value.name in program.python_scalars else "leaf",
                    len(self.fetch) - 1)
        if isinstance(value, Tensor):
            self.fetch.append(program.capture(value).name)
            return ("leaf", len(self.fetch) - 1)
        if isinstance(value, TensorArray):
            start = len(self.fetch)
            self.fetch.extend(b.name for b in value.buffers)
            return ("array", start, len(value.buffers), value.structure)
        if isinstance(value, (list, tuple)):
            return ("seq", type(value), tuple(self._walk(program, v) for v in value))
        if isinstance(value, dict):
            return ("dict", tuple((k, self._walk(program, v)) for k, v in value.items()))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = tuple((f.name, self._walk(program, getattr(value, f.name)))
                           for f in dataclasses.fields(value))
            return ("dataclass", copy.copy(value), fields)
        if is_undefined(value) or isinstance(value, Unmerged):
            value._fail()
        if isinstance(value, DeferredString):
            raise ConversionError(
                f"return: the string {value!r} formats a value the program computes (str(x), "
                "f'{x}'), which is known only when the program runs; print it inside the "
                "function, or return the tensor and format it outside")
        return ("const", value)

    def build(self, tensors):
        return _build_result(self.structure, tensors)


def _build_result(s, tensors):
    """The call's result from its structure (a module-level function: a nested recursive
    closure would be a reference cycle keeping ``tensors`` alive until the next gc)."""
    kind = s[0]
    if kind == "leaf":
        return tensors[s[1]]
    if kind == "scalar":
        return tensors[s[1]].item()
    if kind == "array":
        arrays = TensorArray(tensors[s[1]:s[1] + s[2]], s[3])
        return arrays.to_list(lambda t: t)
    if kind == "seq":
        items = [_build_result(c, tensors) for c in s[2]]
        return s[1](*items) if hasattr(s[1], "_fields") else s[1](items)
    if kind == "dict":
        return {k: _build_result(c, tensors) for k, c in s[1]}
    if kind == "dataclass":  # a copy of the traced instance, its fields set to the results
        out = copy.copy(s[1])
        for name, c in s[2]:
            object.__setattr__(out, name, _build_result(c, tensors))  # (frozen ones too)
        return out
    if kind == "maybe":  # (a value returned on some paths only: None on the others)
        return _build_result(s[1], tensors) if bool(tensors[s[2]]) else None
    return s[1]


def _at_operator(exc: Exception) -> Exception:
    """``exc``, raised while a program ran, naming the operator that raised it and the user's
    line that built it (as :meth:`hybridfw.static.Executor.run` does), keeping its type."""
    located = operator_at(exc.__traceback__)
    return exc if located is None else operator_error(exc, *located)
