"""Cyclical schedules, which also cycle the momentum: ``OneCycleLR`` and ``CyclicLR``."""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from functools import partial
from types import FunctionType

from ..optimizer import Optimizer
from .base import LRScheduler, per_group

__all__ = ["OneCycleLR", "CyclicLR"]


def _momentum_key(owner: str, optimizer: Optimizer) -> bool:
    """Whether the optimizer's momentum is ``betas[0]`` (Adam's) rather than ``momentum``."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError(f"{owner}: the optimizer must support momentum or beta1 with the "
                         f"cycle_momentum option enabled ({type(optimizer).__name__} has "
                         "neither)")
    return "betas" in optimizer.defaults


def _set_momentum(group: dict, momentum: float, use_beta1: bool) -> None:
    if use_beta1:
        group["betas"] = (momentum, *group["betas"][1:])
    else:
        group["momentum"] = momentum


def _start_momentum(owner: str, optimizer: Optimizer, max_momentum, base_momentum,
                    last_epoch: int) -> tuple[bool, list, list]:
    use_beta1 = _momentum_key(owner, optimizer)
    max_momentums = per_group(owner, "max_momentum", optimizer, max_momentum)
    base_momentums = per_group(owner, "base_momentum", optimizer, base_momentum)
    if last_epoch == -1:
        for high, low, group in zip(max_momentums, base_momentums, optimizer.param_groups):
            _set_momentum(group, high, use_beta1)
            group["max_momentum"] = high
            group["base_momentum"] = low
    return use_beta1, max_momentums, base_momentums


def _positive_int(owner: str, name: str, value) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{owner}: expected a positive int {name}, but got {value!r}")
    return value


class OneCycleLR(LRScheduler):
    """The 1cycle policy, stepped once per batch: the lr rises from ``max_lr / div_factor`` to
    ``max_lr`` over the first ``pct_start`` of ``total_steps`` (or ``epochs *
    steps_per_epoch``), then anneals to ``initial_lr / final_div_factor``; the momentum moves
    the other way between ``max_momentum`` and ``base_momentum``. ``three_phase=True`` goes
    back to the initial lr before the final annealing. ``anneal_strategy`` is 'cos' or
    'linear'.

    Example::

        >>> sched = hf.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=1000)
        >>> for batch in loader:
        ...     train(batch); sched.step()
    """

    def __init__(self, optimizer: Optimizer, max_lr: float | list[float],
                 total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: float | list[float] = 0.85,
                 max_momentum: float | list[float] = 0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"OneCycleLR: expected a hybridfw optimizer, got "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer
        if total_steps is not None:
            self.total_steps = _positive_int("OneCycleLR", "total_steps", total_steps)
        elif epochs is not None and steps_per_epoch is not None:
            self.total_steps = (_positive_int("OneCycleLR", "epochs", epochs)
                                * _positive_int("OneCycleLR", "steps_per_epoch",
                                                steps_per_epoch))
        else:
            raise ValueError("OneCycleLR: you must define either total_steps OR (epochs AND "
                             "steps_per_epoch)")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: expected a float between 0 and 1 pct_start, but got "
                             f"{pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', "
                             f"instead got {anneal_strategy!r}")
        up_end = float(pct_start * self.total_steps) - 1
        # each phase: (last step, start lr key, end lr key, start momentum key, end one)
        if three_phase:
            self._schedule_phases = [
                (up_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr",
                 "base_momentum", "max_momentum"),
                (self.total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
        else:
            self._schedule_phases = [
                (up_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (self.total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        self._anneal_func_type = anneal_strategy
        max_lrs = per_group("OneCycleLR", "max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for high, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = high / div_factor
                group["max_lr"] = high
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _start_momentum("OneCycleLR", optimizer, max_momentum,
                                             base_momentum, last_epoch)[0]
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step} times; the specified number "
                             f"of total steps is {self.total_steps}")
        lrs = []
        last = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, (end_step, lr_from, lr_to, m_from, m_to) in enumerate(self._schedule_phases):
                if step <= end_step or i == last:
                    pct = (step - start_step) / (end_step - start_step)
                    lrs.append(self._anneal(group[lr_from], group[lr_to], pct))
                    if self.cycle_momentum:
                        _set_momentum(group, self._anneal(group[m_from], group[m_to], pct),
                                      self.use_beta1)
                    break
                start_step = end_step
        return lrs


class CyclicLR(LRScheduler):
    """Cycle each group's lr between ``base_lr`` and ``max_lr`` (Smith's cyclical learning
    rates), stepped once per batch: up over ``step_size_up`` steps, down over
    ``step_size_down`` (default: the same). ``mode`` scales the amplitude per cycle:
    'triangular' (constant), 'triangular2' (halved each cycle), 'exp_range' (``gamma **
    iterations``); or give ``scale_fn`` and ``scale_mode`` ('cycle' or 'iterations'). The
    momentum cycles the other way between ``max_momentum`` and ``base_momentum``.

    Example::

        >>> sched = hf.optim.lr_scheduler.CyclicLR(opt, base_lr=0.01, max_lr=0.1,
        ...                                        step_size_up=200)
    """

    def __init__(self, optimizer: Optimizer, base_lr: float | list[float],
                 max_lr: float | list[float], step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Callable[[float], float] | None = None,
                 scale_mode: str = "cycle", cycle_momentum: bool = True,
                 base_momentum: float = 0.8, max_momentum: float = 0.9, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"CyclicLR: expected a hybridfw optimizer, got "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer
        base_lrs = per_group("CyclicLR", "base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.max_lrs = per_group("CyclicLR", "max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode {mode!r} is invalid and scale_fn is None; use "
                             "'triangular', 'triangular2' or 'exp_range', or pass scale_fn")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1, self.max_momentums, self.base_momentums = _start_momentum(
                "CyclicLR", optimizer, max_momentum, base_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is not None:
            return
        if self.mode == "exp_range":
            self._scale_fn_ref = partial(_exp_range_scale, self.gamma)
            self.scale_mode = "iterations"
        else:
            self._scale_fn_ref = _triangular2_scale if self.mode == "triangular2" else \
                _triangular_scale
            self.scale_mode = "cycle"

    def scale_fn(self, x: float) -> float:
        """The amplitude's scale at cycle (or iteration) ``x``."""
        fn = self._scale_fn_custom if self._scale_fn_custom is not None else self._scale_fn_ref
        return fn(x)

    def get_lr(self) -> list[float]:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [low + (high - low) * scale_factor * scale
               for low, high in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, low, high in zip(self.optimizer.param_groups, self.base_momentums,
                                        self.max_momentums):
                _set_momentum(group, high - (high - low) * scale_factor * scale, self.use_beta1)
        return lrs

    def state_dict(self) -> dict:
        state = super().state_dict()
        state.pop("_scale_fn_ref", None)
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None if fn is None or isinstance(fn, FunctionType) else \
            dict(fn.__dict__)
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        attrs = state.pop("_scale_fn_custom")
        super().load_state_dict(state)
        if attrs is not None:
            self._scale_fn_custom.__dict__.update(attrs)
        self._init_scale_fn()


def _triangular_scale(x: float) -> float:
    return 1.0


def _triangular2_scale(x: float) -> float:
    return 1 / (2.0 ** (x - 1))


def _exp_range_scale(gamma: float, x: float) -> float:
    return gamma ** x
