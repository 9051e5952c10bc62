"""Datasets: the map-style ``Dataset`` interface, ``IterableDataset`` (streams),
``TensorDataset``, ``ConcatDataset``, ``Subset``, ``random_split``."""
from __future__ import annotations

from abc import ABC, abstractmethod
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence

from ..dygraph import Tensor
from ..random import numpy_generator

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "Subset",
           "random_split"]


class Dataset(ABC):
    """A map-style dataset: ``dataset[i]`` is sample ``i`` for ``0 <= i < len(dataset)``.

    Example::

        >>> class Squares(hf.data.Dataset):
        ...     def __len__(self):
        ...         return 10
        ...     def __getitem__(self, i):
        ...         return float(i), float(i * i)
    """

    @abstractmethod
    def __getitem__(self, index):
        """Sample ``index``."""

    # ``__len__`` (the number of samples) is not required, as in PyTorch: a dataset without
    # one is read through a ``sampler`` (``len(dataset)`` then raises Python's TypeError)

    def __add__(self, other: "Dataset") -> "ConcatDataset":
        """``a + b``: the samples of ``a`` followed by those of ``b`` (a ``ConcatDataset``)."""
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read as a stream: subclasses define ``__iter__`` (and may define ``__len__``).
    A ``DataLoader`` over one takes no sampler and batches consecutive samples.

    Example::

        >>> class Countdown(hf.data.IterableDataset):
        ...     def __iter__(self):
        ...         return iter(range(5, 0, -1))
        >>> [b.tolist() for b in hf.data.DataLoader(Countdown(), batch_size=2)]
        [[5, 4], [3, 2], [1]]
    """

    __getitem__ = None  # not indexable: ``ds[i]`` raises TypeError, as for any iterator

    @abstractmethod
    def __iter__(self) -> Iterator:
        """The samples, in order."""


class ConcatDataset(Dataset):
    """The samples of ``datasets`` one after the other; ``cumulative_sizes[i]`` is the number of
    samples in the first ``i + 1`` datasets. Negative indices count from the end.

    Example::

        >>> ds = hf.data.ConcatDataset([hf.data.TensorDataset(hf.arange(3)),
        ...                             hf.data.TensorDataset(hf.arange(10, 12))])
        >>> len(ds), ds.cumulative_sizes, ds[3][0].item(), ds[-1][0].item()
        (5, [3, 5], 10, 11)
    """

    def __init__(self, datasets: Iterable[Dataset]):
        self.datasets = list(datasets)
        # AssertionError, as PyTorch raises, so that ported except clauses still match
        if not self.datasets:
            raise AssertionError("ConcatDataset: datasets should not be an empty iterable")
        for i, d in enumerate(self.datasets):
            if isinstance(d, IterableDataset):
                raise AssertionError(f"ConcatDataset: does not support IterableDataset (got "
                                     f"{type(d).__name__} at index {i})")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int):
        n = len(self)
        if index < 0:
            if -index > n:
                raise ValueError(f"ConcatDataset: absolute value of index {index} should not "
                                 f"exceed the dataset length {n}")
            index += n
        if index >= n:
            raise IndexError(f"ConcatDataset: index {index} is out of range for a dataset of "
                             f"length {n}")
        which = bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


class TensorDataset(Dataset):
    """Samples are slices of tensors along their first dimension: ``ds[i] == (t0[i], t1[i], ...)``.

    Example::

        >>> ds = hf.data.TensorDataset(hf.randn(100, 3), hf.randint(0, 2, (100,)))
        >>> x, y = ds[0]
    """

    def __init__(self, *tensors: Tensor):
        if not tensors:
            raise ValueError("TensorDataset: expected at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset: argument {i} must be a hybridfw Tensor, got "
                                f"{type(t).__name__}; convert it with hf.tensor(...)")
            if t.ndim == 0:
                raise ValueError(f"TensorDataset: argument {i} is a 0-d tensor; every tensor "
                                 "needs a first dimension to index samples along")
        sizes = [t.shape[0] for t in tensors]
        if any(s != sizes[0] for s in sizes):
            shapes = ", ".join(f"{tuple(t.shape)}" for t in tensors)
            raise ValueError(f"TensorDataset: all tensors must have the same size in dimension "
                             f"0, got shapes {shapes}")
        self.tensors = tuple(tensors)

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices: Sequence[int]):
        self.dataset = dataset
        self.indices = list(indices)

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset, lengths: Sequence, generator=None) -> list[Subset]:
    """Split ``dataset`` at random into non-overlapping subsets of the given lengths (ints
    summing to ``len(dataset)``, or fractions summing to 1), drawn from hybridfw's generator
    (or ``generator``, an ``hf.Generator``).

    Example::

        >>> train, val = hf.data.random_split(ds, [0.8, 0.2])
    """
    n = len(dataset)
    lengths = list(lengths)
    if lengths and all(isinstance(x, float) for x in lengths) and abs(sum(lengths) - 1) < 1e-9:
        counts = [int(n * frac) for frac in lengths]
        for i in range(n - sum(counts)):  # hand out the remainder round-robin, as PyTorch does
            counts[i % len(counts)] += 1
        lengths = counts
    if any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in lengths) or \
            sum(lengths) != n:
        raise ValueError(f"random_split: lengths must be non-negative ints summing to the "
                         f"dataset's length {n} (or fractions summing to 1), got {lengths}")
    gen = numpy_generator(generator, "random_split")
    order = gen.permutation(n).tolist()
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, order[start:start + length]))
        start += length
    return out
