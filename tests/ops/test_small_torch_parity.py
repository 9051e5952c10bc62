"""Small PyTorch behaviours: ``x == None`` is False (``!=`` True), ``element in x``,
``hf.where(condition)`` and ``nonzero`` (also in static programs), ``round(decimals=)``.

Every case checks hand-computed values; where torch is importable it is a second oracle.
"""
import numpy as np
import pytest

import hybridfw as hf

X = [[1.234, 0.0], [5.678, 1234.5]]

# (call on a namespace ``lib`` with x; expected value)
CALLS = [
    ("x == None", False),
    ("x != None", True),
    ("3.0 in lib.tensor([[1.0, 3.0]])", True),
    ("4.0 in lib.tensor([[1.0, 3.0]])", False),
    ("lib.tensor([1.0, 3.0]) in lib.tensor([[1.0, 3.0]])", True),
    ("x.round(decimals=1).tolist()", [[1.2, 0.0], [5.7, 1234.5]]),
    ("x.round(decimals=-2).tolist()", [[0.0, 0.0], [0.0, 1200.0]]),
    ("lib.round(x, decimals=2).tolist()", [[1.23, 0.0], [5.68, 1234.5]]),
    ("lib.round(x).tolist()", [[1.0, 0.0], [6.0, 1234.0]]),
    ("[t.tolist() for t in lib.where(x > 1)]", [[0, 1, 1], [0, 0, 1]]),
    ("lib.nonzero(x).tolist()", [[0, 0], [1, 0], [1, 1]]),
    ("[t.tolist() for t in x.nonzero(as_tuple=True)]", [[0, 1, 1], [0, 0, 1]]),
    ("lib.nonzero(lib.tensor(5)).shape", (1, 0)),
    ("[t.tolist() for t in lib.where(lib.tensor(True))]", [[0]]),
    ("lib.nonzero(lib.zeros(0, 3)).shape", (0, 2)),
    ("lib.nonzero(x).dtype == lib.int64", True),
]


def _run(lib, call):
    return eval(call, {"lib": lib, "x": lib.tensor(X)})


def _same(got, expected):
    if isinstance(expected, tuple):
        assert tuple(got) == expected
    elif isinstance(expected, list):
        np.testing.assert_allclose(np.array(got, dtype=float), np.array(expected, dtype=float),
                                   rtol=1e-6)
    else:
        assert got is expected or bool(got) is expected


@pytest.mark.parametrize("call, expected", CALLS)
def test_call(call, expected):
    _same(_run(hf, call), expected)


@pytest.mark.parametrize("call, expected", CALLS)
def test_matches_torch(call, expected):
    torch = pytest.importorskip("torch")
    _same(_run(torch, call), expected)


def test_eq_none_is_a_python_bool():
    assert (hf.tensor([1]) == None) is False  # noqa: E711
    assert (hf.tensor([1]) != None) is True  # noqa: E711


def _where_positions(x):
    rows, cols = hf.where(x > 1)
    return rows * 10 + cols


def test_where_condition_alone_in_a_static_program():
    out = hf.jit.to_static(_where_positions)(hf.tensor(X))
    np.testing.assert_array_equal(out.numpy(), [0, 10, 11])


def test_where_needs_input_and_other_together():
    with pytest.raises(TypeError, match="where"):
        hf.where(hf.tensor([True]), hf.tensor([1.0]))
