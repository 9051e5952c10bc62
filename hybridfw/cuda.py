"""``hf.cuda``: whether a CUDA device is usable (through cupy)."""
from __future__ import annotations

from .backend import cuda_device_count, cuda_is_available

__all__ = ["is_available", "device_count"]


def is_available() -> bool:
    """True when cupy is installed and sees a GPU; False otherwise (never raises)."""
    return cuda_is_available()


def device_count() -> int:
    return cuda_device_count()
