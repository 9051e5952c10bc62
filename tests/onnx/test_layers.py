"""Every layer of API.md with inference semantics, exported once with a symbolic batch dim, run in
ONNX Runtime at two batch sizes and compared with the eager layer in eval mode.

The recurrent layers make their zero initial state with ``hf.zeros(batch, ...)``, which to_static
can only trace for a known batch size: they are exported with a fixed batch (FIXED_BATCH), and
once more with the initial state passed in, which keeps the batch dim symbolic."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.jit import InputSpec

from .conftest import assert_matches_eager


class _ListNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(5, 6), nn.Linear(6, 3)])
        self.acts = nn.ModuleDict({"a": nn.Tanh(), "b": nn.Sigmoid()})

    def forward(self, x):
        return self.acts["b"](self.layers[1](self.acts["a"](self.layers[0](x))))


def _bn(cls, n):
    layer = cls(n)
    layer.running_mean.copy_(hf.tensor(np.linspace(-1, 1, n).astype(np.float32)))
    layer.running_var.copy_(hf.tensor(np.linspace(0.5, 2, n).astype(np.float32)))
    return layer


def _float(*shape):
    return lambda batch, rng: rng.standard_normal((batch,) + shape).astype(np.float32)


def _tokens(length, vocab):
    return lambda batch, rng: rng.integers(0, vocab, (batch, length)).astype(np.int64)


# id -> (layer factory, [(InputSpec, example maker)])
LAYERS = {
    "Linear": (lambda: nn.Linear(5, 3), [([None, 5], _float(5))]),
    "Linear3d": (lambda: nn.Linear(5, 3), [([None, 4, 5], _float(4, 5))]),
    "Conv2d": (lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1), [([None, 3, 9, 9],
                                                                  _float(3, 9, 9))]),
    "Conv2dGroups": (lambda: nn.Conv2d(4, 4, 3, padding=(1, 2), dilation=2, groups=2),
                     [([None, 4, 8, 8], _float(4, 8, 8))]),
    "ConvTranspose2d": (lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1,
                                                   output_padding=1, groups=2),
                        [([None, 4, 5, 6], _float(4, 5, 6))]),
    "ConvTranspose2dDilationPastReach": (lambda: nn.ConvTranspose2d(3, 2, (2, 3),
                                                                    output_padding=(1, 2),
                                                                    dilation=3),
                                         [([None, 3, 4, 5], _float(3, 4, 5))]),
    "UpsampleNearest": (lambda: nn.Upsample(size=(7, 5)), [([None, 2, 3, 4], _float(2, 3, 4))]),
    "UpsampleBilinear": (lambda: nn.Upsample(scale_factor=1.5, mode="bilinear"),
                         [([None, 2, 4, 6], _float(2, 4, 6))]),
    "MaxPool2d": (lambda: nn.MaxPool2d(3, stride=2, padding=1), [([None, 2, 9, 9],
                                                                  _float(2, 9, 9))]),
    "MaxPool2dCeil": (lambda: nn.MaxPool2d(2, ceil_mode=True), [([None, 2, 7, 7],
                                                                 _float(2, 7, 7))]),
    "AvgPool2d": (lambda: nn.AvgPool2d(3, stride=2, padding=1), [([None, 2, 9, 9],
                                                                  _float(2, 9, 9))]),
    "AvgPool2dCeilNoPadCount": (lambda: nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True,
                                                     count_include_pad=False),
                                [([None, 2, 8, 8], _float(2, 8, 8))]),
    "AdaptiveAvgPool2d": (lambda: nn.AdaptiveAvgPool2d((3, 2)), [([None, 2, 7, 5],
                                                                  _float(2, 7, 5))]),
    "AdaptiveAvgPool2dGlobal": (lambda: nn.AdaptiveAvgPool2d(1), [([None, 2, 5, 5],
                                                                   _float(2, 5, 5))]),
    "BatchNorm1d": (lambda: _bn(nn.BatchNorm1d, 6), [([None, 6], _float(6))]),
    "BatchNorm2d": (lambda: _bn(nn.BatchNorm2d, 3), [([None, 3, 4, 4], _float(3, 4, 4))]),
    "LayerNorm": (lambda: nn.LayerNorm(6), [([None, 2, 6], _float(2, 6))]),
    "Embedding": (lambda: nn.Embedding(10, 4), [([None, 5], _tokens(5, 10))]),
    "Dropout": (lambda: nn.Dropout(0.5), [([None, 6], _float(6))]),
    "ReLU": (lambda: nn.ReLU(), [([None, 6], _float(6))]),
    "GELU": (lambda: nn.GELU(), [([None, 6], _float(6))]),
    "GELUTanh": (lambda: nn.GELU(approximate="tanh"), [([None, 6], _float(6))]),
    "Tanh": (lambda: nn.Tanh(), [([None, 6], _float(6))]),
    "Sigmoid": (lambda: nn.Sigmoid(), [([None, 6], _float(6))]),
    "Softmax": (lambda: nn.Softmax(dim=1), [([None, 6], _float(6))]),
    "Flatten": (lambda: nn.Flatten(), [([None, 2, 3, 4], _float(2, 3, 4))]),
    "Identity": (lambda: nn.Identity(), [([None, 6], _float(6))]),
    "Sequential": (lambda: nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2)),
                   [([None, 5], _float(5))]),
    "ModuleListDict": (_ListNet, [([None, 5], _float(5))]),
    "LSTM": (lambda: nn.LSTM(4, 5, num_layers=2, batch_first=True),
             [([None, 3, 4], _float(3, 4))]),
    "GRU": (lambda: nn.GRU(4, 5, batch_first=True, bidirectional=True),
            [([None, 3, 4], _float(3, 4))]),
    "LSTMCell": (lambda: nn.LSTMCell(4, 5), [([None, 4], _float(4))]),
    "GRUCell": (lambda: nn.GRUCell(4, 5), [([None, 4], _float(4))]),
    "MultiheadAttention": (lambda: nn.MultiheadAttention(8, 2, batch_first=True),
                           [([None, 3, 8], _float(3, 8))] * 3),
    "TransformerEncoderLayer": (lambda: nn.TransformerEncoderLayer(8, 2, dim_feedforward=16,
                                                                   batch_first=True),
                                [([None, 3, 8], _float(3, 8))]),
}


FIXED_BATCH: set = set()   # every layer keeps the batch symbolic (RNNs without a state too)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_matches_eager_at_two_batch_sizes(name, tmp_path):
    factory, inputs = LAYERS[name]
    hf.manual_seed(0)
    layer = factory()
    dtypes = ["int64" if "Embedding" in name else "float32"] * len(inputs)
    fixed = name in FIXED_BATCH
    specs = [InputSpec([2 if fixed else None] + shape[1:], dt)
             for (shape, _), dt in zip(inputs, dtypes)]
    path = tmp_path / f"{name}.onnx"
    model = hf.onnx.export(layer, path, input_spec=specs)
    batch_dim = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert batch_dim.dim_value == 2 if fixed else batch_dim.dim_param == "input_0_dim0"
    rng = np.random.default_rng(1)
    for batch in ((2,) if fixed else (1, 4)):
        arrays = [make(batch, rng) for _, make in inputs]
        assert_matches_eager(path, layer, *arrays)


class _LSTMWithState(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 5, batch_first=True)

    def forward(self, x, h0, c0):
        return self.lstm(x, (h0, c0))


class _GRUCellWithState(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(4, 5)

    def forward(self, x, h):
        return self.cell(x, h)


@pytest.mark.parametrize("factory", [_LSTMWithState, _GRUCellWithState])
def test_recurrent_layers_with_given_state_keep_the_batch_symbolic(factory, tmp_path):
    hf.manual_seed(0)
    layer = factory()
    lstm = factory is _LSTMWithState
    specs = ([InputSpec([None, 3, 4]), InputSpec([1, None, 5]), InputSpec([1, None, 5])]
             if lstm else [InputSpec([None, 4]), InputSpec([None, 5])])
    path = tmp_path / "rnn.onnx"
    hf.onnx.export(layer, path, input_spec=specs)
    rng = np.random.default_rng(2)
    for batch in (1, 3):
        shapes = ([(batch, 3, 4), (1, batch, 5), (1, batch, 5)] if lstm
                  else [(batch, 4), (batch, 5)])
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        assert_matches_eager(path, layer, *arrays)


F = nn.functional


def functional_and_losses(x, t, y):
    return (F.cross_entropy(x, t), F.cross_entropy(x, t, label_smoothing=0.1, reduction="sum"),
            F.nll_loss(F.log_softmax(x, 1), t), F.mse_loss(x, y), F.l1_loss(x, y),
            F.binary_cross_entropy(x.sigmoid(), (y > 0).float()),
            F.binary_cross_entropy_with_logits(x, (y > 0).float()), F.silu(x), F.gelu(x),
            F.dropout(x, 0.5, training=False), F.layer_norm(x, (5,)), F.relu(x), F.tanh(x),
            F.sigmoid(x), F.softmax(x, dim=1), F.log_softmax(x, dim=0),
            F.pad(x, (1, 1), value=2.0), F.one_hot(t, 5))


def test_functional_api_and_losses_match_eager(tmp_path):
    path = tmp_path / "functional.onnx"
    hf.onnx.export(functional_and_losses, path, input_spec=[InputSpec([None, 5]),
                                                            InputSpec([None], "int64"),
                                                            InputSpec([None, 5])])
    rng = np.random.default_rng(0)
    for batch in (1, 6):
        arrays = [rng.standard_normal((batch, 5)).astype(np.float32),
                  rng.integers(0, 5, batch).astype(np.int64),
                  rng.standard_normal((batch, 5)).astype(np.float32)]
        assert_matches_eager(path, functional_and_losses, *arrays)


class _MaskedAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = nn.MultiheadAttention(8, 2, batch_first=True)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16,
                                                                        batch_first=True), 2)

    def forward(self, x, mask):
        return self.encoder(self.attention(x, x, x, key_padding_mask=mask)[0])


def test_attention_with_padding_mask_and_encoder_stack(tmp_path):
    hf.manual_seed(0)
    net = _MaskedAttention()
    path = tmp_path / "attention.onnx"
    hf.onnx.export(net, path, input_spec=[InputSpec([None, 3, 8]), InputSpec([None, 3], "bool")])
    rng = np.random.default_rng(0)
    mask = np.array([[False, False, True], [False, False, False]])
    for batch in (1, 2):
        assert_matches_eager(path, net, rng.standard_normal((batch, 3, 8)).astype(np.float32),
                             mask[:batch])


class _SizesAtRunTime(nn.Module):
    """Sizes read from symbolic batch dims: ``y.view(x.size(0), -1)`` (y's rows are not x's:
    a run-time Reshape), ``hf.zeros(x.shape[0], 5)`` (an Expand to a run-time shape), and
    ``h.view(batch, -1)`` with ``batch = x.size(0)``, h computed from x (a plain Reshape)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.fc = nn.Linear(2 * 4 * 4, 5)

    def forward(self, x, y):
        batch = x.size(0)
        h = nn.functional.max_pool2d(self.conv(x).relu(), 2)
        return self.fc(h.view(batch, -1)) + hf.zeros(x.shape[0], 5) + \
            y.view(x.size(0), -1).sum(1, keepdim=True)


def test_sizes_read_at_run_time_export_with_symbolic_dims(tmp_path):
    hf.manual_seed(0)
    model = _SizesAtRunTime().eval()
    path = tmp_path / "sizes.onnx"
    hf.onnx.export(model, path, input_spec=[InputSpec([None, 1, 8, 8]), InputSpec([None, 3])])
    rng = np.random.default_rng(3)
    for batch, rows in ((2, 4), (5, 10)):
        assert_matches_eager(path, model, rng.standard_normal((batch, 1, 8, 8)).astype(np.float32),
                             rng.standard_normal((rows, 3)).astype(np.float32))


@pytest.mark.parametrize("batch_first", [True, False])
def test_transformer_layer_with_batch_and_length_unknown(batch_first, tmp_path):
    """A TransformerEncoderLayer (and its MultiheadAttention) exported with both the batch and
    the sequence length symbolic runs at other batches and lengths: its head split and merge
    keep the dims they do not change, whatever a program knows of them."""
    hf.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                       batch_first=batch_first).eval()
    path = tmp_path / "encoder.onnx"
    hf.onnx.export(layer, path, input_spec=[InputSpec([None, None, 8])])
    rng = np.random.default_rng(2)
    for a, b in ((2, 5), (3, 7)):
        assert_matches_eager(path, layer, rng.standard_normal((a, b, 8)).astype(np.float32))
