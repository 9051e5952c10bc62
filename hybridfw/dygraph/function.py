"""``hf.autograd.Function``: an operation with a gradient the user writes, as PyTorch's.

``MyFn.apply(*args)`` runs ``forward`` without recording a graph; when an argument requires
grad, its tensor outputs get one node each (a :class:`~.autograd.GatherOutputOp`), all feeding
one node of the call whose rule runs ``backward(ctx, *grad_outputs)`` once per backward pass
and hands each tensor argument its gradient (summed over broadcast dims, cast to its dtype, by
the engine as for any op). ``backward`` runs under the pass's grad mode, so it records a graph
with ``create_graph=True`` (double backward through the ops it uses).
"""
from __future__ import annotations

import weakref

from .autograd import GatherOutputOp, GradMode, Node, no_grad
from .tensor import Tensor, wrap_array
from ..ops.registry import TensorLike, current_interpreter

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


class FunctionCtx:
    """The ``ctx`` of a :class:`Function`: what ``forward`` leaves for ``backward``
    (``save_for_backward``, any attribute), and ``needs_input_grad``."""

    def __init__(self, needs_input_grad: tuple):
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True
        self._saved = ()
        self._versions = ()
        self._output_nodes = None  # position in _saved -> weakref to a saved output's node
        self._non_differentiable = set()

    def save_for_backward(self, *tensors) -> None:
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, TensorLike):
                raise TypeError(f"save_for_backward: expected tensors or None, got "
                                f"{type(t).__name__} at position {i} (keep other values as "
                                f"attributes of ctx)")
        self._saved = tensors
        self._versions = tuple(t._storage.version if isinstance(t, Tensor) else None
                               for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        for i, (t, v) in enumerate(zip(self._saved, self._versions)):
            if v is not None and t._storage.version != v:
                raise RuntimeError(f"autograd.Function: saved tensor {i} (shape {t.shape}) was "
                                   f"modified in place after save_for_backward (version {v} -> "
                                   f"{t._storage.version}); clone() it before changing it")
        if not self._output_nodes:
            return self._saved
        saved = list(self._saved)
        for j, ref in self._output_nodes.items():
            node = ref()  # (alive while backward runs through it)
            if node is not None:  # the output with its history (double backward)
                saved[j] = Tensor._from_saved(saved[j]._data, saved[j]._storage, node)
        return tuple(saved)

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_differentiable.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        """With False, ``backward`` gets None (not zeros) for outputs that got no gradient."""
        self.materialize_grads = bool(value)

    def mark_dirty(self, *tensors) -> None:
        raise NotImplementedError("autograd.Function: mark_dirty (forward modifying an input "
                                  "in place) is not supported; return a new tensor instead")


class _CallState:
    """What one call keeps for its backward: the Function, its ctx, the forward arguments'
    positions behind the node's edges, and the outputs' (shape, dtype) (None: not a tensor)."""

    __slots__ = ("fn", "ctx", "arg_positions", "num_args", "outputs", "pass_key", "grads")

    def __init__(self, fn, ctx, arg_positions, num_args, outputs):
        self.fn = fn
        self.ctx = ctx
        self.arg_positions = arg_positions
        self.num_args = num_args
        self.outputs = outputs
        self.pass_key = None
        self.grads = None


def _call_rule(g, out, state, *metas, input_index):
    if state.pass_key is not g:
        state.grads = _run_backward(state, g.grads)
        state.pass_key = g
        g.grads = None
    position = state.arg_positions[input_index - 1]  # (edge 0 is the state's slot)
    grad = state.grads[position]
    state.grads[position] = None
    shape = tuple(metas[input_index - 1].shape)
    if grad is not None and tuple(grad.shape) != shape and not _expandable(shape, grad.shape):
        raise RuntimeError(f"{state.fn.__name__}.backward returned a gradient of shape "
                           f"{tuple(grad.shape)} for argument {position}, of shape {shape}")
    return grad


def _expandable(shape, to) -> bool:
    """Whether ``shape`` broadcasts to ``to`` (the engine then sums the gradient down)."""
    return len(shape) <= len(to) and all(s in (t, 1) for s, t in zip(shape[::-1], to[::-1]))


class _CallOp:
    """The op of a call's node (not a registry op): one per Function class, named after it."""

    vjp = (_call_rule,)
    variadic = True
    save = (0,)           # the engine drops the state (ctx, saved tensors) after backward
    save_output = False

    def __init__(self, name: str):
        self.name = name
        self.output_op = GatherOutputOp(name)


def _run_backward(state, output_grads) -> list:
    ctx, name = state.ctx, state.fn.__name__
    grads = []
    for meta, g in zip(state.outputs, output_grads):
        if g is None and meta is not None and ctx.materialize_grads:
            shape, dtype, device = meta
            g = wrap_array(device.xp.zeros(shape, dtype=dtype.np), device)
        grads.append(g)
    result = state.fn.backward(ctx, *grads)
    result = list(result) if isinstance(result, tuple) else [result]
    if len(result) < state.num_args or any(r is not None for r in result[state.num_args:]):
        raise RuntimeError(f"{name}.backward returned {len(result)} gradient(s); it must return "
                           f"one per argument of forward ({state.num_args}), None for those "
                           f"without one")
    result = result[:state.num_args]
    for i, r in enumerate(result):
        if r is not None and not isinstance(r, Tensor):
            raise TypeError(f"{name}.backward returned a {type(r).__name__} as the gradient of "
                            f"argument {i}; expected a tensor or None")
    return result


def once_differentiable(backward):
    """Accepted as PyTorch's decorator of ``backward``; it changes nothing here."""
    return backward


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)``
    (or ``forward(*args)`` plus ``setup_context(ctx, inputs, output)``) and call
    ``MyFn.apply(*args)``. ``backward`` returns one gradient per argument of ``forward``
    (None where there is none); ``ctx.needs_input_grad`` tells which are wanted.

    Example::

        >>> import hybridfw as hf
        >>> class Clip(hf.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, bound):
        ...         ctx.save_for_backward(x)
        ...         ctx.bound = bound
        ...         return x.clamp(-bound, bound)
        ...     @staticmethod
        ...     def backward(ctx, grad):
        ...         (x,) = ctx.saved_tensors
        ...         return grad * (x.abs() <= ctx.bound), None   # straight through inside
        >>> x = hf.tensor([-3.0, 0.5, 2.0], requires_grad=True)
        >>> Clip.apply(x, 1.0).sum().backward()
        >>> x.grad.tolist()
        [0.0, 1.0, 0.0]
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("autograd.Function: define a static forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("autograd.Function: define a static backward(ctx, *grads)")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError  # (only called when a subclass defines it)

    @classmethod
    def apply(cls, *args, **kwargs):
        if cls.forward is Function.forward or cls.backward is Function.backward:
            raise NotImplementedError(f"{cls.__name__}: an autograd.Function defines static "
                                      f"forward and backward methods")
        needs = tuple(isinstance(a, TensorLike) and a.requires_grad for a in args)
        ctx = FunctionCtx(needs)
        record = GradMode.enabled and any(needs)
        if record and getattr(current_interpreter(), "name", "eager") != "eager":
            # (a TypeError: to_static(full_graph=False) then runs the function eagerly)
            raise TypeError(
                f"{cls.__name__}.apply: a custom backward cannot be built into a static program "
                f"(hf.jit.to_static, hf.static); call it under hf.no_grad() there, use "
                f"to_static(full_graph=False), or leave the function eager "
                f"(hf.jit.not_to_static)")
        with no_grad():
            if cls.setup_context is not Function.setup_context:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        if not record:
            return output
        return _attach(cls, ctx, args, output)


def _attach(cls, ctx, args, output):
    """Give ``output``'s differentiable tensors their nodes, feeding the call's one node."""
    op = cls.__dict__.get("_hf_call_op")
    if op is None:
        op = _CallOp(cls.__name__)
        cls._hf_call_op = op
    single = not isinstance(output, tuple)
    outputs = [output] if single else list(output)
    # An output sharing an argument's memory (the argument handed back, or a view of it) gets
    # its own copy: an in-place write into the argument later would change the output's value
    # under the history this call gives it (PyTorch refuses such writes instead)
    arg_storages = {id(a._storage) for a in args if isinstance(a, Tensor)}
    saved = list(ctx._saved)
    for k, o in enumerate(outputs):
        if isinstance(o, Tensor) and id(o._storage) in arg_storages:
            own = wrap_array(o._data.copy(), o._storage.device)
            for j, s in enumerate(saved):
                if s is o:
                    saved[j] = own
            outputs[k] = own
    outs = [(o.shape, o.dtype, o._storage.device) if isinstance(o, Tensor) else None
            for o in outputs]
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a._rg]
    state = _CallState(cls, ctx, positions, len(args), outs)
    # edge 0 is the state's slot (no gradient goes there), then one per argument needing one
    edges = (None,) + tuple(args[i]._node if args[i]._node is not None else args[i]
                            for i in positions)
    metas = (None,) + tuple((args[i]._data.shape, args[i].dtype) for i in positions)
    hub = Node(op, {}, edges, metas, (state,) + (None,) * len(positions), ())
    count = len(outputs)
    output_ids = set()
    for k, o in enumerate(outputs):
        if not isinstance(o, Tensor) or not o.dtype.is_floating_point or \
                id(o) in ctx._non_differentiable:
            continue
        output_ids.add(id(o))
        o._node = op.output_op.node(hub, k, count)
        o._rg = True
    # a saved output would hold its own node (a cycle, freed only by gc.collect): keep an
    # alias of its memory and a weak reference to its node instead
    nodes = {j: weakref.ref(s._node) for j, s in enumerate(saved)
             if s is not None and id(s) in output_ids}
    if nodes:
        ctx._saved = tuple(s.detach() if j in nodes else s for j, s in enumerate(saved))
        ctx._output_nodes = nodes
    return outputs[0] if single else tuple(outputs)
