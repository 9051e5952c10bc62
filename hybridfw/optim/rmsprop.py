"""RMSprop, plain or centered, with momentum and weight decay."""
from __future__ import annotations

from collections.abc import Iterable

from ..ops import elementwise as E
from ..ops.factories import zeros_like
from ..ops.registry import apply_inplace
from .adam import effective_grad, lerp_
from .optimizer import Optimizer, check_implementation_options, check_number

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    r"""RMSprop (PyTorch's update rule, step for step).

    With ``g`` the gradient (negated when ``maximize``)::

        g = g + weight_decay * p                      if weight_decay != 0
        s = alpha * s + (1 - alpha) * g * g
        avg = sqrt(s) + eps, or when centered:
              a = alpha * a + (1 - alpha) * g;  avg = sqrt(s - a * a) + eps
        b = momentum * b + g / avg;  p = p - lr * b   if momentum > 0
        p = p - lr * g / avg                          otherwise

    Example::

        >>> opt = hf.optim.RMSprop(model.parameters(), lr=1e-2, momentum=0.9, centered=True)
    """

    scratch_slots = 2

    def __init__(self, params: Iterable, lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0, momentum: float = 0,
                 centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False):
        # PyTorch's order, in which capturable .. differentiable are positional too
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps,
                                  "weight_decay": weight_decay, "momentum": momentum,
                                  "centered": centered, "capturable": capturable,
                                  "foreach": foreach, "maximize": maximize,
                                  "differentiable": differentiable})

    def _check_group(self, group: dict) -> None:
        check_implementation_options("RMSprop", group)
        for name in ("lr", "alpha", "eps", "weight_decay", "momentum"):
            group[name] = check_number("RMSprop", name, group[name])

    def _update_param(self, p, grad, state, group, scratch) -> None:
        a, b = scratch
        momentum, alpha = group["momentum"], group["alpha"]
        if not state:
            state["step"] = 0
            state["square_avg"] = zeros_like(p)
            if momentum > 0:
                state["momentum_buffer"] = zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = zeros_like(p)
        state["step"] += 1
        g = effective_grad(p, grad, group["weight_decay"], group["maximize"], a)
        square_avg = state["square_avg"]
        square_avg.mul_(alpha)
        apply_inplace(E.mul, b, g, 1 - alpha)
        b.mul_(g)
        square_avg.add_(b)
        avg = b
        if group["centered"]:
            grad_avg = state.get("grad_avg")
            if grad_avg is None:  # centered switched on after the state was made
                grad_avg = state["grad_avg"] = zeros_like(p)
            lerp_(grad_avg, g, 1 - alpha, avg)
            apply_inplace(E.mul, avg, grad_avg, -1)
            avg.mul_(grad_avg)
            apply_inplace(E.add, avg, square_avg, avg)
            apply_inplace(E.sqrt, avg, avg)
        else:
            apply_inplace(E.sqrt, avg, square_avg)
        avg.add_(group["eps"])
        if momentum > 0:
            buf = state.get("momentum_buffer")
            if buf is None:  # momentum switched on after the state was made
                buf = state["momentum_buffer"] = zeros_like(p)
            buf.mul_(momentum)
            apply_inplace(E.div, a, g, avg)
            buf.add_(a)
            apply_inplace(E.mul, a, buf, -group["lr"])
        else:
            apply_inplace(E.mul, a, g, -group["lr"])
            a.div_(avg)
        p.add_(a)
