"""PyTorch's legacy typed tensor constructors (``hf.FloatTensor``, ``hf.LongTensor``, ...).

Each is a callable type: ``hf.LongTensor([1, 2])`` holds the data as int64,
``hf.FloatTensor(2, 3)`` is a (2, 3) float32 tensor (zeros, as ``hf.empty``), and
``isinstance(x, hf.FloatTensor)`` asks whether ``x`` is a float32 tensor; ``x.type(hf.LongTensor)``
casts.

Example::

    >>> import hybridfw as hf
    >>> hf.LongTensor([1.7, 2]).tolist()
    [1, 2]
    >>> isinstance(hf.zeros(2), hf.FloatTensor)
    True
"""
from __future__ import annotations

from ..dtypes import LEGACY_TYPE_NAMES
from .tensor import Tensor

__all__ = list(LEGACY_TYPE_NAMES)


class _LegacyTensorType(type):
    """The type of ``hf.FloatTensor`` and its kin: calling one builds a Tensor of its dtype,
    and an instance is a Tensor of that dtype."""

    def __call__(cls, *data, device=None):
        return Tensor(*data, dtype=cls.legacy_dtype, device=device)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.legacy_dtype

    def __repr__(cls) -> str:
        return f"<class 'hybridfw.{cls.__name__}'>"


def _legacy_type(name: str) -> _LegacyTensorType:
    dtype = LEGACY_TYPE_NAMES[name]
    return _LegacyTensorType(name, (), {
        "legacy_dtype": dtype, "__module__": "hybridfw",
        "__doc__": f"PyTorch's legacy constructor of {dtype.name} tensors "
                   f"(``{name}(data)`` or ``{name}(*sizes)``)."})


FloatTensor = _legacy_type("FloatTensor")
DoubleTensor = _legacy_type("DoubleTensor")
HalfTensor = _legacy_type("HalfTensor")
LongTensor = _legacy_type("LongTensor")
IntTensor = _legacy_type("IntTensor")
ShortTensor = _legacy_type("ShortTensor")
CharTensor = _legacy_type("CharTensor")
ByteTensor = _legacy_type("ByteTensor")
BoolTensor = _legacy_type("BoolTensor")
