"""``hf.nn.functional`` (``F``): PyTorch's functional layer API, on hybridfw ops.

Signatures, defaults and semantics follow ``torch.nn.functional``. Everything is written in
registry ops (``hybridfw.ops``), so the same code runs eagerly, inside static programs, and
under double backward. Shape problems raise ``ValueError`` and dtype problems ``TypeError``,
each naming the function and the shapes/dtypes.

Example::

    >>> import hybridfw as hf
    >>> import hybridfw.nn.functional as F
    >>> logits = hf.tensor([[2.0, 0.5, -1.0]], requires_grad=True)
    >>> loss = F.cross_entropy(logits, hf.tensor([0]))
    >>> loss.backward()
    >>> logits.grad.shape
    (1, 3)

The functions live in cohesive modules of this package (``activations``, ``attention`` (with
the distances), ``convolution``, ``pooling``, ``normalization``, ``sparse``, ``padding``,
``losses``; ``interpolate`` in ``hybridfw.nn.interpolation``), all re-exported here.
"""
from __future__ import annotations

# The functions, and the private helpers that other modules reach as ``F._name``:
from ..interpolation import interpolate
from .activations import (_SQRT_2_OVER_PI, _SQRT_HALF, _cast, _softmax_dim, dropout, dropout2d,
                          elu, gelu, hardtanh, leaky_relu, log_softmax, logsigmoid, prelu, relu,
                          relu6, sigmoid, silu, softmax, softplus, tanh)
from .attention import cosine_similarity, pairwise_distance, scaled_dot_product_attention
from .activations import (celu, glu, hardsigmoid, hardswish, mish, selu, softmin, softsign,
                          tanhshrink, threshold)
from .convolution import (_batched, _conv_padding, _same_dtype, _single, _unbatched, conv1d,
                          conv2d, conv_transpose2d, linear)
from .losses import (_as_batch, _broadcast_target, _check_class_weight,
                     _cross_entropy_probabilities, _reduce, _reduction, _same_shape_target,
                     _target_weights, _weighted, binary_cross_entropy,
                     binary_cross_entropy_with_logits, cross_entropy, huber_loss, kl_div, l1_loss,
                     mse_loss, nll_loss, smooth_l1_loss)
from .losses import cosine_embedding_loss, margin_ranking_loss, triplet_margin_loss
from .normalization import (_check_norm_dtypes, _check_param, batch_norm, group_norm,
                            instance_norm, layer_norm, normalize)
from .padding import _pad_index, pad
from .pooling import (_pool1d_input, adaptive_avg_pool1d, adaptive_avg_pool2d, avg_pool1d,
                      avg_pool2d, max_pool1d, max_pool2d)
from .sparse import _renormalize_rows, embedding, one_hot

# Names the single-file module held from its imports, kept reachable as ``F.<name>``.
import math  # noqa: E402,I001
import warnings  # noqa: E402

from ...dtypes import as_dtype, int64  # noqa: E402
from ...dygraph import no_grad  # noqa: E402
from ...memory.checkpoint import is_recomputing  # noqa: E402
from ...ops import composite as C  # noqa: E402
from ...ops import composite_matrix as M  # noqa: E402
from ...ops import creation as K  # noqa: E402
from ...ops import elementwise as E  # noqa: E402
from ...ops import indexing as I  # noqa: E402
from ...ops import linalg as L  # noqa: E402
from ...ops import nn_ops as N  # noqa: E402
from ...ops import reduction as R  # noqa: E402
from ...ops import shape_ops as S  # noqa: E402
from ...ops.conv import conv_attrs, pair  # noqa: E402
from ...ops.factories import rand_like  # noqa: E402
from ...ops.infer import broadcast_shapes, normalize_dim  # noqa: E402
from ...ops.pooling import pool_attrs  # noqa: E402
from ...ops.registry import apply, apply_inplace  # noqa: E402

__all__ = ["relu", "leaky_relu", "prelu", "elu", "softplus", "hardtanh", "relu6", "gelu", "silu",
           "tanh", "sigmoid", "logsigmoid", "softmax", "log_softmax", "dropout", "dropout2d",
           "linear", "conv2d", "conv_transpose2d", "max_pool1d", "avg_pool1d",
           "adaptive_avg_pool1d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "interpolate",
           "batch_norm", "instance_norm", "layer_norm", "group_norm", "embedding", "pad", "one_hot",
           "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "kl_div", "normalize", "binary_cross_entropy", "binary_cross_entropy_with_logits",
           "scaled_dot_product_attention", "cosine_similarity", "pairwise_distance",
           "mish", "hardswish", "hardsigmoid", "selu", "celu", "glu", "softmin", "softsign",
           "tanhshrink", "threshold", "cosine_embedding_loss", "margin_ranking_loss",
           "triplet_margin_loss"]

