"""Fused recurrent-cell primitives: one LSTM step and one GRU step as single ops.

An eager time loop pays the per-op overhead once per op per step; written with elementwise
ops an LSTM step is about 14 ops forward and as many backward. Here the whole nonlinear part of
a step is one kernel forward and one or two kernels backward (the matmuls stay outside, where
BLAS does them).

``lstm_cell(gates, c_prev)`` returns ``stack([h, c, i, f, g, o, tanh(c)])``: the new hidden and
cell state, then the activations its backward needs, stacked along a new leading dim (shape
``(7, ..., H)``), rather than being several primitives: a registry op has one output, and one op
per value would each evaluate the gate activations. The layer takes ``h`` and ``c`` apart as
``hc[0]``/``hc[1]``: views that are contiguous (so the next step's ``h @ W_hh^T`` and the
weight gradient get plain BLAS layouts, which a ``[h | c]`` column split would not give).
Keeping the activations (5 of the 7 slots) costs about what keeping the pre-activation gates
did, and saves the backward every transcendental function: the backward of a step is a handful
of multiplies. Every slot is differentiable (a gradient reaching i, f, g, o or tanh(c) is
propagated like one reaching h or c).

The gradient rules call ``lstm_cell_backward`` / ``gru_cell_backward`` with a ``wrt``
attribute naming the input whose gradient they compute. The GRU one recomputes its gate
activations from the saved pre-activations; only its inputs are saved. These
backward primitives are not differentiable: differentiating them raises a RuntimeError (double
backward through an RNN cell is not supported) instead of silently giving zeros.
"""
from __future__ import annotations

from .elementwise import _sigmoid_kernel
from .infer import check_float
from .registry import OnnxNotExportable, apply, onnx_rules, register

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
    return (LSTM_SLOTS,) + lead + (hidden,), gates.dtype, None


# The slots of lstm_cell's output: h and c, then what the backward would otherwise recompute.
LSTM_SLOTS = 7  # h, c, i, f, g, o, tanh(c)


def _lstm_cell_kernel(xp, gates, c_prev, out=None):
    hidden = gates.shape[-1] // 4
    if out is None:
        out = xp.empty((LSTM_SLOTS,) + gates.shape[:-1] + (hidden,), dtype=gates.dtype)
    h, c, i, f, g, o, tc = out
    _sigmoid_kernel(xp, gates[..., :hidden], out=i)
    _sigmoid_kernel(xp, gates[..., hidden:2 * hidden], out=f)
    xp.tanh(gates[..., 2 * hidden:3 * hidden], out=g)
    _sigmoid_kernel(xp, gates[..., 3 * hidden:], out=o)
    xp.multiply(f, c_prev, out=c)
    c += i * g
    xp.tanh(c, out=tc)
    xp.multiply(o, tc, out=h)
    return out


def _lstm_cell_grad(wrt):
    def rule(g, out, gates, c_prev):
        return apply(lstm_cell_backward, g, c_prev, out, wrt=wrt)
    return rule


lstm_cell = register(
    "lstm_cell", infer=_lstm_cell_infer, kernel=_lstm_cell_kernel, save=(1,),
    save_output=True, supports_out=True,
    vjp=(_lstm_cell_grad("gates"), _lstm_cell_grad("c_prev")),
    doc="One LSTM step from the pre-activation gates (..., 4H) in PyTorch's order i, f, g, o "
        "and c_prev (..., H): c = sigmoid(f) * c_prev + sigmoid(i) * tanh(g), "
        "h = sigmoid(o) * tanh(c); returns stack([h, c, i, f, g, o, tanh(c)]) of shape "
        "(7, ..., H) (i, f, o the gate sigmoids, g the tanh of the cell gate): every slot is "
        "differentiable, and the backward reads the activations instead of recomputing them.")


def _lstm_cell_backward_infer(g, c_prev, out, *, wrt):
    if wrt not in ("gates", "c_prev"):
        raise ValueError(f"lstm_cell_backward: wrt must be 'gates' or 'c_prev', got {wrt!r}")
    lead, hidden = tuple(c_prev.shape[:-1]), c_prev.shape[-1]
    return (lead + (4 * hidden if hidden != -1 else -1,) if wrt == "gates"
            else tuple(c_prev.shape)), c_prev.dtype, None


def _lstm_cell_backward_kernel(xp, g, c_prev, cell, *, wrt, out=None):
    _, _, i, f, gg, o, tc = cell
    dh, dc, di, df, dg, do, dtc = g
    # gradient reaching c: directly, and through tanh(c) (read by h = o * tanh(c))
    dct = xp.multiply(o, dh, out=out if wrt == "c_prev" else None)
    dct += dtc
    dct *= 1 - tc * tc
    dct += dc
    if wrt == "c_prev":
        dct *= f
        return dct
    hidden = c_prev.shape[-1]
    grad = out
    if grad is None:
        grad = xp.empty(c_prev.shape[:-1] + (4 * hidden,), dtype=c_prev.dtype)
    gi, gf = grad[..., :hidden], grad[..., hidden:2 * hidden]
    gc, go = grad[..., 2 * hidden:3 * hidden], grad[..., 3 * hidden:]
    xp.multiply(dct, gg, out=gi)
    gi += di
    gi *= i * (1 - i)
    xp.multiply(dct, c_prev, out=gf)
    gf += df
    gf *= f * (1 - f)
    xp.multiply(dct, i, out=gc)
    gc += dg
    gc *= 1 - gg * gg
    xp.multiply(dh, tc, out=go)
    go += do
    go *= o * (1 - o)
    return grad


lstm_cell_backward = register(
    "lstm_cell_backward", infer=_lstm_cell_backward_infer, kernel=_lstm_cell_backward_kernel,
    supports_out=True, vjp=(_no_double_backward("lstm_cell"),) * 3,
    doc="Gradient of lstm_cell with respect to gates or c_prev (attribute wrt), given the "
        "gradient g of its (7, ..., H) output, c_prev and that output (whose slots hold the "
        "activations). Not differentiable.")


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


# ---- ONNX lowering rules (hybridfw.onnx) ----------------------------------------------------
def _onnx_last(ctx, x, start, stop):
    return ctx.node("Slice", [x, ctx.ints([start]), ctx.ints([stop]), ctx.ints([-1])])


def _onnx_lstm_cell(ctx, gates, c_prev):
    hidden = ctx.out.shape[-1]
    i, f, g, o = (_onnx_last(ctx, gates, k * hidden, (k + 1) * hidden) for k in range(4))
    i, f, o = (ctx.node("Sigmoid", [v]) for v in (i, f, o))
    g = ctx.node("Tanh", [g])
    c = ctx.node("Add", [ctx.node("Mul", [f, c_prev]), ctx.node("Mul", [i, g])])
    tc = ctx.node("Tanh", [c])
    h = ctx.node("Mul", [o, tc])
    slots = [ctx.node("Unsqueeze", [v, ctx.ints([0])]) for v in (h, c, i, f, g, o, tc)]
    return ctx.node("Concat", slots, axis=0)


def _onnx_gru_cell(ctx, gi, gh, h_prev):
    hidden = ctx.out.shape[-1]
    rz = ctx.node("Sigmoid", [ctx.node("Add", [_onnx_last(ctx, gi, 0, 2 * hidden),
                                               _onnx_last(ctx, gh, 0, 2 * hidden)])])
    r, z = _onnx_last(ctx, rz, 0, hidden), _onnx_last(ctx, rz, hidden, 2 * hidden)
    n = ctx.node("Tanh", [ctx.node("Add", [
        ctx.node("Mul", [r, _onnx_last(ctx, gh, 2 * hidden, 3 * hidden)]),
        _onnx_last(ctx, gi, 2 * hidden, 3 * hidden)])])
    return ctx.node("Add", [ctx.node("Mul", [ctx.node("Sub", [h_prev, n]), z]), n])


_RNN_BACKWARD = OnnxNotExportable("a gradient op of an RNN cell (backward only); an exported "
                                  "model is inference only")

onnx_rules(lstm_cell=_onnx_lstm_cell, gru_cell=_onnx_gru_cell, lstm_cell_backward=_RNN_BACKWARD,
           gru_cell_backward=_RNN_BACKWARD)
