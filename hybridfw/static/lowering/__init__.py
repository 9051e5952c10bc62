"""Lowering: compiled regions (numba on CPU) behind the executor's interpreted plans.

From a program's global block, runs of lowerable operators (:mod:`.regions`) become one
generated Python function each (:mod:`.emit`), which ``numba.njit`` compiles: elementwise chains
and ``fused_elementwise`` groups one loop with no temporaries (float32 ``exp``/``tanh``/``sigmoid``
written so LLVM vectorizes it, :mod:`.vmath`; slices and permutes read in place), ``while``/``cond``
compiled loops and branches, a differentiated ``while`` and its backward (``while_grad``)
included (the records pass between them stacked, one array per recorded value, see
:class:`~hybridfw.static.loop_stack.LoopStack`), ``sum`` numba's numpy and 2-D ``matmul`` a call
of numpy's own BLAS (:mod:`.blas`; ``np.dot`` where that is not found). The executor calls
each region at its first operator and runs everything else as before (see ``Executor(backend=)``
and ``hf.jit.to_static(..., backend=)``). What each op lowers to is its ``lower`` rule in the
op registry (:mod:`hybridfw.ops.lowering_rules`).

The generated module is readable (``CompiledProgram.lowering.source``), written to a cache
directory and imported from there (:mod:`.cache`), so numba's on-disk cache spares a new process
the compilation.

numba is optional: without it, or with ``HYBRIDFW_NUMBA=0`` in the environment, :func:`available`
is False, one INFO message on the ``hybridfw.lowering`` logger says so, and everything runs on the
interpreter.

Example::

    >>> import hybridfw as hf
    >>> @hf.jit.to_static(backend="compiled")
    ... def collatz(n):
    ...     steps = n * 0
    ...     while n != 1:
    ...         if n % 2 == 0:
    ...             n = n // 2
    ...         else:
    ...             n = 3 * n + 1
    ...         steps = steps + 1
    ...     return steps
    >>> collatz(hf.tensor(27, dtype="int32")).item()
    111
"""
from __future__ import annotations

import hashlib
import logging
import os
import time

import numpy as np

from .cache import CACHE_ENV_VAR, cache_dir, load_module
from .emit import GEMM, GEMM_ADD, INTEGER_DIVISION, VECTOR_FLOAT32, Unsupported
from .regions import Region, plan_regions, region_source

__all__ = ["CACHE_ENV_VAR", "CHECK_ENV_VAR", "NUMBA_ENV_VAR", "Lowered", "Region", "Unsupported", "available",
           "cache_dir", "lower_program", "unavailable_reason"]

NUMBA_ENV_VAR = "HYBRIDFW_NUMBA"
CHECK_ENV_VAR = "HYBRIDFW_CHECK_REGIONS"
logger = logging.getLogger("hybridfw.lowering")
_state: dict = {}


def unavailable_reason() -> str | None:
    """Why compiled regions are off (None when numba is usable)."""
    if os.environ.get(NUMBA_ENV_VAR, "1").strip().lower() in ("0", "false", "no", "off"):
        return f"disabled by {NUMBA_ENV_VAR}=0"
    if "numba" not in _state:
        try:
            import numba
            _state["numba"] = numba
            _state["error"] = None
        except Exception as exc:  # noqa: BLE001 - ImportError, or numba rejecting numpy/Python
            _state["numba"] = None
            _state["error"] = f"numba cannot be imported ({type(exc).__name__}: {exc})"
    return _state["error"]


def available(announce: bool = True) -> bool:
    """Whether regions can be compiled; the first time they cannot, one INFO message says why
    (when ``announce``)."""
    reason = unavailable_reason()
    if reason is not None and announce and not _state.get("announced"):
        _state["announced"] = True
        logger.info("hybridfw: compiled regions are off (%s); programs run on the interpreter",
                    reason)
    return reason is None


class Lowered:
    """The compiled regions of one program plan.

    Attributes: ``regions`` (:class:`Region` list), ``functions`` (region name -> numba
    dispatcher), ``source`` (the generated module), ``left_out`` (``(index, operator, reason)``
    of the operators that stay interpreted), ``seconds`` (time spent generating and loading;
    numba compiles each region at its first call).
    """

    def __init__(self, regions, functions, source, left_out, seconds):
        self.regions, self.functions, self.source = regions, functions, source
        self.left_out, self.seconds = left_out, seconds

    def entry(self, name: str):
        """What a plan calls for region ``name``: the entry point of its one compiled overload
        (it unboxes the arguments for that signature, skipping the dispatcher's typing of each
        argument, ~0.5 us per call). A region is compiled for the argument types the memory
        plan's metas give (:func:`_compile_eagerly`) and the executor feeds it C arrays of
        those dtypes and ranks, so the typing always picks that overload. With
        ``HYBRIDFW_CHECK_REGIONS=1`` the plan calls the dispatcher, which rejects any other
        argument type."""
        function = self.functions[name]
        overloads = function.overloads
        if len(overloads) != 1 or os.environ.get(CHECK_ENV_VAR, "0").strip().lower() in (
                "1", "true", "yes", "on"):
            return function
        return next(iter(overloads.values())).entry_point

    def report(self) -> str:
        lines = [f"{len(self.regions)} compiled region(s):"]
        lines += [f"  {r.describe()}" for r in self.regions]
        if self.left_out:
            lines.append(f"{len(self.left_out)} operator(s) interpreted:")
            lines += [f"  op {i} {op.type}: {reason}" for i, op, reason in self.left_out]
        return "\n".join(lines)

    def stats(self) -> dict:
        """Per region: numba's cache hits and misses, and compiled signatures."""
        out = {}
        for name, fn in self.functions.items():
            stats = fn.stats
            out[name] = {"cache_hits": sum(stats.cache_hits.values()),
                         "cache_misses": sum(stats.cache_misses.values()),
                         "signatures": len(fn.signatures)}
        return out

    def __repr__(self) -> str:
        return f"Lowered({len(self.regions)} regions, {len(self.left_out)} ops interpreted)"


def lower_program(program, metas: dict, fetch_names) -> Lowered | None:
    """The compiled regions of ``program``'s global block (shapes from ``metas``, the memory
    plan's resolved metas), or None when numba is unavailable or nothing lowers."""
    if not available():
        return None
    numba = _state["numba"]
    start = time.perf_counter()
    regions, left_out = plan_regions(program, metas, fetch_names)
    if not regions:
        return Lowered([], {}, "", left_out, time.perf_counter() - start)
    parts = ['"""hybridfw compiled regions (generated; see hybridfw.static.lowering)."""',
             "import numpy as np", "import numba",
             "from hybridfw.static.lowering.vmath import " + ", ".join(
                 f"{fn[4:]} as {fn}" for fn in VECTOR_FLOAT32.values()),
             "from hybridfw.static.lowering.checked import " + ", ".join(
                 f"{fn[4:]} as {fn}" for fn in INTEGER_DIVISION.values()),
             # (also registers the BLAS symbols before numba links cached code calling them)
             f"from hybridfw.static.lowering.blas import gemm as {GEMM}, gemm_add as {GEMM_ADD}",
             ""]
    shared: dict = {}  # identical regions (a loop unrolled by the converter) share one function
    for region in regions:
        key = (tuple(region.body), tuple(region.arg_types))
        if key in shared:
            region.name = shared[key]
        else:
            shared[key] = region.name
            parts.append(region_source(region))
    source = "\n".join(parts)
    # numba's cache of a region holds the inlined vmath and blas code: a changed vmath or blas
    # (or another BLAS symbol found) is a new module
    module = load_module(source, salt=f"numba {numba.__version__} {_helpers_digest()}")
    functions, kept, failed = {}, [], set()
    for region in regions:
        function = getattr(module, region.name)
        if region.name in functions:
            kept.append(region)
            continue
        try:
            if region.name in failed:
                raise RuntimeError("an identical region failed to compile")
            _compile_eagerly(numba, function, region, metas, program)
        except Exception as exc:  # noqa: BLE001 - a numba typing/lowering error: interpret
            left_out += [(i, op, f"numba could not compile {region.name}: "
                          f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                         for i, op in zip(range(region.start, region.stop), region.ops)]
            failed.add(region.name)
            continue
        functions[region.name] = function
        kept.append(region)
    left_out.sort(key=lambda item: item[0])
    return Lowered(kept, functions, source, left_out, time.perf_counter() - start)


def _helpers_digest() -> str:
    """The digest of the helper modules the generated code inlines (:mod:`.vmath`,
    :mod:`.blas`, :mod:`.checked`) and of the BLAS symbol this process found."""
    digest = _state.get("helpers")
    if digest is None:
        from . import blas
        h = hashlib.sha256(f"{blas.symbol}".encode())
        for name in ("vmath.py", "blas.py", "checked.py"):
            with open(os.path.join(os.path.dirname(__file__), name), "rb") as f:
                h.update(f.read())
        digest = _state["helpers"] = h.hexdigest()[:16]
    return digest


def _compile_eagerly(numba, function, region, metas, program) -> None:
    """Compile for the region's argument types now, and allow no other signature, so a typing
    error shows here, not in the middle of a run. Arrays are C-contiguous (the executor passes
    them through ``np.ascontiguousarray``): with strides known LLVM vectorizes the loops."""
    block = program.global_block()
    types = []
    for name in region.inputs:
        stack = region.stack_inputs.get(name)
        if stack is not None:  # (count, item arrays...): see loop_stack.stacked_records
            types.append(numba.types.Tuple((numba.types.int64, *[
                numba.types.Array(numba.from_dtype(np.dtype(dt[3:])), len(shape) + 1, "C")
                for shape, dt in stack[1]])))
            continue
        meta = metas.get(name) or block.var(name)
        ndim = len(meta.shape)
        types.append(numba.types.Array(numba.from_dtype(meta.dtype.np), ndim, "C",
                                       readonly=True))
    signature = tuple(types)
    if signature in function.overloads:  # an identical region, compiled before in this process
        return
    function.compile(signature)
    function.disable_compile()
