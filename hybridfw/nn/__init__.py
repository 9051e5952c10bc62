"""``hf.nn``: modules and layers (PyTorch's ``torch.nn``), ``hf.nn.functional``, ``hf.nn.init``
and ``hf.nn.utils``.

Example::

    >>> import hybridfw as hf
    >>> net = hf.nn.Sequential(hf.nn.Linear(4, 8), hf.nn.ReLU(), hf.nn.Linear(8, 2))
    >>> net(hf.randn(3, 4)).shape
    (3, 2)
"""
from . import functional, init, parallel, utils  # noqa: F401
from .modules import *  # noqa: F403
from .modules import __all__ as _module_names
from .parameter import Parameter

__all__ = ["Parameter", "functional", "init", "parallel", "utils", *_module_names]
