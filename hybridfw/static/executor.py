"""The executor: compiles a program once per feed signature into a generated function, then runs it.

Compiling resolves every shape for the feed shapes, plans the arena
(:func:`~hybridfw.static.memory_plan.plan_arena`), takes it from the executor's shared one
(grown if needed, once), and generates one Python
function (:mod:`~hybridfw.static.codegen`) whose lines call the kernels directly: planned values
are written into their arena views through the kernels' ``out=`` (ops without ``out=`` compute a
fresh result that is copied into the view), values on the heap are dropped after their last use.
Running costs one call of that function: no dictionary lookups, inference or validation per op.

Operators run in one serial order (one thread, one CUDA stream), which is what keeps the arena
plan valid: a region is reused only after every operator reading its previous value has run. For
the same reason the plans of one executor, which share one arena (:class:`ArenaPool`: a
to_static program's forward and backward need the larger of their arenas, not both), must not
run at the same time (from two threads). The
one exception, on CPU with ``hf.set_num_interop_threads`` >= 2 (the default on two cores or
more): large matrix products off the critical path run on a worker thread
(:mod:`~hybridfw.static.streams`), launched at their place in the order and waited for where
their result is first read; their operands are kept live until then.

One block becomes one function in :mod:`~hybridfw.static.block_compiler` (re-exported here:
:data:`OP_COMPILERS`, :func:`compile_block`, :class:`Plan`). Control-flow operators (``cond``,
``while``) are compiled by the functions in :data:`OP_COMPILERS`, which the control-flow module
fills: ``compiler(op, block, slots, xp)``
returns ``step(env)``, where ``env`` is a list indexed by ``slots`` (name -> index) holding every
value the step reads and, after it ran, the values it wrote. Compilers compile their bodies with
:func:`compile_block`. Values they produce live on the heap.

Errors: an exception an operator raises while the program runs comes out of
:meth:`Executor.run` with its own type and a message naming the operator and, when it has one,
its origin (the user's line that built it). The operator is found from the traceback's line in
the generated code, after the fact, so running costs nothing more.

Debugging: ``Executor(debug_poison=True)`` (or the environment variable
``HYBRIDFW_POISON_ARENA=1``) fills each arena region with 0xFF bytes (NaN in every float dtype)
before the run and as soon as its value is dead, so a read after free shows up as NaN.
``Executor().compile(...).source`` is the generated code.
"""
from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import os
import threading
import weakref

import numpy as np

from ..backend import Storage, array_device
from ..backend import device as as_device
from ..dygraph.tensor import Tensor, wrap_array
from ..ops.registry import all_ops
from .codegen import FunctionSource, operator_at, runtime_helpers
from .ir import Program, Variable, format_origin
from .liveness import analyze_block
from .loop_stack import LoopStack
from .memory_plan import DEFAULT_ALIGNMENT, MemoryPlan, plan_arena, resolve_shapes
from . import allocator, streams
from .block_compiler import (OP_COMPILERS, POISON_ENV_VAR, _POISON_BYTE, Plan, _BlockEmitter,
                             _count, _region_index, compile_block)

__all__ = [
    "OP_COMPILERS",
    "POISON_ENV_VAR",
    "CompiledProgram",
    "Executor",
    "Plan",
    "compile_block",
]

class CompiledProgram:
    """A program compiled for one feed signature: call it with the feed arrays (in
    ``program.feeds`` order) to get the fetched arrays, each owning its memory.

    Attributes: ``source`` (the generated code), ``memory`` (the :class:`MemoryPlan`), ``arena``
    (the one buffer all planned values live in; ``hf.memory`` counts it while the plan is cached,
    through ``storage``), ``fetch_names``.
    """

    __slots__ = ("_storage", "arena", "asyncs", "cell", "donated", "fetch_names", "function",
                 "lowering", "memory", "namespace", "pool", "program", "runs", "source", "views",
                 "__weakref__")

    @property
    def storage(self) -> Storage:
        """What ``hf.memory`` counts for the arena (the shared one's, in an :class:`ArenaPool`)."""
        return self._storage if self.pool is None else self.pool.storage

    def rebind(self, arena) -> None:
        """Move the plan's arena views into ``arena`` (at least as large): the names its
        generated code reads them by are rebound, nothing is compiled again."""
        namespace = self.namespace
        for name, offset, nbytes, dtype, shape in self.views:
            view = arena[offset:offset + nbytes]
            namespace[name] = view if dtype is None else view.view(dtype).reshape(shape)
        namespace["_arena"] = self.cell[0] = self.arena = arena

    def __call__(self, arrays):
        """The fetched arrays; the plan of a program with donated inputs (``function(list)``)
        empties ``arrays`` and drops each donated input after its last use."""
        if self.donated:
            return self.function(arrays)
        return self.function(*arrays)

    def __repr__(self) -> str:
        return f"CompiledProgram({len(self.program.global_block().ops)} ops; " \
               f"{self.memory.summary()})"


class ArenaPool:
    """The one arena the plans of an :class:`Executor` share on one device: they run one at a
    time, so a to_static program's forward and backward plans (and the plans of other batch
    shapes) need the largest of their arenas, not the sum. A plan needing more than the arena
    holds grows it: a larger one is allocated and every plan using the old one moves its views
    there (:meth:`CompiledProgram.rebind`); the old one is freed. ``hf.memory`` counts the arena
    once (``storage``) while a plan using it is alive (plans and their functions hold the pool;
    the executor only a weak reference).

    Growing happens only on the thread that runs the plans (in ``Executor.run``'s lookup, never
    while one of them runs); a background compilation (tiering) that does not fit takes a
    private arena instead."""

    __slots__ = ("array", "lock", "plans", "storage", "xp", "__weakref__")

    def __init__(self, xp):
        self.xp = xp
        self.array = self.storage = None
        self.plans = weakref.WeakSet()
        self.lock = threading.Lock()

    def take(self, nbytes: int, grow: bool = True):
        """The shared arena, grown to ``nbytes`` if needed (None: too small and ``grow`` off)."""
        with self.lock:
            if self.array is not None and self.array.nbytes >= nbytes:
                return self.array
            if not grow:
                return None
            array = self.xp.empty(nbytes, dtype=np.uint8)
            for plan in list(self.plans):
                plan.rebind(array)
            self.array, self.storage = array, None  # (the old arena's storage goes first)
            self.storage = Storage(array.nbytes, array_device(array))
            return array

    def join(self, plan: CompiledProgram) -> None:
        """Register ``plan`` (built on the arena :meth:`take` gave) to follow the arena."""
        with self.lock:
            if plan.arena is not self.array:  # grown meanwhile (a background compilation)
                plan.rebind(self.array)
            self.plans.add(plan)


def _fetch_needs_copy(memory: MemoryPlan, name: str) -> bool:
    """Whether a fetched value may share memory with the arena, an input or a parameter."""
    root = memory.root(name)
    return root in memory.offsets or memory.heap.get(root) in (
        "input", "parameter", "control-flow output")


@contextlib.contextmanager
def gc_paused():
    """Python's cyclic garbage collector paused while a program is traced, optimized or
    planned (to_static's trace, :meth:`Executor._compile`). That makes many objects, most of
    them kept (the program, its plan), and each young-generation pass over them promotes them
    a step towards a full collection, which with a large heap (PyTorch imported: ~0.3 s)
    landed inside about one first call in two. Paused, the same objects are looked at once,
    afterwards: pausing to_static's trace alone took 8 first calls of W4 from 441 / 40 / 3
    collections (generations 0 / 1 / 2) to 51 / 5 / 0, and 4.0 s to 2.9 s. The pause is
    process-wide (as ``gc.disable`` is) and nests; a collector the caller disabled stays
    disabled."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _compile_program(program: Program, feed_shapes: dict, fetch_names, xp, *, poison: bool,
                     copy_into_arena: bool, lower: bool = False, pool: ArenaPool | None = None,
                     grow: bool = True) -> CompiledProgram:
    block = program.global_block()
    registry = all_ops()
    heap = []
    if not copy_into_arena:
        heap = [op.outputs[0] for op in block.ops
                if op.type in registry and not registry[op.type].supports_out]
    alignment = DEFAULT_ALIGNMENT if xp is np else 256  # cudaMalloc's own alignment on GPU
    shapes = resolve_shapes(program, feed_shapes)
    lowered = None
    if lower and xp is np:
        from .lowering import lower_program
        lowered = lower_program(program, shapes[0], fetch_names)
        if lowered is not None and lowered.regions:
            # a region returns new arrays and materializes nothing inside it: its values take
            # no arena space (an output copied into the arena is one more pass over it)
            heap = heap + [n for region in lowered.regions for op in region.ops
                           for n in op.outputs]
    asyncs, keep = {}, {}
    if xp is np:
        allocator.tune()  # the arrays each run allocates: no page faults run after run
        starts, inside, _ = _region_index(lowered)
        region_of = {k: r.start for r in starts.values() for k in range(r.start, r.stop)}
        asyncs = streams.plan_async(block, *shapes, analyze_block(block, live_out=fetch_names),
                                    inside, region_of)
        for i, anchor in asyncs.items():  # their operands stay live until they are waited for
            for name in block.ops[i].input_names():
                keep[name] = max(keep.get(name, anchor), anchor)
    memory = plan_arena(program, feed_shapes, fetch_names, heap=heap, alignment=alignment,
                        keep_alive=keep, shapes=shapes)
    arena = None if pool is None else pool.take(memory.arena_bytes, grow)
    if arena is None:  # a private arena
        pool = None
        arena = xp.empty(memory.arena_bytes, dtype=np.uint8)

    fs = FunctionSource("run_plan", xp)
    cell = [arena]
    fs.namespace.update(runtime_helpers(xp, cell))
    fs.namespace["_arena"] = arena
    fs.namespace["_pool"] = pool  # (what its functions hold keeps the shared arena counted)
    buffers, poison_after, views = {}, {}, []
    for name, offset in memory.offsets.items():
        meta = memory.metas[name]
        nbytes = memory.nbytes(name)
        view = arena[offset:offset + nbytes].view(meta.dtype.np).reshape(meta.shape)
        buffers[name] = fs.const(view, f"buf_{name}")
        views.append((buffers[name], offset, nbytes, meta.dtype.np, meta.shape))
    if poison:
        for buf, end in memory.buffer_end.items():
            offset = memory.offsets[buf]
            nbytes = memory.nbytes(buf)
            region = fs.const(arena[offset:offset + nbytes], f"free_{buf}")
            views.append((region, offset, nbytes, None, None))
            poison_after.setdefault(end, []).append(region)

    slots: dict = {}
    for name in list(program.params) + list(program.feeds) + list(block.vars):
        slots.setdefault(name, len(slots))
    donated = ()
    if program.donated:
        # the feed arrays come in a list the plan empties: nothing but its locals then holds
        # them (a call's positional arguments stay referenced by the caller until it returns)
        fs.params = ["_inputs"]
        idents = [fs.ident(n) for n in program.feeds]
        fs.line(f"{', '.join(idents)}{',' if len(idents) == 1 else ''} = _inputs")
        fs.line("_inputs.clear()")
        donated = [n for n in program.feeds if n in program.donated]
    else:
        fs.params = [fs.ident(n) for n in program.feeds]
    used = memory.liveness.last_use
    for name in program.params:
        if name in used:
            fs.line(f"{fs.ident(name)} = {fs.const(program.params[name], f'tensor_{name}')}._data")
    if poison:
        fs.line(f"_arena.fill({_POISON_BYTE})")
    env_line = len(fs.lines)
    emitter = _BlockEmitter(fs, block, slots, memory.liveness, memory.metas, memory.op_infos,
                            memory, buffers, poison_after)
    emitter.lowered = lowered
    emitter.asyncs = asyncs
    emitter.donated = donated
    emitter.emit(lowered)
    if emitter.uses_env:
        fs.insert(env_line, f"_env = [None] * {len(slots)}")
    fresh = set() if lowered is None else {n for r in lowered.regions for n in r.fresh}
    results = [fs.ident(n) + (".copy()" if (_fetch_needs_copy(memory, n) and n not in fresh) or
                              n in fetch_names[:k] else "")
               for k, n in enumerate(fetch_names)]
    fs.line(f"return ({', '.join(results)}{',' if len(results) == 1 else ''})")
    compiled = CompiledProgram()
    compiled.function, compiled.source = fs.build(
        f"{_count(block.ops, 'operator')}; {memory.summary()}")
    compiled.program = program
    compiled.memory = memory
    compiled.arena = arena
    compiled.namespace = fs.namespace
    compiled.views = views
    compiled.cell = cell
    compiled.pool = pool
    # hf.memory counts a private arena for as long as the compiled plan is cached, a shared one
    # for as long as a plan using it is
    compiled._storage = Storage(arena.nbytes, array_device(arena)) if pool is None else None
    compiled.fetch_names = tuple(fetch_names)
    compiled.lowering = lowered
    compiled.asyncs = asyncs
    compiled.runs = 0
    compiled.donated = bool(program.donated)
    if pool is not None:
        pool.join(compiled)
    return compiled


class Executor:
    """Runs static programs: ``Executor().run(program, feed={...}, fetch_list=[...])``.

    Compiles once per (program, feed shapes and dtypes, fetch list) and reuses the compiled
    plan; returns a list of Tensors (numpy arrays with ``return_numpy=True``), which never share
    memory with the arena.

    Args:
        place: the device to run on (default: the program's).
        debug_poison: fill dead arena regions with NaN bytes (default: the environment variable
            ``HYBRIDFW_POISON_ARENA``).
        copy_into_arena: ops without ``out=`` copy their result into its arena view (True: all
            intermediates live in the planned arena), or keep it on the heap, dropped after its
            last use (False: no copy, but fresh allocations). On the benchmark models the two
            are within about 5% of each other, either way round.
        max_plans: how many compiled plans (each with its arena) to keep; the least recently
            compiled is dropped first.
        backend: ``'interpreted'`` (the default: generated Python calling the kernels),
            ``'compiled'`` (runs of lowerable operators become numba-compiled regions, see
            :mod:`hybridfw.static.lowering`, when the plan is made) or ``'auto'`` (a plan is
            remade with compiled regions once it has run ``tier_after`` times). Without numba,
            both run interpreted. ``compile(...).lowering`` holds the regions and the report.
        tier_after: runs before ``'auto'`` compiles (default ``$HYBRIDFW_TIER_AFTER`` or 20).
        tier_background: ``'auto'`` compiles in a background thread while the interpreted plan
            keeps running, and switches to the compiled plan once it is ready (True, the
            default unless ``$HYBRIDFW_TIER_BACKGROUND=0``: no call waits seconds for numba);
            False compiles within the run that reaches ``tier_after``.
            :meth:`finish_tiering` waits for the compilations in flight.

    Example::

        >>> import hybridfw as hf
        >>> prog = hf.static.Program()
        >>> with hf.static.program_guard(prog):
        ...     x = hf.static.data("x", [None, 3])
        ...     y = (x * 2.0).relu().sum(dim=1)
        >>> exe = hf.static.Executor()
        >>> exe.run(prog, feed={"x": hf.ones(2, 3)}, fetch_list=[y])[0].tolist()
        [6.0, 6.0]
        >>> print(exe.compile(prog, feed={"x": hf.ones(2, 3)}, fetch_list=[y]).source)
        ... # doctest: +SKIP
    """

    def __init__(self, place=None, *, debug_poison: bool | None = None,
                 copy_into_arena: bool = True, max_plans: int = 32,
                 backend: str = "interpreted", tier_after: int | None = None,
                 tier_background: bool | None = None):
        self.device = as_device(place) if place is not None else None
        if debug_poison is None:
            debug_poison = os.environ.get(POISON_ENV_VAR, "").lower() in ("1", "true", "yes")
        self.debug_poison = bool(debug_poison)
        self.copy_into_arena = bool(copy_into_arena)
        self.max_plans = max(1, int(max_plans))
        self._cache: dict = {}
        self.backend = check_backend(backend)
        self.tier_after = tier_after_default() if tier_after is None else max(0, int(tier_after))
        if tier_background is None:
            tier_background = os.environ.get(TIER_BACKGROUND_ENV_VAR, "1").strip().lower() \
                not in ("0", "false", "no", "off")
        self.tier_background = bool(tier_background)
        self._tiering: list = []  # background compilations in flight (threads)
        self._pools = weakref.WeakValueDictionary()  # array module -> ArenaPool of its plans

    def finish_tiering(self, timeout: float | None = None) -> bool:
        """Wait for the background compilations of ``backend='auto'`` (each at most
        ``timeout`` seconds); True when none is left running."""
        for thread in list(self._tiering):
            thread.join(timeout)
        self._tiering = [t for t in self._tiering if t.is_alive()]
        return not self._tiering

    def clear_cache(self) -> None:
        """Forget every compiled plan (needed only after editing a program in place)."""
        self._cache.clear()

    def _arrays(self, program: Program, feed: dict, xp) -> list:
        arrays = []
        for name in program.feeds:
            value = feed[name]
            arr = value._data if isinstance(value, Tensor) else value
            if arr.__class__ is not xp.ndarray and arr.__class__ is not LoopStack:
                try:  # (a loop's stack token stays the host array it is)
                    arr = xp.asarray(arr)
                except ValueError as exc:  # ragged nested lists
                    raise ValueError(f"Executor.run: the feed for input {name!r} is not an "
                                     f"array of shape {program.global_block().vars[name].shape}"
                                     f": {exc}") from None
                if isinstance(value, (list, tuple, int, float, bool)):
                    # Python data has no dtype of its own: it takes the input's, where that
                    # loses nothing (ints into floats, floats into narrower floats)
                    want = program.global_block().vars[name].dtype.np
                    if arr.dtype != want and (np.can_cast(arr.dtype, want, "same_kind") or
                                              (arr.dtype.kind in "iub" and want.kind == "f")):
                        arr = arr.astype(want)
            arrays.append(arr)
        return arrays

    def _validate(self, program: Program, feed: dict, arrays) -> None:
        block = program.global_block()
        missing = [n for n in program.feeds if n not in feed]
        if missing:
            raise ValueError(f"Executor.run: missing feed for input(s) {missing}")
        for name in feed:
            if name not in program.feeds:
                raise ValueError(f"Executor.run: {name!r} is not an input of the program "
                                 f"(inputs: {program.feeds})")
        for name, arr in zip(program.feeds, arrays):
            var = block.vars[name]
            if arr.dtype != var.dtype.np:
                raise TypeError(f"Executor.run: input {name!r} expects dtype {var.dtype}, got "
                                f"{arr.dtype}")
            if len(arr.shape) != len(var.shape) or any(
                    s != -1 and s != a for s, a in zip(var.shape, arr.shape)):
                raise ValueError(f"Executor.run: input {name!r} expects shape {var.shape}, got "
                                 f"{tuple(arr.shape)}")

    def _lookup(self, program: Program, feed, fetch_list, count: bool = True):
        if not isinstance(program, Program):
            raise TypeError(f"Executor.run: expected a hf.static.Program, got "
                            f"{type(program).__name__}")
        if feed is None:
            feed = {}
        elif not isinstance(feed, dict):
            raise TypeError(f"Executor.run: feed must be a dict of input name -> array or "
                            f"Tensor, got {type(feed).__name__}")
        elif not all(k.__class__ is str for k in feed):  # the inputs' Variables as keys
            feed = _feed_by_name(program, feed)
        fetch_names = _fetch_names(program, fetch_list)
        xp = (self.device or program.device).xp
        try:
            arrays = self._arrays(program, feed, xp)
        except KeyError:
            arrays = None
        ops = program.global_block().ops
        if arrays is None or len(feed) != len(arrays):
            self._validate(program, feed, arrays or [])
        # a program edited in place (a pass, more ops) gets a new plan: the key holds its size,
        # its last operator and its in-place pairs besides the feed signature
        key = (id(program), len(ops), id(ops[-1]) if ops else 0,
               len(getattr(program, "inplace", None) or ()), fetch_names,
               tuple([(a.shape, a.dtype) for a in arrays]))
        compiled = self._cache.get(key)
        if compiled is None or compiled.program is not program:
            self._validate(program, feed, arrays)
            block = program.global_block()
            for name in fetch_names:
                if name not in block.vars:
                    raise KeyError(f"Executor.run: fetch target {name!r} is not a variable of "
                                   "the program's global block")
            feed_shapes = {n: a.shape for n, a in zip(program.feeds, arrays)}
            compiled = self._compile(program, feed_shapes, fetch_names, xp,
                                     self.backend == "compiled" or
                                     (self.backend == "auto" and self.tier_after == 0))
            self._cache[key] = compiled
            while len(self._cache) > self.max_plans:
                del self._cache[next(iter(self._cache))]
        elif count and compiled.runs >= 0 and self.backend == "auto":
            compiled.runs += 1
            if compiled.runs >= self.tier_after:  # tiering: hot enough to compile its regions
                feed_shapes = {n: a.shape for n, a in zip(program.feeds, arrays)}
                compiled = self._tier_up(key, program, feed_shapes, fetch_names, xp, compiled)
        return compiled, arrays

    def _tier_up(self, key, program, feed_shapes, fetch_names, xp, interpreted):
        """The plan with compiled regions replacing ``interpreted`` under ``key``: made now, or
        (``tier_background``) by a thread while ``interpreted`` keeps running; either way
        tried once."""
        interpreted.runs = -1
        if not self.tier_background or not lowering_available():
            compiled = self._compile(program, feed_shapes, fetch_names, xp, True, interpreted)
            self._cache[key] = compiled
            return compiled

        def work():
            compiled = self._compile(program, feed_shapes, fetch_names, xp, True, interpreted,
                                     grow=False)
            if self._cache.get(key) is interpreted:  # not dropped or replaced meanwhile
                self._cache[key] = compiled
        thread = threading.Thread(target=work, name="hybridfw-tiering", daemon=True)
        self._tiering = [t for t in self._tiering if t.is_alive()] + [thread]
        _register_tiering(thread)
        thread.start()
        return interpreted

    def _pool(self, xp) -> ArenaPool:
        pool = self._pools.get(xp)
        if pool is None:
            pool = self._pools[xp] = ArenaPool(xp)
        return pool

    def _compile(self, program, feed_shapes, fetch_names, xp, lower: bool, interpreted=None,
                 grow: bool = True):
        """A plan, with compiled regions when ``lower`` and possible; ``interpreted`` (the plan
        it replaces) is kept when no region compiles. A plan that tried holds ``runs == -1``.
        ``grow``: whether the shared arena may grow (only on the thread running the plans)."""
        options = dict(poison=self.debug_poison, copy_into_arena=self.copy_into_arena,
                       pool=self._pool(xp), grow=grow)
        if lower and not lowering_available():
            lower = False
        if not lower:
            if interpreted is not None:
                interpreted.runs = -1
                return interpreted
            with gc_paused():  # (not around numba's compilation: seconds of its own garbage)
                return _compile_program(program, feed_shapes, fetch_names, xp, **options)
        try:
            compiled = _compile_program(program, feed_shapes, fetch_names, xp, lower=True,
                                        **options)
        except Exception as exc:  # noqa: BLE001 - a lowering bug must not break the program
            _lowering_logger.warning("hybridfw: compiling regions failed (%s: %s); the program "
                                     "runs on the interpreter", type(exc).__name__, exc)
            compiled = interpreted or _compile_program(program, feed_shapes, fetch_names, xp,
                                                       **options)
        else:
            if interpreted is not None and not (compiled.lowering and
                                                compiled.lowering.regions):
                interpreted.lowering = compiled.lowering  # for the report
                compiled = interpreted
        compiled.runs = -1
        return compiled

    def compile(self, program: Program, feed: dict | None = None,
                fetch_list=None) -> CompiledProgram:
        """The compiled plan ``run`` uses for these feeds and fetch list (compiling it if
        needed): its ``source``, ``memory`` plan and ``arena``."""
        return self._lookup(program, feed, fetch_list, count=False)[0]

    def run(self, program: Program, feed: dict | None = None, fetch_list=None,
            return_numpy: bool = False):
        """Run ``program`` on ``feed`` (input name or its Variable -> Tensor or array) and
        return the values of ``fetch_list`` (Variables or names)."""
        compiled, arrays = self._lookup(program, feed, fetch_list)
        try:
            results = compiled(arrays)
        except Exception as exc:
            # found after the fact, from the traceback: the success path pays nothing
            located = operator_at(exc.__traceback__)
            if located is None:
                raise
            raise operator_error(exc, *located) from None
        if return_numpy:
            return [r if isinstance(r, np.ndarray) else _to_numpy(r) for r in results]
        return [wrap_array(r) for r in results]


BACKENDS = ("interpreted", "compiled", "auto")
TIER_ENV_VAR = "HYBRIDFW_TIER_AFTER"
TIER_BACKGROUND_ENV_VAR = "HYBRIDFW_TIER_BACKGROUND"
DEFAULT_TIER_AFTER = 20
_lowering_logger = logging.getLogger("hybridfw.lowering")


_tiering_threads: weakref.WeakSet = weakref.WeakSet()


def _register_tiering(thread) -> None:
    """Background compilations finish before the interpreter exits (one stopped inside LLVM
    while Python shuts down could crash the process, or leave a half-written numba cache)."""
    if not _tiering_threads:
        atexit.register(_finish_all_tiering)
    _tiering_threads.add(thread)


def _finish_all_tiering() -> None:
    for thread in list(_tiering_threads):
        thread.join(120)


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return backend


def tier_after_default() -> int:
    """Runs of a plan before ``backend='auto'`` compiles its regions
    (``$HYBRIDFW_TIER_AFTER``, default :data:`DEFAULT_TIER_AFTER`)."""
    text = os.environ.get(TIER_ENV_VAR, "")
    try:
        return max(0, int(text)) if text else DEFAULT_TIER_AFTER
    except ValueError:
        raise ValueError(f"{TIER_ENV_VAR} must be a non-negative integer, got {text!r}") from None


def lowering_available() -> bool:
    from .lowering import available
    return available()


def describe_operator(block_idx: int, index: int, op) -> str:
    """``t3 = reshape(x) (block 0, op 2)`` and the operator's origin, for error messages."""
    args = ", ".join(i if isinstance(i, str) else repr(i) for i in op.inputs)
    outs = f"{', '.join(op.outputs)} = " if op.outputs else ""
    return f"{outs}{op.type}({args}) (block {block_idx}, op {index}){format_origin(op.origin)}"


def operator_error(exc: Exception, block_idx: int, index: int, op) -> Exception:
    """``exc`` (of its own type, with its traceback) with a message naming the operator that
    raised it and the user's line that built it; a kernel's own message (numpy's) starts with
    the operator's name, as in eager mode."""
    text = str(exc)
    if op.type in all_ops() and not text.startswith(f"{op.type}:"):
        text = f"{op.type}: {text}"
    message = f"{text}\n  while running operator {describe_operator(block_idx, index, op)}"
    try:
        error = type(exc)(message)
        same = str(error) == message
    except Exception:  # noqa: BLE001 - an exception type that takes other arguments
        same = False
    if not same:  # keep the exception itself and add the operator as a note
        if hasattr(exc, "add_note"):  # Python 3.11+
            exc.add_note(message.split("\n", 1)[1])
        return exc
    return error.with_traceback(exc.__traceback__)


def _feed_by_name(program: Program, feed: dict) -> dict:
    """``feed`` keyed by input names, where it has the inputs' Variables (``hf.static.data``'s
    results) as keys too: each of ``program`` (a Variable of another program refused, as a
    fetch target is), no input given twice."""
    out = {}
    for key, value in feed.items():
        if isinstance(key, Variable):
            block = key._block()
            if block is not None and block.program.lineage != program.lineage:
                raise ValueError(f"Executor.run: feed key {key!r} is a variable of another "
                                 "program than the one being run")
            name = key.name
        elif isinstance(key, str):
            name = key
        else:
            raise TypeError(f"Executor.run: feed keys are input names or their Variables, got "
                            f"{type(key).__name__}")
        if name in out:
            raise ValueError(f"Executor.run: input {name!r} is fed twice (by name and by its "
                             "Variable)")
        out[name] = value
    return out


def _fetch_names(program: Program, fetch_list) -> tuple:
    """Names of the fetch targets: a list or tuple of Variables or names, or a single one.
    A Variable must come from ``program`` (or a copy of it that a pass made): fetching by
    name alone would hand back another living program's variable of the same name."""
    if fetch_list is None:
        return ()
    if not isinstance(fetch_list, (list, tuple)):
        fetch_list = [fetch_list]
    names = []
    for f in fetch_list:
        if isinstance(f, str):
            names.append(f)
        elif isinstance(f, Variable):
            block = f._block()  # (None: its program is gone, a copy of it may be running)
            if block is not None and block.program.lineage != program.lineage:
                raise ValueError(f"Executor.run: fetch target {f!r} is a variable of another "
                                 f"program than the one being run; fetch it from its own "
                                 f"program, or pass its name ({f.name!r}) to fetch this "
                                 f"program's variable of that name")
            names.append(f.name)
        else:
            raise TypeError(f"Executor.run: fetch_list holds Variables of the program or their "
                            f"names, got {type(f).__name__}")
    return tuple(names)


def _to_numpy(array):
    get = getattr(array, "get", None)  # cupy arrays copy to the host with .get()
    return get() if get is not None else np.asarray(array)
