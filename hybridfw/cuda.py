"""``hf.cuda``: whether a CUDA device is usable (through cupy), seeding, synchronizing."""
from __future__ import annotations

from .backend import cuda_device_count, cuda_is_available, get_default_device
from .backend import device as as_device
from .random import seed_cuda

__all__ = ["is_available", "device_count", "manual_seed", "manual_seed_all", "synchronize"]


def is_available() -> bool:
    """True when cupy is installed and sees a GPU; False otherwise (never raises)."""
    return cuda_is_available()


def device_count() -> int:
    return cuda_device_count()


def manual_seed(seed: int) -> None:
    """Seed the current CUDA device's generator (the default device's when it is a CUDA one,
    else device 0), as ``torch.cuda.manual_seed``; ``hf.manual_seed`` seeds it already.
    Without a GPU it does nothing visible (the seed waits for a device, as in PyTorch)."""
    current = get_default_device()
    seed_cuda(seed, current.index if current.type == "cuda" else 0)


def manual_seed_all(seed: int) -> None:
    """Seed every CUDA device's generator, as ``torch.cuda.manual_seed_all``; the CPU's is left
    as it is (``hf.manual_seed`` seeds all of them)."""
    seed_cuda(seed)


def synchronize(device=None) -> None:
    """Wait until the work queued on a CUDA device has finished, as ``torch.cuda.synchronize``
    (``device``: an index, ``'cuda:N'`` or a Device; default: the default device when it is a
    CUDA one, else device 0). Without cupy or a GPU nothing is ever queued, and it returns at
    once.

    Example::

        >>> import hybridfw as hf
        >>> hf.cuda.synchronize()  # before reading a timer around GPU work
    """
    if device is None:
        current = get_default_device()
        index = current.index if current.type == "cuda" else 0
    elif isinstance(device, int) and not isinstance(device, bool):
        index = device
    else:
        dev = as_device(device)
        if dev.type != "cuda":
            raise ValueError(f"cuda.synchronize: expected a CUDA device, got {device!r}")
        index = dev.index
    if index < 0:
        raise ValueError(f"cuda.synchronize: expected a device index >= 0, got {device!r}")
    if cuda_is_available():
        as_device(f"cuda:{index}").xp.cuda.Device(index).synchronize()
