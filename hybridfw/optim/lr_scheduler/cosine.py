"""Cosine schedules: ``CosineAnnealingLR`` and ``CosineAnnealingWarmRestarts`` (SGDR)."""
from __future__ import annotations

import math
import numbers

from ..optimizer import Optimizer, check_number
from .base import LRScheduler, _positive_number

__all__ = ["CosineAnnealingLR", "CosineAnnealingWarmRestarts"]


class CosineAnnealingLR(LRScheduler):
    r"""Anneal each group's lr from its initial value to ``eta_min`` along a half cosine over
    ``T_max`` epochs (and back up after, periodically), in PyTorch's recursive form::

        lr_t = eta_min + (lr_{t-1} - eta_min)
                         * (1 + cos(pi * t / T_max)) / (1 + cos(pi * (t - 1) / T_max))

    Example::

        >>> sched = hf.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100, eta_min=1e-5)
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1):
        if not _positive_number(T_max):
            raise ValueError(f"CosineAnnealingLR: T_max must be a positive int, got {T_max!r}")
        self.T_max = T_max
        self.eta_min = check_number("CosineAnnealingLR", "eta_min", eta_min)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        t, t_max, eta_min = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return [group["lr"] for group in groups]
        if self._step_count == 1 and t > 0:
            return [eta_min + (base - eta_min) * (1 + math.cos(t * math.pi / t_max)) / 2
                    for base in self.base_lrs]
        if (t - 1 - t_max) % (2 * t_max) == 0:
            return [group["lr"] + (base - eta_min) * (1 - math.cos(math.pi / t_max)) / 2
                    for base, group in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * t / t_max)) / (1 + math.cos(math.pi * (t - 1) / t_max))
                * (group["lr"] - eta_min) + eta_min for group in groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class CosineAnnealingWarmRestarts(LRScheduler):
    r"""Anneal each group's lr from its initial value to ``eta_min`` along a half cosine, and
    restart: the first cycle lasts ``T_0`` epochs, each next one ``T_mult`` times longer::

        lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2

    ``step(epoch)`` may take a fractional epoch (``epoch + batch / batches``) to anneal within
    an epoch, as in PyTorch.

    Example::

        >>> sched = hf.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=10, T_mult=2)
    """

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1):
        if not _is_int(T_0) or T_0 <= 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: expected a positive int T_0, but "
                             f"got {T_0!r}")
        if not _is_int(T_mult) or T_mult < 1:
            raise ValueError(f"CosineAnnealingWarmRestarts: expected an int T_mult >= 1, but "
                             f"got {T_mult!r}")
        if isinstance(eta_min, bool) or not isinstance(eta_min, numbers.Real):
            raise ValueError(f"CosineAnnealingWarmRestarts: expected a float or int eta_min, "
                             f"but got {eta_min!r} of type {type(eta_min).__name__}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2 for base in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or go to ``epoch`` (fractional allowed, not deprecated here)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"CosineAnnealingWarmRestarts: expected a non-negative epoch, "
                                 f"but got {epoch!r}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]
