"""``DataLoader``: iterate over a dataset in (shuffled) batches."""
from __future__ import annotations

import math
import multiprocessing
import warnings
from collections.abc import Callable, Iterator
from itertools import islice

import numpy as np

from ..dygraph import tensor
from .collate import default_collate, default_convert
from .dataset import IterableDataset, TensorDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader"]


class DataLoader:
    """Batches of ``dataset``'s samples, merged by ``collate_fn`` (default: PyTorch's rules).

    ``shuffle=True`` draws a new order each epoch from hybridfw's generator (so
    ``hf.manual_seed`` makes it reproducible), or from ``generator`` (an ``hf.Generator`` or a
    numpy ``Generator``).
    A ``TensorDataset`` with the default collation is batched by indexing each tensor once per
    batch instead of stacking samples one by one. An ``IterableDataset`` takes no sampler
    (nor ``shuffle``): its samples are batched as they come.

    Loading runs in the calling process: ``num_workers > 0`` warns and loads there too, so no
    worker is started and ``worker_init_fn`` is never called (as with ``num_workers=0`` in
    PyTorch). The other PyTorch options are accepted and checked as PyTorch checks them
    (``prefetch_factor`` and ``persistent_workers`` need ``num_workers > 0``, ``timeout >= 0``)
    but change nothing here: ``timeout``, ``multiprocessing_context``, ``prefetch_factor``,
    ``persistent_workers``, ``pin_memory``, ``pin_memory_device`` and ``in_order`` (batches
    always come in order).

    Example::

        >>> ds = hf.data.TensorDataset(hf.randn(100, 3), hf.randint(0, 2, (100,)))
        >>> for x, y in hf.data.DataLoader(ds, batch_size=32, shuffle=True, drop_last=True):
        ...     print(x.shape, y.shape)        # (32, 3) (32,), three times
    """

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | None = None, batch_sampler=None, num_workers: int = 0,
                 collate_fn: Callable | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context=None, generator=None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True):
        iterable = isinstance(dataset, IterableDataset)
        if not iterable and not hasattr(dataset, "__getitem__"):
            raise TypeError(f"DataLoader: dataset must support indexing (a map-style Dataset) "
                            f"or be an IterableDataset, got {type(dataset).__name__}")
        if batch_size is not None and (isinstance(batch_size, bool) or
                                       not isinstance(batch_size, int) or batch_size <= 0):
            raise ValueError(f"DataLoader: batch_size must be a positive int or None, got "
                             f"{batch_size!r}")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be an int >= 0, got {num_workers!r}")
        if timeout < 0:
            raise ValueError(f"DataLoader: timeout option should be non-negative, got {timeout!r}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(f"DataLoader: prefetch_factor={prefetch_factor!r} could only be "
                             "specified in multiprocessing; let num_workers > 0 to enable "
                             "multiprocessing, otherwise set prefetch_factor to None")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError(f"DataLoader: prefetch_factor option should be non-negative, got "
                             f"{prefetch_factor!r}")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
        if multiprocessing_context is not None:
            _check_multiprocessing_context(multiprocessing_context, num_workers)
        if num_workers > 0:
            warnings.warn(f"DataLoader: num_workers={num_workers} is not supported; samples are "
                          "loaded in the main process", UserWarning, stacklevel=2)
        if iterable:
            if shuffle not in (False, None):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle!r}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler!r}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler!r}")
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
        if iterable:  # (no sampler: the dataset gives the order)
            self._auto_collation = batch_size is not None
        else:
            if sampler is None:
                sampler = RandomSampler(dataset, generator=generator) if shuffle else \
                    SequentialSampler(dataset)
            if batch_size is not None and batch_sampler is None:
                batch_sampler = BatchSampler(sampler, batch_size, drop_last)
            self._auto_collation = batch_sampler is not None
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = bool(drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.generator = generator
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.pin_memory_device = pin_memory_device
        self.in_order = in_order
        self._iterable = iterable
        self._default_collate = collate_fn is None
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    def __iter__(self) -> Iterator:
        if self._iterable:
            yield from self._stream_batches()
            return
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

    def _stream_batches(self) -> Iterator:
        """An IterableDataset's samples, converted one by one or in consecutive batches."""
        samples = iter(self.dataset)
        if not self._auto_collation:
            for sample in samples:
                yield self.collate_fn(sample)
            return
        while True:
            batch = list(islice(samples, self.batch_size))
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if self._iterable:  # TypeError unless the dataset has __len__, as in PyTorch
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)


def _check_multiprocessing_context(context, num_workers: int) -> None:
    if num_workers == 0:
        raise ValueError("DataLoader: multiprocessing_context can only be used with "
                         "multi-process loading (num_workers > 0), but got num_workers=0")
    if isinstance(context, str):
        methods = multiprocessing.get_all_start_methods()
        if context not in methods:
            raise ValueError(f"DataLoader: multiprocessing_context option should specify a "
                             f"valid start method in {methods!r}, but got "
                             f"multiprocessing_context={context!r}")
    elif not isinstance(context, multiprocessing.context.BaseContext):
        raise TypeError(f"DataLoader: multiprocessing_context option should be a valid context "
                        f"object or a string specifying the start method, but got "
                        f"multiprocessing_context={context!r}")
