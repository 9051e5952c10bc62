"""The one op registry, and dispatch to the current interpreter.

Every primitive op is one :class:`OpDef`, defined once, holding together:

- ``infer(*args, **attrs) -> (shape, dtype, compute_dtype)``: shape/dtype inference with
  validation. ``args`` are tensor-likes (anything with ``.shape``/``.dtype``/``.ndim``: eager
  Tensors, static Variables, :class:`TensorMeta`) or Python scalars. ``compute_dtype`` (or None)
  is the dtype tensor inputs are cast to before the kernel runs. A ``-1`` dim means "unknown
  until run time" (static graphs, data-dependent sizes).
- ``kernel(xp, *arrays, **attrs) -> array``: the computation, written against the array module
  ``xp`` (numpy or cupy). It must return fresh memory unless the op is declared ``view``.
- ``vjp``: the gradient rules, one per input (None where the input is not differentiable), as in
  PyTorch's derivatives.yaml, so backward computes only the gradients someone needs. Each rule is
  ``rule(g, out, *inputs, **attrs) -> gradient``, written in registry ops (so it runs eagerly,
  builds static backward graphs, and is itself differentiable). Inputs the op did not declare in
  ``save`` arrive as :class:`TensorMeta` (shape/dtype only; in static autodiff, one with dims
  known only at run time also gives the input itself through ``value()``, for rules that must
  read its run-time shape); ``out`` is None unless
  ``save_output``. A rule may return a gradient of the broadcast shape or another dtype: reducing
  it to its input's shape and dtype happens once, in ``ops.grad_utils.reduce_grad``.
- ``save``: indices of the inputs backward needs (a tuple, or a slice for variadic ops);
  ``save_output``: whether it needs the output. This is the op's memory contract: nothing else
  is kept alive for backward. ``save_for`` (optional) ``{i: (j, ...)}``: input ``i`` is needed
  only by the gradients of inputs ``j``: eager autograd saves it (and checks it for in-place
  changes at backward) only when one of them needs a gradient, as PyTorch does (``x[1] / 2``
  keeps nothing, so writing the quotient back into ``x[1]`` is fine; ``x @ w`` with ``w``
  frozen does not keep ``x``).
- ``variadic``: the op takes any number of tensor inputs (``cat``, ``einsum``); its ``vjp`` is
  then one rule, called with ``input_index=i`` for input ``i``.
- ``view``: the output may share memory with input 0 (reshape, transpose, basic slicing).
- ``supports_out``: the kernel accepts ``out=`` (in-place methods such as ``add_`` use it).
- ``subscript`` (optional, view ops): ``subscript(*index_operands, **attrs) -> index or None``,
  the index the kernel applies as ``input0[index]`` when it is the same on every call (None
  otherwise): the executor's generated code then subscripts input 0 itself, with the index made
  once, where the kernel would rebuild it on each call.

Interpreters (eager in ``dygraph/``, graph building in ``static/``) register themselves with
:func:`set_interpreter`; :func:`apply` hands each call to the active one, held in a context
variable, so this floor never imports the floors above it.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Callable

__all__ = ["OpDef", "register", "get_op", "all_ops", "apply", "apply_inplace", "TensorMeta",
           "set_interpreter", "use_interpreter", "current_interpreter", "TensorLike",
           "is_tensor", "runtime_value", "onnx_rules", "OnnxNotExportable"]


class TensorLike:
    """Base class of every tensor-like value ops accept (eager Tensor, static Variable, meta).

    Subclasses provide ``shape`` (tuple of ints, -1 for unknown), ``dtype`` (DType) and ``ndim``.
    """

    __slots__ = ()


def is_tensor(x) -> bool:
    return isinstance(x, TensorLike)


class TensorMeta(TensorLike):
    """Shape and dtype of a value whose data is not needed (what a gradient rule sees of an
    input that its op did not save).

    ``resolve`` (optional, given by static autodiff for inputs with dims known only at run time)
    returns the value itself, for a rule that must build ops reading its run-time shape; calling
    :meth:`value` keeps that value alive until the backward runs.
    """

    __slots__ = ("shape", "dtype", "_resolve")

    def __init__(self, shape: tuple, dtype, resolve: Callable | None = None):
        self.shape = shape
        self.dtype = dtype
        self._resolve = resolve

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def value(self):
        """The value this meta describes (a static Variable), where the caller provided it."""
        if self._resolve is None:
            raise ValueError(f"a gradient needs the run-time shape of an input known only as "
                             f"{tuple(self.shape)}, and its value is not available here")
        return self._resolve()


def runtime_value(x):
    """``x`` itself, or the value a :class:`TensorMeta` stands for (see ``TensorMeta.value``):
    what a gradient rule builds ops on to read an input's run-time shape."""
    return x.value() if isinstance(x, TensorMeta) else x

    def __repr__(self) -> str:
        return f"TensorMeta(shape={self.shape}, dtype={self.dtype})"


class OpDef:
    """One primitive op. See the module docstring for what each field means."""

    __slots__ = ("name", "infer", "kernel", "vjp", "save", "save_output", "view", "supports_out",
                 "variadic", "doc", "onnx", "save_for", "__dict__")

    def __init__(self, name: str, infer: Callable, kernel: Callable, vjp: tuple | None = None,
                 save: tuple | slice = (), save_output: bool = False, view: bool = False,
                 supports_out: bool = False, variadic: bool = False, doc: str = ""):
        self.name = name
        self.infer = infer
        self.kernel = kernel
        self.vjp = vjp
        self.save = save if isinstance(save, slice) else tuple(save)
        self.save_output = save_output
        self.view = view
        self.supports_out = supports_out
        self.variadic = variadic
        self.doc = doc
        self.onnx = None  # the ONNX lowering rule (see onnx_rules), set beside the op's other rules
        self.save_for = None  # optional {input: inputs whose gradient alone needs it} (eager)

    lower = None  # optional lowering rule for compiled regions (see hybridfw.static.lowering)
    subscript = None  # optional: the index a view op applies, fixed by its attributes

    @property
    def differentiable(self) -> bool:
        return self.vjp is not None and any(r is not None for r in self.vjp)

    def __repr__(self) -> str:
        return f"<op {self.name}>"


_REGISTRY: dict[str, OpDef] = {}


def register(name: str, *, infer: Callable, kernel: Callable, vjp: tuple | None = None,
             save: tuple | slice = (), save_output: bool = False, view: bool = False,
             supports_out: bool = False, variadic: bool = False, doc: str = "",
             lower: Callable | None = None, subscript: Callable | None = None,
             save_for: dict | None = None) -> OpDef:
    """Define a primitive op. Each name may be registered once.

    ``lower`` (optional) is the op's rule for compiled regions (:mod:`hybridfw.static.lowering`);
    when omitted, a ``lower`` attribute its kernel carries (set by a kernel factory) is used.
    ``subscript`` (optional, view ops only): see the module docstring."""
    if name in _REGISTRY:
        raise ValueError(f"op {name!r} is already registered")
    if vjp is not None:
        vjp = tuple(vjp)
    op = OpDef(name, infer, kernel, vjp, save, save_output, view, supports_out, variadic, doc)
    op.lower = lower if lower is not None else getattr(kernel, "lower", None)
    op.save_for = save_for
    if subscript is not None:
        if not view:
            raise ValueError(f"op {name!r}: a subscript rule belongs to a view op")
        op.subscript = subscript
    _REGISTRY[name] = op
    return op


class OnnxNotExportable:
    """The ONNX entry of an op no exported (inference) model can hold, with the reason
    (gradient helpers, ...): the exporter refuses it with that reason."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:
        return f"OnnxNotExportable({self.reason!r})"


def onnx_rules(**rules) -> None:
    """Attach ONNX lowering rules to registered ops, by op name (used at the end of each op
    module, beside the op's other rules; :mod:`hybridfw.onnx` reads them).

    A rule is an ONNX op type (a string: the op maps 1:1, its tensor operands cast to the op's
    compute dtype) or a function ``rule(ctx, *args, **attrs) -> value name`` that emits nodes
    through the exporter's context ``ctx`` (``args``: ONNX value names for tensor inputs, Python
    numbers as they are; ``ctx.metas``: their shapes/dtypes; ``ctx.out``: the result's). Nothing
    here imports onnx.
    """
    for name, rule in rules.items():
        op = get_op(name)
        if op.onnx is not None:
            raise ValueError(f"op {name!r} already has an ONNX lowering rule")
        op.onnx = rule


def get_op(name: str) -> OpDef:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no op named {name!r}") from None


def all_ops() -> dict[str, OpDef]:
    return dict(_REGISTRY)


# ---- dispatch ------------------------------------------------------------------------------
class _DefaultInterpreter:
    """What a fresh thread or context sees: forwards to the registered default interpreter."""

    target = None

    def apply(self, op, args, attrs):
        return self.target.apply(op, args, attrs)

    def apply_inplace(self, op, target, args, attrs):
        return self.target.apply_inplace(op, target, args, attrs)


_default_interpreter = _DefaultInterpreter()
_current: contextvars.ContextVar = contextvars.ContextVar("hybridfw_interpreter",
                                                         default=_default_interpreter)
_get_current = _current.get


def set_interpreter(interpreter) -> None:
    """Make ``interpreter`` the default (the eager one registers itself at import)."""
    _default_interpreter.target = interpreter
    _current.set(interpreter)


@contextlib.contextmanager
def use_interpreter(interpreter):
    """Run the block with ``interpreter`` active (static graph building uses this)."""
    token = _current.set(interpreter)
    try:
        yield interpreter
    finally:
        _current.reset(token)


def default_interpreter():
    """The interpreter registered as the default (eager)."""
    return _default_interpreter.target


def current_interpreter():
    return _get_current()


def apply(op: OpDef, *args, **attrs):
    """Run ``op`` on ``args`` in the active interpreter (eager: compute now; static: record)."""
    return _get_current().apply(op, args, attrs)


def apply_inplace(op: OpDef, target, *args, **attrs):
    """Run ``op`` writing its result into ``target`` (which is also its first input)."""
    return _get_current().apply_inplace(op, target, args, attrs)
