"""The optimizer base class: parameter groups, per-parameter state, state dicts.

Subclasses give the update rule of one parameter (:meth:`Optimizer._update_param`); the base
class runs it for every parameter with a gradient, under ``no_grad``, and owns everything else:
groups and their options, ``state`` keyed by parameter, ``zero_grad``, and ``state_dict`` /
``load_state_dict`` in PyTorch's layout (parameters numbered 0, 1, ... in group order).

Updates happen in place and allocate nothing after the first step: the state (moments, momentum
buffers) is created on the first step, and the temporaries an update needs come from a
:class:`ScratchPool` shared by all parameters of one device and dtype.
"""
from __future__ import annotations

import functools
import math
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from numbers import Real
from typing import Any

import numpy as np

from ..backend import reserve
from ..dygraph import Tensor, enable_grad, no_grad, tensor
from ..nn.modules.module import _RemovableHandle
from ..ops.factories import zeros

__all__ = ["Optimizer", "ScratchPool", "check_number", "check_implementation_options"]


def check_number(owner: str, name: str, value, *, low: float = 0.0, high: float | None = None,
                 high_inclusive: bool = True):
    """``value`` as a Python int or float; a clear error unless it is a real number in
    ``[low, high]`` (or ``[low, high)``)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{owner}: {name} must be a number, got {value!r} "
                        f"({type(value).__name__})")
    bad = not (value >= low) or math.isnan(value)
    if high is not None:
        bad = bad or (value > high if high_inclusive else value >= high)
    if bad:
        bound = f">= {low}" if high is None else \
            f"in [{low}, {high}{']' if high_inclusive else ')'}"
        raise ValueError(f"{owner}: invalid {name}={value!r}; it must be {bound}")
    # numpy scalars become Python numbers: kernels take those as they are, without allocating
    return value if type(value) in (int, float) else float(value)


def check_implementation_options(owner: str, group: dict) -> None:
    """Check PyTorch's options that only pick an implementation (``foreach``, ``fused``,
    ``capturable``): hybridfw has one implementation, which computes the same update, so any
    valid value is accepted and changes nothing. ``differentiable=True`` (gradients through
    the update) is refused: updates run under ``no_grad``."""
    for name in ("foreach", "fused"):
        value = group.get(name)
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{owner}: {name} must be True, False or None, got {value!r}")
    for name in ("capturable", "differentiable"):
        value = group.get(name, False)
        if not isinstance(value, bool):
            raise TypeError(f"{owner}: {name} must be True or False, got {value!r}")
    if group.get("differentiable", False):
        raise ValueError(f"{owner}: differentiable=True is not supported: hybridfw optimizers "
                         "update parameters in place under no_grad, so no gradient flows "
                         "through a step")


class ScratchPool:
    """Temporaries for in-place updates, reused on every step.

    For each (device, dtype) one flat buffer holds ``slots`` regions the size of the largest
    parameter; each parameter gets cached views of those regions shaped like it. Parameters are
    updated one after another, so they can all share the same regions: the pool costs
    ``slots x largest parameter`` bytes, not a copy of the model. It is counted as reserved
    memory (``hf.memory.stats()['reserved_bytes']``), not as allocated: ``allocated()`` after a
    step is parameters, gradients and optimizer state, as in PyTorch (whose temporaries are
    freed to its allocator's cache), and no step allocates anything.
    """

    def __init__(self, slots: int):
        self.slots = slots
        self._flat: dict = {}   # (device, dtype) -> (flat Tensor, region size)
        self._views: dict = {}  # parameter -> tuple of views, one per slot

    def views(self, param: Tensor, groups: list) -> tuple:
        """``slots`` scratch tensors shaped like ``param`` (contents undefined)."""
        cached = self._views.get(param)
        if cached is not None and cached[0].shape == param.shape and \
                cached[0].dtype is param.dtype and cached[0].device is param.device:
            return cached
        key = (param.device, param.dtype)
        flat = self._flat.get(key)
        if flat is None or flat[1] < param.numel():
            self._grow(groups)
        flat, size = self._flat[key]
        n = param.numel()
        made = tuple(flat[i * size:i * size + n].view(param.shape) for i in range(self.slots))
        self._views[param] = made
        return made

    def _grow(self, groups: list) -> None:
        # Size every buffer once for all parameters now known, so the first step allocates
        # each buffer once rather than growing it parameter by parameter.
        needed: dict = {}
        for group in groups:
            for p in group["params"]:
                key = (p.device, p.dtype)
                needed[key] = max(needed.get(key, 0), p.numel())
        for key, size in needed.items():
            old = self._flat.get(key)
            if old is None or old[1] < size:
                device, dtype = key
                flat = zeros(self.slots * size, dtype=dtype, device=device)
                reserve(flat)
                self._flat[key] = (flat, size)
                self._views = {p: v for p, v in self._views.items()
                               if (p.device, p.dtype) != key}


class Optimizer:
    """Base class of optimizers.

    ``params`` is an iterable of tensors, or of dicts (parameter groups) each holding
    ``'params'`` and any options that override ``defaults`` for that group.

    Example::

        >>> import hybridfw as hf
        >>> w = hf.tensor([1.0, 2.0], requires_grad=True)
        >>> opt = hf.optim.SGD([w], lr=0.1)
        >>> (w * w).sum().backward()
        >>> opt.step(); opt.zero_grad()
        >>> w.tolist()
        [0.800000011920929, 1.600000023841858]
    """

    #: How many scratch tensors per parameter an update needs (see :class:`ScratchPool`).
    scratch_slots = 0
    #: Whether state a step creates is stored only after that step (PyTorch's SGD keeps its
    #: momentum buffers aside until every parameter is updated, its other optimizers create
    #: state before updating): it differs only for a parameter listed twice in a group.
    state_after_step = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:  # every step() runs the step hooks, overridden or not
            cls.step = _with_step_hooks(cls.__dict__["step"])

    def __init__(self, params: Iterable, defaults: dict):
        self.defaults = dict(defaults)
        self._optimizer_step_pre_hooks: dict = {}
        self._optimizer_step_post_hooks: dict = {}
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        self._scratch = ScratchPool(self.scratch_slots)
        if isinstance(params, Tensor):
            raise TypeError(f"{self._name}: params must be an iterable of Tensors or dicts, but "
                            "got a single Tensor; pass [tensor]")
        if isinstance(params, (set, frozenset)):
            raise TypeError(f"{self._name}: params must be an ordered collection (list, tuple, "
                            "generator), not a set: its order, and so the state_dict "
                            "numbering, would change between runs")
        groups = list(params)
        if not groups:
            raise ValueError(f"{self._name}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    @property
    def _name(self) -> str:
        return type(self).__name__

    # ---- groups -----------------------------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters (a dict with ``'params'`` and optional option overrides).

        Example::

            >>> opt.add_param_group({"params": [head_weight], "lr": 1e-2})
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"{self._name}: a parameter group must be a dict, got "
                            f"{type(param_group).__name__}")
        if "params" not in param_group:
            raise ValueError(f"{self._name}: a parameter group needs a 'params' entry, got keys "
                             f"{sorted(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(f"{self._name}: parameters must be an ordered collection (list, "
                            "tuple), not a set: its order would change between runs")
        else:
            params = list(params)
        if params and all(p.__class__ is tuple and len(p) == 2 and isinstance(p[0], str)
                          for p in params):  # module.named_parameters(), as PyTorch takes it
            param_group = {**param_group, "param_names": [name for name, _ in params]}
            params = [p for _, p in params]
        seen = set()
        duplicated = False
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"{self._name}: can only optimize Tensors, but parameter {i} of "
                                f"the group is a {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"{self._name}: can't optimize a non-leaf Tensor (parameter {i}"
                                 f", shape {p.shape}); optimize the leaf it was computed from")
            if not p.dtype.is_floating_point:
                raise TypeError(f"{self._name}: can only optimize floating-point tensors, but "
                                f"parameter {i} has dtype {p.dtype}")
            duplicated = duplicated or id(p) in seen
            seen.add(id(p))
        if duplicated:  # PyTorch warns and keeps them: each occurrence is one update per step
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          UserWarning, stacklevel=3)
        for group in self.param_groups:
            if any(id(p) in seen for p in group["params"]):
                raise ValueError(f"{self._name}: some parameters appear in more than one "
                                 "parameter group")
        group = dict(param_group)
        group["params"] = params
        for name, default in self.defaults.items():
            group.setdefault(name, default)
        self._check_group(group)
        self.param_groups.append(group)

    def _check_group(self, group: dict) -> None:
        """Validate a group's options (subclasses check their hyperparameters here)."""

    # ---- stepping ---------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients: to None (default, frees the memory) or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    g.detach_()
                    with no_grad():
                        g.zero_()

    def step(self, closure: Callable[[], Any] | None = None):
        """Update every parameter that has a gradient; returns ``closure()``'s loss if given.

        ``closure`` re-evaluates the model and returns the loss (it runs with grad enabled,
        before the update).
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        self._opt_called = True  # (a scheduler stepping first warns, as PyTorch's)
        created: dict = {}  # (state_after_step) parameter -> the state its last update made
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    if grad.shape != p.shape:
                        raise ValueError(f"{self._name}: gradient of shape {grad.shape} does "
                                         f"not match its parameter of shape {p.shape}")
                    scratch = self._scratch.views(p, self.param_groups) \
                        if self.scratch_slots else ()
                    state = self.state.get(p)
                    if state is None:  # only parameters that keep something get an entry
                        state = {}
                        self._update_param(p, grad, state, group, scratch)
                        if state:
                            (created if self.state_after_step else self.state)[p] = state
                    else:
                        self._update_param(p, grad, state, group, scratch)
        self.state.update(created)
        return loss

    def register_step_pre_hook(self, hook: Callable) -> _RemovableHandle:
        """Run ``hook(optimizer, args, kwargs)`` before each :meth:`step` (``args`` starts with
        the optimizer, as in PyTorch); it may return new ``(args, kwargs)`` for the step.
        Returns a handle whose ``remove()`` unregisters it.

        Example::

            >>> handle = opt.register_step_pre_hook(lambda opt, args, kwargs: print("step"))
            >>> opt.step()          # prints "step"
            >>> handle.remove()
        """
        return _register(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook: Callable) -> _RemovableHandle:
        """Run ``hook(optimizer, args, kwargs)`` after each :meth:`step` (its return value is
        ignored). Returns a handle whose ``remove()`` unregisters it.

        Example::

            >>> handle = opt.register_step_post_hook(lambda opt, args, kwargs: sched.step())
        """
        return _register(self._optimizer_step_post_hooks, hook)

    def _update_param(self, param: Tensor, grad: Tensor, state: dict, group: dict,
                      scratch: tuple) -> None:
        """Apply one update to ``param`` in place (subclasses define the rule)."""
        raise TypeError(f"{self._name} defines no update rule: override step() or "
                        "_update_param()")

    # ---- state dicts ------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{'state': {index: {...}}, 'param_groups': [{..., 'params': [index, ...]}]}``.

        Parameters are numbered by position in group order, as in PyTorch (a parameter listed
        twice in a group takes the number of its last place there); state tensors are copies.
        """
        index: dict = {}
        groups = []
        start = 0
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            params = group["params"]
            index.update({p: i for i, p in enumerate(params, start) if p not in index})
            packed["params"] = [index[p] for p in params]
            start += len(params)
            groups.append(packed)
        state = {index[p]: {k: (v.detach().clone() if isinstance(v, Tensor) else v)
                            for k, v in s.items()}
                 for p, s in self.state.items() if p in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore the state and group options saved by :meth:`state_dict`.

        The optimizer must have been built over the same parameters (same group sizes); state
        tensors are copied onto each parameter's device (and dtype, for floating state).
        """
        if not isinstance(state_dict, dict) or "state" not in state_dict or \
                "param_groups" not in state_dict:
            raise ValueError(f"{self._name}.load_state_dict: expected a dict with 'state' and "
                             "'param_groups' (what state_dict() returns)")
        saved_groups = list(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"{self._name}.load_state_dict: the state dict has "
                             f"{len(saved_groups)} parameter groups, the optimizer "
                             f"{len(self.param_groups)}")
        id_map = {}
        for i, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(f"{self._name}.load_state_dict: parameter group {i} has "
                                 f"{len(saved['params'])} parameters in the state dict, "
                                 f"{len(group['params'])} in the optimizer")
            id_map.update(zip(saved["params"], group["params"]))
        state: defaultdict = defaultdict(dict)
        for key, values in state_dict["state"].items():
            index = int(key) if isinstance(key, str) and key.isdigit() else key
            if index not in id_map:
                raise ValueError(f"{self._name}.load_state_dict: state for parameter {key!r}, "
                                 "which no parameter group lists")
            param = id_map[index]
            state[param] = {name: self._restore_state_value(param, index, name, value)
                            for name, value in values.items()}
        new_groups = []
        for group, saved in zip(self.param_groups, saved_groups):
            new = {k: v for k, v in saved.items() if k != "params"}
            for name, default in self.defaults.items():  # options newer than the state dict
                new.setdefault(name, default)
            new["params"] = group["params"]
            self._check_group(new)
            new_groups.append(new)
        self.state = state
        self.param_groups = new_groups

    def _restore_state_value(self, param: Tensor, index, name: str, value):
        if name == "step":  # a count; PyTorch keeps it in a float tensor, we in an int
            count = float(value.item() if hasattr(value, "item") else value)
            if count != int(count) or count < 0:
                raise ValueError(f"{self._name}.load_state_dict: state 'step' of parameter "
                                 f"{index} must be a non-negative whole number, got {value!r}")
            return int(count)
        if isinstance(value, Tensor) or (hasattr(value, "__array__") and
                                         not isinstance(value, (int, float, bool))):
            # np.asarray keeps the dtype of foreign arrays (a float64 torch tensor stays float64)
            t = value if isinstance(value, Tensor) else tensor(np.asarray(value))
            if t.dtype.is_floating_point:
                t = t.to(param.device, param.dtype)
            else:
                t = t.to(param.device)
            if t.shape != param.shape and t.ndim != 0:
                raise ValueError(f"{self._name}.load_state_dict: state {name!r} of parameter "
                                 f"{index} has shape {t.shape}, the parameter {param.shape}")
            return t.detach().clone()
        return value

    def __repr__(self) -> str:
        lines = [f"{self._name} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {k}: {group[k]}" for k in sorted(group) if k != "params")
        lines.append(")")
        return "\n".join(lines)


def _register(hooks: dict, hook: Callable) -> _RemovableHandle:
    handle = _RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def _with_step_hooks(step: Callable) -> Callable:
    """``step`` preceded by the optimizer's step pre-hooks and followed by its post-hooks
    (once, also when an overriding step calls ``super().step()``)."""
    @functools.wraps(step)
    def hooked_step(*args, **kwargs):
        self = args[0]  # (in the hooks' args too, as PyTorch passes them)
        pre = getattr(self, "_optimizer_step_pre_hooks", None)
        post = getattr(self, "_optimizer_step_post_hooks", None)
        if not (pre or post) or getattr(self, "_in_hooked_step", False):
            return step(*args, **kwargs)
        for hook in list(pre.values()):
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"{type(self).__name__}.step: a pre-hook must return "
                                       f"None or a tuple of (new_args, new_kwargs), but got "
                                       f"{result!r}")
                args, kwargs = result
        self._in_hooked_step = True
        try:
            out = step(*args, **kwargs)
        finally:
            self._in_hooked_step = False
        for hook in list(post.values()):
            hook(self, args, kwargs)
        return out
    return hooked_step


Optimizer.step = _with_step_hooks(Optimizer.step)
