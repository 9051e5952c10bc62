"""Fused recurrent-cell primitives: one LSTM step and one GRU step as single ops.

An eager time loop pays the per-op overhead once per op per step; written with elementwise
ops an LSTM step is about 14 ops forward and as many backward. Here the whole nonlinear part of
a step is one kernel forward and one or two kernels backward (the matmuls stay outside, where
BLAS does them).

``lstm_cell(gates, c_prev)`` returns ``stack([h, c])``, the new hidden and cell state stacked
along a new leading dim (shape ``(2, ..., H)``), rather than being two primitives: a registry op
has one output, and two ops (one for ``h``, one for ``c``) would each evaluate the four gate
activations and double the forward op count. The layer takes ``h`` and ``c`` apart as
``hc[0]``/``hc[1]``: views that are contiguous (so the next step's ``h @ W_hh^T`` and the
weight gradient get plain BLAS layouts, which a ``[h | c]`` column split would not give), and
whose backward is a small ``(2, ..., H)`` scatter per step.

The gradient rules call ``lstm_cell_backward`` / ``gru_cell_backward`` with a ``wrt``
attribute naming the input whose gradient they compute. Each recomputes the gate activations
from the saved pre-activations (a few elementwise passes over ``(N, 4H)``, cheaper than keeping
them), so only the inputs and, for LSTM, the output (which holds ``c``) are saved. These
backward primitives are not differentiable: differentiating them raises a RuntimeError (double
backward through an RNN cell is not supported) instead of silently giving zeros.
"""
from __future__ import annotations

from .elementwise import _sigmoid_kernel
from .infer import check_float
from .registry import apply, register

__all__ = ["gru_cell", "gru_cell_backward", "lstm_cell", "lstm_cell_backward"]


def _sigmoid(xp, a):
    return _sigmoid_kernel(xp, a)  # the sigmoid op's own kernel (stable for large |a|)


def _same_leading(op: str, x, expected: tuple, what: str) -> None:
    shape = tuple(x.shape)
    if len(shape) != len(expected) or any(a != b and -1 not in (a, b)
                                          for a, b in zip(shape, expected)):
        raise ValueError(f"{op}: expected {what} of shape {expected}, got {shape}")


def _check_dtypes(op: str, *xs) -> None:
    check_float(op, *xs)
    if any(x.dtype is not xs[0].dtype for x in xs):
        raise TypeError(f"{op}: inputs must share one dtype, got "
                        f"{', '.join(str(x.dtype) for x in xs)}")


def _no_double_backward(op: str):
    def rule(*args, **attrs):
        raise RuntimeError(f"double backward through {op} is not supported (its gradient "
                           f"{op}_backward is not differentiable)")
    return rule


# --------------------------------------------------------------------------- LSTM
def _lstm_hidden(op: str, gates) -> int:
    if gates.ndim < 1 or gates.shape[-1] == -1 or gates.shape[-1] % 4:
        raise ValueError(f"{op}: expected gates of shape (..., 4 * hidden), got "
                         f"{tuple(gates.shape)}")
    return gates.shape[-1] // 4


def _lstm_cell_infer(gates, c_prev):
    _check_dtypes("lstm_cell", gates, c_prev)
    hidden = _lstm_hidden("lstm_cell", gates)
    lead = tuple(gates.shape[:-1])
    _same_leading("lstm_cell", c_prev, lead + (hidden,), "c_prev")
    return (2,) + lead + (hidden,), gates.dtype, None


def _lstm_gates(xp, gates):
    hidden = gates.shape[-1] // 4
    act = _sigmoid(xp, gates)  # i, f and o (the g columns are replaced below)
    i, f, o = act[..., :hidden], act[..., hidden:2 * hidden], act[..., 3 * hidden:]
    g = xp.tanh(gates[..., 2 * hidden:3 * hidden])
    return i, f, g, o


def _lstm_cell_kernel(xp, gates, c_prev):
    hidden = gates.shape[-1] // 4
    i, f, g, o = _lstm_gates(xp, gates)
    out = xp.empty((2,) + gates.shape[:-1] + (hidden,), dtype=gates.dtype)
    h, c = out[0], out[1]
    xp.multiply(f, c_prev, out=c)
    c += i * g
    xp.tanh(c, out=h)
    h *= o
    return out


def _lstm_cell_grad(wrt):
    def rule(g, out, gates, c_prev):
        return apply(lstm_cell_backward, g, gates, c_prev, out, wrt=wrt)
    return rule


lstm_cell = register(
    "lstm_cell", infer=_lstm_cell_infer, kernel=_lstm_cell_kernel, save=(0, 1),
    save_output=True, vjp=(_lstm_cell_grad("gates"), _lstm_cell_grad("c_prev")),
    doc="One LSTM step from the pre-activation gates (..., 4H) in PyTorch's order i, f, g, o "
        "and c_prev (..., H): c = sigmoid(f) * c_prev + sigmoid(i) * tanh(g), "
        "h = sigmoid(o) * tanh(c); returns stack([h, c]) of shape (2, ..., H).")


def _lstm_cell_backward_infer(g, gates, c_prev, out, *, wrt):
    if wrt not in ("gates", "c_prev"):
        raise ValueError(f"lstm_cell_backward: wrt must be 'gates' or 'c_prev', got {wrt!r}")
    return (tuple(gates.shape) if wrt == "gates" else tuple(c_prev.shape)), gates.dtype, None


def _lstm_cell_backward_kernel(xp, g, gates, c_prev, out, *, wrt):
    hidden = gates.shape[-1] // 4
    if wrt == "c_prev":  # needs only f and o
        i = gg = None
        f = _sigmoid(xp, gates[..., hidden:2 * hidden])
        o = _sigmoid(xp, gates[..., 3 * hidden:])
    else:
        i, f, gg, o = _lstm_gates(xp, gates)
    dh, dc = g[0], g[1]
    tc = xp.tanh(out[1])
    # gradient reaching c: directly, and through h = o * tanh(c)
    dct = o * dh
    dct *= 1 - tc * tc
    dct += dc
    if wrt == "c_prev":
        dct *= f
        return dct
    grad = xp.empty_like(gates)
    di, df = grad[..., :hidden], grad[..., hidden:2 * hidden]
    dg, do = grad[..., 2 * hidden:3 * hidden], grad[..., 3 * hidden:]
    xp.multiply(dct, gg, out=di)
    di *= i * (1 - i)
    xp.multiply(dct, c_prev, out=df)
    df *= f * (1 - f)
    xp.multiply(dct, i, out=dg)
    dg *= 1 - gg * gg
    xp.multiply(dh, tc, out=do)
    do *= o * (1 - o)
    return grad


lstm_cell_backward = register(
    "lstm_cell_backward", infer=_lstm_cell_backward_infer, kernel=_lstm_cell_backward_kernel,
    vjp=(_no_double_backward("lstm_cell"),) * 4,
    doc="Gradient of lstm_cell with respect to gates or c_prev (attribute wrt), given the "
        "gradient g of stack([h, c]); recomputes the gate activations. Not differentiable.")


# --------------------------------------------------------------------------- GRU
def _gru_cell_infer(gi, gh, h_prev):
    _check_dtypes("gru_cell", gi, gh, h_prev)
    hidden = h_prev.shape[-1]
    if hidden == -1:
        raise ValueError("gru_cell: the last dim of h_prev (hidden) must be known")
    lead = tuple(h_prev.shape[:-1])
    _same_leading("gru_cell", gi, lead + (3 * hidden,), "gi")
    _same_leading("gru_cell", gh, lead + (3 * hidden,), "gh")
    return tuple(h_prev.shape), h_prev.dtype, None


def _gru_gates(xp, gi, gh, hidden):
    rz = gi[..., :2 * hidden] + gh[..., :2 * hidden]
    rz = _sigmoid(xp, rz)
    r, z = rz[..., :hidden], rz[..., hidden:]
    n = r * gh[..., 2 * hidden:]
    n += gi[..., 2 * hidden:]
    xp.tanh(n, out=n)
    return r, z, n


def _gru_cell_kernel(xp, gi, gh, h_prev):
    _, z, n = _gru_gates(xp, gi, gh, h_prev.shape[-1])
    out = h_prev - n
    out *= z
    out += n  # (1 - z) * n + z * h_prev
    return out


def _gru_cell_grad(wrt):
    def rule(g, out, gi, gh, h_prev):
        return apply(gru_cell_backward, g, gi, gh, h_prev, wrt=wrt)
    return rule


gru_cell = register(
    "gru_cell", infer=_gru_cell_infer, kernel=_gru_cell_kernel, save=(0, 1, 2),
    vjp=(_gru_cell_grad("gi"), _gru_cell_grad("gh"), _gru_cell_grad("h_prev")),
    doc="One GRU step from gi = x W_ih^T + b_ih and gh = h W_hh^T + b_hh (..., 3H), PyTorch's "
        "order r, z, n: r, z = sigmoid(gi_r + gh_r), sigmoid(gi_z + gh_z), "
        "n = tanh(gi_n + r * gh_n), h = (1 - z) * n + z * h_prev.")


def _gru_cell_backward_infer(g, gi, gh, h_prev, *, wrt):
    if wrt not in ("gi", "gh", "h_prev"):
        raise ValueError(f"gru_cell_backward: wrt must be 'gi', 'gh' or 'h_prev', got {wrt!r}")
    return tuple((gi if wrt == "gi" else gh if wrt == "gh" else h_prev).shape), gi.dtype, None


def _gru_cell_backward_kernel(xp, g, gi, gh, h_prev, *, wrt):
    hidden = h_prev.shape[-1]
    r, z, n = _gru_gates(xp, gi, gh, hidden)
    if wrt == "h_prev":
        return g * z
    grad = xp.empty_like(gi)
    dr, dz, dn = grad[..., :hidden], grad[..., hidden:2 * hidden], grad[..., 2 * hidden:]
    xp.subtract(1, z, out=dn)
    dn *= g
    dn *= 1 - n * n  # gradient of the tanh's argument
    xp.multiply(dn, gh[..., 2 * hidden:], out=dr)
    dr *= r * (1 - r)
    xp.subtract(h_prev, n, out=dz)
    dz *= g
    dz *= z * (1 - z)
    if wrt == "gh":
        dn *= r
    return grad


gru_cell_backward = register(
    "gru_cell_backward", infer=_gru_cell_backward_infer, kernel=_gru_cell_backward_kernel,
    vjp=(_no_double_backward("gru_cell"),) * 4,
    doc="Gradient of gru_cell with respect to gi, gh or h_prev (attribute wrt), given the "
        "gradient g of h; recomputes the gate activations. Not differentiable.")
