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

A sum whose terms, on one side, are the values another product stacks plus at most
:data:`MAX_EXTRA` more (an LSTM's input weight gets one gradient term more than its recurrent
weight: the step computing the initial state) reads that stack and adds the extra terms' own
products, rather than copy every value into a second, slightly longer stack.

A bias's gradient, a sum of column sums ``sum(g_k, dim=0)`` (each maybe kept 2-D and reshaped
to 1-D, as autodiff writes the reduction of a broadcast), becomes one column sum of the stacked
``g_k`` when a weight's batched gradient stacks the same ``g_k`` anyway (a linear layer or an
RNN cell at every step); a stack of the same values in the same order is built once (an LSTM's
two weights and its bias all read one stack of the gate gradients). Alone, the copy into the
stack would cost more than the separate sums it saves, so such sums are left as they are.

With a second CPU stream (:mod:`~hybridfw.static.streams`, ``hf.set_num_interop_threads``
>= 2), each stack is cut into :data:`CHUNKS` pieces of consecutive values, and each piece's
``concat``, ``permute`` and product (or column sum) sits right after the last of its values is
computed, not at the end: the executor runs those products on the worker while the rest of the
backward pass goes on (an LSTM's weight gradients overlap its backward recurrence), and the
pieces' results are added where the sum was. A gate gradient then lives until its piece is
stacked rather than to the end. One thread: one stack (one large product is the faster call).

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
from .. import streams
from .analysis import place_early, readers, resolve_fetch
from .clone import working_copy

__all__ = ["CHUNKS", "MAX_EXTRA", "MIN_TERMS", "pieces", "run"]

MIN_TERMS = 3  # below, the two copies into A and B cost about what the batching saves
MAX_EXTRA = 2  # terms left out of a stack another product builds: a product and an add each
CHUNKS = 6     # with a second stream: stacks cut in this many pieces (see the module docstring)


def run(program: Program, fetch=None) -> Program:
    """A copy of ``program`` with its sums of transposed products batched."""
    protected = set(resolve_fetch(program, fetch))
    program = working_copy(program)
    block = program.global_block()
    read = readers(program)
    producer = {name: op for op in block.ops for name in op.outputs}
    position = {id(op): i for i, op in enumerate(block.ops)}
    matches = []  # (root add, kind, terms, erased), in program order
    for op in block.ops:  # (the adds inside a matched sum are inner: never roots themselves)
        if op.type == "add" and not _inner(op, block, read, protected):
            found = _match(block, op, producer, position, read, protected)
            if found is not None:
                matches.append((op, *found))
    # a column sum is batched only onto a stack a product batching builds anyway: alone, the
    # copy into the stack would cost more than the separate sums it saves
    product_stacks = {tuple(pair[k] for pair in terms)
                      for _, kind, terms, _ in matches if kind == "matmul" for k in (0, 1)}
    replaced: dict = {}  # id(root add) -> the operators computing its sum
    doomed: set = set()
    stacks: dict = {}  # the values stacked so far (in order) -> the stack's name
    chunked: dict = {}  # values stacked by a product -> in how many pieces
    for _, kind, terms, _ in matches:  # known before any sum is rewritten: a column sum
        if kind == "matmul":           # met first (a bias's) shares the products' pieces
            _pieces_of(block, _split(terms, product_stacks)[0], chunked)
    early: set = set()  # ids of the operators of stack pieces: placed as early as they can be
    for op, kind, terms, erased in matches:
        if kind == "rows" and tuple(terms) not in product_stacks:
            continue
        if kind == "matmul":
            replaced[id(op)] = _batched(block, op, *_split(terms, product_stacks), stacks,
                                        chunked, early)
        else:
            replaced[id(op)] = _summed(block, op, terms, stacks, chunked.get(tuple(terms), 1),
                                       early)
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
    block.ops = place_early(block, ops, early) if early else ops
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
    """``(kind, terms, erased)``: ``("matmul", [(a_k, b_k)], ...)`` for a sum of transposed
    products, ``("rows", [g_k], ...)`` for a sum of column sums, rooted at ``root``, and every
    operator the rewrite replaces; None when the sum is neither."""
    out = block.vars[root.outputs[0]]
    leaves, erased, stack = [], [], [root]
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
            leaves.append(source)
    if len(leaves) < MIN_TERMS:
        return None
    leaves.sort(key=lambda op: position[id(op)])  # in program order
    if leaves[0].type != "matmul":
        return _match_column_sums(block, out, leaves, erased, producer, read, protected)
    terms, permutes = [], []
    for source in leaves:
        term = _transposed_product(block, source, producer, read, protected)
        if term is None:
            return None
        terms.append(term)
        erased.append(source)
        permutes.append(producer[source.inputs[0]])
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
    return "matmul", terms, erased


def _match_column_sums(block, out, leaves, erased, producer, read, protected):
    """The ``("rows", [g_k], erased)`` of a sum whose leaves are all ``sum(g_k, dim=0)`` of
    2-D ``g_k`` of one shape and the output's dtype, each giving the output's shape: directly
    (``keepdim`` as the output's rank says) or through a ``reshape`` of a ``keepdim`` sum read
    only by it. None otherwise."""
    terms = []
    for source in leaves:
        column_sum = source
        if source.type == "reshape":
            inner = source.inputs[0]
            column_sum = producer.get(inner) if isinstance(inner, str) else None
            if column_sum is None or not _private(block, inner, source, read, protected) or \
                    not column_sum.attrs.get("keepdim"):
                return None
            erased.append(source)
        if column_sum.type != "sum" or not isinstance(column_sum.inputs[0], str):
            return None
        dim = column_sum.attrs.get("dim")
        if (dim,) not in ((0,), (-2,)) and (not isinstance(dim, (tuple, list)) or
                                            tuple(dim) not in ((0,), (-2,))):
            return None
        terms.append(column_sum.inputs[0])
        erased.append(column_sum)
    first = block.var(terms[0])
    shape, dtype = tuple(first.shape), first.dtype
    if len(shape) != 2 or -1 in shape or dtype is not out.dtype or \
            not dtype.is_floating_point or tuple(out.shape) not in ((shape[1],), (1, shape[1])):
        return None
    for name in terms:
        var = block.var(name)
        if tuple(var.shape) != shape or var.dtype is not dtype:
            return None
    for source in leaves:
        if tuple(block.var(source.outputs[0]).shape) != tuple(out.shape):
            return None
    return "rows", terms, erased


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


def pieces(count: int, macs: int) -> int:
    """In how many pieces to cut a stack of ``count`` values for products of ``macs``
    multiply-adds in all: :data:`CHUNKS` with a second stream, fewer when a piece would hold
    fewer than :data:`MIN_TERMS` values or cost less than the worker's minimum
    (:data:`~hybridfw.static.streams.MIN_MACS`); 1 with one thread."""
    if not streams.active():
        return 1
    return max(1, min(CHUNKS, count // MIN_TERMS, macs // streams.MIN_MACS))


def _stacked(block, names, stacks: dict, origin, ops: list, chunks: int, early: set) -> list:
    """The names of ``names`` stacked along their rows, in ``chunks`` pieces of consecutive
    values: each a stack made before (``stacks``), or a new ``concat`` appended to ``ops`` (and
    to ``early`` when there are several)."""
    size = -(-len(names) // chunks)
    pieces = []
    for start in range(0, len(names), size):
        key = tuple(names[start:start + size])
        name = stacks.get(key)
        if name is None:
            first = block.var(key[0])
            name = block.create_var((len(key) * first.shape[0], first.shape[1]),
                                    first.dtype).name
            ops.append(Operator("concat", list(key), [name], {"dim": 0}, origin=origin))
            if size < len(names):
                early.add(id(ops[-1]))
            stacks[key] = name
        pieces.append(name)
    return pieces


def _added(block, parts: list, result, origin, ops: list) -> None:
    """``add`` s summing ``parts`` (in order) into ``result`` (the last part's name when it is
    alone)."""
    total = parts[0]
    out = block.var(result)
    for k, part in enumerate(parts[1:], 2):
        summed = result if k == len(parts) else block.create_var(out.shape, out.dtype).name
        ops.append(Operator("add", [total, part], [summed], origin=origin))
        total = summed


def _split(terms, product_stacks) -> tuple:
    """``(batched, extra)``: ``terms`` cut so that ``batched`` stacks, on one side, exactly the
    values another product stacks anyway (the longest such), leaving at most
    :data:`MAX_EXTRA` terms as products of their own; ``(terms, [])`` when there is none.
    An LSTM's input weight gets one gradient term more than its recurrent weight (the step
    that computes the initial state): rather than copy every gate gradient into a second
    stack, its sum reads the recurrent weight's stack and adds that one product."""
    best = (terms, [])
    for side in (0, 1):
        names = tuple(pair[side] for pair in terms)
        for key in product_stacks:
            n = len(key)
            if not MIN_TERMS <= n < len(names) or len(names) - n > MAX_EXTRA or \
                    (best[1] and n <= len(best[0])):
                continue
            if names[:n] == key:
                best = (terms[:n], terms[n:])
            elif names[-n:] == key:
                best = (terms[-n:], terms[:-n])
    return best


def _batched(block, root, terms, extra, stacks, chunked, early) -> list:
    """``concat``, ``concat`` (unless made before), ``permute``, ``matmul`` computing the sum of
    ``terms`` (per piece, then ``add`` s) and then, for each ``extra`` term, a ``permute``,
    ``matmul`` and ``add``: the whole sum into ``root``'s output. A side stacked before keeps
    its pieces (``chunked``), so the stack is shared."""
    ops: list = []
    origin = root.origin
    result = root.outputs[0]
    out = block.var(result)
    sides, chunks = _pieces_of(block, terms, chunked)
    stacked_a = _stacked(block, list(sides[0]), stacks, origin, ops, chunks, early)
    stacked_b = _stacked(block, list(sides[1]), stacks, origin, ops, chunks, early)
    total = block.create_var(out.shape, out.dtype).name if extra else result
    if len(stacked_a) == 1:
        ops += _transposed_matmul(block, stacked_a[0], stacked_b[0], total, origin)
    else:
        parts = [block.create_var(out.shape, out.dtype).name for _ in stacked_a]
        for a, b, part in zip(stacked_a, stacked_b, parts):
            piece = _transposed_matmul(block, a, b, part, origin)
            early.update(id(op) for op in piece)
            ops += piece
        _added(block, parts, total, origin, ops)
    for k, (a, b) in enumerate(extra):
        product = block.create_var(out.shape, out.dtype).name
        summed = result if k == len(extra) - 1 else block.create_var(out.shape, out.dtype).name
        ops += _transposed_matmul(block, a, b, product, origin)
        ops.append(Operator("add", [total, product], [summed], origin=origin))
        total = summed
    return ops


def _pieces_of(block, terms, chunked) -> tuple:
    """``(sides, chunks)``: the two stacks (tuples of names) the product of ``terms`` reads and
    in how many pieces they are cut: as a side was before (``chunked``), else :func:`pieces`;
    recorded in ``chunked`` for both sides."""
    sides = (tuple(a for a, _ in terms), tuple(b for _, b in terms))
    a, b = block.var(terms[0][0]), block.var(terms[0][1])
    chunks = chunked.get(sides[0]) or chunked.get(sides[1]) or pieces(
        len(terms), len(terms) * a.shape[0] * a.shape[1] * b.shape[1])
    for side in sides:
        chunked.setdefault(side, chunks)
    return sides, chunks


def _transposed_matmul(block, a, b, out, origin) -> list:
    """``permute(a, (1, 0))`` and its ``matmul`` by ``b`` into ``out``."""
    a_var = block.var(a)
    transposed = block.create_var((a_var.shape[1], a_var.shape[0]), a_var.dtype)
    return [Operator("permute", [a], [transposed.name], {"dims": (1, 0)}, origin=origin),
            Operator("matmul", [transposed.name, b], [out], origin=origin)]


def _summed(block, root, terms, stacks, chunks, early) -> list:
    """``concat`` (unless made before) and one column ``sum`` into ``root``'s output (per
    piece, then ``add`` s)."""
    ops: list = []
    stacked = _stacked(block, terms, stacks, root.origin, ops, chunks, early)
    result = root.outputs[0]
    out = block.var(result)
    keepdim = len(out.shape) == 2
    parts = [result] if len(stacked) == 1 else \
        [block.create_var(out.shape, out.dtype).name for _ in stacked]
    for piece, part in zip(stacked, parts):
        ops.append(Operator("sum", [piece], [part], {"dim": (0,), "keepdim": keepdim},
                            origin=root.origin))
        if len(stacked) > 1:
            early.add(id(ops[-1]))
    if len(stacked) > 1:
        _added(block, parts, result, root.origin, ops)
    return ops
