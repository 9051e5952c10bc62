"""Samplers: the order in which a DataLoader visits dataset indices, and how it batches them."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sized

import numpy as np

from ..random import numpy_generator

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]


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

    Numbers come from ``generator`` (an ``hf.Generator`` or a numpy ``Generator``), by default
    hybridfw's CPU generator, so ``hf.manual_seed(n)`` makes the order reproducible. Each
    iteration (epoch) draws a new order.
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
        gen = numpy_generator(self.generator, type(self).__name__)
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


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order, a new one each iteration (epoch); numbers come
    from ``generator`` as in :class:`RandomSampler`.

    Example::

        >>> import hybridfw as hf
        >>> sorted(hf.data.SubsetRandomSampler([4, 1, 7]))
        [1, 4, 7]
    """

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator:
        gen = numpy_generator(self.generator, type(self).__name__)
        indices = self.indices
        return iter([indices[i] for i in gen.permutation(len(indices)).tolist()])

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probability proportional to ``weights`` (with
    ``replacement``, the default, an index can repeat; without it each index comes at most
    once). A new draw each iteration (epoch); numbers come from ``generator`` as in
    :class:`RandomSampler`.

    Example::

        >>> import hybridfw as hf
        >>> list(hf.data.WeightedRandomSampler([0.0, 1.0, 0.0], num_samples=3))
        [1, 1, 1]
    """

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None):
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples <= 0:
            raise ValueError(f"WeightedRandomSampler: num_samples must be a positive int, got "
                             f"{num_samples!r}")
        self.num_samples = num_samples
        if not isinstance(replacement, bool):
            raise ValueError(f"WeightedRandomSampler: replacement must be a bool, got "
                             f"{replacement!r}")
        if hasattr(weights, "detach"):  # a tensor: its values, as float64
            weights = weights.detach().cpu().numpy()
        weights = np.asarray(weights, dtype=np.float64)
        if weights.ndim != 1:
            raise ValueError(f"WeightedRandomSampler: weights must be a 1-d sequence, got shape "
                             f"{weights.shape}")
        if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:
            raise ValueError("WeightedRandomSampler: weights must be finite, non-negative and "
                             "not all zero")
        if not replacement and self.num_samples > np.count_nonzero(weights):
            raise ValueError(f"WeightedRandomSampler: cannot draw {self.num_samples} samples "
                             f"without replacement from {np.count_nonzero(weights)} nonzero "
                             "weights")
        self.weights = weights
        self._probabilities = weights / weights.sum()
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        gen = numpy_generator(self.generator, type(self).__name__)
        drawn = gen.choice(len(self.weights), size=self.num_samples, replace=self.replacement,
                           p=self._probabilities)
        return iter(drawn.tolist())

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
