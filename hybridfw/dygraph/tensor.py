"""The eager Tensor: an array (numpy or cupy) plus its storage accounting and autograd state.

Math, shape and indexing methods come from :class:`~hybridfw.ops.methods.TensorMethods` (shared
with static Variables); what lives here needs real data: conversion to Python/numpy, devices,
``backward`` and the leaf/grad bookkeeping.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..backend import Storage, array_device, cpu, default_device, storage_for
from ..backend import device as as_device
from ..dtypes import (DType, as_dtype, bool_, dtype_of_array, get_default_dtype, int64,
                      promote_types)
from ..ops import elementwise as E
from ..ops.composite import _sizes_argument
from ..ops.composite import view as _view
from ..ops.infer import normalize_dim
from ..ops import shape_ops as S
from ..ops.methods import TensorMethods
from ..ops.registry import apply
from . import autograd
from .printing import format_tensor

__all__ = ["Tensor", "tensor", "as_tensor", "from_numpy", "backward", "grad"]

_ndarray = np.ndarray


class Tensor(TensorMethods):
    """An n-dimensional array on a device, with autograd.

    Example::

        >>> import hybridfw as hf
        >>> x = hf.tensor([1.0, 2.0, 3.0], requires_grad=True)
        >>> (x * x).sum().backward()
        >>> x.grad.tolist()
        [2.0, 4.0, 6.0]
    """

    # shape and dtype are plain slots (set when the tensor is made; in-place ops never change
    # them) because every op reads them on the hot path.
    # _base: the tensor this one is a view of (None otherwise); in-place writes into a view
    # while recording autograd are refused, since the base's graph would not see them.
    # _chain: on a view, the view ops that make it from _base ((op, other args, attrs), ...);
    # _views: on a base, weak references to its views. When an in-place op records a new
    # history for a base, its views get their history rebuilt from it (EagerInterpreter).
    __slots__ = ("_data", "_storage", "_node", "_rg", "_grad", "shape", "dtype", "_base",
                 "_chain", "_views", "__weakref__")

    def __init__(self, *data, dtype=None, device=None, requires_grad: bool = False):
        # PyTorch's legacy constructor: Tensor(2, 3) is a (2, 3) tensor (uninitialised there,
        # zeros here, as hf.empty), Tensor([2, 3]) holds the data, Tensor() is empty
        dt = as_dtype(dtype) if dtype is not None else get_default_dtype()
        if data and all(isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_))
                        for n in data):
            data = np.zeros(tuple(int(n) for n in data), dt.np)
        elif len(data) > 1:
            raise TypeError(f"Tensor(): takes sizes (ints) or one sequence of data, got "
                            f"{', '.join(type(d).__name__ for d in data)}")
        else:
            data = data[0] if data and data[0] is not None else []
        made = tensor(data, dtype=dt, device=device)
        self._data = made._data
        self._storage = made._storage
        self.shape = made.shape
        self.dtype = made.dtype
        self._node = None
        self._rg = False
        self._grad = None
        self._base = None
        self._chain = None
        self._views = None
        if requires_grad:
            self.requires_grad = True

    @classmethod
    def _from_saved(cls, arr, storage, node):
        t = _new(cls)
        t._data = arr
        t._storage = storage
        t.shape = arr.shape
        t.dtype = dtype_of_array(arr)
        t._node = node
        t._rg = node is not None
        t._grad = None
        t._base = None
        t._chain = None
        t._views = None
        return t

    def _to_tensor(self, value):
        return tensor(value, device=self._storage.device)

    # ---- attributes -------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def device(self):
        return self._storage.device

    @property
    def is_cuda(self) -> bool:
        return self._storage.device.type == "cuda"

    @property
    def nbytes(self) -> int:
        return self._data.nbytes

    @property
    def itemsize(self) -> int:
        return self._data.itemsize

    @property
    def requires_grad(self) -> bool:
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        value = bool(value)
        if self._node is not None:
            if not value:
                raise RuntimeError("requires_grad: you can only change requires_grad of leaf "
                                   "tensors; use detach() to get a tensor without history")
            return
        if value and not self.dtype.is_floating_point:
            raise TypeError(f"requires_grad: only floating-point tensors can require gradients, "
                            f"this one has dtype {self.dtype}")
        self._rg = value

    @property
    def grad(self) -> "Tensor | None":
        """The gradient ``backward()`` accumulated into this tensor (None until then)."""
        return self._grad

    @grad.setter
    def grad(self, value: "Tensor | None") -> None:
        # Checked where the bad gradient enters (as PyTorch does), not at the optimizer's step.
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"grad: assigned grad expected to be a Tensor or None but got "
                                f"grad of type {type(value).__name__}")
            if value.dtype != self.dtype:
                raise RuntimeError(f"grad: assigned grad has data of a different type "
                                   f"({value.dtype}) than the tensor ({self.dtype})")
            if value.shape != self.shape:
                raise RuntimeError(f"grad: assigned grad has data of a different size "
                                   f"({tuple(value.shape)}) than the tensor ({tuple(self.shape)})")
        self._grad = value

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def grad_fn(self):
        return self._node

    @property
    def data(self) -> "Tensor":
        """This tensor's storage without autograd history (like ``detach()``)."""
        return self.detach()

    @data.setter
    def data(self, value: "Tensor") -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"data: expected a Tensor, got {type(value).__name__}")
        if self._rg and not value.dtype.is_floating_point:
            raise RuntimeError(f"data: a tensor that requires grad can only hold floating point "
                               f"data, got dtype {value.dtype}")
        self._data = value._data
        self._storage = value._storage
        self.shape = value.shape
        self.dtype = value.dtype
        self._base = None
        self._chain = None
        self._views = None

    def data_ptr(self) -> int:
        """The address of this tensor's first element (as PyTorch's): tensors sharing memory
        from the same element (``detach()``, ``.data``, ``from_numpy``) have the same one."""
        arr = self._data
        if self._storage.device is cpu:
            return arr.__array_interface__["data"][0]
        return arr.data.ptr

    # ---- conversion -------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The data as a numpy array sharing memory (CPU tensors without grad only)."""
        if self._rg:
            raise RuntimeError("numpy: can't call numpy() on a tensor that requires grad; use "
                               "tensor.detach().numpy()")
        if self._storage.device is not cpu:
            raise TypeError(f"numpy: the tensor is on {self.device}; use tensor.cpu().numpy()")
        return self._data

    def __array__(self, dtype=None, copy=None):
        arr = self._data if self._storage.device is cpu else self._data.get()
        return arr if dtype is None else arr.astype(dtype)

    def item(self):
        if self._data.size != 1:
            raise ValueError(f"item: only one-element tensors can be converted to a Python "
                             f"scalar, this one has shape {self.shape}")
        return self._data.item()

    def tolist(self):
        return self._data.tolist()

    def detach(self) -> "Tensor":
        """A tensor sharing this one's storage, without autograd history."""
        t = _new(Tensor)
        t._data = self._data
        t._storage = self._storage
        t.shape = self.shape
        t.dtype = self.dtype
        t._node = None
        t._rg = False
        t._grad = None
        t._base = None
        t._chain = None
        t._views = None
        return t

    def detach_(self) -> "Tensor":
        self._node = None
        self._rg = False
        return self

    def _become_view(self, name: str, view: "Tensor") -> "Tensor":
        """Make this tensor ``view`` (a view of it taken by the in-place shape method ``name``:
        ``unsqueeze_``, ``t_``, ...): its shape and history become the view's, as PyTorch's.

        Views taken of this tensor before keep their shape, but each view of a base is kept as
        the chain of view ops that makes it from the base (to rebuild its history after an
        in-place write); once the base's shape changes those chains no longer apply, so a
        tensor with live views is refused."""
        if self._rg and self._node is None and autograd.GradMode.enabled:
            raise RuntimeError(f"{name}: a leaf tensor that requires grad is being used in an "
                               "in-place operation; wrap it in hf.no_grad() or clone() it first")
        if self._views and any(ref() is not None and ref() is not view for ref in self._views):
            raise RuntimeError(f"{name}: this tensor has views taken of it (slices, reshapes, "
                               "...), whose history is kept relative to its current shape; "
                               f"changing its shape in place is not supported here: use "
                               f"y = x.{name[:-1]}(...) instead")
        self._data = view._data
        self._storage = view._storage
        self.shape = view.shape
        if self._base is not None:  # a view itself: now one more view op from its base
            self._chain = view._chain
        if autograd.GradMode.enabled:
            self._node = view._node
            self._rg = view._rg
        return self

    def contiguous(self) -> "Tensor":
        return self if self._data.flags.c_contiguous else apply(E.copy, self)

    def is_contiguous(self) -> bool:
        return bool(self._data.flags.c_contiguous)

    def view(self, *shape, size=None) -> "Tensor":
        """This tensor's data seen with a new shape, sharing its memory (writes through the
        view reach this tensor). Raises RuntimeError, as PyTorch does, where the strides of a
        non-contiguous tensor cannot give that shape without a copy: use ``reshape`` there.

        Example::

            >>> import hybridfw as hf
            >>> hf.arange(6).view(2, 3).tolist()
            [[0, 1, 2], [3, 4, 5]]
        """
        shape = _sizes_argument("view", shape, "size", size)
        if not self._data.flags.c_contiguous:
            probe = self._data.view()
            try:
                probe.shape = tuple(int(s) for s in shape)
            except AttributeError:  # numpy's answer when only a copy would have that shape
                raise RuntimeError(
                    f"view: view size is not compatible with input tensor's size and stride "
                    f"(shape {self.shape}, strides {self.stride()}, new shape "
                    f"{tuple(int(s) for s in shape)}): at least one dimension spans across two "
                    f"contiguous subspaces. Use .reshape(...) instead.") from None
            except (ValueError, TypeError):
                pass  # a size mismatch: reshape below names it as for any tensor
        return _view(self, *shape)

    def stride(self, dim=None):
        """The step, in elements, between neighbours along each dim (a tuple), or along ``dim``.

        Example::

            >>> import hybridfw as hf
            >>> hf.zeros(2, 3).stride(), hf.zeros(2, 3).t().stride()
            ((3, 1), (1, 3))
        """
        strides = tuple(s // self._data.itemsize for s in self._data.strides)
        if dim is None:
            return strides
        return strides[normalize_dim("stride", dim, self._data.ndim)]

    def to(self, *args, dtype=None, device=None, copy: bool = False,
           non_blocking: bool = False) -> "Tensor":
        """``.to('cuda')``, ``.to(hf.float64)``, ``.to(other_tensor)``, ``.to(device, dtype)``.
        ``non_blocking`` is accepted as in PyTorch; copies here are synchronous."""
        dtype, device = self._to_arguments(args, dtype, device)
        out = self
        if device is not None:
            dev = as_device(device)
            if dev is not self._storage.device:
                dev.xp  # raises a clear error when CUDA is not available  # noqa: B018
                out = apply(S.to_device, out, device=str(dev), source=str(self._storage.device))
        if dtype is not None:
            out = out.astype(dtype)
        if copy and out is self:
            out = self.clone()
        return out

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    def cuda(self, device=None, non_blocking: bool = False) -> "Tensor":
        return self.to("cuda" if device is None else as_device(device if not isinstance(device, int)
                                                               else f"cuda:{device}"))

    # ---- autograd ---------------------------------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False,
                 inputs=None, *, grad=None) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (``grad=`` aliases
        ``gradient``); with ``inputs`` (tensors), into those tensors' ``.grad`` only."""
        if grad is not None:
            gradient = grad
        backward([self], None if gradient is None else [gradient], retain_graph=retain_graph,
                 create_graph=create_graph, inputs=inputs)

    def register_hook(self, hook):
        """Run ``hook(grad)`` on this tensor's gradient each time backward computes it; a hook
        that returns a tensor replaces the gradient. Returns a handle whose ``remove()``
        unregisters it. Works on leaves and on non-leaf tensors.

        Example::

            >>> import hybridfw as hf
            >>> w = hf.ones(2, requires_grad=True)
            >>> handle = w.register_hook(lambda g: g * 10)
            >>> (w * 3).sum().backward()
            >>> w.grad.tolist()
            [30.0, 30.0]
            >>> handle.remove()
        """
        return autograd.register_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Run ``hook(self)`` each time backward has accumulated this leaf's ``.grad`` (as soon
        as its gradient is complete, while backward continues); returns a handle whose
        ``remove()`` unregisters it.

        Example::

            >>> import hybridfw as hf
            >>> w = hf.ones(2, requires_grad=True)
            >>> seen = []
            >>> hook = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()))
            >>> (w * 3).sum().backward()
            >>> seen
            [[3.0, 3.0]]
        """
        return autograd.register_post_accumulate_grad_hook(self, hook)

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in ``.grad`` at the next ``backward()`` (a
        leaf keeps it anyway)."""
        if self._node is None:
            if not self._rg:
                raise RuntimeError("retain_grad: can't retain the gradient of a tensor that does "
                                   "not require grad")
            return
        node = self._node
        if node.retained is None:
            node.retained = []
        if not any(ref() is self for ref in node.retained):
            node.retained.append(weakref.ref(self))

    @property
    def retains_grad(self) -> bool:
        """Whether ``retain_grad()`` was called on this non-leaf tensor."""
        node = self._node
        return node is not None and bool(getattr(node, "retained", None)) and \
            any(ref() is self for ref in node.retained)

    # ---- Python protocol --------------------------------------------------------------------
    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(f"bool: the truth value of a tensor with {self._data.size} "
                               "elements is ambiguous; use .any() or .all()")
        return bool(self._data)

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return int(self._data)

    def __format__(self, spec: str) -> str:
        # as PyTorch: a 0-d tensor formats as its number (f"{loss}" is "0.25", not its repr)
        if self._data.ndim == 0:
            return format(self.item(), spec)
        return repr(self)

    def __repr__(self) -> str:
        """PyTorch's format (see :mod:`hybridfw.dygraph.printing`)."""
        return format_tensor(np.asarray(self.__array__()), self.dtype, self._storage.device,
                             None if self._node is None else repr(self._node), self._rg)

    def __deepcopy__(self, memo):
        t = tensor(self._data.copy(), device=self._storage.device)
        t._rg = self._rg
        if self.grad is not None:
            t.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = t
        return t

    def __reduce__(self):
        raise TypeError("hybridfw tensors are not picklable; use hf.save / hf.load")


_new = object.__new__


def wrap_array(arr, dev=None) -> Tensor:
    """A new leaf Tensor owning ``arr`` (the array is taken as is, not copied)."""
    t = _new(Tensor)
    t._data = arr
    if dev is None:
        dev = cpu if arr.__class__ is np.ndarray else array_device(arr)
    t._storage = Storage(arr.nbytes, dev) if arr.base is None else storage_for(arr, dev)
    t.shape = arr.shape
    t.dtype = dtype_of_array(arr)
    t._node = None
    t._rg = False
    t._grad = None
    t._base = None
    t._chain = None
    t._views = None
    return t


def _array_of_data(data, dtype):
    """The numpy array and dtype of ``tensor(data)`` for Python data (a number or nested
    lists). Without ``dtype``, PyTorch's: its elements' dtypes promoted, a Python float reading
    as the default dtype (float32), an int as int64, a bool as bool, and numpy scalars, arrays
    and tensors inside as their own dtypes (``[np.float64(1.5)]`` is float64, ``[1,
    tensor(2.5)]`` float32)."""
    found: set = set()
    if isinstance(data, (list, tuple)):
        _element_dtypes(data, found)
    else:
        found.add(type(data))
    if Tensor in found:  # tensors inside lists: their values, stacked
        found.discard(Tensor)
        data = _nested_to_numpy(data)
    if dtype is not None:
        dt = as_dtype(dtype)
    else:
        dt = None
        for kind in found:
            if kind.__class__ is not DType:
                kind = _PY_DTYPES.get(kind) or (get_default_dtype() if kind is float else
                                                _numpy_scalar_dtype(kind, data))
            dt = kind if dt is None else promote_types(dt, kind)
        dt = dt or get_default_dtype()  # tensor([]) is float32
    try:
        return np.asarray(data, dtype=dt.np), dt
    except ValueError:
        problem = _ragged_problem(data)
        if problem is None:
            raise
        raise ValueError(f"tensor: {problem}") from None


def _ragged_problem(data):
    """Where nested lists stop being rectangular, as PyTorch says it ("expected sequence of
    length 2 at dim 1 (got 1)"); None if they are. Only walked after numpy refused them."""
    sequence = (list, tuple, np.ndarray)
    shape = []
    first = data
    while isinstance(first, sequence):
        shape.append(len(first))
        first = first[0] if len(first) else None

    def check(seq, dim):
        if dim == len(shape):
            if isinstance(seq, sequence):
                return f"expected a number at dim {dim}, got a sequence of length {len(seq)}"
            return None
        if not isinstance(seq, sequence):
            return f"expected sequence of length {shape[dim]} at dim {dim} (got a number)"
        if len(seq) != shape[dim]:
            return f"expected sequence of length {shape[dim]} at dim {dim} (got {len(seq)})"
        for item in seq:
            problem = check(item, dim + 1)
            if problem is not None:
                return problem
        return None

    return check(data, 0)


_PY_DTYPES = {bool: bool_, int: int64}


def _numpy_scalar_dtype(kind, data) -> DType:
    if issubclass(kind, np.generic):
        return as_dtype(kind)
    raise TypeError(f"tensor: could not make a tensor from data of type {type(data).__name__} "
                    f"(it holds a {kind.__name__})")


def _element_dtypes(seq, found: set) -> None:
    """Add to ``found`` the types of ``seq``'s elements (numpy scalar types, Python number
    types) or, for arrays and tensors among them, their DTypes; nested lists are walked."""
    kinds = set(map(type, seq))
    if not any(k is list or k is tuple or issubclass(k, (np.ndarray, Tensor)) for k in kinds):
        found.update(kinds)  # the common case: one flat list of numbers, typed at C speed
        return
    for d in seq:
        if isinstance(d, (list, tuple)):
            _element_dtypes(d, found)
        elif isinstance(d, Tensor):
            found.update((d.dtype, Tensor))  # (Tensor: a mark that the list holds tensors)
        elif isinstance(d, np.ndarray):
            found.add(as_dtype(d.dtype))
        else:
            found.add(type(d))


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` as a tensor, without a copy where it already is one of that dtype and device
    (a tensor, or a writable numpy array on the CPU, which then shares its memory as with
    :func:`from_numpy`): PyTorch's ``as_tensor``; else as :func:`tensor`."""
    if isinstance(data, Tensor) and (dtype is None or as_dtype(dtype) is data.dtype) and \
            (device is None or as_device(device) is data._storage.device):
        return data
    if isinstance(data, np.ndarray) and data.flags.writeable and \
            (device is None and default_device() is cpu or
             device is not None and as_device(device) is cpu) and \
            (dtype is None or as_dtype(dtype).np == data.dtype):
        return from_numpy(data)
    if isinstance(data, Tensor):
        return data.to(*(a for a in (dtype, device) if a is not None))
    return tensor(data, dtype=dtype, device=device)


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Make a new tensor (a copy) from a Python number, list, numpy array or tensor.

    Python floats become float32, ints int64, bools bool; numpy arrays keep their dtype.

    Example::

        >>> hf.tensor([[1, 2], [3, 4]]).dtype
        hybridfw.int64
    """
    dev = as_device(device) if device is not None else None
    if isinstance(data, Tensor):
        arr = data._data
        src_dev = data._storage.device
        dt = as_dtype(dtype) if dtype is not None else data.dtype
        arr = arr.astype(dt.np, copy=True)
        dev = dev or src_dev
        if dev is not src_dev:
            from ..backend import to_device_array
            arr = to_device_array(arr, dev)
    else:
        if isinstance(data, np.generic) or (
                hasattr(data, "__array__") and not isinstance(data, np.ndarray)
                and not hasattr(data, "__cuda_array_interface__")):
            data = np.asarray(data)  # numpy scalars and foreign arrays keep their dtype
        if isinstance(data, np.ndarray) or (hasattr(data, "__cuda_array_interface__")):
            arr = data
            dt = as_dtype(dtype) if dtype is not None else dtype_of_array(arr)
            if dev is None:
                dev = array_device(arr) if not isinstance(arr, np.ndarray) else default_device()
        else:
            arr, dt = _array_of_data(data, dtype)
        dev = dev or default_device()
        xp = dev.xp
        if dev is cpu and not isinstance(arr, np.ndarray):
            arr = arr.get()
        arr = xp.array(arr, dtype=dt.np, copy=True)
    t = wrap_array(arr, dev)
    if requires_grad:
        t.requires_grad = True
    return t


def _nested_to_numpy(data):
    if isinstance(data, Tensor):
        return np.asarray(data.__array__())
    if isinstance(data, (list, tuple)):
        return np.stack([_nested_to_numpy(d) for d in data]) if data else np.zeros(0)
    return np.asarray(data)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with a numpy array (writes show in both)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    dtype_of_array(array)
    return wrap_array(array, cpu)


def _check_root(t, g, i):
    if not isinstance(t, Tensor):
        raise TypeError(f"backward: expected tensors, got {type(t).__name__} at position {i}")
    if not t._rg:
        raise RuntimeError(f"backward: element {i} of tensors does not require grad and does not "
                           "have a grad_fn")
    if g is None:
        if t._data.size != 1:
            raise RuntimeError(f"backward: grad can be implicitly created only for scalar "
                               f"outputs; this output has shape {t.shape}, pass a gradient of "
                               "that shape")
        return wrap_array(t._storage.device.xp.ones(t.shape, dtype=t._data.dtype),
                          t._storage.device)
    if not isinstance(g, Tensor):
        g = tensor(g, dtype=t.dtype, device=t.device)
    if g.shape != t.shape:
        raise ValueError(f"backward: gradient of shape {g.shape} does not match output "
                         f"{i} of shape {t.shape}")
    return g


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False,
             inputs=None) -> None:
    """Compute the gradients of ``tensors`` and accumulate them into the leaves' ``.grad``;
    with ``inputs`` (a tensor or a sequence of them, leaves or not), into those tensors'
    ``.grad`` only (the others' stay as they are).

    Example::

        >>> a, b = hf.ones(2, requires_grad=True), hf.ones(2, requires_grad=True)
        >>> hf.autograd.backward((a * b * 3).sum(), inputs=[a])
        >>> a.grad.tolist(), b.grad
        ([3.0, 3.0], None)
    """
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    grads = [None] * len(tensors) if grad_tensors is None else (
        [grad_tensors] if isinstance(grad_tensors, Tensor) else list(grad_tensors))
    grads = [_check_root(t, g, i) for i, (t, g) in enumerate(zip(tensors, grads))]
    if retain_graph is None:
        retain_graph = create_graph
    if inputs is None:
        autograd.run_backward(Tensor, tensors, grads, retain_graph=retain_graph,
                              create_graph=create_graph)
        return
    inputs = _backward_inputs(inputs)
    got = autograd.run_backward(Tensor, tensors, grads, retain_graph=retain_graph,
                                create_graph=create_graph, capture=inputs)
    autograd.accumulate_captured(inputs, got, grads, create_graph)


def _backward_inputs(inputs) -> list:
    """The distinct tensors of ``backward(inputs=...)``, checked."""
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if not inputs:
        raise RuntimeError("backward: inputs=... cannot be empty; leave it out to accumulate "
                           "into every leaf")
    distinct, seen = [], set()
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"backward: inputs[{i}] is a {type(t).__name__}, not an hf.Tensor")
        if not t._rg:
            raise RuntimeError(f"backward: inputs[{i}] (shape {t.shape}) does not require grad, "
                               "so it can get no .grad")
        if id(t) not in seen:
            seen.add(id(t))
            distinct.append(t)
    return distinct


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph: bool = False,
         only_inputs: bool = True, allow_unused: bool | None = None,
         is_grads_batched: bool = False, materialize_grads: bool = False):
    """Gradients of ``outputs`` with respect to ``inputs`` (a tuple), without touching ``.grad``.
    An input the outputs do not depend on raises, or with ``allow_unused=True`` gets None (or
    zeros with ``materialize_grads=True``). ``only_inputs`` is accepted as PyTorch's (ignored,
    as there); ``is_grads_batched=True`` is not supported.

    Example::

        >>> x = hf.tensor(3.0, requires_grad=True)
        >>> (g,) = hf.autograd.grad(x ** 3, [x], create_graph=True)
        >>> hf.autograd.grad(g, [x])[0].item()   # d2/dx2 x^3 = 6x
        18.0
    """
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    single = isinstance(inputs, Tensor)
    inputs = [inputs] if single else list(inputs)
    for what, values in (("output", outputs), ("input", inputs)):
        for i, t in enumerate(values):
            if not isinstance(t, Tensor):
                # (a TypeError: under to_static(full_graph=False) the function runs eagerly)
                raise TypeError(f"grad: {what} {i} is a {type(t).__name__}, not an hf.Tensor"
                                + (" (static values have no eager autograd graph: in a "
                                   "converted function use hf.static.gradients)"
                                   if hasattr(t, "block") else ""))
    if is_grads_batched:
        raise NotImplementedError("grad: is_grads_batched=True is not supported; call grad once "
                                  "per row of grad_outputs (retain_graph=True)")
    if materialize_grads:
        if allow_unused is False:
            raise ValueError("grad: materialize_grads=True gives zeros for unused inputs; it "
                             "needs allow_unused=True or left out, got allow_unused=False")
        allow_unused = True
    for i, t in enumerate(inputs):
        if not t._rg:
            raise RuntimeError(f"grad: input {i} does not require grad")
    gouts = [None] * len(outputs) if grad_outputs is None else (
        [grad_outputs] if isinstance(grad_outputs, Tensor) else list(grad_outputs))
    gouts = [_check_root(t, g, i) for i, (t, g) in enumerate(zip(outputs, gouts))]
    if retain_graph is None:
        retain_graph = create_graph
    result = autograd.run_backward(Tensor, outputs, gouts, retain_graph=retain_graph,
                                   create_graph=create_graph, capture=inputs)
    for i, r in enumerate(result):
        if r is None:
            if not allow_unused:
                raise RuntimeError(f"grad: input {i} (shape {inputs[i].shape}) was not used in "
                                   "the graph of the outputs; pass allow_unused=True to get None "
                                   "for it")
            if materialize_grads:
                t = inputs[i]
                result[i] = wrap_array(t._storage.device.xp.zeros(t.shape, dtype=t._data.dtype),
                                       t._storage.device)
    return tuple(result)


__all__ += ["wrap_array", "Storage"]
