"""``hf.set_num_threads`` / ``hf.get_num_threads``: how many threads the BLAS behind numpy runs.

hybridfw's CPU arithmetic is numpy, whose matrix products run on its BLAS (OpenBLAS or MKL), so
PyTorch's intra-op thread count maps onto BLAS's. With ``threadpoolctl`` importable the limit is
applied to the BLAS libraries loaded in this process at once. The count is also written to
``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS``, which a BLAS loaded
afterwards reads (a fresh process, such as a DataLoader worker started by spawn); without
``threadpoolctl`` that is the only effect, so then set them before ``import numpy`` to limit
this process. Elementwise numpy kernels run on one thread either way.

Example::

    >>> import hybridfw as hf
    >>> hf.set_num_threads(1)
    >>> hf.get_num_threads()
    1
"""
from __future__ import annotations

import os

__all__ = ["set_num_threads", "get_num_threads"]

_ENV_NAMES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _threadpoolctl():
    try:
        import threadpoolctl  # noqa: PLC0415 - optional dependency
    except ImportError:
        return None
    return threadpoolctl


def set_num_threads(n: int) -> None:
    """Limit the BLAS to ``n`` threads (a positive int), as ``torch.set_num_threads``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive int, got {n!r}")
    threadpoolctl = _threadpoolctl()
    if threadpoolctl is not None:
        threadpoolctl.threadpool_limits(limits=n, user_api="blas")
    for name in _ENV_NAMES:  # for BLAS libraries loaded later (child processes)
        os.environ[name] = str(n)


def get_num_threads() -> int:
    """The number of threads the BLAS uses for one call now, as ``torch.get_num_threads``:
    read from the loaded BLAS (through ``threadpoolctl``, else the library's own call), else
    from the environment, else the number of cores."""
    threadpoolctl = _threadpoolctl()
    if threadpoolctl is not None:
        counts = [info["num_threads"] for info in threadpoolctl.threadpool_info()
                  if info.get("user_api") == "blas"]
        if counts:
            return max(counts)
    from .static.streams import blas_threads  # noqa: PLC0415 - asks the library via ctypes
    return blas_threads()
