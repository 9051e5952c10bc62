"""``hf.nn.parallel``: data-parallel training across processes (see ``hf.distributed``).

Example (``mpiexec -n 2 python train.py``)::

    >>> import hybridfw as hf
    >>> hf.distributed.init_process_group("mpi")
    >>> ddp = hf.nn.parallel.DistributedDataParallel(hf.nn.Linear(4, 2), bucket_cap_mb=25)
"""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
