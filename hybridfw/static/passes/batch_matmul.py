"""Batched weight gradients: a sum of ``a_k^T @ b_k`` becomes one ``A^T @ B``.

A weight used at every step of an unrolled loop (an RNN cell's matrices) gets one gradient
contribution per step, ``matmul(permute(a_k, (1, 0)), b_k)``, which the autodiff adds up. Over
K steps that is K small matrix products, each writing a full weight-sized result, and K - 1 adds
of them (one K-input ``fused_elementwise`` after fusion, which keeps all K results alive at
once). Since ``sum_k a_k^T b_k = A^T B`` with ``A``, ``B`` the ``a_k``, ``b_k`` stacked along
their rows, this pass writes the sum as two ``concat`` s and one matrix product: one large BLAS
call (far better use of the cores than K thin ones), no weight-sized temporaries.

Matched: a tree of ``add`` s (each intermediate read by its parent alone, none fetched) whose
K >= :data:`MIN_TERMS` leaves are all ``matmul(permute(a_k, (1, 0)), b_k)``, each matmul read
only there (a permute read by other operators too stays for them), every ``a_k`` of one 2-D
shape, every ``b_k`` of another, one float dtype throughout and every shape known. The rewrite
sits where the root ``add`` was (every ``a_k`` and ``b_k`` is computed by then) and defines the
root's output name, so its readers are unchanged. The result differs from the K products' sum
by rounding only (BLAS adds in another order).

Example::

    >>> import hybridfw as hf
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     a = [hf.static.data(f"a{k}", [4, 3]) for k in range(3)]
    ...     b = [hf.static.data(f"b{k}", [4, 5]) for k in range(3)]
    ...     y = a[0].T @ b[0] + a[1].T @ b[1] + a[2].T @ b[2]
    >>> print(run(prog, fetch=[y]))  # doctest: +ELLIPSIS
    input a0 : (4, 3) float32
    ...
    t... = concat(a0, a1, a2) {dim=0} : (12, 3) float32
    t... = concat(b0, b1, b2) {dim=0} : (12, 5) float32
    t... = permute(t...) {dims=(1, 0)} : (3, 12) float32
    t... = matmul(t..., t...) : (3, 5) float32
"""
from __future__ import annotations

from ..ir import Block, Operator, Program
from .analysis import readers, resolve_fetch
from .clone import working_copy

__all__ = ["MIN_TERMS", "run"]

MIN_TERMS = 3  # below, the two copies into A and B cost about what the batching saves


def run(program: Program, fetch=None) -> Program:
    """A copy of ``program`` with its sums of transposed products batched."""
    protected = set(resolve_fetch(program, fetch))
    program = working_copy(program)
    block = program.global_block()
    read = readers(program)
    producer = {name: op for op in block.ops for name in op.outputs}
    position = {id(op): i for i, op in enumerate(block.ops)}
    replaced: dict = {}  # id(root add) -> the operators computing its sum
    doomed: set = set()
    for op in block.ops:
        if op.type != "add" or id(op) in doomed or _inner(op, block, read, protected):
            continue
        found = _match(block, op, producer, position, read, protected)
        if found is None:
            continue
        terms, erased = found
        replaced[id(op)] = _batched(block, op, terms)
        doomed.update(id(e) for e in erased)
    if not replaced:
        return program
    ops = []
    for op in block.ops:
        if id(op) in replaced:
            ops.extend(replaced[id(op)])
        elif id(op) not in doomed:
            ops.append(op)
    for op in block.ops:
        if id(op) in doomed and id(op) not in replaced:
            for name in op.outputs:
                block.vars.pop(name, None)
    block.ops = ops
    return program


def _private(block: Block, name, consumer, read: dict, protected: set) -> bool:
    """Whether ``consumer`` alone reads ``name`` (a global-block value nobody else sees)."""
    if not isinstance(name, str) or name in protected or name not in block.vars:
        return False
    users = read.get(name, ())
    return len(users) == 1 and users[0] is consumer and not block.vars[name].persistable


def _inner(op, block, read, protected) -> bool:
    """Whether ``op`` is an inner node of a larger sum (its parent add is matched instead)."""
    users = read.get(op.outputs[0], ())
    return len(users) == 1 and users[0].type == "add" and \
        _private(block, op.outputs[0], users[0], read, protected)


def _match(block, root, producer, position, read, protected):
    """``(terms, erased)``: the ``(a_k, b_k)`` of the sum rooted at ``root`` and every operator
    the rewrite replaces; None when the sum is not wholly of transposed products."""
    out = block.vars[root.outputs[0]]
    terms, erased, permutes, stack = [], [], [], [root]
    while stack:
        add = stack.pop()
        erased.append(add)
        for name in add.inputs:
            source = producer.get(name) if isinstance(name, str) else None
            if source is None or not _private(block, name, add, read, protected):
                return None
            if source.type == "add":
                if block.vars[name].dtype is not out.dtype:
                    return None
                stack.append(source)
                continue
            term = _transposed_product(block, source, producer, read, protected)
            if term is None:
                return None
            terms.append((position[id(source)], term))
            erased.append(source)
            permutes.append(producer[source.inputs[0]])
    if len(terms) < MIN_TERMS:
        return None
    terms = [term for _, term in sorted(terms)]  # in program order
    gone = {id(op) for op in erased}  # a permute goes when all its readers go
    erased += [p for p in {id(p): p for p in permutes}.values()
               if all(id(user) in gone for user in read.get(p.outputs[0], ()))]
    a_meta, b_meta = block.var(terms[0][0]), block.var(terms[0][1])
    for a, b in terms:
        va, vb = block.var(a), block.var(b)
        if (tuple(va.shape), va.dtype, tuple(vb.shape), vb.dtype) != (
                tuple(a_meta.shape), a_meta.dtype, tuple(b_meta.shape), b_meta.dtype):
            return None
    if len(a_meta.shape) != 2 or len(b_meta.shape) != 2 or -1 in (*a_meta.shape, *b_meta.shape) \
            or not out.dtype.is_floating_point or a_meta.dtype is not out.dtype or \
            b_meta.dtype is not out.dtype or tuple(out.shape) != (a_meta.shape[1],
                                                                  b_meta.shape[1]):
        return None
    return terms, erased


def _transposed_product(block, matmul, producer, read, protected):
    """``(a, b)`` when ``matmul`` is ``permute(a, (1, 0)) @ b`` with the permute read only by
    it; else None."""
    if matmul.type != "matmul" or len(matmul.inputs) != 2:
        return None
    left, right = matmul.inputs
    permute = producer.get(left) if isinstance(left, str) else None
    if permute is None or permute.type != "permute" or \
            tuple(permute.attrs.get("dims", ())) not in ((1, 0), (-1, -2), (1, -2), (-1, 0)) or \
            left in protected or not isinstance(right, str):
        return None
    return permute.inputs[0], right


def _batched(block, root, terms) -> list:
    """``concat``, ``concat``, ``permute``, ``matmul`` computing the sum into ``root``'s
    output."""
    a_var, b_var = block.var(terms[0][0]), block.var(terms[0][1])
    k = len(terms)
    rows = k * a_var.shape[0]
    stacked_a = block.create_var((rows, a_var.shape[1]), a_var.dtype)
    stacked_b = block.create_var((rows, b_var.shape[1]), b_var.dtype)
    transposed = block.create_var((a_var.shape[1], rows), a_var.dtype)
    origin = root.origin
    return [Operator("concat", [a for a, _ in terms], [stacked_a.name], {"dim": 0},
                     origin=origin),
            Operator("concat", [b for _, b in terms], [stacked_b.name], {"dim": 0},
                     origin=origin),
            Operator("permute", [stacked_a.name], [transposed.name], {"dims": (1, 0)},
                     origin=origin),
            Operator("matmul", [transposed.name, stacked_b.name], list(root.outputs),
                     origin=origin)]
