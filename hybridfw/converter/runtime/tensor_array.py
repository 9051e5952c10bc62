"""Tensor arrays: Python lists that grow or shrink inside loops a tensor decides.

A static loop carries fixed sets of tensors, so a list appended to inside one becomes a
:class:`TensorArray`: its items stacked along a new first dim (one buffer per leaf of the item
structure, so lists of tuples of tensors work), of a length only known when the program runs.
Stacking it afterwards (``hf.stack(lst)``) is just the buffer; indexing, ``len`` and iteration
read the buffer; returning it from a converted function gives a Python list again.
"""
from __future__ import annotations

from ...ops import reduction as R
from ...ops.registry import apply
from ...static.ir import Variable

__all__ = ["TensorArray", "flip_rows", "is_tensor_array"]


def _leaves(item, out: list):
    if isinstance(item, (tuple, list)):
        return (type(item), tuple(_leaves(v, out) for v in item))
    out.append(item)
    return None


def _build(structure, leaves):
    it = iter(leaves)

    def build(s):
        if s is None:
            return next(it)
        return s[0](build(c) for c in s[1])
    return build(structure)


class TensorArray:
    """``buffers[k]`` holds leaf k of every item, stacked on dim 0; ``structure`` the shape of
    one item (None for a plain tensor)."""

    __slots__ = ("buffers", "structure")

    def __init__(self, buffers, structure=None):
        self.buffers = list(buffers)
        self.structure = structure

    @classmethod
    def from_items(cls, items, example=None):
        """Stack ``items`` (Variables or eager tensors, or tuples of them); an empty list takes
        its item structure, shapes and dtypes from ``example`` (one item)."""
        import hybridfw as hf
        if items:
            leaves_per_item = []
            structure = None
            for item in items:
                leaves: list = []
                structure = _leaves(item, leaves)
                leaves_per_item.append(leaves)
            buffers = [hf.stack([_tensor(v) for v in column])
                       for column in zip(*leaves_per_item)]
            return cls(buffers, structure)
        leaves = []
        structure = _leaves(example, leaves)
        buffers = []
        for leaf in leaves:
            leaf = _tensor(leaf)
            shape = tuple(1 if s == -1 else s for s in leaf.shape)
            buffers.append(hf.zeros((0, *shape), dtype=leaf.dtype))
        return cls(buffers, structure)

    @classmethod
    def from_list_like(cls, items, array: TensorArray):
        """``items`` (a Python list) as a tensor array of ``array``'s item structure, shapes
        and dtypes (built where the caller builds, without reading ``array``'s values)."""
        import hybridfw as hf
        if items:
            return cls.from_items(items)
        return cls([hf.zeros((0, *(1 if s == -1 else s for s in b.shape[1:])), dtype=b.dtype)
                    for b in array.buffers], array.structure)

    def append(self, item) -> TensorArray:
        import hybridfw as hf
        leaves: list = []
        structure = _leaves(item, leaves)
        if structure != self.structure or len(leaves) != len(self.buffers):
            raise TypeError("list.append inside a loop decided by a tensor: every item must "
                            "have the structure of the first one (a tensor, or a tuple of "
                            "tensors)")
        return TensorArray([hf.cat([b, _tensor(v).astype(b.dtype).unsqueeze(0)])
                            for b, v in zip(self.buffers, leaves)], self.structure)

    def insert(self, index, item) -> TensorArray:
        """``list.insert(index, item)``: ``index`` a Python int or a value standing for one
        (``len(lst)``), clamped as Python clamps it."""
        import hybridfw as hf
        if index is None:
            raise TypeError("list.insert() takes an index and an item")
        one = self.append(item)   # (checks the item's structure, casts its leaves)
        return TensorArray([hf.cat([b[:index], o[-1:], b[index:]])
                            for b, o in zip(self.buffers, one.buffers)], self.structure)

    def __add__(self, other):
        """``lst + [a, b]`` and ``lst + other_array``: the items of both, in order."""
        import hybridfw as hf
        if is_tensor_array(other):
            if other.structure != self.structure or len(other.buffers) != len(self.buffers):
                raise TypeError("concatenating lists grown inside loops decided by a tensor: "
                                "their items must have the same structure")
            return TensorArray([hf.cat([a, b.astype(a.dtype)])
                                for a, b in zip(self.buffers, other.buffers)], self.structure)
        if isinstance(other, (list, tuple)) and not isinstance(other, TensorArray):
            if not isinstance(other, list):
                return NotImplemented  # (list + tuple is a TypeError in Python too)
            out = self
            for item in other:
                out = out.append(item)
            return out
        return NotImplemented

    def __radd__(self, other):
        """``[a, b] + lst``."""
        if other.__class__ is not list:
            return NotImplemented
        if not other:
            return self
        return TensorArray.from_list_like(other, self) + self

    def pop(self, index=None):
        if index not in (None, -1):
            raise NotImplementedError("list.pop(i) inside a loop decided by a tensor: only "
                                      "pop() of the last item is supported")
        last = _build(self.structure, [b[-1] for b in self.buffers])
        return TensorArray([b[:-1] for b in self.buffers], self.structure), last

    def stacked(self):
        if self.structure is not None:
            raise TypeError("stacking a list of tuples: stack each field instead")
        return self.buffers[0]

    def length(self):
        """``len(items)``: a value standing for a Python int, as eager ``len`` gives."""
        n = apply(R.dim_numel, self.buffers[0], dim=(0,))
        if hasattr(n, "python_number"):
            n.block.program.python_scalars.add(n.name)
        return n

    def __getitem__(self, index):
        if isinstance(index, slice):
            return TensorArray([b[index] for b in self.buffers], self.structure)
        return _build(self.structure, [b[index] for b in self.buffers])

    def __setitem__(self, index, item):
        """``lst[i] = item`` (each buffer's row ``i`` replaced, out of place)."""
        if isinstance(index, slice):
            raise NotImplementedError("slice assignment to a list grown inside a loop decided "
                                      "by a tensor; assign its items one by one")
        leaves: list = []
        if _leaves(item, leaves) != self.structure or len(leaves) != len(self.buffers):
            raise TypeError("item assignment to a list grown inside a loop decided by a "
                            "tensor: the item must have the structure of the others")
        buffers = []
        for b, v in zip(self.buffers, leaves):
            b = b.clone()
            b[index] = _tensor(v).astype(b.dtype)
            buffers.append(b)
        self.buffers = buffers

    def __reversed__(self):
        return TensorArray([flip_rows(b) for b in self.buffers], self.structure)

    def __iter__(self):
        n = self.buffers[0].shape[0]
        if n == -1:
            raise TypeError("iterating in Python (a comprehension, or a loop in code that is not "
                            "converted) over a list grown inside a loop decided by a tensor: its "
                            "length is only known when the program runs; stack it with "
                            "hf.stack(lst) (for a list of tuples: append each field to its own "
                            "list) or loop over it with a converted for loop")
        return (self[i] for i in range(n))

    def __len__(self):
        n = self.buffers[0].shape[0]
        if n == -1:
            raise TypeError("len() of a list grown inside a loop decided by a tensor is only "
                            "known when the program runs; use it as a tensor (hf.jit converts "
                            "len(lst) in converted code)")
        return n

    def to_list(self, materialize):
        """Items as a Python list, given ``materialize(buffer) -> eager tensor``."""
        values = [materialize(b) for b in self.buffers]
        n = values[0].shape[0]
        return [_build(self.structure, [v[i] for v in values]) for i in range(n)]


def flip_rows(value):
    """``value.flip(0)``, also where dim 0's size is only known when the program runs."""
    if value.shape[0] != -1:
        return value.flip(0)
    import hybridfw as hf
    n = apply(R.dim_numel, value, dim=(0,))
    return value.index_select(0, n - 1 - hf.arange(n))


def _tensor(value):
    import hybridfw as hf
    if isinstance(value, Variable) or hf.is_tensor(value):
        return value
    if is_tensor_array(value):
        raise TypeError("a list of lists grown inside a loop a tensor decides (a nested "
                        "comprehension over a tensor's rows, say) is not supported; build the "
                        "inner lists as tensors (r * 2 for the whole row, hf.stack)")
    return hf.tensor(value)


def is_tensor_array(value) -> bool:
    return value.__class__ is TensorArray
