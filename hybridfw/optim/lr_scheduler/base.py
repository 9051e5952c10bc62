"""``LRScheduler``, the base of the learning-rate schedulers, and their argument checks.

As in PyTorch, a scheduler rewrites ``group['lr']`` of its optimizer's parameter groups on every
:meth:`LRScheduler.step` (call it after ``optimizer.step()``), using the recursive (chainable)
form of each schedule; ``step(epoch)`` jumps to an epoch with the closed form.
"""
from __future__ import annotations

import numbers
import warnings
from abc import ABC, abstractmethod

import numpy as np

from ..optimizer import Optimizer

__all__ = ["LRScheduler", "_LRScheduler"]


class LRScheduler(ABC):
    """Base class: subclasses define :meth:`get_lr` (the next lrs from the current ones).

    ``last_epoch=-1`` starts a fresh schedule (recording each group's ``initial_lr``); a
    value >= 0 resumes one, which needs ``initial_lr`` in every group.
    """

    _is_initial = False  # (True during the step the constructor takes)

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
        self._initial_step()

    def _initial_step(self) -> None:
        """The step every schedule takes when made (or restarted by ``SequentialLR``)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
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
        if epoch is not None:
            warnings.warn("LRScheduler.step(epoch) is deprecated (as in PyTorch); call step() "
                          "once per epoch instead", UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
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
        """Restore what :meth:`state_dict` returned."""
        self.__dict__.update(state_dict)


_LRScheduler = LRScheduler  # PyTorch's older name, kept for ported code


def _positive_number(value) -> bool:
    """A real number above 0 (numpy's included; not a bool)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) and \
        value > 0


def per_group(owner: str, name: str, optimizer: Optimizer, value) -> list:
    """``value`` for each parameter group: a list or tuple of one per group, or one for all."""
    groups = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != groups:
            raise ValueError(f"{owner}: expected {groups} values for {name} (one per parameter "
                             f"group), but got {len(value)}")
        return list(value)
    return [value] * groups

