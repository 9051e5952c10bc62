"""``ReduceLROnPlateau``: lower the lr when a watched metric stops improving."""
from __future__ import annotations

import math
import warnings

from ..optimizer import Optimizer, check_number
from .base import LRScheduler, per_group

__all__ = ["ReduceLROnPlateau"]


class ReduceLROnPlateau(LRScheduler):
    """Multiply each group's lr by ``factor`` (not below its ``min_lr``) once the metric passed
    to :meth:`step` has not improved for more than ``patience`` epochs; then wait ``cooldown``
    epochs before counting again. "Improved" is ``mode`` ('min' or 'max') by more than
    ``threshold``, relative (``threshold_mode='rel'``) or absolute ('abs'). Changes smaller
    than ``eps`` are skipped.

    Example::

        >>> sched = hf.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", patience=5)
        >>> for epoch in range(100):
        ...     val_loss = validate(...); sched.step(val_loss)
    """

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr: list[float] | float = 0, eps: float = 1e-8):
        if not check_number("ReduceLROnPlateau", "factor", factor) < 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor should be < 1.0, got {factor!r}")
        self.factor = factor
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"ReduceLROnPlateau: expected a hybridfw optimizer, got "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer
        self.default_min_lr = None if isinstance(min_lr, (list, tuple)) else min_lr
        self.min_lrs = per_group("ReduceLROnPlateau", "min_lr", optimizer, min_lr)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def get_lr(self) -> list[float]:
        return self._last_lr

    def step(self, metrics: float, epoch: int | None = None) -> None:  # noqa: D417
        """Record this epoch's ``metrics`` (a number or a 0-d tensor) and maybe lower the lrs."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn("ReduceLROnPlateau.step(metrics, epoch) is deprecated (as in "
                          "PyTorch); call step(metrics) once per epoch instead", UserWarning,
                          stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(f"ReduceLROnPlateau: the optimizer has {len(groups)} "
                                   f"parameter groups but min_lr has {len(self.min_lrs)} "
                                   "values (a group was added since); set min_lrs to match")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old = float(group["lr"])
            new = max(old * self.factor, min_lr)
            if old - new > self.eps:
                group["lr"] = new

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode {mode!r} is unknown; use 'min' or 'max'")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold mode {threshold_mode!r} is unknown; "
                             "use 'rel' or 'abs'")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)
