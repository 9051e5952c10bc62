"""Tensor factories (zeros, ones, arange, rand, ...) on top of the creation primitives.

They go through the registry like every op, so inside a static program they become operators
(random ones draw anew on every run) and in eager mode they return tensors at once.
"""
from __future__ import annotations

import contextlib
import operator

import numpy as np

from ..backend import default_device
from ..backend import device as as_device
from ..dtypes import as_dtype, bool_, float64, get_default_dtype, int64
from ..random import drawing_from
from . import creation as K
from .infer import is_index
from .registry import TensorLike, apply, current_interpreter
from .shape_ops import size_entries

__all__ = ["zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
           "arange", "linspace", "logspace", "eye", "rand", "randn", "randint", "rand_like",
           "randn_like", "randint_like",
           "normal", "uniform"]


def _shape(op: str, size, size_kw=None) -> tuple:
    """The ints of ``size`` (positional sizes, one tuple/list, or PyTorch's ``size=``); numpy
    ints and 0-d integer tensors count as ints, a float size is refused (as in PyTorch)."""
    if size_kw is not None:  # PyTorch's size= keyword
        if size:
            raise TypeError(f"{op}: pass the shape either positionally or as size=, not both")
        size = (size_kw,)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if any(hasattr(s, "dim_source") for s in size):
        return tuple(size)  # sizes a static program knows when it runs (see _filled)
    try:
        return tuple(operator.index(s) for s in size)
    except TypeError:
        bad = next(s for s in size if not is_index(s))
        raise TypeError(f"{op}: argument 'size' must be tuple of ints, but found element of "
                        f"type {type(bad).__name__} ({bad!r}) in {size!r}") from None


def _dev(device) -> str:
    return str(as_device(device) if device is not None else default_device())


def _dt(dtype, default=None):
    return as_dtype(dtype) if dtype is not None else (default or get_default_dtype())


_GLOBAL_GENERATORS = contextlib.nullcontext()  # (reusable: no generator of one's own)


def drawing(generator, device, name: str):
    """A block whose random ops on ``device`` draw from ``generator`` (an ``hf.Generator``;
    None: the global one). Eager code only: a static program draws when it runs, from the
    global generators."""
    if generator is None:
        return _GLOBAL_GENERATORS
    if getattr(current_interpreter(), "name", "eager") != "eager":
        raise ValueError(f"{name}: generator= works in eager code only; a static program "
                         f"(to_static) draws from the generators hf.manual_seed seeds")
    return drawing_from(generator, as_device(device) if device is not None else
                        default_device(), name)


def _grad(t, requires_grad):
    if requires_grad:
        t.requires_grad = True
    return t


def _filled(shape, value, dtype, device):
    """``full``, or in a static program with sizes known when it runs, ``full_dims``."""
    dynamic = size_entries(shape)
    if dynamic is not None:
        return apply(K.full_dims, *dynamic[1], shape=dynamic[0], value=value, dtype=dtype,
                     device=device)
    return apply(K.full, shape=shape, value=value, dtype=dtype, device=device)


def _number(value):
    """``value`` as the Python number PyTorch reads it as: a numpy scalar or a 0-d tensor
    gives the number it holds (``arange(tensor(3))`` counts in int64), a numpy bool reads as a
    float (``torch.full((2,), np.True_)`` is float32)."""
    if isinstance(value, np.generic):
        return float(value) if isinstance(value, np.bool_) else value.item()
    if isinstance(value, TensorLike) and not value.shape and not hasattr(value, "dim_source"):
        return value.item()
    return value


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False):
    """A tensor of ``size`` filled with ``fill_value`` (dtype from the value, like PyTorch)."""
    fill_value = _number(fill_value)
    if dtype is None:
        dtype = bool_ if isinstance(fill_value, bool) else (
            int64 if isinstance(fill_value, int) else get_default_dtype())
    shape = _shape("full", (size,) if not isinstance(size, (tuple, list)) else (tuple(size),))
    return _grad(_filled(shape, fill_value, as_dtype(dtype), _dev(device)), requires_grad)


def _constant(op, value, shape, size, dtype, device, requires_grad):
    return _grad(_filled(_shape(op, shape, size), value, _dt(dtype), _dev(device)), requires_grad)


def zeros(*shape, size=None, dtype=None, device=None, requires_grad: bool = False):
    return _constant("zeros", 0, shape, size, dtype, device, requires_grad)


def ones(*shape, size=None, dtype=None, device=None, requires_grad: bool = False):
    return _constant("ones", 1, shape, size, dtype, device, requires_grad)


def empty(*shape, size=None, dtype=None, device=None, requires_grad: bool = False):
    """Like ``zeros`` (hybridfw never hands out uninitialised memory)."""
    return _constant("empty", 0, shape, size, dtype, device, requires_grad)


def _like(x, dtype, device):
    return (tuple(x.shape), as_dtype(dtype) if dtype is not None else x.dtype,
            str(as_device(device)) if device is not None else str(x.device))


def _creation(op, x, shape, **attrs):
    """``op`` with ``x``'s shape: as an attribute, or read from ``x`` itself when a static
    program knows a dim of it only at run time (-1)."""
    if -1 in shape:
        return apply(op, x, **attrs)
    return apply(op, shape=shape, **attrs)


def full_like(input, fill_value, *, dtype=None, device=None,  # noqa: A002 - PyTorch's name
              requires_grad: bool = False):
    shape, dt, dev = _like(input, dtype, device)
    return _grad(_creation(K.full, input, shape, value=fill_value, dtype=dt, device=dev),
                 requires_grad)


def zeros_like(input, *, dtype=None, device=None, requires_grad: bool = False):  # noqa: A002
    return full_like(input, 0, dtype=dtype, device=device, requires_grad=requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad: bool = False):  # noqa: A002
    return full_like(input, 1, dtype=dtype, device=device, requires_grad=requires_grad)


empty_like = zeros_like


def arange(start=0, end=None, step=1, *, dtype=None, device=None,
           requires_grad: bool = False):
    """``arange(5)``, ``arange(1, 5)``, ``arange(0, 1, 0.25)``, ``arange(end=5)``; ints give
    int64, else float32."""
    if end is None:
        start, end = 0, start
    start, end, step = _number(start), _number(end), _number(step)
    if hasattr(end, "dim_source"):  # a static program's value: known when it runs
        return _grad(_arange_at_run_time(start, end, step, dtype, device), requires_grad)
    if dtype is None:
        dtype = int64 if all(isinstance(v, int) for v in (start, end, step)) else \
            get_default_dtype()
    return _grad(apply(K.arange, start=start, stop=end, step=step, dtype=as_dtype(dtype),
                       device=_dev(device)), requires_grad)


def _arange_at_run_time(start, end, step, dtype, device):
    """``arange(start, end)`` for an ``end`` a static program knows when it runs (converted
    code's ``hf.arange(x.shape[0])`` under an InputSpec None dim): the running count of
    ``end - start`` ones, less one, plus ``start``."""
    if not isinstance(start, int) or isinstance(start, bool) or step != 1:
        raise TypeError(f"arange: with an end known only when the program runs ({end!r}), "
                        f"start must be a Python int and step 1, got start={start!r}, "
                        f"step={step!r}")
    count = end - start if start else end
    ones = _filled(_shape("arange", (count,)), 1, int64, _dev(device))
    out = ones.cumsum(0) + (start - 1)
    return out if dtype is None or as_dtype(dtype) is int64 else out.astype(dtype)


def _fixed_shape(name: str, shape: tuple) -> tuple:
    """``shape``, refused with a clear error where a size is known only when the program runs
    (random draws take their shape when the program is built)."""
    if any(hasattr(s, "dim_source") for s in shape):
        raise TypeError(f"{name}: a size known only when the program runs (such as x.shape[0] "
                        f"for an InputSpec None dim) is not supported for random tensors, got "
                        f"shape {shape!r}; draw with a fixed shape, or use dropout-style ops on "
                        "a tensor of that shape")
    return shape


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False):
    return _grad(apply(K.linspace, start=float(start), end=float(end), steps=int(steps),
                       dtype=_dt(dtype), device=_dev(device)), requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None,
             requires_grad: bool = False):
    """``steps`` values from ``base ** start`` to ``base ** end``, evenly spaced in the
    exponent.

    >>> hf.logspace(0, 2, 3).tolist()
    [1.0, 10.0, 100.0]
    """
    exponents = apply(K.linspace, start=float(start), end=float(end), steps=int(steps),
                      dtype=float64, device=_dev(device))
    values = (float(base) ** exponents).astype(_dt(dtype))
    return _grad(values, requires_grad)


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False):
    n, m = _shape("eye", (n, n if m is None else m))
    if hasattr(n, "dim_source") or hasattr(m, "dim_source"):  # sizes known when it runs
        rows = arange(n, device=device).unsqueeze(1)
        return _grad((rows == arange(m, device=device)).astype(_dt(dtype)), requires_grad)
    return _grad(apply(K.eye, n=n, m=m, dtype=_dt(dtype), device=_dev(device)), requires_grad)


def rand(*shape, size=None, generator=None, dtype=None, device=None,
         requires_grad: bool = False):
    """Uniform samples in [0, 1), from the generator ``hf.manual_seed`` seeds (or
    ``generator``, an ``hf.Generator``)."""
    shape = _fixed_shape("rand", _shape("rand", shape, size))
    with drawing(generator, device, "rand"):
        out = apply(K.uniform, shape=shape, low=0.0, high=1.0, dtype=_dt(dtype),
                    device=_dev(device))
    return _grad(out, requires_grad)


def randn(*shape, size=None, generator=None, dtype=None, device=None,
          requires_grad: bool = False):
    """Standard normal samples (from ``generator`` when given)."""
    shape = _fixed_shape("randn", _shape("randn", shape, size))
    with drawing(generator, device, "randn"):
        out = apply(K.normal, shape=shape, mean=0.0, std=1.0, dtype=_dt(dtype),
                    device=_dev(device))
    return _grad(out, requires_grad)


def uniform(size, low: float = 0.0, high: float = 1.0, *, dtype=None, device=None):
    return apply(K.uniform, shape=_shape("uniform", (size,)), low=float(low), high=float(high),
                 dtype=_dt(dtype), device=_dev(device))


def normal(mean: float, std: float, size, *, dtype=None, device=None):
    return apply(K.normal, shape=_shape("normal", (size,)), mean=float(mean), std=float(std),
                 dtype=_dt(dtype), device=_dev(device))


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None):
    """``randint(high, size)`` or ``randint(low, high, size)``: integers in [low, high) (from
    ``generator`` when given)."""
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint: expected randint(low, high, size) or randint(high, size)")
        low, high, size = 0, low, high
    dt = as_dtype(dtype) if dtype is not None else int64
    integral = dt if dt.category == int64.category else int64
    with drawing(generator, device, "randint"):
        draw = apply(K.randint, low=int(low), high=int(high),
                     shape=_shape("randint", (size,)), dtype=integral, device=_dev(device))
    # (PyTorch draws floats/bools too)
    return draw if integral is dt else draw.astype(dt)


def rand_like(input, *, generator=None, dtype=None, device=None,  # noqa: A002
              requires_grad: bool = False):
    """Uniform samples in [0, 1) of ``input``'s shape (in a static program, its run-time
    shape)."""
    shape, dt, dev = _like(input, dtype, device)
    with drawing(generator, dev, "rand_like"):
        out = _creation(K.uniform, input, shape, low=0.0, high=1.0, dtype=dt, device=dev)
    return _grad(out, requires_grad)


def randn_like(input, *, generator=None, dtype=None, device=None,  # noqa: A002
               requires_grad: bool = False):
    """Standard normal samples of ``input``'s shape (in a static program, its run-time
    shape)."""
    shape, dt, dev = _like(input, dtype, device)
    with drawing(generator, dev, "randn_like"):
        out = _creation(K.normal, input, shape, mean=0.0, std=1.0, dtype=dt, device=dev)
    return _grad(out, requires_grad)


def randint_like(input, low=0, high=None, *, dtype=None, device=None,  # noqa: A002
                 requires_grad: bool = False):
    """Integers in [low, high) (``randint_like(x, high)`` or ``randint_like(x, low, high)``)
    of ``input``'s shape, in ``input``'s dtype unless ``dtype`` is given (as PyTorch).

    >>> hf.randint_like(hf.zeros(2, 3), 5).shape
    (2, 3)
    """
    if high is None:
        low, high = 0, low
    shape, dt, dev = _like(input, dtype, device)
    integral = dt if dt.category == int64.category else int64
    draw = apply(K.randint, low=int(low), high=int(high),
                 shape=_fixed_shape("randint_like", shape), dtype=integral, device=dev)
    return _grad(draw if integral is dt else draw.astype(dt), requires_grad)
