"""The op registry and every primitive op, plus composites and the shared tensor methods.

Floor 1 of the architecture: nothing here imports ``dygraph``, ``static`` or anything above.
``registry.all_ops()`` lists every primitive with its inference, kernel and gradient rules.
"""
from . import creation, elementwise, indexing, linalg, reduction, shape_ops  # noqa: F401 (register)
from . import nn_ops, rnn_ops  # noqa: F401 (register: conv, pooling, softmax, losses, RNN cells)
from . import sorting  # noqa: F401 (register: argsort)
from .registry import (OpDef, TensorLike, TensorMeta, all_ops, apply, apply_inplace, get_op,
                       is_tensor, register, set_interpreter, use_interpreter)

__all__ = ["OpDef", "TensorLike", "TensorMeta", "all_ops", "apply", "apply_inplace", "get_op",
           "is_tensor", "register", "set_interpreter", "use_interpreter"]
