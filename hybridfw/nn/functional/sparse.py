"""embedding and one_hot."""
from __future__ import annotations

from ...dygraph import no_grad
from ...ops import composite as C
from ...ops import composite_matrix as M
from ...ops import elementwise as E
from ...ops import indexing as I
from ...ops import nn_ops as N
from ...ops.registry import apply, apply_inplace


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type: float = 2.0,  # noqa: A002
              scale_grad_by_freq: bool = False, sparse: bool = False):
    """Rows ``weight[input]``; the ``padding_idx`` row gets no gradient. ``max_norm``
    renormalizes (in place) the rows looked up whose ``norm_type``-norm exceeds it.
    ``scale_grad_by_freq`` divides each row's gradient by how often its index occurs in
    ``input``. ``sparse`` is accepted, and the gradient is dense."""
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got "
                         f"shape {tuple(weight.shape)}")
    num = weight.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise ValueError(f"embedding: padding_idx {padding_idx} must be within "
                             f"num_embeddings={num}")
        padding_idx %= num
    if max_norm is not None:
        _renormalize_rows(input, weight, float(max_norm), float(norm_type))
    return apply(N.embedding, weight, input, padding_idx=padding_idx,
                 scale_grad_by_freq=bool(scale_grad_by_freq))


def _renormalize_rows(input, weight, max_norm, norm_type):
    with no_grad():
        flat = C.reshape(input, -1)
        rows = apply(N.embedding, weight, flat, padding_idx=None)
        # any norm_type, inf/-inf (largest/smallest |w|) and 0 (non-zeros) too, as torch's
        # embedding_renorm_: rows above max_norm are scaled by max_norm / (norm + 1e-7)
        norms = M.norm(rows, norm_type, -1, keepdim=True)
        scale = apply(E.where, norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        # a repeated index writes the same row twice: no accumulation needed
        apply_inplace(I.index_put, weight, weight, rows * scale, flat, spec=(("tensor",),))


def one_hot(input=None, num_classes: int = -1, *, tensor=None):  # noqa: A002
    """int64 one-hot encoding in a new last dim; ``num_classes=-1`` means max + 1. The
    indices are ``input`` (PyTorch's parameter name) or ``tensor=`` (the name its docs use)."""
    if (input is None) == (tensor is None):
        raise TypeError("one_hot: pass the indices once, as input (positionally or input=) or "
                        "as tensor=")
    tensor = input if tensor is None else tensor
    if num_classes == -1:
        if tensor.ndim and 0 in tensor.shape:
            raise ValueError("one_hot: cannot infer the number of classes from an empty tensor")
        largest = C.max(tensor).item()
        if not isinstance(largest, (int, float)):  # a static program's run-time value
            raise ValueError(
                "one_hot: num_classes=-1 takes the number of classes from the values, which a "
                "static program knows only when it runs (the result's shape would depend on "
                f"them); pass num_classes (input of shape {tuple(tensor.shape)})")
        num_classes = int(largest) + 1
    return apply(N.one_hot, tensor, num_classes=num_classes)
