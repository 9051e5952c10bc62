"""Creation and random primitives: full, arange, linspace, eye, uniform, normal, randint.

They take no tensor inputs, except that ``full``, ``uniform`` and ``normal`` take either a
``shape`` attribute or one tensor ``like`` whose shape (at run time: a static program may know
it only with -1 dims) the result takes; only that shape is read. The ``device`` attribute says
where the result lives. Random ops draw from the per-device generator that ``hf.manual_seed``
seeds, so eager and static runs of the same seeded program draw the same numbers.
"""
from __future__ import annotations

import math

from ..backend import device as as_device
from ..dtypes import as_dtype, bool_, float32, int64
from ..random import generator
from .infer import check_fill_value
from .lowering_rules import elementwise_rule
from .registry import onnx_rules, register


def _check_shape(op, shape):
    shape = tuple(shape)
    for s in shape:
        if not isinstance(s, int) or isinstance(s, bool) or s < 0:
            raise ValueError(f"{op}: sizes must be non-negative ints, got shape {shape}")
    return shape


def _result_shape(op, like, shape):
    """The shape of a creation op's result: ``shape``, or the shape of the one tensor ``like``."""
    if not like:
        if shape is None:
            raise ValueError(f"{op}: give a shape or one tensor whose shape to take")
        return _check_shape(op, shape)
    if len(like) != 1 or shape is not None:
        raise ValueError(f"{op}: give either a shape or one tensor whose shape to take, got "
                         f"shape={shape} and {len(like)} tensor(s)")
    return tuple(like[0].shape)


def _full_infer(*like, shape=None, value, dtype, device):
    dt = as_dtype(dtype)
    check_fill_value("full", value, dt)
    return _result_shape("full", like, shape), dt, None


def _full_kernel(xp, *like, shape=None, value, dtype, device):
    return xp.full(_result_shape("full", like, shape), value, dtype=as_dtype(dtype).np)


def _full_lower(ctx, *like, shape=None, value, dtype, device):
    """Every element is ``value`` (in the result dtype): readers inline the constant."""
    return ctx.const(value)


full = register("full", infer=_full_infer, kernel=_full_kernel,
                lower=elementwise_rule(_full_lower, values=()))


def _full_dims_infer(*refs, shape, value, dtype, device):
    from .shape_ops import dynamic_sizes
    return tuple(dynamic_sizes("full", shape, refs, run=False)), as_dtype(dtype), None


def _full_dims_kernel(xp, *refs, shape, value, dtype, device):
    from .shape_ops import dynamic_sizes
    sizes = tuple(dynamic_sizes("full", shape, refs, run=True))
    return xp.full(_check_shape("full", sizes), value, dtype=as_dtype(dtype).np)


# hf.zeros(b, 3) etc. in a static program where b is a size known only when it runs (see
# shape_ops.dynamic_sizes): the inputs are the tensors whose dims (or values) give the sizes
full_dims = register("full_dims", infer=_full_dims_infer, kernel=_full_dims_kernel,
                     doc="full() with sizes read from its inputs' shapes (or values) at run time")


def arange_length(start, stop, step, dtype=None) -> int:
    """The length of ``arange(start, stop, step)``, as PyTorch computes it: an integer
    ``dtype`` truncates ``step`` (one that becomes 0 is refused), and int64 the bounds too
    (other dtypes take the length from the bounds as given); a step whose sign points away
    from ``stop`` is refused."""
    if step == 0 or (dtype is not None and not dtype.is_floating_point and int(step) == 0):
        raise ValueError(f"arange: step must be nonzero (start={start!r}, end={stop!r}, "
                         f"step={step!r}{'' if step == 0 else f', which {dtype} makes 0'})")
    if dtype is int64:
        start, stop, step = int(start), int(stop), int(step)
    if (stop - start) * step < 0:
        raise RuntimeError(f"arange: the bounds and the step's sign are inconsistent (start="
                           f"{start!r}, end={stop!r}, step={step!r})")
    if dtype is int64:
        return -((start - stop) // step)  # exact ceil((stop - start) / step) for any size
    return math.ceil((stop - start) / step)


def _arange_infer(*, start, stop, step, dtype, device):
    dt = as_dtype(dtype)
    return (arange_length(start, stop, step, dt),), dt, None


def _arange_kernel(xp, *, start, stop, step, dtype, device):
    dt = as_dtype(dtype)
    if dt.is_floating_point:
        # PyTorch's start + i * step, worked in float64 then rounded once (numpy's float32
        # arange accumulates a rounded step: 0.90000004 for arange(0, 1, 0.3)[3])
        length = arange_length(start, stop, step, dt)
        return (xp.arange(length, dtype=xp.float64) * step + start).astype(dt.np)
    # PyTorch's integer arange: int(start) + i * int(step) (numpy's differs on float bounds)
    length = arange_length(start, stop, step, dt)
    start, step = int(start), int(step)
    return xp.arange(start, start + length * step, step, dtype=dt.np)


arange = register("arange", infer=_arange_infer, kernel=_arange_kernel)


def _linspace_infer(*, start, end, steps, dtype, device):
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"linspace: steps must be a non-negative int, got {steps!r}")
    return (steps,), as_dtype(dtype), None


def _linspace_kernel(xp, *, start, end, steps, dtype, device):
    dt = as_dtype(dtype)
    if dt.is_floating_point:
        return xp.linspace(start, end, steps, dtype=dt.np)
    # PyTorch's integer linspace: the bounds and each value truncated toward 0, the second half
    # counted back from ``end`` (numpy floors: linspace(-5, 5, 5) gave -3 where PyTorch gives -2)
    start, end = int(start), int(end)
    if steps == 1:
        return xp.full(1, start, dtype=dt.np)
    i = xp.arange(steps, dtype=xp.float64)
    step = (end - start) / (steps - 1)
    values = xp.where(i < steps // 2, start + step * i, end - step * (steps - 1 - i))
    return xp.trunc(values).astype(dt.np)


linspace = register("linspace", infer=_linspace_infer, kernel=_linspace_kernel)


def _eye_infer(*, n, m, dtype, device):
    return _check_shape("eye", (n, m)), as_dtype(dtype), None


def _eye_kernel(xp, *, n, m, dtype, device):
    return xp.eye(n, m, dtype=as_dtype(dtype).np)


eye = register("eye", infer=_eye_infer, kernel=_eye_kernel)


def _random_float_infer(op):
    def infer(*like, shape=None, dtype, device, **params):
        dt = as_dtype(dtype)
        if not dt.is_floating_point:
            raise TypeError(f"{op}: dtype must be floating point, got {dt}")
        return _result_shape(op, like, shape), dt, None
    return infer


def _uniform_kernel(xp, *like, shape=None, low, high, dtype, device):
    shape = _result_shape("uniform", like, shape)
    dt = as_dtype(dtype)
    gen = generator(as_device(device))
    draw_dt = dt.np if dt is not as_dtype("float16") else float32.np
    out = gen.random(shape, dtype=draw_dt)
    if low != 0.0 or high != 1.0:
        out *= high - low
        out += low
    return out.astype(dt.np, copy=False)


uniform = register("uniform", infer=_random_float_infer("uniform"), kernel=_uniform_kernel)


def _normal_kernel(xp, *like, shape=None, mean, std, dtype, device):
    shape = _result_shape("normal", like, shape)
    dt = as_dtype(dtype)
    gen = generator(as_device(device))
    draw_dt = dt.np if dt is not as_dtype("float16") else float32.np
    out = gen.standard_normal(shape, dtype=draw_dt)
    if std != 1.0:
        out *= std
    if mean != 0.0:
        out += mean
    return out.astype(dt.np, copy=False)


normal = register("normal", infer=_random_float_infer("normal"), kernel=_normal_kernel)


def _randint_infer(*, low, high, shape, dtype, device):
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    dt = as_dtype(dtype)
    if dt.is_floating_point or dt is bool_:
        raise TypeError(f"randint: dtype must be an integer type, got {dt}")
    return _check_shape("randint", shape), dt, None


def _randint_kernel(xp, *, low, high, shape, dtype, device):
    gen = generator(as_device(device))
    return gen.integers(low, high, size=shape, dtype=as_dtype(dtype).np)


randint = register("randint", infer=_randint_infer, kernel=_randint_kernel)


def _bernoulli_infer(p, *, dtype=None):
    return p.shape, p.dtype if dtype is None else as_dtype(dtype), None


def _bernoulli_kernel(xp, p, *, dtype=None):
    from ..backend import array_device
    gen = generator(array_device(p))
    draw = gen.random(p.shape, dtype=p.dtype if p.dtype.kind == "f" else "float32")
    return (draw < p).astype(p.dtype if dtype is None else as_dtype(dtype).np)


bernoulli = register("bernoulli", infer=_bernoulli_infer, kernel=_bernoulli_kernel)

__all__ = ["full", "arange", "linspace", "eye", "uniform", "normal", "randint", "bernoulli"]


# ---- ONNX lowering rules (hybridfw.onnx) ----------------------------------------------------
def _onnx_shape(ctx, like, shape):
    return ctx.shape_of(like[0]) if like else ctx.ints(shape)


def _onnx_full(ctx, *like, shape=None, value, dtype, device):
    return ctx.node("Expand", [ctx.const(value, dtype), _onnx_shape(ctx, like, shape)])


def _onnx_evaluated(kernel):
    """Ops whose attributes fix the result: the value, computed once by the op's own kernel."""
    def rule(ctx, **attrs):
        import numpy as np
        return ctx.const(kernel(np, **attrs))
    return rule


def _onnx_random(op_type, names: dict):
    """``names``: our attribute -> the ONNX op's attribute (low/high, mean/scale)."""
    def rule(ctx, *like, shape=None, dtype, device, **params):
        values = {names[k]: float(v) for k, v in params.items()}
        if like:
            return ctx.node(f"{op_type}Like", [like[0]], dtype=ctx.elem_type(dtype), **values)
        return ctx.node(op_type, [], dtype=ctx.elem_type(dtype), shape=list(shape), **values)
    return rule


def _onnx_randint(ctx, *, low, high, shape, dtype, device):
    draw = ctx.node("RandomUniform", [], dtype=ctx.elem_type("float64"), shape=list(shape),
                    low=float(low), high=float(high))
    return ctx.node("Cast", [ctx.node("Floor", [draw])], to=ctx.elem_type(dtype))


def _onnx_bernoulli(ctx, p, *, dtype=None):
    return ctx.node("Bernoulli", [p], dtype=ctx.elem_type(ctx.out.dtype))


def _onnx_full_dims(ctx, *refs, shape, value, dtype, device):
    from .shape_ops import onnx_sizes
    return ctx.node("Expand", [ctx.const(value, dtype), onnx_sizes(ctx, shape, refs)])


onnx_rules(full=_onnx_full, full_dims=_onnx_full_dims, arange=_onnx_evaluated(_arange_kernel),
           linspace=_onnx_evaluated(_linspace_kernel), eye=_onnx_evaluated(_eye_kernel),
           uniform=_onnx_random("RandomUniform", {"low": "low", "high": "high"}),
           normal=_onnx_random("RandomNormal", {"mean": "mean", "std": "scale"}),
           randint=_onnx_randint, bernoulli=_onnx_bernoulli)
