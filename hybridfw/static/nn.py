"""``hf.static.nn``: control flow usable in eager and static code alike.

Example::

    >>> import hybridfw as hf
    >>> hf.static.nn.cond(hf.tensor(True), lambda: 1, lambda: 2)
    1
"""
from .control_flow import cond, while_loop

__all__ = ["cond", "while_loop"]
