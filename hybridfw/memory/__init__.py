"""``hf.memory``: bytes held by live tensor storage, per device, exact at every moment.

The counters live with the storage (``hybridfw.backend``); this package only reads them, and
holds the memory policies (checkpointing in eager mode: :func:`checkpoint`,
:func:`checkpoint_sequential`).

Example::

    >>> import hybridfw as hf
    >>> before = hf.memory.allocated()
    >>> x = hf.zeros(1024)                 # 4 KiB of float32
    >>> hf.memory.allocated() - before
    4096
    >>> del x
    >>> hf.memory.allocated() - before
    0

Storage is freed when its last reference goes, without ``gc.collect()``: autograd keeps no
reference cycles, and backward releases the tensors its nodes saved. What still holds a
reference is ordinary Python: the loop variable of ``for x, y in loader`` keeps the last batch
after the loop, and an exception kept after its ``except`` block (``except E as e: err = e``,
or ``sys.last_value`` in an interactive session) keeps the local variables of every frame in
its traceback, so the activations of a forward that raised stay counted until it is dropped
(Python clears ``e`` itself at the end of the block).
"""
from __future__ import annotations

from ..backend import _devices, cpu
from ..backend import device as as_device
from .checkpoint import checkpoint, checkpoint_sequential, is_recomputing

__all__ = ["allocated", "peak", "reset_peak", "stats", "checkpoint", "checkpoint_sequential",
           "is_recomputing"]


def _counter(device):
    return (cpu if device is None else as_device(device)).counter


def allocated(device=None) -> int:
    """Bytes of distinct live tensor storage on ``device`` (CPU by default); views add nothing."""
    return _counter(device).allocated


def peak(device=None) -> int:
    """The highest ``allocated()`` since start or the last :func:`reset_peak`."""
    return _counter(device).peak


def reset_peak(device=None) -> None:
    """Restart peak tracking from the current allocation (all devices when None)."""
    devs = list(_devices.values()) if device is None else [as_device(device)]
    for d in devs:
        d.counter.peak = d.counter.allocated
        d.counter.largest = 0


def stats(device=None) -> dict:
    """Current and peak bytes, allocation count and the largest block allocated since start
    or the last :func:`reset_peak`; ``reserved_bytes``: scratch buffers kept for reuse
    (optimizers' temporaries), not counted as allocated; on CUDA also cupy's pool. A CUDA
    device on a machine without one reports zeros, as :func:`allocated` does."""
    dev = cpu if device is None else as_device(device)
    c = dev.counter
    out = {"device": str(dev), "allocated_bytes": c.allocated, "peak_bytes": c.peak,
           "allocation_count": c.count, "largest_block_bytes": c.largest,
           "reserved_bytes": c.reserved}
    if dev.type == "cuda" and _cuda_available():
        pool = dev.xp.get_default_memory_pool()
        out["pool_used_bytes"] = int(pool.used_bytes())
        out["pool_total_bytes"] = int(pool.total_bytes())
    return out


def _cuda_available() -> bool:
    from ..cuda import is_available
    return is_available()
