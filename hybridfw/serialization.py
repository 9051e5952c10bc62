"""``hf.save`` / ``hf.load``: checkpoints in a format that cannot run code when loaded.

A checkpoint is a zip archive holding ``manifest.json`` (the format name and version, and the
structure of the saved object) and one ``.npy`` file per tensor under ``tensors/``. Arrays are
written and read with ``allow_pickle=False``, the manifest is plain JSON, and loading builds only
dicts, lists, tuples, tensors and plain values, so a checkpoint from an untrusted source cannot
execute anything. Pickle files (``torch.save`` output included) are refused, not loaded.

What can be saved: tensors (dtype, ``requires_grad`` and being an ``hf.nn.Parameter`` are kept;
gradients are not), numpy
arrays (non-object dtypes), ``None``, bools, ints, floats (NaN and infinities included),
strings, and dicts (str or int keys, ``OrderedDict`` kept as such), lists and tuples of those,
nested freely. A tensor reached twice (tied weights) is stored once and loads as one tensor;
distinct tensors sharing memory (a tensor and its views, tied weights in a state dict) share
it again when loaded, as with ``torch.load``: what they cover of it is stored once (format
version 2; a checkpoint without such tensors is written as version 1).

Saving is atomic: the archive is written to a temporary file next to ``path``, flushed to disk,
then renamed over ``path``, so an interrupted save never leaves a half-written checkpoint.

Example::

    >>> import hybridfw as hf
    >>> hf.save({"step": 3, "weights": [hf.ones(2), hf.zeros(3, dtype="int64")]}, "ckpt.hf")
    >>> hf.load("ckpt.hf")["weights"][1].dtype
    hybridfw.int64
"""
from __future__ import annotations

import io
import json
import math
import os
import stat
import tempfile
import zipfile
from collections import OrderedDict

import numpy as np

from .backend import cpu, root_array
from .backend import device as as_device
from .dtypes import dtype_of_array
from .dygraph import Tensor, from_numpy

__all__ = ["save", "load", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "hybridfw.checkpoint"
FORMAT_VERSION = 2  # 1: no shared storages; both are read
_MANIFEST = "manifest.json"
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # a fixed timestamp: the same object gives the same bytes
_NUMPY_KINDS = "biufc"  # bool, ints, floats, complex: what .npy stores without pickle
_MAX_COMPRESSION_RATIO = 1100  # deflate can't do better than about 1032:1


# ---- save ----------------------------------------------------------------------------------
class _Encoder:
    """Walks the object once, building the JSON manifest and the list of arrays to write."""

    def __init__(self):
        self.arrays: list = []     # (file name, Tensor or ndarray), written in this order
        self.version = 1           # 2 once tensors share a storage file (older readers refuse)
        self._files: dict = {}     # id(tensor) -> file name, so a shared tensor is stored once
        self._keep: list = []      # the objects behind _files' ids stay alive while encoding
        self._active: set = set()  # ids of containers being encoded (cycle detection)
        self._tensors: list = []   # (tensor, its manifest node), given files by finish()

    def encode(self, obj, where: str):
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            return float(obj) if math.isfinite(obj) else {"type": "float", "value": repr(obj)}
        if isinstance(obj, Tensor):
            return self._tensor(obj)
        if isinstance(obj, np.ndarray):
            return self._ndarray(obj, where)
        if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
            return self.encode(obj.item(), where)  # numpy scalars are kept as Python numbers
        if isinstance(obj, (dict, list, tuple)):
            if id(obj) in self._active:
                raise TypeError(f"hf.save: {where} contains itself (a circular reference)")
            self._active.add(id(obj))
            try:
                return self._container(obj, where)
            finally:
                self._active.discard(id(obj))
        hint = ""
        if callable(getattr(obj, "state_dict", None)):
            hint = (f"; save its state instead ({type(obj).__name__}.state_dict()) and "
                    "restore it with .load_state_dict(hf.load(path))")
        raise TypeError(f"hf.save: can't save {where} of type {type(obj).__name__}; checkpoints "
                        "hold tensors, numpy arrays, None, bool, int, float, str and dicts, "
                        f"lists and tuples of those (objects are not pickled){hint}")

    def _container(self, obj, where: str):
        if isinstance(obj, dict):
            items = []
            for key, value in obj.items():
                if isinstance(key, bool) or not isinstance(key, (str, int)):
                    raise TypeError(f"hf.save: dict keys must be str or int, but {where} has a "
                                    f"key {key!r} of type {type(key).__name__}")
                items.append([key if isinstance(key, str) else int(key),
                              self.encode(value, f"{where}[{key!r}]")])
            kind = "ordered_dict" if isinstance(obj, OrderedDict) else "dict"
            return {"type": kind, "items": items}
        kind = "list" if isinstance(obj, list) else "tuple"
        return {"type": kind, "items": [self.encode(v, f"{where}[{i}]")
                                        for i, v in enumerate(obj)]}

    def _add(self, obj, prefix: str) -> str:
        name = self._files.get(id(obj))
        if name is None:
            name = self._files[id(obj)] = f"{prefix}/{len(self.arrays)}.npy"
            self._keep.append(obj)
            self.arrays.append((name, obj))
        return name

    def _tensor(self, t: Tensor) -> dict:
        node = {"type": "tensor", "file": None, "dtype": t.dtype.name,
                "shape": list(t.shape), "requires_grad": bool(t.requires_grad),
                "device": str(t.device)}
        if isinstance(t, _parameter_class()):
            node["parameter"] = True  # loaded back as an hf.nn.Parameter, as torch.load does
        self._tensors.append((t, node))
        return node

    def finish(self) -> None:
        """Give each tensor node its file. Distinct tensors sharing one storage (a tensor and
        its views, tied weights in a state dict) share one file, the part of their storage
        they cover, and each records where in it it lies (``offset``, ``strides``, in
        elements; ``view`` tells them apart), so that they share memory again when loaded,
        as with ``torch.load``. Other tensors are stored alone, just their own elements."""
        groups: dict = {}
        for t, node in self._tensors:
            groups.setdefault(id(t._storage), []).append((t, node))
        for members in groups.values():
            span = _shared_span(members)
            if span is None:
                for t, node in members:
                    node["file"] = self._add(t, "tensors")
                continue
            part, layouts = span
            name = self._add(part, "tensors")
            views: dict = {}
            for t, node in members:
                offset, strides = layouts[id(t)]
                node.update(file=name, offset=offset, strides=strides,
                            view=views.setdefault(id(t), len(views)))
            self.version = 2

    def _ndarray(self, arr: np.ndarray, where: str) -> dict:
        if arr.dtype.kind not in _NUMPY_KINDS:
            raise TypeError(f"hf.save: can't save {where}, a numpy array of dtype {arr.dtype}; "
                            "only arrays of bools and numbers can be stored without pickle")
        return {"type": "ndarray", "file": self._add(arr, "arrays"), "dtype": arr.dtype.str,
                "shape": list(arr.shape)}


def _address(arr) -> int:
    data = arr.data
    return data.ptr if hasattr(data, "ptr") else arr.__array_interface__["data"][0]


def _extent(shape, strides) -> tuple:
    """The lowest and one past the highest element (relative to the first) a layout reaches."""
    lo = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0) + 1
    return lo, hi


def _overlaps(shape, strides) -> bool:
    """Whether two elements of a strided layout share memory (an ``expand``-ed view does):
    such views are not stored as views, so a view read back never has more elements than the
    part of the file it covers."""
    reach = 1  # one past the farthest element reached so far, dims taken by rising stride
    for stride, n in sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1):
        if stride < reach:
            return True
        reach += (n - 1) * stride
    return False


def _shared_span(members: list):
    """For tensors of one storage: ``(span, {id(tensor): (offset, strides)})`` when at least
    two distinct tensors share it and all are strided views of its root array with its dtype
    whose elements do not overlap (no ``expand``);
    ``span`` is the 1-D part of the root they reach, offsets and strides count elements of it
    (an empty tensor gets offset 0). Else None: each is then stored on its own."""
    if len({id(t) for t, _ in members}) < 2:
        return None
    root = root_array(members[0][0]._data)
    if not (root.flags.c_contiguous or root.flags.f_contiguous):
        return None
    flat = root.reshape(-1) if root.flags.c_contiguous else root.T.reshape(-1)
    size, start = flat.dtype.itemsize, _address(flat)
    layouts: dict = {}
    for t, _ in members:
        arr = t._data
        if arr.dtype != flat.dtype or root_array(arr) is not root:
            return None
        offset, rest = divmod(_address(arr) - start, size)
        if rest or any(s % size for s in arr.strides):
            return None
        strides = [s // size for s in arr.strides]
        if arr.size and _overlaps(arr.shape, strides):
            return None
        layouts[id(t)] = (offset, strides, arr.size == 0)
    reached = []
    for t, _ in members:
        offset, strides, empty = layouts[id(t)]
        if not empty:
            lo, hi = _extent(t.shape, strides)
            reached.append((offset + lo, offset + hi))
    lo = min((r[0] for r in reached), default=0)
    hi = max((r[1] for r in reached), default=0)
    return flat[lo:hi], {key: (0 if empty else offset - lo, strides)
                         for key, (offset, strides, empty) in layouts.items()}


class MissingDirectoryError(FileNotFoundError, RuntimeError):
    """``hf.save`` into a directory that does not exist: a FileNotFoundError, and the
    RuntimeError torch.save raises there."""


def _int_list(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool)
                                           for v in value)


def _parameter_class():
    from .nn.parameter import Parameter  # (nn is built on this floor: imported when used)
    return Parameter


def _host_array(obj) -> np.ndarray:
    if isinstance(obj, Tensor):
        obj = obj.detach().cpu().numpy()
    elif not isinstance(obj, np.ndarray):  # the shared part of a CUDA tensors' storage
        obj = obj.get()
    return obj


def _zip_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    return info


def _write_archive(fileobj, manifest: bytes, arrays: list) -> None:
    with zipfile.ZipFile(fileobj, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        archive.writestr(_zip_info(_MANIFEST), manifest)
        for name, obj in arrays:
            arr = _host_array(obj)
            with archive.open(_zip_info(name), "w", force_zip64=True) as f:
                np.lib.format.write_array(f, arr, allow_pickle=False)


def _new_file_mode(path: str) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)  # replacing a file keeps its permissions
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def save(obj, f=None, *, path=None) -> None:
    """Save ``obj`` (tensors and plain values in nested dicts/lists/tuples) to ``f``.

    ``f`` (PyTorch's name; ``path=`` is accepted too) is used exactly as given (no extension
    added); it may also be a binary file object. Raises ``TypeError`` naming the place of any
    value that can't be stored.

    Example::

        >>> hf.save(model.state_dict(), "model.hf")
    """
    path = _file_argument("hf.save", f, path)
    encoder = _Encoder()
    root = encoder.encode(obj, "obj")
    encoder.finish()
    manifest = json.dumps({"format": FORMAT_NAME, "version": encoder.version, "root": root},
                          ensure_ascii=False, allow_nan=False).encode("utf-8")
    if hasattr(path, "write"):
        _write_archive(path, manifest, encoder.arrays)
        return
    write_atomically(path, lambda f: _write_archive(f, manifest, encoder.arrays), "hf.save")


def write_atomically(path, write, who: str) -> None:
    """Write a file at exactly ``path`` through ``write(binary file)``, atomically: into a
    temporary file beside it, flushed to disk, then renamed over ``path`` (an interrupted or
    failed write leaves ``path`` as it was and no temporary file). A new file gets the usual
    permissions (``0o666`` less the umask), a replaced one keeps its own; a symlink is written
    through. ``who`` names the caller in errors (a missing directory)."""
    path = os.fspath(path)
    if os.path.islink(path):  # write through a symlink, as open(path, "wb") would
        path = os.path.realpath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise MissingDirectoryError(f"{who}: can't save to {path!r}: directory {directory!r} "
                                    "does not exist")
    mode = _new_file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: str) -> None:
    """Make the rename durable too (best effort: not every platform can open directories)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---- load ----------------------------------------------------------------------------------
def _looks_like_pickle(head: bytes) -> bool:
    # Protocol 2+ pickles (and torch's legacy format) open with PROTO: 0x80 then the version.
    return len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5


class _Decoder:
    def __init__(self, archive: zipfile.ZipFile, size: int, label: str, device):
        self.archive = archive
        self.size = size
        self.label = label
        self.device = device
        self._loaded: dict = {}  # file name -> Tensor/ndarray (shared tensors load as one)

    def bad(self, why: str) -> ValueError:
        return ValueError(f"hf.load: {self.label} is not a valid hybridfw checkpoint: {why}")

    def decode(self, node, where: str):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise self.bad(f"unexpected manifest entry at {where}")
        kind = node["type"]
        if kind in ("dict", "ordered_dict"):
            out = OrderedDict() if kind == "ordered_dict" else {}
            for item in self._items(node, where):
                if not isinstance(item, list) or len(item) != 2 or \
                        isinstance(item[0], bool) or not isinstance(item[0], (str, int)):
                    raise self.bad(f"malformed dict item at {where}")
                out[item[0]] = self.decode(item[1], f"{where}[{item[0]!r}]")
            return out
        if kind in ("list", "tuple"):
            items = [self.decode(v, f"{where}[{i}]")
                     for i, v in enumerate(self._items(node, where))]
            return items if kind == "list" else tuple(items)
        if kind == "float":
            value = node.get("value")
            if value not in ("nan", "inf", "-inf"):
                raise self.bad(f"malformed float at {where}")
            return float(value)
        if kind == "tensor":
            return self._tensor(node, where)
        if kind == "ndarray":
            return self._array(node, where)
        raise self.bad(f"unknown entry type {kind!r} at {where}")

    def _items(self, node: dict, where: str) -> list:
        items = node.get("items")
        if not isinstance(items, list):
            raise self.bad(f"malformed container at {where}")
        return items

    def entry(self, name: str, what: str) -> zipfile.ZipInfo:
        """The zip entry ``name``, checked so that reading it can't allocate far more memory
        than the file holds (a forged size or a decompression bomb)."""
        try:
            info = self.archive.getinfo(name)
        except KeyError:
            raise self.bad(f"{what} is missing") from None
        if info.compress_type == zipfile.ZIP_STORED:
            plausible = info.file_size == info.compress_size <= self.size
        else:
            plausible = info.file_size <= _MAX_COMPRESSION_RATIO * info.compress_size + 4096
        if not plausible:
            raise self.bad(f"{what} claims {info.file_size} bytes, more than the file can hold")
        return info

    def _read(self, node: dict, where: str, any_shape: bool = False) -> np.ndarray:
        name = node.get("file")
        if not isinstance(name, str):
            raise self.bad(f"missing array file name at {where}")
        what = f"array file {name!r} for {where}"
        info = self.entry(name, what)
        try:
            with self.archive.open(info) as f:
                # Check the header before numpy allocates what it describes.
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(f)
                elif version == (2, 0):
                    shape, _, dtype = np.lib.format.read_array_header_2_0(f)
                else:
                    raise ValueError(f"unsupported .npy format version {version}")
                if dtype.hasobject or dtype.kind not in _NUMPY_KINDS:
                    raise ValueError(f"dtype {dtype} can't be loaded without pickle")
                nbytes = math.prod(shape) * dtype.itemsize
                if f.tell() + nbytes != info.file_size:
                    raise ValueError(f"its header describes {nbytes} bytes of data, the file "
                                     f"holds {info.file_size - f.tell()}")
            with self.archive.open(info) as f:
                arr = np.lib.format.read_array(f, allow_pickle=False)
                f.read(1)  # reading to the end makes zipfile check the CRC
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
            raise self.bad(f"{what} is unreadable ({exc})") from None
        if not any_shape and list(arr.shape) != node.get("shape"):
            raise self.bad(f"{what} has shape {arr.shape}, the manifest says "
                           f"{node.get('shape')}")
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        return arr

    def _tensor(self, node: dict, where: str) -> Tensor:
        name = node.get("file")
        if "view" in node:
            return self._view(node, where)
        if not isinstance(name, str):
            raise self.bad(f"missing array file name at {where}")
        if name in self._loaded:
            return self._loaded[name]
        arr = self._read(node, where)
        try:
            dtype = dtype_of_array(arr)
        except TypeError:
            raise self.bad(f"tensor {where} has unsupported dtype {arr.dtype}") from None
        if dtype.name != node.get("dtype"):
            raise self.bad(f"tensor {where} has dtype {dtype.name}, the manifest says "
                           f"{node.get('dtype')}")
        t = from_numpy(arr)
        target = self._target_device(node.get("device"))
        if target is not cpu:
            t = t.to(target)
        if node.get("parameter") is True:
            t = _parameter_class()(t, requires_grad=node.get("requires_grad") is True)
        elif node.get("requires_grad") is True:
            t.requires_grad_(True)
        self._loaded[name] = t
        return t

    def _view(self, node: dict, where: str) -> Tensor:
        """A tensor stored as a view into a shared storage file (see ``_Encoder.finish``):
        all views of one file share one storage, as they did when saved."""
        name, view = node.get("file"), node.get("view")
        shape, offset, strides = node.get("shape"), node.get("offset"), node.get("strides")
        if not (isinstance(name, str) and _int_list(shape) and _int_list(strides)
                and len(strides) == len(shape) and _int_list([offset, view])
                and min(shape, default=0) >= 0):
            raise self.bad(f"malformed view entry at {where}")
        key = (name, view)
        if key in self._loaded:
            return self._loaded[key]
        storage = self._loaded.get(name)
        if storage is None:
            flat = self._read({"file": name, "shape": None}, where, any_shape=True)
            if flat.ndim != 1:
                raise self.bad(f"shared storage file {name!r} for {where} is not 1-D")
            storage = from_numpy(flat)
            target = self._target_device(node.get("device"))
            if target is not cpu:
                storage = storage.to(target)
            self._loaded[name] = storage
        if not isinstance(storage, Tensor):
            raise self.bad(f"file {name!r} for {where} is used both as an array and a tensor")
        flat = storage._data
        if math.prod(shape) == 0:
            offset, strides = 0, [0] * len(shape)
        elif _overlaps(shape, strides):
            raise self.bad(f"view {where} has elements sharing memory (strides {strides})")
        lo, hi = _extent(shape, strides)
        if offset + lo < 0 or offset + hi > flat.size or not 0 <= offset <= flat.size:
            raise self.bad(f"view {where} reaches outside its storage file {name!r}")
        if dtype_of_array(flat).name != node.get("dtype"):
            raise self.bad(f"tensor {where} has dtype {dtype_of_array(flat).name}, the "
                           f"manifest says {node.get('dtype')}")
        arr = storage.device.xp.lib.stride_tricks.as_strided(
            flat[offset:], shape=tuple(shape), strides=tuple(s * flat.itemsize for s in strides))
        t = Tensor._from_saved(arr, storage._storage, None)
        if node.get("parameter") is True:
            t = _parameter_class()(t, requires_grad=node.get("requires_grad") is True)
        elif node.get("requires_grad") is True:
            t.requires_grad_(True)
        self._loaded[key] = t
        return t

    def _array(self, node: dict, where: str) -> np.ndarray:
        name = node.get("file")
        if not isinstance(name, str):
            raise self.bad(f"missing array file name at {where}")
        if name in self._loaded:
            return self._loaded[name]
        arr = self._read(node, where)
        if arr.dtype.kind not in _NUMPY_KINDS:
            raise self.bad(f"array {where} has unsupported dtype {arr.dtype}")
        self._loaded[name] = arr
        return arr

    def _target_device(self, saved):
        location = self.device
        if isinstance(location, dict):
            location = location.get(saved, "cpu")
        return as_device(location) if location is not None else cpu


def _file_argument(name: str, f, path):
    """The file given as ``f`` (PyTorch's name) or as ``path`` (hybridfw's), exactly one."""
    if f is not None and path is not None:
        raise TypeError(f"{name}: got the file twice, as f={f!r} and path={path!r}; pass one")
    if f is None and path is None:
        raise TypeError(f"{name}: missing the file to use (a path or a binary file object)")
    return f if f is not None else path


def load(f=None, map_location=None, *, weights_only: bool | None = None,
         mmap: bool | None = None, path=None):
    """Load what :func:`save` wrote from ``f`` (PyTorch's name; ``path=`` is accepted too).
    Tensors land on the CPU, or on ``map_location`` (a device, ``'cuda:0'``, or a dict from
    saved device names to target devices).

    Never runs code from the file: pickle files (``torch.save`` output included) are refused,
    and a truncated, corrupted or foreign file raises ``ValueError`` naming ``f``. So PyTorch's
    ``weights_only`` changes nothing here (``True`` and ``False`` both load), and ``mmap`` is
    accepted for compatibility; the arrays are read into memory either way.

    Example::

        >>> state = hf.load("model.hf", weights_only=True)
        >>> model.load_state_dict(state)
    """
    path = _file_argument("hf.load", f, path)
    for option, value in (("weights_only", weights_only), ("mmap", mmap)):
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"hf.load: {option} must be True, False or None, got {value!r}")
    if callable(map_location):
        raise TypeError("hf.load: map_location as a function (PyTorch's storage-remapping "
                        "callable) is not supported; pass None, a device such as 'cpu', or a "
                        "dict from saved device names to target devices")
    if map_location is not None and not isinstance(map_location, dict):
        as_device(map_location)  # a bad device string fails here, before any reading
    if hasattr(path, "read"):
        label = f"<{type(path).__name__} object>"
        data = path.read()
        return _load_archive(io.BytesIO(data), len(data), label, map_location)
    path = os.fspath(path)
    label = repr(path)
    with open(path, "rb") as f:
        return _load_archive(f, os.fstat(f.fileno()).st_size, label, map_location)


def _load_archive(f, size: int, label: str, map_location):
    head = f.read(4)
    f.seek(0)
    if _looks_like_pickle(head):
        raise ValueError(f"hf.load: {label} looks like a pickle file (e.g. written by Python's "
                         "pickle or torch.save); hybridfw never loads pickle because loading "
                         "it can run arbitrary code. Convert it with a trusted tool into "
                         "tensors and hf.save them.")
    if head.startswith(b"\x93NUM"):
        raise ValueError(f"hf.load: {label} is a single numpy .npy file, not a hybridfw "
                         "checkpoint; read it with numpy.load(path, allow_pickle=False)")
    try:
        archive = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise ValueError(f"hf.load: {label} is not a hybridfw checkpoint (not a readable zip "
                         f"archive: {exc}); the file may be truncated or corrupted") from None
    with archive:
        names = archive.namelist()
        if _MANIFEST not in names:
            if any(n.endswith((".pkl", "/data.pkl")) for n in names):
                raise ValueError(f"hf.load: {label} looks like a PyTorch checkpoint "
                                 "(torch.save): a zip holding pickle data; hybridfw never "
                                 "loads pickle because loading it can run arbitrary code")
            raise ValueError(f"hf.load: {label} is not a hybridfw checkpoint: the zip archive "
                             f"has no {_MANIFEST}")
        decoder = _Decoder(archive, size, label, map_location)
        info = decoder.entry(_MANIFEST, _MANIFEST)
        try:
            manifest = json.loads(archive.read(info).decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError, zipfile.BadZipFile,
                OSError, EOFError) as exc:
            raise decoder.bad(f"unreadable {_MANIFEST} ({exc})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
            raise decoder.bad(f"{_MANIFEST} does not name the format {FORMAT_NAME!r}")
        version = manifest.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION or version < 1:
            raise decoder.bad(f"format version {version!r} is not supported (this hybridfw "
                              f"reads versions 1 to {FORMAT_VERSION}); upgrade hybridfw")
        try:
            return decoder.decode(manifest.get("root"), "obj")
        except RecursionError:
            raise decoder.bad("the structure is nested too deeply") from None
