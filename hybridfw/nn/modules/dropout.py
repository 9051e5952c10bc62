"""Dropout: zeroes elements with probability ``p`` in training mode, identity in eval."""
from __future__ import annotations

from .. import functional as F
from .module import Module

__all__ = ["Dropout", "Dropout2d"]


class Dropout(Module):
    """In training, zero each element with probability ``p`` and scale the rest by
    ``1 / (1 - p)``; in eval mode, return the input unchanged.

    Example::

        >>> import hybridfw as hf
        >>> drop = hf.nn.Dropout(0.5).eval()
        >>> drop(hf.ones(3)).tolist()
        [1.0, 1.0, 1.0]
    """

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: probability has to be between 0 and 1, "
                             f"but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout2d(Dropout):
    """In training, zero whole channels (each ``(n, c)`` feature map of an ``(N, C, H, W)``
    input) with probability ``p`` and scale the rest by ``1 / (1 - p)``; identity in eval mode.

    Example::

        >>> import hybridfw as hf
        >>> hf.nn.Dropout2d(0.5).eval()(hf.ones(1, 2, 2, 2)).sum().item()
        8.0
    """

    def forward(self, input):  # noqa: A002
        return F.dropout2d(input, self.p, self.training, self.inplace)
