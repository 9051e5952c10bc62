"""More of PyTorch's names, composed from primitives and other composites (so they need no
gradient rules and run in eager and static code alike): the fused products ``addmm baddbmm
addmv addr addbmm``, ``tensordot``, ``cross``, ``logit xlogy``, ``aminmax``, ``nanmean``,
``rot90``, ``index_add``, ``take_along_dim``, ``tensor_split``, ``argwhere`` and the index
factories ``tril_indices triu_indices``.
"""
from __future__ import annotations

import warnings
from collections import namedtuple

from ..dtypes import as_dtype, bool_, get_default_dtype, int64, result_type
from . import composite as C
from . import composite_extra as X
from . import elementwise as E
from .factories import arange, full, full_like
from .infer import broadcast_shapes, normalize_dim
from .registry import TensorLike, apply

__all__ = ["addmm", "baddbmm", "logit", "xlogy", "aminmax", "rot90", "index_add", "argwhere",
           "tril_indices", "triu_indices", "AminmaxResult", "addmv", "addr", "addbmm",
           "take_along_dim", "tensordot", "tensor_split", "nanmean", "cross"]

AminmaxResult = namedtuple("aminmax", ["min", "max"])


def _scaled_product(op: str, input, product, beta, alpha):  # noqa: A002
    """``beta * input + alpha * product``; ``input`` must broadcast to the product's shape
    and is ignored (NaN and inf too) where ``beta`` is 0, as PyTorch; integer tensors take
    ``beta`` and ``alpha`` truncated to ints, as PyTorch's."""
    if input.dtype is not product.dtype:
        raise TypeError(f"{op}: input and the matrices must have the same dtype, got "
                        f"{input.dtype} and {product.dtype}")
    if not product.dtype.is_floating_point:  # as PyTorch: integer tensors truncate them
        beta, alpha = int(beta), int(alpha)
    shape = tuple(product.shape)
    joint = broadcast_shapes(op, tuple(input.shape), shape)
    if len(joint) != len(shape) or any(a != b and -1 not in (a, b) for a, b in zip(joint, shape)):
        raise ValueError(f"{op}: input of shape {tuple(input.shape)} does not broadcast to the "
                         f"product's shape {shape}")
    if alpha != 1:
        product = product * alpha
    if beta == 0:  # input ignored, NaN and inf too, but differentiated (zeros), as PyTorch
        return product + apply(E.where, full_like(input, False, dtype=bool_), input, 0)
    return product + (input if beta == 1 else input * beta)


def _same_dtype(op: str, a, b) -> None:
    if a.dtype is not b.dtype:
        raise TypeError(f"{op}: the matrices must have the same dtype, got {a.dtype} and "
                        f"{b.dtype}")


def addmm(input, mat1, mat2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * (mat1 @ mat2)`` for matrices ``mat1`` ``(n, m)`` and ``mat2``
    ``(m, p)``; ``input`` broadcasts to ``(n, p)``.

    >>> hf.addmm(hf.ones(2), hf.eye(2), hf.ones(2, 2), beta=0.5).tolist()
    [[1.5, 1.5], [1.5, 1.5]]
    """
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise ValueError(f"addmm: mat1 and mat2 must be matrices, got shapes "
                         f"{tuple(mat1.shape)} and {tuple(mat2.shape)}")
    _same_dtype("addmm", mat1, mat2)
    return _scaled_product("addmm", input, C.mm(mat1, mat2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * (batch1 @ batch2)`` for batches of matrices ``batch1``
    ``(b, n, m)`` and ``batch2`` ``(b, m, p)``; ``input`` broadcasts to ``(b, n, p)``."""
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise ValueError(f"baddbmm: batch1 and batch2 must be 3-d, got shapes "
                         f"{tuple(batch1.shape)} and {tuple(batch2.shape)}")
    _same_dtype("baddbmm", batch1, batch2)
    return _scaled_product("baddbmm", input, C.bmm(batch1, batch2), beta, alpha)


def _floating(x):
    return x if x.dtype.is_floating_point else x.astype(get_default_dtype())


def logit(input, eps: float | None = None):  # noqa: A002
    """``log(x / (1 - x))``, with ``x`` clamped to ``[eps, 1 - eps]`` first when ``eps`` is
    given (the gradient is then 0 outside that range); integers compute in the default float
    dtype.

    >>> round(hf.logit(hf.tensor([0.75])).item(), 4)
    1.0986
    """
    x = _floating(input)
    if eps is not None:
        x = C.clamp(x, min=eps, max=1.0 - eps)
    return apply(E.log, x / (1 - x))


def xlogy(input, other):  # noqa: A002
    """``input * log(other)``, 0 where ``input`` is 0 (unless ``other`` is NaN); either may
    be a number. The result is floating point.

    >>> hf.xlogy(hf.tensor([0.0, 2.0]), hf.tensor([0.0, 1.0])).tolist()
    [0.0, 0.0]
    """
    if not isinstance(input, TensorLike) and not isinstance(other, TensorLike):
        raise TypeError("xlogy: input or other must be a tensor")
    dtype = result_type(input, other)
    if not dtype.is_floating_point:
        dtype = get_default_dtype()
    like = input if isinstance(input, TensorLike) else other
    x, y = (v.astype(dtype) if isinstance(v, TensorLike) else
            full((), v, dtype=dtype, device=like.device) for v in (input, other))
    zero = apply(E.bitwise_and, apply(E.eq, x, 0), apply(E.eq, y, y))  # (y == y: not NaN)
    return apply(E.where, zero, 0.0, x * apply(E.log, y))


def aminmax(input, *, dim: int | None = None, keepdim: bool = False):  # noqa: A002
    """``(min, max)`` over ``dim`` (None: all elements), a named tuple as PyTorch's.

    >>> hf.aminmax(hf.tensor([3, 1, 2])).max.item()
    3
    """
    if dim is None and input.numel() == 0:
        raise ValueError("aminmax: cannot reduce an empty tensor without a dim")
    return AminmaxResult(input.amin(dim, keepdim), input.amax(dim, keepdim))


def rot90(input, k: int = 1, dims=(0, 1)):  # noqa: A002
    """``input`` rotated by 90 degrees ``k`` times in the plane of ``dims``, from the first
    dim towards the second.

    >>> hf.rot90(hf.tensor([[1, 2], [3, 4]])).tolist()
    [[2, 4], [1, 3]]
    """
    x = input
    dims = tuple(dims)
    if len(dims) != 2:
        raise ValueError(f"rot90: expects 2 rotation dims, got {dims}")
    if x.ndim < 2:
        raise ValueError(f"rot90: expects a tensor of at least 2 dims, got shape "
                         f"{tuple(x.shape)}")
    d0, d1 = (normalize_dim("rot90", d, x.ndim) for d in dims)
    if d0 == d1:
        raise ValueError(f"rot90: the rotation dims must differ, got {dims}")
    k %= 4
    if k == 1:
        return C.transpose(X.flip(x, (d1,)), d0, d1)
    if k == 2:
        return X.flip(x, (d0, d1))
    if k == 3:
        return C.transpose(X.flip(x, (d0,)), d0, d1)
    return x.clone()


def index_add(input, dim: int, index, source, *, alpha=1):  # noqa: A002
    """A copy of ``input`` with ``alpha * source`` added at the positions ``index`` (1-d)
    names along ``dim``: ``out[index[i]] += alpha * source[i]`` for ``dim=0`` (repeated
    indices add up).

    >>> hf.zeros(3).index_add(0, hf.tensor([0, 0, 2]), hf.ones(3)).tolist()
    [2.0, 0.0, 1.0]
    """
    x = input
    d = normalize_dim("index_add", dim, x.ndim)
    if not isinstance(index, TensorLike) or index.ndim > 1 or \
            index.dtype.is_floating_point or index.dtype is as_dtype("bool"):
        raise TypeError(f"index_add: index must be a 0-d or 1-d integer tensor, got "
                        f"{index.dtype if isinstance(index, TensorLike) else type(index)}")
    if source.dtype is not x.dtype:
        raise TypeError(f"index_add: input ({x.dtype}) and source ({source.dtype}) must have "
                        "the same dtype")
    count = index.shape[0] if index.ndim else 1
    expected = tuple(count if i == d else n for i, n in enumerate(x.shape))
    if x.ndim == 0:
        expected = () if source.ndim == 0 else (count,)
    if source.ndim != max(x.ndim, 0) and not (x.ndim == 0 and source.ndim <= 1) or any(
            a != b and -1 not in (a, b) for a, b in zip(source.shape, expected)):
        raise ValueError(f"index_add: source of shape {tuple(source.shape)} must have the "
                         f"shape {expected} (input {tuple(x.shape)} with dim {dim} indexed by "
                         f"{count} indices)")
    if x.ndim == 0:
        return x + C.sum(source) * alpha
    positions = C.reshape(index, *[count if i == d else 1 for i in range(x.ndim)])
    positions = C.broadcast_to(positions, tuple(source.shape))
    return X.scatter_add(x, d, positions, source if alpha == 1 else source * alpha)


def argwhere(input):  # noqa: A002
    """The indices of the nonzero elements, one row each: ``nonzero(input)``."""
    return C.nonzero(input)


def _triangle_indices(op: str, row: int, col: int, offset: int, dtype, device, lower: bool):
    for name, v in (("row", row), ("col", col)):
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"{op}: {name} must be a non-negative int, got {v!r}")
    r = C.reshape(arange(row, dtype=int64, device=device), row, 1)
    c = C.reshape(arange(col, dtype=int64, device=device), 1, col)
    inside = apply(E.le, c - r, offset) if lower else apply(E.ge, c - r, offset)
    indices = C.transpose(C.nonzero(inside), 0, 1)
    dt = as_dtype(dtype)
    return indices if dt is int64 else indices.astype(dt)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=int64, device=None):
    """The ``(2, N)`` row and column indices of the lower triangle of a ``row x col`` matrix
    (on and below diagonal ``offset``), in row-major order.

    >>> hf.tril_indices(2, 2).tolist()
    [[0, 1, 1], [0, 0, 1]]
    """
    return _triangle_indices("tril_indices", row, col, offset, dtype, device, True)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=int64, device=None):
    """The ``(2, N)`` indices of the upper triangle (on and above diagonal ``offset``)."""
    return _triangle_indices("triu_indices", row, col, offset, dtype, device, False)


def addmv(input, mat, vec, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * (mat @ vec)`` for a matrix ``(n, m)`` and a vector ``(m,)``."""
    if mat.ndim != 2 or vec.ndim != 1:
        raise ValueError(f"addmv: expects a matrix and a vector, got shapes {tuple(mat.shape)} "
                         f"and {tuple(vec.shape)}")
    _same_dtype("addmv", mat, vec)
    return _scaled_product("addmv", input, C.matmul(mat, vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * outer(vec1, vec2)``."""
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise ValueError(f"addr: expects two vectors, got shapes {tuple(vec1.shape)} and "
                         f"{tuple(vec2.shape)}")
    _same_dtype("addr", vec1, vec2)
    return _scaled_product("addr", input, C.outer(vec1, vec2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])`` for batches ``(b, n, m)`` and
    ``(b, m, p)``; ``input`` broadcasts to ``(n, p)``."""
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise ValueError(f"addbmm: batch1 and batch2 must be 3-d, got shapes "
                         f"{tuple(batch1.shape)} and {tuple(batch2.shape)}")
    _same_dtype("addbmm", batch1, batch2)
    return _scaled_product("addbmm", input, C.sum(C.bmm(batch1, batch2), 0), beta, alpha)


def take_along_dim(input, indices, dim: int | None = None):  # noqa: A002
    """``input``'s values at ``indices`` along ``dim`` (the other dims broadcast between the
    two); without ``dim``, at the flat positions ``indices`` of the flattened input.

    >>> hf.take_along_dim(hf.tensor([[10, 20], [30, 40]]), hf.tensor([[1], [0]]), 1).tolist()
    [[20], [30]]
    """
    x = input
    if dim is None:
        return C.gather(C.reshape(x, -1), 0, C.reshape(indices, -1))
    if x.ndim != indices.ndim:
        raise ValueError(f"take_along_dim: input and indices must have the same number of "
                         f"dims, got shapes {tuple(x.shape)} and {tuple(indices.shape)}")
    d = normalize_dim("take_along_dim", dim, x.ndim)
    rest = broadcast_shapes("take_along_dim", tuple(n for i, n in enumerate(x.shape) if i != d),
                            tuple(n for i, n in enumerate(indices.shape) if i != d))
    rest = list(rest)

    def spread(t):
        shape = tuple(rest[:d]) + (t.shape[d],) + tuple(rest[d:])
        return t if tuple(t.shape) == shape else C.broadcast_to(t, shape)

    return C.gather(spread(x), d, spread(indices))


def tensordot(a, b, dims=2):
    """The sum of products of ``a`` and ``b`` over ``dims``: an int ``n`` (the last ``n`` dims
    of ``a`` with the first ``n`` of ``b``) or a pair of dim lists.

    >>> hf.tensordot(hf.ones(2, 3), hf.ones(3, 4), dims=1).shape
    (2, 4)
    """
    if isinstance(dims, int):
        if dims < 0:
            raise ValueError(f"tensordot: dims must be non-negative, got {dims}")
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(dims_a) != len(dims_b):
        raise ValueError(f"tensordot: both sides must contract as many dims, got {dims_a} and "
                         f"{dims_b}")
    dims_a = [normalize_dim("tensordot", d, a.ndim) for d in dims_a]
    dims_b = [normalize_dim("tensordot", d, b.ndim) for d in dims_b]
    for i, j in zip(dims_a, dims_b):
        if a.shape[i] != b.shape[j] and -1 not in (a.shape[i], b.shape[j]):
            raise ValueError(f"tensordot: contracted dims differ in size: dim {i} of "
                             f"{tuple(a.shape)} and dim {j} of {tuple(b.shape)}")
    if a.ndim + b.ndim - len(dims_a) > 52:
        raise ValueError("tensordot: too many dims")
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    sub_a = [next(letters) for _ in range(a.ndim)]
    sub_b = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(dims_a, dims_b):
        sub_b[j] = sub_a[i]
    kept = [s for i, s in enumerate(sub_a) if i not in dims_a] + \
        [s for j, s in enumerate(sub_b) if j not in dims_b]
    return C.einsum(f"{''.join(sub_a)},{''.join(sub_b)}->{''.join(kept)}", a, b)


def tensor_split(input, indices_or_sections, dim: int = 0):  # noqa: A002
    """``input`` split along ``dim`` into views: ``n`` nearly equal pieces (the first
    ``size % n`` one longer), or pieces between the given indices, as numpy's
    ``array_split``.

    >>> [t.tolist() for t in hf.tensor_split(hf.arange(5), 2)]
    [[0, 1, 2], [3, 4]]
    """
    x = input
    d = normalize_dim("tensor_split", dim, x.ndim)
    n = x.shape[d]
    if n == -1:
        raise ValueError(f"tensor_split: dim {d} of the shape {tuple(x.shape)} is only known "
                         "when the program runs, so the pieces are not")
    split = indices_or_sections
    if isinstance(split, TensorLike):
        split = split.tolist()
    if isinstance(split, int):
        if split <= 0:
            raise ValueError(f"tensor_split: the number of sections must be positive, got "
                             f"{split}")
        size, extra = divmod(n, split)
        bounds, start = [], 0
        for k in range(split):
            stop = start + size + (1 if k < extra else 0)
            bounds.append((start, stop))
            start = stop
    else:
        points = [min(max(p + n if p < 0 else p, 0), n) for p in split]
        bounds = list(zip([0] + points, points + [n]))
    return tuple(C.narrow(x, d, lo, max(hi - lo, 0)) for lo, hi in bounds)


def nanmean(input, dim=None, keepdim: bool = False, *, dtype=None):  # noqa: A002
    """The mean of the non-NaN elements over ``dim`` (None: all); NaN where all are NaN.

    >>> hf.nanmean(hf.tensor([1.0, float("nan"), 3.0])).item()
    2.0
    """
    x = input if dtype is None else input.astype(dtype)
    if not x.dtype.is_floating_point:
        raise TypeError(f"nanmean: expects a floating-point input, got {x.dtype}")
    present = apply(E.eq, x, x)  # (False at NaN)
    total = C.sum(apply(E.where, present, x, 0.0), dim, keepdim)
    return total / C.sum(present.astype(x.dtype), dim, keepdim)


def cross(input, other, dim: int | None = None):  # noqa: A002
    """The cross product of 3-vectors along ``dim`` (the shapes broadcast); ``dim=None`` takes
    the first dim of size 3, with PyTorch's deprecation warning.

    >>> hf.cross(hf.tensor([1.0, 0.0, 0.0]), hf.tensor([0.0, 1.0, 0.0]), dim=0).tolist()
    [0.0, 0.0, 1.0]
    """
    if input.dtype is not other.dtype:
        raise TypeError(f"cross: input and other must have the same dtype, got {input.dtype} "
                        f"and {other.dtype}")
    if input.ndim != other.ndim:
        raise ValueError(f"cross: input and other must have the same number of dims, got shapes "
                         f"{tuple(input.shape)} and {tuple(other.shape)}")
    shape = broadcast_shapes("cross", tuple(input.shape), tuple(other.shape))
    if dim is None:
        warnings.warn("cross: calling it without dim is deprecated (as in PyTorch); it takes "
                      "the first dim of size 3: pass dim explicitly", UserWarning, stacklevel=2)
        dim = next((i for i, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise ValueError(f"cross: no dim of size 3 in the shape {shape}")
    d = normalize_dim("cross", dim, len(shape))
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise ValueError(f"cross: dim {dim} must have size 3 in both inputs, got shapes "
                         f"{tuple(input.shape)} and {tuple(other.shape)}")
    a, b = (C.broadcast_to(t, shape) if tuple(t.shape) != shape else t for t in (input, other))
    a0, a1, a2 = (C.narrow(a, d, k, 1) for k in range(3))
    b0, b1, b2 = (C.narrow(b, d, k, 1) for k in range(3))
    return C.cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)
