"""An empty list used as an index is an int64 index (PyTorch's ``x[[]]`` has shape (0, ...)),
read and written, eagerly and in static programs."""
import numpy as np
import pytest

import hybridfw as hf

X = np.arange(12, dtype=np.float32).reshape(3, 4)


def _empty_reads(x):
    return x[[]].sum() + x[:, []].sum() + 1.0


def test_read_shapes():
    x = hf.tensor(X)
    assert x[[]].shape == (0, 4) and x[[]].dtype is hf.float32
    assert x[:, []].shape == (3, 0)
    torch = pytest.importorskip("torch")
    t = torch.tensor(X)
    assert tuple(t[[]].shape) == (0, 4) and tuple(t[:, []].shape) == (3, 0)


def test_write_changes_nothing_and_static_reads():
    y = hf.tensor(X)
    y[[]] = 5.0
    np.testing.assert_array_equal(y.numpy(), X)
    assert hf.jit.to_static(_empty_reads)(hf.tensor(X)).item() == 1.0
