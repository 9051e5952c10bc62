"""``hf.jit``: convert eager code to static programs (``to_static``), inspect them, and export
them (``save``/``load``).

Example::

    >>> import hybridfw as hf
    >>> @hf.jit.to_static
    ... def f(x):
    ...     if x.sum() > 0:
    ...         return x * 2
    ...     return -x
    >>> f(hf.tensor([1.0, 2.0])).tolist(), f(hf.tensor([-1.0, -2.0])).tolist()
    ([2.0, 4.0], [1.0, 2.0])
    >>> f.cache_info().misses
    1
"""
from __future__ import annotations

import functools
import types

from ..converter import not_to_static
from .input_spec import InputSpec
from .static_function import CacheInfo, ConcreteProgram, StaticFunction

__all__ = [
    "CacheInfo",
    "ConcreteProgram",
    "InputSpec",
    "StaticFunction",
    "TranslatedLayer",
    "get_code",
    "load",
    "not_to_static",
    "save",
    "to_static",
]


def to_static(function_or_module=None, input_spec=None, full_graph: bool = True, *,
              memory_budget=None, backend: str = "auto", tier_after: int | None = None):
    """Convert a function or an ``hf.nn.Module`` (its ``forward``) to run as static programs.

    Usable as ``@to_static``, ``@to_static(input_spec=[...])`` or ``to_static(model)`` (which
    converts ``model.forward`` in place and returns the model). A bound method
    (``to_static(model.forward)``) or an object with ``__call__`` converts that method, called on
    its object; a lambda is converted too (a ternary on a tensor in it becomes a ``cond``,
    ``x.shape[0]`` under an InputSpec ``None`` dim a run-time size), unless its line holds
    several lambdas of the same parameters: then it is traced as it is. See
    :class:`StaticFunction`.

    ``memory_budget`` (training only): ``None`` keeps every forward value the backward reads;
    ``'sqrt'`` or a number of bytes lets the backward recompute forward values instead
    (:mod:`hybridfw.memory.recompute`; the plan is
    ``get_concrete_program(*inputs).recompute_report``). A number of bytes bounds the forward
    values kept for the backward (not the recomputed values the backward then holds), sized
    for the input shapes of the call that traced the program: with an InputSpec dim left
    dynamic, a larger size at a later call keeps proportionally more.

    ``backend``: ``'interpreted'`` (the executor's plans only), ``'compiled'`` (the programs'
    lowerable regions compile with numba at the first call) or ``'auto'`` (they compile once a
    plan has run ``tier_after`` times, default ``$HYBRIDFW_TIER_AFTER`` or 20, so the first calls
    stay fast; numba works in a background thread meanwhile, unless
    ``$HYBRIDFW_TIER_BACKGROUND=0``, and ``StaticFunction.finish_tiering()`` waits for it);
    without numba both run interpreted. See :mod:`hybridfw.static.lowering` and
    ``StaticFunction.compile_report()``.
    """
    from ..static.executor import check_backend
    check_backend(backend)
    if memory_budget is not None:
        from ..memory.recompute import check_budget
        check_budget(memory_budget)
    if function_or_module is None:
        return lambda f: to_static(f, input_spec, full_graph, memory_budget=memory_budget,
                                   backend=backend, tier_after=tier_after)
    from ..nn import Module
    if isinstance(function_or_module, Module):
        module = function_or_module
        forward = type(module).forward
        if isinstance(forward, StaticFunction):
            return module
        object.__setattr__(module, "forward",
                           StaticFunction(forward, input_spec, full_graph, module,
                                          memory_budget, backend, tier_after,
                                          weak_instance=True))
        return module
    if isinstance(function_or_module, StaticFunction):
        return function_or_module
    if not callable(function_or_module):
        raise TypeError(f"to_static: expected a function or an hf.nn.Module, got "
                        f"{type(function_or_module).__name__}")
    function, instance = function_or_module, None
    if isinstance(function, types.MethodType):  # model.forward, obj.method: bound to its object
        function, instance = function.__func__, function.__self__
    elif not isinstance(function, (types.FunctionType, functools.partial, type)) and \
            isinstance(getattr(type(function), "__call__", None), types.FunctionType):
        function, instance = type(function).__call__, function  # an object with __call__
    return StaticFunction(function, input_spec, full_graph, instance,
                          memory_budget=memory_budget, backend=backend, tier_after=tier_after)


def get_code(function) -> str:
    """The converted source of ``function`` (a function, a StaticFunction or a Module)."""
    from ..converter import converted_source
    from ..nn import Module
    if isinstance(function, Module):
        forward = function.__dict__.get("forward", type(function).forward)
        function = forward
    if isinstance(function, StaticFunction):
        function = function.dygraph_function
    if isinstance(function, types.MethodType):
        function = function.__func__
    elif not isinstance(function, (types.FunctionType, functools.partial, type)) and \
            isinstance(getattr(type(function), "__call__", None), types.FunctionType):
        function = type(function).__call__
    return converted_source(function)


def __getattr__(name):
    if name in ("save", "load", "TranslatedLayer"):
        from . import serialization
        return getattr(serialization, name)
    raise AttributeError(f"module 'hybridfw.jit' has no attribute {name!r}")
