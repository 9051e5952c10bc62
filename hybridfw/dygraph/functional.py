"""``hf.autograd.functional``: ``vjp``, ``jacobian`` and ``hessian`` of a function, as
``torch.autograd.functional`` (reverse mode: one backward pass per output element, as PyTorch
does without ``vectorize``)."""
from __future__ import annotations

from ..ops.composite import stack
from .autograd import enable_grad
from .tensor import Tensor, grad, wrap_array

__all__ = ["vjp", "jacobian", "hessian"]


def _inputs(inputs, create_graph: bool, api: str) -> tuple:
    single = isinstance(inputs, Tensor)
    values = (inputs,) if single else tuple(inputs)
    for i, t in enumerate(values):
        if not isinstance(t, Tensor):
            raise TypeError(f"{api}: inputs must be a tensor or a tuple of tensors, got "
                            f"{type(t).__name__} at position {i}")
        if not t.dtype.is_floating_point:
            raise TypeError(f"{api}: input {i} has dtype {t.dtype}; only floating point inputs "
                            "have gradients")
    # fresh leaves (PyTorch's): the function's graph starts here; with create_graph an input
    # that already requires grad keeps its history, so the result can be differentiated again
    return single, tuple(t if create_graph and t.requires_grad else
                         t.detach().requires_grad_() for t in values)


def _outputs(outputs, api: str) -> tuple:
    single = isinstance(outputs, Tensor)
    values = (outputs,) if single else tuple(outputs)
    for i, t in enumerate(values):
        if not isinstance(t, Tensor):
            raise TypeError(f"{api}: the function must return a tensor or a tuple of tensors, "
                            f"got {type(t).__name__} at position {i}")
    return single, values


def _zeros(t: Tensor) -> Tensor:
    return wrap_array(t._storage.device.xp.zeros(t.shape, dtype=t._data.dtype), t._storage.device)


def _grads(output, inputs, grad_output, create_graph: bool, strict: bool, api: str) -> tuple:
    """d(output . grad_output)/d(each input); zeros (or, ``strict``, an error) where the
    output does not depend on an input."""
    if not output.requires_grad:
        got = (None,) * len(inputs)
    else:
        got = grad(output, inputs, grad_output, retain_graph=True, create_graph=create_graph,
                   allow_unused=True)
    if strict and any(g is None for g in got):
        i = next(i for i, g in enumerate(got) if g is None)
        raise RuntimeError(f"{api}: the output does not depend on input {i} (strict=True)")
    return tuple(_zeros(t) if g is None else g for g, t in zip(got, inputs))


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(*inputs), v^T J)``: the outputs and the vector-Jacobian product (``v`` may be
    left out for a one-element output)."""
    single_in, ins = _inputs(inputs, create_graph, "vjp")
    with enable_grad():
        single_out, outs = _outputs(func(*ins), "vjp")
        vs = (None,) * len(outs) if v is None else ((v,) if isinstance(v, Tensor) else tuple(v))
        if len(vs) != len(outs):
            raise ValueError(f"vjp: v has {len(vs)} tensors for {len(outs)} outputs")
        total = None
        for o, w in zip(outs, vs):
            if w is None and o.numel() != 1:
                raise RuntimeError(f"vjp: v must be given for an output of shape {o.shape}")
            term = (o * w).sum() if w is not None else o.sum()
            total = term if total is None else total + term
        result = _grads(total, ins, None, create_graph, strict, "vjp")
    outputs = tuple(o if create_graph else o.detach() for o in outs)
    return (outputs[0] if single_out else outputs), (result[0] if single_in else result)


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for one input and one output a tensor of shape
    ``output.shape + input.shape``; tuples of them for tuples of inputs and/or outputs, as
    ``torch.autograd.functional.jacobian``.

    Example::

        >>> import hybridfw as hf
        >>> hf.autograd.functional.jacobian(lambda x: x ** 2, hf.tensor([1.0, 2.0])).tolist()
        [[2.0, 0.0], [0.0, 4.0]]
    """
    if strategy != "reverse-mode":
        raise NotImplementedError(f"jacobian: strategy={strategy!r} is not supported; only "
                                  "'reverse-mode'")
    single_in, ins = _inputs(inputs, create_graph, "jacobian")
    with enable_grad():
        single_out, outs = _outputs(func(*ins), "jacobian")
        per_output = []
        for o in outs:
            flat = o.reshape(-1)
            rows = [_grads(flat[k], ins, None, create_graph, strict, "jacobian")
                    for k in range(flat.shape[0])]
            per_input = []
            for i, t in enumerate(ins):
                block = stack([r[i] for r in rows]) if rows else _zeros(t).reshape(0, *t.shape)
                block = block.reshape(*o.shape, *t.shape)
                per_input.append(block if create_graph else block.detach())
            per_output.append(per_input[0] if single_in else tuple(per_input))
    return per_output[0] if single_out else tuple(per_output)


def hessian(func, inputs, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a function returning one element: ``input.shape + input.shape`` for one
    input, a tuple of tuples for several, as ``torch.autograd.functional.hessian``."""
    single_in, ins = _inputs(inputs, create_graph, "hessian")

    def gradient(*values):
        single_out, outs = _outputs(func(*values), "hessian")
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("hessian: the function must return a tensor with one element")
        got = _grads(outs[0].reshape(()), values, None, True, strict, "hessian")
        return got[0] if single_in else got

    return jacobian(gradient, ins[0] if single_in else ins, create_graph=create_graph,
                    strict=strict, strategy=outer_jacobian_strategy)
