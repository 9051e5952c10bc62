"""The eager interpreter: runs each op now, through its registry entry, and records autograd.

This is the hot path of eager mode (every ``x + y`` lands in :meth:`EagerInterpreter.apply`), so
it is written for speed: one pass over the operands, no per-call allocation beyond the result,
its Storage and -- when a gradient is needed -- one Node.
"""
from __future__ import annotations

import numpy as np

from ..backend import Storage, default_device, is_writeable, root_array, storage_for
from ..backend import device as as_device
from ..ops.registry import set_interpreter
from .autograd import GradMode, Node
from .tensor import Tensor, tensor

__all__ = ["EagerInterpreter"]

_new = object.__new__
_scalar_types = (int, float, bool)
_array_types = (np.ndarray, np.generic)


def _convert_args(args, dev):
    return tuple(a if isinstance(a, Tensor) or a.__class__ in _scalar_types
                 else tensor(a, device=dev) for a in args)


def _save_set(op, n):
    save = op.save
    if save.__class__ is slice:
        return range(n)[save]
    return save


def _make_node(op, args, attrs):
    edges, metas, saved, versions = [], [], [], []
    save = _save_set(op, len(args))
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            node = a._node
            edges.append(node if node is not None else (a if a._rg else None))
            metas.append((a._data.shape, a.dtype))
            if i in save:
                saved.append(a)
                versions.append(a._storage.version)
            else:
                saved.append(None)
        else:
            edges.append(None)
            metas.append(None)
            saved.append(a)
    return Node(op, attrs, tuple(edges), tuple(metas), tuple(saved), tuple(versions))


def _kernel_error(op, exc, args):
    shapes = ", ".join(str(tuple(a.shape)) + " " + str(a.dtype) if isinstance(a, Tensor)
                       else repr(a) for a in args)
    msg = str(exc)
    if not msg.startswith(op.name + ":"):
        msg = f"{op.name}: {msg} (inputs: {shapes})"
    return type(exc)(msg) if isinstance(exc, (ValueError, TypeError, IndexError)) \
        else RuntimeError(msg)


class EagerInterpreter:
    """Evaluate ops immediately on numpy/cupy arrays."""

    name = "eager"

    def apply(self, op, args, attrs):
        try:
            shape, dtype, cdtype = op.infer(*args, **attrs)
        except Exception:
            # Lists, numpy arrays and numpy scalars become tensors; converting only when
            # inference fails keeps that check off the hot path.
            converted = _convert_args(args, None)
            if all(x is y for x, y in zip(converted, args)):
                raise
            return self.apply(op, converted, attrs)
        arrays = []
        dev = None
        needs_grad = False
        for a in args:
            if isinstance(a, Tensor):
                d = a._data
                if cdtype is not None and a.dtype is not cdtype:
                    d = d.astype(cdtype.np)
                s = a._storage.device
                if dev is None:
                    dev = s
                elif s is not dev:
                    raise RuntimeError(f"{op.name}: expected all tensors on the same device, got "
                                       f"{dev} and {s}")
                if a._rg:
                    needs_grad = True
                arrays.append(d)
            else:
                arrays.append(a)
        if "device" in attrs:
            dev = as_device(attrs["device"])
        elif dev is None:
            dev = default_device()
        try:
            out = op.kernel(dev.xp, *arrays, **attrs)
        except (ValueError, TypeError, IndexError, ArithmeticError) as exc:
            raise _kernel_error(op, exc, args) from exc
        if out.__class__ is not np.ndarray:
            if isinstance(out, _array_types) or not hasattr(out, "__cuda_array_interface__"):
                out = dev.xp.asarray(out)
        np_dt = dtype.np
        if out.dtype is not np_dt and out.dtype != np_dt:
            out = out.astype(np_dt)
        t = _new(Tensor)
        t._data = out
        t.shape = out.shape
        t.dtype = dtype
        t._base = None
        if op.view and arrays and root_array(out) is root_array(arrays[0]):
            base = args[0]
            t._storage = base._storage
            t._base = base if base._base is None else base._base
        elif out.base is None:
            t._storage = Storage(out.nbytes, dev)
        else:
            t._storage = storage_for(out, dev)
        t.grad = None
        if needs_grad and GradMode.enabled and op.vjp is not None and dtype.is_floating_point:
            node = _make_node(op, args, attrs)
            if op.save_output:
                node.out = (out, t._storage, t._storage.version)
            t._node = node
            t._rg = True
        else:
            t._node = None
            t._rg = False
        return t

    def apply_inplace(self, op, target, args, attrs):
        if not isinstance(target, Tensor):
            raise TypeError(f"{op.name}: in-place target must be a tensor, got "
                            f"{type(target).__name__}")
        if not all(isinstance(a, Tensor) or a.__class__ in _scalar_types for a in args):
            args = _convert_args(args, target._storage.device)
        recording = GradMode.enabled and op.vjp is not None and \
            any(isinstance(a, Tensor) and a._rg for a in args)
        if recording and target._node is None and target._rg:
            raise RuntimeError(f"{op.name}: a leaf tensor that requires grad is being used in an "
                               "in-place operation; wrap it in hf.no_grad() or clone() it first")
        if recording and target._base is not None:
            raise RuntimeError(f"{op.name}: in-place write into a view (a slice, reshape or "
                               "transpose of another tensor) while recording gradients is not "
                               "supported: the base tensor's graph would not see it; write into "
                               "the base tensor directly (base[index] = value) or clone() the view")
        shape, dtype, _ = op.infer(*args, **attrs)
        if tuple(shape) != target.shape:
            raise ValueError(f"{op.name}: in-place output of shape {target.shape} does not match "
                             f"the broadcast shape {tuple(shape)}")
        if dtype is not target.dtype and dtype.category > target.dtype.category:
            raise TypeError(f"{op.name}: result type {dtype} can't be cast to the in-place "
                            f"output type {target.dtype}")
        dev = target._storage.device
        arrays = []
        for a in args:
            if isinstance(a, Tensor):
                if a._storage.device is not dev:
                    raise RuntimeError(f"{op.name}: expected all tensors on the same device, got "
                                       f"{dev} and {a._storage.device}")
                arrays.append(a._data)
            else:
                arrays.append(a)
        node = None
        if recording:
            node_args = args
            if 0 in _save_set(op, len(args)):
                # The rule needs the value before this write: keep a copy (with the old graph),
                # never the target itself (that would be overwritten, and a reference cycle).
                old = Tensor._from_saved(target._data.copy(), None, target._node)
                old._storage = Storage(old._data.nbytes, dev)
                old._rg = target._rg
                node_args = (old,) + tuple(args[1:])
            node = _make_node(op, node_args, attrs)
        if not is_writeable(target._data):
            raise RuntimeError(f"{op.name}: cannot write in place into this tensor: it is a "
                               "broadcast (expand) view whose elements share memory; clone() it")
        try:
            if op.supports_out:
                op.kernel(dev.xp, *arrays, out=target._data, **attrs)
            else:
                raise TypeError(f"{op.name} has no in-place form")
        except (ValueError, TypeError, IndexError, ArithmeticError) as exc:
            raise _kernel_error(op, exc, args) from exc
        target._storage.version += 1
        if node is not None:
            if op.save_output:
                node.out = (target._data, target._storage, target._storage.version)
            target._node = node
            target._rg = True
        return target


set_interpreter(EagerInterpreter())
