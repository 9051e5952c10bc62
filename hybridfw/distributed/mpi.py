"""The MPI backend (mpi4py): nonblocking buffer-based collectives on numpy arrays.

Every call works in place on the arrays it is given (``MPI.IN_PLACE`` where MPI allows it) and
returns MPI requests; the process group wraps them in :class:`~.work.Work`. The backend keeps
its own duplicate of ``COMM_WORLD`` so user MPI traffic cannot interleave with ours.
"""
from __future__ import annotations

import numpy as np

__all__ = ["MPIBackend", "import_mpi"]


def import_mpi():
    """``mpi4py.MPI``, or a clear error saying what to install."""
    try:
        from mpi4py import MPI
    except ImportError as exc:  # mpi4py missing, or present without an MPI library
        raise RuntimeError(
            f"hf.distributed: backend 'mpi' needs mpi4py and an MPI library "
            f"(pip install mpi4py mpich), and a launcher: mpiexec -n 2 python train.py "
            f"({exc})") from exc
    return MPI


class MPIBackend:
    """Collectives over an MPI communicator on CPU (numpy) arrays."""

    name = "mpi"

    def __init__(self):
        MPI = import_mpi()
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD.Dup()
        self.comm.Set_errhandler(MPI.ERRORS_RETURN)
        self.rank = self.comm.Get_rank()
        self.world_size = self.comm.Get_size()
        self._ops = {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
        # MPI's arithmetic ops reject C booleans: a bool sum or max is a logical or (PyTorch's
        # True + True is True), a min a logical and
        self._bool_ops = {"sum": MPI.LOR, "max": MPI.LOR, "min": MPI.LAND}

    def check_array(self, name: str, arr) -> None:
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"hf.distributed.{name}: backend 'mpi' works on CPU tensors; this "
                            f"one is on {type(arr).__module__.split('.')[0]} (use backend "
                            f"'nccl' for CUDA tensors, or .cpu())")

    def _op(self, op: str, dtype):
        return self._bool_ops[op] if dtype == np.bool_ else self._ops[op]

    # ---- collectives: each returns a list of MPI requests ------------------------------------
    def all_reduce(self, arr: np.ndarray, op: str) -> list:
        return [self.comm.Iallreduce(self.MPI.IN_PLACE, arr, self._op(op, arr.dtype))]

    def broadcast(self, arr: np.ndarray, src: int) -> list:
        return [self.comm.Ibcast(arr, root=src)]

    def all_gather(self, outputs: list, arr: np.ndarray) -> list:
        # Rank r's tensor goes straight into outputs[r] on every rank: one broadcast per rank,
        # no staging buffer (MPI's Allgather needs one contiguous output).
        np.copyto(outputs[self.rank], arr)
        return [self.comm.Ibcast(out, root=r) for r, out in enumerate(outputs)]

    def all_gather_into(self, output: np.ndarray, arr: np.ndarray) -> list:
        return [self.comm.Iallgather(_unaliased(arr, output), output)]

    def reduce_scatter(self, output: np.ndarray, inputs: list, op: str) -> list:
        # Rank r receives the reduction of everyone's inputs[r]: one reduce per rank, each
        # reading the caller's own arrays (a copy of one that overlaps the output, as when the
        # output is this rank's block of the input: MPI forbids aliased buffers).
        mpi_op = self._op(op, output.dtype)
        return [self.comm.Ireduce(_unaliased(inp, output), output if r == self.rank else None,
                                  op=mpi_op, root=r)
                for r, inp in enumerate(inputs)]

    def barrier(self) -> list:
        return [self.comm.Ibarrier()]

    def gather_ints(self, values: np.ndarray) -> tuple:
        """``(table, requests)``: every rank's small int64 vector, one row per rank (for the
        consistency checks)."""
        out = np.empty((self.world_size, values.size), dtype=np.int64)
        return out, [self.comm.Iallgather(values, out)]

    def abort(self, code: int = 1) -> None:
        self.MPI.COMM_WORLD.Abort(code)

    def close(self) -> None:
        self.comm.Free()


def _unaliased(source: np.ndarray, output: np.ndarray) -> np.ndarray:
    """``source``, or a copy of it when it overlaps ``output`` (which the collective writes
    while it still reads ``source``)."""
    return source.copy() if np.may_share_memory(source, output) else source
