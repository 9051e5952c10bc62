"""A uint8 index tensor is PyTorch's legacy byte mask: it selects like the bool mask of its
nonzero elements (with PyTorch's deprecation warning), for reading and for writing. It was read
as integer indices (``x[mask.byte()]`` gathered rows 1, 0, 1 instead of selecting rows 0 and
2), silently giving other values and shapes than PyTorch."""
import numpy as np
import pytest

import hybridfw as hf

X = np.arange(12.0).reshape(3, 4)
MASK = np.array([1, 0, 2], dtype=np.uint8)


def test_uint8_index_reads_as_a_mask():
    x = hf.tensor(X)
    with pytest.warns(UserWarning, match="uint8"):
        rows = x[hf.from_numpy(MASK)]
    np.testing.assert_array_equal(rows.numpy(), X[MASK != 0])
    with pytest.warns(UserWarning, match="uint8"):
        cols = x[:, hf.from_numpy(np.array([0, 1, 1, 0], np.uint8))]
    np.testing.assert_array_equal(cols.numpy(), X[:, [1, 2]])
    torch = pytest.importorskip("torch")
    with pytest.warns(UserWarning):
        ref = torch.tensor(X)[torch.from_numpy(MASK)]
    np.testing.assert_array_equal(rows.numpy(), ref.numpy())


def test_uint8_index_writes_as_a_mask():
    x = hf.tensor(X)
    with pytest.warns(UserWarning, match="uint8"):
        x[hf.from_numpy(MASK)] = hf.ones(2, 4, dtype=hf.float64)
    expected = X.copy()
    expected[MASK != 0] = 1.0
    np.testing.assert_array_equal(x.numpy(), expected)
    torch = pytest.importorskip("torch")
    t = torch.tensor(X)
    with pytest.warns(UserWarning):
        t[torch.from_numpy(MASK)] = torch.ones(2, 4, dtype=torch.float64)
    np.testing.assert_array_equal(x.numpy(), t.numpy())


def test_uint8_where_condition_reads_as_a_mask():
    """``where`` takes a uint8 condition as PyTorch does (with its deprecation warning); it
    raised TypeError."""
    cond = hf.from_numpy(MASK)
    with pytest.warns(UserWarning, match="uint8"):
        out = hf.where(cond, hf.tensor([1.0, 2.0, 3.0]), 0.0)
    assert out.dtype is hf.float32 and out.tolist() == [1.0, 0.0, 3.0]
    with pytest.warns(UserWarning, match="uint8"):
        assert hf.tensor([1, 2, 3]).where(cond, -1).tolist() == [1, -1, 3]
    with pytest.raises(TypeError, match="where: condition must be a bool tensor"):
        hf.where(cond.int(), 1.0, 0.0)  # other integer conditions stay refused, as in PyTorch
    torch = pytest.importorskip("torch")
    with pytest.warns(UserWarning):
        ref = torch.where(torch.from_numpy(MASK), torch.tensor([1.0, 2.0, 3.0]), 0.0)
    assert ref.tolist() == out.tolist()
