"""Turning a list of samples into a batch (``default_collate``), PyTorch's rules.

- tensors are stacked along a new first dimension; numpy arrays and numpy scalars become
  tensors of their dtype and are stacked;
- Python floats become a float64 tensor, ints an int64 tensor, bools a bool tensor;
- strings and bytes stay a list;
- dicts are collated key by key, tuples and lists position by position (a tuple gives a list, a
  namedtuple the same namedtuple).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..dtypes import float64
from ..dygraph import Tensor, from_numpy, tensor
from ..ops.composite import stack

__all__ = ["default_collate", "default_convert"]

_BAD_NUMPY_KINDS = "OUSVM"  # object, strings, structured, datetime: nothing a tensor can hold


def _check_numpy(arr, where: str) -> None:
    if arr.dtype.kind in _BAD_NUMPY_KINDS:
        raise TypeError(f"{where}: batch must contain tensors, numpy arrays of numbers, "
                        f"numbers, dicts or lists; found a numpy array of dtype {arr.dtype}")


def _check_shapes(batch, shape_of) -> None:
    first = shape_of(batch[0])
    for i, item in enumerate(batch):
        if shape_of(item) != first:
            raise ValueError(f"default_collate: every sample must have the same shape to stack "
                             f"into a batch; sample 0 has shape {first}, sample {i} has shape "
                             f"{shape_of(item)}")


def default_collate(batch: list):
    """Merge a list of samples into a batch (see the module docstring for the rules).

    Example::

        >>> b = default_collate([(hf.ones(2), 0), (hf.zeros(2), 1)])
        >>> b[0].shape, b[1].tolist()
        ((2, 2), [0, 1])
    """
    if not isinstance(batch, (list, tuple)) or not batch:
        raise ValueError(f"default_collate: expected a non-empty list of samples, got "
                         f"{type(batch).__name__}" + (" (empty)" if not batch else ""))
    elem = batch[0]
    if isinstance(elem, Tensor):
        _check_shapes(batch, lambda t: tuple(t.shape) if isinstance(t, Tensor) else type(t))
        return stack(batch)
    if isinstance(elem, np.ndarray):
        _check_numpy(elem, "default_collate")
        _check_shapes(batch, lambda a: a.shape if isinstance(a, np.ndarray) else type(a))
        return from_numpy(np.ascontiguousarray(np.stack(batch)))
    if isinstance(elem, np.generic):
        arr = np.array(batch)
        _check_numpy(arr, "default_collate")
        return from_numpy(arr)
    if isinstance(elem, float):
        return tensor(batch, dtype=float64)
    if isinstance(elem, int):  # bools included: a batch of bools is a bool tensor
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch  # as given: a list of samples, the tuple a field of tuple samples makes
    if isinstance(elem, Mapping):
        out = {}
        for key in elem:
            values = []
            for i, sample in enumerate(batch):
                if not isinstance(sample, Mapping) or key not in sample:
                    raise KeyError(f"default_collate: sample {i} has no key {key!r} (sample 0 "
                                   f"has keys {list(elem)})")
                values.append(sample[key])
            out[key] = default_collate(values)
        if type(elem) is dict:
            return out
        try:
            return type(elem)(out)
        except TypeError:
            return out
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, Sequence):
        for i, sample in enumerate(batch):
            if not isinstance(sample, Sequence) or len(sample) != len(elem):
                raise ValueError(f"default_collate: every sample must have the same length; "
                                 f"sample 0 has {len(elem)} elements, sample {i} "
                                 + (f"has {len(sample)}" if isinstance(sample, Sequence)
                                    else f"is a {type(sample).__name__}"))
        return [default_collate(s) for s in zip(*batch)]
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                    f"or lists; found {type(elem).__name__}")


def default_convert(data):
    """Convert one unbatched sample: numpy arrays and scalars to tensors, recursively through
    dicts, tuples and lists (what a DataLoader with ``batch_size=None`` yields). A plain tuple
    becomes a list, as in PyTorch; a namedtuple stays one."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)):
        arr = np.asarray(data)
        if arr.dtype.kind in _BAD_NUMPY_KINDS:
            return data
        return tensor(arr)
    if isinstance(data, Mapping):
        out = {k: default_convert(v) for k, v in data.items()}
        return out if type(data) is dict else type(data)(out)
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):  # a list, as in PyTorch (a TensorDataset sample included)
        return [default_convert(d) for d in data]
    if isinstance(data, list):
        return type(data)(default_convert(d) for d in data)
    return data
