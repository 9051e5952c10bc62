"""Checking autograd against finite differences (what every gradient test in the suite uses).

Example::

    >>> import hybridfw as hf
    >>> x = hf.randn(3, 4, dtype=hf.float64, requires_grad=True)
    >>> hf.autograd.gradcheck(lambda t: (t.tanh() * t).sum(dim=1), [x])
    True
"""
from __future__ import annotations

import numpy as np

from .autograd import no_grad
from .tensor import Tensor, grad, tensor

__all__ = ["gradcheck", "GradcheckError"]


class GradcheckError(AssertionError):
    """Autograd and finite differences disagree."""


def _outputs(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


def gradcheck(func, inputs, *, eps: float = 1e-6, rtol: float = 1e-6, atol: float = 1e-8,
              seed: int = 0) -> bool:
    """Compare the gradients of ``func(*inputs)`` with a central finite difference.

    One random direction over all ``inputs`` at once (as JAX's ``check_grads``): the analytic
    directional derivative ``<grad(sum(w * out)), v>`` must match
    ``(f(x + eps v) - f(x - eps v)) / (2 eps)`` for a random output weighting ``w``. Inputs
    should be float64 leaves that require grad; they are shifted in place (and restored) so
    functions that close over them work too. Returns True or raises :class:`GradcheckError`.
    """
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor) or not t.requires_grad:
            raise ValueError(f"gradcheck: input {i} must be a tensor that requires grad")
    rng = np.random.default_rng(seed)
    outs = _outputs(func(*inputs))
    weights = [tensor(rng.standard_normal(o.shape), dtype=o.dtype) for o in outs]
    total = None
    for o, w in zip(outs, weights):
        if o.requires_grad:
            term = (o * w).sum()
            total = term if total is None else total + term
    if total is None:
        raise GradcheckError("gradcheck: no output requires grad")
    grads = grad(total, inputs, allow_unused=True)
    directions = [rng.standard_normal(t.shape) for t in inputs]
    analytic = sum(0.0 if g is None else float((g.detach().numpy() * d).sum())
                   for g, d in zip(grads, directions))

    def value_at(step: float) -> float:
        with no_grad():
            shifts = [tensor(step * d, dtype=t.dtype) for t, d in zip(inputs, directions)]
            for t, s in zip(inputs, shifts):
                t.add_(s)
            try:
                return sum(float((o * w).sum()) for o, w in
                           zip(_outputs(func(*inputs)), weights))
            finally:
                for t, s in zip(inputs, shifts):
                    t.sub_(s)

    numeric = (value_at(eps) - value_at(-eps)) / (2 * eps)
    if not abs(analytic - numeric) <= atol + rtol * abs(numeric):
        raise GradcheckError(f"gradcheck: directional derivative from autograd {analytic!r} "
                             f"differs from finite differences {numeric!r}")
    return True
