"""``DataLoader``: iterate over a dataset in (shuffled) batches."""
from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import numpy as np

from ..dygraph import tensor
from .collate import default_collate, default_convert
from .dataset import TensorDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader"]


class DataLoader:
    """Batches of ``dataset``'s samples, merged by ``collate_fn`` (default: PyTorch's rules).

    ``shuffle=True`` draws a new order each epoch from hybridfw's generator (so
    ``hf.manual_seed`` makes it reproducible), or from ``generator`` (a numpy ``Generator``).
    A ``TensorDataset`` with the default collation is batched by indexing each tensor once per
    batch instead of stacking samples one by one. Loading runs in the calling process:
    ``num_workers > 0`` warns and loads there too; ``pin_memory`` has no effect.

    Example::

        >>> ds = hf.data.TensorDataset(hf.randn(100, 3), hf.randint(0, 2, (100,)))
        >>> for x, y in hf.data.DataLoader(ds, batch_size=32, shuffle=True, drop_last=True):
        ...     print(x.shape, y.shape)        # (32, 3) (32,), three times
    """

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | None = None, batch_sampler=None, num_workers: int = 0,
                 collate_fn: Callable | None = None, pin_memory: bool = False,
                 drop_last: bool = False, *, generator=None):
        if not hasattr(dataset, "__getitem__"):
            raise TypeError(f"DataLoader: dataset must support indexing (a map-style Dataset), "
                            f"got {type(dataset).__name__}")
        if batch_size is not None and (isinstance(batch_size, bool) or
                                       not isinstance(batch_size, int) or batch_size <= 0):
            raise ValueError(f"DataLoader: batch_size must be a positive int or None, got "
                             f"{batch_size!r}")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be an int >= 0, got {num_workers!r}")
        if num_workers > 0:
            warnings.warn(f"DataLoader: num_workers={num_workers} is not supported; samples are "
                          "loaded in the main process", UserWarning, stacklevel=2)
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with "
                                 "batch_size, shuffle, sampler, and drop_last")
            batch_size = None
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching and is "
                             "mutually exclusive with drop_last")
        if sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else \
                SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = bool(drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.generator = generator
        self._auto_collation = batch_sampler is not None
        self._default_collate = collate_fn is None
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    def __iter__(self) -> Iterator:
        if not self._auto_collation:
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])
            return
        if self._default_collate and isinstance(self.dataset, TensorDataset) and \
                type(self.dataset).__getitem__ is TensorDataset.__getitem__:
            yield from self._tensor_batches()
            return
        for indices in self.batch_sampler:
            yield self.collate_fn([self.dataset[i] for i in indices])

    def _tensor_batches(self) -> Iterator[list]:
        """Batches of a TensorDataset: one slice (sequential) or one gather (otherwise) of each
        tensor per batch, equal to what collating its samples would give."""
        tensors = self.dataset.tensors
        batches = self.batch_sampler
        plain = type(batches) is BatchSampler
        if plain and type(batches.sampler) is SequentialSampler:
            n, size = len(self.dataset), batches.batch_size
            stop_at = n - n % size if batches.drop_last else n
            for start in range(0, stop_at, size):
                yield [t[start:start + size].clone() for t in tensors]
            return
        if plain and type(batches.sampler) is RandomSampler:
            order, size = batches.sampler.indices(), batches.batch_size
            count = len(order) - len(order) % size if batches.drop_last else len(order)
            groups = (order[start:start + size] for start in range(0, count, size))
        else:
            groups = (np.asarray(b, dtype=np.int64) for b in batches)
        for idx in groups:
            index = {}
            batch = []
            for t in tensors:
                dev = t.device
                if dev not in index:
                    index[dev] = tensor(idx, device=dev)
                batch.append(t[index[dev]])
            yield batch

    def __len__(self) -> int:
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)
