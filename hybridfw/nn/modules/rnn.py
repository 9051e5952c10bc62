"""Recurrent layers: RNN, LSTM, GRU and their single-step cells, with PyTorch's gate layout.

Gates are stacked in the weights as PyTorch stacks them (LSTM ``i, f, g, o``; GRU ``r, z, n``),
so weights load from PyTorch checkpoints unchanged. The input-to-hidden product of a whole
sequence is one matmul; only the hidden-to-hidden recurrence loops over time steps.
"""
from __future__ import annotations

import math
import warnings

from ...ops.composite import cat, stack
from ...ops.factories import empty, zeros, zeros_like
from ...ops.reduction import dim_numel
from ...ops.registry import apply
from ...ops.rnn_ops import gru_cell, lstm_cell
from .. import functional as F
from ..functional.convolution import require_tensor
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


# ---- one time step, shared by the cells and the sequence layers --------------------------------
# ``gi`` is this step's input projection, computed for the whole sequence before the loop; for
# LSTM and RNN it already holds both biases (``x @ w_ih.T + b_ih + b_hh``), for GRU only ``b_ih``
# (``b_hn`` sits inside ``r * (...)``). ``w_hh_t`` is ``w_hh.T``, transposed once per sequence.
# Both keep the op count per step (the cost of a time loop) low, as do the fused cell primitives
# (``ops.rnn_ops``): an LSTM step is matmul, add, lstm_cell and two views of its [h, c] output.
def _input_projection(mode: str, x, w_ih, b_ih, b_hh):
    bias = b_ih if b_ih is None or mode == "GRU" else b_ih + b_hh
    return F.linear(x, w_ih, bias)


def _lstm_step(gi, h, c, w_hh_t, w_hr_t=None):
    hc = apply(lstm_cell, gi + h @ w_hh_t, c)  # stack([h, c]): one fused op for the cell
    if w_hr_t is not None:  # proj_size > 0: the hidden state is projected, the cell is not
        return hc[0] @ w_hr_t, hc[1]
    return hc[0], hc[1]


def _gru_step(gi, h, w_hh_t, b_hh):
    gh = h @ w_hh_t
    if b_hh is not None:
        gh = gh + b_hh
    return apply(gru_cell, gi, gh, h)


def _rnn_step(gi, h, w_hh_t, nonlinearity):
    pre = gi + h @ w_hh_t
    return pre.tanh() if nonlinearity == "tanh" else pre.relu()


def _unbind_time(x) -> list:
    """``[x[0], ..., x[T-1]]``. Slicing in blocks of about sqrt(T) steps keeps backward at
    O(T^1.5) work: the gradient of each slice is scattered into a zero tensor the size of what
    was sliced, so slicing the whole sequence T times would cost O(T^2)."""
    steps = x.shape[0]
    if steps <= 16:
        return [x[t] for t in range(steps)]
    block = math.isqrt(steps - 1) + 1
    out = []
    for start in range(0, steps, block):
        chunk = x[start:start + block]
        out.extend(chunk[t] for t in range(chunk.shape[0]))
    return out


def _time_loop(step, projected, h, c, reverse: bool):
    """The recurrence over a sequence whose length only the running program knows: one
    ``while`` over ``t`` (trained through like any converted loop). Returns the outputs stacked
    on dim 0 in time order and the final ``h`` and ``c`` (``c`` None for GRU and RNN)."""
    from ...static.control_flow import while_loop
    steps = apply(dim_numel, projected, dim=(0,))
    ys = h.unsqueeze(0)[:0]

    def body(t, h, c, ys):
        h, c = step(projected[steps - 1 - t if reverse else t], h, c)
        row = h.unsqueeze(0)
        return t + 1, h, (h if c is None else c), cat([row, ys] if reverse else [ys, row])
    _, h, c_out, ys = while_loop(lambda t, h, c, ys: t < steps, body,
                                 [0, h, h if c is None else c, ys])
    return ys, h, (None if c is None else c_out)


def _check_dtype(layer: str, x, weight) -> None:
    require_tensor(layer, "input", x)
    if x.dtype is not weight.dtype:
        raise TypeError(f"{layer}: input dtype {x.dtype} does not match the parameters' dtype "
                        f"{weight.dtype}; convert the input or the module (e.g. "
                        f"module.to({x.dtype}))")


def _check_state(layer: str, name: str, state, expected: tuple) -> None:
    shape = tuple(state.shape)  # -1: a dim unknown until run time (static graphs)
    if len(shape) != len(expected) or any(a != b and -1 not in (a, b)
                                          for a, b in zip(shape, expected)):
        raise ValueError(f"{layer}: expected {name} of shape {expected}, got "
                         f"{tuple(state.shape)}")


def _zero_state(x, batch: int, hidden: int):
    """A zero state ``(batch, hidden)`` in ``x``'s dtype and device. In a static program whose
    batch size is known only at run time (``batch`` is -1: an InputSpec ``None`` dim), it is
    made from ``x`` itself (``x`` then is ``(batch, features)``), so the program works for every
    batch size."""
    if batch >= 0:
        return zeros(batch, hidden, dtype=x.dtype, device=x.device)
    return zeros_like(x[:, :1]).expand(-1, hidden)


class RNNBase(Module):
    """Shared parameters and sequence loop of RNN, LSTM and GRU.

    Parameters per layer ``k`` and direction: ``weight_ih_l{k}`` ``(G*hidden, input)``,
    ``weight_hh_l{k}`` ``(G*hidden, hidden)``, ``bias_ih_l{k}``, ``bias_hh_l{k}`` ``(G*hidden,)``
    with ``G`` gates, for an LSTM with ``proj_size > 0`` also ``weight_hr_l{k}`` ``(proj_size,
    hidden)`` (``weight_hh`` is then ``(G*hidden, proj_size)``, and layers after the first take
    ``D*proj_size`` inputs), and the same with ``_reverse`` for the backward direction; all drawn
    from ``U(-1/sqrt(hidden), 1/sqrt(hidden))``.
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None):
        super().__init__()
        name = self._get_name()
        if mode not in _GATES:
            raise ValueError(f"{name}: unknown mode {mode!r}")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"{name}: hidden_size must be a positive int, got {hidden_size!r}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"{name}: num_layers must be a positive int, got {num_layers!r}")
        if isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError(f"{name}: dropout should be a number in [0, 1], got {dropout!r}")
        if isinstance(proj_size, bool) or not isinstance(proj_size, int):
            raise TypeError(f"{name}: proj_size should be of type int, got "
                            f"{type(proj_size).__name__}")
        if proj_size < 0:
            raise ValueError(f"{name}: proj_size should be a positive integer or zero to disable "
                             f"projections, got {proj_size}")
        if proj_size >= hidden_size:
            raise ValueError(f"{name}: proj_size has to be smaller than hidden_size, got "
                             f"proj_size={proj_size} and hidden_size={hidden_size}")
        if proj_size and mode != "LSTM":
            raise ValueError(f"{name}: proj_size argument is only supported for LSTM, not RNN or "
                             f"GRU (got proj_size={proj_size})")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"{name}: dropout={dropout} has no effect with num_layers=1 (dropout "
                          "is applied between layers)", stacklevel=2)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size or hidden_size  # the size of h (and so of the outputs)
        self._flat_weights_names = []
        for layer in range(num_layers):
            for direction in range(directions):
                layer_input = input_size if layer == 0 else real_hidden * directions
                suffix = "_reverse" if direction == 1 else ""
                shapes = [("weight_ih", (gate_size, layer_input)),
                          ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for kind, shape in shapes:
                    param_name = f"{kind}_l{layer}{suffix}"
                    setattr(self, param_name,
                            Parameter(empty(shape, dtype=dtype, device=device)))
                    self._flat_weights_names.append(param_name)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """No-op (PyTorch compacts cuDNN weights here); kept so ported code runs."""

    @property
    def all_weights(self) -> list:
        per = (4 if self.bias else 2) + (1 if self.proj_size else 0)
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i:i + per]] for i in range(0, len(names), per)]

    def _layer_weights(self, layer: int, direction: int) -> tuple:
        suffix = "_reverse" if direction == 1 else ""
        p = self._parameters
        return (p[f"weight_ih_l{layer}{suffix}"], p[f"weight_hh_l{layer}{suffix}"],
                p.get(f"bias_ih_l{layer}{suffix}"), p.get(f"bias_hh_l{layer}{suffix}"),
                p.get(f"weight_hr_l{layer}{suffix}"))

    def _prepare(self, input, hx):  # noqa: A002
        """Validate; return (time-major 3-D input, initial states list or None, batched)."""
        name = self._get_name()
        if input.ndim not in (2, 3):
            raise ValueError(f"{name}: expected input of 2 dims (L, H_in) or 3 dims "
                             f"({'N, L' if self.batch_first else 'L, N'}, H_in), got input of "
                             f"shape {tuple(input.shape)}")
        if input.shape[-1] != self.input_size and input.shape[-1] != -1:
            raise ValueError(f"{name}: expected input with last dim input_size="
                             f"{self.input_size}, got input of shape {tuple(input.shape)}")
        _check_dtype(name, input, self.weight_ih_l0)
        batched = input.ndim == 3
        if not batched:
            x = input.unsqueeze(1)
        else:
            x = input.transpose(0, 1) if self.batch_first else input
        batch = x.shape[1]
        layers = (self.num_layers * (2 if self.bidirectional else 1),) + \
            ((batch,) if batched else ())
        sizes = {"h_0": self.proj_size or self.hidden_size, "c_0": self.hidden_size}
        states = None
        if hx is not None:
            parts = hx if isinstance(hx, (tuple, list)) else (hx,)
            if len(parts) != (2 if self.mode == "LSTM" else 1):
                raise ValueError(f"{name}: expected hx to be "
                                 f"{'a tuple (h_0, c_0)' if self.mode == 'LSTM' else 'a tensor'}"
                                 f", got {len(parts)} tensors")
            states = []
            for state_name, state in zip(("h_0", "c_0"), parts):
                _check_state(name, state_name, state, layers + (sizes[state_name],))
                _check_dtype(name, state, self.weight_ih_l0)
                states.append(state if batched else state.unsqueeze(1))
        return x, states, batched

    def _run(self, x, states):
        """The multi-layer, optionally bidirectional loop over time on time-major ``x``."""
        steps, batch = x.shape[0], x.shape[1]
        directions = 2 if self.bidirectional else 1
        lstm = self.mode == "LSTM"
        final_h, final_c = [], []
        layer_input = x
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_weights(layer, direction)
                index = layer * directions + direction
                if states is None:
                    zero_from = x[0] if batch < 0 else x
                    c = _zero_state(zero_from, batch, self.hidden_size) if lstm else None
                    h = c if w_hr is None and lstm else \
                        _zero_state(zero_from, batch, self.proj_size or self.hidden_size)
                else:
                    h = states[0][index]
                    c = states[1][index] if lstm else None
                projected = _input_projection(self.mode, layer_input, w_ih, b_ih, b_hh)
                w_hh_t = w_hh.T
                w_hr_t = None if w_hr is None else w_hr.T

                def step(gi, h, c):
                    if lstm:
                        return _lstm_step(gi, h, c, w_hh_t, w_hr_t)
                    if self.mode == "GRU":
                        return _gru_step(gi, h, w_hh_t, b_hh), None
                    return _rnn_step(gi, h, w_hh_t, self.nonlinearity), None
                if steps == -1:  # a static program with the length known only at run time
                    ys, h, c = _time_loop(step, projected, h, c, reverse=direction == 1)
                else:
                    projected = _unbind_time(projected)
                    ys = [None] * steps
                    for t in (range(steps) if direction == 0 else range(steps - 1, -1, -1)):
                        h, c = step(projected[t], h, c)
                        ys[t] = h
                    ys = stack(ys, 0)
                outputs.append(ys)
                final_h.append(h)
                final_c.append(c)
            layer_input = outputs[0] if directions == 1 else cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        h_n = stack(final_h, 0)
        return layer_input, h_n, (stack(final_c, 0) if lstm else None)

    def forward(self, input, hx=None):  # noqa: A002
        x, states, batched = self._prepare(input, hx)
        output, h_n, c_n = self._run(x, states)
        if not batched:
            output = output.squeeze(1)
            h_n = h_n.squeeze(1)
            c_n = c_n.squeeze(1) if c_n is not None else None
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, ((h_n, c_n) if self.mode == "LSTM" else h_n)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu).

    Returns ``(output, h_n)``: output ``(L, N, D*hidden)`` (``(N, L, ...)`` with
    ``batch_first``), h_n ``(D*num_layers, N, hidden)``.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r}; use 'tanh' or 'relu'")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)


class LSTM(RNNBase):
    """Long short-term memory, PyTorch's equations and gate order (i, f, g, o)::

        i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of (x W_ih^T + b_ih + h W_hh^T + b_hh)
        c' = f * c + i * g;   h' = o * tanh(c')

    ``forward(input, (h_0, c_0)=None)`` returns ``(output, (h_n, c_n))``; output is
    ``(L, N, D*hidden)`` (``(N, L, D*hidden)`` with ``batch_first``), ``h_n``/``c_n`` are
    ``(D*num_layers, N, hidden)``, D = 2 when bidirectional. Unbatched ``(L, H_in)`` input works
    too. ``dropout`` applies to the outputs of every layer but the last, in training.

    ``proj_size > 0`` (smaller than ``hidden_size``) projects the hidden state after each step,
    ``h' = (o * tanh(c')) W_hr^T`` with ``weight_hr_l{k}`` ``(proj_size, hidden)``: output and
    ``h_n`` then have ``proj_size`` features (``D*proj_size`` for the output), ``c_n`` keeps
    ``hidden``.

    Example::

        >>> import hybridfw as hf
        >>> lstm = hf.nn.LSTM(8, 16, num_layers=2, batch_first=True, bidirectional=True)
        >>> out, (h, c) = lstm(hf.randn(4, 5, 8))
        >>> out.shape, h.shape
        ((4, 5, 32), (4, 4, 16))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit, PyTorch's equations and gate order (r, z, n)::

        r = sigmoid(W_ir x + b_ir + W_hr h + b_hr);  z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
        n = tanh(W_in x + b_in + r * (W_hn h + b_hn));  h' = (1 - z) * n + z * h

    ``forward(input, h_0=None)`` returns ``(output, h_n)`` with LSTM's shapes.

    Example::

        >>> import hybridfw as hf
        >>> out, h = hf.nn.GRU(8, 16)(hf.randn(5, 4, 8))
        >>> out.shape, h.shape
        ((5, 4, 16), (1, 4, 16))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)


# ---- cells --------------------------------------------------------------------------------------
class RNNCellBase(Module):
    """Parameters ``weight_ih`` ``(G*hidden, input)``, ``weight_hh`` ``(G*hidden, hidden)``,
    ``bias_ih``/``bias_hh`` ``(G*hidden,)``, drawn from ``U(-1/sqrt(hidden), 1/sqrt(hidden))``."""

    _gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        gate_size = self._gates * hidden_size
        self.weight_ih = Parameter(empty(gate_size, input_size, dtype=dtype, device=device))
        self.weight_hh = Parameter(empty(gate_size, hidden_size, dtype=dtype, device=device))
        if bias:
            self.bias_ih = Parameter(empty(gate_size, dtype=dtype, device=device))
            self.bias_hh = Parameter(empty(gate_size, dtype=dtype, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _prepare(self, input, hx):  # noqa: A002
        """Validate; return (2-D input, list of 2-D states or None, batched)."""
        name = self._get_name()
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: expected input of 1 dim (H_in) or 2 dims (N, H_in), got "
                             f"input of shape {tuple(input.shape)}")
        if input.shape[-1] != self.input_size and input.shape[-1] != -1:
            raise ValueError(f"{name}: expected input with last dim input_size="
                             f"{self.input_size}, got input of shape {tuple(input.shape)}")
        _check_dtype(name, input, self.weight_ih)
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        if hx is None:
            return x, None, batched
        parts = hx if isinstance(hx, (tuple, list)) else (hx,)
        expected = (x.shape[0], self.hidden_size) if batched else (self.hidden_size,)
        states = []
        for state_name, state in zip(("h_0", "c_0"), parts):
            _check_state(name, state_name, state, expected)
            _check_dtype(name, state, self.weight_ih)
            states.append(state if batched else state.unsqueeze(0))
        return x, states, batched

    def _zeros(self, x):
        return _zero_state(x, x.shape[0], self.hidden_size)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        return s


class RNNCell(RNNCellBase):
    """One Elman RNN step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity {nonlinearity!r}; use 'tanh' or "
                             "'relu'")
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):  # noqa: A002
        x, states, batched = self._prepare(input, hx)
        h = states[0] if states else self._zeros(x)
        gi = _input_projection("RNN", x, self.weight_ih, self.bias_ih, self.bias_hh)
        h = _rnn_step(gi, h, self.weight_hh.T, self.nonlinearity)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step (see :class:`LSTM`): ``forward(input, (h, c)=None) -> (h', c')``.

    Example::

        >>> import hybridfw as hf
        >>> cell = hf.nn.LSTMCell(3, 5)
        >>> h, c = cell(hf.randn(2, 3))
        >>> h.shape, c.shape
        ((2, 5), (2, 5))
    """

    _gates = 4

    def forward(self, input, hx=None):  # noqa: A002
        x, states, batched = self._prepare(input, hx)
        if states is not None and len(states) != 2:
            raise ValueError("LSTMCell: expected hx to be a tuple (h_0, c_0)")
        if states is None:
            states = [self._zeros(x)] * 2
        gi = _input_projection("LSTM", x, self.weight_ih, self.bias_ih, self.bias_hh)
        h, c = _lstm_step(gi, states[0], states[1], self.weight_hh.T)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step (see :class:`GRU`): ``forward(input, h=None) -> h'``.

    Example::

        >>> import hybridfw as hf
        >>> hf.nn.GRUCell(3, 5)(hf.randn(2, 3)).shape
        (2, 5)
    """

    _gates = 3

    def forward(self, input, hx=None):  # noqa: A002
        x, states, batched = self._prepare(input, hx)
        h = states[0] if states else self._zeros(x)
        gi = _input_projection("GRU", x, self.weight_ih, self.bias_ih, self.bias_hh)
        h = _gru_step(gi, h, self.weight_hh.T, self.bias_hh)
        return h if batched else h.squeeze(0)
