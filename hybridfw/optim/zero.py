"""ZeRO stage 1: optimizer state sharded across the ranks of a data-parallel job.

Every rank holds the whole model and (after DistributedDataParallel) the same averaged
gradients, but only updates -- and only keeps optimizer state for -- its own shard of the
parameters; the updated shards are then broadcast from their owners, so every replica ends the
step with all new parameters. Adam's two moments, which are twice the model, shrink to
``1 / world_size`` per rank, which ``hf.memory.allocated()`` shows.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from ..dygraph import Tensor, enable_grad
from .optimizer import Optimizer

__all__ = ["ZeroRedundancyOptimizer", "partition_parameters"]


def partition_parameters(params: list, world_size: int) -> list:
    """Owner rank of each parameter: largest first, each to the rank holding the fewest
    elements so far (deterministic, so every rank computes the same split)."""
    owners = [0] * len(params)
    load = [0] * world_size
    for i in sorted(range(len(params)), key=lambda i: (-params[i].numel(), i)):
        rank = min(range(world_size), key=lambda r: (load[r], r))
        owners[i] = rank
        load[rank] += params[i].numel()
    return owners


class ZeroRedundancyOptimizer(Optimizer):
    """Wrap ``optimizer_class`` (e.g. ``hf.optim.Adam``) so each rank keeps the state of
    ``1 / world_size`` of the parameters (ZeRO-1).

    ``defaults`` go to ``optimizer_class``; parameter groups work as in any optimizer and their
    options (``lr`` set by a scheduler) reach the shard optimizer at every step.
    ``state_dict()`` / ``load_state_dict()`` save and restore this rank's shard (save one file
    per rank).

    Example (``mpiexec -n 2``, after ``init_process_group``)::

        >>> import hybridfw as hf
        >>> model = hf.nn.parallel.DistributedDataParallel(hf.nn.Linear(512, 512))
        >>> opt = hf.optim.ZeroRedundancyOptimizer(model.parameters(), hf.optim.Adam, lr=1e-3)
        >>> model(hf.randn(8, 512)).sum().backward()
        >>> opt.step()          # each rank updates half the parameters, then they are shared
        >>> opt.state_bytes()   # Adam moments of this rank's half only
    """

    def __init__(self, params: Iterable, optimizer_class: type, group=None, **defaults):
        from ..distributed.process_group import default_group
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise TypeError(f"ZeroRedundancyOptimizer: optimizer_class must be an hf.optim "
                            f"Optimizer class (e.g. hf.optim.Adam), got {optimizer_class!r}")
        self._group = group or default_group("ZeroRedundancyOptimizer")
        self.optimizer_class = optimizer_class
        self._local = None
        super().__init__(params, defaults)
        self._build_shards()

    def add_param_group(self, param_group: dict) -> None:
        if getattr(self, "_local", None) is not None or getattr(self, "owners", None):
            raise RuntimeError("ZeroRedundancyOptimizer: add parameter groups at construction; "
                               "adding one later would re-partition the sharded state")
        super().add_param_group(param_group)

    def _build_shards(self) -> None:
        params = [p for g in self.param_groups for p in g["params"]]
        world, rank = self._group.world_size, self._group.rank
        owners = partition_parameters(params, world)
        self.owners = dict(zip(map(id, params), owners))
        self._params = params
        local_groups, self._local_to_global = [], []
        for index, g in enumerate(self.param_groups):
            mine = [p for p in g["params"] if self.owners[id(p)] == rank]
            if mine:
                local_groups.append({**{k: v for k, v in g.items() if k != "params"},
                                     "params": mine})
                self._local_to_global.append(index)
        self._local = self.optimizer_class(local_groups, **self.defaults) if local_groups \
            else None

    @property
    def local_optimizer(self) -> Optimizer | None:
        """The ``optimizer_class`` instance over this rank's shard (None if it owns nothing)."""
        return self._local

    @property
    def state(self):
        """This rank's optimizer state (its shard's parameters only)."""
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
        """Update this rank's shard, then broadcast every parameter from its owner."""
        from ..distributed.work import Work
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        if self._local is not None:
            for local, index in zip(self._local.param_groups, self._local_to_global):
                for k, v in self.param_groups[index].items():
                    if k != "params":
                        local[k] = v
            self._local.step()
        backend = self._group.backend
        requests = []
        for p in self._params:
            requests.extend(backend.broadcast(p._data, self.owners[id(p)]))
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
