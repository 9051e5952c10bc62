"""``DistributedSampler``: each rank iterates its own shard of the dataset.

Example (each rank of ``mpiexec -n 2``)::

    >>> import hybridfw as hf
    >>> sampler = hf.data.DistributedSampler(dataset, shuffle=True, seed=0)
    >>> loader = hf.data.DataLoader(dataset, batch_size=32, sampler=sampler)
    >>> for epoch in range(3):
    ...     sampler.set_epoch(epoch)          # a new shuffle, the same on every rank
    ...     for xb, yb in loader: ...
"""
from __future__ import annotations

from collections.abc import Iterator, Sized

import numpy as np

from ..distributed.process_group import default_group
from .sampler import Sampler

__all__ = ["DistributedSampler"]


def _check_int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"DistributedSampler: {name} must be an int >= {low}, got {value!r}")
    return int(value)


class DistributedSampler(Sampler):
    """Rank ``rank`` of ``num_replicas`` gets indices ``rank, rank + num_replicas, ...`` of one
    permutation (PyTorch's ``DistributedSampler``).

    All ranks draw the same permutation, seeded by ``seed + epoch`` (independent of the global
    RNG), so the shards are disjoint and together cover the dataset; :meth:`set_epoch`
    reshuffles. When the dataset does not divide evenly, the permutation is padded with its
    first indices (every rank gets ``ceil(N / num_replicas)``), or with ``drop_last`` trimmed
    (``floor(N / num_replicas)``, shards strictly disjoint). ``num_replicas`` and ``rank``
    default to the process group's.
    """

    def __init__(self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        if num_replicas is None or rank is None:
            group = default_group("DistributedSampler")
            num_replicas = group.world_size if num_replicas is None else num_replicas
            rank = group.rank if rank is None else rank
        self.num_replicas = _check_int("num_replicas", num_replicas, 1)
        self.rank = _check_int("rank", rank, 0)
        if self.rank >= self.num_replicas:
            raise ValueError(f"DistributedSampler: rank {rank} is out of range for "
                             f"num_replicas={num_replicas} (valid: 0..{num_replicas - 1})")
        self.dataset = dataset
        self.shuffle = bool(shuffle)
        self.seed = _check_int("seed", seed, 0)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        n = len(dataset)
        self.num_samples = n // self.num_replicas if self.drop_last else \
            -(-n // self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Use the permutation of ``epoch`` (call it with the same value on every rank)."""
        self.epoch = _check_int("epoch", epoch, 0)

    def indices(self) -> np.ndarray:
        """This rank's indices for the current epoch (int64)."""
        n = len(self.dataset)
        if self.shuffle:
            order = np.random.default_rng((self.seed, self.epoch)).permutation(n)
        else:
            order = np.arange(n, dtype=np.int64)
        if self.total_size > n:  # pad by wrapping around (repeating when N is tiny)
            order = np.resize(order, self.total_size)
        else:
            order = order[:self.total_size]
        return order[self.rank:self.total_size:self.num_replicas]

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return self.num_samples
