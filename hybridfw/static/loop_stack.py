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

__all__ = ["LoopStack", "new_loop_stack", "stacked_loop_stack", "stacked_records"]


class LoopStack(np.ndarray):
    """An empty int64 array whose ``records`` (one tuple of arrays per forward iteration) are
    shared by its copies and views.

    ``stacked``, when set, holds the same records as ``(count, item_0, item_1, ...)``: item ``j``
    of every record in one array of shape ``(count, *shape_j)`` (record ``k`` is ``item_j[k]``).
    A compiled loop produces and reads that form: a list of tuples of arrays is slow to cross
    into numba and back (each element boxed), one array per item is not.
    """

    def __array_finalize__(self, obj) -> None:
        self._records = getattr(obj, "_records", None)
        self.stacked = getattr(obj, "stacked", None)

    @property
    def records(self):
        """The list of record tuples (made from ``stacked`` when first asked: a compiled
        ``while_grad`` never asks)."""
        if self._records is None and self.stacked is not None:
            count, items = self.stacked[0], self.stacked[1:]
            self._records = [tuple([item[k, ...] for item in items]) for k in range(count)]
        return self._records

    @records.setter
    def records(self, value) -> None:
        self._records = value


def new_loop_stack(records: list) -> LoopStack:
    """A new token carrying ``records``."""
    token = np.empty((0,), dtype=np.int64).view(LoopStack)
    token.records = records
    return token


def stacked_loop_stack(stacked: tuple) -> LoopStack:
    """A new token from records in stacked form ``(count, item_0, ...)``; its ``records``, when
    asked for, are views of the stacked arrays (``item[k, ...]``: a 0-d array for a scalar
    item, as the interpreted loop records it)."""
    token = new_loop_stack(None)
    token.stacked = (int(stacked[0]), *stacked[1:])
    return token


def stacked_records(token, index, forms) -> tuple:
    """``(count, item_index[0], item_index[1], ...)``: the items ``index`` of ``token``'s records
    in stacked form, C-contiguous. Zero-copy when the forward loop was compiled (the token
    carries the stacked form); stacked here from the list of tuples otherwise (``forms``:
    ``(shape, numpy dtype)`` of each item, for a loop that ran no iteration)."""
    stacked = getattr(token, "stacked", None)
    if stacked is not None:
        return (stacked[0], *[stacked[1 + j] for j in index])
    records = getattr(token, "records", None)
    if records is None:
        raise RuntimeError(f"while_grad: the loop stack holds no records of a forward while_loop "
                           f"run (got a {type(token).__name__}); feed it the value a run of the "
                           "forward loop produced for it (a LoopStack)")
    count = len(records)
    if not count:
        return (0, *[np.empty((0, *shape), dtype) for shape, dtype in forms])
    return (count, *[np.stack([r[j] for r in records]).astype(dtype, copy=False)
                     for j, (_, dtype) in zip(index, forms)])
