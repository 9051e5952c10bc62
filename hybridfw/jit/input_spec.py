"""``InputSpec``: the shape and dtype a converted function's tensor argument will have."""
from __future__ import annotations

import numbers

from ..dtypes import as_dtype

__all__ = ["InputSpec"]


class InputSpec:
    """Shape (``None`` or ``-1`` marks a dim known only at run time), dtype and name of an input.

    Example::

        >>> import hybridfw as hf
        >>> hf.jit.InputSpec([None, 1, 8, 8], "float32", name="image")
        InputSpec(shape=(-1, 1, 8, 8), dtype=float32, name='image')
    """

    __slots__ = ("dtype", "name", "shape")

    def __init__(self, shape, dtype="float32", name: str | None = None):
        sizes = None if isinstance(shape, str) or not hasattr(shape, "__iter__") else \
            tuple(shape)
        if sizes is None or any(s is not None and (isinstance(s, bool) or
                                                   not isinstance(s, numbers.Integral))
                                for s in sizes):
            raise TypeError(f"InputSpec: shape must be a sequence of ints or None, got "
                            f"{shape!r}")
        dims = tuple(-1 if s is None else int(s) for s in sizes)
        if any(s < -1 for s in dims):
            raise ValueError(f"InputSpec: invalid dim in shape {sizes}")
        self.shape = dims
        self.dtype = as_dtype(dtype)
        self.name = name

    @classmethod
    def from_tensor(cls, tensor, name: str | None = None) -> InputSpec:
        return cls(tensor.shape, tensor.dtype, name)

    def matches(self, shape) -> bool:
        return len(shape) == len(self.shape) and all(
            s == -1 or s == d for s, d in zip(self.shape, shape))

    def __eq__(self, other):
        return isinstance(other, InputSpec) and (self.shape, self.dtype, self.name) == \
            (other.shape, other.dtype, other.name)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.name))

    def __repr__(self) -> str:
        return f"InputSpec(shape={self.shape}, dtype={self.dtype.name}, name={self.name!r})"
