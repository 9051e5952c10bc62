"""Helpers shared by the op tests."""
import numpy as np
import pytest

import hybridfw as hf


def check_matches_torch(run, call):
    """``run(module, call)`` with torch and with hybridfw give equal values and dtypes (skipped
    without torch)."""
    torch = pytest.importorskip("torch")
    got, ours = run(torch, call), run(hf, call)
    np.testing.assert_array_equal(got.numpy(), ours.numpy())
    assert str(got.dtype).split(".")[-1] == str(ours.dtype).split(".")[-1]
