"""Placeholders for names that are not bound on every path."""
from __future__ import annotations

__all__ = ["UNDEFINED_RETURN", "Undefined", "is_undefined", "return_value"]


class Undefined:
    """The value of variable ``name`` where it has not been assigned. Any use raises an
    ``UnboundLocalError`` naming the variable (at the user's line, through the traceback)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        object.__setattr__(self, "name", name)

    def _fail(self, *args, **kwargs):
        raise UnboundLocalError(
            f"local variable {self.name!r} is used where it may not have been assigned (it is "
            f"assigned on some paths only, e.g. in one branch of an if or inside a loop body "
            f"that may not run)")

    def __repr__(self) -> str:
        return f"<undefined {self.name}>"

    __getattr__ = __call__ = __getitem__ = __setitem__ = __iter__ = __len__ = __bool__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fail
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _fail
    __pow__ = __rpow__ = __matmul__ = __rmatmul__ = __neg__ = __pos__ = __abs__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = __and__ = __or__ = __xor__ = __invert__ = _fail
    __int__ = __float__ = __index__ = __array__ = _fail

    def __setattr__(self, key, value):
        self._fail()


UNDEFINED_RETURN = Undefined("return value")


def is_undefined(value) -> bool:
    return value.__class__ is Undefined


def return_value(value):
    """What a function returns after its single exit: None where no ``return`` ran."""
    return None if value.__class__ is Undefined else value
