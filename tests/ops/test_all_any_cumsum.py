"""``all``/``any`` with ``dim``/``keepdim`` (methods and ``hf.`` functions; non-bool inputs
test ``!= 0``) and ``cumsum(dim, dtype=)`` (cast before summing), as in PyTorch.

Every case checks hand-computed values; where torch is importable it is a second oracle.
"""
import numpy as np
import pytest

import hybridfw as hf

B = [[True, False], [True, True]]
F = [[1.0, 0.0], [float("nan"), 2.0]]

# (call on a namespace ``lib`` with b (bool) and f (float); expected value)
CALLS = [
    ("b.all(1)", [False, True]),
    ("b.any(1)", [True, True]),
    ("b.all(dim=0, keepdim=True)", [[True, False]]),
    ("b.any(0, True)", [[True, True]]),
    ("lib.all(b)", False),
    ("lib.any(b)", True),
    ("lib.all(input=f, dim=1)", [False, True]),  # nan != 0
    ("lib.any(f, dim=0)", [True, True]),
    ("f.all()", False),
    ("lib.zeros(0).all()", True),
    ("lib.zeros(0).any()", False),
    ("lib.zeros(2, 0).all(1)", [True, True]),
    ("lib.tensor([1, 2, 0]).all()", False),
    ("lib.tensor([0, 0, 3]).any()", True),
]


def _run(lib, call):
    return eval(call, {"lib": lib, "b": lib.tensor(B), "f": lib.tensor(F)})


@pytest.mark.parametrize("call, expected", CALLS)
def test_all_any(call, expected):
    out = _run(hf, call)
    assert out.dtype is hf.bool
    np.testing.assert_array_equal(out.numpy(), expected)
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(_run(torch, call).numpy(), expected)


def test_all_any_in_a_static_program():
    @hf.jit.to_static
    def f(x):
        return x.all(1, keepdim=True) | hf.any(x, dim=1, keepdim=True)

    np.testing.assert_array_equal(f(hf.tensor([[0, 1], [0, 0]])).numpy(), [[True], [False]])


def test_cumsum_dtype_casts_before_summing():
    out = hf.tensor([1, 2]).cumsum(0, dtype=hf.float32)
    assert out.dtype is hf.float32
    np.testing.assert_array_equal(out.numpy(), [1.0, 3.0])
    big = hf.tensor([100, 100], dtype=hf.int8).cumsum(0, dtype=hf.int16)
    assert big.dtype is hf.int16 and big.tolist() == [100, 200]
    out = hf.cumsum(hf.tensor([[1.5, 2.5]]), dim=1, dtype=hf.float64)
    assert out.dtype is hf.float64 and out.tolist() == [[1.5, 4.0]]
    x = hf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x.cumsum(0, dtype=hf.float64).sum().backward()
    assert x.grad.dtype is hf.float32 and x.grad.tolist() == [3.0, 2.0, 1.0]
