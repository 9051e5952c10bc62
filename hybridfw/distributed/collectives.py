"""Collectives on hf tensors: all_reduce, broadcast, all_gather, reduce_scatter, barrier.

Each works in place on the tensors' own arrays and, with ``async_op=True``, returns a
:class:`~.work.Work` handle whose ``wait()`` finishes it. A non-contiguous tensor (a transposed
or strided view) goes through a contiguous copy that is written back into it when the
collective finishes, so a view's result reaches its base as in PyTorch. Tensors that receive
data must be writable; written tensors get their version bumped, so autograd notices if one
was saved for a backward.

Example (under ``mpiexec -n 2``)::

    >>> import hybridfw as hf
    >>> dist = hf.distributed
    >>> dist.init_process_group("mpi")
    >>> t = hf.ones(3) * (dist.get_rank() + 1)
    >>> dist.all_reduce(t, op="mean")             # [1.5, 1.5, 1.5] on both ranks
    >>> parts = [hf.empty(3) for _ in range(dist.get_world_size())]
    >>> dist.all_gather(parts, t)
"""
from __future__ import annotations

from ..dygraph import Tensor
from .process_group import check_consistent, default_group, signature
from .work import Work

__all__ = ["ReduceOp", "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor",
           "reduce_scatter", "reduce_scatter_tensor", "barrier"]


class ReduceOp:
    """Reduction names accepted by ``op=`` (plain strings work too)."""

    SUM = "sum"
    MEAN = "mean"
    AVG = "mean"
    MAX = "max"
    MIN = "min"


_OPS = ("sum", "mean", "max", "min")


def _reduce_op(name: str, op, tensor: Tensor) -> str:
    key = str(op).lower()
    key = "mean" if key == "avg" else key
    if key not in _OPS:
        raise ValueError(f"hf.distributed.{name}: unknown op {op!r}; choose one of "
                         f"{', '.join(map(repr, _OPS))}")
    if key == "mean" and not tensor.dtype.is_floating_point:
        raise TypeError(f"hf.distributed.{name}: op='mean' needs a floating-point tensor, got "
                        f"{tensor.dtype}")
    return key


def _array(name: str, t, group, role: str = "tensor", written: bool = True,
           staged: list | None = None):
    """The array a collective reads or writes for ``t``: its own when contiguous, else a
    contiguous copy; for a written tensor the pair ``(array, copy)`` is appended to ``staged``
    so that :func:`_finisher` writes the result back into the view."""
    if not isinstance(t, Tensor):
        raise TypeError(f"hf.distributed.{name}: {role} must be an hf.Tensor, got "
                        f"{type(t).__name__}")
    arr = t._data
    group.backend.check_array(name, arr)
    if written and not getattr(arr.flags, "writeable", True):
        raise ValueError(f"hf.distributed.{name}: {role} of shape {t.shape} is read-only (a "
                         f"broadcast view?); pass a tensor that owns writable memory")
    if arr.flags.c_contiguous:
        return arr
    buffer = arr.copy(order="C")
    if written:
        staged.append((arr, buffer))
    return buffer


def _finisher(staged: list, mean_of=None, world_size: int = 1):
    """What finishes a collective once its requests complete: ``op='mean'`` divides
    ``mean_of`` by the world size (MPI and NCCL sum), then staged copies of non-contiguous
    tensors are written back into them. None when there is nothing to do."""
    if mean_of is None and not staged:
        return None

    def finish(mean_of=mean_of, staged=staged, n=world_size):
        if mean_of is not None:
            mean_of /= n
        for arr, buffer in staged:
            arr[...] = buffer
    return finish


def _finish(work: Work, async_op: bool):
    if async_op:
        return work
    work.wait()
    return None


def _bump(*tensors) -> None:
    for t in tensors:
        t._storage.version += 1


def all_reduce(tensor: Tensor, op="sum", group=None, async_op: bool = False):
    """Reduce ``tensor`` across ranks in place: ``'sum'``, ``'mean'``, ``'max'`` or ``'min'``."""
    group = group or default_group("all_reduce")
    staged = []
    arr = _array("all_reduce", tensor, group, staged=staged)
    key = _reduce_op("all_reduce", op, tensor)
    if group.check_consistency:
        check_consistent(group, "all_reduce", signature("all_reduce", arr, _OPS.index(key)),
                         "op index")
    requests = group.backend.all_reduce(arr, key)
    finish = _finisher(staged, arr if key == "mean" else None, group.world_size)
    _bump(tensor)
    return _finish(Work("all_reduce", requests, group, finish), async_op)


def broadcast(tensor: Tensor, src: int = 0, group=None, async_op: bool = False):
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every other rank, in place."""
    group = group or default_group("broadcast")
    staged = []
    arr = _array("broadcast", tensor, group, staged=staged)
    if isinstance(src, bool) or not isinstance(src, int) or not 0 <= src < group.world_size:
        raise ValueError(f"hf.distributed.broadcast: src must be a rank in [0, "
                         f"{group.world_size}), got {src!r}")
    if group.check_consistency:
        check_consistent(group, "broadcast", signature("broadcast", arr, src), "src")
    requests = group.backend.broadcast(arr, src)
    _bump(tensor)
    return _finish(Work("broadcast", requests, group, _finisher(staged)), async_op)


def _check_list(name: str, tensors, like: Tensor, group, role: str,
                staged: list | None = None, like_role: str = "tensor") -> list:
    if not isinstance(tensors, (list, tuple)) or len(tensors) != group.world_size:
        got = len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors).__name__
        raise ValueError(f"hf.distributed.{name}: {role} must be a list of world_size="
                         f"{group.world_size} tensors, got {got}")
    arrays = []
    for i, t in enumerate(tensors):
        arr = _array(name, t, group, f"{role}[{i}]", written=role != "input_list",
                     staged=staged)
        if t.shape != like.shape:
            raise ValueError(f"hf.distributed.{name}: {role}[{i}] has shape {t.shape}, the "
                             f"{like_role} {like.shape}; they must match")
        if t.dtype is not like.dtype:
            raise TypeError(f"hf.distributed.{name}: {role}[{i}] has dtype {t.dtype}, the "
                            f"{like_role} {like.dtype}; they must match")
        arrays.append(arr)
    return arrays


def all_gather(tensor_list: list, tensor: Tensor, group=None, async_op: bool = False):
    """``tensor_list[r]`` receives rank r's ``tensor`` on every rank."""
    group = group or default_group("all_gather")
    arr = _array("all_gather", tensor, group, written=False)
    staged = []
    outputs = _check_list("all_gather", tensor_list, tensor, group, "tensor_list", staged)
    if group.check_consistency:
        check_consistent(group, "all_gather", signature("all_gather", arr))
    requests = group.backend.all_gather(outputs, arr)
    _bump(*tensor_list)
    return _finish(Work("all_gather", requests, group, _finisher(staged)), async_op)


def all_gather_into_tensor(output: Tensor, input: Tensor, group=None,  # noqa: A002
                           async_op: bool = False):
    """``output`` (world_size times ``input``'s length along dim 0) receives every rank's
    ``input``, rank order, in one contiguous buffer."""
    group = group or default_group("all_gather_into_tensor")
    src = _array("all_gather_into_tensor", input, group, "input", written=False)
    staged = []
    out = _array("all_gather_into_tensor", output, group, "output", staged=staged)
    if out.size != src.size * group.world_size or out.dtype != src.dtype:
        raise ValueError(f"hf.distributed.all_gather_into_tensor: output {output.dtype} "
                         f"{output.shape} must hold world_size={group.world_size} copies of "
                         f"input {input.dtype} {input.shape}")
    if group.check_consistency:
        check_consistent(group, "all_gather_into_tensor", signature("all_gather_into_tensor",
                                                                    src))
    requests = group.backend.all_gather_into(out, src)
    _bump(output)
    return _finish(Work("all_gather_into_tensor", requests, group, _finisher(staged)),
                   async_op)


def reduce_scatter(output: Tensor, input_list: list, op="sum", group=None,
                   async_op: bool = False):
    """``output`` on rank r receives the reduction over ranks of their ``input_list[r]``."""
    group = group or default_group("reduce_scatter")
    staged = []
    out = _array("reduce_scatter", output, group, "output", staged=staged)
    inputs = _check_list("reduce_scatter", input_list, output, group, "input_list",
                         like_role="output")
    return _reduce_scatter("reduce_scatter", output, out, out, inputs, out, op, group, async_op,
                           staged)


def reduce_scatter_tensor(output: Tensor, input: Tensor, op="sum", group=None,  # noqa: A002
                          async_op: bool = False):
    """Like :func:`reduce_scatter` with the inputs as consecutive blocks of one tensor."""
    group = group or default_group("reduce_scatter_tensor")
    staged = []
    out = _array("reduce_scatter_tensor", output, group, "output", staged=staged)
    src = _array("reduce_scatter_tensor", input, group, "input", written=False)
    if src.size != out.size * group.world_size or out.dtype != src.dtype:
        raise ValueError(f"hf.distributed.reduce_scatter_tensor: input {input.dtype} "
                         f"{input.shape} must hold world_size={group.world_size} blocks of "
                         f"output {output.dtype} {output.shape}")
    return _reduce_scatter("reduce_scatter_tensor", output, out, out.reshape(-1),
                           list(src.reshape(group.world_size, -1)), src, op, group, async_op,
                           staged)


def _reduce_scatter(name, output, out, flat_out, blocks, checked, op, group, async_op, staged):
    """The common part of the reduce-scatters: ``flat_out`` (a view of ``out``, the array the
    collective writes for ``output``) receives the reduction of every rank's ``blocks[rank]``;
    ``checked`` is the array whose shape and dtype the consistency check compares across ranks;
    ``staged`` holds ``output``'s write-back when it is not contiguous."""
    key = _reduce_op(name, op, output)
    if group.check_consistency:
        check_consistent(group, name, signature(name, checked, _OPS.index(key)), "op index")
    requests = group.backend.reduce_scatter(flat_out, blocks, key)
    finish = _finisher(staged, out if key == "mean" else None, group.world_size)
    _bump(output)
    return _finish(Work(name, requests, group, finish), async_op)


def barrier(group=None, async_op: bool = False):
    """Wait until every rank has reached the barrier."""
    group = group or default_group("barrier")
    return _finish(Work("barrier", group.backend.barrier(), group), async_op)
