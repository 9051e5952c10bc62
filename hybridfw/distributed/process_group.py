"""The default process group: which backend, this process's rank, the world size, the timeout.

``init_process_group`` reads rank and size from the launcher (``mpiexec -n N``: MPI's
``COMM_WORLD``). Once it is set up, an exception nobody catches on one rank aborts the whole job
(``MPI_Abort``) after printing its traceback, so the other ranks stop instead of waiting forever
in their next collective; a collective that waits longer than the timeout raises
:class:`~.work.DistributedTimeoutError` (and so also ends the job).
"""
from __future__ import annotations

import datetime
import os
import sys
import time
import traceback

import numpy as np

__all__ = ["init_process_group", "destroy_process_group", "is_initialized", "is_available",
           "get_rank", "get_world_size", "get_backend", "default_group", "ProcessGroup",
           "ProcessGroupNotInitializedError",
           "DEFAULT_TIMEOUT_S", "COLLECTIVES", "signature", "check_consistent"]

#: PyTorch's default: 30 minutes (override per job with HYBRIDFW_DIST_TIMEOUT, in seconds).
DEFAULT_TIMEOUT_S = 1800.0

_BACKENDS = ("mpi", "nccl")


class ProcessGroup:
    """The ranks taking part, their backend and the collective timeout (seconds)."""

    def __init__(self, backend, timeout: float, check_consistency: bool):
        self.backend = backend
        self.rank = backend.rank
        self.world_size = backend.world_size
        self.timeout = timeout
        self.check_consistency = check_consistency

    def __repr__(self) -> str:
        return (f"ProcessGroup(backend={self.backend.name!r}, rank={self.rank}, "
                f"world_size={self.world_size}, timeout={self.timeout:g})")


class ProcessGroupNotInitializedError(RuntimeError, ValueError):
    """A call that needs the default process group came before ``init_process_group``. A
    RuntimeError, and a ValueError, which PyTorch raises there."""


_group: ProcessGroup | None = None
_previous_excepthook = None


def is_available() -> bool:
    """True when mpi4py imports (the MPI backend can be used)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_initialized() -> bool:
    return _group is not None


def _timeout_seconds(timeout) -> float:
    if timeout is None:
        timeout = os.environ.get("HYBRIDFW_DIST_TIMEOUT", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    try:
        value = float(timeout)
    except (TypeError, ValueError):
        raise TypeError(f"init_process_group: timeout must be seconds (a number) or a "
                        f"datetime.timedelta, got {timeout!r}") from None
    if not value > 0:
        raise ValueError(f"init_process_group: timeout must be > 0 seconds, got {value!r}")
    return value


def init_process_group(backend: str = "mpi", *, timeout=None, world_size: int = -1,
                       rank: int = -1, init_method=None,
                       check_consistency: bool = True) -> ProcessGroup:
    """Join the job started by the launcher (``mpiexec -n N python train.py``).

    ``backend``: ``'mpi'`` (CPU tensors, mpi4py) or ``'nccl'`` (CUDA tensors through cupy's
    NCCL; MPI only exchanges NCCL's id, and each process takes GPU ``local_rank % count``).
    ``timeout``: seconds (or a ``timedelta``) a collective may wait before it raises; default
    ``HYBRIDFW_DIST_TIMEOUT`` or 30 minutes. ``check_consistency``: before each collective
    called through ``hf.distributed``, the ranks compare shapes and dtypes (one small extra
    all-gather) and raise a clear error on a mismatch instead of corrupting data.
    ``world_size`` and ``rank`` (PyTorch's arguments; -1: take the launcher's) must agree with
    the launcher's when given; ``init_method`` is accepted for PyTorch scripts and unused (the
    launcher connects the processes).

    Example (each rank runs it)::

        >>> import hybridfw as hf
        >>> hf.distributed.init_process_group("mpi")
        >>> t = hf.tensor([float(hf.distributed.get_rank())])
        >>> hf.distributed.all_reduce(t)          # t is now 0 + 1 + ... + (N-1) on every rank
    """
    global _group
    if _group is not None:
        raise RuntimeError(f"init_process_group: the default process group is already "
                           f"initialized ({_group!r}); call destroy_process_group() first")
    name = str(backend).lower()
    if name not in _BACKENDS:
        raise ValueError(f"init_process_group: unknown backend {backend!r}; choose one of "
                         f"{', '.join(map(repr, _BACKENDS))}")
    seconds = _timeout_seconds(timeout)
    if name == "mpi":
        from .mpi import MPIBackend
        impl = MPIBackend()
    else:
        from .nccl import NCCLBackend
        impl = NCCLBackend()
    for arg, given, actual in (("world_size", world_size, impl.world_size),
                               ("rank", rank, impl.rank)):
        if given is not None and given != -1 and given != actual:
            impl.close()
            raise ValueError(f"init_process_group: {arg}={given!r} but the launcher started "
                             f"this process as rank {impl.rank} of {impl.world_size} (mpiexec "
                             f"-n N sets both; leave {arg} out)")
    _group = ProcessGroup(impl, seconds, bool(check_consistency))
    _install_abort_on_uncaught_exception()
    return _group


def destroy_process_group() -> None:
    """Leave the process group (collectives raise again until the next init)."""
    global _group
    group, _group = _group, None
    if group is not None:
        group.backend.close()
    _restore_excepthook()


def default_group(caller: str) -> ProcessGroup:
    """The initialized group, or a clear error naming ``caller``."""
    if _group is None:
        raise ProcessGroupNotInitializedError(
            f"hf.distributed.{caller}: the default process group is not initialized; call "
            f"hf.distributed.init_process_group('mpi') first (and launch with: mpiexec -n 2 "
            f"python your_script.py)")
    return _group


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank, 0 .. world_size - 1 (in ``group``, default the default group)."""
    return (group or default_group("get_rank")).rank


def get_world_size(group: ProcessGroup | None = None) -> int:
    """How many processes take part (in ``group``, default the default group)."""
    return (group or default_group("get_world_size")).world_size


def get_backend() -> str:
    return default_group("get_backend").backend.name


def _install_abort_on_uncaught_exception() -> None:
    global _previous_excepthook
    if _previous_excepthook is not None:
        return
    _previous_excepthook = sys.excepthook

    def abort_job(kind, value, tb):
        group = _group
        if group is None or group.world_size == 1:
            _previous_excepthook(kind, value, tb)
            return
        # One write of the whole report, then a moment for the launcher to forward it: the
        # abort kills every rank's output stream, and a report cut in half helps nobody.
        report = "".join(traceback.format_exception(kind, value, tb)) + (
            f"hf.distributed: rank {group.rank} failed with an uncaught {kind.__name__}; "
            f"aborting all {group.world_size} ranks\n")
        sys.stdout.flush()
        sys.stderr.flush()
        _write_fully(report)
        time.sleep(0.2)
        group.backend.abort(1)

    sys.excepthook = abort_job


def _write_fully(text: str) -> None:
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # stderr replaced by a non-file object
        sys.stderr.write(text)
        sys.stderr.flush()
        return
    data = text.encode(errors="replace")
    while data:
        data = data[os.write(fd, data):]


def _restore_excepthook() -> None:
    global _previous_excepthook
    if _previous_excepthook is not None:
        sys.excepthook = _previous_excepthook
        _previous_excepthook = None


# ---- consistency checks -------------------------------------------------------------------
#: What a consistency-check signature can name (its first integer is the index here).
COLLECTIVES = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier",
                "all_gather_into_tensor", "reduce_scatter_tensor", "DistributedDataParallel",
                "ZeroRedundancyOptimizer")
_DTYPE_NAMES = {np.dtype(t).num: np.dtype(t).name for t in (
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")}
_MAX_DIMS = 8


def signature(collective: str, arr, extra: int = 0) -> np.ndarray:
    """A small int64 vector describing one rank's call (collective, dtype, shape, extra)."""
    shape = tuple(arr.shape)[:_MAX_DIMS]
    row = np.full(4 + _MAX_DIMS, -1, dtype=np.int64)
    row[:4] = (COLLECTIVES.index(collective), np.dtype(arr.dtype).num, len(arr.shape), extra)
    row[4:4 + len(shape)] = shape
    return row


def describe(row) -> str:
    ndim = int(row[2])
    shape = tuple(int(d) for d in row[4:4 + min(ndim, _MAX_DIMS)])
    dtype = _DTYPE_NAMES.get(int(row[1]), f"dtype#{int(row[1])}")
    return f"{COLLECTIVES[int(row[0])]} of {dtype} {shape}"


def check_consistent(group: ProcessGroup, name: str, row: np.ndarray,
                     extra_name: str = "") -> None:
    """All ranks compare ``row``; a mismatch raises ValueError (shapes, counts) or TypeError
    (dtypes) on every rank, naming what each rank passed."""
    from .work import Work
    table, requests = group.backend.gather_ints(row)
    Work(name, requests, group).wait()
    if (table == table[0]).all():
        return
    calls = "; ".join(f"rank {r}: {describe(t)}" + (f", {extra_name}={int(t[3])}"
                                                    if extra_name else "")
                      for r, t in enumerate(table))
    if (table[:, 0] != table[0, 0]).any():
        raise RuntimeError(f"hf.distributed.{name}: the ranks called different collectives "
                           f"({calls}); every rank must make the same calls in the same order")
    kind = TypeError if (table[:, 1] != table[0, 1]).any() else ValueError
    raise kind(f"hf.distributed.{name}: the ranks passed different tensors ({calls}); every "
               f"rank must pass the same shape and dtype")
