"""The loop stack token: records as a list of tuples and in stacked form (compiled loops)."""
from __future__ import annotations

import numpy as np
import pytest

from hybridfw.static.loop_stack import new_loop_stack, stacked_loop_stack, stacked_records


def test_a_stacked_token_gives_its_records_as_views_and_keeps_them_through_copies():
    h = np.arange(12.0, dtype=np.float32).reshape(3, 2, 2)
    n = np.array([4, 5, 6], dtype=np.int64)
    token = stacked_loop_stack((3, h, n))
    copied = token.copy()[:]  # the executor copies fetched values; views of it too
    assert copied.stacked[0] == 3 and copied.stacked[1] is h
    records = copied.records
    assert len(records) == 3
    for k, (hk, nk) in enumerate(records):
        np.testing.assert_array_equal(hk, h[k])
        assert np.shares_memory(hk, h)  # views, not copies
        assert isinstance(nk, np.ndarray) and nk.shape == () and nk == n[k]  # 0-d, as recorded


def test_stacked_records_reads_the_stacked_form_without_copying():
    h = np.ones((4, 2, 3), np.float32)
    s = np.arange(4.0)
    token = stacked_loop_stack((4, h, s)).copy()
    count, *items = stacked_records(token, (1, 0), (((), np.float64), ((2, 3), np.float32)))
    assert count == 4 and items[0] is s and items[1] is h


def test_stacked_records_stacks_a_list_of_records():
    rng = np.random.default_rng(0)
    records = [(rng.standard_normal((2, 3)).astype(np.float32), np.array(float(k)),
                rng.standard_normal(4)) for k in range(5)]
    token = new_loop_stack(records)
    count, first, second = stacked_records(token, (2, 1), (((4,), np.float64), ((), np.float64)))
    assert count == 5
    np.testing.assert_array_equal(first, np.stack([r[2] for r in records]))
    np.testing.assert_array_equal(second, np.arange(5.0))
    assert first.flags.c_contiguous and second.shape == (5,)


def test_stacked_records_of_a_loop_that_never_ran():
    count, a, b = stacked_records(new_loop_stack([]), (0, 1),
                                  (((2, 3), np.float32), ((), np.int64)))
    assert count == 0 and a.shape == (0, 2, 3) and a.dtype == np.float32
    assert b.shape == (0,) and b.dtype == np.int64


def test_stacked_records_of_something_else_is_a_clear_error():
    with pytest.raises(RuntimeError, match="holds no records of a forward while_loop"):
        stacked_records(np.empty((0,), np.int64), (0,), (((), np.float32),))
