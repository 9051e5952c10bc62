"""ZeRO stage 1: optimizer state sharded across the ranks of a data-parallel job.

Every rank holds the whole model and (after DistributedDataParallel) the same averaged
gradients, but only updates -- and only keeps optimizer state for -- its own shard; the updated
shards are then broadcast from their owners, so every replica ends the step with all new
parameters. The shards are equal slices of the parameters laid end to end (a parameter may be
split between two ranks), so Adam's two moments, twice the model, shrink to exactly
``1 / world_size`` per rank whatever the layer sizes; ``hf.memory.allocated()`` shows it. The
optimizers here update element by element, so updating slices gives the same numbers as
updating whole parameters.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from ..distributed.process_group import default_group
from ..distributed.work import Work
from ..dygraph import Tensor, enable_grad, no_grad
from .optimizer import Optimizer

__all__ = ["ZeroRedundancyOptimizer", "partition_flat"]


def partition_flat(sizes: list, world_size: int) -> list:
    """``(index, start, stop, rank)`` pieces: the parameters' elements laid end to end, cut
    into ``world_size`` consecutive ranges of ``ceil(total / world_size)`` elements (rank r owns
    the r-th); a parameter crossing a cut becomes two pieces."""
    total = sum(sizes)
    chunk = -(-total // world_size) if total else 0
    pieces, offset = [], 0
    for index, n in enumerate(sizes):
        start = 0
        while start < n:
            rank = (offset + start) // chunk
            stop = min(n, (rank + 1) * chunk - offset)
            pieces.append((index, start, stop, rank))
            start = stop
        offset += n
    return pieces


class ZeroRedundancyOptimizer(Optimizer):
    """Wrap ``optimizer_class`` (e.g. ``hf.optim.Adam``) so each rank keeps the state of
    ``1 / world_size`` of the parameters' elements (ZeRO-1).

    ``defaults`` go to ``optimizer_class``; parameter groups work as in any optimizer and their
    options (``lr`` set by a scheduler) reach the shard optimizer at every step.
    ``state_dict()`` / ``load_state_dict()`` save and restore this rank's shard (save one file
    per rank).

    Example (``mpiexec -n 2``, after ``init_process_group``)::

        >>> import hybridfw as hf
        >>> model = hf.nn.parallel.DistributedDataParallel(hf.nn.Linear(512, 512))
        >>> opt = hf.optim.ZeroRedundancyOptimizer(model.parameters(), hf.optim.Adam, lr=1e-3)
        >>> model(hf.randn(8, 512)).sum().backward()
        >>> opt.step()          # each rank updates half the elements, then they are shared
        >>> opt.state_bytes()   # Adam moments of this rank's half only
    """

    def __init__(self, params: Iterable, optimizer_class: type, group=None, **defaults):
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise TypeError(f"ZeroRedundancyOptimizer: optimizer_class must be an hf.optim "
                            f"Optimizer class (e.g. hf.optim.Adam), got {optimizer_class!r}")
        self._group = group or default_group("ZeroRedundancyOptimizer")
        self.optimizer_class = optimizer_class
        self._local = None
        self.pieces = None
        super().__init__(params, defaults)
        self._build_shards()

    def add_param_group(self, param_group: dict) -> None:
        if self.pieces is not None:
            raise RuntimeError("ZeroRedundancyOptimizer: add parameter groups at construction; "
                               "adding one later would re-partition the sharded state")
        super().add_param_group(param_group)

    def _build_shards(self) -> None:
        params = [p for g in self.param_groups for p in g["params"]]
        for i, p in enumerate(params):
            if not p._data.flags.c_contiguous:
                raise ValueError(f"ZeroRedundancyOptimizer: parameter {i} (shape {p.shape}) is "
                                 f"not contiguous; its shards could not be views of it")
        group_of = [gi for gi, g in enumerate(self.param_groups) for _ in g["params"]]
        rank = self._group.rank
        layout = partition_flat([p.numel() for p in params], self._group.world_size)
        #: every piece on every rank: (parameter, flat start, flat stop, owner rank)
        self.pieces = [(params[i], a, b, r) for i, a, b, r in layout]
        self._mine = []  # (parameter, start, stop, shard tensor) owned here
        by_group: dict = {}
        with no_grad():
            for i, a, b, r in layout:
                if r != rank:
                    continue
                shard = params[i].detach().view(-1)[a:b]
                self._mine.append((params[i], a, b, shard))
                by_group.setdefault(group_of[i], []).append(shard)
        self._local_to_global = sorted(by_group)
        local_groups = [{**{k: v for k, v in self.param_groups[gi].items() if k != "params"},
                         "params": by_group[gi]} for gi in self._local_to_global]
        self._local = self.optimizer_class(local_groups, **self.defaults) if local_groups \
            else None

    @property
    def local_optimizer(self) -> Optimizer | None:
        """The ``optimizer_class`` instance over this rank's shard (None if it owns nothing)."""
        return self._local

    @property
    def state(self):
        """This rank's optimizer state (keyed by its shard tensors)."""
        return self._local.state if self._local is not None else {}

    @state.setter
    def state(self, value) -> None:  # the base class assigns it in __init__
        if self._local is not None:
            self._local.state = value

    def state_bytes(self) -> int:
        """Bytes of this rank's optimizer-state tensors (distinct storage)."""
        seen, total = set(), 0
        for s in self.state.values():
            for v in s.values():
                if isinstance(v, Tensor) and id(v._storage) not in seen:
                    seen.add(id(v._storage))
                    total += v._storage.nbytes
        return total

    def step(self, closure: Callable | None = None):
        """Update this rank's shard, then broadcast every piece from its owner."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        self._opt_called = True
        if self._local is not None:
            for local, index in zip(self._local.param_groups, self._local_to_global):
                for k, v in self.param_groups[index].items():
                    if k != "params":
                        local[k] = v
            with no_grad():
                for p, a, b, shard in self._mine:  # the shard's gradient: a view of p.grad
                    shard.grad = None if p.grad is None else p.grad.detach().view(-1)[a:b]
            self._local.step()
        backend = self._group.backend
        requests = []
        for p, a, b, owner in self.pieces:
            requests.extend(backend.broadcast(p._data.reshape(-1)[a:b], owner))
            p._storage.version += 1
        Work("broadcast (ZeroRedundancyOptimizer parameters)", requests, self._group).wait()
        return loss

    def state_dict(self) -> dict:
        """This rank's shard: the shard optimizer's state dict (save one per rank)."""
        return self._local.state_dict() if self._local is not None else \
            {"state": {}, "param_groups": []}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what :meth:`state_dict` saved on this rank (same world size and model)."""
        if self._local is not None:
            self._local.load_state_dict(state_dict)
        elif state_dict.get("state") or state_dict.get("param_groups"):
            raise ValueError("ZeroRedundancyOptimizer.load_state_dict: this rank owns no "
                             "parameters but the state dict has state; load each rank's own file")
