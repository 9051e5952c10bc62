"""Placeholders for names that are not bound on every path."""
from __future__ import annotations

__all__ = ["UNDEFINED_RETURN", "UNREACHED", "Undefined", "Unmerged", "is_undefined",
           "return_value"]


class Undefined:
    """The value of variable ``name`` where it has not been assigned. Any use raises an
    ``UnboundLocalError`` naming the variable (at the user's line, through the traceback)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        object.__setattr__(self, "name", name)

    def _fail(self, *args, **kwargs):
        raise self._error()

    def _error(self) -> Exception:
        return UnboundLocalError(
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


class Unmerged(Undefined):
    """The value after an ``if`` a tensor decides of a variable the two branches give values
    that cannot meet in one (None and a tensor, a str and a tensor, tuples of different
    lengths): fine while unused (``y = None`` on one path only, never read again); any use
    raises the error saying why, at the line of the use."""

    __slots__ = ("why", "where")

    def __init__(self, name: str, why: str):
        from ..errors import user_frame
        super().__init__(name)
        object.__setattr__(self, "why", why)
        frame = user_frame(2)  # the if (named when the use is outside converted code)
        object.__setattr__(self, "where", None if frame is None else
                           (frame.f_code.co_filename, frame.f_lineno))

    def _error(self) -> Exception:
        from ..errors import ConversionError, user_frame
        frame = user_frame(2)  # the use, else the if
        where = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else \
            self.where or ()
        return ConversionError(self.why, *where)

    def __repr__(self) -> str:
        return f"<no single value of {self.name} after the if>"


UNDEFINED_RETURN = Undefined("return value")
# every value of a branch that raises when the program runs (it never gets past the raise)
UNREACHED = Undefined("value of a branch that raises")


def is_undefined(value) -> bool:
    return value.__class__ is Undefined


def return_value(value, always: bool = False):
    """What a function returns after its single exit: None where no ``return`` ran.
    ``always``: every path of the function ends in a ``return`` (so a value an if on a tensor
    condition assigned "on one path only" was assigned on all: no flag is needed for it)."""
    if always:
        _assigned_everywhere(value)
    return None if value.__class__ is Undefined else value


def _assigned_everywhere(value) -> None:
    if isinstance(value, (list, tuple)):
        for v in value:
            _assigned_everywhere(v)
    elif isinstance(value, dict):
        for v in value.values():
            _assigned_everywhere(v)
    else:
        program = getattr(getattr(value, "block", None), "program", None)
        if program is not None and value.name not in program.none_returns:
            program.maybe_undefined.pop(value.name, None)
