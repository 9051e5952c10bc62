"""Learning-rate schedulers: ``StepLR``, ``CosineAnnealingLR`` and their base ``LRScheduler``.

As in PyTorch, a scheduler rewrites ``group['lr']`` of its optimizer's parameter groups on every
:meth:`LRScheduler.step` (call it after ``optimizer.step()``), using the recursive (chainable)
form of each schedule; ``step(epoch)`` jumps to an epoch with the closed form.
"""
from __future__ import annotations

import math
import numbers
import warnings
from abc import ABC, abstractmethod

import numpy as np

from .optimizer import Optimizer, check_number

__all__ = ["LRScheduler", "StepLR", "CosineAnnealingLR"]


class LRScheduler(ABC):
    """Base class: subclasses define :meth:`get_lr` (the next lrs from the current ones).

    ``last_epoch=-1`` starts a fresh schedule (recording each group's ``initial_lr``); a
    value >= 0 resumes one, which needs ``initial_lr`` in every group.
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: expected a hybridfw optimizer, got "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"{type(self).__name__}: param_groups[{i}] has no "
                                   "'initial_lr' to resume from (last_epoch="
                                   f"{last_epoch}); start with last_epoch=-1 or load the "
                                   "optimizer's state dict first")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self._is_initial = True
        self.step()
        self._is_initial = False

    @abstractmethod
    def get_lr(self) -> list[float]:
        """The learning rates for ``self.last_epoch`` (one per parameter group)."""

    def get_last_lr(self) -> list[float]:
        """The learning rates the last :meth:`step` set."""
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or jump to ``epoch``, deprecated as in PyTorch) and set the lrs."""
        self._step_count += 1
        if self._step_count == 2 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn(f"{type(self).__name__}.step() was called before the optimizer's "
                          "step(); call optimizer.step() first, then the scheduler's step() "
                          "(as in PyTorch): this order skips the schedule's first learning rate",
                          UserWarning, stacklevel=2)
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            warnings.warn("LRScheduler.step(epoch) is deprecated (as in PyTorch); call step() "
                          "once per epoch instead", UserWarning, stacklevel=2)
            self.last_epoch = epoch
            closed = getattr(self, "_get_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """Everything but the optimizer (plain values, so ``hf.save`` can store it)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


def _positive_number(value) -> bool:
    """A real number above 0 (numpy's included; not a bool)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) and \
        value > 0


class StepLR(LRScheduler):
    """Multiply each group's lr by ``gamma`` every ``step_size`` epochs.

    Example::

        >>> sched = hf.optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.1)
        >>> for epoch in range(100):
        ...     train(...); sched.step()      # lr 0.05 for epochs 0-29, 0.005 for 30-59, ...
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1):
        if not _positive_number(step_size):  # (an int, as a rule; any number, as PyTorch's)
            raise ValueError(f"StepLR: step_size must be a positive int, got {step_size!r}")
        self.step_size = step_size
        self.gamma = check_number("StepLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** (self.last_epoch // self.step_size)
                for base in self.base_lrs]


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
