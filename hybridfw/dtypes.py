"""Data types and PyTorch's type-promotion rules.

A :class:`DType` wraps a numpy dtype (cupy uses the same dtype objects) and compares equal to
its name (``hf.float32 == 'float32'``) and to the numpy dtype.

Promotion follows PyTorch, not numpy: categories bool < integer < floating; within a category the
wider type wins; and operands come in three priority groups -- tensors with dimensions, 0-d
tensors, Python scalars -- where a lower group only matters when it is of a higher category
(``float32_tensor * 2.5`` stays float32, ``int32_tensor + 2.5`` becomes the default float32,
``int64_tensor / int64_tensor`` is float32); "the default float32" is :func:`get_default_dtype`.

Example::

    >>> import hybridfw as hf
    >>> (hf.ones(2, dtype='int32') + 2.5).dtype
    hybridfw.float32
"""
from __future__ import annotations

import numpy as np

__all__ = ["DType", "as_dtype", "promote_types", "result_type", "float32", "float64", "float16",
           "int32", "int64", "bool_", "int8", "uint8", "int16", "get_default_dtype",
           "set_default_dtype", "finfo", "iinfo"]

_BOOL, _INT, _FLOAT = 0, 1, 2


class DType:
    """A hybridfw data type; ``str(hf.float32) == 'hybridfw.float32'``."""

    __slots__ = ("name", "np", "itemsize", "category", "is_floating_point")

    def __init__(self, name: str):
        self.name = name
        self.np = np.dtype(name)
        self.itemsize = self.np.itemsize
        kind = self.np.kind
        self.category = _BOOL if kind == "b" else (_FLOAT if kind == "f" else _INT)
        self.is_floating_point = kind == "f"

    def __repr__(self) -> str:
        return f"hybridfw.{self.name}"

    __str__ = __repr__

    @property
    def is_signed(self) -> bool:
        """Whether the type holds negative numbers (floats and signed integers)."""
        return self.np.kind in "fi"

    def __eq__(self, other) -> bool:
        if other.__class__ is DType:
            return other is self
        try:
            return as_dtype(other) is self
        except TypeError:
            return False

    def __hash__(self) -> int:
        return hash(self.name)

    def __reduce__(self):  # dtypes are interned: copy/deepcopy must return the same object
        return (as_dtype, (self.name,))


float16 = DType("float16")
float32 = DType("float32")
float64 = DType("float64")
int8 = DType("int8")
uint8 = DType("uint8")
int16 = DType("int16")
int32 = DType("int32")
int64 = DType("int64")
bool_ = DType("bool")

_ALL = (float16, float32, float64, int8, uint8, int16, int32, int64, bool_)
# Lookup by numpy dtype (what arrays carry), by name, and by numpy scalar type.
_BY_KEY: dict = {}
for _d in _ALL:
    _BY_KEY[_d.np] = _d
    _BY_KEY[_d.name] = _d
    _BY_KEY[_d.np.type] = _d
_BY_KEY["float"] = float32
_BY_KEY["double"] = float64
_BY_KEY["half"] = float16
_BY_KEY["int"] = int32
_BY_KEY["long"] = int64
_BY_KEY[float] = float64
_BY_KEY[int] = int64
_BY_KEY[bool] = bool_

_default_float = float32


# PyTorch's legacy tensor type names (``x.type()`` gives one; ``hf.FloatTensor`` is one)
LEGACY_TYPE_NAMES = {"FloatTensor": float32, "DoubleTensor": float64, "HalfTensor": float16,
                     "LongTensor": int64, "IntTensor": int32, "ShortTensor": int16,
                     "CharTensor": int8, "ByteTensor": uint8, "BoolTensor": bool_}
_LEGACY_NAME_OF = {dt: name for name, dt in LEGACY_TYPE_NAMES.items()}


def legacy_type_name(dt: DType) -> str:
    """``'hybridfw.FloatTensor'`` for float32, as ``torch.Tensor.type()`` names types."""
    return f"hybridfw.{_LEGACY_NAME_OF[dt]}"


def get_default_dtype() -> DType:
    """The dtype of floating tensors made from Python floats (float32 unless
    :func:`set_default_dtype` changed it)."""
    return _default_float


def set_default_dtype(d) -> None:
    """Make ``d`` (a floating dtype: float16, float32 or float64) the default dtype, as
    PyTorch's ``torch.set_default_dtype``: the dtype of tensors made from Python floats, of
    float factories without ``dtype=`` (``zeros``, ``rand``, ``arange(0.5)``...), of new layer
    parameters, and of integer tensors combined with Python floats or put through float
    functions (``int_tensor * 1.5``, ``int_tensor.sqrt()``).

    >>> import hybridfw as hf
    >>> hf.set_default_dtype(hf.float64)
    >>> hf.tensor([1.5]).dtype
    hybridfw.float64
    >>> hf.set_default_dtype(hf.float32)
    """
    global _default_float
    try:
        dt = as_dtype(d) if d is not None else None  # (numpy reads None as float64)
    except TypeError:
        dt = None
    if dt is None or not dt.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating-point types are supported as the "
                        f"default type, got {d!r}")
    if dt is not _default_float:
        _default_float = dt
        _result_cache.clear()  # its entries with Python floats read the old default


def as_dtype(x) -> DType:
    """Turn a DType, a name (``'float32'``), a numpy dtype or scalar type into a DType."""
    if x.__class__ is DType:
        return x
    try:
        return _BY_KEY[x]
    except (KeyError, TypeError):
        pass
    try:
        return _BY_KEY[np.dtype(x)]
    except (KeyError, TypeError):
        raise TypeError(f"unsupported dtype {x!r}; expected one of "
                        f"{', '.join(d.name for d in _ALL)}") from None


class finfo:  # noqa: N801 - PyTorch's name
    """Machine limits of a floating dtype (default: float32), as ``torch.finfo``: ``bits``,
    ``eps``, ``max``, ``min``, ``tiny`` (= ``smallest_normal``), ``resolution``, ``dtype``.

    Example::

        >>> import hybridfw as hf
        >>> hf.finfo(hf.float16).max
        65504.0
    """

    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")

    def __init__(self, type=None):  # noqa: A002 - PyTorch's argument name
        dt = _default_float if type is None else as_dtype(type)
        if not dt.is_floating_point:
            raise TypeError(f"finfo: expects a floating point dtype, got {dt}; use hf.iinfo "
                            "for integer dtypes")
        info = np.finfo(dt.np)
        self.bits = int(info.bits)
        self.eps, self.max, self.min = float(info.eps), float(info.max), float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)  # (exact: not rounded to the dtype)
        self.dtype = dt.name

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:  # noqa: N801 - PyTorch's name
    """Limits of an integer dtype, as ``torch.iinfo``: ``bits``, ``max``, ``min``, ``dtype``.

    Example::

        >>> import hybridfw as hf
        >>> hf.iinfo(hf.int32).max
        2147483647
    """

    __slots__ = ("bits", "max", "min", "dtype")

    def __init__(self, type):  # noqa: A002 - PyTorch's argument name
        dt = as_dtype(type)
        if dt.category != _INT:
            raise TypeError(f"iinfo: expects an integer dtype, got {dt}"
                            + ("; use hf.finfo for floating dtypes" if dt.is_floating_point
                               else ""))
        info = np.iinfo(dt.np)
        self.bits, self.max, self.min = int(info.bits), int(info.max), int(info.min)
        self.dtype = dt.name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


def dtype_of_array(a) -> DType:
    """The DType of a numpy/cupy array (raises TypeError for unsupported ones like complex)."""
    try:
        return _BY_KEY[a.dtype]
    except KeyError:
        raise TypeError(f"unsupported array dtype {a.dtype}; expected one of "
                        f"{', '.join(d.name for d in _ALL)}") from None


def promote_types(a: DType, b: DType) -> DType:
    """PyTorch's promotion of two dtypes: the higher category wins, then the wider type."""
    if a is b:
        return a
    if a.category != b.category:
        return a if a.category > b.category else b
    return _BY_KEY[np.promote_types(a.np, b.np)]


def _scalar_dtype(x) -> DType:
    if isinstance(x, bool):
        return bool_
    if isinstance(x, int):
        return int64
    if isinstance(x, float):
        return _default_float
    raise TypeError(f"unsupported operand of type {type(x).__name__}")


def _combine(higher: DType | None, lower: DType | None) -> DType | None:
    if higher is None:
        return lower
    if lower is None or higher.category == _FLOAT:
        return higher
    if higher is bool_ or lower.category == _FLOAT:
        return promote_types(higher, lower)
    return higher


_result_cache: dict = {}
# Python numbers, and numpy scalars as the Python numbers they hold: PyTorch wraps both alike
# (``int32_tensor * np.float64(0.5)`` is float32, not float64).
_SCALAR_KIND = {bool: bool, int: int, float: float, np.bool_: bool}
for _t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
    _SCALAR_KIND[_t] = int
for _t in (np.float16, np.float32, np.float64):
    _SCALAR_KIND[_t] = float
_scalar_kind = _SCALAR_KIND.get


def result_type(*operands) -> DType:
    """The dtype PyTorch gives an elementwise op on these operands.

    ``operands`` are tensors (anything with ``.dtype`` and ``.ndim``), Python scalars or numpy
    scalars (which count as the Python numbers they hold, as in PyTorch).
    """
    key = tuple(_scalar_kind(o.__class__) or (o.dtype, not o.shape) for o in operands)
    hit = _result_cache.get(key)
    if hit is not None:
        return hit
    dim = zero = wrapped = None
    for k in key:
        if k.__class__ is tuple:
            dt = as_dtype(k[0])  # tensor-likes and numpy scalars (whose dtype is numpy's)
            if k[1]:
                zero = dt if zero is None else promote_types(zero, dt)
            else:
                dim = dt if dim is None else promote_types(dim, dt)
        else:
            dt = _scalar_dtype(k(0))
            wrapped = dt if wrapped is None else promote_types(wrapped, dt)
    out = _combine(dim, _combine(zero, wrapped))
    _result_cache[key] = out
    return out
