"""RNN, LSTM, GRU and their cells against a numpy reference written here; gradients by float64
finite differences; PyTorch as an extra oracle when installed."""
from __future__ import annotations

import math

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.nn.modules.rnn import RNNBase


def npy(t):
    return t.detach().numpy()


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def check_grads(fn, tensors, seed=0, eps=1e-6, rtol=1e-6):
    """Autograd vs a central difference along one random direction (float64 leaves)."""
    assert hf.autograd.gradcheck(lambda *_: fn(), tensors, seed=seed, eps=eps, rtol=rtol)


# ---- numpy reference ----------------------------------------------------------------------------
def np_lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh):
    gates = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    i, f, g, o = np.split(gates, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


def np_gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    ir, iz, in_ = np.split(x @ w_ih.T + b_ih, 3, axis=-1)
    hr, hz, hn = np.split(h @ w_hh.T + b_hh, 3, axis=-1)
    r, z = sigmoid(ir + hr), sigmoid(iz + hz)
    n = np.tanh(in_ + r * hn)
    return (1 - z) * n + z * h


def np_rnn_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    return np.tanh(x @ w_ih.T + b_ih + h @ w_hh.T + b_hh)


def np_sequence(module, x, h0=None, c0=None):
    """Run a multi-layer (bi)directional RNN/LSTM/GRU in numpy on time-major ``x``."""
    p = {k: npy(v) for k, v in module.named_parameters()}
    dirs = 2 if module.bidirectional else 1
    steps, batch, hidden = x.shape[0], x.shape[1], module.hidden_size
    proj = getattr(module, "proj_size", 0)
    h0 = np.zeros((module.num_layers * dirs, batch, proj or hidden)) if h0 is None else h0
    c0 = np.zeros((module.num_layers * dirs, batch, hidden)) if c0 is None else c0
    hs, cs, inp = [], [], x
    for layer in range(module.num_layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            w = [p["weight_ih" + sfx], p["weight_hh" + sfx], p["bias_ih" + sfx],
                 p["bias_hh" + sfx]]
            h, c = h0[layer * dirs + d], c0[layer * dirs + d]
            ys = [None] * steps
            for t in (range(steps) if d == 0 else reversed(range(steps))):
                if module.mode == "LSTM":
                    h, c = np_lstm_cell(inp[t], h, c, *w)
                    if proj:  # the projected hidden state feeds the next step and the output
                        h = h @ p["weight_hr" + sfx].T
                elif module.mode == "GRU":
                    h = np_gru_cell(inp[t], h, *w)
                else:
                    h = np_rnn_cell(inp[t], h, *w)
                ys[t] = h
            outs.append(np.stack(ys))
            hs.append(h)
            cs.append(c)
        inp = np.concatenate(outs, -1)
    return inp, np.stack(hs), np.stack(cs)


# ---- parameters ---------------------------------------------------------------------------------
def test_parameter_names_and_shapes_follow_pytorch():
    lstm = nn.LSTM(3, 5, num_layers=2, bidirectional=True)
    shapes = {n: p.shape for n, p in lstm.named_parameters()}
    assert list(shapes)[:8] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                "weight_ih_l0_reverse", "weight_hh_l0_reverse",
                                "bias_ih_l0_reverse", "bias_hh_l0_reverse"]
    assert shapes["weight_ih_l0"] == (20, 3) and shapes["weight_hh_l0"] == (20, 5)
    assert shapes["weight_ih_l1"] == (20, 10) and shapes["bias_hh_l1_reverse"] == (20,)
    assert len(shapes) == 16
    gru = nn.GRU(3, 4, bias=False)
    assert {n: p.shape for n, p in gru.named_parameters()} == {"weight_ih_l0": (12, 3),
                                                               "weight_hh_l0": (12, 4)}
    cell = nn.LSTMCell(3, 4)
    assert [(n, p.shape) for n, p in cell.named_parameters()] == [
        ("weight_ih", (16, 3)), ("weight_hh", (16, 4)), ("bias_ih", (16,)), ("bias_hh", (16,))]
    assert nn.GRUCell(3, 4).weight_hh.shape == (12, 4)
    assert repr(lstm) == "LSTM(3, 5, num_layers=2, bidirectional=True)"
    assert len(lstm.all_weights) == 4


# ---- cells against numpy, with gradients ---------------------------------------------------------
def test_lstm_cell_against_numpy_and_gradients():
    cell = nn.LSTMCell(3, 4).double()
    rng = np.random.default_rng(0)
    x, h, c = rng.standard_normal((2, 3)), rng.standard_normal((2, 4)), rng.standard_normal((2, 4))
    ho, co = cell(hf.tensor(x), (hf.tensor(h), hf.tensor(c)))
    rh, rc = np_lstm_cell(x, h, c, *(npy(p) for p in cell.parameters()))
    np.testing.assert_allclose(npy(ho), rh, rtol=1e-12)
    np.testing.assert_allclose(npy(co), rc, rtol=1e-12)
    h0, c0 = cell(hf.tensor(x))
    rh, rc = np_lstm_cell(x, 0 * h, 0 * c, *(npy(p) for p in cell.parameters()))
    np.testing.assert_allclose(npy(h0), rh, rtol=1e-12)
    hu, cu = cell(hf.tensor(x[0]), (hf.tensor(h[0]), hf.tensor(c[0])))  # unbatched
    assert hu.shape == (4,) and cu.shape == (4,)

    xs, hs, cs = (hf.tensor(a, requires_grad=True) for a in (x, h, c))
    check_grads(lambda: hf.cat(list(cell(xs, (hs, cs))), 1), [xs, hs, cs, *cell.parameters()])


def test_gru_and_rnn_cells_against_numpy_and_gradients():
    cell = nn.GRUCell(3, 4).double()
    rng = np.random.default_rng(1)
    x, h = rng.standard_normal((5, 3)), rng.standard_normal((5, 4))
    out = cell(hf.tensor(x), hf.tensor(h))
    np.testing.assert_allclose(npy(out), np_gru_cell(x, h, *(npy(p) for p in cell.parameters())),
                               rtol=1e-12)
    assert cell(hf.tensor(x[0])).shape == (4,)
    xs, hs = hf.tensor(x, requires_grad=True), hf.tensor(h, requires_grad=True)
    check_grads(lambda: cell(xs, hs), [xs, hs, *cell.parameters()])

    rnn = nn.RNNCell(3, 4).double()
    np.testing.assert_allclose(npy(rnn(hf.tensor(x), hf.tensor(h))),
                               np_rnn_cell(x, h, *(npy(p) for p in rnn.parameters())), rtol=1e-12)
    relu = nn.RNNCell(3, 4, nonlinearity="relu").double()
    assert float(relu(hf.tensor(x)).min()) >= 0


# ---- sequence layers ----------------------------------------------------------------------------
@pytest.mark.parametrize("cls,kwargs", [
    (nn.LSTM, {"num_layers": 2, "bidirectional": True}),
    (nn.LSTM, {"batch_first": True}),
    (nn.GRU, {"num_layers": 2, "bidirectional": True, "batch_first": True}),
    (nn.GRU, {}),
    (nn.RNN, {"num_layers": 2}),
])
def test_sequence_layers_against_numpy(cls, kwargs):
    module = cls(3, 4, **kwargs).double()
    rng = np.random.default_rng(2)
    dirs = 2 if module.bidirectional else 1
    x = rng.standard_normal((20, 2, 3))  # 20 steps: exercises the blocked time slicing
    h0 = rng.standard_normal((module.num_layers * dirs, 2, 4))
    c0 = rng.standard_normal(h0.shape)
    ref_out, ref_h, ref_c = np_sequence(module, x, h0, c0)
    xin = x.transpose(1, 0, 2) if module.batch_first else x
    state = (hf.tensor(h0), hf.tensor(c0)) if cls is nn.LSTM else hf.tensor(h0)
    out, hn = module(hf.tensor(xin), state)
    if cls is nn.LSTM:
        hn, cn = hn
        np.testing.assert_allclose(npy(cn), ref_c, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(npy(out), ref_out.transpose(1, 0, 2) if module.batch_first
                               else ref_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(npy(hn), ref_h, rtol=1e-10, atol=1e-12)
    # zero initial state by default; unbatched input
    out0 = module(hf.tensor(xin))[0]
    np.testing.assert_allclose(npy(out0), (lambda o: o.transpose(1, 0, 2) if module.batch_first
                                           else o)(np_sequence(module, x)[0]), rtol=1e-10,
                               atol=1e-12)
    single = module(hf.tensor(x[:, 0]))[0]
    np.testing.assert_allclose(npy(single), np_sequence(module, x[:, :1])[0][:, 0], rtol=1e-10,
                               atol=1e-12)


def test_lstm_output_shapes():
    lstm = nn.LSTM(8, 16, num_layers=3, batch_first=True, bidirectional=True)
    out, (h, c) = lstm(hf.randn(4, 7, 8))
    assert out.shape == (4, 7, 32) and h.shape == (6, 4, 16) and c.shape == (6, 4, 16)
    out, (h, c) = lstm(hf.randn(7, 8))
    assert out.shape == (7, 32) and h.shape == (6, 16)
    out, h = nn.GRU(8, 16)(hf.randn(7, 4, 8))
    assert out.shape == (7, 4, 16) and h.shape == (1, 4, 16)


def test_sequence_gradients_through_time():
    gru = nn.GRU(2, 3, bidirectional=True).double()
    x = hf.randn(18, 2, 2, dtype=hf.float64, requires_grad=True)  # > 16 steps: blocked slicing
    h0 = hf.randn(2, 2, 3, dtype=hf.float64, requires_grad=True)
    check_grads(lambda: gru(x, h0)[0], [x, h0, *gru.parameters()])
    lstm = nn.LSTM(2, 3, num_layers=2).double()
    x = hf.randn(5, 2, 2, dtype=hf.float64, requires_grad=True)
    check_grads(lambda: hf.cat([lstm(x)[0], lstm(x)[1][1]], 0), [x, *lstm.parameters()])


def test_dropout_between_layers_only_in_training():
    lstm = nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = hf.randn(5, 2, 3)
    lstm.eval()
    a, b = npy(lstm(x)[0]), npy(lstm(x)[0])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a, np_sequence(lstm, npy(x).astype(np.float64))[0], rtol=1e-5,
                               atol=1e-6)
    lstm.train()
    hf.manual_seed(0)
    c = npy(lstm(x)[0])
    assert not np.allclose(a, c)
    with pytest.warns(UserWarning, match="num_layers=1"):
        nn.GRU(3, 4, dropout=0.2)


def test_errors_name_the_layer_and_shapes():
    lstm = nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(ValueError, match=r"LSTM.*input_size=3.*\(5, 2, 6\)"):
        lstm(hf.ones(5, 2, 6))
    with pytest.raises(ValueError, match=r"LSTM.*h_0.*\(2, 2, 4\).*\(1, 2, 4\)"):
        lstm(hf.ones(5, 2, 3), (hf.zeros(1, 2, 4), hf.zeros(2, 2, 4)))
    with pytest.raises(ValueError, match="LSTM"):
        lstm(hf.ones(5, 2, 3), hf.zeros(2, 2, 4))
    with pytest.raises(TypeError, match=r"LSTM.*float64.*float32"):
        lstm(hf.ones(5, 2, 3, dtype=hf.float64))
    with pytest.raises(ValueError, match=r"GRU.*dims"):
        nn.GRU(3, 4)(hf.ones(2, 5, 2, 3))
    with pytest.raises(ValueError, match=r"GRUCell.*h_0.*\(2, 4\).*\(3, 4\)"):
        nn.GRUCell(3, 4)(hf.ones(2, 3), hf.zeros(3, 4))
    with pytest.raises(ValueError, match=r"LSTMCell.*input_size=3"):
        nn.LSTMCell(3, 4)(hf.ones(2, 5))
    with pytest.raises(ValueError, match=r"LSTM.*proj_size has to be smaller than hidden_size"
                                         r".*proj_size=4 and hidden_size=4"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match=r"LSTM.*proj_size should be a positive integer.*-1"):
        nn.LSTM(3, 4, proj_size=-1)
    with pytest.raises(TypeError, match=r"LSTM.*proj_size should be of type int, got float"):
        nn.LSTM(3, 4, proj_size=2.0)
    with pytest.raises(ValueError, match=r"proj_size argument is only supported for LSTM"):
        RNNBase("GRU", 3, 4, proj_size=2)
    with pytest.raises(ValueError, match=r"LSTM.*h_0.*\(1, 2, 2\).*\(1, 2, 4\)"):
        nn.LSTM(3, 4, proj_size=2)(hf.ones(5, 2, 3), (hf.zeros(1, 2, 4), hf.zeros(1, 2, 4)))
    with pytest.raises(ValueError, match=r"LSTM.*c_0.*\(1, 2, 4\).*\(1, 2, 2\)"):
        nn.LSTM(3, 4, proj_size=2)(hf.ones(5, 2, 3), (hf.zeros(1, 2, 2), hf.zeros(1, 2, 2)))


# ---- PyTorch as an extra oracle ----------------------------------------------------------------
def _load_from_torch(module, tmodule):
    module.load_state_dict({k: v.detach().numpy() for k, v in tmodule.state_dict().items()})


def test_lstm_and_gru_match_torch_forward_and_backward():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    rng = np.random.default_rng(3)
    cases = [(torch.nn.LSTM, nn.LSTM, {"num_layers": 2, "bidirectional": True,
                                       "batch_first": True}),
             (torch.nn.GRU, nn.GRU, {"num_layers": 2, "bidirectional": True}),
             (torch.nn.GRU, nn.GRU, {"batch_first": True})]
    for tcls, cls, kwargs in cases:
        tm, m = tcls(3, 5, **kwargs), cls(3, 5, **kwargs)
        _load_from_torch(m, tm)
        x = rng.standard_normal((2, 19, 3)).astype(np.float32)
        if not kwargs.get("batch_first"):
            x = np.ascontiguousarray(x.transpose(1, 0, 2))
        dirs_layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
        h0 = rng.standard_normal((dirs_layers, 2, 5)).astype(np.float32)
        c0 = rng.standard_normal((dirs_layers, 2, 5)).astype(np.float32)
        lstm = tcls is torch.nn.LSTM
        tstate = (torch.from_numpy(h0), torch.from_numpy(c0)) if lstm else torch.from_numpy(h0)
        state = (hf.tensor(h0), hf.tensor(c0)) if lstm else hf.tensor(h0)
        tx = torch.from_numpy(x).requires_grad_()
        hx = hf.tensor(x, requires_grad=True)
        tout, th = tm(tx, tstate)
        out, h = m(hx, state)
        np.testing.assert_allclose(npy(out), tout.detach().numpy(), atol=1e-5)
        for a, b in zip(h if lstm else [h], th if lstm else [th]):
            np.testing.assert_allclose(npy(a), b.detach().numpy(), atol=1e-5)
        w = rng.standard_normal(out.shape).astype(np.float32)
        (tout * torch.from_numpy(w)).sum().backward()
        (out * hf.tensor(w)).sum().backward()
        np.testing.assert_allclose(hx.grad.numpy(), tx.grad.numpy(), atol=1e-5)
        for (name, p), (tname, tp) in zip(m.named_parameters(), tm.named_parameters()):
            assert name == tname
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), atol=1e-4, rtol=1e-4)


def test_cells_match_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    for tcls, cls in ((torch.nn.LSTMCell, nn.LSTMCell), (torch.nn.GRUCell, nn.GRUCell)):
        tm, m = tcls(4, 6), cls(4, 6)
        _load_from_torch(m, tm)
        tout, out = tm(torch.from_numpy(x)), m(hf.tensor(x))
        for a, b in zip(out if isinstance(out, tuple) else [out],
                        tout if isinstance(tout, tuple) else [tout]):
            np.testing.assert_allclose(npy(a), b.detach().numpy(), atol=1e-5)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
@pytest.mark.parametrize("batch_first", [False, True])
def test_sequence_length_known_only_at_run_time(cls, batch_first):
    """to_static with an InputSpec whose sequence (and batch) dims are None: the recurrence
    becomes one while loop, right for every length, gradients included."""
    module = cls(3, 4, num_layers=2, bidirectional=True, batch_first=batch_first).double()
    dims = [None, None, 3]
    static = hf.jit.to_static(module, input_spec=[hf.jit.InputSpec(dims, "float64"),
                                                  hf.jit.InputSpec([4, None, 4], "float64")])
    rng = np.random.default_rng(5)
    for steps, batch in ((1, 2), (4, 3), (7, 1)):
        x = rng.standard_normal((steps, batch, 3))
        h0 = rng.standard_normal((4, batch, 4))
        c0 = rng.standard_normal(h0.shape)
        ref_out, ref_h, ref_c = np_sequence(module, x, h0, c0)
        xt = hf.tensor(x.transpose(1, 0, 2) if batch_first else x, requires_grad=True)
        h0t = hf.tensor(h0, requires_grad=True)
        state = (h0t, hf.tensor(c0)) if cls is nn.LSTM else h0t
        out, hn = static(xt, state)
        if cls is nn.LSTM:
            hn, cn = hn
            np.testing.assert_allclose(npy(cn), ref_c, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(npy(out), ref_out.transpose(1, 0, 2) if batch_first
                                   else ref_out, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(npy(hn), ref_h, rtol=1e-10, atol=1e-12)
        (out.sum() + (hn * hn).sum()).backward()
        grads = [xt.grad.numpy(), h0t.grad.numpy()] + [p.grad.numpy() for p in
                                                       module.parameters()]
        module.zero_grad()
        xt.grad = h0t.grad = None
        eager_out, eager_hn = module(xt, state)
        eager_hn = eager_hn[0] if cls is nn.LSTM else eager_hn
        (eager_out.sum() + (eager_hn * eager_hn).sum()).backward()
        expected = [xt.grad.numpy(), h0t.grad.numpy()] + [p.grad.numpy() for p in
                                                          module.parameters()]
        module.zero_grad()
        for got, want in zip(grads, expected):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    program = str(static.forward.get_program(hf.zeros(2, 2, 3, dtype=hf.float64),
                                             (hf.zeros(4, 2, 4, dtype=hf.float64),) * 2
                                             if cls is nn.LSTM else
                                             hf.zeros(4, 2, 4, dtype=hf.float64)))
    assert "while" in program


def test_dynamic_length_lstm_saves_and_exports(tmp_path):
    lstm = nn.LSTM(3, 4)
    spec = [hf.jit.InputSpec([None, 2, 3])]
    hf.jit.save(lstm, str(tmp_path / "lstm"), input_spec=spec)
    loaded = hf.jit.load(str(tmp_path / "lstm"))
    for steps in (2, 5):
        x = hf.randn(steps, 2, 3)
        out, (h, c) = lstm(x)
        got = loaded(x)
        np.testing.assert_allclose(got[0].numpy(), npy(out), rtol=1e-5, atol=1e-6)
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    hf.onnx.export(lstm, str(tmp_path / "lstm.onnx"), input_spec=spec)
    session = ort.InferenceSession(str(tmp_path / "lstm.onnx"))
    for steps in (3, 6):
        x = hf.randn(steps, 2, 3)
        got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
        np.testing.assert_allclose(got, npy(lstm(x)[0]), rtol=1e-5, atol=1e-6)


# ---- LSTM projections (proj_size > 0) -----------------------------------------------------------
def test_lstm_projection_parameters_follow_pytorch():
    lstm = nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2)
    shapes = {n: p.shape for n, p in lstm.named_parameters()}
    assert list(shapes)[:10] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                 "weight_hr_l0", "weight_ih_l0_reverse", "weight_hh_l0_reverse",
                                 "bias_ih_l0_reverse", "bias_hh_l0_reverse",
                                 "weight_hr_l0_reverse"]
    assert shapes["weight_hh_l0"] == (20, 2) and shapes["weight_hr_l0"] == (2, 5)
    assert shapes["weight_ih_l1"] == (20, 4) and shapes["weight_hr_l1_reverse"] == (2, 5)
    assert len(lstm.all_weights) == 4 and len(lstm.all_weights[0]) == 5
    bound = 1 / math.sqrt(5)
    assert all(np.abs(npy(p)).max() <= bound for p in lstm.parameters())
    no_bias = nn.LSTM(3, 5, bias=False, proj_size=2)
    assert [n for n, _ in no_bias.named_parameters()] == ["weight_ih_l0", "weight_hh_l0",
                                                          "weight_hr_l0"]
    assert repr(lstm) == "LSTM(3, 5, proj_size=2, num_layers=2, bidirectional=True)"
    torch = pytest.importorskip("torch")
    tl = torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2)
    assert [(n, tuple(p.shape)) for n, p in tl.named_parameters()] == list(shapes.items())
    assert repr(tl) == repr(lstm)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_projection_against_numpy_and_gradients(bidirectional):
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=bidirectional, proj_size=2).double()
    dirs = 2 if bidirectional else 1
    rng = np.random.default_rng(21)
    x = rng.standard_normal((5, 2, 3))
    h0, c0 = rng.standard_normal((2 * dirs, 2, 2)), rng.standard_normal((2 * dirs, 2, 4))
    for state in (None, (h0, c0)):
        ref_out, ref_h, ref_c = np_sequence(lstm, x, *(state or ()))
        out, (h, c) = lstm(hf.tensor(x), None if state is None else
                           tuple(hf.tensor(a) for a in state))
        assert out.shape == (5, 2, 2 * dirs) and h.shape == (2 * dirs, 2, 2)
        assert c.shape == (2 * dirs, 2, 4)
        np.testing.assert_allclose(npy(out), ref_out, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(npy(h), ref_h, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(npy(c), ref_c, rtol=1e-10, atol=1e-12)
    xt = hf.tensor(x[:3], requires_grad=True)
    h0t, c0t = hf.tensor(h0, requires_grad=True), hf.tensor(c0, requires_grad=True)

    def loss():
        out, (h, c) = lstm(xt, (h0t, c0t))
        return (out * out).sum() + (h * c[..., :2]).sum() + c.sum()
    check_grads(loss, [xt, h0t, c0t, *lstm.parameters()])
    # unbatched input: the same as a batch of one
    out1, (h1, c1) = lstm(hf.tensor(x[:, 0]))
    ref_out, ref_h, ref_c = np_sequence(lstm, x[:, :1])
    np.testing.assert_allclose(npy(out1), ref_out[:, 0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(npy(h1), ref_h[:, 0], rtol=1e-10, atol=1e-12)


def test_lstm_projection_matches_torch_forward_and_backward():
    torch = pytest.importorskip("torch")
    torch.manual_seed(5)
    rng = np.random.default_rng(22)
    for kwargs in ({"num_layers": 2, "bidirectional": True, "batch_first": True},
                   {"num_layers": 3, "bias": False}, {}):
        tm = torch.nn.LSTM(3, 6, proj_size=4, **kwargs).double()
        m = nn.LSTM(3, 6, proj_size=4, **kwargs).double()
        _load_from_torch(m, tm)
        dl = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
        x = rng.standard_normal((2, 7, 3) if kwargs.get("batch_first") else (7, 2, 3))
        h0, c0 = rng.standard_normal((dl, 2, 4)), rng.standard_normal((dl, 2, 6))
        for given in (False, True):
            tx = torch.tensor(x, requires_grad=True)
            th0 = torch.tensor(h0, requires_grad=True)
            xt, h0t = hf.tensor(x, requires_grad=True), hf.tensor(h0, requires_grad=True)
            tout, (th, tc) = tm(tx, (th0, torch.tensor(c0)) if given else None)
            out, (h, c) = m(xt, (h0t, hf.tensor(c0)) if given else None)
            for a, b in ((out, tout), (h, th), (c, tc)):
                assert a.shape == tuple(b.shape)
                np.testing.assert_allclose(npy(a), b.detach().numpy(), rtol=1e-10, atol=1e-12)
            w = rng.standard_normal(out.shape)
            (tout * torch.tensor(w)).sum().add(th.sum() * 2 + tc.sum() * 3).backward()
            ((out * hf.tensor(w)).sum() + h.sum() * 2 + c.sum() * 3).backward()
            np.testing.assert_allclose(npy(xt.grad), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
            if given:
                np.testing.assert_allclose(npy(h0t.grad), th0.grad.numpy(), rtol=1e-9,
                                           atol=1e-12)
            for (name, p), (tname, tp) in zip(m.named_parameters(), tm.named_parameters()):
                assert name == tname
                np.testing.assert_allclose(npy(p.grad), tp.grad.numpy(), rtol=1e-9, atol=1e-12,
                                           err_msg=name)
            m.zero_grad()
            tm.zero_grad()


@pytest.mark.parametrize("dynamic", [False, True])
def test_lstm_projection_static_matches_eager(dynamic):
    """to_static: the unrolled recurrence (lengths known) and the while loop (an InputSpec with
    None dims) both give eager's outputs and gradients."""
    module = nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2).double()
    spec = None
    if dynamic:
        spec = [hf.jit.InputSpec([None, None, 3], "float64"),
                (hf.jit.InputSpec([4, None, 2], "float64"),
                 hf.jit.InputSpec([4, None, 5], "float64"))]
    static = hf.jit.to_static(module, input_spec=spec)
    rng = np.random.default_rng(23)
    for steps, batch in ((4, 3), (2, 2)) if dynamic else ((4, 3),):
        x = rng.standard_normal((steps, batch, 3))
        h0, c0 = rng.standard_normal((4, batch, 2)), rng.standard_normal((4, batch, 5))
        results = []
        for run in (static, module):
            xt, h0t = hf.tensor(x, requires_grad=True), hf.tensor(h0, requires_grad=True)
            out, (h, c) = run(xt, (h0t, hf.tensor(c0)))
            (out.sum() + (h * h).sum() + c.sum()).backward()
            results.append([npy(out), npy(h), npy(c), npy(xt.grad), npy(h0t.grad)]
                           + [npy(p.grad) for p in module.parameters()])
            module.zero_grad()
        ref_out, ref_h, ref_c = np_sequence(module, x, h0, c0)
        np.testing.assert_allclose(results[0][0], ref_out, rtol=1e-10, atol=1e-12)
        for got, want in zip(*results):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    if dynamic:
        program = str(static.forward.get_program(
            hf.zeros(2, 2, 3, dtype=hf.float64),
            (hf.zeros(4, 2, 2, dtype=hf.float64), hf.zeros(4, 2, 5, dtype=hf.float64))))
        assert "while" in program


def test_lstm_projection_saves_and_exports(tmp_path):
    lstm = nn.LSTM(3, 5, num_layers=2, proj_size=2)
    spec = [hf.jit.InputSpec([None, 2, 3])]
    hf.jit.save(lstm, str(tmp_path / "lstm"), input_spec=spec)
    loaded = hf.jit.load(str(tmp_path / "lstm"))
    x = hf.randn(6, 2, 3)
    out, (h, c) = lstm(x)
    got = loaded(x)
    for a, b in zip((got[0], *got[1]), (out, h, c)):
        np.testing.assert_allclose(npy(a), npy(b), rtol=1e-5, atol=1e-6)
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    hf.onnx.export(lstm, str(tmp_path / "lstm.onnx"), input_spec=spec)
    session = ort.InferenceSession(str(tmp_path / "lstm.onnx"))
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    assert [g.shape for g in got] == [(6, 2, 2), (2, 2, 2), (2, 2, 5)]
    for a, b in zip(got, (out, h, c)):
        np.testing.assert_allclose(a, npy(b), rtol=1e-5, atol=1e-6)


def test_state_tuple_input_spec_to_static_save_and_export(tmp_path):
    """An InputSpec per tensor of the (h_0, c_0) tuple argument, batch left dynamic: the
    program works for every batch size (1 included), and jit.save / ONNX export take the nested
    specs (the loaded layer is called like the module)."""
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    spec = [hf.jit.InputSpec([None, None, 3]),
            (hf.jit.InputSpec([4, None, 4]), hf.jit.InputSpec([4, None, 4]))]
    static = hf.jit.to_static(lstm, input_spec=spec)
    hf.jit.save(lstm, str(tmp_path / "lstm"), input_spec=spec)
    loaded = hf.jit.load(str(tmp_path / "lstm"))
    assert [s.name for s in loaded.input_spec] == ["input_0", "input_1_0", "input_1_1"]
    for steps, batch in ((3, 1), (5, 2)):
        x, h0, c0 = hf.randn(steps, batch, 3), hf.randn(4, batch, 4), hf.randn(4, batch, 4)
        out, (h, c) = lstm(x, (h0, c0))
        for got in (static(x, (h0, c0)), loaded(x, (h0, c0))):
            np.testing.assert_allclose(npy(got[0]), npy(out), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(npy(got[1][1]), npy(c), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="argument 1 must be a tuple or list of 2"):
        loaded(x, h0)
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    hf.onnx.export(lstm, str(tmp_path / "lstm.onnx"), input_spec=spec)
    session = ort.InferenceSession(str(tmp_path / "lstm.onnx"))
    got = session.run(None, {i.name: v.numpy() for i, v in zip(session.get_inputs(),
                                                                  (x, h0, c0))})
    np.testing.assert_allclose(got[0], npy(out), rtol=1e-5, atol=1e-6)
