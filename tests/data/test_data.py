"""Datasets, samplers, default collation and the DataLoader."""
from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    default_convert,
    random_split,
)


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return {"x": np.array([i, i * i], dtype=np.float32), "i": i, "name": f"s{i}"}


def make_ds(n=10):
    return TensorDataset(hf.arange(n * 2).reshape(n, 2).float(), hf.arange(n))


# ---- datasets ---------------------------------------------------------------------------------
def test_tensor_dataset_items_and_len():
    ds = make_ds()
    assert len(ds) == 10
    x, y = ds[3]
    assert x.tolist() == [6.0, 7.0] and y.item() == 3


def test_tensor_dataset_errors():
    with pytest.raises(ValueError, match=r"same size in dimension 0.*\(10, 2\), \(9,\)"):
        TensorDataset(hf.zeros(10, 2), hf.zeros(9))
    with pytest.raises(TypeError, match="argument 1 must be a hybridfw Tensor, got ndarray"):
        TensorDataset(hf.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="0-d"):
        TensorDataset(hf.tensor(1.0))
    with pytest.raises(ValueError, match="at least one"):
        TensorDataset()


def test_dataset_needs_getitem_not_len():
    # as PyTorch's: __getitem__ is required; a dataset without __len__ is read through a
    # sampler, and len() of it raises Python's TypeError
    class NoItem(Dataset):
        def __len__(self):
            return 3
    with pytest.raises(TypeError):
        NoItem()

    class NoLen(Dataset):
        def __getitem__(self, i):
            return float(i) * 2

    ds = NoLen()
    with pytest.raises(TypeError, match="len"):
        len(ds)
    batches = [b.tolist() for b in DataLoader(ds, batch_size=2, sampler=range(5))]
    assert batches == [[0.0, 2.0], [4.0, 6.0], [8.0]]


def test_subset_and_random_split_are_seeded():
    ds = make_ds()
    hf.manual_seed(3)
    a, b = random_split(ds, [7, 3])
    hf.manual_seed(3)
    a2, b2 = random_split(ds, [0.7, 0.3])
    assert a.indices == a2.indices and b.indices == b2.indices
    assert sorted(a.indices + b.indices) == list(range(10))
    assert isinstance(a, Subset) and a[0][1].item() == a.indices[0]
    with pytest.raises(ValueError, match="summing to the dataset's length 10"):
        random_split(ds, [5, 6])


# ---- batching ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fast", [True, False])
def test_sequential_batches(fast):
    ds = make_ds()
    loader = DataLoader(ds, batch_size=4, collate_fn=None if fast else default_collate)
    batches = list(loader)
    assert len(loader) == len(batches) == 3
    assert [y.tolist() for _, y in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    x, y = batches[0]
    assert isinstance(batches[0], list) and x.shape == (4, 2) and x.dtype == hf.float32
    assert y.dtype == hf.int64
    x.fill_(-1.0)  # a batch is a copy: writing to it leaves the dataset alone
    assert ds.tensors[0][0].tolist() == [0.0, 1.0]


@pytest.mark.parametrize("fast", [True, False])
def test_drop_last(fast):
    loader = DataLoader(make_ds(), batch_size=4, drop_last=True, shuffle=True,
                        collate_fn=None if fast else default_collate)
    batches = list(loader)
    assert len(loader) == len(batches) == 2
    assert all(x.shape == (4, 2) for x, _ in batches)
    loader = DataLoader(make_ds(), batch_size=5, drop_last=True)
    assert len(loader) == 2 and [len(y) for _, y in loader] == [5, 5]


@pytest.mark.parametrize("fast", [True, False])
def test_shuffle_is_deterministic_under_manual_seed(fast):
    ds = make_ds(50)
    collate = None if fast else default_collate

    def epoch_orders(seed):
        hf.manual_seed(seed)
        loader = DataLoader(ds, batch_size=8, shuffle=True, collate_fn=collate)
        return [[i for _, y in loader for i in y.tolist()] for _ in range(2)]

    first, second = epoch_orders(123)
    assert sorted(first) == list(range(50)) and first != list(range(50))
    assert first != second  # each epoch draws a new order
    assert epoch_orders(123) == [first, second]
    assert epoch_orders(124)[0] != first


def test_fast_path_equals_per_sample_collation():
    ds = TensorDataset(hf.randn(23, 3, 2), hf.randint(0, 5, (23,)), hf.rand(23) > 0.5)
    for shuffle in (False, True):
        hf.manual_seed(9)
        fast = list(DataLoader(ds, batch_size=5, shuffle=shuffle))
        hf.manual_seed(9)
        slow = list(DataLoader(ds, batch_size=5, shuffle=shuffle, collate_fn=default_collate))
        assert len(fast) == len(slow) == 5
        for fb, sb in zip(fast, slow):
            for f, s in zip(fb, sb):
                assert f.dtype == s.dtype and f.shape == s.shape
                np.testing.assert_array_equal(f.numpy(), s.numpy())


def test_tensor_dataset_subclass_getitem_is_honoured():
    class Doubled(TensorDataset):
        def __getitem__(self, index):
            x, y = super().__getitem__(index)
            return x * 2, y

    x, y = next(iter(DataLoader(Doubled(*make_ds().tensors), batch_size=2)))
    assert x.tolist() == [[0.0, 2.0], [4.0, 6.0]] and y.tolist() == [0, 1]


def test_custom_sampler_and_batch_sampler():
    ds = make_ds()
    loader = DataLoader(ds, batch_size=3, sampler=list(reversed(range(10))))
    assert [y.tolist() for _, y in loader] == [[9, 8, 7], [6, 5, 4], [3, 2, 1], [0]]
    loader = DataLoader(ds, batch_sampler=[[0, 5], [2, 2, 2]])
    assert [y.tolist() for _, y in loader] == [[0, 5], [2, 2, 2]]
    bs = BatchSampler(SequentialSampler(range(7)), 3, drop_last=False)
    assert list(bs) == [[0, 1, 2], [3, 4, 5], [6]] and len(bs) == 3
    gen = np.random.default_rng(0)
    rs = RandomSampler(range(5), replacement=True, num_samples=12, generator=gen)
    assert len(list(rs)) == 12 and all(0 <= i < 5 for i in rs)
    rs = RandomSampler(range(4), num_samples=10)
    drawn = list(rs)
    assert len(drawn) == 10 and sorted(drawn[:4]) == [0, 1, 2, 3]


def test_subset_random_and_weighted_random_samplers():
    ds = make_ds()
    loader = DataLoader(ds, batch_size=2, sampler=SubsetRandomSampler([1, 3, 5, 7, 9]))
    hf.manual_seed(3)
    first = [y.tolist() for _, y in loader]
    assert [len(b) for b in first] == [2, 2, 1] and len(loader) == 3
    assert sorted(sum(first, [])) == [1, 3, 5, 7, 9]
    hf.manual_seed(3)  # the seed decides the order
    assert [y.tolist() for _, y in loader] == first

    hf.manual_seed(0)
    drawn = list(WeightedRandomSampler(hf.tensor([1.0, 3.0, 0.0, 6.0]), 20000))
    np.testing.assert_allclose(np.bincount(drawn, minlength=4) / 20000, [0.1, 0.3, 0.0, 0.6],
                               atol=0.02)
    once = WeightedRandomSampler([1, 2, 3, 0], 3, replacement=False)
    assert sorted(once) == [0, 1, 2] and len(once) == 3
    loader = DataLoader(ds, batch_size=4, sampler=WeightedRandomSampler([0.0] * 9 + [1.0], 6))
    assert [y.tolist() for _, y in loader] == [[9, 9, 9, 9], [9, 9]]
    with pytest.raises(ValueError, match="WeightedRandomSampler: num_samples .* 0"):
        WeightedRandomSampler([1.0, 2.0], 0)
    with pytest.raises(ValueError, match="cannot draw 3 samples without replacement"):
        WeightedRandomSampler([1.0, 2.0], 3, replacement=False)
    with pytest.raises(ValueError, match="1-d sequence, got shape \\(1, 2\\)"):
        WeightedRandomSampler([[1.0, 2.0]], 1)
    with pytest.raises(ValueError, match="non-negative"):
        WeightedRandomSampler([-1.0, 2.0], 1)


def test_batch_size_none_yields_converted_samples():
    loader = DataLoader(Squares(3), batch_size=None)
    items = list(loader)
    assert len(loader) == 3 and isinstance(items[1]["x"], hf.Tensor)
    assert items[1]["i"] == 1 and items[2]["x"].tolist() == [2.0, 4.0]


def test_batch_size_none_over_tensor_dataset_yields_lists_like_torch():
    ds = TensorDataset(hf.arange(3), hf.arange(3) * 2)
    items = list(DataLoader(ds, batch_size=None))
    assert all(type(item) is list and len(item) == 2 for item in items)  # tuples become lists
    assert [[int(a), int(b)] for a, b in items] == [[0, 0], [1, 2], [2, 4]]
    assert all(isinstance(t, hf.Tensor) and t.ndim == 0 for item in items for t in item)
    Pair = namedtuple("Pair", "x y")
    converted = default_convert(Pair(np.array([1, 2]), (np.float32(2.0),)))
    assert type(converted) is Pair and converted.x.tolist() == [1, 2]
    assert type(converted.y) is list and converted.y[0].item() == 2.0
    torch = pytest.importorskip("torch")
    tds = torch.utils.data.TensorDataset(torch.arange(3), torch.arange(3) * 2)
    titems = list(torch.utils.data.DataLoader(tds, batch_size=None))
    assert [type(i) for i in titems] == [type(i) for i in items]
    assert [[int(a), int(b)] for a, b in titems] == [[int(a), int(b)] for a, b in items]


def test_loader_argument_errors():
    ds = make_ds()
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(ds, sampler=SequentialSampler(ds), shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        DataLoader(ds, batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError, match="batch_size must be a positive int or None, got 0"):
        DataLoader(ds, batch_size=0)
    with pytest.raises(ValueError, match="drop_last"):
        DataLoader(ds, batch_size=None, drop_last=True)
    with pytest.raises(TypeError, match="must support indexing"):
        DataLoader(42)
    with pytest.warns(UserWarning, match="num_workers=2"):
        assert len(list(DataLoader(ds, batch_size=5, num_workers=2))) == 2


# ---- default collation ------------------------------------------------------------------------
def test_collate_dicts_numbers_strings_arrays():
    batch = default_collate([Squares(4)[i] for i in range(3)])
    assert set(batch) == {"x", "i", "name"}
    assert batch["x"].shape == (3, 2) and batch["x"].dtype == hf.float32
    assert batch["i"].tolist() == [0, 1, 2] and batch["i"].dtype == hf.int64
    assert batch["name"] == ["s0", "s1", "s2"]
    floats = default_collate([0.5, 1.5])
    assert floats.dtype == hf.float64 and floats.tolist() == [0.5, 1.5]
    assert default_collate([True, False]).dtype == hf.bool
    assert default_collate([np.float32(1), np.float32(2)]).dtype == hf.float32
    assert default_collate([np.int32(1), np.int32(2)]).dtype == hf.int32


def test_collate_tuples_lists_namedtuples_ordered_dicts():
    Point = namedtuple("Point", ["x", "y"])
    out = default_collate([(hf.ones(2), 1, [2.0, "a"]), (hf.zeros(2), 2, [3.0, "b"])])
    assert isinstance(out, list) and out[0].tolist() == [[1, 1], [0, 0]]
    assert out[1].tolist() == [1, 2] and out[2][0].tolist() == [2.0, 3.0]
    assert out[2][1] == ("a", "b")  # a field of strings: the tuple zip makes, as PyTorch
    pairs = default_collate([("a", 1), ("b", 2)])
    assert pairs[0] == ("a", "b") and pairs[1].tolist() == [1, 2]
    assert default_collate(["x", "y"]) == ["x", "y"]
    p = default_collate([Point(1, 2.0), Point(3, 4.0)])
    assert isinstance(p, Point) and p.x.tolist() == [1, 3] and p.y.dtype == hf.float64
    od = default_collate([OrderedDict(b=1, a=2), OrderedDict(b=3, a=4)])
    assert isinstance(od, OrderedDict) and list(od) == ["b", "a"]


def test_collate_errors():
    with pytest.raises(ValueError, match=r"sample 0 has shape \(2,\), sample 1 has shape \(3,\)"):
        default_collate([hf.zeros(2), hf.zeros(3)])
    with pytest.raises(ValueError, match="same length"):
        default_collate([[1, 2], [1]])
    with pytest.raises(KeyError, match="sample 1 has no key 'b'"):
        default_collate([{"a": 1, "b": 2}, {"a": 1}])
    with pytest.raises(TypeError, match="found object"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="dtype object"):
        default_collate([np.array([None]), np.array([None])])
    with pytest.raises(ValueError, match="non-empty"):
        default_collate([])


def test_loader_on_a_python_dataset():
    loader = DataLoader(Squares(5), batch_size=2)
    batches = list(loader)
    assert len(batches) == 3 and batches[2]["x"].shape == (1, 2)
    assert batches[0]["name"] == ["s0", "s1"]
