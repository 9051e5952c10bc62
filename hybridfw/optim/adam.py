"""Adam and AdamW (decoupled weight decay), with AMSGrad."""
from __future__ import annotations

from collections.abc import Iterable

from ..ops import elementwise as E
from ..ops.factories import zeros_like
from ..ops.registry import apply_inplace
from .optimizer import Optimizer, check_implementation_options, check_number

__all__ = ["Adam", "AdamW", "lerp_"]


def lerp_(target, end, weight: float, tmp) -> None:
    """``target += weight * (end - target)`` in place, rounded as PyTorch's ``lerp_`` does
    (from ``end`` backwards when ``weight >= 0.5``); ``tmp`` is scratch space."""
    apply_inplace(E.sub, tmp, end, target)
    if abs(weight) < 0.5:
        apply_inplace(E.mul, tmp, tmp, weight)
        target.add_(tmp)
    else:
        apply_inplace(E.mul, tmp, tmp, 1 - weight)
        apply_inplace(E.sub, target, end, tmp)


def effective_grad(p, grad, weight_decay: float, maximize: bool, out):
    """The gradient an update uses: negated when ``maximize``, plus ``weight_decay * p``
    (L2 penalty); ``grad`` itself when neither applies, else written into ``out``."""
    if weight_decay != 0:
        apply_inplace(E.mul, out, p, weight_decay)
        apply_inplace(E.sub if maximize else E.add, out, out, grad)
        return out
    if maximize:
        apply_inplace(E.neg, out, grad)
        return out
    return grad


def adam_moments(p, grad, state, group, a, b, extra=()) -> tuple:
    """What Adam, NAdam and RAdam share, for one parameter: the state made on the first step
    (``step``, then the ``extra`` (name, value) pairs, then ``exp_avg`` and ``exp_avg_sq``, in
    PyTorch's order), the step counted, decoupled decay applied to ``p``, and both moments
    updated with the effective gradient (``a`` and ``b``: scratch; ``a`` holds that gradient
    when it differs from ``grad``). Returns the step and that gradient."""
    if not state:
        state["step"] = 0
        state.update(extra)
        state["exp_avg"] = zeros_like(p)
        state["exp_avg_sq"] = zeros_like(p)
    lr, weight_decay, (beta1, beta2) = group["lr"], group["weight_decay"], group["betas"]
    state["step"] = step = state["step"] + 1
    if group["decoupled_weight_decay"]:
        if weight_decay != 0:
            p.mul_(1 - lr * weight_decay)
        weight_decay = 0
    g = effective_grad(p, grad, weight_decay, group["maximize"], a)
    lerp_(state["exp_avg"], g, 1 - beta1, b)
    exp_avg_sq = state["exp_avg_sq"]
    exp_avg_sq.mul_(beta2)
    apply_inplace(E.mul, b, g, 1 - beta2)
    b.mul_(g)
    exp_avg_sq.add_(b)
    return step, g


class Adam(Optimizer):
    r"""Adam (PyTorch's update rule, step for step), with ``amsgrad`` and L2 ``weight_decay``
(or, with ``decoupled_weight_decay=True``, AdamW's decoupled decay, as in PyTorch).

    Per parameter, at step ``t`` (counted per parameter from 1), with ``g`` the gradient::

        g = g + weight_decay * p                  (AdamW instead: p = p * (1 - lr * wd))
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        v_max = max(v_max, v)                     if amsgrad (and v_max replaces v below)
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    Example::

        >>> opt = hf.optim.Adam(model.parameters(), lr=1e-3)
    """

    scratch_slots = 2

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps,
                                  "weight_decay": weight_decay, "amsgrad": amsgrad,
                                  "foreach": foreach, "maximize": maximize,
                                  "capturable": capturable, "differentiable": differentiable,
                                  "fused": fused,
                                  "decoupled_weight_decay": decoupled_weight_decay})

    def _check_group(self, group: dict) -> None:
        name = self._name
        check_implementation_options(name, group)
        if not isinstance(group["decoupled_weight_decay"], bool):
            raise TypeError(f"{name}: decoupled_weight_decay must be True or False, got "
                            f"{group['decoupled_weight_decay']!r}")
        for option in ("lr", "eps", "weight_decay"):
            group[option] = check_number(name, option, group[option])
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"{name}: betas must be a pair (beta1, beta2), got {betas!r}")
        group["betas"] = tuple(check_number(name, f"betas[{i}]", beta, high=1.0,
                                            high_inclusive=False)
                               for i, beta in enumerate(betas))

    def _update_param(self, p, grad, state, group, scratch) -> None:
        a, b = scratch
        fresh = not state
        step, _ = adam_moments(p, grad, state, group, a, b)
        if fresh and group["amsgrad"]:
            state["max_exp_avg_sq"] = zeros_like(p)
        lr, (beta1, beta2) = group["lr"], group["betas"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]

        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = bias_correction2 ** 0.5
        if group["amsgrad"]:
            max_sq = state.get("max_exp_avg_sq")
            if max_sq is None:  # amsgrad switched on after the state was made (e.g. loaded)
                max_sq = state["max_exp_avg_sq"] = exp_avg_sq.clone()
            apply_inplace(E.maximum, max_sq, max_sq, exp_avg_sq)
            exp_avg_sq = max_sq
        denom = b
        apply_inplace(E.sqrt, denom, exp_avg_sq)
        denom.div_(bias_correction2_sqrt)
        denom.add_(group["eps"])
        apply_inplace(E.mul, a, exp_avg, -step_size)
        a.div_(denom)
        p.add_(a)


class AdamW(Adam):
    r"""Adam with decoupled weight decay: ``p = p * (1 - lr * weight_decay)`` before the Adam
    step, instead of adding ``weight_decay * p`` to the gradient.

    Example::

        >>> opt = hf.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    """

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
