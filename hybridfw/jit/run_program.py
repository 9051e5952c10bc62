"""Training through a static program: its forward runs now, its backward program later, as one
node of eager autograd.

The node's first input slot holds the run's state (the values the backward program needs,
fetched from the forward run, and what a double backward needs to re-run the function eagerly:
see :mod:`.eager_replay`); the others are the differentiable inputs (input tensors that
require grad, and the parameters). Its gradient rule runs the backward program once per
backward pass, for all inputs at once. The engine releases the state after backward unless
``retain_graph=True``, exactly as it does for the values an eager op saves.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..dygraph.autograd import BackwardPass, GradMode, Node, edges_run
from ..dygraph.tensor import wrap_array
from .eager_replay import recomputed_gradients

__all__ = ["RunState", "attach_node"]


class RunState:
    """What one forward run leaves for its backward.

    ``saved``: the arrays of the values the backward program reads, in feed order;
    ``storages``: their :class:`~hybridfw.backend.Storage` objects, so ``hf.memory`` counts
    them for as long as the state holds them (the storage of the input or output tensor an
    array belongs to, else one of its own); ``guards``: ``(storage, version, kind, index)`` of
    the inputs and outputs shared with the caller, checked before the backward runs.
    """

    __slots__ = ("entry", "grad_key", "grads", "guards", "node", "pending", "replay", "saved",
                 "storages", "unused")

    def __init__(self, entry, saved, storages=None):
        self.entry = entry
        self.saved = saved
        self.storages = [] if storages is None else storages
        self.guards = []
        self.grads = None
        self.grad_key = None
        self.unused = None  # per differentiable input: True where this run did not use it
        self.replay = None  # this call's record for a double backward (ReplayTarget.record)
        self.node = None    # (with a replay) a weak reference to the node
        self.pending = 0    # (double backward) how many gradients are still to hand out

    def check_versions(self) -> None:
        for storage, version, kind, index in self.guards:
            if storage.version != version:
                raise RuntimeError(
                    f"to_static: {kind} {index} of the converted function is needed for its "
                    f"backward but was modified in place after the call (version {version} -> "
                    f"{storage.version}); clone() it before changing it in place")


def _rule(g, out, state, *metas, input_index):
    if GradMode.enabled:  # create_graph=True: gradients with a graph, from an eager re-run
        if state.grad_key is not g:
            wanted = edges_run(state.node())[1:]
            state.grads = recomputed_gradients(state, g, wanted)
            state.pending = sum(wanted)
            state.grad_key = g
        grad = state.grads[input_index - 1]
        state.grads[input_index - 1] = None  # (the pass holds it now)
        state.pending -= 1
        if state.pending <= 0:
            # all handed out: the gradients' graph may reach this node (through a saved
            # output), so the state keeps none of it -- no reference cycle
            state.grads = state.grad_key = None
        return grad
    if state.grad_key is not g:
        state.check_versions()
        entry = state.entry
        if state.saved is None:  # (handed to a backward that raised)
            raise RuntimeError("to_static: the values this program saved for its backward "
                               "were handed to an earlier backward through it, which did not "
                               "finish; call the converted function again")
        seeds = entry.split_gradient(g._data)
        arrays = list(state.saved) + seeds
        handed = not BackwardPass.retain_graph
        if handed:
            # the engine frees this state after the node runs: hand the saved values over
            # instead, so that the backward program drops each after its last use, as eager
            # autograd frees them node by node
            state.saved = None
        state.grads = entry.run_backward(arrays)
        if handed and entry._saved_own:
            # ... and stop counting them: all are gone once the plan returned (no Storage is
            # made while it runs, so hf.memory's peak is the same as if each had been
            # uncounted when dropped)
            del state.storages[0]
        state.grad_key = g
    grad = state.grads[input_index - 1]
    if grad is None or (state.unused is not None and state.unused[input_index - 1]):
        return None  # (an input only an untaken branch read: no gradient, as eager)
    return wrap_array(grad)


class _RunProgramOp:
    """The op a run_program node reports to the engine (it is not a registry op)."""

    name = "run_program"
    vjp = (_rule,)
    variadic = True
    save = (0,)          # the engine releases the node's saved state after backward
    save_output = False


RUN_PROGRAM = _RunProgramOp()


def attach_node(output_array, state: RunState, inputs) -> Tensor:  # noqa: F821
    """A Tensor owning ``output_array`` whose gradient runs ``state``'s backward program,
    flowing to ``inputs`` (eager tensors)."""
    edges = [None]
    metas = [None]
    saved = [state]
    for t in inputs:
        edges.append(t._node if t._node is not None else (t if t._rg else None))
        metas.append((t._data.shape, t.dtype))
        saved.append(None)
    node = Node(RUN_PROGRAM, {}, tuple(edges), tuple(metas), tuple(saved), ())
    if state.replay is not None:
        state.node = weakref.ref(node)
    out = wrap_array(output_array)
    out._node = node
    out._rg = True
    return out


_ = np
