"""``parameters_to_vector`` / ``vector_to_parameters``: a model's parameters as one flat vector
(for second-order methods, evolution strategies, ...) and back."""
from __future__ import annotations

from collections.abc import Iterable

from ...dygraph.tensor import Tensor
from ...ops.composite import cat

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_same_device(name: str, param: Tensor, device):
    if device is not None and param.device != device:
        raise TypeError(f"{name}: found two parameters on different devices ({device} and "
                        f"{param.device}); this is not supported")
    return param.device


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated into one vector (a new tensor, on the graph).

    Example::

        >>> import hybridfw as hf
        >>> hf.nn.utils.parameters_to_vector(hf.nn.Linear(2, 1).parameters()).shape
        (3,)
    """
    device = None
    flat = []
    for param in parameters:
        device = _check_same_device("parameters_to_vector", param, device)
        flat.append(param.reshape(-1))
    return cat(flat)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Make each parameter's ``.data`` the next slice of ``vec`` (views of ``vec``, reshaped),
    the inverse of :func:`parameters_to_vector`.

    Example::

        >>> import hybridfw as hf
        >>> lin = hf.nn.Linear(2, 1)
        >>> hf.nn.utils.vector_to_parameters(hf.arange(3.0), lin.parameters())
        >>> lin.weight.tolist(), lin.bias.tolist()
        ([[0.0, 1.0]], [2.0])
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters: expected a hybridfw Tensor, but got "
                        f"{type(vec).__name__}")
    device = None
    pointer = 0
    for param in parameters:
        device = _check_same_device("vector_to_parameters", param, device)
        n = param.numel()
        param.data = vec[pointer:pointer + n].view(param.shape).data
        pointer += n
