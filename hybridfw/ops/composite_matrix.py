"""Matrix composites with PyTorch's names: ``diagonal trace diag`` and ``norm``. Built from
primitives and other composites (reshape, strided slicing, where, reductions), so they are
differentiable, need no gradient rules and run in eager and static code alike.
"""
from __future__ import annotations

import math

from . import composite as C
from . import composite_extra as X
from . import creation as K
from . import elementwise as E
from .infer import normalize_dim
from .registry import apply

__all__ = ["diagonal", "trace", "diag", "norm"]


def diagonal(input, offset: int = 0, dim1: int = 0, dim2: int = 1):  # noqa: A002
    """The diagonal of the matrices spanned by ``dim1`` and ``dim2`` (``offset`` > 0 above the
    main diagonal, < 0 below), as the result's last dim, those two dims removed (a copy).

    >>> hf.diagonal(hf.arange(6.0).reshape(2, 3), offset=1).tolist()
    [1.0, 5.0]
    """
    x = input
    if x.ndim < 2:
        raise ValueError(f"diagonal: expects a tensor of at least 2 dims, got shape "
                         f"{tuple(x.shape)}")
    d1 = normalize_dim("diagonal", dim1, x.ndim)
    d2 = normalize_dim("diagonal", dim2, x.ndim)
    if d1 == d2:
        raise ValueError(f"diagonal: dim1 ({dim1}) and dim2 ({dim2}) name the same dim")
    X._known("diagonal", x)
    x = X.movedim(x, (d1, d2), (-2, -1))
    rows, cols = x.shape[-2], x.shape[-1]
    # element (i, i + offset) of the row-major (rows, cols) block sits at start + i*(cols+1)
    if offset >= 0:
        length, start = max(0, min(rows, cols - offset)), offset
    else:
        length, start = max(0, min(rows + offset, cols)), -offset * cols
    flat = C.reshape(x, *x.shape[:-2], rows * cols)
    if length == 0:
        return flat[..., 0:0]
    return flat[..., start:start + (length - 1) * (cols + 1) + 1:cols + 1]


_diagonal = diagonal  # diag's argument of that name, as PyTorch's, hides the function


def trace(input):  # noqa: A002
    """The sum of the main diagonal of a matrix (integers sum to int64, as PyTorch).

    >>> hf.trace(hf.tensor([[1, 2], [3, 4]])).item()
    5
    """
    if input.ndim != 2:
        raise ValueError(f"trace: expects a matrix (2 dims), got shape {tuple(input.shape)}")
    return C.sum(diagonal(input))


def diag(input, diagonal: int = 0):  # noqa: A002
    """A vector's square matrix with it on the ``diagonal``-th diagonal (zeros elsewhere), or
    a matrix's ``diagonal``-th diagonal as a vector.

    >>> hf.diag(hf.tensor([1, 2]), 1).tolist()
    [[0, 1, 0], [0, 0, 2], [0, 0, 0]]
    """
    x = input
    if x.ndim == 2:
        return _diagonal(x, diagonal)
    if x.ndim != 1:
        raise ValueError(f"diag: expects a vector or a matrix, got shape {tuple(x.shape)}")
    X._known("diag", x)
    k = abs(diagonal)
    n = x.shape[0] + k
    if k:
        pad = apply(K.full, shape=(k,), value=0, dtype=x.dtype, device=str(x.device))
        x = C.cat([x, pad])
    # out[i, j] = v[i] on j - i == diagonal >= 0 (row i holds v[i]); v[j] for diagonal < 0
    line = C.reshape(x, n, 1) if diagonal >= 0 else C.reshape(x, 1, n)
    r = C.reshape(X._positions(x, n), n, 1)
    c = C.reshape(X._positions(x, n), 1, n)
    on = apply(E.eq, c - r, diagonal)
    return C.masked_fill(C.broadcast_to(line, (n, n)), apply(E.bitwise_not, on), 0)


def _dims(x, dim):
    if dim is None:
        return None
    return (dim,) if isinstance(dim, int) else tuple(dim)


@C.half_in_float32
def norm(input, p="fro", dim=None, keepdim: bool = False, dtype=None):  # noqa: A002
    """The vector ``p``-norm over ``dim`` (None: all elements), as ``torch.norm``: ``'fro'``
    and 2 the square root of the sum of squares, ``inf``/``-inf`` the largest/smallest
    absolute value, 0 the number of non-zeros, else ``sum(|x|**p) ** (1/p)``.

    >>> hf.norm(hf.tensor([3.0, -4.0])).item()
    5.0
    """
    x = input
    if not x.dtype.is_floating_point:
        raise TypeError(f"norm: input dtype should be floating point, got {x.dtype}")
    if dtype is not None:
        x = x.astype(dtype)
    dims = _dims(x, dim)
    if p == "fro":
        if dims is not None and len(dims) > 2:
            raise ValueError(f"norm: the Frobenius norm takes at most 2 dims, got dim={dim}")
        p = 2
    elif isinstance(p, str):
        raise ValueError(f"norm: p must be 'fro' or a number, got {p!r} ('nuc' is not "
                         "supported)")
    a = apply(E.abs_, x)
    if p == math.inf:
        return a.amax(dims, keepdim)
    if p == -math.inf:
        return a.amin(dims, keepdim)
    if p == 0:
        return C.sum(apply(E.cast, apply(E.ne, x, 0), dtype=x.dtype), dims, keepdim)
    if p == 1:
        return C.sum(a, dims, keepdim)
    if p == 2:
        return _root_or_zero(C.sum(x * x, dims, keepdim), lambda s: apply(E.sqrt, s))
    return _root_or_zero(C.sum(apply(E.pow_, a, float(p)), dims, keepdim),
                         lambda s: apply(E.pow_, s, 1.0 / p))


def _root_or_zero(total, root):
    """``root(total)``, whose gradient at a zero total is 0 (PyTorch's subgradient of a norm at
    0), not the NaN of inf * 0: the root reads 1 where the total is 0, and ``where`` passes
    no gradient to the branch it did not pick."""
    nonzero = apply(E.ne, total, 0)
    return apply(E.where, nonzero, root(apply(E.where, nonzero, total, 1.0)), 0.0)
