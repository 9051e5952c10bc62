"""Devices, the array module (``xp``) behind each, and byte accounting of tensor storage.

Floor 1 of the architecture: everything above asks a :class:`Device` for its ``xp`` (numpy on
CPU, cupy on CUDA) and allocates through :class:`Storage`, whose lifetime is the lifetime of the
memory it accounts for. A Storage counts the bytes of the array that owns the memory (the root of
a chain of numpy/cupy views); tensors that are views of each other share one Storage, so a view
adds nothing. ``Storage.__del__`` runs when its last holder drops it (reference counting, no GC),
which is what makes ``hf.memory.allocated()`` exact at every moment.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Device", "device", "cpu", "Storage", "cuda_is_available", "cuda_device_count",
           "to_device_array", "default_device", "set_default_device", "array_device",
           "is_writeable", "root_array", "storage_for", "add_at", "blas_libraries"]

_cupy = None
_cupy_checked = False


def _get_cupy():
    """Import cupy lazily; None when it is not installed or no CUDA device works."""
    global _cupy, _cupy_checked
    if not _cupy_checked:
        _cupy_checked = True
        try:
            import cupy  # noqa: PLC0415 - optional dependency, imported on first use
            if cupy.cuda.runtime.getDeviceCount() > 0:
                _cupy = cupy
        except Exception:  # ImportError, CUDARuntimeError without a driver, ...
            _cupy = None
    return _cupy


def cuda_is_available() -> bool:
    """True when cupy imports and sees at least one CUDA device."""
    return _get_cupy() is not None


def cuda_device_count() -> int:
    cp = _get_cupy()
    return 0 if cp is None else cp.cuda.runtime.getDeviceCount()


class MemoryCounter:
    """Bytes of live storage on one device, with peak and allocation count."""

    __slots__ = ("allocated", "peak", "count", "largest", "reserved")

    def __init__(self):
        self.allocated = 0
        self.peak = 0
        self.count = 0
        self.largest = 0
        self.reserved = 0  # buffers kept for reuse between calls (see ReservedStorage)


class Device:
    """A place tensors live: ``hf.device('cpu')``, ``hf.device('cuda')``, ``hf.device('cuda:1')``.

    Devices are interned, so ``is`` compares them. ``device.xp`` is the array module.
    """

    __slots__ = ("type", "index", "counter", "_xp")

    def __init__(self, type_: str, index: int | None):
        self.type = type_
        self.index = index
        self.counter = MemoryCounter()
        self._xp = np if type_ == "cpu" else None

    @property
    def xp(self):
        xp = self._xp
        if xp is None:
            cp = _get_cupy()
            if cp is None:
                raise RuntimeError(f"device {self}: CUDA is not available (cupy is not installed "
                                   "or no GPU is visible); install hybridfw[gpu] on a machine "
                                   "with an NVIDIA GPU, or use device='cpu'")
            if self.index >= cp.cuda.runtime.getDeviceCount():
                raise RuntimeError(f"device {self}: only {cp.cuda.runtime.getDeviceCount()} "
                                   "CUDA device(s) are visible")
            xp = self._xp = cp
        return xp

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + ("" if self.index is None or self.type == "cpu"
                                                else f", index={self.index}") + ")"

    def __str__(self) -> str:
        return self.type if self.type == "cpu" else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except ValueError:
                return False
        return self is other

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (str(self),))


_devices: dict = {}


def device(spec="cpu", index: int | None = None, *, type: str | None = None) -> Device:  # noqa: A002
    """Return the interned Device for ``'cpu'``, ``'cuda'``, ``'cuda:N'`` (or a Device);
    ``device(type='cuda', index=1)`` as PyTorch's keywords."""
    if type is not None:
        spec = type
    if isinstance(spec, Device):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"device: expected a string like 'cpu' or 'cuda:0', got {spec!r}")
    key = spec.strip().lower()
    if ":" in key:
        key, _, idx = key.partition(":")
        try:
            index = int(idx)
        except ValueError:
            raise ValueError(f"device: invalid device string {spec!r}") from None
    if key not in ("cpu", "cuda"):
        raise ValueError(f"device: unknown device type {spec!r}; expected 'cpu', 'cuda' or "
                         "'cuda:N'")
    if key == "cpu":
        index = None
    elif index is None:
        index = 0
    dev = _devices.get((key, index))
    if dev is None:
        dev = _devices[(key, index)] = Device(key, index)
    return dev


cpu = device("cpu")
_default = [cpu]


def default_device() -> Device:
    return _default[0]


def get_default_device() -> Device:
    """The device new tensors land on (see :func:`set_default_device`), as PyTorch's."""
    return _default[0]


def set_default_device(spec) -> None:
    """Make new tensors (factories, ``hf.tensor``) land on this device by default (``None``:
    back to the CPU, as PyTorch)."""
    _default[0] = cpu if spec is None else device(spec)


def array_device(arr) -> Device:
    """The Device holding a numpy or cupy array."""
    if isinstance(arr, np.ndarray):
        return cpu
    dev_id = getattr(getattr(arr, "device", None), "id", None)
    if dev_id is None:
        raise TypeError(f"expected a numpy or cupy array, got {type(arr).__name__}")
    return device("cuda", dev_id)


def to_device_array(arr, dev: Device):
    """Copy an array to ``dev`` (numpy <-> cupy); returns it unchanged if already there."""
    if dev is cpu:
        return arr if isinstance(arr, np.ndarray) else arr.get()
    cp = dev.xp
    with cp.cuda.Device(dev.index):
        return cp.asarray(arr)


def add_at(xp, out, index, values) -> None:
    """``out[index] += values`` with repeated indices accumulating (numpy's ``add.at``; cupy's
    ``cupyx.scatter_add`` where its ufuncs lack ``.at``)."""
    at = getattr(xp.add, "at", None)
    if at is not None:
        at(out, index, values)
    else:
        import cupyx  # noqa: PLC0415 - only reached with cupy
        cupyx.scatter_add(out, index, values)


def is_writeable(arr) -> bool:
    """False for read-only arrays such as numpy broadcast views (cupy does not track it)."""
    return getattr(arr.flags, "writeable", True)


def root_array(arr):
    """The array that owns the memory ``arr`` views (numpy/cupy ``.base`` chain)."""
    base = arr.base
    while base is not None and hasattr(base, "base") and hasattr(base, "nbytes"):
        arr = base
        base = arr.base
    return arr


class Storage:
    """Accounts for the memory of one root array while some tensor refers to it.

    ``version`` counts in-place writes, so autograd can detect a saved tensor that was
    overwritten before backward used it.
    """

    __slots__ = ("nbytes", "device", "version", "__weakref__")

    def __init__(self, nbytes: int, dev: Device):
        self.nbytes = nbytes
        self.device = dev
        self.version = 0
        c = dev.counter
        c.count += 1
        a = c.allocated = c.allocated + nbytes
        if a > c.peak:
            c.peak = a
        if nbytes > c.largest:
            c.largest = nbytes

    def __del__(self):
        self.device.counter.allocated -= self.nbytes


class ReservedStorage(Storage):
    """The storage of a buffer a component keeps to reuse as scratch space (an optimizer's
    temporaries): counted in ``reserved`` (``hf.memory.stats()['reserved_bytes']``), like
    memory a caching allocator keeps, not in ``allocated``, which then shows what a program
    holds as values (parameters, gradients, optimizer state), as PyTorch's does."""

    __slots__ = ()

    def __init__(self, nbytes: int, dev: Device):
        self.nbytes = nbytes
        self.device = dev
        self.version = 0
        dev.counter.reserved += nbytes

    def __del__(self):
        self.device.counter.reserved -= self.nbytes


def reserve(tensor) -> None:
    """Count the freshly made ``tensor`` (no views of it yet) as reserved scratch space."""
    nbytes = tensor._storage.nbytes
    tensor._storage = ReservedStorage(nbytes, tensor._storage.device)


def storage_for(arr, dev: Device) -> Storage:
    """A new Storage for a freshly produced array (counting the bytes of its root)."""
    if arr.base is None:
        return Storage(arr.nbytes, dev)
    return Storage(root_array(arr).nbytes, dev)


def blas_libraries() -> list:
    """Paths of the shared libraries that may hold numpy's BLAS: the ones numpy's wheels bundle
    (``numpy.libs/`` on Linux and Windows, ``numpy/.dylibs/`` on macOS), then numpy's core
    extension (whose dependencies hold the BLAS of a numpy built against a system one)."""
    import glob
    import os
    package = os.path.dirname(np.__file__)
    found = []
    for folder in (os.path.join(os.path.dirname(package), "numpy.libs"),
                   os.path.join(package, ".dylibs")):
        found += sorted(path for path in glob.glob(os.path.join(folder, "*"))
                        if "blas" in os.path.basename(path).lower())
    core = os.path.join(package, "_core")
    if not os.path.isdir(core):  # numpy 1.x
        core = os.path.join(package, "core")
    found += sorted(glob.glob(os.path.join(core, "_multiarray_umath*")))
    return found
