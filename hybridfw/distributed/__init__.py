"""``hf.distributed``: data-parallel training across processes on MPI (CPU) or NCCL (GPU).

hybridfw does not ship a transport: collectives run on MPI through mpi4py (as Horovod and
ChainerMN do) or on NCCL through cupy. Launch one process per rank with MPI's launcher::

    mpiexec -n 2 python train.py

and in the script call :func:`init_process_group` first. On top of the collectives here sit
``hf.nn.parallel.DistributedDataParallel``, ``hf.data.DistributedSampler`` and
``hf.optim.ZeroRedundancyOptimizer``.

Example (each rank runs it)::

    >>> import hybridfw as hf
    >>> dist = hf.distributed
    >>> dist.init_process_group("mpi", timeout=60)
    >>> t = hf.full((4,), float(dist.get_rank()))
    >>> dist.all_reduce(t, op="sum")
    >>> work = dist.broadcast(t, src=0, async_op=True)
    >>> work.wait()
"""
from .collectives import (ReduceOp, all_gather, all_gather_into_tensor, all_reduce, barrier,
                          broadcast, reduce_scatter, reduce_scatter_tensor)
from .process_group import (ProcessGroup, ProcessGroupNotInitializedError,
                            destroy_process_group, get_backend, get_rank, get_world_size,
                            init_process_group, is_available, is_initialized)
from .work import DistributedTimeoutError, Work

__all__ = ["init_process_group", "destroy_process_group", "is_initialized", "is_available",
           "get_rank", "get_world_size", "get_backend", "ProcessGroup",
           "ProcessGroupNotInitializedError", "ReduceOp",
           "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
           "reduce_scatter_tensor", "barrier", "Work", "DistributedTimeoutError"]
