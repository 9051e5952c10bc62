"""A second CPU stream: large matrix products of a compiled plan run on a worker thread while
the plan's own thread goes on with the operators that do not need them.

numpy releases the GIL inside BLAS and the compiled regions are ``nogil``, so two threads run
truly in parallel on two cores. A plan is still one serial program; :func:`plan_async` picks,
per flat block, the ``matmul`` operators worth *launching* on the worker at their place in the
order and *waiting* for only where their result is first read (the *anchor*): the input
projection ``x[t] @ W_ih`` of an LSTM step overlaps its recurrent product ``h @ W_hh``, and the
weight gradient of one stacked product overlaps the other's. One worker, first in first out:
results are bitwise those of the serial order (each product is the same BLAS call, on the same
operands, into the same memory).

What keeps the arena plan valid: an asynchronous product's operands stay live until its anchor
(:func:`~hybridfw.static.memory_plan.plan_arena`'s ``keep_alive``), so no operator in between
reuses their memory; programs are functional (in-place pairs are the planner's own, and never
take a feed or parameter), and no window holds a control-flow operator.

Which products: a float ``matmul`` of at least :data:`MIN_MACS` multiply-adds outside compiled
regions, launched when a small cost model (:func:`_cost`: BLAS at :data:`FLOPS` per second,
memory traffic at :data:`BYTES_PER_S`) says the work the main thread does before the anchor
hides at least half of it once the worker is free. Everything else runs where it stood.

Threads: ``hf.set_num_interop_threads(n)`` (PyTorch's name; default: 2 when the machine has two
cores or more, or the environment variable ``HYBRIDFW_INTEROP_THREADS``); 1 turns the worker off.
The worker is used (:func:`active`) only while the cores can hold two BLAS calls at once: at
least twice as many cores as BLAS threads (:func:`blas_threads`). A BLAS that already spreads
each product over every core leaves nothing to overlap with, and two such calls at once were
slower here: W4 with OpenBLAS on both cores of a 2-core machine took 24.5 ms with the worker,
22.2 without; with one BLAS thread, 19-20 ms with it, 22-28 without. It applies to plans
compiled afterwards. A child process made by ``fork`` starts without the worker and makes its
own on first use.
"""
from __future__ import annotations

import bisect
import os
import queue
import threading

from ..ops.registry import all_ops

__all__ = ["FLOPS", "MIN_MACS", "active", "blas_threads", "drain", "get_num_interop_threads",
           "plan_async", "set_num_interop_threads", "submit"]

ENV_VAR = "HYBRIDFW_INTEROP_THREADS"
MIN_MACS = 1 << 23      # smaller products cost less than handing them to another thread
FLOPS = 50e9            # one core's float32 BLAS rate for these shapes (bench/codegen.py)
BYTES_PER_S = 10e9      # memory traffic of the other operators
OP_OVERHEAD_S = 1e-6    # dispatch of one operator
WAIT_MARGIN = 2.0       # a product is waited for once predicted done this many times over


def _default_threads() -> int:
    text = os.environ.get(ENV_VAR, "").strip()
    if text:
        try:
            return max(1, int(text))
        except ValueError:
            raise ValueError(f"{ENV_VAR} must be a positive integer, got {text!r}") from None
    return 2 if (os.cpu_count() or 1) >= 2 else 1


_threads = None


def set_num_interop_threads(n: int) -> None:
    """Threads a compiled CPU plan may use (1: its own only; 2 or more: one worker more, for
    matrix products off its critical path). Applies to programs compiled afterwards."""
    global _threads
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_interop_threads: expected a positive int, got {n!r}")
    _threads = n


_BLAS_SYMBOLS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
                 "openblas_get_num_threads64_", "openblas_get_num_threads", "MKL_Get_Max_Threads")
_blas_getter = []  # [the C function giving BLAS's thread count, or None]


def blas_threads() -> int:
    """How many threads numpy's BLAS uses for one call now: asked from the library numpy
    bundles or links (OpenBLAS, MKL), else read from ``OPENBLAS_NUM_THREADS`` /
    ``MKL_NUM_THREADS`` / ``OMP_NUM_THREADS``, else taken to be every core."""
    if not _blas_getter:
        _blas_getter.append(_find_blas_getter())
    getter = _blas_getter[0]
    if getter is not None:
        try:
            return max(1, int(getter()))
        except (OSError, ValueError):
            pass
    for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        text = os.environ.get(name, "").strip()
        if text.isdigit() and int(text) > 0:
            return int(text)
    return os.cpu_count() or 1


def _find_blas_getter():
    import ctypes

    from ..backend import blas_libraries
    for path in blas_libraries():
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol in _BLAS_SYMBOLS:
            getter = getattr(library, symbol, None)
            if getter is not None:
                getter.restype, getter.argtypes = ctypes.c_int, ()
                return getter
    return None


def active() -> bool:
    """Whether plans compiled now hand products to the worker: a second interop thread, and
    cores for two BLAS calls at once."""
    return get_num_interop_threads() >= 2 and \
        (os.cpu_count() or 1) >= 2 * blas_threads()


def get_num_interop_threads() -> int:
    """The setting :func:`set_num_interop_threads` made (its default, until then)."""
    global _threads
    if _threads is None:
        _threads = _default_threads()
    return _threads


class _Job:
    __slots__ = ("done", "error", "fn", "lock", "value")

    def __init__(self, fn):
        self.fn = fn
        self.value = self.error = None
        self.done = False
        self.lock = threading.Lock()
        self.lock.acquire()  # released by the worker when done

    def result(self):
        self.lock.acquire()
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return self.value


class _Worker:
    def __init__(self):
        self.queue = queue.SimpleQueue()
        self.last = None
        self.thread = threading.Thread(target=self._work, name="hybridfw-stream", daemon=True)
        self.thread.start()

    def _work(self):
        get = self.queue.get
        while True:
            job = get()
            try:
                job.value = job.fn()
            except BaseException as exc:  # re-raised where the plan waits for it
                job.error = exc
            job.fn = None
            job.done = True
            job.lock.release()


_worker = None
_start_lock = threading.Lock()


def _reset_after_fork() -> None:
    global _worker, _start_lock
    _worker = None
    _start_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def submit(fn):
    """Run ``fn()`` on the worker after every job submitted before; ``.result()`` waits for it
    (and raises what it raised)."""
    global _worker
    worker = _worker
    if worker is None:
        with _start_lock:
            if _worker is None:
                _worker = _Worker()
            worker = _worker
    job = _Job(fn)
    worker.last = job
    worker.queue.put(job)
    return job


def drain() -> None:
    """Wait until the worker has run every job submitted so far (a plan calls this first: a
    previous run that raised may have left products writing into its arena)."""
    worker = _worker
    if worker is not None:
        last = worker.last
        if last is not None and not last.done:
            last.lock.acquire()
            last.lock.release()


def _cost(op, info, metas) -> float:
    """Seconds the main thread spends on ``op`` (a rough model: only ratios matter)."""
    if op.type == "matmul":
        return 2.0 * _macs(op, metas) / FLOPS
    nbytes = 0
    for name in op.input_names():
        meta = metas.get(name)
        if meta is not None:
            nbytes += _nbytes(meta)
    if info is not None:
        n = 1
        for s in info[0]:
            n *= s if isinstance(s, int) and s > 0 else 1
        nbytes += n * info[1].itemsize
    return OP_OVERHEAD_S + nbytes / BYTES_PER_S


def _nbytes(meta) -> int:
    n = meta.dtype.itemsize
    for s in meta.shape:
        n *= s if isinstance(s, int) and s > 0 else 1
    return n


def _macs(op, metas) -> int:
    a, b = (metas.get(n) for n in op.inputs[:2])
    if a is None or b is None or not a.shape or not b.shape:
        return 0
    if any(not isinstance(s, int) or s < 0 for s in a.shape + b.shape):
        return 0
    m = a.shape[-2] if len(a.shape) > 1 else 1
    k = a.shape[-1]
    n = b.shape[-1] if len(b.shape) > 1 else 1
    batch = 1
    for s in (a.shape[:-2] if len(a.shape) > len(b.shape) else b.shape[:-2]):
        batch *= s
    return batch * m * k * n


def _memory_ends(ops, op_infos, live, donated) -> dict:
    """For each value whose memory a plan frees (made by an operator and not a view, or a
    donated input): the last operator reading it or a view of it."""
    registry = all_ops()
    aliases = {}
    for i, op in enumerate(ops):
        if op_infos[i] is not None and registry[op.type].view and isinstance(op.inputs[0], str):
            aliases[op.outputs[0]] = aliases.get(op.inputs[0], op.inputs[0])
    ends = {}
    for name, last in live.last_use.items():
        root = aliases.get(name, name)
        if (root in live.definition and root not in aliases) or root in donated:
            if ends.get(root, -1) < last:
                ends[root] = last
    return ends, aliases


def _freed_after(op, ends, aliases):
    """The last operator reading the memory of ``op``'s operands that the plan frees (see
    :func:`_memory_ends`), were the product not running on the worker; None when none is."""
    found = [ends[root] for root in (aliases.get(n, n) for n in op.input_names()) if root in ends]
    return max(found) if found else None


def _early_anchor(i, anchor, main, ready, cost, starts, freed) -> int:
    """Where to wait for a product launched at ``i`` (its result first read at ``anchor``):
    the first operator the main thread is predicted to reach once the worker has finished it
    (``ready``, with a margin), when that comes before ``anchor``. Waiting there costs nothing
    and ends the operands' lifetimes (:func:`~hybridfw.static.memory_plan.plan_arena`'s
    ``keep_alive``) early: the weight gradients of a backward, read only as fetched results at
    the end, held every step's operands to the end (a 16-layer MLP's backward arena: 4.25 MiB
    instead of 0.5). Never before the operands' own last reads (``freed``: see :func:`_freed_after`;
    None: nothing to free, the anchor stays). A wait inside a compiled region moves to the
    region's start."""
    if freed is None or freed + 1 >= anchor:
        return anchor  # waiting earlier would free nothing
    # the main thread's time at operator j, future stalls left out (they only make it later)
    j = bisect.bisect_left(cost, ready - main + cost[i + 1], max(i + 2, freed + 1), anchor)
    j = starts.get(j, j)
    return j if i + 1 < j < anchor else anchor


def plan_async(block, metas, op_infos, live, inside=frozenset(), starts=None) -> dict:
    """``{op index: anchor}`` for the ``matmul`` operators of ``block`` (a flat block: the
    global one of a compiled plan) to run on the worker; the anchor is the index of the first
    operator that reads the result (the start of the compiled region holding it, when a region
    reads it; ``live.num_ops`` for a fetched result), or an earlier one where it is predicted
    done and its operands' memory can go (:func:`_early_anchor`), before which the plan waits
    for it.

    ``inside``: indices of operators inside compiled regions (never launched; their reads
    anchor at the region's start, given by ``starts``: op index -> region start).
    """
    if not active():
        return {}
    ops = block.ops
    n = len(ops)
    starts = starts or {}
    donated = (getattr(block.program, "donated", None) or ()) if block.idx == 0 else ()
    ends, aliases = _memory_ends(ops, op_infos, live, donated)
    candidate = [op.type == "matmul" and i not in inside and op_infos[i] is not None and
                 op_infos[i][1].np.kind == "f" and all(isinstance(a, str) for a in op.inputs) and
                 _macs(op, metas) >= MIN_MACS for i, op in enumerate(ops)]
    # prefix sums of the main thread's work (as if every operator ran there) and of the
    # control-flow operators (no window may hold one)
    cost = [0.0] * (n + 1)
    flow = [0] * (n + 1)
    steps = [0.0] * n
    for i, op in enumerate(ops):
        info = op_infos[i]
        steps[i] = 0.0 if info is None and op.blocks else _cost(op, info, metas)
        cost[i + 1] = cost[i] + steps[i]
        flow[i + 1] = flow[i] + (info is None)
    first_read = {}
    for i in range(n - 1, -1, -1):
        for name in live.reads[i]:
            first_read[name] = starts.get(i, i)
    chosen = {}
    main = worker_free = 0.0
    pending = {}  # output -> (anchor, finish time)
    for i, op in enumerate(ops):
        for name, (anchor, finish) in list(pending.items()):
            if anchor <= i:
                main = max(main, finish)
                del pending[name]
        step = steps[i]
        if candidate[i]:
            out = op.outputs[0]
            anchor = first_read.get(out, n)
            if anchor > i + 1 and flow[anchor] == flow[i]:
                start = max(main, worker_free)
                hidden = cost[anchor] - cost[i + 1]
                if start + step <= main + hidden + 0.5 * step:
                    worker_free = start + step
                    anchor = _early_anchor(i, anchor, main, worker_free + WAIT_MARGIN * step,
                                           cost, starts, _freed_after(op, ends, aliases))
                    chosen[i] = anchor
                    pending[out] = (anchor, worker_free)
                    continue
        main += step
    return chosen
