"""Splitting a program into a forward program and a backward program that run separately.

``hf.jit.to_static`` trains by running the forward when the function is called and the backward
later, at ``loss.backward()``. :func:`split_forward_backward` cuts a program holding both (the
forward operators, then the backward :func:`hf.static.gradients` appended, seeded by target
gradients fed as inputs) into two programs, each run by the ordinary
:class:`~hybridfw.static.Executor`:

- the **forward program** holds the global-block operators the forward fetch targets need, in
  their order, plus every operator with side effects (a write to a parameter, a Python callback
  marked ``has_side_effects``) that does not depend on the seeds. Its inputs are the program's
  inputs less the seeds.
- the **backward program** holds the remaining operators the backward fetch targets need. Its
  inputs are the *saved* values (values of the forward program and forward inputs that backward
  operators read), then the seeds.

Run the forward program fetching ``forward_fetch + saved_names``, keep the saved values, and
feed them later to the backward program under the same names. Parameters and constants are never
saved: both programs hold the same eager tensors in ``params``. A differentiated while loop's
per-iteration stack is one saved value (its token carries the records, see
:mod:`.loop_stack`), and the values a ``cond`` exports for its backward are saved like any other
(the branch that did not run leaves zeros there, which the backward never reads).

Example::

    >>> import hybridfw as hf
    >>> w = hf.tensor([1.0, 2.0], requires_grad=True)
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     x = hf.static.data("x", [2])
    ...     seed = hf.static.data("seed", [])
    ...     loss = (x * w).exp().sum()
    ...     gw, = hf.static.gradients(loss, [w], target_gradients=[seed])
    >>> fwd, bwd, saved = split_forward_backward(prog, [loss.name], [gw.name])
    >>> exe = hf.static.Executor()
    >>> loss_value, *saved_values = exe.run(fwd, feed={"x": hf.ones(2)},
    ...                                     fetch_list=[loss.name] + saved)
    >>> feed = dict(zip(saved, saved_values), seed=hf.tensor(1.0))
    >>> exe.run(bwd, feed=feed, fetch_list=[gw.name])[0].shape
    (2,)
"""
from __future__ import annotations

from .ir import Program, Variable
from .liveness import op_reads, op_writes
from .passes.analysis import has_side_effects, walk_ops
from .passes.clone import clone_program
from .passes.rewrite import drop_unreachable_blocks, drop_unused_constants

__all__ = ["split_forward_backward"]


def split_forward_backward(program: Program, forward_fetch, backward_fetch,
                           seed_names=None) -> tuple:
    """Split ``program`` into ``(forward_program, backward_program, saved_names)``.

    ``forward_fetch`` / ``backward_fetch``: the values (names or Variables of the global block)
    each run will fetch. ``seed_names``: the inputs that seed the backward (the
    ``target_gradients`` fed as ``hf.static.data``); by default the inputs that the operators
    needed for ``backward_fetch`` read and those needed for ``forward_fetch`` do not. The
    forward program is run fetching ``forward_fetch + saved_names``; the backward program's
    inputs are ``saved_names + seeds``. ``program`` itself is not changed.

    Raises ``ValueError`` when a forward fetch target depends on a seed, or a name is not a
    value of the program's global block (seeds: not an input).
    """
    if not isinstance(program, Program):
        raise TypeError(f"split_forward_backward: expected a hf.static.Program, got "
                        f"{type(program).__name__}")
    block = program.global_block()
    forward_fetch = _names(program, forward_fetch, "forward_fetch")
    backward_fetch = _names(program, backward_fetch, "backward_fetch")
    ops = block.ops
    reads = [op_reads(op, block) for op in ops]
    writes = [op_writes(op, block) for op in ops]
    effects = [has_side_effects(block, op) for op in ops]

    seeds = _seeds(program, seed_names, reads, writes, forward_fetch, backward_fetch)
    tainted = set(seeds)  # values that depend on a seed
    depends = []
    for read, written in zip(reads, writes):
        hit = any(n in tainted for n in read)
        depends.append(hit)
        if hit:
            tainted.update(written)
    bad = [n for n in forward_fetch if n in tainted]
    if bad:
        raise ValueError(f"split_forward_backward: forward fetch target(s) {bad} depend on the "
                         f"backward seed(s) {sorted(seeds)}, so the forward program cannot "
                         "compute them")
    forward = _needed(reads, writes, forward_fetch,
                      [i for i, e in enumerate(effects) if e and not depends[i]])
    backward = _needed(reads, writes, backward_fetch,
                       [i for i, e in enumerate(effects) if e and depends[i]], stop=forward)

    available = {n for n in program.feeds if n not in seeds}
    for i in forward:
        available.update(writes[i])
    saved: dict = {}
    for i in sorted(backward):
        for name in reads[i]:
            if name in available:
                saved.setdefault(name)
    for name in backward_fetch:
        if name in available:
            saved.setdefault(name)
    saved_names = list(saved)

    forward_feeds = [n for n in program.feeds if n not in seeds]
    forward_program = _subprogram(program, forward, forward_feeds,
                                  forward_fetch + saved_names)
    backward_program = _subprogram(program, backward, saved_names + seeds, backward_fetch)
    return forward_program, backward_program, saved_names


def _names(program: Program, targets, what: str) -> list:
    if isinstance(targets, (str, Variable)):
        targets = [targets]
    block = program.global_block()
    names = []
    for target in targets:
        name = target.name if isinstance(target, Variable) else target
        if not isinstance(name, str) or name not in block.vars:
            raise ValueError(f"split_forward_backward: {what} entry {target!r} is not a value of "
                             "the program's global block")
        names.append(name)
    return names


def _seeds(program, seed_names, reads, writes, forward_fetch, backward_fetch) -> list:
    if seed_names is not None:
        seeds = [seed_names] if isinstance(seed_names, str) else list(seed_names)
        for name in seeds:
            if name not in program.feeds:
                raise ValueError(f"split_forward_backward: seed {name!r} is not an input of the "
                                 f"program (inputs: {program.feeds})")
        return seeds
    forward_reads = {n for i in _needed(reads, writes, forward_fetch, ()) for n in reads[i]}
    backward_reads = {n for i in _needed(reads, writes, backward_fetch, ()) for n in reads[i]}
    return [n for n in program.feeds if n in backward_reads and n not in forward_reads
            and n not in forward_fetch]


def _needed(reads, writes, roots, root_ops, stop=frozenset()) -> set:
    """Indices of the operators that ``roots`` (names) and ``root_ops`` need, walking back from
    the end; operators in ``stop`` are not taken (what they write is an input then)."""
    needed = set(roots)
    root_ops = set(root_ops)
    keep = set()
    for i in reversed(range(len(reads))):
        if i in stop:
            continue
        if i in root_ops or any(n in needed for n in writes[i]):
            keep.add(i)
            needed.update(reads[i])
    return keep


def _subprogram(program: Program, keep: set, feeds: list, fetch: list) -> Program:
    """A copy of ``program`` with only the global-block operators ``keep`` and inputs ``feeds``
    (declared as in ``program``)."""
    new = clone_program(program, keep=keep)  # as erasing the others from a full copy would
    block = new.global_block()
    drop_unreachable_blocks(new)
    original = program.global_block()
    for name in feeds:
        if name not in block.vars:
            var = original.vars[name]
            block.create_var(var.shape, var.dtype, name)
    produced = {n for _, op in walk_ops(block) for n in op.outputs}
    read = {n for _, op in walk_ops(block) for n in op.input_names()}
    for name in program.feeds:
        if name not in feeds and name not in produced and name not in read:
            del block.vars[name]
    new.feeds = list(feeds)
    drop_unused_constants(new, fetch)
    inplace = getattr(new, "inplace", None)
    if inplace:
        new.inplace = {out: source for out, source in inplace.items()
                       if out in produced and source in produced}
    return new
