"""The static recomputation pass: keep fewer forward values for the backward, recompute the rest.

A training program (forward operators, then the backward :func:`hf.static.gradients` appended)
makes the forward keep every value a backward operator reads: after
:func:`~hybridfw.static.partition.split_forward_backward` they are the *saved* values, alive from
the forward run to the end of the backward. :func:`recompute` chooses which forward values stay
saved (the *checkpoints*) and rewrites the program so that the backward recomputes the others:
the forward operators needed are cloned (fresh names) into the backward part, just before the
first backward operator that reads what they compute, and the backward operators read the
clones. The forward part is unchanged, so it still runs once at call time.

What may be recomputed: pure, deterministic registry operators of the forward (elementwise,
``fused_elementwise``, views, ``linear``, ...). Never recomputed, so their outputs are kept when
needed: random draws (:data:`~hybridfw.static.passes.analysis.RANDOM_OPS`: a dropout mask is
drawn once; the cheap operators computing the mask from the draw may be recomputed),
control-flow operators (``cond``/``while``: values inside sub-blocks are out of scope),
operators with side effects (``assign_param``, a ``py_func`` that says so), operators reading a
parameter some ``assign_param`` writes (the write has run by the time the backward runs), and
values the caller fetches (forward or backward results). Program inputs are always available to
the backward (the caller holds them): they are saved but not counted against the budget.

The budget (``budget``):

- ``'sqrt'``: Chen et al.'s sqrt(n) segments: among the n candidate operators of the forward
  (recomputable, not views), every ceil(sqrt(n))-th output is a checkpoint; the backward
  recomputes about one extra forward and keeps about sqrt(n) values plus one segment.
- a number of bytes: the most bytes of forward values saved for the backward (program inputs
  excluded). On a chain-shaped forward (each operator reads forward values only from the
  operator just before it: an MLP) an exact dynamic program picks the checkpoints that minimize
  the recomputation cost under the budget; otherwise Chen's greedy planner (walk the forward in
  order summing output bytes, place a checkpoint where the sum since the last one exceeds a
  threshold) is swept over thresholds, keeping the cheapest plan within the budget. A budget
  below what must be kept anyway gives the smallest plan, with ``within_budget`` False.

Cost of recomputing an operator (:func:`op_cost`, in elements processed): 0 for views, the
output size for elementwise operators (times the number of fused operators), multiply-adds for
``linear``/``matmul``/``conv2d``, input plus output sizes for the rest; so cheap operators are
recomputed in preference to expensive ones. Sizes come from the declared shapes, or from
``feed_shapes``; a dim still unknown (-1) counts as ``batch_size`` (1 by default, and the
report says so).

Run the pass after CSE (which would merge the clones back into their originals) and before the
in-place pass (whose annotation depends on the final readers): ``hf.jit.to_static(...,
memory_budget=...)`` optimizes without the in-place pass, recomputes, then runs it.

Example::

    >>> import hybridfw as hf
    >>> from hybridfw.static.partition import split_forward_backward
    >>> w = hf.ones(8, 8, requires_grad=True)
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     x = hf.static.data("x", [4, 8])
    ...     seed = hf.static.data("seed", [])
    ...     h = x
    ...     for _ in range(9):
    ...         h = (h @ w).tanh()
    ...     loss = h.sum()
    ...     gw, = hf.static.gradients(loss, [w], target_gradients=[seed])
    >>> new, report = recompute(prog, [loss.name], [gw.name], ["seed"], "sqrt")
    >>> len(split_forward_backward(prog, [loss.name], [gw.name], ["seed"])[2])
    10
    >>> len(split_forward_backward(new, [loss.name], [gw.name], ["seed"])[2])
    4
    >>> report.saved_bytes < report.baseline_saved_bytes
    True
"""
from __future__ import annotations

import math
import os
import sys
import warnings
from dataclasses import dataclass, field

from ..ops.registry import get_op
from ..static.fused import FUSIBLE_OPS
from ..static.ir import Operator, Program
from ..static.liveness import op_reads, op_writes
from ..static.memory_plan import plan_arena, resolve_shapes
from ..static.partition import split_forward_backward
from ..static.passes.analysis import assigned_state, attr_names, has_side_effects, is_random
from ..static.passes.clone import clone_program
from ..static.verifier import is_registry_op

__all__ = ["RecomputeReport", "check_budget", "op_cost", "recompute"]

STRATEGIES = ("auto", "greedy", "dp")
_EXPENSIVE = frozenset({"linear", "matmul", "conv2d", "einsum"})


def check_budget(budget):
    """``budget`` if it is ``'sqrt'`` or a number of bytes >= 0; else a ValueError/TypeError
    saying what is accepted."""
    if isinstance(budget, str):
        if budget != "sqrt":
            raise ValueError(f"memory budget {budget!r} is not understood: pass a number of "
                             "bytes (e.g. 64 * 2**20) or 'sqrt'")
        return budget
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        raise TypeError(f"memory budget must be a number of bytes or 'sqrt', got "
                        f"{type(budget).__name__}")
    if not budget >= 0 or math.isinf(budget):
        raise ValueError(f"memory budget must be a finite number of bytes >= 0, got {budget}")
    return budget


@dataclass
class RecomputeReport:
    """What :func:`recompute` decided, with its planned figures (bytes, elements processed).

    ``saved_bytes``: forward values kept for the backward (program inputs excluded), the planned
    peak of the saved set; ``baseline_saved_bytes``: the same without the pass; ``input_bytes``:
    program inputs the backward reads. ``checkpoints``: the saved forward values;
    ``recomputed``: the forward values the backward recomputes (original names). Costs are in
    elements processed (:func:`op_cost`). ``backward_arena_bytes``/``planned_backward_peak_bytes``
    (saved + inputs + the backward's arena): only when every shape is known.
    """

    budget: object
    strategy: str
    checkpoints: list
    recomputed: list
    num_recomputed_ops: int
    recompute_cost: float
    forward_cost: float
    saved_bytes: int
    baseline_saved_bytes: int
    input_bytes: int
    within_budget: bool
    backward_arena_bytes: int | None = None
    planned_backward_peak_bytes: int | None = None
    notes: list = field(default_factory=list)

    def summary(self) -> str:
        head = (f"recompute ({self.strategy}, budget {self.budget}): saved "
                f"{self.saved_bytes} B (without the pass {self.baseline_saved_bytes} B) in "
                f"{len(self.checkpoints)} values, {self.num_recomputed_ops} operators "
                f"recomputed, cost {self.recompute_cost:.3g} (forward {self.forward_cost:.3g})")
        lines = [head]
        if self.planned_backward_peak_bytes is not None:
            lines.append(f"planned backward peak {self.planned_backward_peak_bytes} B")
        return "\n".join(lines + self.notes)


def op_cost(op: Operator, metas: dict, numel) -> float:
    """Elements processed to recompute ``op`` (``metas``: name -> TensorMeta; ``numel``: the
    size estimate of a shape)."""
    if op.type == "fused_elementwise":
        return numel(metas[op.outputs[0]].shape) * len(op.attrs.get("ops", ())) or 1
    if get_op(op.type).view:
        return 0.0
    out = numel(metas[op.outputs[0]].shape)
    if op.type in FUSIBLE_OPS or op.type == "cast":
        return float(out)
    tensors = [metas[n].shape for n in op.input_names()]
    if op.type in ("linear", "matmul") and tensors and tensors[0]:
        return float(out * max(tensors[0][-1], 1))
    if op.type == "conv2d" and len(tensors) > 1 and tensors[1]:
        return float(out * max(numel(tensors[1][1:]), 1))
    return float(out + sum(numel(s) for s in tensors))


class _Forward:
    """The forward of a training program: its operators, what the backward reads, sizes, costs."""

    def __init__(self, program, forward_fetch, backward_fetch, seeds, feed_shapes, batch_size):
        self.program = program
        block = self.block = program.global_block()
        ops = block.ops
        self.reads = [op_reads(op, block) for op in ops]
        self.writes = [op_writes(op, block) for op in ops]
        self.seeds = list(seeds)
        self.forward = self._forward_ops(forward_fetch)
        self.feeds = [n for n in program.feeds if n not in self.seeds]
        self.notes: list = []
        self.metas, _ = resolve_shapes(program, {n: s for n, s in (feed_shapes or {}).items()
                                                 if n in program.feeds})
        self.batch_size = batch_size
        self.producer = {n: i for i in sorted(self.forward) for n in self.writes[i]}
        assigned = assigned_state(program)
        self.recomputable = {i: self._recomputable(ops[i], i, assigned) for i in self.forward}
        names = set(block.vars)
        self.need: dict = {}  # forward values (and inputs) backward operators read, in order
        self.pinned = set(forward_fetch) | set(backward_fetch)
        for i, op in enumerate(ops):
            if i in self.forward:
                continue
            for n in self.reads[i]:
                if n in self.producer or n in self.feeds:
                    self.need.setdefault(n)
            if op.blocks or not is_registry_op(op.type):  # reads inside sub-blocks stay as they are
                self.pinned.update(self.reads[i])
                self.pinned.update(attr_names(op, names))
        for n in backward_fetch:
            if n in self.producer or n in self.feeds:
                self.need.setdefault(n)
        self.cost = {i: op_cost(ops[i], self.metas, self.numel) if self.recomputable[i] else 0.0
                     for i in self.forward}

    def _forward_ops(self, forward_fetch) -> set:
        """The operators ``split_forward_backward`` puts in the forward program."""
        tainted = set(self.seeds)
        depends = []
        for read, written in zip(self.reads, self.writes):
            hit = any(n in tainted for n in read)
            depends.append(hit)
            if hit:
                tainted.update(written)
        needed, keep = set(forward_fetch), set()
        for i in reversed(range(len(self.reads))):
            op = self.block.ops[i]
            effect = has_side_effects(self.block, op) and not depends[i]
            if effect or any(n in needed for n in self.writes[i]):
                keep.add(i)
                needed.update(self.reads[i])
        return keep

    def _recomputable(self, op, i, assigned) -> bool:
        return (is_registry_op(op.type) and not op.blocks and not is_random(op)
                and not has_side_effects(self.block, op) and len(op.outputs) == 1
                and not any(n in assigned for n in op.input_names())
                and self.producer.get(op.outputs[0]) == i)

    def numel(self, shape) -> int:
        n = 1
        for s in shape:
            if s == -1:
                size = self.batch_size or 1
                note = (f"dims unknown (-1) counted as {size}"
                        + ("" if self.batch_size else " (pass batch_size or feed_shapes)"))
                if note not in self.notes:
                    self.notes.append(note)
                s = size
            n *= s
        return n

    def nbytes(self, name) -> int:
        meta = self.metas[name]
        return self.numel(meta.shape) * meta.dtype.itemsize

    def candidates(self) -> list:
        """Outputs of the recomputable, non-view forward operators, in program order."""
        ops = self.block.ops
        return [ops[i].outputs[0] for i in sorted(self.forward) if self.recomputable[i]
                and not get_op(ops[i].type).view and ops[i].outputs[0] not in self.pinned]

    def evaluate(self, keep) -> tuple:
        """For checkpoints ``keep``: ``(saved, recomputed operator indices)``; ``saved`` lists
        the forward values and inputs the backward then reads."""
        saved, recomputed, seen = set(), set(), set()
        stack = list(self.need)
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            i = self.producer.get(name)
            if i is None:
                if name in self.feeds:
                    saved.add(name)
            elif name in keep or name in self.pinned or not self.recomputable[i]:
                saved.add(name)
            else:
                recomputed.add(i)
                stack.extend(self.reads[i])
        order = {n: k for k, n in enumerate(self.block.vars)}
        return sorted(saved, key=order.__getitem__), recomputed

    def figures(self, keep) -> tuple:
        saved, recomputed = self.evaluate(keep)
        nbytes = sum(self.nbytes(n) for n in saved if n not in self.feeds)
        return nbytes, sum(self.cost[i] for i in recomputed), saved, recomputed


# ---- planners: each returns the set of checkpoints ---------------------------------------------
def _plan_sqrt(fwd: _Forward) -> set:
    candidates = fwd.candidates()
    k = max(1, math.ceil(math.sqrt(len(candidates))))
    return set(candidates[k - 1::k])


def _greedy(fwd: _Forward, threshold: float) -> set:
    """Chen et al.'s greedy planner with one threshold (bytes per segment)."""
    ops = fwd.block.ops
    keep, acc = set(), 0
    candidates = set(fwd.candidates())
    for i in sorted(fwd.forward):
        name = ops[i].outputs[0] if ops[i].outputs else None
        if name not in candidates:
            if not fwd.recomputable[i]:
                acc = 0  # a value that is kept anyway starts a new segment
            continue
        acc += fwd.nbytes(name)
        if acc > threshold:
            keep.add(name)
            acc = 0
    return keep


def _plan_greedy(fwd: _Forward, budget: float) -> set:
    """The cheapest greedy plan within ``budget`` over a sweep of thresholds (else the one
    saving the fewest bytes)."""
    sizes = [fwd.nbytes(n) for n in fwd.candidates()]
    thresholds = {-1.0, math.inf}
    total = 0
    for s in sizes:
        total += s
        thresholds.add(total - 0.5)
    best = None
    for threshold in sorted(thresholds):
        keep = _greedy(fwd, threshold)
        nbytes, cost, _, _ = fwd.figures(keep)
        score = (nbytes > budget, cost if nbytes <= budget else nbytes, nbytes)
        if best is None or score < best[0]:
            best = (score, keep)
    return best[1]


def _chain(fwd: _Forward) -> list | None:
    """The forward operator indices if the forward is a chain (each reads forward values only
    from the one before it), else None."""
    order = sorted(fwd.forward)
    previous = set()
    for i in order:
        inner = [n for n in fwd.reads[i] if n in fwd.producer]
        if any(n not in previous for n in inner) or len(fwd.writes[i]) != 1:
            return None
        previous = set(fwd.writes[i])
    return order


def _plan_chain(fwd: _Forward, chain: list, budget: float) -> set:
    """Exact dynamic program on a chain: the checkpoints minimizing the recompute cost with the
    saved bytes within ``budget`` (None when nothing fits).

    The recompute cost alone barely depends on where the checkpoints go (each segment costs
    about its length), so among the cheapest plans the one with the smallest sum of squared
    segment bytes wins: even segments, hence the smallest backward peak (saved values plus the
    segment being recomputed). Both are sums, so the order (cost, squares) is exact in the DP.
    """
    ops = fwd.block.ops
    n = len(chain)
    names = [None] + [ops[i].outputs[0] for i in chain]
    need = [False] + [names[j] in fwd.need for j in range(1, n + 1)]
    forced = [False] + [not fwd.recomputable[i] or names[j + 1] in fwd.pinned
                        for j, i in enumerate(chain)]
    size = [0] + [fwd.nbytes(names[j]) for j in range(1, n + 1)]
    cost = [0.0] + [fwd.cost[i] for i in chain]
    prefix, bytes_prefix = [0.0], [0]
    for c, b in zip(cost[1:], size[1:]):
        prefix.append(prefix[-1] + c)
        bytes_prefix.append(bytes_prefix[-1] + b)
    # states[j]: Pareto front of (bytes of checkpoints before j, (cost, squares), back-pointer)
    # with a checkpoint at j; j = n + 1 is the end
    states = [[] for _ in range(n + 2)]
    states[0] = [(0, (0.0, 0), None)]
    for j in range(1, n + 2):
        candidates = []
        last_need = None  # the last value in (i, j) the backward reads
        first_forced = None  # the first value in (i, j) that cannot be recomputed
        for i in range(j - 1, -1, -1):
            m = i + 1
            if m < j:
                if need[m] and last_need is None:
                    last_need = m
                if forced[m]:
                    first_forced = m
            if last_need is not None and first_forced is not None and first_forced <= last_need:
                break  # recomputing would go through a kept-only value; so for every earlier i
            if last_need is None:
                segment, square = 0.0, 0
            else:
                segment = prefix[last_need] - prefix[i]
                square = (bytes_prefix[last_need] - bytes_prefix[i]) ** 2
            add = size[i] if i > 0 and (need[i] or last_need is not None) else 0
            for nbytes, (c, sq), _ in states[i]:
                if nbytes + add <= budget:
                    candidates.append((nbytes + add, (c + segment, sq + square),
                                       (i, nbytes, (c, sq))))
        states[j] = _pareto(candidates)
    if not states[n + 1]:
        return None
    nbytes, c, back = min(states[n + 1], key=lambda s: (s[1], s[0]))
    keep = set()
    while back is not None and back[0] > 0:
        i, b, cst = back
        keep.add(names[i])
        back = next(s[2] for s in states[i] if s[0] == b and s[1] == cst)
    return keep


def _pareto(candidates) -> list:
    front = []
    for item in sorted(candidates, key=lambda s: (s[0], s[1])):
        if not front or item[1] < front[-1][1]:
            front.append(item)
    return front


# ---- the pass ----------------------------------------------------------------------------------
def recompute(program: Program, forward_fetch, backward_fetch, seed_names, budget, *,
              feed_shapes: dict | None = None, batch_size: int | None = None,
              strategy: str = "auto", checkpointed=None) -> tuple:
    """Rewrite a training program so the backward recomputes forward values instead of keeping
    them; return ``(program, RecomputeReport)`` (``program`` itself is not changed).

    ``forward_fetch`` / ``backward_fetch`` / ``seed_names``: as for
    :func:`~hybridfw.static.partition.split_forward_backward` (names). ``budget``: ``'sqrt'`` or
    the most bytes of forward values to keep (see the module docstring). ``feed_shapes``:
    concrete input shapes for the size estimates (and the backward's planned arena);
    ``batch_size``: what an unknown dim counts as. ``strategy``: ``'auto'`` (the exact dynamic
    program on chains, else greedy), ``'greedy'`` or ``'dp'`` (chains only) for byte budgets.

    ``checkpointed`` (with ``budget=None``): the names to recompute, every other forward value
    the backward reads staying saved (those ``hf.memory.checkpoint`` marked while the program
    was traced: strategy ``'checkpoint'``); names the passes removed are ignored.
    """
    if budget is None and checkpointed is None:
        raise ValueError("recompute: pass a budget, or the checkpointed values to recompute")
    budget = None if budget is None else check_budget(budget)
    if strategy not in STRATEGIES:
        raise ValueError(f"recompute: strategy must be one of {STRATEGIES}, got {strategy!r}")
    forward_fetch, backward_fetch = list(forward_fetch), list(backward_fetch)
    fwd = _Forward(program, forward_fetch, backward_fetch, seed_names, feed_shapes, batch_size)
    chain = _chain(fwd)
    limit = math.inf if budget in ("sqrt", None) else budget
    if budget is None:
        marked = set(checkpointed)
        used, keep = "checkpoint", {n for n in fwd.candidates() if n not in marked}
    elif budget == "sqrt":
        used, keep = "sqrt", _plan_sqrt(fwd)
    elif strategy == "greedy" or (strategy == "auto" and chain is None):
        used, keep = "greedy", _plan_greedy(fwd, budget)
    else:
        if chain is None:
            raise ValueError("recompute: strategy='dp' needs a chain-shaped forward (each "
                             "operator reading forward values only from the one before it); "
                             "use 'greedy' or 'auto'")
        used, keep = "dp", _plan_chain(fwd, chain, budget)
        if keep is None:  # nothing fits: the plan keeping the fewest bytes
            keep = set()
    nbytes, cost, saved, recomputed = fwd.figures(keep)
    baseline = sum(fwd.nbytes(n) for n in fwd.need if n not in fwd.feeds)
    new = _rewrite(program, fwd, recomputed)
    ops = program.global_block().ops
    report = RecomputeReport(
        budget=budget, strategy=used,
        checkpoints=[n for n in saved if n not in fwd.feeds],
        recomputed=[ops[i].outputs[0] for i in sorted(recomputed)],
        num_recomputed_ops=len(recomputed), recompute_cost=cost,
        forward_cost=sum(op_cost(ops[i], fwd.metas, fwd.numel) for i in fwd.forward
                         if is_registry_op(ops[i].type) and not ops[i].blocks),
        saved_bytes=nbytes, baseline_saved_bytes=baseline,
        input_bytes=sum(fwd.nbytes(n) for n in saved if n in fwd.feeds),
        within_budget=nbytes <= limit, notes=fwd.notes)
    if not report.within_budget:
        warnings.warn(f"recompute: the budget of {budget} bytes is below what the backward must "
                      f"keep anyway; the plan keeps {nbytes} bytes", UserWarning,
                      stacklevel=_caller_stacklevel())
    _plan_backward(new, fwd, forward_fetch, backward_fetch, report)
    return new, report


def _caller_stacklevel() -> int:
    """The ``stacklevel`` pointing a warning at the first caller outside the hybridfw package
    (the user's call that traced the program, through to_static's layers)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _rewrite(program: Program, fwd: _Forward, recomputed: set) -> Program:
    """A copy of ``program`` where the backward reads clones of the ``recomputed`` operators,
    each placed just before the first backward operator needing it."""
    new = clone_program(program)
    block = new.global_block()
    original = list(block.ops)
    renamed: dict = {}
    result = []

    def materialize(name):
        i = fwd.producer[name]
        if name in renamed:
            return
        for inner in fwd.reads[i]:
            if fwd.producer.get(inner) in recomputed:
                materialize(inner)
        op = original[i]
        var = block.var(op.outputs[0])
        clone = block.create_var(var.shape, var.dtype, new.unique_name(f"{name}_r"))
        renamed[name] = clone.name
        inputs = [renamed.get(a, a) if isinstance(a, str) else a for a in op.inputs]
        result.append(Operator(op.type, inputs, [clone.name], dict(op.attrs), origin=op.origin))

    for i, op in enumerate(original):
        if i not in fwd.forward:
            for name in fwd.reads[i]:
                if fwd.producer.get(name) in recomputed:
                    materialize(name)
            op.inputs = tuple(renamed.get(a, a) if isinstance(a, str) else a for a in op.inputs)
        result.append(op)
    block.ops = result
    inplace = getattr(new, "inplace", None)
    if inplace:  # a source the clones read later is no longer free to overwrite
        clones = {id(op) for op in result} - {id(op) for op in original}
        read_late = {a for op in result if id(op) in clones for a in op.input_names()}
        new.inplace = {out: src for out, src in inplace.items() if src not in read_late}
    return new


def _plan_backward(program, fwd, forward_fetch, backward_fetch, report) -> None:
    """The backward program's planned arena, when every shape of its inputs is known."""
    _, backward, _ = split_forward_backward(program, forward_fetch, backward_fetch, fwd.seeds)
    shapes = {}
    for name in backward.feeds:
        meta = fwd.metas.get(name)
        if meta is None or -1 in meta.shape:
            report.notes.append("backward arena not planned: some input shapes are unknown "
                                "(pass feed_shapes, seeds included)")
            return
        shapes[name] = meta.shape
    plan = plan_arena(backward, shapes, backward_fetch)
    report.backward_arena_bytes = plan.arena_bytes
    report.planned_backward_peak_bytes = report.saved_bytes + report.input_bytes + \
        plan.arena_bytes
