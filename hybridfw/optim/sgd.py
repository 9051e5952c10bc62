"""Stochastic gradient descent, with momentum, dampening, Nesterov and weight decay."""
from __future__ import annotations

from collections.abc import Iterable

from ..ops import elementwise as E
from ..ops.registry import apply_inplace
from .optimizer import Optimizer, check_implementation_options, check_number

__all__ = ["SGD"]


class SGD(Optimizer):
    r"""Stochastic gradient descent (PyTorch's update rule, step for step).

    With ``g`` the gradient (negated when ``maximize``)::

        g = g + weight_decay * p                      if weight_decay != 0
        b = g (first step), else momentum * b + (1 - dampening) * g
        g = g + momentum * b if nesterov else b       if momentum != 0
        p = p - lr * g

    Example::

        >>> opt = hf.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
        >>> loss.backward(); opt.step(); opt.zero_grad()
    """

    scratch_slots = 2

    def __init__(self, params: Iterable, lr: float = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None):
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov,
                                  "maximize": maximize, "foreach": foreach,
                                  "differentiable": differentiable, "fused": fused})

    state_after_step = True

    def _check_group(self, group: dict) -> None:
        check_implementation_options("SGD", group)
        for name in ("lr", "momentum", "weight_decay"):
            group[name] = check_number("SGD", name, group[name])
        group["dampening"] = check_number("SGD", "dampening", group["dampening"],
                                          low=float("-inf"))
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError(f"SGD: nesterov momentum requires momentum > 0 and dampening = 0, "
                             f"got momentum={group['momentum']!r}, "
                             f"dampening={group['dampening']!r}")

    def _update_param(self, p, grad, state, group, scratch) -> None:
        a, b = scratch
        weight_decay, momentum = group["weight_decay"], group["momentum"]
        d_p = grad
        if weight_decay != 0:
            apply_inplace(E.mul, a, p, weight_decay)
            apply_inplace(E.sub if group["maximize"] else E.add, a, a, grad)
            d_p = a
        elif group["maximize"]:
            apply_inplace(E.neg, a, grad)
            d_p = a
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = d_p.clone()
            else:
                buf.mul_(momentum)
                dampening = group["dampening"]
                if dampening == 0:
                    buf.add_(d_p)
                else:
                    apply_inplace(E.mul, b, d_p, 1 - dampening)
                    buf.add_(b)
            if group["nesterov"]:
                apply_inplace(E.mul, b, buf, momentum)
                apply_inplace(E.add, b, d_p, b)
                d_p = b
            else:
                d_p = buf
        step = d_p if d_p is a or d_p is b else a
        apply_inplace(E.mul, step, d_p, -group["lr"])
        p.add_(step)
