"""NAdam: Adam with Nesterov momentum and a momentum schedule."""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..dtypes import float64, get_default_dtype
from ..ops import elementwise as E
from ..ops.registry import apply_inplace
from .adam import Adam, adam_moments
from .optimizer import Optimizer, check_number

__all__ = ["NAdam"]


class NAdam(Optimizer):
    r"""NAdam (PyTorch's update rule, step for step), with L2 ``weight_decay`` or, with
    ``decoupled_weight_decay=True``, AdamW's decoupled decay.

    Per parameter, at step ``t`` (counted per parameter from 1), with ``g`` the gradient::

        g = g + weight_decay * p                  (decoupled: p = p * (1 - lr * wd))
        mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay)),  prod_t = mu_1 * ... * mu_t
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        denom = sqrt(v / (1 - beta2**t)) + eps
        p = p - lr * (1 - mu_t) / (1 - prod_t) * g / denom
              - lr * mu_{t+1} / (1 - prod_t * mu_{t+1}) * m / denom

    ``state['mu_product']`` (``prod_t``) is a Python float, rounded to float32 at each step
    while the default dtype is float32, as PyTorch's (a 0-d tensor of that dtype there).

    Example::

        >>> opt = hf.optim.NAdam(model.parameters(), lr=2e-3)
    """

    scratch_slots = 3

    def __init__(self, params: Iterable, lr: float = 2e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):
        super().__init__(params, {
            "lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
            "momentum_decay": momentum_decay, "decoupled_weight_decay": decoupled_weight_decay,
            "foreach": foreach, "maximize": maximize, "capturable": capturable,
            "differentiable": differentiable})

    def _check_group(self, group: dict) -> None:
        Adam._check_group(self, group)  # the same options, checked the same way
        group["momentum_decay"] = check_number("NAdam", "momentum_decay",
                                               group["momentum_decay"])

    def _update_param(self, p, grad, state, group, scratch) -> None:
        a, b, denom = scratch
        step, g = adam_moments(p, grad, state, group, a, b, (("mu_product", 1.0),))
        lr, (beta1, beta2) = group["lr"], group["betas"]
        bias_correction2 = 1 - beta2 ** step
        momentum_decay = group["momentum_decay"]
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        state["mu_product"] = mu_product = _scalar_product(state["mu_product"], mu)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        apply_inplace(E.div, denom, exp_avg_sq, bias_correction2)
        apply_inplace(E.sqrt, denom, denom)
        denom.add_(group["eps"])
        mu_product_next = mu_product * mu_next
        apply_inplace(E.mul, b, g, -lr * (1.0 - mu) / (1.0 - mu_product))
        b.div_(denom)
        p.add_(b)
        apply_inplace(E.mul, b, exp_avg, (-lr * mu_next) / (1.0 - mu_product_next))
        b.div_(denom)
        p.add_(b)

    def _restore_state_value(self, param, index, name: str, value):
        if name == "mu_product":  # PyTorch's 0-d tensor
            return float(value.item() if hasattr(value, "item") else value)
        return super()._restore_state_value(param, index, name, value)


def _scalar_product(product: float, factor: float) -> float:
    """``product * factor`` in PyTorch's scalar dtype (the default dtype: float32 unless it
    was set to float64), whose rounding reaches every later step."""
    if get_default_dtype() is float64:
        return product * factor
    return float(np.float32(product) * np.float32(factor))
