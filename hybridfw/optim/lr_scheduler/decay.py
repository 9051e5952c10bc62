"""Schedules that multiply the lr by factors: ``StepLR``, ``MultiStepLR``, ``ExponentialLR``,
``LambdaLR``, ``MultiplicativeLR``, ``ConstantLR``, ``LinearLR`` and ``PolynomialLR``."""
from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from types import FunctionType

from ..optimizer import Optimizer, check_number
from .base import LRScheduler, _positive_number, per_group

__all__ = ["StepLR", "MultiStepLR", "ExponentialLR", "LambdaLR", "MultiplicativeLR",
           "ConstantLR", "LinearLR", "PolynomialLR"]


def _current(scheduler: LRScheduler) -> list[float]:
    return [group["lr"] for group in scheduler.optimizer.param_groups]


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


class MultiStepLR(LRScheduler):
    """Multiply each group's lr by ``gamma`` at each epoch in ``milestones`` (an epoch listed
    twice multiplies by ``gamma ** 2``).

    Example::

        >>> sched = hf.optim.lr_scheduler.MultiStepLR(opt, milestones=[30, 80], gamma=0.1)
    """

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1):
        self.milestones = Counter(milestones)
        self.gamma = check_number("MultiStepLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return _current(self)
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [lr * factor for lr in _current(self)]

    def _get_closed_form_lr(self) -> list[float]:
        milestones = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(milestones, self.last_epoch)
                for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply each group's lr by ``gamma`` every epoch.

    Example::

        >>> sched = hf.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
    """

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = check_number("ExponentialLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return _current(self)
        return [lr * self.gamma for lr in _current(self)]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class _LambdaScheduler(LRScheduler):
    """A schedule from ``lr_lambda`` (one function, or one per parameter group), whose state
    dict keeps the attributes of callable objects, not plain functions (as PyTorch's)."""

    def __init__(self, optimizer: Optimizer, lr_lambda, last_epoch: int):
        owner = type(self).__name__
        self.lr_lambdas = per_group(owner, "lr_lambda", optimizer, lr_lambda)
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"{owner}: lr_lambda should be a function, but got "
                                f"{type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict:
        state = super().state_dict()
        state["lr_lambdas"] = [None if isinstance(fn, FunctionType) else dict(fn.__dict__)
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore the state but keep this scheduler's own functions, updating the attributes
        of callable objects."""
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "lr_lambdas"})
        for fn, attrs in zip(self.lr_lambdas, state_dict["lr_lambdas"]):
            if attrs is not None:
                fn.__dict__.update(attrs)


class LambdaLR(_LambdaScheduler):
    """Set each group's lr to its initial lr times ``lr_lambda(epoch)`` (one function, or a
    list of one per parameter group). ``state_dict()`` keeps the attributes of callable
    objects, not plain functions (as PyTorch).

    Example::

        >>> sched = hf.optim.lr_scheduler.LambdaLR(opt, lr_lambda=lambda epoch: 0.95 ** epoch)
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | list,
                 last_epoch: int = -1):
        super().__init__(optimizer, lr_lambda, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaScheduler):
    """Multiply each group's lr by ``lr_lambda(epoch)`` every epoch (one function, or a list
    of one per parameter group).

    Example::

        >>> sched = hf.optim.lr_scheduler.MultiplicativeLR(opt, lr_lambda=lambda epoch: 0.95)
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | list,
                 last_epoch: int = -1):
        super().__init__(optimizer, lr_lambda, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return _current(self)
        return [lr * fn(self.last_epoch) for fn, lr in zip(self.lr_lambdas, _current(self))]


class ConstantLR(LRScheduler):
    """Multiply each group's lr by ``factor`` for the first ``total_iters`` epochs, then
    restore it.

    Example::

        >>> sched = hf.optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=4)
    """

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1):
        self.factor = check_number("ConstantLR", "factor", factor, high=1.0)
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [lr * self.factor for lr in _current(self)]
        if self.last_epoch != self.total_iters:
            return _current(self)
        return [lr * (1.0 / self.factor) for lr in _current(self)]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale each group's lr by a factor going linearly from ``start_factor`` to
    ``end_factor`` over ``total_iters`` epochs, then keep it.

    Example::

        >>> sched = hf.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=10)
    """

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1):
        start_factor = check_number("LinearLR", "start_factor", start_factor, high=1.0)
        if start_factor == 0:
            raise ValueError("LinearLR: invalid start_factor=0; it must be in (0, 1]")
        self.start_factor = start_factor
        self.end_factor = check_number("LinearLR", "end_factor", end_factor, high=1.0)
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in _current(self)]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _current(self)
        change = self.end_factor - self.start_factor
        factor = 1.0 + change / (self.total_iters * self.start_factor
                                 + (self.last_epoch - 1) * change)
        return [lr * factor for lr in _current(self)]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * (self.start_factor + (self.end_factor - self.start_factor)
                        * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay each group's lr to 0 over ``total_iters`` epochs as
    ``(1 - epoch / total_iters) ** power``, then keep it.

    Example::

        >>> sched = hf.optim.lr_scheduler.PolynomialLR(opt, total_iters=10, power=2.0)
    """

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1):
        if not _positive_number(total_iters):
            raise ValueError(f"PolynomialLR: total_iters must be a positive int, got "
                             f"{total_iters!r}")
        self.total_iters = total_iters
        self.power = check_number("PolynomialLR", "power", power)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial or self.last_epoch > self.total_iters:
            return _current(self)
        factor = ((1.0 - self.last_epoch / self.total_iters)
                  / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [lr * factor for lr in _current(self)]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power for base in self.base_lrs]
