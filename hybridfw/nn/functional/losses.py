"""Loss functions (PyTorch's names, reductions and argument checks)."""
from __future__ import annotations

import warnings

from ...ops import composite as C
from ...ops import elementwise as E
from ...ops import indexing as I
from ...ops import nn_ops as N
from ...ops.composite_distance import pairwise_distance
from ...ops.infer import broadcast_shapes
from ...ops.registry import apply
from .convolution import _same_dtype, check_broadcasts_to, require_tensor


def _reduction(name, reduction, size_average=None, reduce=None):
    if size_average is not None or reduce is not None:  # PyTorch's deprecated arguments
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = ("mean" if size_average else "sum") if reduce else "none"
        warnings.warn(f"{name}: size_average and reduce are deprecated, use "
                      f"reduction={reduction!r}", stacklevel=3)
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got "
                         f"{reduction!r}")
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return C.mean(loss)
    if reduction == "sum":
        return C.sum(loss)
    return loss


def _weighted(name, loss, weight, reduction, input):
    """Elementwise ``loss * weight`` reduced; 'mean' divides by the weight sum (PyTorch's
    weighted mse/l1 semantics)."""
    if weight is None:
        return _reduce(loss, reduction)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError(f"{name}: weight of shape {tuple(weight.shape)} must have the input's "
                         f"shape {tuple(input.shape)}")
    loss = loss * weight
    if reduction == "mean":
        return C.sum(loss) / C.sum(weight)
    return _reduce(loss, reduction)


def _broadcast_target(name, input, target):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"{name}: target size {tuple(target.shape)} differs from input size "
                      f"{tuple(input.shape)}; they will be broadcast, which is likely wrong",
                      stacklevel=3)
        broadcast_shapes(name, tuple(input.shape), tuple(target.shape))


def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",  # noqa: A002
             weight=None):
    """Squared error (x - y)^2, reduced."""
    reduction = _reduction("mse_loss", reduction, size_average, reduce)
    _broadcast_target("mse_loss", input, target)
    diff = input - target
    return _weighted("mse_loss", diff * diff, weight, reduction, input)


def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",  # noqa: A002
            weight=None):
    """Absolute error |x - y|, reduced."""
    reduction = _reduction("l1_loss", reduction, size_average, reduce)
    _broadcast_target("l1_loss", input, target)
    return _weighted("l1_loss", apply(E.abs_, input - target), weight, reduction, input)


def smooth_l1_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                   reduction: str = "mean", beta: float = 1.0):
    """``0.5 (x - y)^2 / beta`` where ``|x - y| < beta``, else ``|x - y| - 0.5 beta``, reduced
    (``beta=0``: the L1 loss)."""
    reduction = _reduction("smooth_l1_loss", reduction, size_average, reduce)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    _broadcast_target("smooth_l1_loss", input, target)
    diff = apply(E.abs_, input - target)
    if beta == 0:
        return _reduce(diff, reduction)
    return _reduce(C.where(diff < beta, diff * diff * (0.5 / beta), diff - 0.5 * beta),
                   reduction)


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0,  # noqa: A002
               weight=None):
    """``0.5 (x - y)^2`` where ``|x - y| < delta``, else ``delta (|x - y| - 0.5 delta)``;
    ``weight`` multiplies it elementwise before the reduction (as PyTorch: 'mean' divides by
    the element count, not by the weight sum)."""
    reduction = _reduction("huber_loss", reduction)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    _broadcast_target("huber_loss", input, target)
    diff = apply(E.abs_, input - target)
    loss = C.where(diff < delta, diff * diff * 0.5, (diff - 0.5 * delta) * delta)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def cosine_embedding_loss(input1, input2, target, margin: float = 0.0,  # noqa: A002
                          size_average=None, reduce=None, reduction: str = "mean"):
    """``1 - cos(x1, x2)`` where the target is 1, ``max(0, cos(x1, x2) - margin)`` where it is
    -1 (0 elsewhere), reduced; ``input1``/``input2`` are ``(N, D)`` with a ``(N,)`` target, or
    ``(D,)`` with a 0-d one. The cosine is PyTorch's (``1e-12`` added to each squared norm)."""
    reduction = _reduction("cosine_embedding_loss", reduction, size_average, reduce)
    name = "cosine_embedding_loss"
    if target.ndim > 1:
        raise ValueError(f"{name}: expects a 0-d or 1-d target (one per pair), got shape "
                         f"{tuple(target.shape)}")
    if input1.ndim != target.ndim + 1 or input2.ndim != target.ndim + 1:
        raise ValueError(f"{name}: a {target.ndim}-d target expects {target.ndim + 1}-d inputs, "
                         f"got shapes {tuple(input1.shape)} and {tuple(input2.shape)}")
    broadcast_shapes(name, tuple(input1.shape), tuple(input2.shape))
    last = input1.ndim - 1
    product = C.sum(input1 * input2, last)
    norms = (C.sum(input1 * input1, last) + 1e-12) * (C.sum(input2 * input2, last) + 1e-12)
    cos = product / apply(E.sqrt, norms)
    positive = C.where(target == 1, 1 - cos, 0.0)
    negative = C.where(target == -1, C.clamp(cos - margin, min=0.0), 0.0)
    return _reduce(positive + negative, reduction)


def margin_ranking_loss(input1, input2, target, margin: float = 0.0,  # noqa: A002
                        size_average=None, reduce=None, reduction: str = "mean"):
    """``max(0, -y (x1 - x2) + margin)``, reduced: ``y = 1`` asks ``x1`` to rank above
    ``x2`` by ``margin``, ``y = -1`` below. The three tensors have one number of dims (they
    broadcast)."""
    reduction = _reduction("margin_ranking_loss", reduction, size_average, reduce)
    if not input1.ndim == input2.ndim == target.ndim:
        raise ValueError(f"margin_ranking_loss: all input tensors should have the same number "
                         f"of dims, got shapes input1 {tuple(input1.shape)}, input2 "
                         f"{tuple(input2.shape)}, target {tuple(target.shape)}")
    return _reduce(C.clamp(-target * (input1 - input2) + margin, min=0.0), reduction)


def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average=None,
                        reduce=None, reduction: str = "mean"):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d`` the ``pairwise_distance`` (``p``,
    ``eps``), reduced; ``swap`` takes the smaller of ``d(a, n)`` and ``d(p, n)`` as the
    negative distance."""
    reduction = _reduction("triplet_margin_loss", reduction, size_average, reduce)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ValueError(f"triplet_margin_loss: anchor, positive and negative must have the "
                         f"same number of dims, got shapes {tuple(anchor.shape)}, "
                         f"{tuple(positive.shape)} and {tuple(negative.shape)}")
    if margin <= 0:
        raise ValueError(f"triplet_margin_loss: margin must be greater than 0, got {margin}")
    distance_positive = pairwise_distance(anchor, positive, p, eps)
    distance_negative = pairwise_distance(anchor, negative, p, eps)
    if swap:
        distance_negative = C.minimum(distance_negative,
                                      pairwise_distance(positive, negative, p, eps))
    return _reduce(C.clamp(distance_positive - distance_negative + margin, min=0.0), reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean",  # noqa: A002
           log_target: bool = False):
    """Pointwise KL divergence ``y (log y - x)`` of log-probabilities ``x`` from the target
    ``y`` (0 where ``y = 0``; with ``log_target``, ``exp(y) (y - x)``). ``reduction``:
    'batchmean' (the sum over the batch size: the KL divergence), 'sum', 'none', or 'mean' (the
    mean over every element, with PyTorch's warning)."""
    if reduction == "batchmean" and size_average is None and reduce is None:
        batch = input.shape[0] if input.ndim else 1
    else:
        reduction = _reduction("kl_div", reduction, size_average, reduce)
        if reduction == "mean":
            warnings.warn("kl_div: reduction='mean' divides the total loss by both the batch "
                          "size and the support size; 'batchmean' divides only by the batch "
                          "size, as the KL divergence is defined", stacklevel=2)
    if log_target:
        loss = apply(E.exp, target) * (target - input)
    else:  # (the log of 1 where y = 0: a finite 0 * log term, and its gradient)
        loss = target * (apply(E.log, C.where(target > 0, target, 1.0)) - input)
    if reduction == "batchmean":
        return C.sum(loss) / batch
    return _reduce(loss, reduction)




def _same_shape_target(name, input, target):
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"{name}: target size {tuple(target.shape)} must be the same as the "
                         f"input size {tuple(input.shape)}")


def binary_cross_entropy(input, target, weight=None, size_average=None,  # noqa: A002
                         reduce=None, reduction: str = "mean"):
    """-(y log x + (1 - y) log(1 - x)) for probabilities x; each log is clamped at -100, as
    in PyTorch, so the loss and its gradient stay finite at x = 0 or 1."""
    reduction = _reduction("binary_cross_entropy", reduction, size_average, reduce)
    _same_shape_target("binary_cross_entropy", input, target)
    loss = apply(N.binary_cross_entropy, input, target)
    if weight is not None:
        loss = loss * _elementwise_weight("binary_cross_entropy", "weight", weight, input)
    return _reduce(loss, reduction)


def _elementwise_weight(name, what, weight, input):
    """A per-element loss weight: it must broadcast to the input's shape without changing it,
    and is used in the input's dtype (PyTorch computes the loss in that dtype)."""
    check_broadcasts_to(name, what, weight, input.shape, "input")
    return weight if weight.dtype is input.dtype else weight.astype(input.dtype)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,  # noqa: A002
                                     reduce=None, reduction: str = "mean", pos_weight=None):
    """Binary cross-entropy of sigmoid(x), computed stably as
    (1 - y) x - (1 + (pos_weight - 1) y) log_sigmoid(x)  (= max(x,0) - x y + log1p(exp(-|x|))
    without pos_weight): finite loss and gradient for any finite logit."""
    reduction = _reduction("binary_cross_entropy_with_logits", reduction, size_average, reduce)
    _same_shape_target("binary_cross_entropy_with_logits", input, target)
    name = "binary_cross_entropy_with_logits"
    log_sig = apply(N.log_sigmoid, input)
    if pos_weight is None:
        loss = (1 - target) * input - log_sig
    else:
        pos_weight = _elementwise_weight(name, "pos_weight", pos_weight, input)
        loss = (1 - target) * input - (1 + (pos_weight - 1) * target) * log_sig
    if weight is not None:
        loss = loss * _elementwise_weight(name, "weight", weight, input)
    return _reduce(loss, reduction)


def _check_class_weight(name, weight, classes, input):
    if weight is None:
        return
    if weight.ndim != 1 or weight.shape[0] != classes:
        raise ValueError(f"{name}: weight must be a 1-D tensor of size {classes} (one per "
                         f"class) for input of shape {tuple(input.shape)}, got "
                         f"{tuple(weight.shape)}")
    _same_dtype(name, input, weight, "input", "weight")


def _as_batch(input, target):
    """(C,) input with a scalar target -> a batch of one."""
    return C.unsqueeze(input, 0), C.unsqueeze(target, 0)


def _target_weights(target, weight, ignore_index, dtype):
    """weight[target] (or 1), zero where target == ignore_index."""
    valid = target != ignore_index
    if weight is None:
        return apply(E.cast, valid, dtype=dtype)
    safe = apply(E.where, valid, target, 0)
    picked = apply(I.getitem, weight, safe, spec=(("tensor",),))
    return apply(E.where, valid, picked, 0.0)


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100,  # noqa: A002
             reduce=None, reduction: str = "mean"):
    """Negative log-likelihood of class indices ``target`` under log-probabilities ``input``
    ((N, C, d1, ...) with target (N, d1, ...), or (C,) with a scalar target). 'mean' divides
    by the summed weights of the non-ignored targets (PyTorch's weighted mean)."""
    reduction = _reduction("nll_loss", reduction, size_average, reduce)
    require_tensor("nll_loss", "input", input)
    require_tensor("nll_loss", "target", target)
    unbatched = input.ndim == 1
    if unbatched:
        input, target = _as_batch(input, target)  # noqa: A001
    if input.ndim < 2:
        raise ValueError(f"nll_loss: expected input of shape (N, C, ...) or (C,), got "
                         f"{tuple(input.shape)}")
    _check_class_weight("nll_loss", weight, input.shape[1], input)
    loss = apply(N.nll_loss, input, target, ignore_index=ignore_index)
    weights = _target_weights(target, weight, ignore_index, input.dtype)
    if weight is not None:
        loss = loss * weights
    if reduction == "none":
        return C.squeeze(loss, 0) if unbatched else loss
    total = C.sum(loss)
    return total if reduction == "sum" else total / C.sum(weights)


def cross_entropy(input, target, weight=None, size_average=None,  # noqa: A002
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0):
    """log_softmax over the class dim (1, or 0 for a (C,) input) followed by nll_loss, with
    PyTorch's semantics for class-index targets (ignore_index, class weights, label
    smoothing) and for class-probability targets (a float target shaped like the input)."""
    reduction = _reduction("cross_entropy", reduction, size_average, reduce)
    require_tensor("cross_entropy", "input", input)
    require_tensor("cross_entropy", "target", target)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0 and 1, got "
                         f"{label_smoothing}")
    if input.ndim < 1:
        raise ValueError(f"cross_entropy: expected input of shape (N, C, ...) or (C,), got "
                         f"{tuple(input.shape)}")
    class_dim = 1 if input.ndim >= 2 else 0
    classes = input.shape[class_dim]
    _check_class_weight("cross_entropy", weight, classes, input)
    logp = apply(N.log_softmax, input, dim=class_dim)
    if target.dtype.is_floating_point:
        return _cross_entropy_probabilities(logp, target, weight, ignore_index, reduction,
                                            label_smoothing, class_dim)
    expected = tuple(input.shape[:class_dim]) + tuple(input.shape[class_dim + 1:])
    got = tuple(target.shape)
    # (a static program's -1, a dim known only at run time, agrees with any size)
    if len(got) != len(expected) or any(a != b and -1 not in (a, b)
                                         for a, b in zip(got, expected)):
        raise ValueError(f"cross_entropy: expected target of shape {expected} for input of "
                         f"shape {tuple(input.shape)}, got {tuple(target.shape)}")
    loss = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing == 0.0:
        return loss
    if weight is not None:
        wshape = [1] * input.ndim
        wshape[class_dim] = classes
        logp = logp * C.reshape(weight, tuple(wshape))
    smooth = -C.sum(logp, class_dim)
    ignored = target == ignore_index
    smooth = apply(E.where, ignored, 0.0, smooth)
    if reduction == "mean":
        smooth = C.sum(smooth) / C.sum(_target_weights(target, weight, ignore_index,
                                                       input.dtype))
    elif reduction == "sum":
        smooth = C.sum(smooth)
    return (1 - label_smoothing) * loss + smooth * (label_smoothing / classes)


def _cross_entropy_probabilities(logp, target, weight, ignore_index, reduction,
                                 label_smoothing, class_dim):
    if tuple(target.shape) != tuple(logp.shape):
        raise ValueError(f"cross_entropy: a class-probability target must have the input's "
                         f"shape {tuple(logp.shape)}, got {tuple(target.shape)}")
    _same_dtype("cross_entropy", logp, target, "input", "probability target")
    if ignore_index >= 0:
        raise ValueError("cross_entropy: ignore_index is not supported for class-probability "
                         "targets")
    classes = logp.shape[class_dim]
    if label_smoothing > 0:
        target = target * (1 - label_smoothing) + label_smoothing / classes
    prod = logp * target
    if weight is not None:
        wshape = [1] * logp.ndim
        wshape[class_dim] = classes
        prod = prod * C.reshape(weight, tuple(wshape))
    if reduction == "none":
        return -C.sum(prod, class_dim)
    if reduction == "sum":
        return -C.sum(prod)
    # the mean over the positions (NaN for none), counted when the program runs: a static
    # program may know the batch size only then
    return -C.mean(C.sum(prod, class_dim))
