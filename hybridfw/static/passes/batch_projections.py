"""Input projections of an unrolled loop in pieces, ahead of the loop, for the second stream.

An RNN unrolled over the time steps of ``x`` (``T x B x I``) computes ``x[t] @ W`` at every
step: products that depend on no step before them. With a second CPU stream
(:mod:`~hybridfw.static.streams`, ``hf.set_num_interop_threads`` >= 2) this pass computes them
in pieces of consecutive steps, ``x[a:b].reshape((b - a) * B, I) @ W`` (as many pieces as
:func:`~.batch_matmul.pieces` says the products' size is worth, of sizes differing by one at
most, so none falls below the worker's minimum), each placed right after ``x`` and ``W`` are
known (the start of the program, for inputs and parameters), and makes each step's product a
row slice (a view) of its piece. The executor runs the pieces on the worker while the steps run
on the main thread. The first step, needed at once, keeps its own small product: as the first
of the pieces it kept the main thread waiting for nine steps' (W4: 0.13 ms, with a five-step
last piece too small for the worker run there too). One thread: nothing changes (one large
product next to the small ones was measured no faster here: bench/codegen.py, W4).

Matched: at least :data:`~.batch_matmul.MIN_TERMS` ``matmul(getitem(x, t), W)`` with one ``x``
(3-D, every dim known) and one 2-D ``W`` of a float dtype, ``t`` every constant step from the
first to the last exactly once. The pieces' results differ from the step products by BLAS
rounding only (another blocking of the same sums).
"""
from __future__ import annotations

from ..ir import Operator, Program
from .. import streams
from .analysis import place_early, readers, resolve_fetch
from .batch_matmul import MIN_TERMS, pieces
from .clone import working_copy

__all__ = ["balanced", "run"]


def run(program: Program, fetch=None) -> Program:
    """A copy of ``program`` with its loops' input projections computed in pieces (only with
    a second stream)."""
    program = working_copy(program)
    if not streams.active():
        return program
    block = program.global_block()
    groups = {key: steps for key, steps in _groups(block).items() if _worth(block, *key, steps)}
    if not groups:
        return program
    replaced, early = {}, set()
    for (x, w), steps in groups.items():
        _rewrite(block, x, w, steps, replaced, early)
    # a step's x[t] read by its product alone goes with it
    read, protected = readers(program), set(resolve_fetch(program, fetch))
    producer = {name: op for op in block.ops for name in op.outputs}
    for steps in groups.values():
        for t, op in steps.items():
            if t == min(steps):  # (kept: its product is the step's own)
                continue
            item = op.inputs[0]
            if item not in protected and read.get(item) == [op]:
                replaced[id(producer[item])] = []
                block.vars.pop(item, None)
    ops = []
    for op in block.ops:
        ops.extend(replaced.get(id(op), (op,)))
    block.ops = place_early(block, ops, early)
    return program


def _groups(block) -> dict:
    """``{(x, W): {t: matmul op}}`` for the products that match (see the module docstring)."""
    producer = {name: op for op in block.ops for name in op.outputs}
    found: dict = {}
    for op in block.ops:
        if op.type != "matmul" or len(op.inputs) != 2 or not all(
                isinstance(n, str) for n in op.inputs):
            continue
        left, w = op.inputs
        item = producer.get(left)
        if item is None or item.type != "getitem" or not isinstance(item.inputs[0], str):
            continue
        spec = item.attrs.get("spec")
        if not (isinstance(spec, tuple) and len(spec) == 1 and spec[0][0] == "int"):
            continue
        x = item.inputs[0]
        xv, wv, out = block.var(x), block.var(w), block.var(op.outputs[0])
        if len(xv.shape) != 3 or len(wv.shape) != 2 or -1 in (*xv.shape, *wv.shape) or \
                not out.dtype.is_floating_point or xv.dtype is not out.dtype or \
                wv.dtype is not out.dtype:
            continue
        t = spec[0][1]
        t = t + xv.shape[0] if t < 0 else t
        steps = found.setdefault((x, w), {})
        steps[t] = None if t in steps else op  # a step twice: not this pass's shape
    return {key: steps for key, steps in found.items()
            if len(steps) >= MIN_TERMS and None not in steps.values() and
            max(steps) - min(steps) + 1 == len(steps)}


def _worth(block, x, w, steps) -> bool:
    """Whether the products are large enough to be cut in two pieces or more."""
    _, batch, width = block.var(x).shape
    return pieces(len(steps), len(steps) * batch * width * block.var(w).shape[1]) > 1


def _rewrite(block, x, w, steps: dict, replaced: dict, early: set) -> None:
    """The pieces' products (into ``early``) and each step's row slice (in ``replaced``, in
    place of its product)."""
    first, count = min(steps) + 1, len(steps) - 1  # the first step keeps its own product
    _, batch, width = block.var(x).shape
    columns = block.var(w).shape[1]
    dtype = block.var(w).dtype
    for a, b in balanced(first, count, pieces(count, count * batch * width * columns)):
        origin = steps[a].origin
        piece = block.create_var((b - a, batch, width), dtype).name
        rows = block.create_var(((b - a) * batch, width), dtype).name
        product = block.create_var(((b - a) * batch, columns), dtype).name
        made = [Operator("getitem", [x], [piece], {"spec": (("slice", a, b, None),)},
                         origin=origin),
                Operator("reshape", [piece], [rows], {"shape": ((b - a) * batch, width)},
                         origin=origin),
                Operator("matmul", [rows, w], [product], origin=origin)]
        early.update(id(op) for op in made)
        for t in range(a, b):
            op = steps[t]
            step = Operator("getitem", [product], list(op.outputs),
                            {"spec": (("slice", (t - a) * batch, (t - a + 1) * batch, None),)},
                            origin=op.origin)
            replaced[id(op)] = made + [step] if t == a else [step]


def balanced(first: int, count: int, chunks: int) -> list:
    """``chunks`` ranges ``(a, b)`` of consecutive steps covering ``first`` to
    ``first + count``, their sizes differing by one at most (larger first): a last piece of the
    few steps left over would fall below the worker's minimum size and run on the main thread."""
    size, extra = divmod(count, chunks)
    out, a = [], first
    for k in range(chunks):
        b = a + size + (k < extra)
        out.append((a, b))
        a = b
    return out
