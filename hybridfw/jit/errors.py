"""Locating errors of converted code at the user's line."""
from __future__ import annotations

import contextlib

from ..converter.errors import add_user_location, user_origin

__all__ = ["add_user_location", "origin_provider"]


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
