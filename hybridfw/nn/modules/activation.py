"""Activation layers: thin modules over ``hf.nn.functional``."""
from __future__ import annotations

from ...ops.factories import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["ReLU", "LeakyReLU", "PReLU", "ELU", "Softplus", "Hardtanh", "ReLU6", "GELU", "SiLU",
           "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Mish", "Hardswish", "Hardsigmoid", "SELU",
           "CELU", "GLU", "Softmin", "Softsign", "Tanhshrink", "Threshold", "LogSigmoid"]


class ReLU(Module):
    """``max(x, 0)`` elementwise.

    Example::

        >>> import hybridfw as hf
        >>> hf.nn.ReLU()(hf.tensor([-1.0, 2.0])).tolist()
        [0.0, 2.0]
    """

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.relu(input, inplace=self.inplace) if self.inplace else F.relu(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """``x`` where ``x > 0``, else ``negative_slope * x``.

    Example::

        >>> import hybridfw as hf
        >>> hf.nn.LeakyReLU(0.25)(hf.tensor([-1.0, 2.0])).tolist()
        [-0.25, 2.0]
    """

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class PReLU(Module):
    """``x`` where ``x > 0``, else ``weight * x`` with a learned ``weight`` of
    ``num_parameters`` slopes (1: shared by all channels, or one per channel of dim 1), each
    starting at ``init``.

    Example::

        >>> import hybridfw as hf
        >>> hf.nn.PReLU()(hf.tensor([-1.0, 2.0])).tolist()
        [-0.25, 2.0]
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(empty(num_parameters, dtype=dtype, device=device))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input):  # noqa: A002
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class ELU(Module):
    """``x`` where ``x > 0``, else ``alpha (exp(x) - 1)``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    """``log(1 + exp(beta x)) / beta`` (``x`` where ``beta x > threshold``)."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):  # noqa: A002
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """``input`` clipped to ``[min_val, max_val]``."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        if min_val > max_val:
            raise ValueError(f"{type(self).__name__}: min_val ({min_val}) cannot be greater "
                             f"than max_val ({max_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + \
            (", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    """``min(max(x, 0), 6)``."""

    def __init__(self, inplace: bool = False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """Gaussian error linear unit; ``approximate='tanh'`` for the tanh approximation."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):  # noqa: A002
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """``x * sigmoid(x)``."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.silu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, input):  # noqa: A002
        return F.tanh(input)


class Sigmoid(Module):
    """Logistic sigmoid ``1 / (1 + exp(-x))``."""

    def forward(self, input):  # noqa: A002
        return F.sigmoid(input)


class _InplaceActivation(Module):
    """An activation ``F.<_function>(input, inplace=...)`` without other arguments."""

    _function = None

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return type(self)._function(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Mish(_InplaceActivation):
    """``x * tanh(softplus(x))``."""

    _function = F.mish


class Hardswish(_InplaceActivation):
    """``x * relu6(x + 3) / 6``."""

    _function = F.hardswish

    def extra_repr(self) -> str:  # (PyTorch's repr leaves inplace out here)
        return ""


class Hardsigmoid(_InplaceActivation):
    """``relu6(x + 3) / 6``."""

    _function = F.hardsigmoid

    def extra_repr(self) -> str:  # (PyTorch's repr leaves inplace out here)
        return ""


class SELU(_InplaceActivation):
    """Scaled ELU with the self-normalizing constants.

    Example::

        >>> import hybridfw as hf
        >>> round(hf.nn.SELU()(hf.tensor([1.0])).item(), 4)
        1.0507
    """

    _function = F.selu


class CELU(Module):
    """``x`` where ``x > 0``, else ``alpha * (exp(x / alpha) - 1)``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class GLU(Module):
    """Gated linear unit: ``a * sigmoid(b)`` for the two halves of the input along ``dim``."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input):  # noqa: A002
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmin(Module):
    """``softmax(-x)`` along ``dim``."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):  # noqa: A002
        return F.softmin(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softsign(Module):
    """``x / (1 + |x|)``."""

    def forward(self, input):  # noqa: A002
        return F.softsign(input)


class Tanhshrink(Module):
    """``x - tanh(x)``."""

    def forward(self, input):  # noqa: A002
        return F.tanhshrink(input)


class Threshold(Module):
    """``x`` where ``x > threshold``, else ``value``."""

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + \
            (", inplace=True" if self.inplace else "")


class LogSigmoid(Module):
    """``log(sigmoid(x))``, computed stably."""

    def forward(self, input):  # noqa: A002
        return F.logsigmoid(input)


class Softmax(Module):
    """Softmax along ``dim``."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):  # noqa: A002
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log of softmax along ``dim``, computed stably."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):  # noqa: A002
        return F.log_softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
