"""Eager reverse-mode autodiff: graph nodes recorded by the eager interpreter, and the engine.

Lifetimes are reference counted and cycle free: an output Tensor points to its :class:`Node`;
a Node points to the Nodes of its inputs (or to leaf Tensors), to the inputs its op declared in
``save``, and to the *array* of its output when the op saves it (never to the output Tensor,
which would be a cycle -- backward rebuilds that Tensor around the saved array). After a node has
run, backward drops what it saved unless ``retain_graph``; a tensor the user drops is freed at
once by CPython's reference counting.

Gradient rules come from the op registry and are written in registry ops, so with
``create_graph=True`` running them records a new graph and double backward works.
"""
from __future__ import annotations

import functools
import weakref

from ..backend import array_device, is_writeable
from ..ops.composite import reduce_grad
from ..ops.registry import TensorMeta

__all__ = ["Node", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
           "inference_mode", "run_backward", "edges_run", "accumulate_captured", "GradMode",
           "OutputGrads", "GatherOutputOp", "set_detect_anomaly", "detect_anomaly",
           "is_anomaly_enabled",
           "GradModeContext", "BackwardPass",
           "register_post_accumulate_grad_hook", "register_hook", "queue_callback"]


class GradMode:
    """Whether eager ops record the graph (module-level state read on every op)."""

    enabled = True


def is_grad_enabled() -> bool:
    return GradMode.enabled


class GradModeContext:
    """Context manager / decorator that sets grad mode, restoring the previous one on exit."""

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)
        self.prev = []

    def __enter__(self):
        self.prev.append(GradMode.enabled)
        GradMode.enabled = self.mode
        return self

    def __exit__(self, *exc):
        GradMode.enabled = self.prev.pop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with GradModeContext(self.mode):
                return fn(*args, **kwargs)
        wrapper.__hf_grad_mode__ = lambda mode=self.mode: GradModeContext(mode)
        return wrapper


class set_grad_enabled(GradModeContext):
    """Set grad mode: as a plain call ``hf.set_grad_enabled(False)`` it switches recording off
    until ``hf.set_grad_enabled(True)`` (as in PyTorch); as a context manager or decorator it
    restores the previous mode on exit.

    Example::

        >>> import hybridfw as hf
        >>> with hf.set_grad_enabled(False):
        ...     hf.is_grad_enabled()
        False
        >>> hf.is_grad_enabled()
        True
    """

    def __init__(self, mode: bool = True):
        super().__init__(mode)
        # the call itself sets the mode; the first enter (or a decorator) restores this one
        self._before_call = GradMode.enabled
        GradMode.enabled = self.mode

    def __enter__(self):
        before, self._before_call = self._before_call, None
        self.prev.append(GradMode.enabled if before is None else before)
        GradMode.enabled = self.mode
        return self

    def __call__(self, fn):
        if self._before_call is not None:  # @set_grad_enabled(False): only calls of fn change it
            GradMode.enabled, self._before_call = self._before_call, None
        return super().__call__(fn)


def _bare_decorator(cls, function):
    """``@cls`` without parentheses (PyTorch allows ``@torch.no_grad``): the wrapped function."""
    if not callable(function):
        raise TypeError(f"{cls.__name__}() takes no arguments, or a function to decorate; got "
                        f"{type(function).__name__}")
    return cls()(function)


class _Anomaly:
    """Whether backward checks every gradient a node produces for NaN (detect_anomaly)."""

    enabled = False


def is_anomaly_enabled() -> bool:
    return _Anomaly.enabled


class set_detect_anomaly:
    """PyTorch's ``set_detect_anomaly(mode)``: with it on, backward raises naming the first
    node whose gradient holds NaN (every gradient is checked: slow, for debugging). As a plain
    call it switches the mode; as a context manager it restores the previous one on exit.

    Example::

        >>> import hybridfw as hf
        >>> x = hf.tensor([0.0], requires_grad=True)
        >>> with hf.autograd.detect_anomaly():
        ...     (x / x).sum().backward()
        Traceback (most recent call last):
        RuntimeError: backward (detect_anomaly): the gradient that 'div' (<DivBackward>) ...
    """

    def __init__(self, mode: bool, check_nan: bool = True):
        self.prev = _Anomaly.enabled
        _Anomaly.enabled = bool(mode) and bool(check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _Anomaly.enabled = self.prev
        return False


class detect_anomaly(set_detect_anomaly):
    """``with hf.autograd.detect_anomaly(): ...``: :class:`set_detect_anomaly` on, inside."""

    def __init__(self, check_nan: bool = True):
        super().__init__(True, check_nan)


class no_grad(GradModeContext):
    """Ops inside do not record a graph: ``with hf.no_grad(): ...``, ``@hf.no_grad()`` or
    ``@hf.no_grad``."""

    def __new__(cls, function=None):
        return super().__new__(cls) if function is None else _bare_decorator(cls, function)

    def __init__(self, function=None):
        super().__init__(False)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with no_grad():
                return fn(*args, **kwargs)
        wrapper.__hf_grad_mode__ = no_grad  # (to_static converts fn, run in this mode)
        return wrapper


class inference_mode(GradModeContext):
    """PyTorch's ``torch.inference_mode``: here the same as :class:`no_grad` (and, as in
    PyTorch, ``mode=False`` turns recording on, like :class:`enable_grad`):
    ``with hf.inference_mode(): ...``, ``@hf.inference_mode()`` or ``@hf.inference_mode``.

    Example::

        >>> import hybridfw as hf
        >>> w = hf.ones(2, requires_grad=True)
        >>> with hf.inference_mode():
        ...     (w * 2).requires_grad
        False
    """

    def __new__(cls, mode=True):
        return super().__new__(cls) if not callable(mode) else _bare_decorator(cls, mode)

    def __init__(self, mode: bool = True):
        super().__init__(False)
        self.disabled = not mode

    def __enter__(self):
        self.prev.append(GradMode.enabled)
        GradMode.enabled = self.disabled  # (torch's InferenceMode(False) enables grad mode)
        return self

    def __call__(self, fn):
        mode = not self.disabled

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return wrapper


class enable_grad(GradModeContext):
    """Re-enable recording inside a ``no_grad`` block (also ``@hf.enable_grad``)."""

    def __new__(cls, function=None):
        return super().__new__(cls) if function is None else _bare_decorator(cls, function)

    def __init__(self, function=None):
        super().__init__(True)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with enable_grad():
                return fn(*args, **kwargs)
        wrapper.__hf_grad_mode__ = enable_grad
        return wrapper


class BackwardPass:
    """What the running backward pass computes, for a node whose rule runs a nested pass
    (``hf.memory.checkpoint``): ``capture`` holds the tensors ``hf.autograd.grad`` asked for,
    or None when the pass accumulates into the leaves' ``.grad``."""

    capture = None
    #: callbacks queued (:func:`queue_callback`) to run when the accumulating pass ends
    callbacks = None
    #: whether the pass keeps what nodes saved (``retain_graph``): a rule may otherwise hand
    #: its saved values over to be freed while it runs (to_static's backward program does)
    retain_graph = True


#: id(leaf) -> (weakref to the leaf, [hooks]): hooks a leaf runs right after its ``.grad`` was
#: accumulated (kept out of the Tensor's slots so leaves without hooks pay nothing).
_post_accumulate_hooks: dict = {}
#: id(leaf) -> (weakref to the leaf, [hooks]): ``register_hook`` hooks of leaves, run on the
#: leaf's complete gradient before it is accumulated (a non-leaf's live on its Node).
_leaf_grad_hooks: dict = {}


class HookHandle:
    """Returned by hook registrations; ``remove()`` unregisters the hook."""

    def __init__(self, hooks: list, hook, on_empty=None):
        self._hooks = hooks
        self._hook = hook
        self._on_empty = on_empty

    def remove(self) -> None:
        for i, h in enumerate(self._hooks):
            if h is self._hook:
                del self._hooks[i]
                if not self._hooks and self._on_empty is not None:
                    self._on_empty()
                return


def _leaf_hooks(table: dict, leaf, hook) -> HookHandle:
    """Add ``hook`` to ``leaf``'s list in ``table`` (dropped when the leaf goes)."""
    key = id(leaf)
    entry = table.get(key)
    if entry is None or entry[0]() is not leaf:
        ref = weakref.ref(leaf, functools.partial(_drop_hooks, table, key))
        entry = table[key] = (ref, [])
    entry[1].append(hook)

    def forget():
        if table.get(key) is entry:
            del table[key]
    return HookHandle(entry[1], hook, forget)


def register_post_accumulate_grad_hook(leaf, hook) -> HookHandle:
    """Run ``hook(leaf)`` each time backward has accumulated a gradient into ``leaf.grad``
    (when the leaf's gradient is complete for this pass, not at the end of the pass), as
    ``torch.Tensor.register_post_accumulate_grad_hook``; distributed data parallel starts its
    all-reduces from it."""
    if leaf._node is not None:
        raise RuntimeError("register_post_accumulate_grad_hook: only leaf tensors accumulate "
                           "gradients; this tensor has a grad_fn")
    if not callable(hook):
        raise TypeError(f"register_post_accumulate_grad_hook: hook must be callable, got "
                        f"{type(hook).__name__}")
    return _leaf_hooks(_post_accumulate_hooks, leaf, hook)


def register_hook(tensor, hook) -> HookHandle:
    """Run ``hook(grad)`` on ``tensor``'s complete gradient each time backward (or
    ``autograd.grad``) computes it; a hook returning a tensor replaces the gradient from then
    on (what flows further back, and a leaf's ``.grad``). As ``torch.Tensor.register_hook``."""
    if not tensor._rg:
        raise RuntimeError("register_hook: cannot register a hook on a tensor that doesn't "
                           "require gradient")
    if not callable(hook):
        raise TypeError(f"register_hook: hook must be callable, got {type(hook).__name__}")
    node = tensor._node
    if node is None:
        return _leaf_hooks(_leaf_grad_hooks, tensor, hook)
    if node.hooks is None:
        node.hooks = []
    node.hooks.append(hook)
    return HookHandle(node.hooks, hook)


def _run_grad_hooks(hooks, g):
    for hook in tuple(hooks):
        replaced = hook(g)
        if replaced is not None:
            g = replaced
    return g


def _leaf_grad(leaf, g):
    """``g`` after ``leaf``'s ``register_hook`` hooks."""
    entry = _leaf_grad_hooks.get(id(leaf)) if _leaf_grad_hooks else None
    if g is None or entry is None or entry[0]() is not leaf:
        return g
    return _run_grad_hooks(entry[1], g)


def _drop_hooks(table: dict, key: int, ref) -> None:
    # the table comes bound in: at interpreter exit this module's globals may already be gone
    entry = table.get(key)
    if entry is not None and entry[0] is ref:
        del table[key]


def queue_callback(callback) -> None:
    """Run ``callback()`` once when the running backward pass (that accumulates into
    ``.grad``) has finished; called from a hook during backward."""
    if BackwardPass.callbacks is None:
        raise RuntimeError("queue_callback: no backward pass is running")
    BackwardPass.callbacks.append(callback)


class OutputGrads:
    """The gradients of the outputs of one multi-output call (``hf.memory.checkpoint``,
    ``hf.autograd.Function``), gathered by the engine in the buffer of the one node that needs
    them all at once (its shape/dtype are sentinels matching that edge's meta). A new one per
    backward pass, so that node's rule can tell passes apart by identity."""

    __slots__ = ("grads",)
    shape = ()
    dtype = "gathered-output-gradients"

    def __init__(self, grads):
        self.grads = grads

    def __add__(self, other):
        return OutputGrads([b if a is None else a if b is None else a + b
                            for a, b in zip(self.grads, other.grads)])


def _gather_rule(g, out, hub_meta, *, index, count):
    grads = [None] * count
    grads[index] = g
    return OutputGrads(grads)


class GatherOutputOp:
    """The op of the node each output of a multi-output call gets: hands its gradient, as
    entry ``index`` of an :class:`OutputGrads`, to the call's one node (``hub``)."""

    vjp = (_gather_rule,)
    variadic = False
    save = ()
    save_output = False

    def __init__(self, name: str):
        self.name = name

    def node(self, hub, index: int, count: int) -> "Node":
        return Node(self, {"index": index, "count": count}, (hub,),
                    (((), OutputGrads.dtype),), (None,), ())


class Node:
    """One recorded op application (what PyTorch calls ``grad_fn``).

    ``edges[i]`` is where input i's gradient goes: the input's Node, the input itself when it is
    a leaf that requires grad, or None. ``saved[i]`` is the input (if the op saved it) or a
    Python scalar operand; ``metas[i]`` its (shape, dtype) for the generic gradient reduction.
    """

    __slots__ = ("op", "attrs", "edges", "metas", "saved", "versions", "out", "released",
                 "retained", "hooks", "__weakref__")

    def __init__(self, op, attrs, edges, metas, saved, versions):
        self.op = op
        self.attrs = attrs
        self.edges = edges
        self.metas = metas
        self.saved = saved
        self.versions = versions
        self.out = None
        self.released = False
        self.retained = None  # weak references to tensors that asked for retain_grad()
        self.hooks = None  # register_hook hooks of the tensor this node made

    def name(self) -> str:
        name = self.op.name
        return f"{name[:1].upper()}{name[1:]}Backward"

    def __repr__(self) -> str:
        return f"<{self.name()}>"

    @property
    def next_functions(self) -> tuple:
        return tuple(e if isinstance(e, Node) else None for e in self.edges)

    def _release(self):
        self.saved = tuple(s if s.__class__ in (int, float, bool) else None for s in self.saved)
        self.out = None
        self.released = True

    def _inputs_for_rule(self, make_tensor):
        op = self.op
        if self.released and (op.save or op.save_output):
            raise RuntimeError(
                f"autograd: trying to backward through the graph a second time: the tensors "
                f"saved by '{op.name}' were freed after the first backward. Pass "
                f"retain_graph=True to the first backward() (or autograd.grad) if you need to "
                f"backward through it again.")
        args = []
        vi = 0
        for s, meta in zip(self.saved, self.metas):
            if meta is None:
                args.append(s)
            elif s is None:
                args.append(TensorMeta(meta[0], meta[1]))
            else:
                if s._storage.version != self.versions[vi]:
                    raise RuntimeError(
                        f"autograd: a tensor of shape {meta[0]} saved for the backward of "
                        f"'{op.name}' was modified in place after it was saved (version "
                        f"{self.versions[vi]} -> {s._storage.version}); clone() it before "
                        f"changing it in place")
                vi += 1
                args.append(s)
        out = None
        if op.save_output:
            arr, storage, version = self.out
            if storage.version != version:
                raise RuntimeError(
                    f"autograd: the output of '{op.name}' (shape {arr.shape}) is needed for its "
                    f"backward but was modified in place (version {version} -> "
                    f"{storage.version}); clone() it before changing it in place")
            out = make_tensor(arr, storage, self)
        return out, args


def _topological_order(roots):
    """Nodes reachable from ``roots``, each after every node that feeds it a gradient."""
    order, visited = [], set()
    for root in roots:
        if root is None or id(root) in visited:
            continue
        visited.add(id(root))
        stack = [(root, iter(root.edges))]
        while stack:
            node, it = stack[-1]
            for e in it:
                if e.__class__ is Node and id(e) not in visited:
                    visited.add(id(e))
                    stack.append((e, iter(e.edges)))
                    break
            else:
                stack.pop()
                order.append(node)
    order.reverse()
    return order


def _needed_nodes(order, targets):
    """Nodes from which some target (node or leaf id) can be reached, so must run."""
    needed = set()
    for node in reversed(order):  # inputs before consumers
        nid = id(node)
        if nid in targets:
            needed.add(nid)
            continue
        for e in node.edges:
            if e is not None and (id(e) in needed or id(e) in targets):
                needed.add(nid)
                break
    return needed


def edges_run(node) -> list:
    """Per edge of ``node``, whether the running backward pass calls the node's gradient rule
    for it: every edge that leads somewhere, or under ``hf.autograd.grad`` those from which a
    tensor asked for can be reached (a rule that computes all its gradients at once can
    compute only these)."""
    capture = BackwardPass.capture
    if capture is None:
        return [e is not None for e in node.edges]
    targets = {id(t._node) if t._node is not None else id(t) for t in capture}
    needed = _needed_nodes(_topological_order([e for e in node.edges if e.__class__ is Node]),
                           targets)
    return [e is not None and (id(e) in needed or id(e) in targets) for e in node.edges]


def run_backward(tensor_cls, roots, root_grads, *, retain_graph, create_graph, capture=None):
    """The engine. Accumulates into leaves' ``.grad`` or, with ``capture`` (a list of tensors),
    returns their gradients instead (``hf.autograd.grad``).

    A leaf's gradient is complete once the last node with an edge to it has run: it goes into
    ``.grad`` (and the leaf's post-accumulate hooks run) right then, so the buffer is not held
    to the end of the pass and hooks can start work (an all-reduce) while backward goes on.
    Leaves that are also roots are accumulated when the pass ends.
    """
    buffers = {}
    leaves = {}
    for t, g in zip(roots, root_grads):
        key = t._node if t._node is not None else t
        prev = buffers.get(id(key))
        buffers[id(key)] = g if prev is None else prev + g
        if t._node is None:
            leaves[id(t)] = t
    order = _topological_order([t._node for t in roots])
    targets = ready = needed = None
    if capture is not None:
        targets = {id(t._node) if t._node is not None else id(t) for t in capture}
        needed = _needed_nodes(order, targets)
    else:
        taken = {id(g._storage) for g in root_grads}
        ready = _last_users(order, leaves)
    make = tensor_cls._from_saved
    run_node = _run_node_checked if _Anomaly.enabled else _run_node
    prev_mode = GradMode.enabled
    prev_capture = BackwardPass.capture
    prev_callbacks = BackwardPass.callbacks
    prev_retain = BackwardPass.retain_graph
    outermost = capture is None and prev_callbacks is None
    GradMode.enabled = create_graph
    BackwardPass.capture = capture
    BackwardPass.retain_graph = bool(retain_graph)
    if outermost:
        BackwardPass.callbacks = []
    try:
        for node in order:
            nid = id(node)
            if capture is not None and nid not in needed:
                continue
            g = buffers.get(nid)
            if g is not None:
                if node.hooks:
                    g = buffers[nid] = _run_grad_hooks(node.hooks, g)
                if capture is None and getattr(node, "retained", None):
                    _retain(node, g, create_graph)
                if capture is None or nid not in targets:
                    del buffers[nid]
                run_node(node, g, make, buffers, leaves, capture, needed, targets)
                if not retain_graph and (node.op.save or node.op.save_output):
                    node._release()
            if ready is not None and nid in ready:
                _accumulate_ready(ready.pop(nid), buffers, leaves, taken, create_graph)
        if capture is not None:
            return [buffers.get(id(t._node)) if t._node is not None else
                    _leaf_grad(t, buffers.get(id(t))) for t in capture]
        for lid, leaf in leaves.items():
            _accumulate_leaf(leaf, buffers.get(lid), taken, create_graph)
        if outermost:
            callbacks = BackwardPass.callbacks
            while callbacks:
                callbacks.pop(0)()
    finally:
        GradMode.enabled = prev_mode
        BackwardPass.capture = prev_capture
        BackwardPass.callbacks = prev_callbacks
        BackwardPass.retain_graph = prev_retain
    return None


def _retain(node, g, create_graph) -> None:
    """``.grad`` of the non-leaf tensors made by ``node`` that called ``retain_grad()``: its
    complete incoming gradient, accumulated as a leaf's is (a copy: the engine's buffer is
    reused)."""
    for ref in node.retained:
        t = ref()
        if t is None or t._node is not node:  # gone, or rebound by an in-place op since
            continue
        grad = g if create_graph else g.detach().clone()
        t.grad = grad if t.grad is None else t.grad + grad


def _last_users(order, leaves) -> dict:
    """``id(node) -> [leaves]`` for the leaves whose last incoming edge (in ``order``) is that
    node's; leaves that are roots (``leaves`` so far) are left to the end of the pass."""
    last = {}
    for node in order:
        for e in node.edges:
            if e is not None and e.__class__ is not Node:
                last[id(e)] = (node, e)
    ready: dict = {}
    for lid, (node, leaf) in last.items():
        if lid not in leaves:
            ready.setdefault(id(node), []).append(leaf)
    return ready


def _accumulate_ready(done, buffers, leaves, taken, create_graph) -> None:
    """Accumulate the leaves in ``done`` (the node that fed them last has run, or was skipped
    for having no gradient)."""
    for leaf in done:
        lid = id(leaf)
        leaves.pop(lid, None)
        _accumulate_leaf(leaf, buffers.pop(lid, None), taken, create_graph)


def _run_node_checked(node, g, make, buffers, leaves, capture, needed, targets):
    """:func:`_run_node`, then (detect_anomaly) a check of the gradients it gave for NaN."""
    _run_node(node, g, make, buffers, leaves, capture, needed, targets)
    for i, e in enumerate(node.edges):
        got = buffers.get(id(e)) if e is not None else None
        data = getattr(got, "_data", None)
        if data is not None and data.dtype.kind in "fc" and \
                bool(array_device(data).xp.isnan(data).any()):
            raise RuntimeError(f"backward (detect_anomaly): the gradient that '{node.op.name}' "
                               f"({node!r}) gave its input {i} holds NaN values")


def _run_node(node, g, make, buffers, leaves, capture, needed, targets):
    """Apply ``node``'s gradient rules to its output gradient ``g``, adding the input gradients
    into ``buffers``."""
    op = node.op
    out, args = node._inputs_for_rule(make)
    rules = op.vjp
    attrs = node.attrs
    for i, e in enumerate(node.edges):
        if e is None:
            continue
        eid = id(e)
        if capture is not None and eid not in needed and eid not in targets:
            continue
        if op.variadic:
            gi = rules[0](g, out, *args, input_index=i, **attrs)
        else:
            rule = rules[i] if i < len(rules) else None  # (as static autodiff: missing ones
            if rule is None:                              # at the end have no gradient)
                continue
            gi = rule(g, out, *args, **attrs)
        if gi is None:
            continue
        shape, dtype = node.metas[i]
        if gi.shape != shape or gi.dtype is not dtype:
            gi = reduce_grad(gi, shape, dtype)
        prev = buffers.get(eid)
        buffers[eid] = gi if prev is None else prev + gi
        if e.__class__ is not Node:
            leaves[eid] = e


def accumulate_captured(tensors, grads, root_grads, create_graph: bool) -> None:
    """``backward(inputs=...)``: add the gradients a capturing pass returned (their tensors'
    hooks have run) into those tensors' ``.grad``, as the pass would have for leaves."""
    taken = {id(g._storage) for g in root_grads}
    for t, g in zip(tensors, grads):
        if g is not None:
            _accumulate_leaf(t, g, taken, create_graph, hooked=True)


def _accumulate_leaf(leaf, g, taken: set, create_graph: bool, hooked: bool = False) -> None:
    """Add ``g`` into ``leaf.grad``, then run the leaf's post-accumulate hooks.

    A gradient tensor may be shared (add passes one gradient to both inputs, a view shares
    storage, the user's grad_output): a leaf only takes ownership of a gradient whose memory
    nothing else in this pass holds (``taken``); otherwise it gets a copy, so in-place updates
    of one .grad (clip_grad_norm_, accumulation) never leak into another.
    """
    if not hooked:
        g = _leaf_grad(leaf, g)
    if g is None:
        return
    if leaf.grad is None:
        # A view is fine (a transposed weight gradient) as long as it covers all of its
        # storage and is writable (not a broadcast); otherwise copy.
        data = g._data
        shared = id(g._storage) in taken or not is_writeable(data) or \
            g._storage.nbytes != data.nbytes
        if create_graph:
            leaf.grad = g.clone() if shared else g  # clone() stays differentiable here
        elif shared:
            leaf.grad = g.detach().clone()
        else:
            leaf.grad = g.detach()  # a plain tensor, never marked as a view of another
        taken.add(id(leaf.grad._storage))
    elif create_graph or leaf.grad._node is not None:
        leaf.grad = leaf.grad + g
    else:
        leaf.grad._data += g._data
        leaf.grad._storage.version += 1
    hooks = _post_accumulate_hooks.get(id(leaf)) if _post_accumulate_hooks else None
    if hooks is not None and hooks[0]() is leaf:
        for hook in tuple(hooks[1]):
            hook(leaf)
