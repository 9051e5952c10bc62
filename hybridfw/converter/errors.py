"""Errors of converted code, located at the user's own source line."""
from __future__ import annotations

import linecache
import sys

__all__ = ["ConversionError", "InPlaceUpdateError", "UnsupportedConstructError",
           "add_user_location", "located", "user_frame"]


def _where(filename, lineno) -> str:
    if lineno is None:
        return f'File "{filename}"'
    text = linecache.getline(filename, lineno).strip()
    return f'File "{filename}", line {lineno}' + (f"\n    {text}" if text else "")


class ConversionError(Exception):
    """Converting or tracing a function failed for a reason tied to one line of its source."""

    def __init__(self, message: str, filename: str | None = None, lineno: int | None = None):
        self.filename, self.lineno = filename, lineno
        if filename is not None:
            message = f"{message}\n  {_where(filename, lineno)}"
        super().__init__(message)


class InPlaceUpdateError(ConversionError, RuntimeError):
    """An in-place update of an argument that eager code refuses with a RuntimeError too (of a
    leaf that requires grad, or to a dtype it can't hold): code catching either works."""


class UnsupportedConstructError(ConversionError, NotImplementedError):
    """A construct to_static cannot turn into a static program (``construct`` names it)."""

    def __init__(self, construct: str, filename: str | None = None, lineno: int | None = None,
                 hint: str = ""):
        self.construct = construct
        message = f"to_static does not support {construct}" + (f"; {hint}" if hint else "")
        super().__init__(message, filename, lineno)


# id -> code object of converted code (the value keeps the id from being reused). Looked up
# by id: a code object's hash is computed on each use, over its bytecode and constants (~1 us
# for a small function, 20 us for a module), and user_frame asks for every frame it passes
# while each operator is recorded.
_converted_codes: dict = {}


def register_code(code) -> None:
    """Remember ``code`` (and the code objects nested in it) as converted code."""
    _converted_codes[id(code)] = code
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            register_code(const)


def is_converted_code(code) -> bool:
    return id(code) in _converted_codes


def user_frame(depth: int = 1):
    """The innermost frame of converted code on the stack (its file and line are the user's),
    or None."""
    frame = sys._getframe(depth)
    while frame is not None:
        if id(frame.f_code) in _converted_codes:
            return frame
        frame = frame.f_back
    return None


def user_origin():
    """``(filename, lineno, source_line)`` of the innermost converted-code frame, or None."""
    frame = user_frame(2)
    if frame is None:
        return None
    filename, lineno = frame.f_code.co_filename, frame.f_lineno
    return filename, lineno, linecache.getline(filename, lineno).strip()


def located(message: str, exc_type=ConversionError):
    """An error of ``exc_type`` for ``message`` at the innermost converted-code line."""
    frame = user_frame(2)
    if frame is None:
        return exc_type(message)
    if issubclass(exc_type, ConversionError):
        return exc_type(message, frame.f_code.co_filename, frame.f_lineno)
    return exc_type(f"{message}\n  {_where(frame.f_code.co_filename, frame.f_lineno)}")


def add_user_location(exc: BaseException) -> None:
    """Name the user's file, line and source text in ``exc`` (raised by converted code), keeping
    its type: the innermost converted-code frame of its traceback is the user's line."""
    if isinstance(exc, ConversionError) and exc.filename is not None:
        return
    where = None
    tb = exc.__traceback__
    while tb is not None:
        if is_converted_code(tb.tb_frame.f_code):
            where = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    if where is None or getattr(exc, "__hf_located__", False):
        return
    filename, lineno = where
    text = linecache.getline(filename, lineno).strip()
    location = f'File "{filename}", line {lineno}, in converted code' + \
        (f"\n    {text}" if text else "")
    if len(exc.args) == 1 and isinstance(exc.args[0], str) and not isinstance(exc, KeyError):
        exc.args = (f"{exc.args[0]}\n  {location}",)
    else:
        exc.add_note(location)
    try:
        exc.__hf_located__ = True
    except AttributeError:
        pass
