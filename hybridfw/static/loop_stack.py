"""The value a differentiated ``while`` hands to its backward: a token carrying its stack.

A forward ``while`` loop that :func:`hf.static.gradients` differentiated pushes one record (a
tuple of arrays) per iteration onto a Python list; ``while_grad`` reads the records back, last
first. The list travels inside the program as a :class:`LoopStack`: an empty int64 array (the
program declares the ``stack`` variable ``(0,)`` int64) whose ``records`` attribute is the list.
``__array_finalize__`` hands ``records`` on to every copy and view, so the token survives the
executor copying fetched values, an enclosing loop pushing it into its own records, and being
fetched from one run and fed to another (a forward program and a separate backward program,
see :mod:`.partition`).

The token is always a host (numpy) array, also when the program runs on a GPU: it holds no data,
only the records (which hold the device's arrays), and the executor passes it through unchanged
when it is fed.

Example::

    >>> token = new_loop_stack([("record 0",)])
    >>> token.copy().records
    [('record 0',)]
    >>> token.shape, token.dtype
    ((0,), dtype('int64'))
"""
from __future__ import annotations

import numpy as np

__all__ = ["LoopStack", "new_loop_stack"]


class LoopStack(np.ndarray):
    """An empty int64 array whose ``records`` (one tuple of arrays per forward iteration) are
    shared by its copies and views."""

    def __array_finalize__(self, obj) -> None:
        self.records = getattr(obj, "records", None)


def new_loop_stack(records: list) -> LoopStack:
    """A new token carrying ``records``."""
    token = np.empty((0,), dtype=np.int64).view(LoopStack)
    token.records = records
    return token
