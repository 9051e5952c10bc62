"""Eager mode: the Tensor, define-by-run autograd, and the eager interpreter of the op registry."""
from . import eager  # noqa: F401 - registers the eager interpreter as the default
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .tensor import Tensor, as_tensor, backward, from_numpy, grad, tensor

__all__ = ["Tensor", "tensor", "as_tensor", "from_numpy", "backward", "grad", "no_grad",
           "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode"]
