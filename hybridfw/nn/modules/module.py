"""``hf.nn.Module``: the base class of every layer and model, with PyTorch's registration system.

Assigning a :class:`~hybridfw.nn.Parameter`, a Module or a registered buffer to an attribute
stores it in ``_parameters``, ``_modules`` or ``_buffers`` (ordered dicts), which is what
``parameters()``, ``state_dict()``, ``to()`` and ``train()/eval()`` walk.
"""
from __future__ import annotations

import functools
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator

import numpy as np

from ...backend import Device
from ...backend import device as as_device
from ...dtypes import DType, as_dtype
from ...dygraph.autograd import no_grad
from ...dygraph.tensor import Tensor, from_numpy, tensor
from ...ops.registry import default_interpreter, use_interpreter
from ..parameter import Parameter

__all__ = ["Module", "IncompatibleKeys", "StateDictError"]

# ---- what programs traced from modules depend on ----------------------------------------------
# Bumped whenever an attribute of any Module is set or deleted, a parameter, buffer or child is
# registered, or ``to()`` converts a module: converted code checks it on each call (one
# comparison) and, only when it moved, compares the modules' fingerprints to find whether its
# programs, traced with the old objects and values, are stale.
_structure_epoch = [0]

_PLAIN = (int, float, bool, str, type(None))


def structure_epoch() -> int:
    return _structure_epoch[0]


def _plain(value) -> bool:
    if value.__class__ in _PLAIN:
        return True
    return value.__class__ is tuple and all(_plain(v) for v in value)


def structure_fingerprint(roots) -> tuple:
    """What a program traced from the modules ``roots`` (and their submodules) bakes in: the
    parameter, buffer and child objects (their identity, and a tensor's shape, dtype and
    device) and the plain Python attributes (numbers, strings, None, tuples of them) but
    ``training``, which the program cache already keys on."""
    seen, parts = set(), []
    for root in roots:
        for m in root.modules():
            if id(m) in seen:
                continue
            seen.add(id(m))
            d = m.__dict__
            tensors = tuple((k, id(t), t.shape, t.dtype, t.device) if t is not None else (k,)
                            for store in (d["_parameters"], d["_buffers"])
                            for k, t in store.items())
            children = tuple((k, id(c)) for k, c in d["_modules"].items())
            plain = tuple((k, v) for k, v in d.items() if k != "training" and _plain(v))
            parts.append((id(m), tensors, children, plain))
    return tuple(parts)


class IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns: the keys it did not find and did not expect."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()


class StateDictError(RuntimeError, ValueError):
    """``load_state_dict`` found missing/unexpected keys or mismatched shapes.

    A RuntimeError (what PyTorch raises) and a ValueError (hybridfw's error for bad shapes).
    """


class _RemovableHandle:
    """Returned by ``register_forward_hook``; ``remove()`` unregisters the hook."""

    _next_id = 0

    def __init__(self, hooks: dict):
        self._hooks = hooks
        self.id = _RemovableHandle._next_id
        _RemovableHandle._next_id += 1

    def remove(self) -> None:
        self._hooks.pop(self.id, None)


# what hf.jit.to_static(module) exposes of its converted forward (a StaticFunction)
_CONVERTED_ATTRIBUTES = frozenset({"concrete_program", "get_program", "get_concrete_program",
                                   "code", "cache_info", "signatures", "compile_report",
                                   "finish_tiering", "memory_plan"})


def _rebinds_in_program(name: str, buffer, value) -> bool:
    """``self.<buffer> = value`` where ``value`` is a static value (a converted ``forward``
    rebinding a buffer, as ``self.ema = 0.9 * self.ema + ...``): the program writes ``value``
    into the buffer, in place, on every run, and later reads of the buffer see it (what the
    eager rebinding amounts to, but for the object's identity). Needs the buffer's shape; a
    value of a higher dtype category is refused, as an in-place update. False when ``value``
    is no static value."""
    from ...static.ir import Variable  # (nn is built below static: imported when used)
    if not isinstance(value, Variable) or not isinstance(buffer, Tensor):
        return False
    if len(value.shape) != buffer.ndim or any(v != b and v != -1 for v, b in
                                              zip(value.shape, buffer.shape)):
        raise ValueError(f"buffer '{name}': a converted function assigns it a value of shape "
                         f"{tuple(value.shape)}; the program updates the buffer in place, which "
                         f"needs its shape {tuple(buffer.shape)}")
    if value.dtype.category > buffer.dtype.category:
        raise TypeError(f"buffer '{name}': a converted function assigns it a value of dtype "
                        f"{value.dtype}, which can't be cast to its dtype {buffer.dtype}")
    buffer.copy_(value)
    return True


class Module:
    """Base class for layers and models: subclass it, build layers in ``__init__``, compute in
    ``forward``; call the module (not ``forward``) to run it.

    Example::

        >>> import hybridfw as hf
        >>> class Net(hf.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.fc = hf.nn.Linear(4, 2)
        ...     def forward(self, x):
        ...         return self.fc(x).relu()
        >>> net = Net()
        >>> [name for name, _ in net.named_parameters()]
        ['fc.weight', 'fc.bias']
        >>> net(hf.ones(3, 4)).shape
        (3, 2)
    """

    training: bool

    def __init_subclass__(cls, **kwargs):
        # Parameters are eager tensors, created once: a module built inside a static
        # program_guard still initialises them eagerly (its forward is what gets recorded).
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None and not getattr(init, "_eager_init", False):
            @functools.wraps(init)
            def eager_init(self, *args, **kw):
                with use_interpreter(default_interpreter()):
                    init(self, *args, **kw)
            eager_init._eager_init = True
            cls.__init__ = eager_init

    def __init__(self) -> None:
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()

    # ---- running --------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}: subclasses of Module must define "
                                  "forward()")

    def __call__(self, *args, **kwargs):
        d = self.__dict__
        if not (d["_forward_pre_hooks"] or d["_forward_hooks"]):
            return self.forward(*args, **kwargs)
        return self._call_hooked(self.forward, args, kwargs)

    def _call_hooked(self, forward, args, kwargs, wrap=None):
        """``forward(*args, **kwargs)`` with the forward pre-hooks and hooks around it (each
        hook passed through ``wrap`` first: hf.jit converts them)."""
        d = self.__dict__
        for hook in tuple(d["_forward_pre_hooks"].values()):
            result = (hook if wrap is None else wrap(hook))(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        out = forward(*args, **kwargs)
        for hook in tuple(d["_forward_hooks"].values()):
            result = (hook if wrap is None else wrap(hook))(self, args, out)
            if result is not None:
                out = result
        return out

    def register_forward_pre_hook(self, hook: Callable) -> _RemovableHandle:
        """``hook(module, args)`` runs before ``forward``; it may return replacement args."""
        handle = _RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        return handle

    def register_forward_hook(self, hook: Callable) -> _RemovableHandle:
        """``hook(module, args, output)`` runs after ``forward``; it may return a new output."""
        handle = _RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle

    # ---- registration ---------------------------------------------------------------------
    def _check_name(self, kind: str, name) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call (call "
                                 "super().__init__() first)")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if name == "" or "." in name:
            raise KeyError(f"{kind} name can't be empty or contain '.', got {name!r}")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or None, a declared-but-absent parameter such as a disabled bias)."""
        self._check_name("parameter", name)
        _structure_epoch[0] += 1
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (hf.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is module state but not a parameter (BatchNorm's running mean).

        Persistent buffers are part of ``state_dict()``; all buffers move with ``to()``.
        """
        self._check_name("buffer", name)
        _structure_epoch[0] += 1
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                            f"'{name}' (hf.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module (``self.name = module`` does the same)."""
        self._check_name("module", name)
        _structure_epoch[0] += 1
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value) -> None:
        _structure_epoch[0] += 1
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call "
                                     "(call super().__init__() first)")
            _remove_from(name, d, d["_buffers"], d["_modules"], d["_non_persistent_buffers_set"])
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(hf.nn.Parameter or None expected)")
            params[name] = None
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign a module before Module.__init__() call "
                                     "(call super().__init__() first)")
            _remove_from(name, d, params, d["_buffers"], d["_non_persistent_buffers_set"])
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (hf.nn.Module or None expected)")
            modules[name] = None
            return
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                if _rebinds_in_program(name, buffers[name], value):
                    return
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(hf.Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def __getattr__(self, name: str):
        # Only called when normal lookup fails: parameters, buffers and modules live in dicts.
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            values = d.get(store)
            if values is not None and name in values:
                return values[name]
        if name in _CONVERTED_ATTRIBUTES and name in type(d.get("forward")).__dict__:
            # hf.jit.to_static(module): the module is the converted callable, and exposes its
            # converted forward's programs (module.concrete_program, module.get_program(x))
            return getattr(d["forward"], name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        _structure_epoch[0] += 1
        d = self.__dict__
        if name in d.get("_parameters", ()):
            del d["_parameters"][name]
        elif name in d.get("_buffers", ()):
            del d["_buffers"][name]
            d["_non_persistent_buffers_set"].discard(name)
        elif name in d.get("_modules", ()):
            del d["_modules"][name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))

    # ---- traversal ------------------------------------------------------------------------
    def _named_members(self, get_members, prefix: str, recurse: bool, remove_duplicate: bool):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in get_members(module):
                if value is None:
                    continue
                if remove_duplicate:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield (module_prefix + "." + name if module_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(name, parameter)`` pairs, ``'layer.sub.weight'`` style; a parameter shared by two
        modules is listed once."""
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                   remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                   remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """This module and all below it, depth first, as ``(dotted_name, module)``."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + "." + name if prefix else name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self, remove_duplicate: bool = True) -> Iterator[Module]:
        """This module and all below it, depth first (a shared module once, unless
        ``remove_duplicate=False``)."""
        for _, m in self.named_modules(remove_duplicate=remove_duplicate):
            yield m

    def get_submodule(self, target: str) -> Module:
        """The module at dotted path ``target`` (``''`` is this module)."""
        module = self
        for item in target.split(".") if target else ():
            child = module._modules.get(item)
            if child is None:
                raise AttributeError(f"{type(module).__name__} has no submodule {item!r} "
                                     f"(looking up {target!r})")
            module = child
        return module

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path ``target`` (``'block.fc.weight'``)."""
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if name not in module._parameters or module._parameters[name] is None:
            raise AttributeError(f"{type(module).__name__} has no parameter {name!r}")
        return module._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target`` (``'block.bn.running_mean'``)."""
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if name not in module._buffers or module._buffers[name] is None:
            raise AttributeError(f"{type(module).__name__} has no buffer {name!r} (looking up "
                                 f"{target!r})")
        return module._buffers[name]

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call ``fn`` on every submodule (children first) and on this module; returns self.

        Example: ``net.apply(lambda m: hf.nn.init.zeros_(m.bias) if isinstance(m, hf.nn.Linear)
        else None)``.
        """
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- modes and gradients --------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode (Dropout active, BatchNorm uses batch statistics) recursively."""
        if not isinstance(mode, bool):
            raise ValueError(f"train: mode is expected to be a bool, got {mode!r}")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> Module:
        """Evaluation mode: ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters (to None by default, else to zeros)."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if p.grad.grad_fn is not None:
                    p.grad = p.grad.detach()
                p.grad.zero_()

    # ---- state dict -----------------------------------------------------------------------
    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> OrderedDict:
        """An ordered dict ``name -> tensor`` of the parameters and persistent buffers.

        The tensors are detached and share storage with the module (``hf.save`` copies them).
        """
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        return destination

    def _optional_state_keys(self) -> tuple:
        """Names of this module's state that a state dict may omit: loading one without them
        keeps the current values (BatchNorm's ``num_batches_tracked``, as in PyTorch)."""
        return ()

    def load_state_dict(self, state_dict, strict: bool = True,
                        assign: bool = False) -> IncompatibleKeys:
        """Copy ``state_dict``'s values into this module's parameters and buffers, in place.

        Values may be hybridfw tensors, numpy arrays or anything with ``__array__`` (so a
        PyTorch model's weights load with ``{k: v.numpy() for k, v in torch_sd.items()}``);
        they are cast to each parameter's dtype and moved to its device. Mismatched shapes
        always raise; missing and unexpected keys raise when ``strict``, and are returned as
        ``(missing_keys, unexpected_keys)`` otherwise.

        ``assign=True`` (PyTorch's option) puts the given tensors themselves in the module
        instead of copying: parameters become Parameters sharing the given tensors' storage,
        dtype and device (keeping each old parameter's ``requires_grad``), and buffers are the
        given tensors. Optimizers built before then still hold the old parameters.
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"load_state_dict: expected a dict-like of name -> tensor, got "
                            f"{type(state_dict).__name__}")
        if not isinstance(assign, bool):
            raise TypeError(f"load_state_dict: assign must be True or False, got {assign!r}")
        own = self.state_dict(keep_vars=True)
        optional = {f"{prefix}.{name}" if prefix else name
                    for prefix, module in self.named_modules(remove_duplicate=False)
                    for name in module._optional_state_keys()}
        missing = [k for k in own if k not in state_dict and k not in optional]
        unexpected = [k for k in state_dict if k not in own]
        mismatched, values = [], {}
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = _as_tensor(key, state_dict[key])
            if tuple(value.shape) != tuple(target.shape):
                mismatched.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{tuple(value.shape)} from checkpoint, the shape in current "
                                  f"model is {tuple(target.shape)}")
            else:
                values[key] = value
        errors = []
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing)
                          + ".")
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: "
                          + ", ".join(f'"{k}"' for k in unexpected) + ".")
        errors.extend(mismatched)
        if errors:
            raise StateDictError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                                 + "\n\t".join(errors))
        if assign:
            self._assign_state(values)
            return IncompatibleKeys(missing, unexpected)
        with no_grad():
            for key, value in values.items():
                target = own[key]
                if value.device is not target.device:
                    value = value.to(target.device)
                target.copy_(value)
        return IncompatibleKeys(missing, unexpected)

    def _assign_state(self, values: dict) -> None:
        """``load_state_dict(assign=True)``: make ``values`` (checked keys and shapes) the
        module's parameters and buffers."""
        for prefix, module in self.named_modules(remove_duplicate=False):
            head = prefix + "." if prefix else ""
            for name, param in list(module._parameters.items()):
                value = values.get(head + name)
                if param is not None and value is not None:
                    module._parameters[name] = value if isinstance(value, Parameter) else \
                        Parameter(value, requires_grad=param.requires_grad)
                    if isinstance(value, Parameter):
                        value.requires_grad_(param.requires_grad)
            for name, buffer in list(module._buffers.items()):
                value = values.get(head + name)
                if buffer is not None and value is not None and \
                        name not in module._non_persistent_buffers_set:
                    module._buffers[name] = value

    # ---- devices and dtypes ---------------------------------------------------------------
    def _apply(self, fn: Callable[[Tensor], Tensor]) -> Module:
        """Replace every parameter's and buffer's data (and gradient) by ``fn`` of it, keeping
        the Parameter objects, so optimizers built before ``to()`` still hold them."""
        _structure_epoch[0] += 1
        with no_grad():
            for module in self.modules():
                for store in (module._parameters, module._buffers):
                    for t in store.values():
                        if t is None:
                            continue
                        new = fn(t.detach())
                        if new._data is not t._data:
                            t.data = new
                        if t.grad is not None:
                            g = fn(t.grad.detach())
                            if g._data is not t.grad._data:
                                t.grad = g
        return self

    def to(self, *args, **kwargs) -> Module:
        """Move and/or cast parameters and buffers in place: ``to('cuda')``, ``to(hf.float64)``,
        ``to(device, dtype)``, ``to(tensor)``. Only floating-point tensors change dtype."""
        device, dtype = _parse_to(args, kwargs)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"Module.to: only floating point dtypes are accepted, got {dtype}")

        def convert(t: Tensor) -> Tensor:
            return t.to(device=device, dtype=dtype if t.dtype.is_floating_point else None)

        return self._apply(convert)

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self, device=None) -> Module:
        if isinstance(device, int):
            device = f"cuda:{device}"
        return self.to(device if device is not None else "cuda")

    def float(self) -> Module:
        return self.to(as_dtype("float32"))

    def double(self) -> Module:
        return self.to(as_dtype("float64"))

    def half(self) -> Module:
        return self.to(as_dtype("float16"))

    def type(self, dst_type) -> Module:
        return self.to(as_dtype(dst_type))

    # ---- printing -------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside this module's parentheses in ``repr`` (override in layers)."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, module in self._modules.items():
            text = _indent(repr(module), 2)
            lines.append(f"({name}): {text}")
        head = self._get_name() + "("
        if not lines:
            return head + ")"
        if len(lines) == 1 and not self._modules:
            return head + lines[0] + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


def _remove_from(name: str, d: dict, *stores) -> None:
    for store in stores:
        if store is None:
            continue
        if name in store:
            if isinstance(store, set):
                store.discard(name)
            else:
                del store[name]
    d.pop(name, None)


def _indent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    pad = " " * spaces
    return lines[0] + "\n" + "\n".join(pad + line for line in lines[1:])


def _as_tensor(key: str, value) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray):
        try:
            return from_numpy(value)
        except TypeError:
            raise TypeError(f"load_state_dict: value for {key!r} has unsupported numpy dtype "
                            f"{value.dtype}") from None
    if hasattr(value, "__cuda_array_interface__") or hasattr(value, "__array__") or \
            isinstance(value, (int, float, np.generic)):
        try:
            return tensor(np.asarray(value) if not hasattr(value, "__cuda_array_interface__")
                          else value)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(f"load_state_dict: could not convert the value for {key!r} "
                            f"({type(value).__name__}) to a tensor: {exc}") from None
    raise TypeError(f"load_state_dict: value for {key!r} must be a tensor or array, got "
                    f"{type(value).__name__}")


def _parse_to(args, kwargs):
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"Module.to: unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, Device):
            device = a
        elif isinstance(a, (DType, np.dtype, type)):
            dtype = a
        elif isinstance(a, str):
            try:
                device = as_device(a)
            except (ValueError, TypeError):
                dtype = a
        elif a is not None:
            raise TypeError(f"Module.to: expected a device, dtype or tensor, got {a!r}")
    if device is not None:
        device = as_device(device)
        device.xp  # raises a clear error when CUDA is not available  # noqa: B018
    return device, (as_dtype(dtype) if dtype is not None else None)
