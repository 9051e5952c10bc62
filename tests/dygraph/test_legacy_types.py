"""PyTorch's legacy typed constructors (``hf.FloatTensor`` ... ``hf.BoolTensor``) and
``Tensor.type()`` (they were missing, and ``x.type()`` raised TypeError): data or sizes, the
dtype, ``isinstance`` by dtype, and casts by legacy type or name. torch is a second oracle."""
import numpy as np
import pytest

import hybridfw as hf

NAMES = {"FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
         "LongTensor": "int64", "IntTensor": "int32", "ShortTensor": "int16",
         "CharTensor": "int8", "ByteTensor": "uint8", "BoolTensor": "bool"}


@pytest.mark.parametrize("name, dtype", NAMES.items())
def test_constructor_dtype_data_and_sizes(name, dtype):
    legacy = getattr(hf, name)
    made = legacy([1.7, 0, 2])
    assert made.dtype == dtype and made.shape == (3,)
    np.testing.assert_array_equal(made.numpy(), np.array([1.7, 0, 2]).astype(dtype))
    assert legacy(2, 3).shape == (2, 3) and legacy(2, 3).dtype == dtype
    assert legacy().shape == (0,)
    assert isinstance(made, legacy) and isinstance(made, hf.Tensor)
    assert not isinstance(made.astype("float64" if dtype != "float64" else "int64"), legacy)
    assert made.type() == f"hybridfw.{name}"
    x = hf.tensor([1.5, -2.0])
    for spec in (legacy, f"torch.{name}", f"hybridfw.{name}"):
        assert x.type(spec).dtype == dtype
    torch = pytest.importorskip("torch")
    ref = getattr(torch, name)([1.7, 0, 2])
    np.testing.assert_array_equal(made.numpy(), ref.numpy())
    assert ref.type() == f"torch.{name}" and tuple(getattr(torch, name)(2, 3).shape) == (2, 3)


def test_type_refuses_other_names():
    with pytest.raises(TypeError, match="torch.cuda.FloatTensor"):
        hf.zeros(2).type("torch.cuda.FloatTensor")
    assert hf.zeros(2).type(hf.int32).dtype is hf.int32
