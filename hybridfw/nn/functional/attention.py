"""Attention and distances: scaled_dot_product_attention, cosine_similarity, pairwise_distance.

The distances are ``hf.cosine_similarity``/``hf.pairwise_distance`` (``hybridfw.ops``),
re-exported under ``F`` as PyTorch has them in both places.
"""
from __future__ import annotations

import math

from ...dtypes import bool_, float32, int64
from ...ops import composite as C
from ...ops import elementwise as E
from ...ops import nn_ops as N
from ...ops.composite_distance import cosine_similarity, pairwise_distance
from ...ops.factories import ones_like
from ...ops.registry import apply
from .activations import dropout

__all__ = ["scaled_dot_product_attention", "cosine_similarity", "pairwise_distance"]


def _check_attention_inputs(query, key, value, attn_mask, is_causal: bool) -> None:
    name = "scaled_dot_product_attention"
    if query.dtype is not key.dtype or query.dtype is not value.dtype:
        raise TypeError(f"{name}: query, key and value must have the same dtype, got "
                        f"{query.dtype}, {key.dtype} and {value.dtype}")
    if not query.dtype.is_floating_point:
        raise TypeError(f"{name}: query, key and value must be floating point, got "
                        f"{query.dtype}")
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise ValueError(f"{name}: query, key and value must have at least 2 dims, got shapes "
                         f"{tuple(query.shape)}, {tuple(key.shape)} and {tuple(value.shape)}")
    if query.shape[-1] != key.shape[-1] and -1 not in (query.shape[-1], key.shape[-1]):
        raise ValueError(f"{name}: query and key must have the same last dim (embedding "
                         f"size), got shapes {tuple(query.shape)} and {tuple(key.shape)}")
    if key.shape[-2] != value.shape[-2] and -1 not in (key.shape[-2], value.shape[-2]):
        raise ValueError(f"{name}: key and value must have the same number of positions "
                         f"(dim -2), got shapes {tuple(key.shape)} and {tuple(value.shape)}")
    if attn_mask is not None:
        if is_causal:
            raise ValueError(f"{name}: pass attn_mask or is_causal=True, not both (PyTorch: "
                             "explicit attn_mask should not be set when is_causal=True)")
        if attn_mask.dtype not in (bool_, float32, query.dtype):
            raise TypeError(f"{name}: attn_mask must be bool, float32 or the query's dtype "
                            f"({query.dtype}), got {attn_mask.dtype}")


def _repeat_heads(key, value, heads: int):
    """Grouped-query attention: each of the key/value heads serves ``heads / kv_heads``
    consecutive query heads (dim -3)."""
    kv_heads = key.shape[-3]
    if kv_heads != value.shape[-3] or heads % kv_heads:
        raise ValueError(f"scaled_dot_product_attention: with enable_gqa the query heads "
                         f"({heads}) must be a multiple of the key and value heads (got key "
                         f"{tuple(key.shape)}, value {tuple(value.shape)})")
    if heads == kv_heads:
        return key, value
    group = heads // kv_heads
    return (key.repeat_interleave(group, dim=-3), value.repeat_interleave(group, dim=-3))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False):
    """``softmax(query @ key^T * scale + mask) @ value`` over the last two dims, any batch
    dims in front (broadcast), as ``torch.nn.functional.scaled_dot_product_attention``.

    ``query`` is ``(..., L, E)``, ``key`` ``(..., S, E)``, ``value`` ``(..., S, Ev)``; the
    result ``(..., L, Ev)``. ``scale`` defaults to ``1 / sqrt(E)``. A bool ``attn_mask``
    marks with True the positions that MAY be attended (the opposite of
    ``nn.MultiheadAttention``'s masks); a float mask is added to the scores. ``is_causal``
    lets query ``i`` attend keys ``0..i`` (the top-left causal mask). A query whose keys are
    all masked gets zeros (and zero gradients), as PyTorch's. ``dropout_p`` drops attention
    weights (always: the function has no training flag, pass ``dropout_p=0`` in eval).

    >>> q = hf.ones(2, 3, 4)
    >>> F.scaled_dot_product_attention(q, q, hf.ones(2, 3, 5), is_causal=True).shape
    (2, 3, 5)
    """
    _check_attention_inputs(query, key, value, attn_mask, is_causal)
    if enable_gqa and query.ndim >= 3:
        key, value = _repeat_heads(key, value, query.shape[-3])
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = C.matmul(query, C.transpose(key, -2, -1)) * scale
    if is_causal:
        # key j <= query i; the positions count ones, so L and S may be known only at run time
        ones = ones_like(scores[(0,) * (scores.ndim - 2)], dtype=int64)  # (L, S)
        attn_mask = apply(E.le, C.cumsum(ones, 1), C.cumsum(ones, 0))
    masked = attn_mask is not None
    if masked:
        if attn_mask.dtype is bool_:
            scores = C.masked_fill(scores, apply(E.bitwise_not, attn_mask), -math.inf)
        else:
            scores = scores + attn_mask.astype(scores.dtype)
    if masked:  # a query with every key masked: zero weights, not the NaN of 0 / 0
        blocked = C.all(apply(E.eq, scores, -math.inf), -1, keepdim=True)
        weights = C.masked_fill(apply(N.softmax, C.masked_fill(scores, blocked, 0.0),
                                      dim=scores.ndim - 1),
                                blocked, 0.0)
    else:
        weights = apply(N.softmax, scores, dim=scores.ndim - 1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return C.matmul(weights, value)
