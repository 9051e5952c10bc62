"""``StaticFunction``: a converted callable with one traced program per input signature.

A call flattens its arguments into tensors (fed to the program) and everything else (part of
the signature: Python values must be equal for a program to be reused). The signature also
holds each tensor's shape (dims an :class:`InputSpec` marks ``None`` stay dynamic) and dtype,
whether gradients are wanted, and, for a Module, the train/eval mode of every submodule.

A miss traces: the converted function runs once with static Variables in place of the tensors,
inside a new :class:`~hybridfw.static.Program`; Python side effects in it (appending to an
outer list, printing a Python value) happen only then. When gradients are wanted, the backward
is built with :func:`hf.static.gradients`, the whole program is optimized, and split into a
forward program (run at call time) and a backward program (run by ``loss.backward()`` through
one eager autograd node). Otherwise the optimized forward program is all there is.
"""
from __future__ import annotations

import functools
import logging
import types
import warnings
import weakref
from typing import NamedTuple

import numpy as np

from ..converter.errors import ConversionError, InPlaceUpdateError
from ..converter.runtime.calls import _converted, _plain_object, global_names, traced_modules
from .. import dtypes as _dtypes
from ..dygraph.autograd import GradMode
from ..dygraph.tensor import Tensor
from ..nn.modules.module import Module, _plain, _structure_epoch, structure_fingerprint
from ..ops.registry import current_interpreter as _current_interpreter
from ..ops.registry import default_interpreter as _eager_interpreter
from ..memory.recompute import check_budget, recompute
from ..static import Executor, Program, data, gradients, optimize, program_guard
from ..static.executor import check_backend, gc_paused
from ..static.ir import format_origin
from ..static.partition import split_forward_backward
from ..static.passes import inplace as inplace_pass
from ..static.passes.analysis import walk_ops
from .eager_replay import RANDOM_OPS, ReplayTarget
from .errors import add_user_location, origin_provider
from .input_spec import InputSpec
from .arguments import (_Outputs, _argument_of, _at_operator, _caller_level, _changed,
                        _containers, _flatten, _parameter_names, _rebuild, _state)
from .concrete_program import _MISS, ConcreteProgram, _fast_caller
from .use_flags import _use_flags

__all__ = ["MAX_PROGRAMS", "CacheInfo", "ConcreteProgram", "StaticFunction"]

logger = logging.getLogger("hybridfw.jit")
MAX_PROGRAMS = 8


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    programs: int


# ---- the callable -------------------------------------------------------------------------------
class StaticFunction:
    """A function (or a Module's forward) converted by :func:`hf.jit.to_static`.

    Call it like the original. Attributes: ``dygraph_function`` (the original),
    ``code`` (the converted source), ``concrete_program`` (the program of the last call),
    ``get_program(*example_inputs)``, ``cache_info()``.
    """

    def __init__(self, function, input_spec=None, full_graph: bool = True, instance=None,
                 memory_budget=None, backend: str = "auto", tier_after: int | None = None,
                 weak_instance: bool = False):
        self.dygraph_function = function
        self.input_spec = list(input_spec) if input_spec is not None else None
        self._specs = spec_leaves(self.input_spec)  # one per tensor leaf of the arguments
        self.full_graph = full_graph
        self.memory_budget = None if memory_budget is None else check_budget(memory_budget)
        # the object this converts a method of; held weakly when this function is stored on it
        # (to_static(module): module.forward), so the two make no reference cycle and the
        # module's memory is freed when the user drops it, without gc.collect()
        self._instance = weakref.ref(instance) if weak_instance else instance
        self._weak_instance = weak_instance
        self.backend = check_backend(backend)
        self.tier_after = tier_after
        self._cache: dict = {}
        self._hits = 0
        self._misses = 0
        self._last = None
        self._last_key = None
        self._fallback = None
        self._fast = (None, None)  # (fast key of the last call, its ConcreteProgram)
        self._fast_call = None     # its generated caller (see _set_fast)
        self._fast_pending = False  # whether the caller runs the entry until its plan settles
        self._warned_count = False
        self._bound: dict = {}
        # the modules the programs were traced from, their fingerprint, and the structure epoch
        # it was last found current at (None: no module to watch); see _check_modules
        self._watched: dict = {}
        self._fingerprint = None
        self._epoch = None
        # (globals dict, name, value) of the plain global values the traces read (None: none)
        self._global_values = None
        # the plain attribute values of an instance that is not a Module (a converted method
        # of a helper object) when the programs were traced (None: nothing to check)
        self._instance_values = None
        # (id, (weakref to it, {attribute: value})) of the plain objects the traces read (a
        # config object, a helper whose method was converted), with their plain attributes
        self._object_values = None
        functools.update_wrapper(self, function)
        if isinstance(function, functools.partial):  # (it has no name of its own)
            inner = function
            while isinstance(inner, functools.partial):
                inner = inner.func
            self.__name__ = getattr(inner, "__name__", "partial")
            self.__qualname__ = f"partial({getattr(inner, '__qualname__', self.__name__)})"

    @property
    def instance(self):
        if not self._weak_instance:
            return self._instance
        instance = self._instance()
        if instance is None:
            raise ReferenceError(f"to_static({self.__qualname__}): the object whose method "
                                 "this converts no longer exists")
        return instance

    # -- descriptor: ``@to_static`` on a method ---------------------------------------------------
    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        d = getattr(instance, "__dict__", None)
        if d is not None:  # kept on the instance (holding it weakly): freed with it
            key = f"__hf_static_{id(self)}"
            bound = d.get(key)
            if bound is None:
                bound = d[key] = StaticFunction(
                    self.dygraph_function, self.input_spec, self.full_graph, instance,
                    self.memory_budget, self.backend, self.tier_after, weak_instance=True)
            return bound
        bound = self._bound.get(id(instance))
        if bound is None or bound.instance is not instance:
            bound = StaticFunction(self.dygraph_function, self.input_spec, self.full_graph,
                                   instance, self.memory_budget, self.backend, self.tier_after)
            self._bound[id(instance)] = bound
        return bound

    # -- introspection ----------------------------------------------------------------------------
    @property
    def code(self) -> str:
        from ..converter import converted_source
        return converted_source(self.dygraph_function)

    def cache_info(self) -> CacheInfo:
        """Hits, misses (traces) and the number of programs cached."""
        return CacheInfo(self._hits, self._misses, len(self._cache))

    def signatures(self) -> list:
        """The cached input signatures, readable: per tensor argument its shape (-1: dynamic)
        and dtype, whether gradients were wanted, the train/eval modes and the default dtype
        (:func:`hybridfw.get_default_dtype`) it was traced under."""
        out = []
        for structure, tensors, grad, mode, default_dtype in self._cache:
            out.append({"tensors": [(shape, dtype.name) for shape, dtype, _ in tensors],
                        "arguments": structure, "grad": grad,
                        "training": None if mode is None else mode[0],
                        "default_dtype": default_dtype.name})
        return out

    @property
    def concrete_program(self) -> ConcreteProgram | None:
        """The program of the most recent call (None before the first call)."""
        return self._last.program if self._last is not None else None

    def get_program(self, *example_inputs, **kwargs) -> Program:
        """The optimized program ``self(*example_inputs)`` runs (tracing it if needed)."""
        return self.get_concrete_program(*example_inputs, **kwargs).program

    def memory_plan(self, *example_inputs, **kwargs):
        """The memory plan of the program ``self(*example_inputs)`` runs (tracing it if
        needed; InputSpecs are accepted as inputs): a :class:`hybridfw.static.MemoryPlan` whose
        ``arena_bytes`` (the one buffer its intermediates share), ``lower_bound_bytes`` (the
        most bytes alive at once, what any reuse scheme needs) and ``naive_bytes`` (every
        intermediate in its own buffer) are the figures; ``str()`` prints them.

        For a call that trains (gradients wanted), this is the forward program's plan as the
        call runs it: the values the backward reads are fetched with the results (they stay
        on the heap until backward); its ``backward`` attribute is the backward program's plan
        (None when the call does not train, or when a saved value's size is known only at
        run time). The executor's forward and backward share one arena, the larger of the
        two."""
        from ..static.memory_plan import plan_arena, resolve_shapes
        inputs = tuple(_example(v) for v in example_inputs)
        kwargs = {k: _example(v) for k, v in kwargs.items()}
        entry = self.get_concrete_program(*inputs, **kwargs)
        leaves: list = []
        _flatten((inputs, kwargs), leaves)
        shapes = {name: tuple(t.shape) for name, t in zip(entry.feed_names, leaves)}
        resolved = resolve_shapes(entry.program, shapes)
        plan = plan_arena(entry.program, shapes, entry.run_fetch(), shapes=resolved)
        backward = entry.backward_program
        if backward is None:
            return plan
        metas = resolved[0]
        seeds = dict(zip(entry.seed_names, [entry.fetch[k] for k in entry.float_outputs]))
        feed_shapes = {n: metas[seeds.get(n, n)].shape for n in backward.feeds}
        if all(-1 not in s for s in feed_shapes.values()):
            plan.backward = plan_arena(backward, feed_shapes, entry.grad_names_fetch)
        return plan

    def get_concrete_program(self, *example_inputs, **kwargs) -> ConcreteProgram:
        inputs = tuple(_example(v) for v in example_inputs)  # as a call passes them
        key, leaves = self._signature(inputs, kwargs)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._trace(key, inputs, kwargs, leaves)
        return entry

    # -- calling ----------------------------------------------------------------------------------
    def _signature(self, args, kwargs):
        leaves: list = []
        structure = _flatten((args, kwargs), leaves)
        specs = self._specs
        if specs is not None and len(leaves) < len(specs):
            self._check_arrays(args, kwargs)
        shapes = []
        for i, t in enumerate(leaves):
            shape = t.shape
            if specs is not None and i < len(specs) and isinstance(specs[i], InputSpec):
                spec = specs[i]
                if not spec.matches(shape) or spec.dtype is not t.dtype:
                    raise self._spec_error(i, t, spec, args, kwargs)
                shape = spec.shape
            shapes.append((tuple(shape), t.dtype, t._rg))
        grad = GradMode.enabled
        mode = None
        if self.instance is not None and hasattr(self.instance, "modules"):
            mode = tuple(m.training for m in self.instance.modules())
        # the default dtype decides dtypes while tracing (hf.zeros(2), int_tensor * 1.5)
        return (structure, tuple(shapes), grad, mode, _dtypes.get_default_dtype()), leaves

    def _check_arrays(self, args, kwargs) -> None:
        """Fewer tensors than InputSpecs: a numpy array given for a tensor would become a
        constant of the program, and later tensors would pair with the wrong specs; refused,
        naming the argument."""
        names = _parameter_names(self.dygraph_function, self.instance is not None)
        found = [(repr(names[k]) if k < len(names) else str(k), v) for k, v in enumerate(args)]
        found += [(repr(k), v) for k, v in kwargs.items()]
        for where, value in found:
            if isinstance(value, np.ndarray):
                raise TypeError(
                    f"to_static({self.__qualname__}): argument {where} is a numpy array where "
                    f"the InputSpecs expect a tensor; pass a tensor (hf.from_numpy(a) or "
                    f"hf.tensor(a))")
        # a Python number in the place of a top-level InputSpec (positional arguments match
        # the specs one to one there) would become a constant of the program
        specs = self.input_spec or []
        for k, value in enumerate(args[:len(specs)]):
            if isinstance(specs[k], InputSpec) and isinstance(value, (int, float)) and \
                    not isinstance(value, bool):
                raise TypeError(
                    f"to_static({self.__qualname__}): argument {found[k][0]} is a Python "
                    f"{type(value).__name__} ({value!r}) where InputSpec {k} expects a tensor; "
                    f"pass a tensor (hf.tensor({value!r})), or leave the argument out of "
                    f"input_spec to make it a Python value of the program")

    def _spec_error(self, i, t, spec, args, kwargs) -> ValueError:
        """The error for tensor input ``i`` violating its InputSpec: it names the argument
        (as the function's signature calls it), the expected and the actual shape and dtype."""
        where = _argument_of(self.dygraph_function, i, args, kwargs, self.instance is not None)
        wanted = tuple(None if d == -1 else d for d in spec.shape)
        return ValueError(
            f"to_static({self.__qualname__}): argument {where} has shape {tuple(t.shape)} and "
            f"dtype {t.dtype.name}, but its InputSpec{f' {spec.name!r}' if spec.name else ''} "
            f"expects shape {wanted} (None: any size) and dtype {spec.dtype.name}")

    def _fast_key(self, args):
        """The last call's signature, when every argument is a tensor and no keyword is given:
        shapes, dtypes, requires_grad, grad mode, the train/eval modes and the default
        dtype."""
        tensors = tuple([(t.shape, t.dtype, t._rg) for t in args if t.__class__ is Tensor])
        if len(tensors) != len(args):
            return None
        mode = None
        if self.instance is not None and hasattr(self.instance, "modules"):
            mode = tuple(m.training for m in self.instance.modules())
        return (tensors, GradMode.enabled, mode, _dtypes.get_default_dtype())

    def __call__(self, *args, **kwargs):
        if _current_interpreter() is not _eager_interpreter():
            return self._inline(*args, **kwargs)
        if self._epoch is not None and self._epoch != _structure_epoch[0]:
            self._check_modules()
        if self._global_values is not None:
            self._check_globals()
        if self._instance_values is not None:
            self._check_instance()
        if self._object_values is not None:
            self._check_objects()
        call = self._fast_call
        if call is not None and not kwargs:
            try:
                result = call(args)
            except Exception as exc:  # (free on success) the operator and the user's line
                raise _at_operator(exc) from None
            if result is not _MISS:
                self._hits += 1  # (self._last is already the entry: see _set_fast)
                if self._fast_pending and self._fast[1]._hot_plan is not None:  # plan settled
                    self._set_fast(*self._fast)
                return result
        if self._fallback is not None:
            return self._eager(*args, **kwargs)
        fast = self._fast_key(args) if not kwargs else None
        key, leaves = self._signature(args, kwargs)
        entry = self._cache.get(key)
        if entry is None:
            try:
                entry = self._trace(key, args, kwargs, leaves)
            except (ConversionError, TypeError) as exc:
                # unsupported constructs, and (full_graph=False) Python that needs a concrete
                # value where the program has a static one: bool(t) in a comprehension's
                # condition, int(x.item()) as a slice bound, ...
                if self.full_graph:
                    raise
                self._fallback = exc
                self._set_fast(None, None)
                warnings.warn(f"to_static({self.__qualname__}): falling back to eager "
                              f"execution: {exc}", UserWarning, stacklevel=2)
                return self._eager(*args, **kwargs)
        else:
            self._hits += 1
        self._last = entry
        try:
            result = entry(leaves)
        except Exception as exc:
            raise _at_operator(exc) from None
        self._set_fast(fast, entry)
        return result

    def _check_modules(self) -> None:
        """Some module attribute was set since the last call: drop the programs if a module
        they were traced from now holds other parameters, buffers or submodules, or other
        plain attribute values (``self.scale = 2.0``), so the next call traces them anew (as
        eager would see the change)."""
        if self._fingerprint_now() == self._fingerprint:
            self._epoch = _structure_epoch[0]
            return
        self._retrace("a module's parameters, buffers, submodules or attributes changed")

    def _fingerprint_now(self):
        modules = [ref() for ref in self._watched.values()]
        if any(m is None for m in modules):
            return None  # (one is gone: the programs that read it are stale)
        return structure_fingerprint(modules)

    def _check_globals(self) -> None:
        """Drop the programs if a plain global value they were traced with (a number, string,
        None or tuple of them, read by the converted functions) was rebound since."""
        for namespace, name, value in self._global_values:
            now = namespace.get(name, _MISS)
            if now is not value and not (now.__class__ is value.__class__ and now == value):
                self._retrace(f"the global {name!r} changed from {value!r} to {now!r}")
                return

    def _check_instance(self) -> None:
        """Drop the programs if a plain attribute value (a number, string, None or tuple of
        them) of the object this converts a method of was set to another value since they
        were traced (``self.step += 1``): eager code reads it on every call."""
        attributes = getattr(self.instance, "__dict__", {})
        for name, value in self._instance_values.items():
            now = attributes.get(name, _MISS)
            if now is not value and not (now.__class__ is value.__class__ and now == value):
                self._retrace(f"the attribute {name!r} of the instance changed from {value!r} "
                              f"to {now!r}")
                return

    def _check_objects(self) -> None:
        """Drop the programs if a plain attribute value of an object the traces read (a
        global config object, a helper whose method they called) was set anew since."""
        for _, (ref, snapshot) in self._object_values:
            obj = ref()
            if obj is None:
                continue
            attributes = vars(obj)
            for name, value in snapshot.items():
                now = attributes.get(name, _MISS)
                if now is not value and not (now.__class__ is value.__class__ and now == value):
                    self._retrace(f"the attribute {name!r} of a {type(obj).__name__} object "
                                  f"it reads changed from {value!r} to {now!r}")
                    return

    def _retrace(self, reason: str) -> None:
        logger.info("to_static(%s): retracing because %s", self.__qualname__, reason)
        self._cache.clear()
        self._set_fast(None, None)
        self._watched, self._fingerprint, self._epoch = {}, None, None
        self._global_values = None
        self._instance_values = None
        self._object_values = None

    def _watch(self, recorded: dict) -> None:
        """After a trace: watch the modules it called (and the converted module itself) and
        the plain global values its converted functions read."""
        if isinstance(self.instance, Module):
            recorded[id(self.instance)] = self.instance
        elif self.instance is not None and self._instance_values is None:
            self._instance_values = {k: v for k, v in getattr(self.instance, "__dict__",
                                                              {}).items() if _plain(v)} or None
        if traced_modules:  # a trace within a trace: the outer one depends on them too
            traced_modules[-1].update(recorded)
        modules = {k: weakref.ref(v) for k, v in recorded.items() if isinstance(v, Module)}
        if modules:  # (held weakly: the module holds this function)
            self._watched.update(modules)
            self._fingerprint = self._fingerprint_now()
            self._epoch = _structure_epoch[0]
        values = {(id(f.__globals__), name): (f.__globals__, name, f.__globals__[name])
                  for f in recorded.values() if isinstance(f, types.FunctionType)
                  for name in global_names(f.__code__)
                  if name in f.__globals__ and _plain(f.__globals__[name])}
        if values:
            old = self._global_values or ()
            values.update({(id(g), n): (g, n, v) for g, n, v in old})
            self._global_values = tuple(values.values())
        # plain objects it read: the globals its functions name (a config object) and those
        # whose methods or __call__ it converted (a helper); their plain attribute values
        objects = [v for v in recorded.values() if _plain_object(v)] + [
            f.__globals__[name] for f in recorded.values() if isinstance(f, types.FunctionType)
            for name in global_names(f.__code__)
            if name in f.__globals__ and _plain_object(f.__globals__[name])]
        watched = dict(self._object_values or ())
        for obj in objects:
            if id(obj) not in watched or watched[id(obj)][0]() is not obj:
                snapshot = {k: v for k, v in vars(obj).items() if _plain(v)}
                try:  # (held weakly: an argument's object is not kept alive by the cache)
                    ref = weakref.ref(obj)
                except TypeError:
                    continue
                if snapshot:
                    watched[id(obj)] = (ref, snapshot)
        self._object_values = tuple(watched.items()) or None

    def _set_fast(self, fast, entry) -> None:
        """The next call with fast key ``fast`` (see :meth:`_fast_key`) runs ``entry`` through
        one generated function (:func:`_fast_caller`), made once per key and plan."""
        if fast is None:
            self._fast, self._fast_call, self._fast_pending = (None, None), None, False
            return
        plan = entry._hot_plan
        made = entry.fast_callers.get(fast)
        if made is None or made[1] is not plan:
            made = entry.fast_callers[fast] = (_fast_caller(fast, entry, self.instance), plan)
        self._fast, self._fast_call = (fast, entry), made[0]
        self._fast_pending = plan is None and entry.backward_program is None and \
            not entry.write_back

    def _inline(self, *args, **kwargs):
        """Called while a static program is being built (inside another converted function,
        or under ``hf.static.program_guard``): its converted code runs there, becoming part of
        that program, as a call of any user function does (a program of its own could not take
        the outer program's values)."""
        function = _converted(self.dygraph_function)
        if self.instance is not None:
            return function(self.instance, *args, **kwargs)
        return function(*args, **kwargs)

    def _eager(self, *args, **kwargs):
        if self.instance is not None:
            return self.dygraph_function(self.instance, *args, **kwargs)
        return self.dygraph_function(*args, **kwargs)

    def _log_retrace(self, key):
        previous = self._last_key
        self._last_key = key
        if previous is None:
            return
        parts = ("argument structure or Python values", "tensor shapes/dtypes",
                 "grad mode", "train/eval mode", "default dtype")
        changed = [p for p, a, b in zip(parts, previous, key) if a != b]
        detail = ""
        if previous[1] != key[1] and len(previous[1]) == len(key[1]):
            diffs = [f"tensor {i}: {a[0]} {a[1]} -> {b[0]} {b[1]}"
                     for i, (a, b) in enumerate(zip(previous[1], key[1])) if a != b]
            detail = " (" + "; ".join(diffs) + ")"
        elif previous[0] != key[0]:
            change = self._argument_change(previous[0], key[0])
            detail = f" ({change})" if change else ""
        logger.info("to_static(%s): retracing because the %s changed%s", self.__qualname__,
                    " and ".join(changed) or "signature", detail)
        if len(self._cache) >= MAX_PROGRAMS and not self._warned_count:
            self._warned_count = True
            warnings.warn(
                f"to_static({self.__qualname__}) has traced {len(self._cache) + 1} programs, one "
                f"per input signature (last change: {' and '.join(changed)}{detail}). If a "
                f"tensor dim varies between calls, pass input_spec=[hf.jit.InputSpec([None, "
                f"...])] to keep that dim dynamic in one program; Python arguments that vary "
                f"should become tensors.", UserWarning, stacklevel=4)

    def _argument_change(self, before, after) -> str:
        """Where two call structures (see :func:`_flatten` of ``(args, kwargs)``) first
        differ, as the user names it: ``argument 'temperature': 1.0 -> 1.1``."""
        names = _parameter_names(self.dygraph_function, self.instance is not None)

        def show(node):
            if isinstance(node, tuple) and node and node[0] == "py":
                return node[2] if node[1] == "float" else repr(node[2])
            if node == "T":
                return "a tensor"
            if isinstance(node, tuple) and node and node[0] in ("obj", "id"):
                return f"a {node[1]} object"
            return f"a {node[0]}" if isinstance(node, tuple) and node else repr(node)

        def walk(a, b, path):
            if a == b:
                return None
            if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) == 2 and \
                    a[0] == b[0] and a[0] in ("tuple", "list", "dict") and \
                    len(a[1]) == len(b[1]):
                for k, (x, y) in enumerate(zip(a[1], b[1])):
                    if a[0] == "dict":
                        if x[0] != y[0]:
                            return f"{path}: keys {[k for k, _ in a[1]]} -> {[k for k, _ in b[1]]}"
                        found = walk(x[1], y[1], f"{path}[{x[0]!r}]")
                    else:
                        found = walk(x, y, f"{path}[{k}]")
                    if found:
                        return found
            return f"{path}: {show(a)} -> {show(b)}"

        try:
            (_, (args_a, kwargs_a)), (_, (args_b, kwargs_b)) = before, after
        except (TypeError, ValueError):
            return ""
        if args_a != args_b and len(args_a[1]) == len(args_b[1]):
            for i, (x, y) in enumerate(zip(args_a[1], args_b[1])):
                if x != y:
                    name = repr(names[i]) if i < len(names) else f"#{i}"
                    return "argument " + walk(x, y, name)
        if kwargs_a != kwargs_b and [k for k, _ in kwargs_a[1]] == [k for k, _ in kwargs_b[1]]:
            for (k, x), (_, y) in zip(kwargs_a[1], kwargs_b[1]):
                if x != y:
                    return "argument " + walk(x, y, repr(k))
        return ""

    # -- tracing ----------------------------------------------------------------------------------
    def _converted(self):
        fn = _converted(self.dygraph_function)
        if self.instance is not None:
            return types.MethodType(fn, self.instance)
        return fn

    def _trace(self, key, args, kwargs, leaves) -> ConcreteProgram:
        with gc_paused():
            return self._trace_program(key, args, kwargs, leaves)

    def _trace_program(self, key, args, kwargs, leaves) -> ConcreteProgram:
        self._misses += 1
        self._log_retrace(key)
        program = Program()
        (_, shapes, grad, _, _) = key
        names = [self._feed_name(i) for i in range(len(leaves))]
        traced_modules.append({})
        try:
            with program_guard(program), origin_provider():
                feeds = [data(n, s, d) for n, (s, d, _) in zip(names, shapes)]
                # (x.requires_grad in the function: as eager, see Variable.requires_grad)
                program.grad_sources = {n for n, (_, _, rg) in zip(names, shapes) if rg}
                it = iter(feeds)
                static_args = _rebuild(list(args), it)
                static_kwargs = _rebuild(dict(kwargs), it)
                containers = _containers(self.dygraph_function, static_args, static_kwargs,
                                         self.instance is not None)
                result = self._converted()(*static_args, **static_kwargs)
                self._warn_changed_containers(containers)
                updates = self._argument_updates(program, feeds, names, leaves)
                outputs = _Outputs(program, result)
                entry = self._finish(program, outputs, names, leaves, grad, updates)
                if entry.backward_program is not None:
                    entry.replay_target = ReplayTarget(
                        self.dygraph_function, self.instance, args, kwargs, key[3],
                        any(op.type in RANDOM_OPS
                            for _, op in walk_ops(entry.program.global_block())),
                        [t for kind, t in entry.diff_inputs if kind == "param"])
        except Exception as exc:
            add_user_location(exc)
            raise
        finally:
            recorded = traced_modules.pop()
        self._watch(recorded)
        self._cache[key] = entry
        return entry

    def _warn_changed_containers(self, containers) -> None:
        """Warn of each list or dict argument the function changed (``cache['k'] = k``,
        ``outs.append(y)``): a converted function is given copies of them, so unlike eager
        code the change does not reach the caller (and it happens only when a call traces)."""
        for path, container, before in containers:
            holder = not isinstance(container, (list, dict))
            after = _state(vars(container) if holder else container)
            if after != before:
                kind = type(container).__name__
                change = _changed(before, after, "dict" if holder else kind)
                if holder:
                    change = change.replace(" keys ", " attributes ")
                warnings.warn(
                    f"to_static({self.__qualname__}): the function changes its argument {path} "
                    f"(a {kind}: {change}); a converted function works on a copy of the "
                    f"lists, dicts and tensor-holding objects it is given, so unlike eager code "
                    f"the caller's {kind} does not change; return the new values instead "
                    f"(return y, cache)", UserWarning, stacklevel=_caller_level())

    def _argument_updates(self, program, feeds, names, leaves) -> list:
        """``(argument index, name of its final value)`` for each tensor argument the function
        updates in place (``x.add_(1)``, ``x[0] = 5``): each call writes that value back into
        the caller's tensor, as eager code changes it. Refused as eager refuses it: an argument
        that requires grad (unless updated under ``hf.no_grad()``), or a result of a higher
        dtype category than the argument's."""
        updates = []
        for i, (var, name) in enumerate(zip(feeds, names)):
            if name in program.updated_in_blocks or var.name in program.updated_in_blocks:
                # (the update: an operator of a body reading a value updated there)
                updated = program.updated_in_blocks
                op = next((op for block, op in walk_ops(program.global_block())
                           if block.idx != 0 and op.origin and
                           any(isinstance(n, str) and n in updated for n in op.inputs)), None)
                raise ConversionError(
                    f"to_static({self.__qualname__}): tensor argument {i} is updated in place "
                    f"inside a converted loop (or branch) body; write the update as an assignment "
                    f"there (x = x + ...) and return x, or update a clone() of the argument"
                    f"{format_origin(op.origin) if op is not None else ''}")
        for i, (var, name) in enumerate(zip(feeds, names)):
            if var.name == name:
                continue
            producer = {out: op for _, op in walk_ops(program.global_block())
                        for out in op.outputs}
            op = producer.get(var.name)
            # (the first of its in-place updates, each reading the value the one before made,
            # is the one eager code refuses)
            while op is not None and op.inputs and isinstance(op.inputs[0], str) and \
                    op.inputs[0] != name and op.inputs[0] in producer:
                op = producer[op.inputs[0]]
            what = f" ({op.type})" if op is not None else ""
            where = format_origin(op.origin) if op is not None else ""
            tensor = leaves[i]
            if tensor._rg and var.name not in program.no_grad_values and (
                    op is None or op.type != "updated_under_no_grad"):
                raise InPlaceUpdateError(
                    f"to_static({self.__qualname__}): tensor argument {i} requires grad and is "
                    f"updated in place{what}; as in eager code, wrap the update in hf.no_grad() "
                    f"or update a clone() of it{where}")
            if var.dtype is not tensor.dtype and var.dtype.category > tensor.dtype.category:
                raise InPlaceUpdateError(
                    f"to_static({self.__qualname__}): tensor argument {i} is updated in place"
                    f"{what} with a result of type {var.dtype}, which can't be cast to its type "
                    f"{tensor.dtype}{where}")
            updates.append((i, var.name))
        return updates

    def _feed_name(self, i):
        spec = self._specs[i] if self._specs and i < len(self._specs) else None
        if isinstance(spec, InputSpec) and spec.name:
            return spec.name
        return f"input_{i}"

    def finish_tiering(self, timeout: float | None = None) -> bool:
        """Wait for the regions ``backend='auto'`` compiles in the background (see
        ``Executor(tier_background=)``); True when none is left compiling."""
        return all([entry.executor.finish_tiering(timeout) for entry in self._cache.values()])

    def compile_report(self) -> str:
        """Which regions of the last call's programs run compiled, and which operators stay
        interpreted and why (see ``backend``)."""
        entry = self._last
        if entry is None:
            return "no call yet"
        parts = []
        for label, program in (("forward", entry.program), ("backward", entry.backward_program)):
            if program is None:
                continue
            plans = [c for c in entry.executor._cache.values() if c.program is program]
            lowered = [c.lowering for c in plans if c.lowering is not None]
            if lowered:
                text = lowered[-1].report()
            elif self.backend == "interpreted":
                text = "interpreted (backend='interpreted')"
            else:
                from ..static.lowering import unavailable_reason
                reason = unavailable_reason()
                text = f"interpreted ({reason})" if reason else \
                    f"interpreted so far (backend={self.backend!r}: regions compile after " \
                    f"{entry.executor.tier_after} runs" + \
                    (", in the background)" if entry.executor.tier_background else ")")
            parts.append(f"{label} program: {text}")
        return "\n".join(parts)

    def _finish(self, program, outputs, names, leaves, grad, updates=()) -> ConcreteProgram:
        executor = Executor(backend=self.backend, tier_after=self.tier_after)
        block = program.global_block()
        fetch_vars = [block.var(n) for n in outputs.fetch]
        # (numbers, and values no gradient reaches -- made under no_grad, detached, from
        # inputs that need none -- get no gradient: as eager, they do not require grad)
        float_outputs = [k for k, v in enumerate(fetch_vars) if v.dtype.is_floating_point and
                         v.name not in program.python_scalars and v.requires_grad]
        diff = [("input", i) for i, t in enumerate(leaves) if t._rg] + \
            [("param", t) for t in program.params.values() if getattr(t, "_rg", False)]
        written = [name for _, name in updates]  # arguments' values written back
        if not (grad and float_outputs and diff):
            optimized = optimize(program, fetch=outputs.fetch + written, verify=False,
                                 copy=False)
            entry = ConcreteProgram(optimized, outputs, names, executor)
            entry.set_write_back(updates)
            return entry
        seeds = [data(f"grad_{fetch_vars[k].name}", fetch_vars[k].shape, fetch_vars[k].dtype)
                 for k in float_outputs]
        targets = [block.var(names[i]) if kind == "input" else i for kind, i in diff]
        flags = _use_flags(program, [names[i] if kind == "input" else
                                     program._captured.get(id(i)) for kind, i in diff],
                           [fetch_vars[k].name for k in float_outputs])
        flag_names = [f for f in flags if f is not None]
        grads = gradients([fetch_vars[k] for k in float_outputs], targets, seeds)
        dtypes = {fetch_vars[k].dtype for k in float_outputs}
        if len(dtypes) > 1:
            raise ConversionError(f"to_static: training through outputs of several float dtypes "
                                  f"({sorted(d.name for d in dtypes)}) is not supported; cast "
                                  "them to one dtype")
        grad_names = [g.name if g is not None else None for g in grads]
        present = [g for g in grad_names if g is not None]
        fetch = outputs.fetch + present + written + flag_names
        seed_names = [s.name for s in seeds]
        report = None
        checkpointed = getattr(program, "checkpointed", None)  # (hf.memory.checkpoint's)
        if self.memory_budget is None and not checkpointed:
            whole = optimize(program, fetch=fetch, verify=False, copy=False)
        else:
            # recompute after CSE (which would merge the clones into their originals) and
            # before the in-place pass (the clones add late readers of forward values)
            whole = optimize(program, fetch=fetch, disable=("inplace",), verify=False,
                             copy=False)
            shapes = {n: tuple(t.shape) for n, t in zip(names, leaves)}
            whole, report = recompute(whole, outputs.fetch + written + flag_names, present,
                                      seed_names, self.memory_budget, feed_shapes=shapes,
                                      checkpointed=None if self.memory_budget is not None
                                      else checkpointed)
            dynamic = {n: shapes[n] for n in names if -1 in block.var(n).shape}
            if dynamic:
                report.notes.append(
                    f"sizes are those of the call that traced the program (inputs {dynamic}); "
                    "the program serves every size of the dims the InputSpec leaves dynamic, "
                    "and the bytes it keeps grow with them")
            whole = inplace_pass.run(whole, fetch)
        forward, backward, saved = split_forward_backward(
            whole, outputs.fetch + written + flag_names, present, seed_names)
        entry = ConcreteProgram(forward, outputs, names, executor, backward)
        entry.use_flags = flags
        entry.set_write_back(updates)
        entry.recompute_report = report
        entry.saved_names = list(saved)
        entry.seed_names = [s.name for s in seeds]
        entry.grad_names = grad_names
        entry.grad_names_fetch = present
        entry.diff_inputs = diff
        entry.float_outputs = float_outputs
        return entry


def _example(value):
    """An argument standing for ``value``: zeros for an InputSpec (1 for its None dims), in
    nested tuples, lists and dicts too."""
    if isinstance(value, InputSpec):
        import hybridfw as hf
        return hf.zeros(tuple(1 if s == -1 else s for s in value.shape), dtype=value.dtype)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_example(v) for v in value)
    if isinstance(value, dict):
        return {k: _example(v) for k, v in value.items()}
    return value


def spec_leaves(specs) -> list | None:
    """``input_spec`` flattened as the arguments are (:func:`_flatten`): a tuple or list of
    InputSpecs stands for a tuple or list of tensors (an LSTM's ``(h_0, c_0)``)."""
    if specs is None:
        return None
    out: list = []

    def walk(value):
        if isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        else:
            out.append(value)
    walk(list(specs))
    return out
