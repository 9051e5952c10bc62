"""``hf.data``: datasets, samplers and the DataLoader (PyTorch's ``torch.utils.data``).

Example::

    >>> import hybridfw as hf
    >>> hf.manual_seed(0)
    >>> ds = hf.data.TensorDataset(hf.arange(10).float(), hf.arange(10))
    >>> loader = hf.data.DataLoader(ds, batch_size=4, shuffle=True)
    >>> [y.tolist() for _, y in loader]      # the same order for the same seed
"""
from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .dataset import (ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset,
                      random_split)
from .distributed import DistributedSampler
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "Subset",
           "random_split", "DataLoader", "Sampler", "SequentialSampler", "RandomSampler",
           "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler", "default_collate",
           "default_convert", "DistributedSampler"]
