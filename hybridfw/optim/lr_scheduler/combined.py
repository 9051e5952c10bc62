"""Schedulers made of schedulers: ``SequentialLR`` (one after another at milestones) and
``ChainedScheduler`` (all of them every step)."""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from ..optimizer import Optimizer
from .base import LRScheduler
from .plateau import ReduceLROnPlateau

__all__ = ["SequentialLR", "ChainedScheduler"]


def _check_schedulers(owner: str, schedulers, optimizer) -> None:
    if len(schedulers) < 1:
        raise ValueError(f"{owner}: expects at least one scheduler, but got none")
    for i, scheduler in enumerate(schedulers):
        if not hasattr(scheduler, "optimizer"):
            raise TypeError(f"{owner}: the scheduler at index {i} should have `optimizer` as "
                            "its attribute")
        if isinstance(scheduler, ReduceLROnPlateau):
            raise ValueError(f"{owner}: does not support ReduceLROnPlateau (its step() needs "
                             f"the metric), but got one at index {i}")
        if scheduler.optimizer is not optimizer:
            raise ValueError(f"{owner}: expects all schedulers to belong to the same optimizer, "
                             f"but the {type(scheduler).__name__} at index {i} has another one")


class _Combined(LRScheduler):
    """The state dict of a combined scheduler holds its schedulers' state dicts."""

    _schedulers: list

    def state_dict(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "_schedulers"})
        for scheduler, state in zip(self._schedulers, state_dict["_schedulers"]):
            scheduler.load_state_dict(state)


class SequentialLR(_Combined):
    """Run ``schedulers[i]`` from epoch ``milestones[i - 1]`` on, restarting it there (as
    PyTorch: the group lrs are reset to their initial values first).

    Example::

        >>> warmup = hf.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=5)
        >>> decay = hf.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
        >>> sched = hf.optim.lr_scheduler.SequentialLR(opt, [warmup, decay], milestones=[5])
    """

    def __init__(self, optimizer: Optimizer, schedulers: list[LRScheduler],
                 milestones: list[int], last_epoch: int = -1):
        _check_schedulers("SequentialLR", schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: expects one milestone fewer than schedulers, but "
                             f"got {len(schedulers)} schedulers and {len(milestones)} "
                             "milestones")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for scheduler in schedulers:  # undo the steps they took when made
            self._undo_step(scheduler)
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def _undo_step(self, scheduler) -> None:
        if hasattr(scheduler, "_schedulers"):
            for inner in scheduler._schedulers:
                self._undo_step(inner)
        elif hasattr(scheduler, "last_epoch"):
            scheduler.last_epoch -= 1

    def get_lr(self) -> list[float]:
        return self._last_lr

    def step(self) -> None:  # (no epoch argument, as PyTorch's)
        self.last_epoch += 1
        i = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Combined):
    """Step every scheduler in ``schedulers`` on each :meth:`step`, so their factors compose.

    Example::

        >>> s1 = hf.optim.lr_scheduler.ConstantLR(opt, factor=0.1, total_iters=2)
        >>> s2 = hf.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
        >>> sched = hf.optim.lr_scheduler.ChainedScheduler([s1, s2])
    """

    def __init__(self, schedulers: Sequence[LRScheduler], optimizer: Optimizer | None = None):
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler: expects at least one scheduler to be chained, "
                             "but got none")
        optimizer = optimizer or schedulers[0].optimizer
        _check_schedulers("ChainedScheduler", schedulers, optimizer)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = [group["lr"] for group in schedulers[-1].optimizer.param_groups]

    def get_lr(self) -> list[float]:
        return self._last_lr

    def step(self) -> None:  # (no epoch argument, as PyTorch's)
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = [group["lr"] for group in self._schedulers[-1].optimizer.param_groups]
