"""IterableDataset, ConcatDataset / Dataset.__add__ and DataLoader's remaining PyTorch options,
against hand-computed values and torch.utils.data."""
import multiprocessing

import pytest

import hybridfw as hf
from hybridfw.data import ConcatDataset, DataLoader, Dataset, IterableDataset, TensorDataset


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


class SizedStream(Stream):
    def __len__(self):
        return self.n


class Items(Dataset):
    def __init__(self, items):
        self.items = items

    def __getitem__(self, i):
        return self.items[i]

    def __len__(self):
        return len(self.items)


def batches(loader):
    return [b.tolist() if hasattr(b, "tolist") else b for b in loader]


def test_iterable_dataset_batches_consecutive_items():
    assert batches(DataLoader(Stream(7), batch_size=3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert batches(DataLoader(Stream(7), batch_size=3, drop_last=True)) == \
        [[0, 1, 2], [3, 4, 5]]
    assert batches(DataLoader(Stream(6), batch_size=3, drop_last=True)) == [[0, 1, 2], [3, 4, 5]]
    assert batches(DataLoader(Stream(3), batch_size=None)) == [0, 1, 2]
    assert batches(DataLoader(Stream(4), batch_size=2, shuffle=False)) == [[0, 1], [2, 3]]
    assert batches(DataLoader(Stream(0), batch_size=2)) == []
    loader = DataLoader(Stream(5), batch_size=2)
    assert batches(loader) == batches(loader)  # each epoch iterates the dataset anew
    with pytest.raises(TypeError):
        Stream(3)[0]


def test_iterable_dataset_len():
    with pytest.raises(TypeError):
        len(DataLoader(Stream(7), batch_size=3))
    assert len(DataLoader(SizedStream(7), batch_size=3)) == 3
    assert len(DataLoader(SizedStream(7), batch_size=3, drop_last=True)) == 2
    assert len(DataLoader(SizedStream(7), batch_size=None)) == 7


def test_iterable_dataset_refuses_samplers_like_torch():
    with pytest.raises(ValueError, match="IterableDataset: expected unspecified shuffle"):
        DataLoader(Stream(3), shuffle=True)
    with pytest.raises(ValueError, match="IterableDataset: expected unspecified sampler"):
        DataLoader(Stream(3), sampler=[0, 1, 2])
    with pytest.raises(ValueError, match="IterableDataset: expected unspecified batch_sampler"):
        DataLoader(Stream(3), batch_sampler=[[0, 1]])
    with pytest.raises(TypeError, match="abstract"):
        IterableDataset()


def plain(value):
    """Tensors (of either library) as lists, inside dicts and lists."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value.tolist() if hasattr(value, "tolist") else value


def test_iterable_dataset_matches_torch():
    torch = pytest.importorskip("torch")

    class TorchStream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter([{"x": float(i), "y": [i, -i]} for i in range(7)])

    class OurStream(IterableDataset):
        def __iter__(self):
            return iter([{"x": float(i), "y": [i, -i]} for i in range(7)])

    for kwargs in ({"batch_size": 3}, {"batch_size": 2, "drop_last": True},
                   {"batch_size": None}):
        ours = list(DataLoader(OurStream(), **kwargs))
        theirs = list(torch.utils.data.DataLoader(TorchStream(), **kwargs))
        assert len(ours) == len(theirs)
        assert plain(ours) == plain(theirs)


def test_concat_dataset_indices_and_sizes():
    a, b, c = Items([0, 1, 2]), Items([]), Items([10, 11])
    ds = ConcatDataset([a, b, c])
    assert ds.cumulative_sizes == [3, 3, 5]
    assert len(ds) == 5
    assert [ds[i] for i in range(5)] == [0, 1, 2, 10, 11]
    assert [ds[-i] for i in range(1, 6)] == [11, 10, 2, 1, 0]
    with pytest.raises(ValueError, match="ConcatDataset: absolute value of index -6"):
        ds[-6]
    with pytest.raises(IndexError, match="ConcatDataset: index 5 is out of range"):
        ds[5]
    with pytest.raises(AssertionError, match="empty"):
        ConcatDataset([])
    with pytest.raises(AssertionError, match="IterableDataset"):
        ConcatDataset([a, Stream(2)])
    added = a + c
    assert isinstance(added, ConcatDataset) and [added[i] for i in range(5)] == [0, 1, 2, 10, 11]
    tensors = TensorDataset(hf.arange(4)) + TensorDataset(hf.arange(10, 12))
    assert [x.tolist() for (x,) in DataLoader(tensors, batch_size=4)] == [[0, 1, 2, 3], [10, 11]]


def test_concat_dataset_matches_torch():
    torch = pytest.importorskip("torch")

    parts = [[1, 2], [3], [], [4, 5, 6]]
    ours = ConcatDataset([Items(p) for p in parts])
    theirs = torch.utils.data.ConcatDataset([Items(p) for p in parts])  # (any sized indexable)
    assert ours.cumulative_sizes == theirs.cumulative_sizes
    assert [ours[i] for i in range(-6, 6)] == [theirs[i] for i in range(-6, 6)]


def test_loader_accepts_torch_options():
    ds = TensorDataset(hf.arange(5))
    loader = DataLoader(ds, batch_size=2, timeout=0, worker_init_fn=None,
                        multiprocessing_context=None, prefetch_factor=None,
                        persistent_workers=False, pin_memory_device="", in_order=True)
    assert [x.tolist() for (x,) in loader] == [[0, 1], [2, 3], [4]]
    calls = []
    with pytest.warns(UserWarning, match="main process"):
        loader = DataLoader(ds, batch_size=2, num_workers=2, persistent_workers=True,
                            worker_init_fn=calls.append, in_order=False,
                            multiprocessing_context=multiprocessing.get_all_start_methods()[0])
    assert loader.prefetch_factor == 2  # PyTorch's default with workers
    assert [x.tolist() for (x,) in loader] == [[0, 1], [2, 3], [4]]
    assert calls == []  # no worker is started
    assert loader.timeout == 0 and loader.persistent_workers and not loader.in_order


def test_loader_option_errors_like_torch():
    ds = TensorDataset(hf.arange(5))
    with pytest.raises(ValueError, match="prefetch_factor=2 could only be specified"):
        DataLoader(ds, prefetch_factor=2)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        DataLoader(ds, persistent_workers=True)
    with pytest.raises(ValueError, match="timeout option should be non-negative"):
        DataLoader(ds, timeout=-1)
    with pytest.raises(ValueError, match="multiprocessing_context can only be used"):
        DataLoader(ds, multiprocessing_context="spawn")
    with pytest.raises(ValueError, match="prefetch_factor option should be non-negative"):
        DataLoader(ds, num_workers=1, prefetch_factor=-1)
    with pytest.raises(ValueError, match="valid start method"):
        DataLoader(ds, num_workers=1, multiprocessing_context="teleport")
    with pytest.raises(TypeError, match="valid context"):
        DataLoader(ds, num_workers=1, multiprocessing_context=3)


def test_loader_option_errors_agree_with_torch():
    torch = pytest.importorskip("torch")
    ds = TensorDataset(hf.arange(5))
    tds = torch.utils.data.TensorDataset(torch.arange(5))
    for kwargs in ({"prefetch_factor": 2}, {"persistent_workers": True}, {"timeout": -1},
                   {"multiprocessing_context": "spawn"}):
        with pytest.raises(ValueError):
            torch.utils.data.DataLoader(tds, **kwargs)
        with pytest.raises(ValueError):
            DataLoader(ds, **kwargs)
