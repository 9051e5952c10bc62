"""Linear layers and shape helpers: Linear, Identity, Flatten, Unflatten."""
from __future__ import annotations


from ...ops.factories import empty
from .. import functional as F
from ..functional.convolution import require_tensor
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Linear", "Identity", "Flatten", "Unflatten", "NonDynamicallyQuantizableLinear"]


class Identity(Module):
    """Returns its input unchanged (arguments are accepted and ignored, like PyTorch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):  # noqa: A002 - PyTorch's argument name
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape ``(out_features, in_features)``.

    Initialised like PyTorch: ``kaiming_uniform_(a=sqrt(5))`` weight, bias from
    ``U(-1/sqrt(in_features), 1/sqrt(in_features))``.

    Example::

        >>> import hybridfw as hf
        >>> fc = hf.nn.Linear(4, 3)
        >>> fc(hf.ones(2, 4)).shape
        (2, 3)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.weight = Parameter(empty(out_features, in_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.fan_in_uniform_(self.weight, self.bias)

    def forward(self, input):  # noqa: A002
        require_tensor("linear", "input", input)
        n = input.shape[-1] if input.ndim else None
        if n != self.in_features and n != -1:
            raise ValueError(f"Linear: expected input with last dim in_features="
                             f"{self.in_features}, got input of shape {tuple(input.shape)}")
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")



class NonDynamicallyQuantizableLinear(Linear):
    """A :class:`Linear` under PyTorch's name for MultiheadAttention's ``out_proj`` (the same
    layer; the name shows in ``repr``)."""

class Flatten(Module):
    """Flattens dims ``start_dim..end_dim`` into one (default: all but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):  # noqa: A002
        require_tensor("Flatten", "input", input)
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dim ``dim`` into ``unflattened_size``."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):  # noqa: A002
        dim = self.dim % input.ndim
        shape = tuple(input.shape)
        return input.reshape(shape[:dim] + self.unflattened_size + shape[dim + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
