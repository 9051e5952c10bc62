"""``hf.backends``: PyTorch's backend switches, for scripts ported from PyTorch.

``hf.backends.cudnn`` holds the flags scripts set (``deterministic``, ``benchmark``,
``enabled``, ``allow_tf32``). hybridfw does not call cuDNN (its CUDA kernels are cupy's), so
setting them has no effect: they are plain module attributes that keep the value written.

Example::

    >>> import hybridfw as hf
    >>> hf.backends.cudnn.benchmark = True
    >>> hf.backends.cudnn.benchmark
    True
"""
from . import cudnn

__all__ = ["cudnn"]
