"""MultiheadAttention with PyTorch's parameters, masks and return values."""
from __future__ import annotations

import math

from ...dtypes import bool_
from ...ops.composite import cat
from ...ops.factories import empty, zeros_like
from .. import functional as F
from ..functional.convolution import require_tensor
from .. import init
from ..parameter import Parameter
from .linear import NonDynamicallyQuantizableLinear
from .module import Module

__all__ = ["MultiheadAttention"]

_NAME = "MultiheadAttention"


def _check_mask_dtype(name: str, mask) -> None:
    if mask.dtype is not bool_ and not mask.dtype.is_floating_point:
        raise TypeError(f"{_NAME}: only bool and floating-point {name} are supported, got "
                        f"dtype {mask.dtype}")


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b))


def _pad_key_dim(mask):
    """Append one unmasked key position (a zero / False column) to a mask."""
    if mask is None:
        return None
    extra = zeros_like(mask[..., :1])  # (not zeros(*mask.shape...): a dim may be -1 in a program)
    return cat([mask, extra], -1)


def _apply_mask(scores, mask):
    """Bool masks: True = not allowed (-inf); float masks are added to the scores."""
    if mask.dtype is bool_:
        return scores.masked_fill(mask, -math.inf)
    return scores + mask


def _softmax_or_zero(scores):
    """Softmax over keys; a row whose keys are all masked (all -inf) gets zero weights, not the
    NaN of 0/0 -- what PyTorch's fused path (``need_weights=False``) outputs for such a row.
    ``masked_fill`` passes no gradient to the filled entries, so the gradient stays finite."""
    blocked = (scores == -math.inf).all(-1, keepdim=True)
    return F.softmax(scores.masked_fill(blocked, 0.0), -1).masked_fill(blocked, 0.0)


class MultiheadAttention(Module):
    """Multi-head attention, ``softmax(Q K^T / sqrt(head_dim) + mask) V`` per head.

    Parameters: ``in_proj_weight`` ``(3*embed_dim, embed_dim)`` (xavier uniform) and
    ``in_proj_bias`` (zeros) stacking the q, k, v projections -- or ``q_proj_weight``,
    ``k_proj_weight``, ``v_proj_weight`` when ``kdim``/``vdim`` differ from ``embed_dim`` --
    and ``out_proj`` (a Linear with zero bias).

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)`` takes ``(L, N, E)`` inputs (``(N, L, E)`` with
    ``batch_first``, or unbatched ``(L, E)``). ``attn_mask`` is ``(L, S)`` or
    ``(N*num_heads, L, S)`` (``is_causal=True`` is only a hint that it is causal: it needs
    ``attn_mask``, as in PyTorch); ``key_padding_mask`` is ``(N, S)``; bool masks mark
    positions that may NOT be attended with True, float masks are added to the scores. Returns
    ``(output, weights)``: weights ``(N, L, S)`` averaged over heads, ``(N, num_heads, L, S)``
    with ``average_attn_weights=False``, or None with ``need_weights=False``. As in PyTorch, a query
    whose keys are all masked attends to nothing with ``need_weights=False`` (its output is
    ``out_proj``'s bias) and gives NaN with ``need_weights=True``.

    Example::

        >>> import hybridfw as hf
        >>> mha = hf.nn.MultiheadAttention(16, num_heads=4, batch_first=True)
        >>> x = hf.randn(2, 5, 16)
        >>> out, w = mha(x, x, x)
        >>> out.shape, w.shape
        ((2, 5, 16), (2, 5, 5))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"{_NAME}: embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"{_NAME}: embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads})")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{_NAME}: dropout must be in [0, 1], got {dropout}")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        fk = {"dtype": dtype, "device": device}
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, **fk))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(empty(embed_dim, embed_dim, **fk))
            self.k_proj_weight = Parameter(empty(embed_dim, self.kdim, **fk))
            self.v_proj_weight = Parameter(empty(embed_dim, self.vdim, **fk))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **fk))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **fk)
        if add_bias_kv:
            self.bias_k = Parameter(empty(1, 1, embed_dim, **fk))
            self.bias_v = Parameter(empty(1, 1, embed_dim, **fk))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    # ---- forward ----------------------------------------------------------------------------
    def _project(self, query, key, value):
        """q, k, v projections (each in its input's layout); one matmul for self-attention."""
        e = self.embed_dim
        b = self.in_proj_bias
        w = self.in_proj_weight
        if self._qkv_same_embed_dim and query is key and key is value:
            return F.linear(query, w, b).chunk(3, -1)  # self-attention: one packed projection
        bq, bk, bv = (None,) * 3 if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        if not self._qkv_same_embed_dim:
            return (F.linear(query, self.q_proj_weight, bq), F.linear(key, self.k_proj_weight, bk),
                    F.linear(value, self.v_proj_weight, bv))
        q = F.linear(query, w[:e], bq)
        if key is value:
            k, v = F.linear(key, w[e:], None if b is None else b[e:]).chunk(2, -1)
            return q, k, v
        return q, F.linear(key, w[e:2 * e], bk), F.linear(value, w[2 * e:], bv)

    def _check_inputs(self, query, key, value) -> bool:
        if query.ndim not in (2, 3):
            raise ValueError(f"{_NAME}: expected query of 2 dims (L, E) or 3 dims, got shape "
                             f"{tuple(query.shape)}")
        if key.ndim != query.ndim or value.ndim != query.ndim:
            raise ValueError(f"{_NAME}: query, key and value must have the same number of dims, "
                             f"got shapes {tuple(query.shape)}, {tuple(key.shape)}, "
                             f"{tuple(value.shape)}")
        for name, t, dim in (("query", query, self.embed_dim), ("key", key, self.kdim),
                             ("value", value, self.vdim)):
            if t.shape[-1] != dim and t.shape[-1] != -1:
                raise ValueError(f"{_NAME}: expected {name} with last dim {dim}, got shape "
                                 f"{tuple(t.shape)}")
        if not _same(tuple(key.shape[:-1]), tuple(value.shape[:-1])):
            raise ValueError(f"{_NAME}: key shape {tuple(key.shape)} does not match value shape "
                             f"{tuple(value.shape)} (all but the last dim must agree)")
        weight = self.out_proj.weight
        for name, t in (("query", query), ("key", key), ("value", value)):
            require_tensor(_NAME, name, t)
            if t.dtype is not weight.dtype:
                raise TypeError(f"{_NAME}: {name} has dtype {t.dtype}, but the parameters have "
                                f"dtype {weight.dtype}; convert the input or the module (e.g. "
                                f"module.to({t.dtype}))")
        batch_dim = 0 if self.batch_first else 1
        if query.ndim == 3 and not _same((query.shape[batch_dim],), (key.shape[batch_dim],)):
            raise ValueError(f"{_NAME}: query and key have different batch sizes: shapes "
                             f"{tuple(query.shape)} and {tuple(key.shape)} (batch_first="
                             f"{self.batch_first})")
        return query.ndim == 3

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        batched = self._check_inputs(query, key, value)
        # Project in the inputs' own layout (no copy of a transposed input), then split heads
        # straight into (N, H, L, head_dim).
        seq_first = batched and not self.batch_first
        if not batched:
            self_attention, kv_shared = query is key and key is value, key is value
            query = query.unsqueeze(0)
            key = query if self_attention else key.unsqueeze(0)
            value = key if kv_shared else value.unsqueeze(0)
        seq_dim = 0 if seq_first else 1
        n, tgt_len = query.shape[1 - seq_dim], query.shape[seq_dim]
        q, k, v = self._project(query, key, value)
        if self.bias_k is not None:
            # one key per batch entry: broadcast against a zero (1, N, E) / (N, 1, E) slice of
            # k (not expand(n): a program knowing n only at run time has it as -1, which
            # expand reads as "keep the size 1")
            like = zeros_like(k[:1] if seq_first else k[:, :1])
            k = cat([k, self.bias_k + like], seq_dim)
            v = cat([v, self.bias_v + like], seq_dim)
        src_len = k.shape[seq_dim]
        heads, head_dim = self.num_heads, self.head_dim
        to_heads = (1, 2, 0, 3) if seq_first else (0, 2, 1, 3)
        # (unflatten/flatten keep the other dims as they are: also when a program knows them
        # only at run time, a batch and a length both unknown)
        q = q.unflatten(-1, (heads, head_dim)).permute(to_heads)
        k = k.unflatten(-1, (heads, head_dim)).permute(to_heads)
        v = v.unflatten(-1, (heads, head_dim)).permute(to_heads)

        attn_mask, key_padding_mask = self._masks(attn_mask, key_padding_mask, is_causal,
                                                  batched, n, tgt_len, src_len)
        if self.add_zero_attn:
            # (zeros_like, not zeros(n, ...): a program may know the batch n only at run time)
            k = cat([k, zeros_like(k[:, :, :1])], 2)
            v = cat([v, zeros_like(v[:, :, :1])], 2)
            attn_mask = _pad_key_dim(attn_mask)
            key_padding_mask = _pad_key_dim(key_padding_mask)

        scores = (q * (1.0 / math.sqrt(head_dim))) @ k.transpose(-2, -1)  # (N, H, L, S)
        if attn_mask is not None:
            scores = _apply_mask(scores, attn_mask)
        if key_padding_mask is not None:
            scores = _apply_mask(scores, key_padding_mask)
        if need_weights or (attn_mask is None and key_padding_mask is None):
            weights = F.softmax(scores, -1)
        else:  # as PyTorch: fully masked rows are zeros here, but NaN in returned weights
            weights = _softmax_or_zero(scores)
        if self.dropout > 0.0 and self.training:
            weights = F.dropout(weights, self.dropout, True)
        out = weights @ v  # (N, H, L, head_dim)
        out = out.permute(2, 0, 1, 3) if seq_first else out.permute(0, 2, 1, 3)
        out = out.flatten(2)  # (L, N, E) or (N, L, E)
        out = self.out_proj(out)
        if not batched:
            out = out.squeeze(0)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(1)
        return out, (weights if batched else weights.squeeze(0))

    def _masks(self, attn_mask, key_padding_mask, is_causal, batched, n, tgt_len, src_len):
        """Validate the masks and shape them to broadcast against (N, H, L, S) scores."""
        extra = 1 if self.bias_k is not None else 0  # add_bias_kv appends one key
        keys = src_len - extra
        if attn_mask is None and is_causal:  # as PyTorch: is_causal only hints at attn_mask
            raise RuntimeError(f"Need attn_mask if specifying the is_causal hint "
                               f"({_NAME}: is_causal=True with attn_mask=None; pass the causal "
                               f"mask, e.g. hf.ones({tgt_len}, {keys}, dtype=hf.bool).triu(1))")
        if attn_mask is not None:
            _check_mask_dtype("attn_mask", attn_mask)
            if attn_mask.ndim == 2:
                if not _same(tuple(attn_mask.shape), (tgt_len, keys)):
                    raise ValueError(f"{_NAME}: the shape of the 2D attn_mask is "
                                     f"{tuple(attn_mask.shape)}, but should be "
                                     f"{(tgt_len, keys)} (L, S)")
            elif attn_mask.ndim == 3:
                expected = (n * self.num_heads, tgt_len, keys)
                if not _same(tuple(attn_mask.shape), expected):
                    raise ValueError(f"{_NAME}: the shape of the 3D attn_mask is "
                                     f"{tuple(attn_mask.shape)}, but should be {expected} "
                                     f"(N*num_heads, L, S)")
                attn_mask = attn_mask.unflatten(0, (-1, self.num_heads))
            else:
                raise ValueError(f"{_NAME}: attn_mask must be 2-D or 3-D, got shape "
                                 f"{tuple(attn_mask.shape)}")
            if extra:
                attn_mask = _pad_key_dim(attn_mask)
        if key_padding_mask is not None:
            _check_mask_dtype("key_padding_mask", key_padding_mask)
            expected = (n, keys) if batched else (keys,)
            if not _same(tuple(key_padding_mask.shape), expected):
                raise ValueError(f"{_NAME}: expected key_padding_mask of shape {expected} "
                                 f"({'N, S' if batched else 'S'}), got "
                                 f"{tuple(key_padding_mask.shape)}")
            if not batched:
                key_padding_mask = key_padding_mask.unsqueeze(0)
            key_padding_mask = key_padding_mask.unsqueeze(1).unsqueeze(2)  # (N, 1, 1, S)
            if extra:
                key_padding_mask = _pad_key_dim(key_padding_mask)
        return attn_mask, key_padding_mask

