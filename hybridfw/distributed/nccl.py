"""The NCCL backend (cupy's ``cupy.cuda.nccl``): collectives on CUDA arrays.

MPI (mpi4py) launches the processes and hands rank 0's NCCL id to the others; every process
then drives the GPU ``local_rank % device_count`` through one NCCL communicator. Collectives are
enqueued on the current CUDA stream (so they are ordered with the compute around them) and a
CUDA event recorded after them serves as the request that ``Work.wait`` polls.
"""
from __future__ import annotations

import numpy as np

from .mpi import import_mpi

__all__ = ["NCCLBackend"]


class _EventRequest:
    """An MPI-request look-alike over a CUDA event: ``Test()`` polls, ``Wait()`` blocks."""

    __slots__ = ("event",)

    def __init__(self, event):
        self.event = event

    def Test(self) -> bool:  # noqa: N802 - MPI's spelling, which Work calls
        return self.event.done

    def Wait(self) -> None:  # noqa: N802
        self.event.synchronize()


def _import_cupy_nccl():
    try:
        import cupy
        from cupy.cuda import nccl
    except ImportError as exc:
        raise RuntimeError(f"hf.distributed: backend 'nccl' needs cupy built with NCCL and a "
                           f"CUDA device; use backend 'mpi' on CPU ({exc})") from exc
    if not getattr(nccl, "available", True):
        raise RuntimeError("hf.distributed: backend 'nccl': this cupy has no NCCL support")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - the driver's own error says why
        raise RuntimeError(f"hf.distributed: backend 'nccl' needs a CUDA device ({exc})") \
            from exc
    if count == 0:
        raise RuntimeError("hf.distributed: backend 'nccl' needs a CUDA device; none found")
    return cupy, nccl, count


class NCCLBackend:
    """Collectives over NCCL on this process's GPU."""

    name = "nccl"

    def __init__(self):
        cupy, nccl, count = _import_cupy_nccl()
        MPI = import_mpi()
        self.cupy, self.nccl, self.MPI = cupy, nccl, MPI
        self.mpi = MPI.COMM_WORLD.Dup()
        self.rank = self.mpi.Get_rank()
        self.world_size = self.mpi.Get_size()
        local = self.mpi.Split_type(MPI.COMM_TYPE_SHARED)
        self.device_id = local.Get_rank() % count
        local.Free()
        cupy.cuda.Device(self.device_id).use()
        as_bytes = _uid_is_bytes(cupy)
        raw = np.zeros(128, dtype=np.uint8 if as_bytes else np.int64)
        if self.rank == 0:
            uid = nccl.get_unique_id()
            raw[:] = np.frombuffer(uid, np.uint8) if as_bytes else np.asarray(uid, np.int64)
        self.mpi.Bcast(raw, root=0)
        uid = raw.tobytes() if as_bytes else tuple(int(v) for v in raw)
        self.comm = nccl.NcclCommunicator(self.world_size, uid, self.rank)
        self._ops = {"sum": nccl.NCCL_SUM, "mean": nccl.NCCL_SUM, "max": nccl.NCCL_MAX,
                     "min": nccl.NCCL_MIN}
        self._dtypes = {np.dtype(k): getattr(nccl, v) for k, v in (
            ("float16", "NCCL_FLOAT16"), ("float32", "NCCL_FLOAT32"),
            ("float64", "NCCL_FLOAT64"), ("int8", "NCCL_INT8"), ("uint8", "NCCL_UINT8"),
            ("int32", "NCCL_INT32"), ("int64", "NCCL_INT64"))}

    def check_array(self, name: str, arr) -> None:
        if not isinstance(arr, self.cupy.ndarray):
            raise TypeError(f"hf.distributed.{name}: backend 'nccl' works on CUDA tensors; this "
                            f"one is on the CPU (move it with .cuda(), or use backend 'mpi')")
        if arr.device.id != self.device_id:
            raise ValueError(f"hf.distributed.{name}: the tensor is on cuda:{arr.device.id} "
                             f"but this rank's NCCL communicator drives cuda:{self.device_id}")
        if np.dtype(arr.dtype) not in self._dtypes:
            raise TypeError(f"hf.distributed.{name}: NCCL cannot reduce {arr.dtype} tensors")

    def _request(self) -> list:
        event = self.cupy.cuda.Event(block=False, disable_timing=True)
        event.record()
        return [_EventRequest(event)]

    def _stream(self) -> int:
        return self.cupy.cuda.get_current_stream().ptr

    def _dtype(self, arr) -> int:
        return self._dtypes[np.dtype(arr.dtype)]

    def all_reduce(self, arr, op: str) -> list:
        self.comm.allReduce(arr.data.ptr, arr.data.ptr, arr.size, self._dtype(arr),
                            self._ops[op], self._stream())
        return self._request()

    def broadcast(self, arr, src: int) -> list:
        self.comm.bcast(arr.data.ptr, arr.size, self._dtype(arr), src, self._stream())
        return self._request()

    def all_gather(self, outputs: list, arr) -> list:
        outputs[self.rank][...] = arr
        self.nccl.groupStart()
        for r, out in enumerate(outputs):
            self.comm.bcast(out.data.ptr, out.size, self._dtype(out), r, self._stream())
        self.nccl.groupEnd()
        return self._request()

    def all_gather_into(self, output, arr) -> list:
        self.comm.allGather(arr.data.ptr, output.data.ptr, arr.size, self._dtype(arr),
                            self._stream())
        return self._request()

    def reduce_scatter(self, output, inputs: list, op: str) -> list:
        self.nccl.groupStart()
        for r, inp in enumerate(inputs):
            dest = output.data.ptr if r == self.rank else inp.data.ptr
            self.comm.reduce(inp.data.ptr, dest, inp.size, self._dtype(inp), self._ops[op], r,
                             self._stream())
        self.nccl.groupEnd()
        return self._request()

    def barrier(self) -> list:
        self.cupy.cuda.get_current_stream().synchronize()
        return [self.mpi.Ibarrier()]

    def gather_ints(self, values: np.ndarray) -> tuple:
        out = np.empty((self.world_size, values.size), dtype=np.int64)
        return out, [self.mpi.Iallgather(values, out)]

    def abort(self, code: int = 1) -> None:
        self.comm.abort()
        self.MPI.COMM_WORLD.Abort(code)

    def close(self) -> None:
        self.comm.destroy()
        self.mpi.Free()


def _uid_is_bytes(cupy) -> bool:
    """Whether this cupy's NCCL ids are bytes (cupy >= 14) rather than tuples of ints."""
    return int(cupy.__version__.split(".")[0]) >= 14
