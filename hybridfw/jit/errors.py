"""Locating errors of converted code at the user's line."""
from __future__ import annotations

import contextlib
import linecache

from ..converter.errors import ConversionError, is_converted_code, user_origin

__all__ = ["add_user_location", "origin_provider"]


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


@contextlib.contextmanager
def origin_provider():
    """While tracing, each new operator records the user's line that built it."""
    try:
        from ..static.builder import set_origin_provider
    except ImportError:
        yield
        return
    previous = set_origin_provider(user_origin)
    try:
        yield
    finally:
        set_origin_provider(previous)
