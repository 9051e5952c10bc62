"""Normalization layers: BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d, LayerNorm, GroupNorm."""
from __future__ import annotations

import numbers
import warnings

from ...dtypes import int64
from ...dygraph.tensor import tensor
from ...memory.checkpoint import is_recomputing
from ...ops.factories import empty, ones, zeros
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "LayerNorm", "GroupNorm"]


class _BatchNorm(Module):
    """Shared BatchNorm logic; subclasses say which input ranks they accept."""

    _ranks: tuple = ()
    _layout: str = ""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None, *, bias: bool = True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(empty(num_features, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(empty(num_features, dtype=dtype, device=device))
            else:  # PyTorch 2.x's bias=False: scale only
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _optional_state_keys(self) -> tuple:
        # PyTorch fills in a missing num_batches_tracked (older checkpoints lack it).
        return ("num_batches_tracked",) if self.track_running_stats else ()

    def forward(self, input):  # noqa: A002
        name = type(self).__name__
        if input.ndim not in self._ranks:
            raise ValueError(f"{name}: expected {self._layout} input, got input of shape "
                             f"{tuple(input.shape)}")
        if input.shape[1] != self.num_features and input.shape[1] != -1:
            raise ValueError(f"{name}: expected input with num_features={self.num_features} "
                             f"channels (dim 1), got input of shape {tuple(input.shape)}")
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None \
                and not is_recomputing():
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                # A tensor, not float(): a static program reads the count when it runs, each
                # call (float() would freeze the count seen while tracing).
                momentum = 1.0 / self.num_batches_tracked.to(self.running_mean.dtype)
        # Batch statistics in training, or whenever there are no running statistics to use.
        use_batch_stats = self.training or (self.running_mean is None
                                            and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None,
                            self.running_var if track else None, self.weight, self.bias,
                            use_batch_stats, momentum, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization over ``(N, C)`` or ``(N, C, L)`` input, per channel ``C``.

    In training it normalizes with the batch statistics and updates ``running_mean`` /
    ``running_var`` (unbiased variance) by ``momentum`` (``None``: cumulative average); in eval
    it uses the running statistics.

    Example::

        >>> import hybridfw as hf
        >>> bn = hf.nn.BatchNorm1d(3)
        >>> bn(hf.randn(8, 3)).shape
        (8, 3)
    """

    _ranks = (2, 3)
    _layout = "2-D (N, C) or 3-D (N, C, L)"


class BatchNorm2d(_BatchNorm):
    """Batch normalization over ``(N, C, H, W)`` input, per channel ``C`` (see BatchNorm1d)."""

    _ranks = (4,)
    _layout = "4-D (N, C, H, W)"


class BatchNorm3d(_BatchNorm):
    """Batch normalization over ``(N, C, D, H, W)`` input, per channel ``C`` (see
    BatchNorm1d)."""

    _ranks = (5,)
    _layout = "5-D (N, C, D, H, W)"


class _InstanceNorm(_BatchNorm):
    """Shared InstanceNorm logic: PyTorch's defaults (no affine, no running statistics), an
    unbatched input of one dim less taken as a batch of one."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def forward(self, input):  # noqa: A002
        name = type(self).__name__
        batched = self._ranks[0]
        if input.ndim not in (batched - 1, batched):
            raise ValueError(f"{name}: expected {self._layout} input, got input of shape "
                             f"{tuple(input.shape)}")
        feature_dim = input.ndim - (batched - 1)
        features = input.shape[feature_dim]
        # (under an InputSpec None dim, converted code sees the size as a run-time value)
        if isinstance(features, int) and features not in (self.num_features, -1):
            if self.affine:
                raise ValueError(f"{name}: expected input with num_features="
                                 f"{self.num_features} channels (dim {feature_dim}), got input "
                                 f"of shape {tuple(input.shape)}")
            warnings.warn(f"{name}: input's size at dim={feature_dim} does not match "
                          f"num_features ({self.num_features}); num_features is not used "
                          f"because affine=False", stacklevel=2)
        unbatched = input.ndim == batched - 1
        out = F.instance_norm(input.unsqueeze(0) if unbatched else input, self.running_mean,
                              self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              0.0 if self.momentum is None else self.momentum, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization over ``(N, C, L)`` or unbatched ``(C, L)`` input: each channel
    of each sample over its positions. As PyTorch: ``affine=False`` and
    ``track_running_stats=False`` by default; with running statistics, eval mode uses them.

    Example::

        >>> import hybridfw as hf
        >>> hf.nn.InstanceNorm1d(3)(hf.randn(2, 3, 5)).shape
        (2, 3, 5)
    """

    _ranks = (3,)
    _layout = "3-D (N, C, L) or 2-D (C, L)"


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization over ``(N, C, H, W)`` or unbatched ``(C, H, W)`` input (see
    InstanceNorm1d)."""

    _ranks = (4,)
    _layout = "4-D (N, C, H, W) or 3-D (C, H, W)"


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization over ``(N, C, D, H, W)`` or unbatched ``(C, D, H, W)`` input (see
    InstanceNorm1d)."""

    _ranks = (5,)
    _layout = "5-D (N, C, D, H, W) or 4-D (C, D, H, W)"


class LayerNorm(Module):
    """Normalizes over the last ``len(normalized_shape)`` dims, then applies the elementwise
    affine ``weight`` (ones) and ``bias`` (zeros).

    Example::

        >>> import hybridfw as hf
        >>> ln = hf.nn.LayerNorm(4)
        >>> ln(hf.randn(2, 4)).shape
        (2, 4)
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(empty(self.normalized_shape, dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):  # noqa: A002
        k = len(self.normalized_shape)
        tail = tuple(input.shape[input.ndim - k:]) if input.ndim >= k else None
        if tail is None or any(a != b and a != -1 for a, b in zip(tail, self.normalized_shape)):
            raise ValueError(f"LayerNorm: expected input whose last {k} dim(s) are "
                             f"{self.normalized_shape}, got input of shape "
                             f"{tuple(input.shape)}")
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    """Normalizes each of ``num_groups`` groups of channels over its channels and positions,
    then applies the per-channel affine ``weight`` (ones) and ``bias`` (zeros).

    Example::

        >>> import hybridfw as hf
        >>> gn = hf.nn.GroupNorm(2, 4)
        >>> gn(hf.randn(3, 4, 5, 5)).shape
        (3, 4, 5, 5)
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(empty(num_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
        if affine and bias:
            self.bias = Parameter(empty(num_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.affine:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):  # noqa: A002
        channels = input.shape[1] if input.ndim >= 2 else None
        # (under an InputSpec None dim, converted code sees the size as a run-time value)
        if input.ndim < 2 or (isinstance(channels, int) and
                              channels not in (self.num_channels, -1)):
            raise ValueError(f"GroupNorm: expected an (N, {self.num_channels}, ...) input, got "
                             f"input of shape {tuple(input.shape)}")
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")
