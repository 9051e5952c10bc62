"""Normalization: batch_norm, instance_norm, layer_norm, group_norm and normalize."""
from __future__ import annotations

from ...dygraph import no_grad
from ...memory.checkpoint import is_recomputing
from ...ops import composite as C
from ...ops import composite_matrix as M
from ...ops import elementwise as E
from ...ops import reduction as R
from ...ops.registry import apply
from .convolution import require_tensor


def _check_param(name, what, t, size, input):
    if t is None:
        return
    if t.ndim != 1 or (t.shape[0] != size and size != -1):  # (-1: known when the program runs)
        raise ValueError(f"{name}: {what} must have shape ({size},) for input of shape "
                         f"{tuple(input.shape)}, got {tuple(t.shape)}")


def batch_norm(input, running_mean, running_var, weight=None, bias=None,  # noqa: A002
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5):
    """Normalize over every dim but the channel dim 1.

    Training uses the batch statistics (biased variance) and, when running stats are given,
    updates them in place without recording a graph: ``running = (1 - momentum) * running +
    momentum * batch`` with the *unbiased* batch variance, exactly like PyTorch -- except while
    ``hf.memory.checkpoint`` recomputes the forward (:func:`hf.memory.is_recomputing`), which
    must not update them a second time.
    """
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input with at least 2 dims (N, C, ...), got "
                         f"shape {tuple(input.shape)}")
    _check_norm_dtypes("batch_norm", input, running_mean=running_mean, running_var=running_var,
                       weight=weight, bias=bias)
    channels = input.shape[1]
    for what, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        _check_param("batch_norm", what, t, channels, input)
    shape = (1, channels) + (1,) * (input.ndim - 2)
    dims = (0,) + tuple(range(2, input.ndim))
    if training:
        count, mean, centered, var = _moments("batch_norm", "value per channel", input, dims)
        if is_recomputing():  # hf.memory.checkpoint's backward: the forward updated them
            running_mean = running_var = None
        with no_grad():
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(C.reshape(mean, channels) * momentum)
            if running_var is not None:
                unbiased = C.reshape(var, channels) * (momentum * count / (count - 1))
                running_var.mul_(1 - momentum).add_(unbiased)
    else:
        centered, var = _running_stats("batch_norm", "training=False", input, running_mean,
                                       running_var, shape)
    return _normalized(input, centered, var, eps, weight, bias, shape)


def instance_norm(input, running_mean=None, running_var=None, weight=None,  # noqa: A002
                  bias=None, use_input_stats: bool = True, momentum: float = 0.1,
                  eps: float = 1e-5):
    """Normalize each channel of each sample of an ``(N, C, ...)`` input over its positions
    (biased variance), then the per-channel ``weight`` and ``bias``, as PyTorch's.

    With ``use_input_stats`` (the default) the statistics are the input's own, and given
    running statistics are updated in place as PyTorch does: by ``momentum`` towards the
    batch's average over ``N`` of each instance's mean and *unbiased* variance. Otherwise the
    running statistics normalize.

    Example::

        >>> import hybridfw as hf
        >>> import hybridfw.nn.functional as F
        >>> F.instance_norm(hf.tensor([[[1.0, 3.0]]])).round(decimals=3).tolist()
        [[[-1.0, 1.0]]]
    """
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected an input with at least 3 dims (N, C, ...), "
                         f"got shape {tuple(input.shape)}")
    _check_norm_dtypes("instance_norm", input, running_mean=running_mean,
                       running_var=running_var, weight=weight, bias=bias)
    channels = input.shape[1]
    for what, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        _check_param("instance_norm", what, t, channels, input)
    shape = (1, channels) + (1,) * (input.ndim - 2)
    dims = tuple(range(2, input.ndim))
    if use_input_stats:
        count, mean, centered, var = _moments("instance_norm", "spatial element", input, dims)
        if is_recomputing():  # hf.memory.checkpoint's backward: the forward updated them
            running_mean = running_var = None
        with no_grad():
            if running_mean is not None:
                batch_mean = C.reshape(C.mean(mean, 0), (-1,))  # (C, 1, ...) -> (C,)
                running_mean.mul_(1 - momentum).add_(batch_mean * momentum)
            if running_var is not None:
                batch_var = C.reshape(C.mean(var, 0), (-1,))
                running_var.mul_(1 - momentum).add_(batch_var * (momentum * count / (count - 1)))
    else:
        centered, var = _running_stats("instance_norm", "use_input_stats=False", input,
                                       running_mean, running_var, shape)
    return _normalized(input, centered, var, eps, weight, bias, shape)


def _moments(name, what, input, dims):  # noqa: A002
    """``(count, mean, input - mean, biased variance)`` over ``dims`` (kept): ``count``, the
    values each statistic is taken over, an int, or a run-time value under dims known only
    when the program runs; fewer than 2 (known) is refused, as PyTorch refuses it."""
    count = 1
    for d in dims:
        count *= input.shape[d]
    if any(input.shape[d] < 0 for d in dims):
        count = -1  # (two unknown dims multiply to a positive number)
    if 0 < count <= 1:
        raise ValueError(f"{name}: expected more than 1 {what} when training, got input of "
                         f"shape {tuple(input.shape)}")
    if count < 0:  # a static program counts them when it runs
        count = apply(R.dim_numel, input, dim=dims)
    mean = C.mean(input, dims, keepdim=True)
    centered = input - mean
    return count, mean, centered, C.mean(centered * centered, dims, keepdim=True)


def _running_stats(name, when, input, running_mean, running_var, shape):  # noqa: A002
    """``(input - running_mean, running_var)``, the statistics reshaped to ``shape``."""
    if running_mean is None or running_var is None:
        raise ValueError(f"{name}: running_mean and running_var must be given when {when}")
    return input - C.reshape(running_mean, shape), C.reshape(running_var, shape)


def _normalized(input, centered, var, eps, weight, bias, shape):  # noqa: A002
    """``centered / sqrt(var + eps)``, then ``weight`` and ``bias`` (reshaped to ``shape``),
    in the input's dtype."""
    out = centered * apply(E.rsqrt, var + eps)
    if weight is not None:
        out = out * C.reshape(weight, shape)
    if bias is not None:
        out = out + C.reshape(bias, shape)
    return out if out.dtype is input.dtype else out.astype(input.dtype)


def _check_norm_dtypes(name, input, **params):  # noqa: A002
    """As PyTorch: a floating input; parameters of its dtype, or float32 ones for a float16
    input (computed in float32, the result in float16); any other mix is a TypeError."""
    require_tensor(name, "input", input)
    if not input.dtype.is_floating_point:
        raise TypeError(f"{name}: expected a floating-point input, got dtype {input.dtype}")
    for what, t in params.items():
        if t is None or t.dtype is input.dtype:
            continue
        if input.dtype.name == "float16" and t.dtype.name == "float32":
            continue
        raise TypeError(f"{name}: mixed dtypes: input {input.dtype}, {what} {t.dtype}; give "
                        f"them one dtype (module.to({input.dtype.name}) or input.to(...))")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):  # noqa: A002
    """Normalize over the trailing ``normalized_shape`` dims (biased variance)."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or k > input.ndim or any(d not in (n, -1) for d, n in  # (-1: known at run time)
                                       zip(input.shape[input.ndim - k:], normalized_shape)):
        raise ValueError(f"layer_norm: normalized_shape {normalized_shape} must match the "
                         f"trailing dims of input of shape {tuple(input.shape)}")
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != normalized_shape:
            raise ValueError(f"layer_norm: {what} must have shape {normalized_shape}, got "
                             f"{tuple(t.shape)}")
    _check_norm_dtypes("layer_norm", input, weight=weight, bias=bias)
    dims = tuple(range(input.ndim - k, input.ndim))
    centered = input - C.mean(input, dims, keepdim=True)
    var = C.mean(centered * centered, dims, keepdim=True)
    out = centered * apply(E.rsqrt, var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out if out.dtype is input.dtype else out.astype(input.dtype)


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):  # noqa: A002
    """Normalize each of ``num_groups`` groups of channels of an (N, C, ...) input over its
    channels and positions (biased variance), then the per-channel ``weight`` and ``bias``."""
    if input.ndim < 2:
        raise ValueError(f"group_norm: expected an input with at least 2 dims (N, C, ...), got "
                         f"shape {tuple(input.shape)}")
    channels = input.shape[1]
    if channels != -1 and channels % num_groups:  # (-1: known when the program runs)
        raise ValueError(f"group_norm: the {channels} channels of input of shape "
                         f"{tuple(input.shape)} must be divisible by num_groups={num_groups}")
    _check_norm_dtypes("group_norm", input, weight=weight, bias=bias)
    for what, t in (("weight", weight), ("bias", bias)):
        _check_param("group_norm", what, t, channels, input)
    grouped = input.unflatten(1, (num_groups, channels // num_groups if channels != -1 else -1))
    dims = tuple(range(2, grouped.ndim))
    centered = grouped - C.mean(grouped, dims, keepdim=True)
    var = C.mean(centered * centered, dims, keepdim=True)
    out = (centered * apply(E.rsqrt, var + eps)).flatten(1, 2)
    shape = (1, channels) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * C.reshape(weight, shape)
    if bias is not None:
        out = out + C.reshape(bias, shape)
    return out if out.dtype is input.dtype else out.astype(input.dtype)



def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12):  # noqa: A002
    """``x / max(||x||_p, eps)`` along ``dim``."""
    return input / C.clamp(M.norm(input, p, dim, keepdim=True), min=eps)
