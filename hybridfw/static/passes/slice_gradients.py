"""Slice gradients: a sum of slice gradients that tile a tensor becomes one ``concat``.

The gradient of ``x[index]`` is ``getitem_backward``: zeros of ``x``'s shape with the slice's
gradient written in. When ``x`` is cut into pieces (an LSTM's ``gates[:, :H]``,
``gates[:, H:2*H]``, ...), the autodiff adds those full-size results, which costs a zero-filled
array per piece and a full-size add per extra piece where one concatenation of the pieces' own
gradients would do.

The pass matches exactly: a tree of ``add`` operators (two distinct variable operands, no
attributes) whose leaves are ``getitem_backward`` operators, all in one block, where

- each ``getitem_backward`` has a basic index: ints, slices with step 1 or None, at most one
  ellipsis (no index tensors, no ``None``), a fully known shape, and a non-empty region;
- every leaf has the same shape and dtype, and so has every ``add`` of the tree;
- every value inside the tree (each leaf, each add but the root) has the add above it as its only
  reader in the whole program (sub-blocks and control-flow attributes included), is not a fetch
  target and is not persistable;
- the regions differ along exactly one dim, are full along the others, and tile that dim:
  sorted by start, they are contiguous from 0 to its size (so also pairwise disjoint).

The tree is replaced, at the position of its root (whose output name it keeps), by one
``concat`` of the slices' gradients in order along that dim; a gradient of an int index (its dim
dropped) is first reshaped to keep the dim with size 1. Sums that are not tilings (gaps,
overlaps, regions differing along several dims) are left as they are. Sums whose slices' gradient
comes from a parameter that an ``assign_param`` writes (or a view of it) are left too: the
concat runs later than the ``getitem_backward`` operators did, maybe after the write.
Run before fusion, which would fuse the adds.

Example::

    >>> import hybridfw as hf
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     g = hf.static.data("g", [2, 4])
    ...     s = hf.ops.registry.apply(hf.ops.indexing.getitem_backward, g[:, :2],
    ...                               spec=(("slice", None, None, None), ("slice", None, 2, None)),
    ...                               shape=(2, 4))
    ...     t = hf.ops.registry.apply(hf.ops.indexing.getitem_backward, g[:, 2:],
    ...                               spec=(("slice", None, None, None), ("slice", 2, None, None)),
    ...                               shape=(2, 4))
    ...     y = s + t
    >>> print(run(prog, fetch=[y]))
    input g : (2, 4) float32
    t0 = getitem(g) {spec=(('slice', None, None, None), ('slice', None, 2, None))} : (2, 2) float32
    t2 = getitem(g) {spec=(('slice', None, None, None), ('slice', 2, None, None))} : (2, 2) float32
    t4 = concat(t0, t2) {dim=1} : (2, 4) float32
"""
from __future__ import annotations

import functools

from ..ir import Block, Operator, Program
from ..verifier import is_registry_op
from .analysis import assigned_state, attr_names, resolve_fetch
from .clone import working_copy
from .rewrite import erase_ops

__all__ = ["run"]


def run(program: Program, fetch=None) -> Program:
    """A copy of ``program`` whose sums of slice gradients tiling a tensor are concatenations."""
    protected = set(resolve_fetch(program, fetch))
    program = working_copy(program)
    uses: dict = {}   # name -> how many times operators read it, anywhere in the program
    found = []
    registry: dict = {}
    names = None
    writes = False  # whether some assign_param changes a parameter during the run
    for block in program.blocks:
        regions: dict = {}  # getitem_backward output -> (operator, region)
        sums: dict = {}     # add output -> (adds of the tree, root last; leaves of the tree)
        for op in block.ops:
            for name in op.inputs:
                if name.__class__ is str:
                    uses[name] = uses.get(name, 0) + 1
            known = registry.get(op.type)
            if known is None:
                known = registry[op.type] = is_registry_op(op.type)
            if not known:
                names = names or {n for b in program.blocks for n in b.vars}
                for name in attr_names(op, names):  # a control-flow operator's result names
                    uses[name] = uses.get(name, 0) + 1
            if op.type == "getitem_backward":
                region = _region(op)
                if region is not None:
                    regions[op.outputs[0]] = (op, region)
            elif op.type == "add" and not op.attrs and len(op.inputs) == 2:
                tree = _combine(block, op, regions, sums, protected)
                if tree is not None:
                    sums[op.outputs[0]] = tree
            elif op.type == "assign_param":
                writes = True
        if sums:
            found.append((block, regions, sums))
    assigned = assigned_state(program) if found and writes else set()
    for block, regions, sums in found:
        _rewrite_block(block, regions, sums, uses, assigned)
    return program


def _rewrite_block(block: Block, regions: dict, sums: dict, uses: dict, assigned: set) -> None:
    """Replace the largest trees of ``sums`` whose inner values are read once (by the tree) and
    whose leaves tile a dim by concats."""
    replacements: dict = {}
    doomed: list = []
    taken: set = set()  # outputs of adds inside a replaced tree
    for name in reversed(sums):  # a tree comes after its subtrees
        adds, leaves = sums[name]
        if name in taken or any(uses.get(n, 0) != 1 for n in leaves) or \
                any(uses.get(op.outputs[0], 0) != 1 for op in adds[:-1]):
            continue
        terms = [regions[leaf] for leaf in leaves]
        if any(op.inputs[0] in assigned for op, _ in terms):
            continue
        new_ops = _concat(block, adds[-1], terms)
        if new_ops is not None:
            replacements[id(adds[-1])] = new_ops
            doomed += [*adds[:-1], *(op for op, _ in terms)]
            taken.update(op.outputs[0] for op in adds)
    if replacements:
        erase_ops(block, doomed)  # the roots stay: their outputs are the concats' outputs
        block.ops = [new for op in block.ops for new in replacements.get(id(op), (op,))]


def _combine(block: Block, op: Operator, regions: dict, sums: dict, protected: set):
    """``(adds, leaves)`` of the tree ``op`` ends when its two distinct operands are leaves or
    trees of its output's shape and dtype, neither fetched nor persistable; else None. Whether
    nothing else reads them is checked once every operator is counted."""
    a, b = op.inputs
    if a.__class__ is not str or b.__class__ is not str or a == b:
        return None
    parts = []
    for name in (a, b):
        if name in regions:
            parts.append(((), (name,)))
        elif name in sums:
            parts.append(sums[name])
        else:
            return None
    out = block.var(op.outputs[0])
    for name in (a, b):
        var = block.var(name)
        if var.shape != out.shape or var.dtype is not out.dtype or var.persistable or \
                name in protected:
            return None
    return (*parts[0][0], *parts[1][0], op), (*parts[0][1], *parts[1][1])


def _region(op: Operator):
    """``((start, stop, dropped), ...)`` per dim of the tensor a basic-index getitem_backward
    writes into, or None for any other index (or an unknown shape, or an empty region)."""
    if len(op.inputs) != 1 or op.inputs[0].__class__ is not str:
        return None  # index tensors are inputs
    try:
        return _basic_region(op.attrs["spec"], tuple(op.attrs["shape"]))
    except TypeError:  # an unhashable spec is no basic index
        return None


@functools.lru_cache(maxsize=1024)  # a program slices the same way many times (a loop's steps)
def _basic_region(spec: tuple, shape: tuple):
    if -1 in shape or any(item[0] not in ("int", "slice", "ellipsis") for item in spec):
        return None
    ellipses = sum(1 for item in spec if item[0] == "ellipsis")
    used = len(spec) - ellipses
    if ellipses > 1 or used > len(shape):
        return None
    full = ("slice", None, None, None)
    items: list = []
    for item in spec:
        items.extend([full] * (len(shape) - used) if item[0] == "ellipsis" else [item])
    items.extend([full] * (len(shape) - len(items)))
    region = []
    for item, n in zip(items, shape):
        if item[0] == "int":
            i = item[1]
            if i.__class__ is not int or not -n <= i < n:
                return None
            region.append((i % n, i % n + 1, True))
            continue
        start, stop, step = item[1:]
        if step not in (None, 1) or any(p is not None and p.__class__ is not int
                                        for p in (start, stop)):
            return None
        start, stop, _ = slice(start, stop).indices(n)
        if stop <= start:
            return None
        region.append((start, stop, False))
    return tuple(region)


def _concat(block: Block, root: Operator, leaves: list):
    """The operators computing ``root``'s sum as one concat of the leaves' gradients (reshapes
    first for int indices), or None when the leaves' regions do not tile one dim."""
    shape = tuple(leaves[0][0].attrs["shape"])
    varying = {d for _, region in leaves for d, (start, stop, _) in enumerate(region)
               if (start, stop) != (0, shape[d])}
    if len(varying) != 1:
        return None
    (dim,) = varying
    leaves = sorted(leaves, key=lambda leaf: leaf[1][dim][0])
    end = 0
    for _, region in leaves:
        if region[dim][0] != end:
            return None  # a gap or an overlap
        end = region[dim][1]
    if end != shape[dim]:
        return None
    dtype = block.var(root.outputs[0]).dtype
    shapes = []
    for op, region in leaves:
        piece = block.var(op.inputs[0])
        want = tuple(stop - start for start, stop, _ in region)
        if piece.dtype is not dtype or piece.shape != tuple(
                n for n, (_, _, dropped) in zip(want, region) if not dropped):
            return None
        shapes.append(want)
    new_ops, pieces = [], []
    for (op, _), want in zip(leaves, shapes):
        name = op.inputs[0]
        if block.var(name).shape != want:  # an int index dropped a dim: keep it, size 1
            reshaped = block.create_var(want, dtype).name
            new_ops.append(Operator("reshape", (name,), (reshaped,), {"shape": want},
                                    origin=op.origin))
            name = reshaped
        pieces.append(name)
    return new_ops + [Operator("concat", pieces, root.outputs, {"dim": dim}, origin=root.origin)]
