"""``hf.nn.Parameter``: a Tensor that a :class:`~hybridfw.nn.Module` registers as trainable."""
from __future__ import annotations

from ..dygraph.tensor import Tensor, tensor

__all__ = ["Parameter"]

_TENSOR_SLOTS = tuple(s for s in Tensor.__slots__ if s != "__weakref__")


class Parameter(Tensor):
    """A tensor that is a module parameter: assigning one to a Module attribute registers it.

    ``Parameter(t)`` shares ``t``'s storage (no copy) and requires grad by default.

    Example::

        >>> import hybridfw as hf
        >>> w = hf.nn.Parameter(hf.zeros(2, 3))
        >>> w.requires_grad, w.shape
        (True, (2, 3))
    """

    __slots__ = ()

    def __init__(self, data=None, requires_grad: bool = True):
        if data is None:
            data = tensor([])
        elif not isinstance(data, Tensor):
            data = tensor(data)
        # Take every slot from a detached alias, so the Parameter shares the storage and
        # stays complete whatever bookkeeping slots the Tensor grows.
        alias = data.detach()
        for slot in _TENSOR_SLOTS:
            setattr(self, slot, getattr(alias, slot))
        self.requires_grad = requires_grad

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        p = Parameter(tensor(self), requires_grad=self._rg)
        if self.grad is not None:
            p.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = p
        return p
