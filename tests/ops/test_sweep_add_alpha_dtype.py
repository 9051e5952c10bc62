"""add/sub with ``alpha`` give the dtype ``input`` and ``other`` promote to: float16 minus an
integer tensor times 0.5 stays float16 (``other * alpha`` made the integer tensor float32
first); a float alpha with an integral result is refused, as PyTorch refuses it."""
import numpy as np
import pytest

import hybridfw as hf


def _cases(lib):
    h = lib.tensor([1.0, 2.0], dtype=lib.float16)
    i = lib.tensor([1, 2])
    return [lib.sub(h, i, alpha=0.5), h.add(i, alpha=0.25), lib.add(i, h, alpha=0.5),
            lib.add(i, i, alpha=2), i.sub(2.5, alpha=2)]


EXPECTED = [([0.5, 1.0], "float16"), ([1.25, 2.5], "float16"), ([1.5, 3.0], "float16"),
            ([3, 6], "int64"), ([-4.0, -3.0], "float32")]


def test_alpha_keeps_the_promoted_dtype():
    for got, (values, dtype) in zip(_cases(hf), EXPECTED):
        np.testing.assert_array_equal(got.numpy(), values)
        assert str(got.dtype).endswith(dtype)


def test_inplace_alpha():
    h = hf.tensor([1.0, 2.0], dtype=hf.float16)
    h.sub_(hf.tensor([1, 2]), alpha=0.25)
    np.testing.assert_array_equal(h.numpy(), [0.75, 1.5])
    assert h.dtype is hf.float16


def test_float_alpha_with_an_integral_result_is_refused():
    i = hf.tensor([1, 2])
    with pytest.raises(TypeError, match="add: alpha=0.5"):
        hf.add(i, i, alpha=0.5)
    with pytest.raises(TypeError, match="sub_"):
        i.sub_(i, alpha=1.5)


def _scaled(x, y):
    return hf.sub(x, y, alpha=0.5)


def test_alpha_under_to_static_with_gradient():
    x = hf.tensor([1.0, 2.0], dtype=hf.float16, requires_grad=True)
    out = hf.jit.to_static(_scaled)(x, hf.tensor([2, 4]))
    assert out.dtype is hf.float16
    np.testing.assert_array_equal(out.detach().numpy(), [0.0, 0.0])
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_matches_torch():
    torch = pytest.importorskip("torch")
    for got, ref in zip(_cases(hf), _cases(torch)):
        np.testing.assert_array_equal(got.numpy(), ref.numpy())
        assert str(got.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
