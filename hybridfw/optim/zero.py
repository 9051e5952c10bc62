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

import json
from collections.abc import Callable, Iterable

import numpy as np

from ..distributed.process_group import default_group
from ..distributed.work import Work
from ..dtypes import as_dtype
from ..dygraph import Tensor, enable_grad, no_grad
from ..ops.factories import empty, zeros
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

    ``defaults`` go to ``optimizer_class``; parameter groups work as in any optimizer (they
    carry all of ``optimizer_class``'s options) and their options (``lr`` set by a scheduler)
    reach the shard optimizer at every step. ``process_group`` is PyTorch's name for ``group``.
    PyTorch's ``parameters_as_bucket_view`` is accepted and changes nothing here (each rank's
    shard is already a view of the parameters' memory); ``overlap_with_ddp=True`` (a step run
    from DDP's communication hook) is not supported and raises a ValueError.

    Checkpoints as in PyTorch: :meth:`consolidate_state_dict` (called on every rank) gathers
    the whole state on one rank, whose ``state_dict()`` then returns it in the format of a
    plain ``optimizer_class`` (a single-process optimizer can load it, and so can
    :meth:`load_state_dict` here, on every rank). Without consolidation ``state_dict()``
    returns this rank's shard, which ``load_state_dict()`` also restores (one file per rank).

    Example (``mpiexec -n 2``, after ``init_process_group``)::

        >>> import hybridfw as hf
        >>> model = hf.nn.parallel.DistributedDataParallel(hf.nn.Linear(512, 512))
        >>> opt = hf.optim.ZeroRedundancyOptimizer(model.parameters(), hf.optim.Adam, lr=1e-3)
        >>> model(hf.randn(8, 512)).sum().backward()
        >>> opt.step()          # each rank updates half the elements, then they are shared
        >>> opt.state_bytes()   # Adam moments of this rank's half only
    """

    def __init__(self, params: Iterable, optimizer_class: type, group=None, *,
                 process_group=None, parameters_as_bucket_view: bool = False,
                 overlap_with_ddp: bool = False, **defaults):
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise TypeError(f"ZeroRedundancyOptimizer: optimizer_class must be an hf.optim "
                            f"Optimizer class (e.g. hf.optim.Adam), got {optimizer_class!r}")
        if overlap_with_ddp:
            raise ValueError("ZeroRedundancyOptimizer: overlap_with_ddp=True (the step run from "
                             "a DDP communication hook) is not supported; leave it False and "
                             "call step() after backward (DDP already overlaps its gradient "
                             "all-reduce with backward)")
        self.parameters_as_bucket_view = bool(parameters_as_bucket_view)
        self._group = group or process_group or default_group("ZeroRedundancyOptimizer")
        self.optimizer_class = optimizer_class
        self._local = None
        self.pieces = None
        self._consolidated = None
        super().__init__(params, defaults)
        self._build_shards()

    def add_param_group(self, param_group: dict) -> None:
        """Add a parameter group (as PyTorch's ZeroRedundancyOptimizer: after construction it
        is a collective, call it on every rank). The elements are partitioned anew; the state
        gathered so far moves to the parameters' new owners."""
        if self.pieces is None:  # during construction
            super().add_param_group(param_group)
            return
        whole = self._whole_state(None)
        super().add_param_group(param_group)
        self._build_shards()
        for p, a, b, shard in self._mine:
            values = whole.get(id(p))
            if values is not None:
                self._local.state[shard] = {name: _cut(value, a, b)
                                            for name, value in values.items()}

    def _class_options(self) -> dict:
        """Every option of ``optimizer_class`` with ``defaults`` applied (a plain optimizer's
        parameter group carries them all)."""
        try:
            probe = self.optimizer_class([zeros(1, requires_grad=True)], **self.defaults)
        except Exception:  # noqa: BLE001 - an optimizer that needs more: keep the given ones
            return {}
        return {k: v for k, v in probe.param_groups[0].items() if k != "params"}

    def _build_shards(self) -> None:
        for name, value in self._class_options().items():
            for g in self.param_groups:
                g.setdefault(name, value)
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
        """On the rank a :meth:`consolidate_state_dict` gathered to, the whole state in a plain
        ``optimizer_class``'s format (as PyTorch); otherwise this rank's shard: the shard
        optimizer's state dict (save one per rank)."""
        if self._consolidated is not None:
            return self._consolidated
        return self._local.state_dict() if self._local is not None else \
            {"state": {}, "param_groups": []}

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gather every rank's shard of the state onto rank ``to`` (a collective: call it on
        every rank); that rank's :meth:`state_dict` then returns the whole state, numbered and
        shaped as a plain ``optimizer_class`` over the same parameters would have it.

        Example::

            >>> opt.consolidate_state_dict(to=0)
            >>> if hf.distributed.get_rank() == 0:
            ...     hf.save(opt.state_dict(), "optim.pt")
        """
        world, rank = self._group.world_size, self._group.rank
        if isinstance(to, bool) or not isinstance(to, (int, np.integer)) or \
                not 0 <= to < world:
            raise ValueError(f"ZeroRedundancyOptimizer.consolidate_state_dict: to must be a "
                             f"rank in [0, {world}), got {to!r}")
        by_param = self._whole_state(int(to))
        if rank != to:
            self._consolidated = None
            return
        params = [p for g in self.param_groups for p in g["params"]]
        full = {i: by_param[id(p)] for i, p in enumerate(params) if id(p) in by_param}
        groups, start = [], 0
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = list(range(start, start + len(g["params"])))
            start += len(g["params"])
            groups.append(packed)
        self._consolidated = {"state": {i: full[i] for i in sorted(full)},
                              "param_groups": groups}

    def _whole_state(self, to: int | None) -> dict:
        """``{id(parameter): {name: whole tensor or number}}``: every rank's shard state put
        together on rank ``to`` (every rank when None; empty elsewhere). A collective."""
        rank = self._group.rank
        keeps = to is None or rank == to
        specs = self._gather_state_specs()
        whole: dict = {}
        requests, buffers = [], []
        for k, (p, a, b, owner) in enumerate(self.pieces):
            spec = specs.get(k, {})
            for name in sorted(spec):
                kind = spec[name]
                if kind[0] != "tensor":
                    if keeps:
                        whole.setdefault(id(p), {}).setdefault(name, kind[1])
                    continue
                if keeps:
                    entry = whole.setdefault(id(p), {})
                    if name not in entry:
                        entry[name] = zeros(*p.shape, dtype=as_dtype(kind[1]), device=p.device)
                    buffer = entry[name]._data.reshape(-1)[a:b]
                else:
                    buffer = empty(b - a, dtype=as_dtype(kind[1]), device=p.device)._data
                if owner == rank:
                    buffer[...] = self._shard_state(k)[name]._data.reshape(-1)
                requests.extend(self._group.backend.broadcast(buffer, owner))
                buffers.append(buffer)  # alive until the broadcasts complete
        Work("broadcast (ZeroRedundancyOptimizer state)", requests, self._group).wait()
        return whole

    def _shard_state(self, piece: int) -> dict:
        """The shard optimizer's state of this rank's piece number ``piece`` (of ``pieces``)."""
        p, a, b, _ = self.pieces[piece]
        for q, qa, qb, shard in self._mine:
            if q is p and qa == a and qb == b:
                return self._local.state.get(shard, {}) if self._local is not None else {}
        return {}

    def _gather_state_specs(self) -> dict:
        """``{piece: {name: ("tensor", dtype) | ("value", value)}}`` over every rank's pieces:
        what each owner's shard state holds (a small JSON exchange, every rank gets all)."""
        mine = {}
        for k, (_, _, _, owner) in enumerate(self.pieces):
            if owner != self._group.rank:
                continue
            spec = {}
            for name, value in self._shard_state(k).items():
                if isinstance(value, Tensor) and value.ndim >= 1:
                    spec[name] = ("tensor", value.dtype.name)
                elif isinstance(value, Tensor):
                    spec[name] = ("value", value.item())
                else:
                    spec[name] = ("value", value)
            mine[str(k)] = spec
        try:
            text = json.dumps(mine).encode()
        except TypeError as exc:
            raise TypeError(f"ZeroRedundancyOptimizer.consolidate_state_dict: the shard state "
                            f"holds a value that is neither a tensor nor a number ({exc})") \
                from None
        backend = self._group.backend
        lengths, requests = backend.gather_ints(np.array([len(text)], dtype=np.int64))
        Work("ZeroRedundancyOptimizer.consolidate_state_dict", requests, self._group).wait()
        padded = np.zeros(int(lengths.max()), dtype=np.int64)
        padded[:len(text)] = np.frombuffer(text, dtype=np.uint8)
        table, requests = backend.gather_ints(padded)
        Work("ZeroRedundancyOptimizer.consolidate_state_dict", requests, self._group).wait()
        specs = {}
        for row, n in zip(table, lengths[:, 0]):
            for k, spec in json.loads(row[:n].astype(np.uint8).tobytes()).items():
                specs[int(k)] = {name: tuple(kind) for name, kind in spec.items()}
        return specs

    def _is_whole(self, state_dict: dict) -> bool:
        """Whether ``state_dict`` numbers every parameter (a consolidated or plain optimizer's
        state dict) rather than this rank's shards."""
        groups = state_dict.get("param_groups")
        if not isinstance(groups, (list, tuple)) or len(groups) != len(self.param_groups) or \
                any(len(s.get("params", ())) != len(g["params"])
                    for s, g in zip(groups, self.param_groups)):
            return False
        sizes = [p.numel() for g in self.param_groups for p in g["params"]]
        ids = [i for s in groups for i in s["params"]]
        for key, values in state_dict.get("state", {}).items():
            index = int(key) if isinstance(key, str) and key.isdigit() else key
            if index not in ids:
                return False
            size = sizes[ids.index(index)]
            for value in values.values():
                shape = getattr(value, "shape", ())
                if len(shape) >= 1 and int(np.prod(shape)) != size:
                    return False
        return True

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a whole state dict (what :meth:`state_dict` returns after
        :meth:`consolidate_state_dict`, or a plain ``optimizer_class``'s, on every rank: each
        takes its shard), or what :meth:`state_dict` saved on this rank without consolidation
        (same world size and model). Group options (``lr``...) come back too."""
        if not isinstance(state_dict, dict) or "state" not in state_dict or \
                "param_groups" not in state_dict:
            raise ValueError("ZeroRedundancyOptimizer.load_state_dict: expected a dict with "
                             "'state' and 'param_groups' (what state_dict() returns)")
        self._consolidated = None
        if self._is_whole(state_dict):
            for g, saved in zip(self.param_groups, state_dict["param_groups"]):
                g.update({k: v for k, v in saved.items() if k != "params"})
            state_dict = self._shard_of(state_dict)
        if self._local is not None:
            self._local.load_state_dict(state_dict)
            for local, index in zip(self._local.param_groups, self._local_to_global):
                self.param_groups[index].update({k: v for k, v in local.items()
                                                 if k != "params"})
        elif state_dict.get("state") or state_dict.get("param_groups"):
            raise ValueError("ZeroRedundancyOptimizer.load_state_dict: this rank owns no "
                             "parameters but the state dict has state; load each rank's own file")

    def _shard_of(self, whole: dict) -> dict:
        """This rank's shard state dict, cut out of a whole one."""
        ids = [i for s in whole["param_groups"] for i in s["params"]]
        params = [p for g in self.param_groups for p in g["params"]]
        by_param = {}
        for key, values in whole["state"].items():
            index = int(key) if isinstance(key, str) and key.isdigit() else key
            by_param[id(params[ids.index(index)])] = values
        if self._local is None:
            return {"state": {}, "param_groups": []}
        shard_of = {id(shard): (p, a, b) for p, a, b, shard in self._mine}
        state, groups, n = {}, [], 0
        for local, index in zip(self._local.param_groups, self._local_to_global):
            saved = whole["param_groups"][index]
            packed = {k: v for k, v in saved.items() if k != "params"}
            packed["params"] = list(range(n, n + len(local["params"])))
            for shard in local["params"]:
                p, a, b = shard_of[id(shard)]
                values = by_param.get(id(p))
                if values is not None:
                    state[n] = {name: _cut(value, a, b) for name, value in values.items()}
                n += 1
            groups.append(packed)
        return {"state": state, "param_groups": groups}


def _cut(value, start: int, stop: int):
    """Elements ``start:stop`` of a flattened state tensor (numbers pass through)."""
    if isinstance(value, Tensor):
        return value.detach().reshape(-1)[start:stop].clone() if value.ndim >= 1 else value
    if hasattr(value, "__array__") and not isinstance(value, (int, float, bool)):
        array = np.asarray(value)
        return array.reshape(-1)[start:stop].copy() if array.ndim >= 1 else array
    return value
