"""Math composites with PyTorch's names: ``lerp addcmul addcdiv logaddexp hypot fmod diff
repeat_interleave meshgrid``, and the random ``bernoulli``/``normal`` on the registry's random
ops (seeded by ``hf.manual_seed``). Built from primitives and other composites, so they need
no gradient rules and run in eager and static code alike.
"""
from __future__ import annotations

import warnings

from ..dtypes import bool_, result_type
from . import composite as C
from . import creation as K
from . import elementwise as E
from . import indexing as I
from .factories import _creation, _like, drawing
from .infer import normalize_dim
from .registry import TensorLike, apply

__all__ = ["lerp", "addcmul", "addcdiv", "logaddexp", "hypot", "fmod", "diff",
           "repeat_interleave", "meshgrid", "bernoulli", "normal", "div", "true_divide"]


def _same_dtype(op: str, **tensors) -> None:
    metas = [(k, t) for k, t in tensors.items() if isinstance(t, TensorLike)]
    for name, t in metas[1:]:
        if t.dtype is not metas[0][1].dtype:
            raise TypeError(f"{op}: expected {name} to have dtype {metas[0][1].dtype} (that of "
                            f"{metas[0][0]}), got {t.dtype}")


def lerp(input, end, weight):  # noqa: A002
    """``input + weight * (end - input)``, computed as PyTorch does (from ``end`` for
    ``weight >= 0.5``, so ``weight == 1`` gives ``end`` exactly).

    >>> hf.lerp(hf.tensor([1.0, 2.0]), hf.tensor([3.0, 5.0]), 0.5).tolist()
    [2.0, 3.5]
    """
    _same_dtype("lerp", input=input, end=end, weight=weight)
    span = end - input
    low = input + weight * span
    high = end - span * (1 - weight)
    if isinstance(weight, TensorLike):
        return apply(E.where, apply(E.lt, apply(E.abs_, weight), 0.5), low, high)
    return low if abs(weight) < 0.5 else high


def scaled_other(op: str, input, other, alpha):  # noqa: A002
    """``alpha * other`` for ``add``/``sub``(``_``) with ``alpha``, in the dtype ``input`` and
    ``other`` promote to (a float ``alpha`` keeps float16: ``other`` is cast first, so an integer
    ``other`` does not become float32); a float ``alpha`` with an integral result is refused,
    as PyTorch refuses it."""
    if alpha == 1 and not isinstance(alpha, float):
        return other
    dtype = result_type(input, other)
    if isinstance(alpha, float) and not dtype.is_floating_point:
        raise TypeError(f"{op}: alpha={alpha!r} is a float but the result dtype {dtype} is "
                        "integral; pass an integer alpha or cast the tensors first")
    if alpha == 1:
        return other
    if isinstance(other, TensorLike) and other.dtype is not dtype:
        other = apply(E.cast, other, dtype=dtype)
    return other * alpha


def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 * tensor2``."""
    product = tensor1 * tensor2
    return input + (product if value == 1 else value * product)


def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 / tensor2`` (floating point only, as PyTorch)."""
    for name, t in (("tensor1", tensor1), ("tensor2", tensor2)):
        if isinstance(t, TensorLike) and not t.dtype.is_floating_point:
            raise TypeError(f"addcdiv: integer division is not supported ({name} has dtype "
                            f"{t.dtype}); use input + value * tensor1 / tensor2")
    quotient = tensor1 / tensor2
    return input + (quotient if value == 1 else value * quotient)


def _bool_as_number(x, other):
    """A bool operand as the number type it meets ``other`` in (these composites subtract it,
    which the ``-`` operator refuses for bools, though PyTorch's functions take them)."""
    if x.__class__ is not bool and not (isinstance(x, TensorLike) and x.dtype is bool_):
        return x
    dt = result_type(x, other)
    if dt is bool_:  # bools on both sides: left to the op, which refuses them as PyTorch
        return x
    return int(x) if x.__class__ is bool else apply(E.cast, x, dtype=dt)


def logaddexp(input, other):  # noqa: A002
    """``log(exp(input) + exp(other))`` without overflow: ``max + log1p(exp(-|a - b|))``;
    two equal infinities give themselves.

    >>> round(hf.logaddexp(hf.tensor(1000.0), hf.tensor(1000.0)).item(), 3)
    1000.693
    """
    a, b = _bool_as_number(input, other), _bool_as_number(other, input)
    top = apply(E.maximum, a, b)
    spread = apply(E.neg, apply(E.abs_, a - b))
    value = top + apply(E.log1p, apply(E.exp, spread))
    # equal infinities: a - b is NaN there; finite ties stay on the formula, whose gradient
    # splits evenly (maximum's tie rule), as PyTorch's 0.5 each
    same_infinity = apply(E.bitwise_and, apply(E.eq, a, b), apply(E.isinf, top))
    return apply(E.where, same_infinity, top, value)


def hypot(input, other):  # noqa: A002
    """``sqrt(input**2 + other**2)`` without overflow or underflow of the squares (scaled by
    the larger magnitude)."""
    a, b = apply(E.abs_, input), apply(E.abs_, other)
    big, small = apply(E.maximum, a, b), apply(E.minimum, a, b)
    zero = apply(E.eq, big, 0)
    ratio = small / apply(E.where, zero, 1.0, big)
    result = big * apply(E.sqrt, 1 + ratio * ratio)
    return apply(E.where, apply(E.isinf, big), big, result)


def fmod(input, other):  # noqa: A002
    """C's ``fmod``: the remainder of ``input / other`` with the sign of ``input`` (``%`` takes
    the divisor's); an integer divisor of zero raises as ``%`` does.

    >>> hf.fmod(hf.tensor([-3.0, 3.0]), 2.0).tolist()
    [-1.0, 1.0]
    """
    if isinstance(other, int) and other == 0 and isinstance(input, TensorLike) and \
            not input.dtype.is_floating_point:
        raise E.IntegerDivisionByZeroError("fmod: integer division by zero (the divisor is 0)")
    other = _bool_as_number(other, input)  # fmod(x, True) is fmod(x, 1), as in PyTorch
    r = apply(E.remainder, input, other)
    # remainder and fmod differ by one divisor where the remainder's sign is not the input's
    negative = input < 0 if isinstance(input, TensorLike) else input < 0
    moved = apply(E.bitwise_and, apply(E.ne, r, 0), apply(E.ne, apply(E.lt, r, 0), negative))
    return apply(E.where, moved, r - other, r)


def div(input, other, *, rounding_mode=None):  # noqa: A002
    """``input / other`` with broadcasting: true division (integers give floats) for
    ``rounding_mode=None``, the quotient rounded toward zero for ``'trunc'`` or down for
    ``'floor'`` (integers then stay integers; an integer divisor of zero raises).

    >>> hf.div(hf.tensor([-7, 7]), 2, rounding_mode='trunc').tolist()
    [-3, 3]
    """
    if rounding_mode is None:
        return apply(E.div, input, other)
    if rounding_mode not in ("trunc", "floor"):
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got "
                         f"{rounding_mode!r}")
    if result_type(input, other).is_floating_point:
        if rounding_mode == "floor":
            return apply(E.floor_divide, input, other)
        return apply(E.trunc, apply(E.div, input, other))
    floor = apply(E.floor_divide, input, other)
    if rounding_mode == "floor":
        return floor
    # a negative quotient that is not whole: floor went one below the truncated one
    inexact = apply(E.bitwise_and, apply(E.ne, floor * other, input), apply(E.lt, floor, 0))
    return apply(E.where, inexact, floor + 1, floor)


def true_divide(input, other):  # noqa: A002
    """``input / other`` (true division), PyTorch's alias of ``div``."""
    return apply(E.div, input, other)


def diff(input, n: int = 1, dim: int = -1, prepend=None, append=None):  # noqa: A002
    """The ``n``-th forward difference along ``dim`` (``prepend``/``append`` joined first);
    bools give ``!=`` (a xor), as PyTorch.

    >>> hf.diff(hf.tensor([1, 4, 9, 16])).tolist()
    [3, 5, 7]
    """
    x = input
    if x.ndim == 0:
        raise ValueError("diff: expects a tensor of at least 1 dim, got a 0-d tensor")
    d = normalize_dim("diff", dim, x.ndim)
    if prepend is not None or append is not None:
        x = C.cat([t for t in (prepend, x, append) if t is not None], d)
    for _ in range(n):
        size = x.shape[d]
        if size == -1:
            raise ValueError(f"diff: the size of dim {d} is only known when the program runs")
        if size == 0:
            break
        later, earlier = I.narrow(x, d, 1, size - 1), I.narrow(x, d, 0, size - 1)
        x = apply(E.ne, later, earlier) if x.dtype is bool_ else later - earlier
    return x


def repeat_interleave(input, repeats: int, dim: int | None = None, *,  # noqa: A002
                      output_size: int | None = None):
    """Each element repeated ``repeats`` times along ``dim`` (None: over the flattened
    tensor), next to itself.

    >>> hf.repeat_interleave(hf.tensor([1, 2]), 2).tolist()
    [1, 1, 2, 2]
    """
    if isinstance(repeats, TensorLike):
        if repeats.ndim == 0 or tuple(repeats.shape) == (1,):
            repeats = int(repeats.reshape(()).item())
        else:
            return _repeat_each(input, repeats, dim)
    if not isinstance(repeats, int) or repeats < 0:
        raise ValueError(f"repeat_interleave: repeats must be a non-negative int, got "
                         f"{repeats!r}")
    x = C.flatten(input) if dim is None else input
    d = 0 if dim is None else normalize_dim("repeat_interleave", dim, x.ndim)
    if x.ndim == 0:
        x = C.reshape(x, 1)
    if -1 in x.shape:
        raise ValueError(f"repeat_interleave: the shape {tuple(x.shape)} is only known when "
                         "the program runs")
    shape = tuple(x.shape)
    wide = C.broadcast_to(C.unsqueeze(x, d + 1), shape[:d + 1] + (repeats,) + shape[d + 1:])
    return C.reshape(wide, shape[:d] + (shape[d] * repeats,) + shape[d + 1:])


def _repeat_each(input, repeats, dim):  # noqa: A002
    """``repeat_interleave`` with a 1-d tensor of per-element repeats: element ``i`` ``repeats[i]``
    times; the result's size is their sum, so their values must be known (eager, or constants
    of a program), as PyTorch's output_size-less form needs them. An ``index_select`` by the
    repeated positions: differentiable."""
    x = C.flatten(input) if dim is None else input
    d = 0 if dim is None else normalize_dim("repeat_interleave", dim, x.ndim)
    if repeats.ndim != 1 or repeats.dtype.category != 1:
        raise TypeError(f"repeat_interleave: repeats must be an int or a 1-d integer tensor, "
                        f"got shape {tuple(repeats.shape)} and dtype {repeats.dtype}")
    values = getattr(repeats, "_data", None)  # (an eager tensor's array; a program value has none)
    if values is None:  # a value the program computes: the result's size is not known
        raise ValueError("repeat_interleave: per-element repeats computed by the program make "
                         "the result's size known only when it runs; give an int, or repeats "
                         "known while building it")
    import numpy as np
    counts = np.asarray(values.get() if hasattr(values, "get") else values)
    if counts.shape[0] != x.shape[d]:
        raise ValueError(f"repeat_interleave: {counts.shape[0]} repeats for dim {d} of size "
                         f"{x.shape[d]} (shape {tuple(x.shape)})")
    if (counts < 0).any():
        raise ValueError(f"repeat_interleave: repeats must be non-negative, got "
                         f"{counts.tolist()}")
    positions = np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts)
    spec = (("slice", None, None, None),) * d + (("tensor",),)
    return apply(I.getitem, x, positions, spec=spec)  # (the array becomes the index tensor)


def meshgrid(*tensors, indexing: str | None = None) -> tuple:
    """Coordinate grids of the 1-d (or 0-d) ``tensors``: ``indexing='ij'`` gives shape
    ``(len0, len1, ...)``, ``'xy'`` swaps the first two. Without ``indexing``, 'ij' with a
    UserWarning, as PyTorch 2.13.

    >>> [t.shape for t in hf.meshgrid(hf.arange(2), hf.arange(3), indexing='xy')]
    [(3, 2), (3, 2)]
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("meshgrid: in an upcoming release, it will be required to pass the "
                      "indexing argument; 'ij' is used", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    if not tensors:
        raise ValueError("meshgrid: expects at least one tensor")
    for k, t in enumerate(tensors):
        if t.ndim > 1:
            raise ValueError(f"meshgrid: expects 0-d or 1-d tensors, tensor {k} has shape "
                             f"{tuple(t.shape)}")
        if t.dtype is not tensors[0].dtype:
            raise TypeError(f"meshgrid: expects tensors of one dtype, got {tensors[0].dtype} "
                            f"and {t.dtype}")
    vectors = [C.reshape(t, -1) for t in tensors]
    shape = tuple(v.shape[0] for v in vectors)
    grids = []
    for k, v in enumerate(vectors):
        view = (1,) * k + (shape[k],) + (1,) * (len(shape) - k - 1)
        grids.append(C.broadcast_to(C.reshape(v, *view), shape))
    if indexing == "xy" and len(grids) > 1:
        grids = [C.transpose(g, 0, 1) for g in grids]
    return tuple(grids)


def bernoulli(input, p=None, *, generator=None):  # noqa: A002
    """0/1 draws, 1 with probability ``input`` (or the float ``p``), of ``input``'s dtype and
    shape, from the generator ``hf.manual_seed`` seeds (or ``generator``, an
    ``hf.Generator``)."""
    if not input.dtype.is_floating_point:
        raise TypeError(f"bernoulli: expects a floating point tensor, got dtype {input.dtype}")
    if p is not None:
        input = apply(E.where, apply(E.isnan, input), p, apply(E.mul, input, 0) + p)
    with drawing(generator, input.device, "bernoulli"):
        return apply(K.bernoulli, input)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None):
    """Normal draws with ``mean`` and ``std`` (tensors broadcast together, or numbers with
    ``size``), as ``torch.normal``; seeded by ``hf.manual_seed`` (or from ``generator``, an
    ``hf.Generator``).

    >>> hf.normal(hf.zeros(3), 1.0).shape
    (3,)
    """
    tensors = [t for t in (mean, std) if isinstance(t, TensorLike)]
    if not tensors:
        if size is None:
            raise TypeError("normal: with a float mean and std, give size")
        from .factories import normal as _numbers  # noqa: PLC0415
        with drawing(generator, device, "normal"):
            return _numbers(mean, std, size, dtype=dtype, device=device)
    if isinstance(std, (int, float)) and std < 0:
        raise ValueError(f"normal: std must be >= 0, got {std}")
    like = tensors[0] if len(tensors) == 1 else mean + std
    if not like.dtype.is_floating_point:
        raise TypeError(f"normal: expects floating point mean/std, got dtype {like.dtype}")
    shape, dt, dev = _like(like, None, None)
    with drawing(generator, dev, "normal"):
        draw = _creation(K.normal, like, shape, mean=0.0, std=1.0, dtype=dt, device=dev)
    return mean + std * draw
