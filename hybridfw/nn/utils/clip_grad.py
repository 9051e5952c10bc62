"""Gradient clipping: ``clip_grad_norm_`` (``get_total_norm`` + ``clip_grads_with_norm_``)
and ``clip_grad_value_`` (in place, no graph)."""
from __future__ import annotations

import warnings
from collections.abc import Iterable
from types import GeneratorType

from ...dtypes import float16, float32
from ...dygraph.autograd import no_grad
from ...dygraph.tensor import Tensor, tensor
from ...ops.composite import stack
from ...ops.composite_matrix import norm

__all__ = ["get_total_norm", "clip_grads_with_norm_", "clip_grad_norm_", "clip_grad_norm",
           "clip_grad_value_"]


def _check_foreach(name: str, foreach) -> None:
    # PyTorch's foreach picks a kernel; hybridfw has one, with the same result.
    if foreach is not None and not isinstance(foreach, bool):
        raise TypeError(f"{name}: foreach must be True, False or None, got {foreach!r}")


def _grads(parameters) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _tensor_norm(x: Tensor, norm_type: float) -> Tensor:
    # float16 sums overflow (100 gradients of 30 have a sum of squares of 90000 > 65504):
    # accumulate in float32, as PyTorch's vector_norm does, and return the input's dtype.
    if x.dtype == float16:
        return norm(x, norm_type, dtype=float32).astype(float16)
    return norm(x, norm_type)


def get_total_norm(tensors: Iterable[Tensor] | Tensor, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """The joint ``norm_type``-norm of ``tensors`` (a 0-d tensor): the norm of their
    per-tensor norms, as if all of them were concatenated into one vector (PyTorch's).

    ``inf`` is the largest absolute value, ``-inf`` the smallest, 0 the number of tensors with
    a non-zero element; float16 tensors are summed in float32 and the norm comes back in their
    dtype. ``foreach`` (PyTorch's choice of kernel) is accepted and changes nothing.

    Example::

        >>> import hybridfw as hf
        >>> float(hf.nn.utils.get_total_norm([hf.tensor([3.0]), hf.tensor([4.0])]))
        5.0
    """
    _check_foreach("get_total_norm", foreach)
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    device = tensors[0].device
    with no_grad():
        norms = [_tensor_norm(t.detach(), norm_type) for t in tensors]
        total = norms[0] if len(norms) == 1 else _tensor_norm(
            stack([n.to(device) for n in norms]), norm_type)
        if error_if_nonfinite and not bool(total.isfinite()):
            raise RuntimeError(f"get_total_norm: the total norm of order {norm_type} of the "
                               "gradients is non-finite, so it cannot be clipped; set "
                               "error_if_nonfinite=False to clip anyway")
    return total


def clip_grads_with_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float,
                          total_norm: Tensor, foreach: bool | None = None) -> None:
    """Scale the gradients in place by ``min(1, max_norm / (total_norm + 1e-6))``, given their
    precomputed ``total_norm`` (from :func:`get_total_norm`), without reading it back to the
    host.

    Example::

        >>> import hybridfw as hf
        >>> w = hf.nn.Parameter(hf.ones(4))
        >>> (w * 3).sum().backward()
        >>> norm = hf.nn.utils.get_total_norm([w.grad])
        >>> hf.nn.utils.clip_grads_with_norm_([w], 1.0, norm)
        >>> w.grad.tolist()
        [0.5, 0.5, 0.5, 0.5]
    """
    _check_foreach("clip_grads_with_norm_", foreach)
    grads = _grads(parameters)
    if not grads:
        return
    with no_grad():
        coef = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.to(g.device) if g.device is not coef.device else coef)


def clip_grad_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale the gradients in place so that their joint ``norm_type``-norm is at most
    ``max_norm``; returns the norm before clipping (a 0-d tensor).

    It is :func:`get_total_norm` of the gradients followed by :func:`clip_grads_with_norm_`:
    the scale factor is ``min(1, max_norm / (norm + 1e-6))``, applied without reading the norm
    back to the host. ``foreach`` (PyTorch's choice of kernel) is accepted and changes nothing.

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
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        is_generator = isinstance(parameters, GeneratorType)
        parameters = list(parameters)
        if is_generator and not parameters:
            warnings.warn("clip_grad_norm_: `parameters` is an empty generator, no gradient "
                          "clipping will occur", UserWarning, stacklevel=2)
    try:
        total = get_total_norm(_grads(parameters), norm_type, error_if_nonfinite)
    except RuntimeError as e:
        raise RuntimeError(str(e).replace("get_total_norm", "clip_grad_norm_", 1)) from None
    clip_grads_with_norm_(parameters, max_norm, total)
    return total


def clip_grad_norm(parameters: Iterable[Tensor] | Tensor, max_norm: float,
                   norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:
    """Deprecated alias of :func:`clip_grad_norm_` (warns ``FutureWarning``, as PyTorch)."""
    warnings.warn("`hf.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`hf.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every gradient in place to ``[-clip_value, clip_value]`` (``foreach`` is
    accepted, as in PyTorch, and changes nothing)."""
    _check_foreach("clip_grad_value_", foreach)
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)
