"""The eager interpreter: runs each op now, through its registry entry, and records autograd.

This is the hot path of eager mode (every ``x + y`` lands in :meth:`EagerInterpreter.apply`), so
it is written for speed: one pass over the operands, no per-call allocation beyond the result,
its Storage and -- when a gradient is needed -- one Node.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..backend import Storage, default_device, is_writeable, root_array, storage_for
from ..backend import device as as_device
from ..dtypes import DType
from ..ops.registry import TensorLike, TensorMeta, set_interpreter
from .autograd import GradMode, Node
from .tensor import Tensor, tensor

__all__ = ["EagerInterpreter"]

_new = object.__new__
_scalar_types = (int, float, bool)
_array_types = (np.ndarray, np.generic)


def _convert_args(args, dev):
    """Lists and numpy arrays become tensors; numpy scalars beside a tensor the Python numbers
    they hold, as PyTorch reads them (``int32_tensor * np.float64(0.5)`` is float32, not
    float64); with no tensor beside them, 0-d tensors (``hf.exp(np.float32(1))``)."""
    number = any(isinstance(a, Tensor) for a in args)
    return tuple(a if isinstance(a, Tensor) or a.__class__ in _scalar_types
                 else a.item() if number and isinstance(a, np.generic) else
                 tensor(a, device=dev) for a in args)


def _save_set(op, n):
    save = op.save
    if save.__class__ is slice:
        return range(n)[save]
    return save


def _needed(args, inputs) -> bool:
    """Whether one of ``args[j]`` for j in ``inputs`` will want a gradient."""
    for j in inputs:
        a = args[j]
        if isinstance(a, Tensor) and (a._node is not None or a._rg):
            return True
    return False


def _make_node(op, args, attrs):
    edges, metas, saved, versions = [], [], [], []
    save = _save_set(op, len(args))
    only = op.save_for
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            node = a._node
            edges.append(node if node is not None else (a if a._rg else None))
            metas.append((a._data.shape, a.dtype))
            if i in save and (only is None or i not in only or _needed(args, only[i])):
                saved.append(a)
                versions.append(a._storage.version)
            else:
                saved.append(None)
        else:
            edges.append(None)
            metas.append(None)
            saved.append(a)
    return Node(op, attrs, tuple(edges), tuple(metas), tuple(saved), tuple(versions))


def _static_operand_error(op, args):
    """The error for a static program's value used while no program is being built (the
    eager interpreter then gets it, and numpy cannot compute with it), or None."""
    for a in args:
        if isinstance(a, TensorLike) and not isinstance(a, (Tensor, TensorMeta)):
            return TypeError(f"{op.name}: {a!r} is a value of a static program, used while no "
                             f"program is being built; use it inside "
                             f"hf.static.program_guard(program), and get its value from "
                             f"hf.static.Executor().run(program, feed=..., fetch_list=[...])")
    return None


def _kernel_error(op, exc, args):
    static = _static_operand_error(op, args)
    if static is not None:
        return static
    shapes = ", ".join(str(tuple(a.shape)) + " " + str(a.dtype) if isinstance(a, Tensor)
                       else repr(a) for a in args)
    msg = str(exc)
    if not msg.startswith(op.name + ":"):
        msg = f"{op.name}: {msg} (inputs: {shapes})"
    if isinstance(exc, (ValueError, TypeError, IndexError, RuntimeError)):
        try:  # (the kernel's own class; one whose constructor takes other arguments cannot)
            return type(exc)(msg)
        except Exception:  # noqa: BLE001
            pass
    return RuntimeError(msg)


class EagerInterpreter:
    """Evaluate ops immediately on numpy/cupy arrays."""

    name = "eager"
    _register = True  # views register with their base (off while views are rebased)

    def apply(self, op, args, attrs):
        try:
            shape, dtype, cdtype = op.infer(*args, **attrs)
        except Exception:
            # Lists, numpy arrays and numpy scalars become tensors; converting only when
            # inference fails keeps that check off the hot path.
            converted = _convert_args(args, None)
            if all(x is y for x, y in zip(converted, args)):
                static = _static_operand_error(op, args)
                if static is not None:
                    raise static from None
                raise
            return self.apply(op, converted, attrs)
        if dtype.__class__ is not DType:  # a numpy operand passed the duck-typed inference
            converted = _convert_args(args, None)
            if any(x is not y for x, y in zip(converted, args)):
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
        except AttributeError:  # (a kernel reading .dtype.kind of a static value)
            static = _static_operand_error(op, args)
            if static is not None:
                raise static from None
            raise
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
        t._chain = None
        t._views = None
        if op.view and arrays and root_array(out) is root_array(arrays[0]):
            base = args[0]
            t._storage = base._storage
            step = ((op, args[1:], attrs),)
            if base._base is None:
                t._base, t._chain = base, step
            else:
                t._base, t._chain = base._base, base._chain + step
            if self._register:
                root = t._base
                views = root._views
                if views is None:
                    root._views = views = []
                elif len(views) >= 64 and not len(views) & (len(views) - 1):
                    # at each power of two: drop the views gone since (amortized O(1))
                    views[:] = [ref for ref in views if ref() is not None]
                views.append(weakref.ref(t))
        elif out.base is None:
            t._storage = Storage(out.nbytes, dev)
        else:
            t._storage = storage_for(out, dev)
        t._grad = None
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
        through_view = recording and target._base is not None
        if through_view:
            if target._base._node is None and target._base._rg:
                raise RuntimeError(f"{op.name}: a view of a leaf tensor that requires grad is "
                                   "being used in an in-place operation; wrap it in "
                                   "hf.no_grad() or clone() it first")
            if any(step[0].name not in _WRITE_BACK for step in target._chain):
                kinds = ", ".join(dict.fromkeys(step[0].name for step in target._chain))
                raise RuntimeError(f"{op.name}: in-place write into a view made by {kinds} "
                                   "while recording gradients is not supported: the base "
                                   "tensor's graph would not see it; write into the base tensor "
                                   "directly or clone() the view")
            # the views from the base down to the target, with their histories before the write
            parents = self._replay(target._base, target._chain[:-1])
        shape, dtype, cdtype = op.infer(*args, **attrs)
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
                # operands meet in the compute dtype, as out of place (uint8 += int8 0-d
                # tensor adds in uint8, not in numpy's int16)
                arrays.append(a._data if cdtype is None or a.dtype is cdtype
                              else a._data.astype(cdtype.np))
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
            if op.supports_out and dtype.np.kind == target.dtype.np.kind:
                op.kernel(dev.xp, *arrays, out=target._data, **attrs)
            elif op.supports_out:  # uint8 += int8 (int16): out= refuses signed into unsigned;
                target._data[...] = op.kernel(dev.xp, *arrays, **attrs)  # wrap, as PyTorch
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
            if through_view:
                self._write_back(target, parents)
            elif target._views:
                self._rebase_views(target)
        return target

    def _replay(self, base, chain) -> list:
        """``[base, chain[0](base), chain[1](chain[0](base)), ...]`` as new tensors carrying
        the histories of those view ops (temporaries: not registered as views)."""
        out = [base]
        self._register = False
        try:
            for op, rest, attrs in chain:
                out.append(self.apply(op, (out[-1],) + rest, attrs))
        finally:
            self._register = True
        return out

    def _write_back(self, view, parents):
        """An in-place op recorded a new history for ``view``: give its base the history
        "the base with the view's part replaced" (PyTorch's CopySlices), going up the views it
        was made through (``parents``: the base, then each intermediate view, histories from
        before the write), then rebase every view of the base on that."""
        value = view
        self._register = False
        try:
            for parent, (op, rest, attrs) in zip(reversed(parents), reversed(view._chain)):
                value = _WRITE_BACK[op.name](self, parent, value, rest, attrs)
        finally:
            self._register = True
        base = view._base
        base._node = value._node
        base._rg = value._rg
        if base._views:
            self._rebase_views(base)

    def _rebase_views(self, base):
        """Give each live view of ``base`` (which an in-place op just gave a new history) the
        history of its view ops applied to the new one, as PyTorch rebases a view's grad_fn:
        ``z = y[:2]; y[0] = 10.0`` then sends ``z``'s gradient through the write, not to the
        ``y`` from before it."""
        alive = []
        self._register = False  # the replayed views are temporaries: no need to track them
        try:
            for ref in base._views:
                view = ref()
                if view is None:
                    continue
                alive.append(ref)
                current = base
                for op, rest, attrs in view._chain:
                    current = self.apply(op, (current,) + rest, attrs)
                view._node = current._node
                view._rg = current._rg
        finally:
            self._register = True
        base._views = alive


def _put_back(interp, parent, value, rest, attrs):
    from ..ops.indexing import index_put
    return interp.apply(index_put, (parent, value) + rest, {"spec": attrs["spec"]})


def _reshape_back(interp, parent, value, rest, attrs):
    from ..ops.shape_ops import reshape
    return interp.apply(reshape, (value,), {"shape": tuple(parent.shape)})


def _permute_back(interp, parent, value, rest, attrs):
    from ..ops.shape_ops import _inverse_permutation, permute
    return interp.apply(permute, (value,), {"dims": _inverse_permutation(attrs["dims"])})


# view op -> how a written view's history goes back into the tensor it views (the new value
# of that tensor, as an op of its value before the write and the view's new value)
_WRITE_BACK = {"getitem": _put_back, "reshape": _reshape_back, "permute": _permute_back}

set_interpreter(EagerInterpreter())
