"""``DistributedDataParallel``: one model replica per process, gradients averaged in backward.

Example (``mpiexec -n 2 python train.py``)::

    >>> import hybridfw as hf
    >>> hf.distributed.init_process_group("mpi")
    >>> model = hf.nn.parallel.DistributedDataParallel(hf.nn.Linear(4, 2))
    >>> opt = hf.optim.SGD(model.parameters(), lr=0.1)
    >>> loss = model(hf.randn(8, 4)).square().mean()  # each rank its own batch
    >>> loss.backward()                               # gradients averaged over the ranks
    >>> opt.step()                                    # so every replica stays the same
"""
from __future__ import annotations

import contextlib
import zlib

import numpy as np

from ...distributed.process_group import COLLECTIVES, check_consistent, default_group
from ...distributed.work import Work
from ...dygraph import Tensor, is_grad_enabled
from ...dygraph.autograd import Node
from ..modules.module import Module
from .reducer import Reducer

__all__ = ["DistributedDataParallel"]


class DistributedDataParallel(Module):
    """Wrap ``module`` for data-parallel training over the default process group.

    At construction every rank takes rank 0's parameters and buffers (a broadcast), so the
    replicas start equal. In ``backward()`` gradients are grouped into buckets of at most
    ``bucket_cap_mb`` MiB; each bucket's all-reduce starts as soon as its last gradient has
    been accumulated, overlapping communication with the rest of backward, and the gradients
    end up averaged over the ranks. ``no_sync()`` skips the all-reduce (gradient
    accumulation); a parameter that received no gradient is an error naming it, unless
    ``find_unused_parameters=True``: then, as in PyTorch, a parameter a rank did not use
    contributes the ``.grad`` it holds (zeros when it has none) to the average, and one no
    rank used keeps its ``.grad`` untouched (``None`` stays ``None``). Works on
    eager modules and on ``hf.jit.to_static`` modules alike. ``broadcast_buffers``: rank 0's
    buffers (BatchNorm statistics) are sent to all ranks before a forward, as in PyTorch
    before the first one and after a forward that synchronizes its backward (grad mode on,
    outside ``no_sync()``); not after one under ``no_grad`` or ``no_sync()``.
    ``process_group`` is PyTorch's name for ``group``.

    PyTorch's other arguments are taken by keyword: ``device_ids`` / ``output_device`` (None,
    or the one device the module's parameters are on: ``[rank]`` for a CUDA module, as in
    PyTorch; a CPU module takes None only), ``dim``, ``gradient_as_bucket_view``,
    ``static_graph`` and ``check_reduction`` (accepted; they change no result here).
    ``bucket_cap_mb=None`` is the default 25 MiB.
    """

    def __init__(self, module: Module, bucket_cap_mb: float | None = 25,
                 find_unused_parameters: bool = False, broadcast_buffers: bool = True,
                 group=None, *, process_group=None, device_ids=None, output_device=None,
                 dim: int = 0, gradient_as_bucket_view: bool = False,
                 static_graph: bool = False, check_reduction: bool = False):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be an hf.nn.Module, got "
                            f"{type(module).__name__}")
        _check_devices(module, device_ids, output_device)
        if bucket_cap_mb is None:
            bucket_cap_mb = 25
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be > 0, got "
                             f"{bucket_cap_mb!r}")
        self.module = module
        group = group or process_group or default_group("DistributedDataParallel")
        object.__setattr__(self, "group", group)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.broadcast_buffers = bool(broadcast_buffers)
        self.bucket_cap_mb = bucket_cap_mb
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("DistributedDataParallel: the module has no parameter that "
                             "requires grad; there is nothing to synchronize")
        _check_same_model(group, named)
        _broadcast_from_rank0(group, [p for _, p in module.named_parameters()] +
                              [b for b in module.buffers()])
        reducer = Reducer(named, group, int(bucket_cap_mb * 2**20), find_unused_parameters)
        object.__setattr__(self, "reducer", reducer)
        #: PyTorch's flag: whether the next forward broadcasts the buffers
        self.require_forward_param_sync = True

    @property
    def bucket_sizes(self) -> list:
        """Bytes of each gradient bucket, in launch order."""
        return [b.nbytes for b in self.reducer.buckets]

    def forward(self, *args, **kwargs):
        if self.broadcast_buffers and self.group.world_size > 1 and \
                self.require_forward_param_sync:
            buffers = list(self.module.buffers())
            if buffers:
                _broadcast_from_rank0(self.group, buffers)
        out = self.module(*args, **kwargs)
        sync = is_grad_enabled() and self.reducer.require_sync
        if sync:
            unused = _unused_parameters(self.reducer.named_params, out) \
                if self.find_unused_parameters else None
            self.reducer.prepare(unused)
        elif is_grad_enabled():  # under no_sync(): this graph's backward stays local
            self.reducer.expect_hooks = False
        self.require_forward_param_sync = sync
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, backward accumulates gradients locally without all-reducing them; the first
        backward after it averages the accumulated sums. As in PyTorch the forward decides: a
        forward run inside the context does not synchronize its backward (wherever that
        runs), one run outside does.

        Example::

            >>> with ddp.no_sync():
            ...     ddp(x1).sum().backward()     # local accumulation only
            >>> ddp(x2).sum().backward()         # all-reduces x1 + x2 gradients
        """
        previous = self.reducer.require_sync
        self.reducer.require_sync = False
        try:
            yield
        finally:
            self.reducer.require_sync = previous

    def extra_repr(self) -> str:
        return (f"world_size={self.group.world_size}, buckets={len(self.reducer.buckets)}, "
                f"bucket_cap_mb={self.bucket_cap_mb}")


def _check_devices(module: Module, device_ids, output_device) -> None:
    """PyTorch's ``device_ids`` / ``output_device`` for a single-device module: None, or that
    device (an index means a CUDA device); a CPU module takes None only."""
    if device_ids is None and output_device is None:
        return
    from ...backend import device as as_device
    devices = {p.device for p in module.parameters()}
    given = {"device_ids": device_ids, "output_device": output_device}
    if len(devices) != 1 or next(iter(devices)).type != "cuda":
        raise ValueError(f"DistributedDataParallel: device_ids and output_device are for a "
                         f"module on one CUDA device; got device_ids={device_ids!r}, "
                         f"output_device={output_device!r} for a module on "
                         f"{sorted(str(d) for d in devices)} (leave both None)")
    (on,) = devices
    for name, value in given.items():
        if value is None:
            continue
        if name == "device_ids":
            if not isinstance(value, (list, tuple)) or len(value) != 1:
                raise ValueError(f"DistributedDataParallel: device_ids must be None or a list "
                                 f"of the one device the module is on ([{on.index}]), got "
                                 f"{value!r}")
            value = value[0]
        want = as_device(f"cuda:{value}" if isinstance(value, int) and
                         not isinstance(value, bool) else value)
        if want != on:
            raise ValueError(f"DistributedDataParallel: {name}={given[name]!r} is not the "
                             f"device the module is on ({on})")


def _check_same_model(group, named: list) -> None:
    layout = ";".join(f"{n}:{p.shape}:{p.dtype}" for n, p in named).encode()
    row = np.full(12, -1, dtype=np.int64)
    row[:6] = (COLLECTIVES.index("DistributedDataParallel"), np.dtype(named[0][1]._data.dtype).num,
               2, len(named), sum(p.numel() for _, p in named), zlib.crc32(layout))
    try:
        check_consistent(group, "DistributedDataParallel", row, "parameters")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"DistributedDataParallel: the ranks hold different models (parameter "
                         f"count, total size and layout checksum must agree): {exc}") from None


def _broadcast_from_rank0(group, tensors: list) -> None:
    requests = []
    for t in tensors:
        arr = t._data
        group.backend.check_array("DistributedDataParallel", arr)
        requests.extend(group.backend.broadcast(arr, 0))
        t._storage.version += 1
    Work("broadcast (DistributedDataParallel parameters and buffers)", requests, group).wait()


def _unused_parameters(named: list, out) -> list:
    """Parameters the autograd graph of ``out`` does not reach."""
    roots = [t._node for t in _tensors_in(out) if t._node is not None]
    seen, reached, stack = set(), set(), list(roots)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for e in node.edges:
            if e is None:
                continue
            if e.__class__ is Node:
                stack.append(e)
            else:
                reached.add(id(e))
    return [p for _, p in named if id(p) not in reached]


def _tensors_in(value) -> list:
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_in(v)]
    return []
