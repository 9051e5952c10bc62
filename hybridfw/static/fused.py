"""``fused_elementwise``: one registry op running a group of elementwise ops (what the fusion
pass, :mod:`.passes.fusion`, makes).

Its attributes describe the group:

- ``ops``: a tuple of sub-ops in order, each ``(op_name, refs, attrs)``: ``op_name`` one of
  :data:`FUSIBLE_OPS`; ``refs`` its operands, each ``'in<i>'`` (external input ``i`` of the fused
  op), ``'op<j>'`` (the result of earlier sub-op ``j``) or a Python number; ``attrs`` the sub-op's
  attributes as sorted ``(name, value)`` pairs. The last sub-op's result is the op's output.
- ``dtype``: the output dtype.

Inference runs the sub-ops' own ``infer`` in order (so broadcasting, promotion and validation are
exactly theirs). The kernel runs the sub-ops' registry kernels, with the casts to the compute
dtype the executor would make, writing through ``out=`` into temporaries that are recycled as
soon as their last reader has run: a chain of same-shape ops allocates one array, a tree at most
one per simultaneously live intermediate. A sub-op writes through ``out=`` only when its kernel
supports it and computes in the result dtype anyway (probed once per input signature), so
results are bitwise those of the unfused ops. ``where`` has no ``out=`` and allocates its result.

There is no gradient: fusion runs on inference programs or after :func:`hf.static.gradients`
has built the backward; asking for one raises a ``RuntimeError`` that says so.

Example::

    >>> import numpy as np
    >>> from hybridfw.ops.registry import get_op
    >>> op = get_op("fused_elementwise")
    >>> op.kernel(np, np.array([1.0, -2.0]), ops=(("mul", ("in0", 2.0), ()),
    ...                                            ("relu", ("op0",), ())), dtype="float64")
    array([2., 0.])
"""
from __future__ import annotations

import numpy as np

from ..dtypes import as_dtype
from ..ops.registry import TensorMeta, get_op, onnx_rules, register

__all__ = ["FUSIBLE_OPS", "fused_elementwise", "parse_ref"]

FUSIBLE_OPS = frozenset({
    "add", "sub", "mul", "div", "neg", "exp", "log", "tanh", "sigmoid", "relu", "sqrt", "rsqrt",
    "sin", "cos", "abs", "maximum", "minimum", "pow", "where", "clamp",
    "eq", "ne", "lt", "le", "gt", "ge",
})

_MAX_PLANS = 256


def parse_ref(ref, count: int, inputs: int):
    """``('in', i)``, ``('op', j)`` or ``('const', number)`` for a ref of sub-op ``count``."""
    if isinstance(ref, str):
        kind, index = ref[:2], ref[2:]
        if kind in ("in", "op") and index.isdigit():
            index = int(index)
            if (kind == "in" and index < inputs) or (kind == "op" and index < count):
                return kind, index
        raise ValueError(f"fused_elementwise: sub-op {count} has an invalid operand {ref!r} "
                         f"({inputs} inputs, {count} earlier sub-ops)")
    if isinstance(ref, (int, float)):
        return "const", ref
    raise ValueError(f"fused_elementwise: sub-op {count} has an operand of type "
                     f"{type(ref).__name__}; expected 'in<i>', 'op<j>' or a Python number")


def _infer_steps(inputs, ops) -> list:
    """(shape, dtype, compute_dtype) of every sub-op, given the external inputs' metas."""
    if not ops:
        raise ValueError("fused_elementwise: needs at least one sub-op")
    results: list = []
    for count, (name, refs, attrs) in enumerate(ops):
        if name not in FUSIBLE_OPS:
            raise ValueError(f"fused_elementwise: sub-op {count} is {name!r}, which is not "
                             f"fusible (fusible: {', '.join(sorted(FUSIBLE_OPS))})")
        args = []
        for ref in refs:
            kind, value = parse_ref(ref, count, len(inputs))
            args.append(inputs[value] if kind == "in" else
                        TensorMeta(*results[value][:2]) if kind == "op" else value)
        results.append(get_op(name).infer(*args, **dict(attrs)))
    return results


def _fused_infer(*inputs, ops, dtype):
    shape, result_dtype, _ = _infer_steps(inputs, ops)[-1]
    if result_dtype is not as_dtype(dtype):
        raise TypeError(f"fused_elementwise: the sub-ops compute {result_dtype} but the op "
                        f"declares dtype {as_dtype(dtype)}")
    return shape, result_dtype, None


class _Step:
    __slots__ = ("kernel", "args", "attrs", "dtype", "shape", "use_out", "frees")


# (id(ops), array module, input signature) -> (ops, plan). Keyed by the identity of ``ops`` (the
# executor passes the same attribute tuple every run), because equal-comparing numbers of
# different types or signs (1 and 1.0, 0.0 and -0.0) must not share a plan.
_plans: dict = {}


def _plan(xp, arrays, ops) -> list:
    key = (id(ops), xp.__name__, tuple((a.shape, a.dtype.str) for a in arrays))
    entry = _plans.get(key)
    if entry is None or entry[0] is not ops:
        if len(_plans) >= _MAX_PLANS:
            _plans.clear()
        entry = _plans[key] = (ops, _make_plan(xp, arrays, ops))
    return entry[1]


def _make_plan(xp, arrays, ops) -> list:
    metas = [TensorMeta(a.shape, as_dtype(a.dtype)) for a in arrays]
    inferred = _infer_steps(metas, ops)
    last_reader: dict = {}
    steps = []
    for count, ((name, refs, attrs), (shape, dtype, compute)) in enumerate(zip(ops, inferred)):
        step = _Step()
        opdef = get_op(name)
        step.kernel, step.attrs = opdef.kernel, dict(attrs)
        step.dtype, step.shape = dtype.np, tuple(shape)
        args = []
        for ref in refs:
            kind, value = parse_ref(ref, count, len(arrays))
            source_dtype = metas[value].dtype if kind == "in" else \
                inferred[value][1] if kind == "op" else None
            cast = compute.np if (compute is not None and source_dtype is not None
                                  and source_dtype is not compute
                                  and source_dtype.name != "bool") else None
            args.append((kind, value, cast))
            if kind == "op":
                last_reader[value] = count
        step.args = tuple(args)
        step.use_out = opdef.supports_out and _natural_dtype(xp, step, metas, inferred) == \
            step.dtype
        steps.append(step)
    for step in steps:
        step.frees = ()
    for value, count in last_reader.items():
        steps[count].frees += (value,)
    return steps


def _natural_dtype(xp, step, metas, inferred):
    """The dtype the kernel gives without ``out=`` (probed on one-element arrays)."""
    args = []
    for kind, value, cast in step.args:
        if kind == "const":
            args.append(value)
        else:
            dtype = cast or (metas[value].dtype.np if kind == "in" else inferred[value][1].np)
            args.append(xp.ones(1, dtype=dtype))
    try:
        with np.errstate(all="ignore"):
            return xp.asarray(step.kernel(xp, *args, **step.attrs)).dtype
    except Exception:  # noqa: BLE001 - the real call reports it; just do not use out=
        return None


def _fused_kernel(xp, *arrays, ops, dtype):
    if xp is not np and _cuda_fuse():  # one cupy ElementwiseKernel (opt-in, lowering.cuda)
        from .lowering.cuda import fused_kernel
        result = fused_kernel(xp, arrays, ops)
        if result is not None:
            return result
    values: list = [None] * len(ops)
    pool: list = []  # temporaries whose value is dead, free for reuse
    for count, step in enumerate(_plan(xp, arrays, ops)):
        args = []
        for kind, value, cast in step.args:
            a = arrays[value] if kind == "in" else values[value] if kind == "op" else value
            args.append(a if cast is None else a.astype(cast))
        for value in step.frees:  # dead once this step has read them: it may write over them
            pool.append(values[value])
            values[value] = None
        if step.use_out:
            out = _take(pool, step.shape, step.dtype)
            if out is None:
                out = xp.empty(step.shape, dtype=step.dtype)
            values[count] = step.kernel(xp, *args, out=out, **step.attrs)
        else:
            result = xp.asarray(step.kernel(xp, *args, **step.attrs))
            values[count] = result if result.dtype == step.dtype else result.astype(step.dtype)
    return values[-1]


def _cuda_fuse() -> bool:
    from .lowering.cuda import enabled
    return enabled()


def _take(pool: list, shape, dtype):
    for i, a in enumerate(pool):
        if a.shape == shape and a.dtype == dtype:
            return pool.pop(i)
    return None


def _no_gradient(g, out, *inputs, ops, dtype, input_index):
    raise RuntimeError("fused_elementwise has no gradient: run the fusion pass after "
                       "hf.static.gradients has added the backward (or on inference programs), "
                       "or disable it with optimize(..., disable=('fusion',))")


fused_elementwise = register("fused_elementwise", infer=_fused_infer, kernel=_fused_kernel,
                             variadic=True, vjp=(_no_gradient,),
                             doc="elementwise ops run as one (see hybridfw.static.fused)")


# ---- ONNX lowering rule (hybridfw.onnx) -----------------------------------------------------
def _onnx_fused(ctx, *inputs, ops, dtype):
    """Each sub-op through its own registry rule, in order."""
    names, metas = [], []
    for count, (name, refs, attrs) in enumerate(ops):
        args, arg_metas = [], []
        for ref in refs:
            kind, value = parse_ref(ref, count, len(inputs))
            if kind == "in":
                args.append(inputs[value])
                arg_metas.append(ctx.metas[value])
            elif kind == "op":
                args.append(names[value])
                arg_metas.append(metas[value])
            else:
                args.append(value)
                arg_metas.append(value)
        result, meta = ctx.lower(name, args, arg_metas, dict(attrs))
        names.append(result)
        metas.append(meta)
    return names[-1]


onnx_rules(fused_elementwise=_onnx_fused)
