"""RAdam: Adam with the variance of its adaptive step size rectified."""
from __future__ import annotations

from collections.abc import Iterable

from ..ops import elementwise as E
from ..ops.registry import apply_inplace
from .adam import Adam, adam_moments
from .optimizer import Optimizer

__all__ = ["RAdam"]


class RAdam(Optimizer):
    r"""RAdam (PyTorch's update rule, step for step), with L2 ``weight_decay`` or, with
    ``decoupled_weight_decay=True``, AdamW's decoupled decay.

    Per parameter, at step ``t`` (counted per parameter from 1), with ``g`` the gradient::

        g = g + weight_decay * p                  (decoupled: p = p * (1 - lr * wd))
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)
        p = p - m / (1 - beta1**t) * lr * sqrt(1 - beta2**t) / (sqrt(v) + eps) * r_t
                                                  if rho_t > 5, with the rectification
            r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
        p = p - m / (1 - beta1**t) * lr           otherwise (SGD with momentum while the
                                                  variance estimate is unreliable)

    Example::

        >>> opt = hf.optim.RAdam(model.parameters(), lr=1e-3)
    """

    scratch_slots = 2

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):
        super().__init__(params, {
            "lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
            "decoupled_weight_decay": decoupled_weight_decay, "foreach": foreach,
            "maximize": maximize, "capturable": capturable, "differentiable": differentiable})

    def _check_group(self, group: dict) -> None:
        Adam._check_group(self, group)  # the same options, checked the same way

    def _update_param(self, p, grad, state, group, scratch) -> None:
        a, b = scratch
        step, _ = adam_moments(p, grad, state, group, a, b)
        lr, (beta1, beta2) = group["lr"], group["betas"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
        update = a  # g is no longer needed
        apply_inplace(E.div, update, exp_avg, bias_correction1)
        update.mul_(lr)
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                    / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            apply_inplace(E.sqrt, b, exp_avg_sq)
            b.add_(group["eps"])
            apply_inplace(E.div, b, bias_correction2 ** 0.5, b)
            update.mul_(b)
            update.mul_(rect)
        p.sub_(update)
