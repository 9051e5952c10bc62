"""Distances with PyTorch's names: ``cdist cosine_similarity pairwise_distance``. Built from
primitives and other composites (broadcast differences, ``norm``, ``matmul``), so they are
differentiable, need no gradient rules and run in eager and static code alike.
"""
from __future__ import annotations

from ..dtypes import get_default_dtype, result_type
from . import composite as C
from . import composite_matrix as M
from .infer import broadcast_shapes, normalize_dim

__all__ = ["cdist", "cosine_similarity", "pairwise_distance"]

_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                "donot_use_mm_for_euclid_dist")


def cdist(x1, x2, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary"):
    """The ``p``-norm distance between each row of ``x1`` ``(B.., P, M)`` and each row of
    ``x2`` ``(B.., R, M)``: a ``(B.., P, R)`` tensor (batch dims broadcast). For ``p=2`` it
    uses matrix products (``|a|^2 + |b|^2 - 2 a.b``) where PyTorch does: when ``P`` or ``R``
    exceeds 25 under the default ``compute_mode``, always with ``'use_mm_for_euclid_dist'``.

    >>> hf.cdist(hf.tensor([[0.0, 0.0]]), hf.tensor([[3.0, 4.0], [0.0, 1.0]])).tolist()
    [[5.0, 1.0]]
    """
    for name, x in (("x1", x1), ("x2", x2)):
        if not x.dtype.is_floating_point:
            raise TypeError(f"cdist: only floating-point dtypes are supported, {name} has "
                            f"dtype {x.dtype}")
        if x.ndim < 2:
            raise ValueError(f"cdist: expects tensors of at least 2 dims, {name} has shape "
                             f"{tuple(x.shape)}")
    if x1.dtype is not x2.dtype:
        raise TypeError(f"cdist: x1 and x2 must have the same dtype, got {x1.dtype} and "
                        f"{x2.dtype}")
    if x1.shape[-1] != x2.shape[-1] and -1 not in (x1.shape[-1], x2.shape[-1]):
        raise ValueError(f"cdist: x1 and x2 must have the same number of columns, got shapes "
                         f"{tuple(x1.shape)} and {tuple(x2.shape)}")
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"cdist: compute_mode must be one of {_CDIST_MODES}, got "
                         f"{compute_mode!r}")
    if not p >= 0:
        raise ValueError(f"cdist: p must be non-negative, got {p}")
    broadcast_shapes("cdist", tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    rows, cols = x1.shape[-2], x2.shape[-2]
    by_products = p == 2 and (compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == _CDIST_MODES[0] and (rows > 25 or cols > 25 or -1 in (rows, cols))))
    if by_products:
        squares = (C.sum(x1 * x1, -1, keepdim=True)
                   + C.transpose(C.sum(x2 * x2, -1, keepdim=True), -1, -2)
                   - 2 * C.matmul(x1, C.transpose(x2, -1, -2)))
        return C.sqrt_of_variance(C.clamp(squares, min=0.0))
    return M.norm(C.unsqueeze(x1, -2) - C.unsqueeze(x2, -3), p, -1)


def _floating_common(op: str, x1, x2):
    dtype = result_type(x1, x2)
    if not dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating-point common dtype, got {dtype} (from "
                        f"{x1.dtype} and {x2.dtype})")
    return (x1 if x1.dtype is dtype else x1.astype(dtype),
            x2 if x2.dtype is dtype else x2.astype(dtype))


def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    """``sum(x1 * x2) / (max(|x1|, eps) * max(|x2|, eps))`` along ``dim``, after
    broadcasting, computed as PyTorch does (each operand divided by its norm first; the
    clamp to ``eps`` passes the gradient of the norm itself).

    >>> hf.cosine_similarity(hf.tensor([[1.0, 0.0]]), hf.tensor([[1.0, 1.0]])).tolist()
    [0.7071067690849304]
    """
    shape = broadcast_shapes("cosine_similarity", tuple(x1.shape), tuple(x2.shape))
    x1, x2 = _floating_common("cosine_similarity", x1, x2)
    d = normalize_dim("cosine_similarity", dim, len(shape))
    if tuple(x1.shape) != shape:
        x1 = C.broadcast_to(x1, shape)
    if tuple(x2.shape) != shape:
        x2 = C.broadcast_to(x2, shape)

    def clamped_norm(x):
        # PyTorch clamps the norm in place under no_grad: the value is clamped, the gradient
        # is the norm's
        n = M.norm(x, 2, d, keepdim=True)
        return n + (C.clamp(n, min=eps) - n).detach()

    return C.sum((x1 / clamped_norm(x1)) * (x2 / clamped_norm(x2)), d)


def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
    """The ``p``-norm of ``x1 - x2 + eps`` along the last dim (of the operand with more
    dims), as PyTorch.

    >>> hf.pairwise_distance(hf.tensor([[3.0, 4.0]]), hf.tensor([[0.0, 0.0]]), eps=0).tolist()
    [5.0]
    """
    broadcast_shapes("pairwise_distance", tuple(x1.shape), tuple(x2.shape))
    diff = x1 - x2 + eps  # (integer operands become floats here, as in PyTorch)
    if not diff.dtype.is_floating_point:
        diff = diff.astype(get_default_dtype())
    ndim = max(x1.ndim, x2.ndim)
    return M.norm(diff, p, ndim - 1 if ndim else None, keepdim)

