"""Adagrad: per-element step sizes from the running sum of squared gradients."""
from __future__ import annotations

from collections.abc import Iterable

from ..ops import elementwise as E
from ..ops.factories import full_like
from ..ops.registry import apply_inplace
from .adam import effective_grad
from .optimizer import Optimizer, check_implementation_options, check_number

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    r"""Adagrad (PyTorch's update rule, step for step).

    Per parameter, at step ``t`` (counted per parameter from 1), with ``g`` the gradient
    (negated when ``maximize``)::

        g = g + weight_decay * p                   if weight_decay != 0
        clr = lr / (1 + (t - 1) * lr_decay)
        sum = sum + g * g                           (sum starts at initial_accumulator_value)
        p = p - clr * g / (sqrt(sum) + eps)

    Example::

        >>> opt = hf.optim.Adagrad(model.parameters(), lr=1e-2, lr_decay=1e-4)
    """

    scratch_slots = 2

    def __init__(self, params: Iterable, lr: float = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None):
        # PyTorch's order, in which foreach is positional too
        super().__init__(params, {"lr": lr, "lr_decay": lr_decay, "weight_decay": weight_decay,
                                  "initial_accumulator_value": initial_accumulator_value,
                                  "eps": eps, "foreach": foreach, "maximize": maximize,
                                  "differentiable": differentiable, "fused": fused})

    def _check_group(self, group: dict) -> None:
        check_implementation_options("Adagrad", group)
        for name in ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"):
            group[name] = check_number("Adagrad", name, group[name])

    def _update_param(self, p, grad, state, group, scratch) -> None:
        a, b = scratch
        if not state:
            state["step"] = 0
            state["sum"] = full_like(p, group["initial_accumulator_value"])
        state["step"] = step = state["step"] + 1
        g = effective_grad(p, grad, group["weight_decay"], group["maximize"], a)
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        total = state["sum"]
        apply_inplace(E.mul, b, g, g)
        total.add_(b)
        std = b
        apply_inplace(E.sqrt, std, total)
        std.add_(group["eps"])
        apply_inplace(E.mul, a, g, -clr)
        a.div_(std)
        p.add_(a)
