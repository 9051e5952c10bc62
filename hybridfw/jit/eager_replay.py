"""Double backward through a static program: re-run the original function eagerly.

A to_static call's backward is one autograd node running the backward program, which computes
arrays, not a graph. When that node runs with ``create_graph=True`` (a gradient penalty, a
Hessian-vector product), :func:`recomputed_gradients` instead re-runs the unconverted Python
function on the call's arguments with grad enabled and differentiates that eager graph with
``create_graph=True``, so the gradients it returns carry a graph reaching the inputs (through a
fresh view of each, which keeps their history), the parameters and the incoming gradient.

Only that path pays for the recompute. Each call keeps weak references to its tensor arguments
and their versions (no array is kept alive for it), the Python arguments are the program's own
(part of its signature), and the generator states before the run when the program draws random
numbers, so Dropout draws the same mask again. While the function is re-run
:func:`hybridfw.memory.is_recomputing` is True, so BatchNorm does not update its running
statistics a second time (and buffer writes are undone).
"""
from __future__ import annotations

import weakref

from ..dygraph.autograd import enable_grad
from ..dygraph.tensor import Tensor, grad
from ..memory.checkpoint import _buffers_kept, _recomputation, _replayed_rng, _rng_devices
from ..random import get_rng_state

__all__ = ["RANDOM_OPS", "ReplayTarget", "recomputed_gradients"]

# the registry ops that draw from a generator (rand/randn/randint/bernoulli/dropout use them)
RANDOM_OPS = frozenset({"uniform", "normal", "randint", "bernoulli"})


class _Slot:
    """Where a tensor argument goes in :attr:`ReplayTarget.arguments`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<tensor>"


_SLOT = _Slot()


def _template(value):
    if isinstance(value, Tensor):
        return _SLOT
    if isinstance(value, (list, tuple)):
        items = [_template(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return {k: _template(v) for k, v in value.items()}
    return value


def _fill(value, it):
    if value is _SLOT:
        return next(it)
    if isinstance(value, (list, tuple)):
        items = [_fill(v, it) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return {k: _fill(v, it) for k, v in value.items()}
    return value


def _reference(instance):
    """A weak reference to ``instance``, or (an object that takes none: the converted
    function holding it does not live on it) a strong one."""
    try:
        return weakref.ref(instance)
    except TypeError:
        return lambda: instance


class ReplayTarget:
    """What one traced signature needs to re-run its function eagerly: the function, the
    object it is a method of (held weakly: that object holds the program), the Python arguments
    of the signature with slots for the tensors, its train/eval modes and whether the program
    draws random numbers."""

    __slots__ = ("function", "instance", "arguments", "mode", "draws_random", "params")

    def __init__(self, function, instance, args, kwargs, mode, draws_random: bool,
                 params: list):
        self.function = function
        self.instance = None if instance is None else _reference(instance)
        self.arguments = (_template(list(args)), _template(dict(kwargs)))
        self.mode = mode
        self.draws_random = draws_random
        self.params = params  # the parameters the program reads, as its node's inputs

    def rng_before(self, tensors):
        """``(devices, states)`` of the generators before a run that draws (else None)."""
        if not self.draws_random:
            return None
        devices = _rng_devices(list(tensors) + self.params)
        return devices, [get_rng_state(d) for d in devices]

    def record(self, tensors, rng):
        """What one call keeps for a later double backward: weak references to its tensors,
        the versions of those and of the parameters, and the generator states."""
        return (self, [weakref.ref(t) for t in tensors],
                [t._storage.version for t in tensors],
                [t._storage.version for t in self.params], rng)


def _arguments(record):
    target, refs, versions, param_versions, _ = record
    tensors = []
    for i, (ref, version) in enumerate(zip(refs, versions)):
        t = ref()
        if t is None:
            raise RuntimeError(
                f"to_static: double backward (create_graph=True) re-runs the function eagerly "
                f"on its arguments, but tensor argument {i} of the call no longer exists; keep "
                f"a reference to it until the backward")
        if t._storage.version != version:
            raise RuntimeError(
                f"to_static: double backward (create_graph=True) re-runs the function eagerly, "
                f"but tensor argument {i} (shape {tuple(t.shape)}) was modified in place after "
                f"the call (version {version} -> {t._storage.version}); clone() it before "
                f"changing it in place")
        tensors.append(t)
    for p, version in zip(target.params, param_versions):
        if p._storage.version != version:
            raise RuntimeError(
                f"to_static: double backward (create_graph=True) re-runs the function eagerly, "
                f"but a parameter of shape {tuple(p.shape)} it used was modified in place after "
                f"the call (version {version} -> {p._storage.version}); run the backward "
                f"before updating the parameters")
    return tensors


def _fetched(structure, value, found: dict) -> None:
    """Fill ``found`` (fetch index -> tensor) from the eager result ``value``, walking the
    structure the program's result was rebuilt from."""
    kind = structure[0]
    if kind == "leaf":
        found[structure[1]] = value
    elif kind == "seq" and isinstance(value, (list, tuple)) and len(value) == len(structure[2]):
        for child, v in zip(structure[2], value):
            _fetched(child, v, found)
    elif kind == "dict" and isinstance(value, dict):
        for key, child in structure[1]:
            if key in value:
                _fetched(child, value[key], found)
    elif kind == "dataclass":
        for name, child in structure[2]:
            _fetched(child, getattr(value, name, None), found)
    elif kind == "maybe":
        if value is not None:
            _fetched(structure[1], value, found)
    elif kind == "array":
        raise RuntimeError("to_static: double backward (create_graph=True) through a function "
                           "returning a list built in a loop a tensor decides is not supported")


def recomputed_gradients(state, g: Tensor, wanted: list) -> list:
    """The gradients of the node's differentiable inputs for the output gradient ``g``, with
    a graph: the function re-run eagerly on the call's arguments, differentiated with
    ``create_graph=True``. Only those ``wanted`` (per input) are computed, the others are
    None."""
    entry = state.entry
    record = state.replay
    if record is None:
        raise RuntimeError("to_static: double backward (create_graph=True) through this "
                           "program is not supported (it was not recorded for a replay)")
    if entry.write_back:
        raise RuntimeError("to_static: double backward (create_graph=True) through a function "
                           "that updates a tensor argument in place is not supported (re-running "
                           "it would update the argument again); update a clone() of it")
    target = record[0]
    instance = None
    if target.instance is not None:
        instance = target.instance()
        if instance is None:
            raise RuntimeError("to_static: double backward (create_graph=True) re-runs the "
                               "function eagerly, but the object whose method it is no longer "
                               "exists")
        if target.mode is not None:
            now = tuple(m.training for m in instance.modules())
            if now != target.mode:
                raise RuntimeError(
                    "to_static: double backward (create_graph=True) re-runs the module "
                    "eagerly, but its train/eval mode changed since the call; switch it back "
                    "(train() or eval()) before the backward")
    tensors = _arguments(record)
    diff_positions = {i: k for k, (kind, i) in enumerate(entry.diff_inputs) if kind == "input"}
    with enable_grad():
        # a fresh view of each differentiable argument: its gradient is this argument's own
        # share (one tensor passed twice gets two), and its graph keeps the argument's history
        eager = [t.view(t.shape) if i in diff_positions else t.detach()
                 for i, t in enumerate(tensors)]
        args, kwargs = target.arguments
        it = iter(eager)
        args, kwargs = _fill(args, it), _fill(kwargs, it)
        owner = instance if instance is not None else target.function
        with _replayed_rng(*(record[4] or (None, None))), _recomputation(), \
                _buffers_kept(owner):
            if instance is not None:
                result = target.function(instance, *args, **kwargs)
            else:
                result = target.function(*args, **kwargs)
        found: dict = {}
        _fetched(entry.outputs.structure, result, found)
        seeds = entry.split_gradient(g) if len(entry.float_outputs) != 1 else [g]
        roots, root_grads = [], []
        for k, seed in zip(entry.float_outputs, seeds):
            r = found.get(k)
            if not isinstance(r, Tensor) or tuple(r.shape) != tuple(seed.shape):
                got = f"shape {tuple(r.shape)}" if isinstance(r, Tensor) else \
                    type(r).__name__
                raise RuntimeError(
                    f"to_static: double backward (create_graph=True) re-ran the function "
                    f"eagerly and got result {k} as {got}, but the program gave shape "
                    f"{tuple(seed.shape)}; the function must compute the same thing when re-run")
            if r._rg:
                roots.append(r)
                root_grads.append(seed)
        inputs = [eager[i] if kind == "input" else i for kind, i in entry.diff_inputs]
        asked = [k for k, w in enumerate(wanted) if w]
        grads = [None] * len(inputs)
        if roots and asked:
            got = grad(roots, [inputs[k] for k in asked], grad_outputs=root_grads,
                       create_graph=True, allow_unused=True)
            for k, gk in zip(asked, got):
                grads[k] = gk
        return grads
