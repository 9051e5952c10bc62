"""Samplers: the order in which a DataLoader visits dataset indices, and how it batches them."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sized

import numpy as np

from ..random import generator as default_generator

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "BatchSampler"]


class Sampler:
    """Base class: iterating yields dataset indices (or, for batch samplers, lists of them)."""

    def __iter__(self) -> Iterator:
        raise TypeError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Sized):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of the indices (or ``num_samples`` draws with ``replacement``).

    Numbers come from ``generator`` (a numpy ``Generator``), by default hybridfw's CPU
    generator, so ``hf.manual_seed(n)`` makes the order reproducible. Each iteration (epoch)
    draws a new order.
    """

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None, generator=None):
        self.data_source = data_source
        self.replacement = bool(replacement)
        self._num_samples = num_samples
        self.generator = generator
        if num_samples is not None and (isinstance(num_samples, bool) or
                                        not isinstance(num_samples, int) or num_samples <= 0):
            raise ValueError(f"RandomSampler: num_samples must be a positive int, got "
                             f"{num_samples!r}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def indices(self):
        """This epoch's indices as a numpy int64 array."""
        gen = self.generator if self.generator is not None else default_generator()
        n = len(self.data_source)
        count = self.num_samples
        if n == 0 and count > 0:
            raise ValueError(f"RandomSampler: cannot draw {count} samples from an empty dataset")
        if self.replacement:
            return gen.integers(0, n, size=count, dtype=np.int64)
        if count <= n:
            return gen.permutation(n)[:count]
        # More samples than items, without replacement: whole permutations back to back.
        return np.concatenate([gen.permutation(n) for _ in range(-(-count // n))])[:count]

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Group the indices of ``sampler`` into lists of ``batch_size`` (the last one shorter,
    unless ``drop_last``)."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"BatchSampler: batch_size must be a positive int, got "
                             f"{batch_size!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = bool(drop_last)

    def __iter__(self) -> Iterator[list]:
        size = self.batch_size
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
