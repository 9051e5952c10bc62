"""Gradient clipping: ``clip_grad_norm_`` and ``clip_grad_value_`` (in place, no graph)."""
from __future__ import annotations

import math
from collections.abc import Iterable

from ...dygraph.autograd import no_grad
from ...dygraph.tensor import Tensor, tensor
from ...ops.composite import stack

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _check_foreach(name: str, foreach) -> None:
    # PyTorch's foreach picks a kernel; hybridfw has one, with the same result.
    if foreach is not None and not isinstance(foreach, bool):
        raise TypeError(f"{name}: foreach must be True, False or None, got {foreach!r}")


def _grads(parameters) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale the gradients in place so that their joint ``norm_type``-norm is at most
    ``max_norm``; returns the norm before clipping (a 0-d tensor).

    The joint norm is the norm of the vector of all gradients concatenated. The scale factor is
    ``min(1, max_norm / (norm + 1e-6))``, applied without reading the norm back to the host.
    ``foreach`` (PyTorch's choice of kernel) is accepted and changes nothing.

    Example::

        >>> import hybridfw as hf
        >>> w = hf.nn.Parameter(hf.ones(4))
        >>> (w * 3).sum().backward()
        >>> float(hf.nn.utils.clip_grad_norm_([w], max_norm=1.0))
        6.0
        >>> round(float((w.grad * w.grad).sum().sqrt()), 4)
        1.0
    """
    _check_foreach("clip_grad_norm_", foreach)
    grads = _grads(parameters)
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    if not grads:
        return tensor(0.0)
    device = grads[0].device
    with no_grad():
        if norm_type == math.inf:
            parts = [g.detach().abs().amax() for g in grads]
            total = parts[0] if len(parts) == 1 else stack(
                [p.to(device) for p in parts]).amax()
        elif norm_type == 0.0:  # PyTorch's: the 0-"norm" of the per-gradient 0-norms
            parts = [(g.detach() != 0).any().float() for g in grads]
            total = parts[0] if len(parts) == 1 else stack([p.to(device) for p in parts]).sum()
        else:
            if norm_type == 2.0:
                parts = [(g.detach() * g.detach()).sum() for g in grads]
            elif norm_type == 1.0:
                parts = [g.detach().abs().sum() for g in grads]
            else:
                parts = [(g.detach().abs() ** norm_type).sum() for g in grads]
            total = parts[0] if len(parts) == 1 else stack([p.to(device) for p in parts]).sum()
            total = total.sqrt() if norm_type == 2.0 else (
                total if norm_type == 1.0 else total ** (1.0 / norm_type))
        if error_if_nonfinite and not bool(total.isfinite()):
            raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the "
                               "gradients is non-finite, so it cannot be clipped; set "
                               "error_if_nonfinite=False to clip anyway")
        coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.to(g.device) if g.device is not device else coef)
    return total


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every gradient in place to ``[-clip_value, clip_value]`` (``foreach`` is
    accepted, as in PyTorch, and changes nothing)."""
    _check_foreach("clip_grad_value_", foreach)
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)
