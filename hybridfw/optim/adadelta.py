"""Adadelta: step sizes from running averages of squared gradients and squared updates."""
from __future__ import annotations

from collections.abc import Iterable

from ..ops import elementwise as E
from ..ops.factories import zeros_like
from ..ops.registry import apply_inplace
from .adam import effective_grad
from .optimizer import Optimizer, check_implementation_options, check_number

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    r"""Adadelta (PyTorch's update rule, step for step).

    With ``g`` the gradient (negated when ``maximize``)::

        g = g + weight_decay * p                        if weight_decay != 0
        v = rho * v + (1 - rho) * g * g                 (square_avg)
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta         (acc_delta)
        p = p - lr * delta

    Example::

        >>> opt = hf.optim.Adadelta(model.parameters(), lr=1.0, rho=0.9)
    """

    scratch_slots = 3

    def __init__(self, params: Iterable, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False):
        super().__init__(params, {"lr": lr, "rho": rho, "eps": eps,
                                  "weight_decay": weight_decay, "maximize": maximize,
                                  "capturable": capturable, "foreach": foreach,
                                  "differentiable": differentiable})

    def _check_group(self, group: dict) -> None:
        check_implementation_options("Adadelta", group)
        group["rho"] = check_number("Adadelta", "rho", group["rho"], high=1.0)
        for name in ("lr", "eps", "weight_decay"):
            group[name] = check_number("Adadelta", name, group[name])

    def _update_param(self, p, grad, state, group, scratch) -> None:
        a, b, delta = scratch
        rho = group["rho"]
        if not state:
            state["step"] = 0
            state["square_avg"] = zeros_like(p)
            state["acc_delta"] = zeros_like(p)
        state["step"] += 1
        g = effective_grad(p, grad, group["weight_decay"], group["maximize"], a)
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho)
        apply_inplace(E.mul, b, g, 1 - rho)
        b.mul_(g)
        square_avg.add_(b)
        std = b
        apply_inplace(E.add, std, square_avg, group["eps"])
        apply_inplace(E.sqrt, std, std)
        apply_inplace(E.add, delta, acc_delta, group["eps"])
        apply_inplace(E.sqrt, delta, delta)
        delta.div_(std)
        delta.mul_(g)
        acc_delta.mul_(rho)
        apply_inplace(E.mul, b, delta, 1 - rho)
        b.mul_(delta)
        acc_delta.add_(b)
        apply_inplace(E.mul, b, delta, -group["lr"])
        p.add_(b)
