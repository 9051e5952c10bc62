"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""
from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping

from ...dygraph.tensor import Tensor
from ..parameter import Parameter
from .module import Module

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _renumber(container, modules) -> None:
    """Re-register ``modules`` under the names 0..n-1, in order."""
    container._modules.clear()
    for i, m in enumerate(modules):
        container.add_module(str(i), m)


def _index(name: str, idx, n: int) -> int:
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"{name}: index {idx} is out of range for length {n}")
    return idx % n


class Sequential(Module):
    """Runs its modules in order, each one's output the next one's input.

    Built from modules (named ``'0'``, ``'1'``, ...) or from an OrderedDict of named ones.

    Example::

        >>> import hybridfw as hf
        >>> net = hf.nn.Sequential(hf.nn.Linear(4, 8), hf.nn.ReLU(), hf.nn.Linear(8, 1))
        >>> net(hf.ones(2, 4)).shape
        (2, 1)
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index("Sequential", idx, len(self))]

    def __setitem__(self, idx, module: Module) -> None:
        key = list(self._modules)[_index("Sequential", idx, len(self))]
        setattr(self, key, module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        for key in (keys[idx] if isinstance(idx, slice) else
                    [keys[_index("Sequential", idx, len(keys))]]):
            del self._modules[key]
        # Keep names 0..n-1 when they were positional.
        if all(k.isdigit() for k in self._modules):
            items = list(self._modules.values())
            _renumber(self, items)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> Sequential:
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        items = list(self._modules.values())
        n = len(items)
        if not -n <= index <= n:
            raise IndexError(f"Sequential.insert: index {index} is out of range for length {n}")
        items.insert(index, module)
        _renumber(self, items)
        return self

    def pop(self, index: int | slice) -> Module:
        """Remove the module at ``index`` and return it."""
        module = self[index]
        del self[index]
        return module

    def __add__(self, other: Sequential) -> Sequential:
        """A new Sequential of this one's modules then ``other``'s (the same objects)."""
        if not isinstance(other, Sequential):
            raise ValueError(f"Sequential: + supports only Sequential operands, got "
                             f"{type(other).__name__}")
        return Sequential(*self, *other)

    def __iadd__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(f"Sequential: += supports only Sequential operands, got "
                             f"{type(other).__name__}")
        return self.extend(list(other))

    def __mul__(self, other: int) -> Sequential:
        """A new Sequential holding this one's modules ``other`` times over. As in PyTorch, the
        copies are the same module objects, so they share parameters."""
        return Sequential(*(list(self) * _repeat_count(self, other)))

    __rmul__ = __mul__

    def __imul__(self, other: int) -> Sequential:
        return self.extend(list(self) * (_repeat_count(self, other) - 1))

    def forward(self, input):  # noqa: A002
        for module in self._modules.values():
            input = module(input)  # noqa: A001
        return input


def _repeat_count(seq: Sequential, other) -> int:
    if not isinstance(other, int):
        raise TypeError(f"unsupported operand type(s) for *: {type(seq).__name__} and "
                        f"{type(other).__name__}")
    if other <= 0:
        raise ValueError(f"Sequential: non-positive multiplication factor {other}")
    return other


class ModuleList(Module):
    """A list of modules, registered so their parameters are the container's.

    Example::

        >>> import hybridfw as hf
        >>> layers = hf.nn.ModuleList([hf.nn.Linear(2, 2) for _ in range(3)])
        >>> len(list(layers.parameters()))
        6
    """

    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index("ModuleList", idx, len(self)))]

    def __setitem__(self, idx, module: Module) -> None:
        self.add_module(str(_index("ModuleList", idx, len(self))), module)

    def __delitem__(self, idx) -> None:
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[_index("ModuleList", idx, len(items))]
        _renumber(self, items)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return type(self)([*self, *other])

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        if isinstance(modules, (Module, str)) or not hasattr(modules, "__iter__"):
            raise TypeError(f"ModuleList.extend should be called with an iterable of modules, "
                            f"got {type(modules).__name__}")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        items = list(self._modules.values())
        items.insert(index, module)
        _renumber(self, items)

    def pop(self, idx: int = -1) -> Module:
        module = self[idx]
        del self[idx]
        return module


class ModuleDict(Module):
    """An ordered dict of named modules, registered as children.

    Example::

        >>> import hybridfw as hf
        >>> heads = hf.nn.ModuleDict({"cls": hf.nn.Linear(4, 3), "reg": hf.nn.Linear(4, 1)})
        >>> heads["reg"](hf.ones(2, 4)).shape
        (2, 1)
    """

    def __init__(self, modules: Mapping[str, Module] | Iterable | None = None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def update(self, modules) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for i, pair in enumerate(pairs):
            if len(pair) != 2:
                raise ValueError(f"ModuleDict.update: element #{i} should be a (name, module) "
                                 f"pair, got length {len(pair)}")
            self[pair[0]] = pair[1]


def _as_parameter(owner: str, value) -> Parameter:
    """As PyTorch's parameter containers: a Parameter as it is, a plain tensor wrapped in one
    (sharing its storage)."""
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor):
        return Parameter(value)
    raise TypeError(f"{owner}: expected a Parameter or a Tensor, got {type(value).__name__}")


class ParameterList(Module):
    """A list of parameters, registered (as ``'0'``, ``'1'``, ...) so they are the container's;
    a plain tensor put in becomes a Parameter.

    Example::

        >>> import hybridfw as hf
        >>> scales = hf.nn.ParameterList([hf.nn.Parameter(hf.ones(2)) for _ in range(3)])
        >>> len(list(scales.parameters())), scales[1].shape
        (3, (2,))
    """

    def __init__(self, values: Iterable | None = None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._parameters.values())[idx])
        return self._parameters[str(_index("ParameterList", idx, len(self)))]

    def __setitem__(self, idx, value) -> None:
        name = str(_index("ParameterList", idx, len(self)))
        self.register_parameter(name, _as_parameter("ParameterList", value))

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self._parameters.values())

    def __iadd__(self, values: Iterable) -> ParameterList:
        return self.extend(values)

    def append(self, value) -> ParameterList:
        self.register_parameter(str(len(self)), _as_parameter("ParameterList", value))
        return self

    def extend(self, values: Iterable) -> ParameterList:
        if isinstance(values, Tensor) or not hasattr(values, "__iter__"):
            raise TypeError(f"ParameterList.extend should be called with an iterable of "
                            f"parameters, got {type(values).__name__}")
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): Parameter of shape {tuple(p.shape)}"
                         for k, p in self._parameters.items())


class ParameterDict(Module):
    """An ordered dict of named parameters, registered so they are the container's; a plain
    tensor put in becomes a Parameter.

    Example::

        >>> import hybridfw as hf
        >>> table = hf.nn.ParameterDict({"scale": hf.ones(3), "shift": hf.zeros(3)})
        >>> [name for name, _ in table.named_parameters()]
        ['scale', 'shift']
    """

    def __init__(self, parameters: Mapping | Iterable | None = None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Parameter:
        return self._parameters[key]

    def __setitem__(self, key: str, value) -> None:
        self.register_parameter(key, _as_parameter("ParameterDict", value))

    def __delitem__(self, key: str) -> None:
        del self._parameters[key]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(self._parameters)

    def __contains__(self, key: str) -> bool:
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def items(self):
        return self._parameters.items()

    def values(self):
        return self._parameters.values()

    def pop(self, key: str) -> Parameter:
        return self._parameters.pop(key)

    def update(self, parameters) -> None:
        pairs = parameters.items() if isinstance(parameters, Mapping) else parameters
        for i, pair in enumerate(pairs):
            if len(pair) != 2:
                raise ValueError(f"ParameterDict.update: element #{i} should be a (name, "
                                 f"parameter) pair, got length {len(pair)}")
            self[pair[0]] = pair[1]

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): Parameter of shape {tuple(p.shape)}"
                         for k, p in self._parameters.items())
