"""nn.TransformerDecoderLayer, TransformerDecoder, TransformerEncoder and Transformer against
PyTorch (masks, key padding, batch_first, norm_first, train with dropout 0 and eval), eagerly
and under to_static."""
import warnings

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn

E, HEADS, FF = 8, 2, 16


def _x(*shape, seed=0):
    """float64 data: float32 rounding through stacked attention layers (and gradients that
    are zero in exact arithmetic, as a key bias's under softmax) would exceed rtol 1e-5."""
    return np.random.default_rng(seed).standard_normal(shape)


def _causal(n):
    return np.triu(np.full((n, n), -np.inf), 1)


def _padding(n, length, seed):
    """(n, length) bool key padding masks: True marks padded positions, never a whole row."""
    mask = np.random.default_rng(seed).random((n, length)) < 0.3
    mask[:, 0] = False
    return mask


def _randomize(torch, module):
    """Random values for every parameter (zero biases and unit norms included)."""
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3 + (1.0 if p.ndim == 1 else 0.0))
    return module


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():  # torch's notes on mixed bool/float masks and nested tensors
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("options, train", [
    ({"dropout": 0.0}, True),
    ({"norm_first": True, "batch_first": True, "activation": "gelu"}, False)])
def test_decoder_layer_matches_torch(matches_torch, options, train):
    torch = pytest.importorskip("torch")
    batch_first = options.get("batch_first", False)
    tgt, memory = (_x(2, 5, E), _x(2, 7, E, seed=1)) if batch_first else \
        (_x(5, 2, E), _x(7, 2, E, seed=1))
    masks = {"tgt_mask": _causal(5), "tgt_key_padding_mask": _padding(2, 5, 2),
             "memory_key_padding_mask": _padding(2, 7, 3)}
    reference = _randomize(torch, torch.nn.TransformerDecoderLayer(E, HEADS, FF, **options))
    matches_torch(lambda: nn.TransformerDecoderLayer(E, HEADS, FF, **options), reference,
                  [tgt, memory], train=train, **masks)


def test_decoder_stack_with_norm_memory_mask_and_causal_hint_matches_torch(matches_torch):
    torch = pytest.importorskip("torch")
    memory_mask = np.zeros((5, 7), bool)
    memory_mask[:, -2:] = True
    masks = {"tgt_mask": _causal(5), "memory_mask": memory_mask, "tgt_is_causal": True}

    def make(lib):
        layer = lib.nn.TransformerDecoderLayer(E, HEADS, FF, dropout=0.0)
        return lib.nn.TransformerDecoder(layer, 2, norm=lib.nn.LayerNorm(E))

    matches_torch(lambda: make(hf), _randomize(torch, make(torch)), [_x(5, 3, E), _x(7, 3, E)],
                  train=True, **masks)


def test_encoder_stack_matches_torch(matches_torch):
    torch = pytest.importorskip("torch")

    def make(lib):
        layer = lib.nn.TransformerEncoderLayer(E, HEADS, FF, dropout=0.0, batch_first=True)
        return lib.nn.TransformerEncoder(layer, 2, norm=lib.nn.LayerNorm(E))

    matches_torch(lambda: make(hf), _randomize(torch, make(torch)), [_x(3, 6, E)], train=True,
                  mask=_causal(6), src_key_padding_mask=_padding(3, 6, 4),
                  is_causal=True)


@pytest.mark.parametrize("options, train", [
    ({"dropout": 0.0, "batch_first": True}, True),
    ({"norm_first": True}, False)])
def test_transformer_matches_torch(matches_torch, options, train):
    torch = pytest.importorskip("torch")
    batch_first = options.get("batch_first", False)
    src, tgt = (_x(2, 6, E), _x(2, 4, E, seed=1)) if batch_first else \
        (_x(6, 2, E), _x(4, 2, E, seed=1))
    masks = {"tgt_mask": _causal(4),
             "src_key_padding_mask": _padding(2, 6, 5),
             "memory_key_padding_mask": _padding(2, 6, 5)}

    def make(lib):
        return lib.nn.Transformer(E, HEADS, 1, 2, FF, **options)

    matches_torch(lambda: make(hf), _randomize(torch, make(torch)), [src, tgt], train=train,
                  **masks)


def test_structure_defaults_and_mask_helper():
    torch = pytest.importorskip("torch")
    ours, theirs = nn.Transformer(E, HEADS, 2, 1, FF), torch.nn.Transformer(E, HEADS, 2, 1, FF)
    assert [(n, p.shape) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    # PyTorch's xavier uniform over every matrix: bound sqrt(6 / (fan_in + fan_out)) = 0.5 here
    # (Linear's own init would stay within 1 / sqrt(fan_in) = 0.35)
    w = np.abs(ours.decoder.layers[0].linear1.weight.detach().numpy())
    assert 0.4 < w.max() <= np.sqrt(6 / (E + FF))
    layer = nn.TransformerDecoderLayer(E, HEADS)
    assert layer.linear1.weight.shape == (2048, E) and layer.dropout.p == 0.1
    assert not layer.norm_first and not layer.self_attn.batch_first
    for size in (1, 4):
        mask = nn.Transformer.generate_square_subsequent_mask(size)
        assert mask.dtype == hf.float32
        np.testing.assert_array_equal(mask.numpy(),
                                      torch.nn.Transformer.generate_square_subsequent_mask(size))
    assert nn.Transformer.generate_square_subsequent_mask(3, dtype=hf.float64).dtype == \
        hf.float64


def test_transformer_trains_under_to_static_with_dropout_as_eager():
    def make():
        hf.manual_seed(3)
        return nn.Transformer(E, HEADS, 1, 1, FF, dropout=0.2, batch_first=True)

    eager, static = make(), hf.jit.to_static(make())
    opts = [hf.optim.SGD(m.parameters(), lr=0.05) for m in (eager, static)]
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    for step in range(2):
        src = hf.tensor(_x(2, 5, E, seed=step).astype(np.float32))
        tgt = hf.tensor(_x(2, 4, E, seed=9 + step).astype(np.float32))
        for model, opt in zip((eager, static), opts):
            hf.manual_seed(100 + step)
            loss = (model(src, tgt, tgt_mask=mask) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    for (name, a), (_, b) in zip(eager.state_dict().items(), static.state_dict().items()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_errors_name_the_module():
    model = nn.Transformer(E, HEADS, 1, 1, FF)
    with pytest.raises(ValueError, match=r"Transformer: the batch sizes of src and tgt"):
        model(hf.randn(5, 2, E), hf.randn(4, 3, E))
    with pytest.raises(ValueError, match=r"Transformer: the feature sizes .* d_model=8"):
        model(hf.randn(5, 2, E), hf.randn(4, 2, 4))
    with pytest.raises(ValueError, match=r"TransformerDecoderLayer: activation should be"):
        nn.TransformerDecoderLayer(E, HEADS, activation="tanh")
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        nn.TransformerDecoderLayer(E, HEADS)(hf.randn(4, 2, E), hf.randn(5, 2, E),
                                             tgt_is_causal=True)
