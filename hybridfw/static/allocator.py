"""glibc's malloc kept from handing freed memory back to the OS between the runs of a plan.

A static plan's arena is allocated once, but the arrays its compiled regions and heap values
return are allocated at every run, by numpy and numba, through ``malloc``. glibc's defaults give
a freed block at the top of the heap back to the OS as soon as more than 128 KiB are free there
(``M_TRIM_THRESHOLD``), and serve blocks above 128 KiB (``M_MMAP_THRESHOLD``, raised only as
large blocks are freed) by fresh ``mmap`` s: the next run touches new pages, and every 4 KiB
page costs a fault. An LSTM's backward step, which frees its saved activations as it goes, spent
most of its elementwise time in those faults here (bench/codegen.py, W4: its cell's backward
region took 75 µs per step in the plan against 7 µs alone).

:func:`tune` (called when the first CPU plan is compiled) sets both thresholds once for the
process: blocks up to :data:`MMAP_THRESHOLD` come from the heap, and up to
:data:`TRIM_THRESHOLD` bytes free at its top stay with the process. The cost is resident memory:
the heap keeps its high-water mark, up to those sizes, rather than shrinking after each run.
glibc only (Linux); ``HYBRIDFW_MALLOC_TUNING=0`` leaves malloc alone.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["ENV_VAR", "MMAP_THRESHOLD", "TRIM_THRESHOLD", "tune"]

ENV_VAR = "HYBRIDFW_MALLOC_TUNING"
MMAP_THRESHOLD = 32 << 20   # glibc's own ceiling for its dynamic threshold
TRIM_THRESHOLD = 64 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h

_state = None


def tune() -> bool:
    """Set glibc's thresholds (once per process); whether they are set."""
    global _state
    if _state is None:
        _state = _tune()
    return _state


def _tune() -> bool:
    if os.environ.get(ENV_VAR, "").strip().lower() in ("0", "false", "no", "off"):
        return False
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # glibc, not musl: musl has no such thresholds
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
