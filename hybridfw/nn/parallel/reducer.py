"""Gradient buckets for data parallelism: all-reduce each bucket as soon as it is complete.

Parameters are assigned to buckets in reverse registration order (backward produces the last
layers' gradients first), each bucket one flat buffer of at most ``bucket_cap_bytes`` (the
first at most 1 MiB, so communication starts early) allocated once. When backward accumulates a
parameter's gradient (its post-accumulate hook), the gradient is copied into its slot of the
bucket; the bucket whose last slot arrives starts its nonblocking all-reduce at once -- while
backward computes the earlier layers' gradients. Buckets start in index order on every rank (MPI
needs collectives in the same order everywhere). When backward ends, the reducer waits for the
buckets, divides by the world size and leaves each parameter's ``.grad`` as a view of its bucket
(PyTorch's ``gradient_as_bucket_view``), so the averaged gradients cost no second copy.
"""
from __future__ import annotations

from ...distributed.work import Work
from ...dygraph import Tensor, no_grad
from ...dygraph.autograd import queue_callback
from ...dtypes import int64
from ...ops.factories import ones, zeros

__all__ = ["Bucket", "Reducer", "assign_buckets"]


class Bucket:
    """Consecutive slots of one flat buffer, one per parameter (same device and dtype)."""

    def __init__(self, index: int, params: list, names: list):
        self.index = index
        self.params = params
        self.names = names
        first = params[0]
        total = sum(p.numel() for p in params)
        self.flat = zeros(total, dtype=first.dtype, device=first.device)
        self.views = []
        offset = 0
        with no_grad():
            for p in params:
                n = p.numel()
                self.views.append(self.flat[offset:offset + n].view(p.shape))
                offset += n
        self.pending = len(params)
        self.work = None

    @property
    def nbytes(self) -> int:
        return self.flat.nbytes


#: The first bucket (the last layers) is kept small so that communication starts early in
#: backward, as PyTorch's DDP does.
FIRST_BUCKET_BYTES = 1 << 20


def assign_buckets(named_params: list, cap_bytes: int,
                   first_cap_bytes: int | None = None) -> list:
    """Lists of indices into ``named_params``: reverse order, split at ``cap_bytes``
    (``first_cap_bytes`` for the first bucket) and where device or dtype changes."""
    buckets, current, size, key = [], [], 0, None
    first_cap = cap_bytes if first_cap_bytes is None else min(first_cap_bytes, cap_bytes)
    for i in reversed(range(len(named_params))):
        p = named_params[i][1]
        pkey = (p.device, p.dtype)
        cap = cap_bytes if buckets else first_cap
        if current and (pkey != key or size + p.nbytes > cap):
            buckets.append(current)
            current, size = [], 0
        current.append(i)
        size += p.nbytes
        key = pkey
    if current:
        buckets.append(current)
    return buckets


class Reducer:
    """Runs the bucketed all-reduce of one DistributedDataParallel module."""

    def __init__(self, named_params: list, group, cap_bytes: int,
                 find_unused_parameters: bool):
        self.group = group
        self.find_unused = find_unused_parameters
        self.named_params = named_params
        self.buckets = []
        self.slot = {}  # id(param) -> (bucket, position)
        layout = assign_buckets(named_params, cap_bytes, FIRST_BUCKET_BYTES)
        for b, indices in enumerate(layout):
            bucket = Bucket(b, [named_params[i][1] for i in indices],
                            [named_params[i][0] for i in indices])
            self.buckets.append(bucket)
            for pos, p in enumerate(bucket.params):
                self.slot[id(p)] = (bucket, pos)
        self.handles = [p.register_post_accumulate_grad_hook(self._on_grad_ready)
                        for _, p in named_params]
        self.require_sync = True
        #: set by a forward of the DDP module that will synchronize (grad mode on, outside
        #: no_sync()), cleared when its backward finishes: as in PyTorch, the forward decides,
        #: and a backward through the wrapped module called directly communicates nothing
        self.expect_hooks = False
        self.active = False
        self.next_bucket = 0
        self.ready = set()
        self.unused = []
        #: ids of parameters that received a gradient under no_sync() since the last
        #: synchronized pass (with find_unused_parameters they count as locally used)
        self.used_unsynced = set()

    # ---- one backward pass ------------------------------------------------------------------
    def prepare(self, unused: list | None = None) -> None:
        """Start a pass (DDP's forward): nothing is ready; ``unused`` params (found from the
        graph with find_unused_parameters) are marked ready when backward starts, as PyTorch
        does: each contributes its current ``.grad`` (accumulated earlier, e.g. under
        no_sync) or zeros when it has none."""
        self.active = False
        self.expect_hooks = True
        self.next_bucket = 0
        self.ready = set()
        self.unused = list(unused or ())
        for bucket in self.buckets:
            bucket.pending = len(bucket.params)
            bucket.work = None

    def _on_grad_ready(self, param: Tensor) -> None:
        if not self.expect_hooks:
            if self.find_unused:
                self.used_unsynced.add(id(param))
            return
        if not self.active:
            self.active = True
            queue_callback(self._finish_pass)
            self._mark_unused_ready()
        bucket, pos = self.slot[id(param)]
        if id(param) in self.ready:
            raise RuntimeError(
                f"DistributedDataParallel: parameter '{bucket.names[pos]}' received its gradient "
                f"twice in one backward pass (a reentrant backward, or a parameter used in two "
                f"separately differentiated graphs); that is not supported")
        dest = bucket.views[pos]._data
        src = param.grad._data
        if src is not dest:  # after the first step .grad usually is the bucket view itself
            dest[...] = src
        self._mark_ready(param, bucket)
        for b in self.buckets[:self.next_bucket]:  # MPI progresses only inside MPI calls
            if b.work is not None and not b.work.done:
                b.work.is_completed()

    def _mark_unused_ready(self) -> None:
        for p in self.unused:
            bucket, pos = self.slot[id(p)]
            dest = bucket.views[pos]._data
            if p.grad is None:
                dest.fill(0)
            elif p.grad._data is not dest:
                dest[...] = p.grad._data
            self._mark_ready(p, bucket)

    def _globally_unused(self) -> set:
        """ids of the parameters no rank used since the last synchronized pass (one small
        all-reduce of the ranks' usage; find_unused_parameters only). PyTorch leaves their
        ``.grad`` untouched."""
        if not self.find_unused:
            return set()
        unused = {id(p) for p in self.unused} - self.used_unsynced
        self.used_unsynced = set()
        used = ones(len(self.named_params), dtype=int64, device=self.buckets[0].flat.device)
        for i, (_, p) in enumerate(self.named_params):
            if id(p) in unused:
                used._data[i] = 0
        Work("all_reduce (DistributedDataParallel used parameters)",
             self.group.backend.all_reduce(used._data, "sum"), self.group).wait()
        return {id(p) for (_, p), n in zip(self.named_params, used.tolist()) if n == 0}

    def _mark_ready(self, param: Tensor, bucket: Bucket) -> None:
        self.ready.add(id(param))
        bucket.pending -= 1
        buckets = self.buckets
        while self.next_bucket < len(buckets) and buckets[self.next_bucket].pending == 0:
            self._launch(buckets[self.next_bucket])
            self.next_bucket += 1

    def _launch(self, bucket: Bucket) -> None:
        arr = bucket.flat._data
        requests = self.group.backend.all_reduce(arr, "sum")
        bucket.work = Work(f"all_reduce (DistributedDataParallel bucket {bucket.index}, "
                           f"{bucket.nbytes} bytes)", requests, self.group)

    def _finish_pass(self) -> None:
        self.active = False
        self.expect_hooks = False
        launched = self.buckets[:self.next_bucket]
        for bucket in launched:
            bucket.work.wait()
        if self.next_bucket < len(self.buckets):
            missing = [name for bucket in self.buckets[self.next_bucket:]
                       for name, p in zip(bucket.names, bucket.params)
                       if id(p) not in self.ready]
            raise RuntimeError(
                f"DistributedDataParallel: these parameters received no gradient in this "
                f"backward pass: {', '.join(missing)}. Every parameter must take part in the "
                f"loss; pass find_unused_parameters=True when some do not (or set "
                f"requires_grad_(False) on frozen ones before wrapping the module)")
        skip = self._globally_unused()
        self.unused = []
        scale = 1.0 / self.group.world_size
        for bucket in launched:
            bucket.flat._data *= scale
            bucket.flat._storage.version += 1
            for p, view in zip(bucket.params, bucket.views):
                if id(p) in skip:  # no rank used it: .grad stays as it was (None stays None)
                    continue
                if p.grad is None or p.grad._data is not view._data:
                    p.grad = view.detach()
