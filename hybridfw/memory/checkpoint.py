"""Eager checkpointing: trade one extra forward for the activations of a function (Chen et al.
2016, "Training Deep Nets with Sublinear Memory Cost").

:func:`checkpoint` runs a function without recording its graph and keeps only its inputs. Its
outputs get one autograd node (``CheckpointBackward``, all of them feeding one
``RecomputeBackward``) whose gradient rule re-runs the function with grad enabled -- replaying
the random number generators, so Dropout draws the same mask -- and backpropagates the outputs'
gradients through that recomputed graph: into the inputs, and into every parameter the function
used (their ``.grad`` accumulates exactly as without checkpointing). Gradients are bit for bit
those of the plain run. While the function is recomputed :func:`is_recomputing` is True, so
stateful layers (BatchNorm's running statistics) update once per step, not twice.

:func:`checkpoint_sequential` splits a chain of layers into segments and checkpoints all but the
last: with about sqrt(n) segments the activations held at once drop from O(n) to O(sqrt(n)).
"""
from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Callable
from typing import Any

from ..backend import cpu
from ..dygraph.autograd import (BackwardPass, GatherOutputOp, GradMode, Node, enable_grad,
                                no_grad, run_backward)
from ..dygraph.tensor import Tensor
from ..ops.registry import current_interpreter
from ..random import get_rng_state, set_rng_state

__all__ = ["checkpoint", "checkpoint_sequential", "is_recomputing", "segment_sizes"]


class _Recomputation:
    """How many checkpointed functions are being re-run right now (they can nest)."""

    depth = 0


def is_recomputing() -> bool:
    """True while a checkpoint's backward re-runs its function.

    A layer with state (BatchNorm's running statistics, a step counter) checks it so that the
    recomputation does not update that state a second time. It is False while a static program
    is being built (even during a recomputation), so the program stays valid for every call.

    Example::

        >>> import hybridfw as hf
        >>> hf.memory.is_recomputing()
        False
    """
    return _Recomputation.depth > 0 and not _building_program()


@contextlib.contextmanager
def _recomputation():
    _Recomputation.depth += 1
    try:
        yield
    finally:
        _Recomputation.depth -= 1


# ---- nested arguments and results -----------------------------------------------------------
def _flatten(obj, leaves: list):
    """Append the non-container values of ``obj`` (tuples, lists, dicts) to ``leaves``; returns
    the structure :func:`_unflatten` rebuilds it from."""
    if isinstance(obj, (tuple, list)):
        return (type(obj), [_flatten(v, leaves) for v in obj])
    if isinstance(obj, dict):
        return (type(obj), [(k, _flatten(v, leaves)) for k, v in obj.items()])
    leaves.append(obj)
    return None


def _unflatten(structure, it):
    if structure is None:
        return next(it)
    kind, items = structure
    if issubclass(kind, dict):
        return kind((k, _unflatten(s, it)) for k, s in items)
    values = [_unflatten(s, it) for s in items]
    if kind is tuple or kind is list:
        return kind(values)
    if hasattr(kind, "_fields"):  # a namedtuple
        return kind(*values)
    return kind(values)


# ---- random number generators ---------------------------------------------------------------
def _rng_devices(tensors) -> list:
    devices = [cpu]
    for t in tensors:
        dev = t._storage.device
        if dev not in devices:
            devices.append(dev)
    return devices


@contextlib.contextmanager
def _replayed_rng(devices, states):
    """Run the block from the generator states of the forward, then put back the current ones
    (the plain run draws nothing in backward, so the stream continues where it would have)."""
    if states is None:
        yield
        return
    current = [get_rng_state(d) for d in devices]
    for d, s in zip(devices, states):
        set_rng_state(s, d)
    try:
        yield
    finally:
        for d, s in zip(devices, current):
            set_rng_state(s, d)


# ---- the autograd nodes ---------------------------------------------------------------------
class _CheckpointState:
    """What a checkpoint keeps from its forward for the backward: the function, its arguments
    (tensors included, with their versions) and the generator states before it ran."""

    __slots__ = ("fn", "structure", "leaves", "tensor_slots", "versions", "diff_slots",
                 "devices", "rng_states", "outputs", "pass_key", "grads")

    def __init__(self, fn, structure, leaves, devices, rng_states):
        self.fn = fn
        self.structure = structure
        self.leaves = leaves
        self.tensor_slots = [i for i, v in enumerate(leaves) if isinstance(v, Tensor)]
        self.versions = [leaves[i]._storage.version for i in self.tensor_slots]
        self.diff_slots = [i for i in self.tensor_slots if leaves[i]._rg]
        self.devices = devices
        self.rng_states = rng_states
        self.outputs = None   # (position in the flat result, shape, dtype) per output node
        self.pass_key = None  # the gradient pack of the backward pass ``grads`` belong to
        self.grads = None


def _recompute_rule(g, out, state, *metas, input_index):
    if GradMode.enabled:
        raise RuntimeError("checkpoint: double backward (create_graph=True) through a "
                           "checkpointed function is not supported; call it without "
                           "hf.memory.checkpoint for that")
    if state.pass_key is not g:
        state.grads = _backward_through_recomputation(state, g.grads)
        state.pass_key = g
        g.grads = None  # the outputs' gradients are not needed any more
    if input_index == 0:
        return None
    grad = state.grads[input_index - 1]
    state.grads[input_index - 1] = None
    return grad


class _RecomputeOp:
    """The op of a checkpoint's one recompute node (it is not a registry op). Edge 0 goes to
    :data:`_RECOMPUTE` so the engine calls the rule even when no input requires grad (the
    function's parameters still need theirs); the others go to the inputs that require grad."""

    name = "recompute"
    vjp = (_recompute_rule,)
    variadic = True
    save = (0,)          # the engine drops the state (the saved inputs) after backward
    save_output = False


class _RecomputeAnchor:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<recompute>"


_RECOMPUTE = _RecomputeAnchor()
# the op of the node each checkpoint output gets: hands its gradient to the recompute node,
# which needs the gradients of all outputs at once
_OUTPUT_OP = GatherOutputOp("checkpoint")
_RECOMPUTE_OP = _RecomputeOp()


def _attach(state, flat_out, inputs):
    """Give the differentiable outputs in ``flat_out`` their nodes, all feeding one recompute
    node whose other edges go to the differentiable ``inputs``."""
    leaves = state.leaves
    edges = [_RECOMPUTE]
    metas = [None]
    saved = [state]
    for i in state.diff_slots:
        t = leaves[i]
        edges.append(t._node if t._node is not None else t)
        metas.append((t._data.shape, t.dtype))
        saved.append(None)
    hub = Node(_RECOMPUTE_OP, {}, tuple(edges), tuple(metas), tuple(saved), ())
    input_ids = {id(t) for t in inputs}
    seen = set()
    outputs = []
    for pos, t in enumerate(flat_out):
        # Only tensors made by this call: an input handed back, a tensor that already has a
        # graph or requires grad (a parameter returned as is) keeps its own autograd history.
        if not isinstance(t, Tensor) or id(t) in seen or id(t) in input_ids or t._rg or \
                not t.dtype.is_floating_point:
            continue
        seen.add(id(t))
        outputs.append((pos, t))
    count = len(outputs)
    for index, (_, t) in enumerate(outputs):
        t._node = _OUTPUT_OP.node(hub, index, count)
        t._rg = True
    state.outputs = [(pos, t.shape, t.dtype) for pos, t in outputs]


def _buffers_of(fn) -> list:
    """The buffers of the modules ``fn`` is, is a method of, or (a checkpoint_sequential
    segment) runs."""
    if isinstance(fn, functools.partial) and fn.func is _run_segment:
        return [b for f in fn.args[0] for b in _buffers_of(f)]
    for owner in (fn, getattr(fn, "instance", None), getattr(fn, "__self__", None)):
        buffers = getattr(owner, "buffers", None)
        if callable(buffers):
            return [b for b in buffers() if isinstance(b, Tensor)]
    return []


@contextlib.contextmanager
def _buffers_kept(fn):
    """Put back the module buffers the recomputation wrote. Eager layers skip their updates
    (:func:`is_recomputing`); a static program (a to_static module) cannot, so its writes are
    undone here."""
    kept = [(b, b._storage.version, b._data.copy()) for b in _buffers_of(fn)]
    try:
        yield
    finally:
        for b, version, data in kept:
            if b._storage.version != version:
                b._data[...] = data
                b._storage.version += 1


def _backward_through_recomputation(state, output_grads):
    """Re-run the function on detached copies of its inputs, with grad enabled, and
    backpropagate ``output_grads``; returns the gradients of the differentiable inputs."""
    leaves = list(state.leaves)
    for i, v in zip(state.tensor_slots, state.versions):
        t = leaves[i]
        if t._storage.version != v:
            raise RuntimeError(f"checkpoint: input {i} (shape {t.shape}) was modified in place "
                               f"after the checkpointed call (version {v} -> "
                               f"{t._storage.version}), so recomputing the function would give "
                               f"different values; clone() it before changing it in place")
        d = t.detach()
        d._rg = t._rg
        leaves[i] = d
    args, kwargs = _unflatten(state.structure, iter(leaves))
    with _replayed_rng(state.devices, state.rng_states), _recomputation(), \
            _buffers_kept(state.fn), enable_grad():
        result = state.fn(*args, **kwargs)
    flat = []
    _flatten(result, flat)
    roots, root_grads = [], []
    for (pos, shape, dtype), g in zip(state.outputs, output_grads):
        r = flat[pos] if pos < len(flat) else None
        if not isinstance(r, Tensor) or r.shape != shape or r.dtype is not dtype:
            got = f"shape {r.shape} {r.dtype}" if isinstance(r, Tensor) else type(r).__name__
            raise RuntimeError(f"checkpoint: recomputing the function gave output {pos} as "
                               f"{got}, but the forward gave shape {shape} {dtype}; the "
                               f"function must compute the same thing when it is re-run (it "
                               f"may not depend on global state that changed since)")
        if g is not None and r._rg:
            roots.append(r)
            root_grads.append(g)
    diff = [leaves[i] for i in state.diff_slots]
    if not roots:
        return [None] * len(diff)
    outer_capture = BackwardPass.capture
    if outer_capture is None:
        # backward(): the function's parameters accumulate their .grad here, its inputs are
        # fresh leaves whose .grad goes back to the outer pass.
        run_backward(Tensor, roots, root_grads, retain_graph=False, create_graph=False)
        return [d.grad for d in diff]
    # hf.autograd.grad(): nothing may touch .grad; a tensor asked for that the function used
    # without receiving it as an argument cannot be reached from the outer graph.
    got = run_backward(Tensor, roots, root_grads, retain_graph=False, create_graph=False,
                       capture=diff + list(outer_capture))
    for t, g in zip(outer_capture, got[len(diff):]):
        if g is not None:
            raise RuntimeError(f"checkpoint: hf.autograd.grad asked for the gradient of a tensor "
                               f"of shape {t.shape} that the checkpointed function uses without "
                               f"receiving it as an argument; pass it to checkpoint() as an "
                               f"argument, or use backward() and read its .grad")
    return got[:len(diff)]


def _building_program() -> bool:
    return getattr(current_interpreter(), "name", "eager") != "eager"


# ---- public API -----------------------------------------------------------------------------
def _check_reentrant(api: str, use_reentrant, determinism_check, debug) -> None:
    """PyTorch's options with nothing to choose here: one implementation serves both
    ``use_reentrant`` values (recomputation in backward, ``hf.autograd.grad`` included)."""
    if use_reentrant is not None and not isinstance(use_reentrant, bool):
        raise TypeError(f"{api}: use_reentrant must be True, False or None, got "
                        f"{use_reentrant!r}")
    if determinism_check not in ("default", "none"):
        raise ValueError(f"{api}: determinism_check must be 'default' or 'none', got "
                         f"{determinism_check!r}")
    if not isinstance(debug, bool):
        raise TypeError(f"{api}: debug must be a bool, got {debug!r}")


def checkpoint(fn: Callable, *args, preserve_rng_state: bool = True, use_reentrant=None,
               determinism_check: str = "default", debug: bool = False, **kwargs) -> Any:
    """``fn(*args, **kwargs)`` without keeping its activations: backward recomputes them.

    The forward keeps only the arguments. In backward the function runs again with grad
    enabled (from the random generator states it first ran with when ``preserve_rng_state``,
    so Dropout draws the same mask) and the outputs' gradients flow through that recomputed
    graph into the arguments and the parameters the function used; gradients are bit for bit
    those of ``fn(*args, **kwargs)``. Arguments and results may be nested tuples, lists and
    dicts holding tensors and other values. ``fn`` must compute the same thing when re-run;
    tensors it reads from outside its arguments must be leaves (parameters, buffers,
    constants). ``backward()`` fills their ``.grad``; ``hf.autograd.grad`` only reaches tensors
    passed as arguments (pass a parameter as one to ask for its gradient that way). Every
    floating-point tensor result made by the call requires grad while grad is enabled (which
    of them depend on a parameter is only known when backward recomputes them); one that turns
    out not to gets no gradient. A function that changes an argument requiring grad in place
    (a checkpointed segment starting with ``nn.ReLU(inplace=True)``) is refused when called,
    where PyTorch raises at backward.

    Under ``hf.no_grad()`` it just calls ``fn``. While a static program is being built
    (``hf.jit.to_static`` traces through it) it calls ``fn`` and marks the values ``fn``
    computes, its results excepted, for the recompute pass: the backward program recomputes
    them instead of the forward keeping them, as here (a ``memory_budget`` given to
    ``to_static`` decides instead; values inside control flow are kept).
    ``use_reentrant``, ``determinism_check`` and ``debug`` are accepted as PyTorch takes them
    (one implementation serves both ``use_reentrant`` values); they are not passed to ``fn``.

    Example::

        >>> import hybridfw as hf
        >>> layer = hf.nn.Sequential(hf.nn.Linear(4, 8), hf.nn.ReLU(), hf.nn.Linear(8, 2))
        >>> x = hf.randn(3, 4, requires_grad=True)
        >>> y = hf.memory.checkpoint(layer, x)
        >>> y.sum().backward()
        >>> x.grad.shape, layer[0].weight.grad.shape
        ((3, 4), (8, 4))
    """
    if not callable(fn):
        raise TypeError(f"checkpoint: expected a callable as the first argument, got "
                        f"{type(fn).__name__}")
    _check_reentrant("checkpoint", use_reentrant, determinism_check, debug)
    if not GradMode.enabled:
        return fn(*args, **kwargs)
    if _building_program():
        return _mark_for_recompute(fn, args, kwargs)
    leaves: list = []
    structure = _flatten((args, kwargs), leaves)
    tensors = [v for v in leaves if isinstance(v, Tensor)]
    devices = _rng_devices(tensors)
    rng_states = [get_rng_state(d) for d in devices] if preserve_rng_state else None
    diff_versions = [(i, v, v._storage.version) for i, v in enumerate(leaves)
                     if isinstance(v, Tensor) and v._rg]
    with no_grad():
        result = fn(*args, **kwargs)
    _refuse_inplace_on_grad_inputs(diff_versions)
    flat: list = []
    _flatten(result, flat)
    state = _CheckpointState(fn, structure, leaves, devices, rng_states)
    _attach(state, flat, tensors)
    return result


def _mark_for_recompute(fn, args, kwargs):
    """``fn(*args, **kwargs)`` recorded into the program being built; the values its
    operators write in the global block, its results excepted, join the program's
    ``checkpointed`` set (what :func:`hybridfw.memory.recompute.recompute` recomputes)."""
    program = getattr(current_interpreter(), "program", None)
    block = program.global_block() if program is not None else None
    if block is None or program.current_block() is not block:
        return fn(*args, **kwargs)
    start = len(block.ops)
    result = fn(*args, **kwargs)
    flat: list = []
    _flatten(result, flat)
    results = {getattr(v, "name", None) for v in flat}
    inner = {name for op in block.ops[start:] for name in op.outputs} - results
    program.checkpointed = getattr(program, "checkpointed", frozenset()) | inner
    return result


def _refuse_inplace_on_grad_inputs(diff_versions) -> None:
    """An argument that requires grad must come out of the call unchanged: backward recomputes
    from it, and its gradient must pass through what the call did to it (PyTorch raises at
    backward). Handed back changed in place, it would keep its old history, and the gradient
    would skip the change."""
    for i, t, version in diff_versions:
        if t._storage.version != version:
            raise RuntimeError(
                f"checkpoint: the function modified its argument {i} (shape {t.shape}) in place; "
                "backward recomputes the function from its arguments, so the gradient through "
                "that change would be lost. Make the first in-place layer of a checkpointed "
                "segment out of place (nn.ReLU(inplace=False)), or clone() the argument before "
                "changing it")


def _run_segment(functions, x):
    for f in functions:
        x = f(x)
    return x


def segment_sizes(n: int, segments: int) -> list:
    """How :func:`checkpoint_sequential` splits ``n`` functions into ``segments`` runs: the
    sizes, first to last, that minimize the most activations alive at once.

    While segment ``i`` (from 0) is backpropagated, the inputs of segments ``0..i-1`` are still
    kept and segment ``i``'s activations are alive (recomputed, or for the last segment kept
    from the forward). Counting one unit per function's activation and one per kept input, the
    peak is ``max_i(i + size_i)``: equal sizes give about ``n/k + k``, sizes falling by one
    per segment about ``n/k + k/2`` for the same ``k`` segments (and the same single
    recomputation of each segment but the last).

        >>> segment_sizes(64, 8)
        [8, 11, 10, 9, 8, 7, 6, 5]
        >>> segment_sizes(5, 5)
        [1, 1, 1, 1, 1]
    """
    # the smallest peak m with sum(max(1, m - i)) >= n; then trim the excess from the front,
    # which keeps the last segment (run without checkpointing, so never recomputed) longest
    m = -(-n // segments)
    while sum(max(1, m - i) for i in range(segments)) < n:
        m += 1
    sizes = [max(1, m - i) for i in range(segments)]
    excess = sum(sizes) - n
    for i in range(segments):
        take = min(excess, sizes[i] - 1)
        sizes[i] -= take
        excess -= take
    return sizes


def checkpoint_sequential(functions, segments: int, input, use_reentrant=None,
                          preserve_rng_state: bool = True, determinism_check: str = "default",
                          debug: bool = False):
    """Run a chain of layers on ``input``, checkpointing all segments but the last.

    ``functions`` is an ``nn.Sequential`` or a list of callables applied one after another;
    they are split into ``segments`` contiguous runs, longest first (:func:`segment_sizes`:
    a segment backpropagated later has more kept inputs alive beside it, so it is made
    shorter). Only the input of each checkpointed segment stays alive after the forward;
    backward recomputes each segment once. With about ``sqrt(len(functions))`` segments the
    activations held at once grow like the square root of the depth instead of linearly.

    Example::

        >>> import hybridfw as hf
        >>> model = hf.nn.Sequential(*[hf.nn.Linear(8, 8) for _ in range(6)])
        >>> x = hf.randn(4, 8, requires_grad=True)
        >>> y = hf.memory.checkpoint_sequential(model, 3, x)
        >>> y.sum().backward()
        >>> model[0].weight.grad.shape
        (8, 8)
    """
    _check_reentrant("checkpoint_sequential", use_reentrant, determinism_check, debug)
    functions = list(functions)
    if not functions:
        raise ValueError("checkpoint_sequential: functions is empty; pass an nn.Sequential or a "
                         "list with at least one callable")
    for i, f in enumerate(functions):
        if not callable(f):
            raise TypeError(f"checkpoint_sequential: functions[{i}] is a "
                            f"{type(f).__name__}, not a callable")
    if not isinstance(segments, int) or isinstance(segments, bool):
        raise TypeError(f"checkpoint_sequential: segments must be an int, got {segments!r}")
    if not 1 <= segments <= len(functions):
        raise ValueError(f"checkpoint_sequential: segments must be between 1 and the number of "
                         f"functions ({len(functions)}), got {segments}")
    bounds = [0]
    for size in segment_sizes(len(functions), segments):
        bounds.append(bounds[-1] + size)
    for start, end in itertools.pairwise(bounds[:-1]):
        input = checkpoint(functools.partial(_run_segment, functions[start:end]), input,
                           preserve_rng_state=preserve_rng_state)
    return _run_segment(functions[bounds[-2]:], input)
