"""``hf.backends.cudnn``: PyTorch's cuDNN flags, kept so ported scripts run; they have no effect.

hybridfw does not call cuDNN: on CUDA its kernels are cupy's (convolutions as matrix products),
which make no per-shape algorithm choice to benchmark and, for a given input, compute the same
way every run. Each flag keeps the value a script writes and changes nothing else.
"""
from __future__ import annotations

__all__ = ["deterministic", "benchmark", "enabled", "allow_tf32", "is_available", "version"]

deterministic = False
benchmark = False
enabled = True
allow_tf32 = True


def is_available() -> bool:
    """False: hybridfw does not use cuDNN."""
    return False


def version() -> None:
    """None, as ``torch.backends.cudnn.version()`` where cuDNN is not available."""
    return None
