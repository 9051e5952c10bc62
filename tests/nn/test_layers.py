"""hf.nn layers against numpy references written here; gradients by float64 finite differences;
BatchNorm/Dropout mode switching; PyTorch as an extra oracle when installed."""
from __future__ import annotations

import math

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn

sliding = np.lib.stride_tricks.sliding_window_view
erf = np.vectorize(math.erf)


def npy(t):
    return t.detach().numpy()


def check_grads(fn, tensors, seed=0, eps=1e-6, rtol=1e-6):
    """Autograd vs a central difference along one random direction (float64 leaves)."""
    assert hf.autograd.gradcheck(lambda *_: fn(), tensors, seed=seed, eps=eps, rtol=rtol)


# ---- Linear, Identity, Flatten ----------------------------------------------------------------
def test_linear_forward_shapes_and_errors():
    lin = nn.Linear(5, 3)
    x = np.random.default_rng(0).standard_normal((2, 4, 5)).astype(np.float32)
    ref = x @ npy(lin.weight).T + npy(lin.bias)
    np.testing.assert_allclose(npy(lin(hf.tensor(x))), ref, rtol=1e-5, atol=1e-6)
    nobias = nn.Linear(5, 3, bias=False)
    assert [n for n, _ in nobias.named_parameters()] == ["weight"]
    np.testing.assert_allclose(npy(nobias(hf.tensor(x))), x @ npy(nobias.weight).T, rtol=1e-5,
                               atol=1e-6)
    assert lin.weight.shape == (3, 5) and lin.bias.shape == (3,)
    with pytest.raises(ValueError, match=r"Linear.*in_features=5.*\(2, 4\)"):
        lin(hf.ones(2, 4))
    assert nn.Linear(2, 2, dtype=hf.float64).weight.dtype == hf.float64


def test_linear_gradients():
    lin = nn.Linear(4, 3).double()
    x = hf.randn(5, 4, dtype=hf.float64, requires_grad=True)
    check_grads(lambda: lin(x), [x, lin.weight, lin.bias])


def test_identity_flatten_unflatten():
    x = hf.randn(2, 3, 4, 5)
    assert nn.Identity(7, foo=1)(x) is x
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 2)(x).shape == (24, 5)
    assert nn.Unflatten(1, (3, 1))(hf.ones(2, 3)).shape == (2, 3, 1)


# ---- activations, dropout ---------------------------------------------------------------------
def test_activations_against_numpy():
    x = np.linspace(-4, 4, 24, dtype=np.float32).reshape(2, 3, 4)
    t = hf.tensor(x)
    sig = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(npy(nn.ReLU()(t)), np.maximum(x, 0))
    np.testing.assert_allclose(npy(nn.Tanh()(t)), np.tanh(x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(npy(nn.Sigmoid()(t)), sig, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(npy(nn.SiLU()(t)), x * sig, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(npy(nn.GELU()(t)), 0.5 * x * (1 + erf(x / math.sqrt(2))),
                               rtol=1e-5, atol=1e-6)
    tanh_gelu = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(npy(nn.GELU("tanh")(t)), tanh_gelu, rtol=1e-5, atol=1e-6)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(npy(nn.Softmax(dim=1)(t)), e / e.sum(1, keepdims=True),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(npy(nn.LogSoftmax(dim=1)(t)), np.log(e / e.sum(1, keepdims=True)),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(npy(nn.LeakyReLU(0.2)(t)), np.where(x > 0, x, 0.2 * x), rtol=1e-6)
    np.testing.assert_allclose(npy(nn.ELU(0.5)(t)), np.where(x > 0, x, 0.5 * np.expm1(x)),
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(npy(nn.Softplus(beta=2.0, threshold=3.0)(t)),
                               np.where(2 * x > 3, x, np.log1p(np.exp(2 * x)) / 2), rtol=1e-6)
    np.testing.assert_allclose(npy(nn.Hardtanh(-2.0, 1.5)(t)), np.clip(x, -2.0, 1.5))
    np.testing.assert_allclose(npy(nn.ReLU6()(t * 2)), np.clip(x * 2, 0, 6))
    bounds = hf.tensor([0.0, 3.0, 6.0, 7.0], requires_grad=True)
    nn.ReLU6(inplace=True)(bounds * 1.0).sum().backward()  # no gradient at the bounds either
    np.testing.assert_allclose(npy(bounds.grad), [0.0, 1.0, 0.0, 0.0])
    huge = hf.tensor([-1000.0, 1000.0], requires_grad=True)  # no overflow in either branch
    (nn.ELU()(huge).sum() + nn.Softplus()(huge).sum()).backward()
    np.testing.assert_allclose(npy(huge.grad), [0.0, 2.0])
    with pytest.raises(ValueError, match=r"Hardtanh: min_val \(2\) cannot be greater"):
        nn.Hardtanh(2, 1)
    leaf = hf.tensor([-2.0, 0.0, 3.0], requires_grad=True)
    y = leaf * 1.0
    out = nn.LeakyReLU(0.1, inplace=True)(y)  # in place on a non-leaf, as PyTorch
    assert out is y and np.allclose(npy(y), [-0.2, 0.0, 3.0])
    out.sum().backward()
    np.testing.assert_allclose(npy(leaf.grad), [0.1, 0.1, 1.0])  # the slope at 0, as PyTorch
    with pytest.raises(ValueError):
        nn.GELU("fast")


def test_dropout_train_and_eval():
    drop = nn.Dropout(0.25)
    x = hf.ones(200, 100)
    hf.manual_seed(0)
    y = npy(drop(x))
    kept = y != 0
    assert 0.72 < kept.mean() < 0.78
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    drop.eval()
    assert np.array_equal(npy(drop(x)), npy(x))
    drop.train()
    assert (npy(drop(x)) == 0).any()
    assert np.array_equal(npy(nn.Dropout(0.0)(x)), npy(x))
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


def test_dropout2d_zeroes_whole_channels():
    drop = nn.Dropout2d(0.3)
    leaf = hf.ones(64, 32, 3, 3, requires_grad=True)
    hf.manual_seed(0)
    y = drop(leaf)
    y.sum().backward()
    maps = npy(y).reshape(64, 32, 9)
    assert np.all(maps == maps[:, :, :1])  # one draw per (n, c) feature map
    assert 0.25 < (maps[:, :, 0] == 0).mean() < 0.35
    np.testing.assert_allclose(maps[maps != 0], 1 / 0.7, rtol=1e-6)
    np.testing.assert_allclose(npy(leaf.grad), npy(y))
    converted = hf.jit.to_static(nn.Dropout2d(0.5), input_spec=[hf.jit.InputSpec([None, 8, 2, 2])])
    first, second = npy(converted(hf.ones(6, 8, 2, 2))), npy(converted(hf.ones(6, 8, 2, 2)))
    assert not np.array_equal(first, second)  # a new mask on each call
    assert np.all(first.reshape(6, 8, 4) == first.reshape(6, 8, 4)[:, :, :1])
    assert np.array_equal(npy(nn.Dropout2d(0.5).eval()(leaf)), npy(leaf))
    with pytest.warns(UserWarning, match=r"dropout2d: received a 3-D input"):
        assert nn.functional.dropout2d(hf.ones(2, 3, 4)).shape == (2, 3, 4)
    with pytest.raises(ValueError, match=r"dropout2d: expected a 4-D .*\(2, 3\)"):
        nn.functional.dropout2d(hf.ones(2, 3))
    with pytest.raises(ValueError, match="Dropout2d: probability"):
        nn.Dropout2d(1.5)


# ---- convolution and pooling ------------------------------------------------------------------
def np_conv2d(x, w, b, stride, padding, dilation, groups):
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    kh, kw = w.shape[2:]
    win = sliding(xp, (dh * (kh - 1) + 1, dw * (kw - 1) + 1), axis=(2, 3))
    win = win[:, :, ::sh, ::sw, ::dh, ::dw]  # (N, C, OH, OW, kh, kw)
    cin, cout = x.shape[1] // groups, w.shape[0] // groups
    outs = [np.einsum("nchwij,ocij->nohw", win[:, g * cin:(g + 1) * cin],
                      w[g * cout:(g + 1) * cout]) for g in range(groups)]
    out = np.concatenate(outs, 1)
    return out if b is None else out + b[None, :, None, None]


@pytest.mark.parametrize("kwargs", [
    {}, {"stride": 2, "padding": 1}, {"padding": (2, 1), "dilation": 2},
    {"groups": 2, "stride": (1, 2)}, {"bias": False},
])
def test_conv2d_against_numpy(kwargs):
    conv = nn.Conv2d(4, 6, 3, **kwargs)
    assert conv.weight.shape == (6, 4 // conv.groups, 3, 3)
    x = np.random.default_rng(1).standard_normal((2, 4, 9, 8)).astype(np.float32)
    ref = np_conv2d(x, npy(conv.weight), None if conv.bias is None else npy(conv.bias),
                    conv.stride, conv.padding, conv.dilation, conv.groups)
    np.testing.assert_allclose(npy(conv(hf.tensor(x))), ref, rtol=1e-4, atol=1e-5)
    unbatched = conv(hf.tensor(x[0]))
    np.testing.assert_allclose(npy(unbatched), ref[0], rtol=1e-4, atol=1e-5)


def test_conv1d_module():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 11)).astype(np.float32)
    for kwargs in [dict(kernel_size=3), dict(kernel_size=4, padding="same", dilation=2),
                   dict(kernel_size=3, stride=2, padding=2, padding_mode="reflect"),
                   dict(kernel_size=3, padding=1, padding_mode="circular", bias=False),
                   dict(kernel_size=3, groups=3, padding="valid")]:
        ours, theirs = nn.Conv1d(3, 6, **kwargs), torch.nn.Conv1d(3, 6, **kwargs)
        assert ours.weight.shape == tuple(theirs.weight.shape)
        ours.load_state_dict({k: hf.tensor(v.detach().numpy()) for k, v in
                              theirs.state_dict().items()})
        for fn in (ours, hf.jit.to_static(ours)):
            np.testing.assert_allclose(npy(fn(hf.tensor(x))),
                                       theirs(torch.tensor(x)).detach().numpy(),
                                       rtol=1e-5, atol=1e-5)
    assert nn.Conv1d(3, 4, 3, padding=1)(hf.ones(3, 8)).shape == (4, 8)  # unbatched
    with pytest.raises(ValueError, match=r"Conv1d: expected input with 3 channels.*\(2, 5, 7\)"):
        nn.Conv1d(3, 4, 3)(hf.ones(2, 5, 7))
    with pytest.raises(ValueError, match="Conv1d: padding='same' is not supported for strided"):
        nn.Conv1d(3, 4, 3, stride=2, padding="same")


def test_pool1d_modules():
    x = hf.tensor([[[1.0, 5.0, 2.0, 3.0, 9.0, 0.0]]])
    out, idx = nn.MaxPool1d(2, return_indices=True)(x)
    assert out.tolist() == [[[5.0, 3.0, 9.0]]] and idx.tolist() == [[[1, 3, 4]]]
    np.testing.assert_allclose(npy(nn.AvgPool1d(3)(x)), [[[8 / 3, 4.0]]], rtol=1e-6)
    np.testing.assert_allclose(npy(nn.AdaptiveAvgPool1d(2)(x[0])), [[8 / 3, 4.0]],  # (C, L)
                               rtol=1e-6)
    converted = hf.jit.to_static(nn.Sequential(nn.Conv1d(1, 2, 3, padding=1), nn.MaxPool1d(2),
                                               nn.AdaptiveAvgPool1d(1)))
    assert converted(x).shape == (1, 2, 1)
    with pytest.raises(ValueError, match=r"max_pool1d: expected a 2-D .*\(1, 1, 1, 6\)"):
        nn.MaxPool1d(2)(x[None])


def test_conv2d_same_padding_modes_and_errors():
    x = np.random.default_rng(2).standard_normal((1, 2, 7, 6)).astype(np.float32)
    conv = nn.Conv2d(2, 3, (4, 3), padding="same")
    out = npy(conv(hf.tensor(x)))
    assert out.shape == (1, 3, 7, 6)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 2), (1, 1)))  # total pad 3 rows: 1 before, 2 after
    np.testing.assert_allclose(out, np_conv2d(xp, npy(conv.weight), npy(conv.bias), (1, 1),
                                              (0, 0), (1, 1), 1), rtol=1e-4, atol=1e-5)
    assert nn.Conv2d(2, 3, 3, padding="valid")(hf.tensor(x)).shape == (1, 3, 5, 4)
    refl = nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect")
    xr = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="reflect")
    np.testing.assert_allclose(npy(refl(hf.tensor(x))),
                               np_conv2d(xr, npy(refl.weight), npy(refl.bias), (1, 1), (0, 0),
                                         (1, 1), 1), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match=r"Conv2d.*2 channels.*\(1, 3, 5, 5\)"):
        nn.Conv2d(2, 3, 3)(hf.ones(1, 3, 5, 5))
    with pytest.raises(ValueError, match="Conv2d"):
        nn.Conv2d(2, 3, 3)(hf.ones(5, 5))
    assert "kernel_size=(3, 3), stride=(1, 1)" in repr(nn.Conv2d(2, 3, 3))


def test_conv_transpose2d_module_shapes_init_and_output_size():
    up = nn.ConvTranspose2d(4, 6, (3, 2), stride=2, padding=1, output_padding=1, groups=2)
    assert up.weight.shape == (4, 3, 3, 2) and up.bias.shape == (6,)
    bound = 1 / math.sqrt(3 * 3 * 2)  # as PyTorch: fan_in from weight dim 1 (out / groups)
    for p in (up.weight, up.bias):
        assert np.abs(npy(p)).max() <= bound and np.abs(npy(p)).max() > bound / 2
    x = hf.randn(2, 4, 5, 6)
    assert up(x).shape == (2, 6, 10, 11)
    assert up(x[0]).shape == (6, 10, 11)  # unbatched
    np.testing.assert_allclose(npy(up(x[0])), npy(up(x))[0], rtol=1e-6, atol=1e-6)
    plain = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1)
    assert plain(x).shape == (2, 2, 9, 11)
    assert plain(x, output_size=(10, 11)).shape == (2, 2, 10, 11)
    assert plain(x, output_size=[2, 2, 9, 12]).shape == (2, 2, 9, 12)
    with pytest.raises(ValueError, match=r"ConvTranspose2d: requested output_size \(11, 11\)"):
        plain(x, output_size=(11, 11))
    with pytest.raises(ValueError, match=r"ConvTranspose2d.*2 channels.*\(1, 3, 5, 5\)"):
        nn.ConvTranspose2d(2, 3, 3)(hf.ones(1, 3, 5, 5))
    with pytest.raises(ValueError, match="ConvTranspose2d: in_channels \\(3\\)"):
        nn.ConvTranspose2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode='zeros'"):
        nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect")
    assert "output_padding=(1, 1)" in repr(up) and "groups=2" in repr(up)
    assert nn.ConvTranspose2d(2, 3, 3, bias=False).bias is None


def test_conv_layers_share_one_base_with_their_own_names_texts_and_keys():
    from hybridfw.nn.modules.conv import _ConvNd
    layers = [(nn.Conv1d, "Conv1d", (2, 6, 9), "(dim -2)", "2-D (C, L) or 3-D (N, C, L)"),
              (nn.Conv2d, "Conv2d", (2, 6, 9, 9), "(dim -3)", "3-D (C, H, W) or 4-D (N, C, H, W)"),
              (nn.ConvTranspose2d, "ConvTranspose2d", (2, 6, 9, 9), "(dim -3)",
               "3-D (C, H, W) or 4-D (N, C, H, W)")]
    for cls, name, bad_shape, dim, layouts in layers:
        assert issubclass(cls, _ConvNd)
        conv = cls(4, 6, 3)
        assert sorted(conv.state_dict()) == ["bias", "weight"]
        assert sorted(cls(4, 6, 3, bias=False).state_dict()) == ["weight"]
        assert conv.groups == 1 and conv.padding_mode == "zeros"
        with pytest.raises(ValueError) as err:
            cls(4, 6, 3, groups=0)
        assert str(err.value) == f"{name}: groups must be a positive integer, got 0"
        with pytest.raises(ValueError) as err:
            cls(4, 6, 3, groups=4)
        assert str(err.value) == (f"{name}: in_channels (4) and out_channels (6) must both be "
                                  "divisible by groups (4)")
        with pytest.raises(ValueError) as err:
            conv(hf.ones(*bad_shape))
        assert str(err.value) == (f"{name}: expected input with 4 channels {dim}, got input of "
                                  f"shape {bad_shape}")
        with pytest.raises(ValueError) as err:
            conv(hf.ones(9))
        assert str(err.value) == f"{name}: expected {layouts} input, got input of shape (9,)"
    with pytest.raises(ValueError) as err:
        nn.ConvTranspose2d(4, 6, 3, groups=True)  # only the transposed layer refuses bools
    assert str(err.value) == "ConvTranspose2d: groups must be a positive integer, got True"
    assert nn.Conv2d(4, 6, 3, groups=True).groups is True
    with pytest.raises(ValueError) as err:
        nn.Conv1d(4, 6, 3, padding_mode="edge")
    assert str(err.value) == ("Conv1d: padding_mode must be 'zeros', 'reflect', 'replicate' or "
                              "'circular', got 'edge'")
    with pytest.raises(ValueError) as err:
        nn.Conv2d(4, 6, 3, padding="full")
    assert str(err.value) == "Conv2d: padding string must be 'valid' or 'same', got 'full'"
    assert nn.Conv1d(4, 6, 4, padding="same", dilation=3)._reversed_padding_repeated_twice == \
        (4, 5)
    assert nn.Conv2d(4, 6, (4, 3), padding="same")._reversed_padding_repeated_twice == \
        (1, 1, 1, 2)
    assert nn.Conv2d(4, 6, 3, padding=(1, 2))._reversed_padding_repeated_twice == (2, 2, 1, 1)
    assert repr(nn.Conv1d(4, 6, 3, padding=1, padding_mode="circular", bias=False)) == (
        "Conv1d(4, 6, kernel_size=(3,), stride=(1,), padding=(1,), bias=False, "
        "padding_mode=circular)")
    assert repr(nn.ConvTranspose2d(4, 6, 3, stride=2, output_padding=1, dilation=2)) == (
        "ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1), "
        "dilation=(2, 2))")


def test_conv_transpose2d_module_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4, 5, 6))
    for kwargs in (dict(stride=2, padding=1, output_padding=1),
                   dict(stride=(1, 2), dilation=(2, 1), groups=2, output_padding=(1, 0))):
        ours = nn.ConvTranspose2d(4, 6, 3, **kwargs).double()
        theirs = torch.nn.ConvTranspose2d(4, 6, 3, **kwargs).double()
        ours.load_state_dict({k: hf.tensor(v.detach().numpy())
                              for k, v in theirs.state_dict().items()})
        hx, tx = hf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, tout = ours(hx), theirs(tx)
        np.testing.assert_allclose(npy(out), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
        (out * out).sum().backward()
        (tout * tout).sum().backward()
        np.testing.assert_allclose(npy(hx.grad), tx.grad.numpy(), rtol=1e-10, atol=1e-10)
        for name, p in ours.named_parameters():
            np.testing.assert_allclose(npy(p.grad), getattr(theirs, name).grad.numpy(),
                                       rtol=1e-10, atol=1e-10, err_msg=name)


def _trains_as_eager(make, seed, out_shape, loss_fn):
    """Three SGD steps of make() eager and under to_static on (3, 2, 8, 6) inputs: the same
    output shape, the same weights after, one program."""
    eager, static = make(), hf.jit.to_static(make())
    opts = [hf.optim.SGD(m.parameters(), lr=0.05) for m in (eager, static)]
    rng = np.random.default_rng(seed)
    for _ in range(3):
        x = hf.tensor(rng.standard_normal((3, 2, 8, 6)).astype(np.float32))
        for model, opt in zip((eager, static), opts):
            out = model(x)
            assert out.shape == out_shape
            loss = loss_fn(out, x)
            opt.zero_grad()
            loss.backward()
            opt.step()
    for (name, a), (_, b) in zip(eager.state_dict().items(), static.state_dict().items()):
        np.testing.assert_allclose(npy(b), npy(a), rtol=1e-5, atol=1e-6, err_msg=name)
    assert static.forward.cache_info().misses == 1


def test_conv_transpose2d_trains_under_to_static_as_eager():
    def make():
        hf.manual_seed(3)
        return nn.Sequential(nn.Conv2d(2, 4, 3, stride=2, padding=1), nn.ReLU(),
                             nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1))

    _trains_as_eager(make, 8, (3, 2, 8, 6), lambda out, x: ((out - x) ** 2).mean())


def test_conv_transpose2d_under_input_spec_none_spatial_dims():
    up = nn.ConvTranspose2d(3, 2, 3, padding=1, output_padding=0)
    converted = hf.jit.to_static(up, input_spec=[hf.jit.InputSpec([None, 3, None, None])])
    for shape in ((2, 3, 5, 7), (1, 3, 4, 4)):  # stride 1: one program serves every size
        x = hf.randn(*shape)
        np.testing.assert_allclose(npy(converted(x)), npy(up(x)), rtol=1e-6, atol=1e-6)
    strided = hf.jit.to_static(nn.ConvTranspose2d(3, 2, 3, stride=2),
                               input_spec=[hf.jit.InputSpec([None, 3, None, None])])
    with pytest.raises(ValueError, match=r"conv_transpose2d: the input's spatial dim 2 .*"
                                         r"stride is 2"):
        strided(hf.randn(2, 3, 5, 7))


def test_upsample_modules():
    x = hf.tensor(np.arange(4.0).reshape(1, 1, 2, 2))
    assert npy(nn.Upsample(scale_factor=2)(x))[0, 0].tolist() == [[0, 0, 1, 1], [0, 0, 1, 1],
                                                                   [2, 2, 3, 3], [2, 2, 3, 3]]
    corners = npy(nn.UpsamplingBilinear2d(size=3)(x))[0, 0]  # align_corners=True
    np.testing.assert_allclose(corners, [[0, 0.5, 1], [1, 1.5, 2], [2, 2.5, 3]])
    edges = npy(nn.Upsample(size=(2, 4), mode="bilinear")(x))[0, 0]  # align_corners=False
    np.testing.assert_allclose(edges, [[0, 0.25, 0.75, 1], [2, 2.25, 2.75, 3]])
    assert npy(nn.UpsamplingNearest2d(size=(1, 3))(x))[0, 0].tolist() == [[0, 0, 1]]
    assert repr(nn.Upsample(scale_factor=2)) == "Upsample(scale_factor=2.0, mode='nearest')"
    assert repr(nn.Upsample(size=(3, 4), mode="bilinear")) == \
        "Upsample(size=(3, 4), mode='bilinear')"


def test_upsample_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(9).standard_normal((2, 3, 5, 4))
    for kwargs in (dict(scale_factor=2.5), dict(size=(3, 7), mode="bilinear"),
                   dict(scale_factor=(0.7, 1.3), mode="bilinear", align_corners=True)):
        hx, tx = hf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, tout = nn.Upsample(**kwargs)(hx), torch.nn.Upsample(**kwargs)(tx)
        np.testing.assert_allclose(npy(out), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
        (out * out).sum().backward()
        (tout * tout).sum().backward()
        np.testing.assert_allclose(npy(hx.grad), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_upsample_trains_under_to_static_as_eager():
    def make():
        hf.manual_seed(4)
        return nn.Sequential(nn.Conv2d(2, 3, 3, stride=2, padding=1),
                             nn.Upsample(scale_factor=2, mode="bilinear"),
                             nn.Conv2d(3, 2, 3, padding=1), nn.Upsample(size=(9, 7)))

    _trains_as_eager(make, 10, (3, 2, 9, 7), lambda out, x: (out ** 2).mean())


def test_pooling_against_numpy():
    x = np.random.default_rng(3).standard_normal((2, 3, 9, 8)).astype(np.float32)
    t = hf.tensor(x)
    ref = sliding(x, (2, 2), axis=(2, 3))[:, :, ::2, ::2].max((-1, -2))
    np.testing.assert_allclose(npy(nn.MaxPool2d(2)(t)), ref)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    ref = sliding(xp, (3, 3), axis=(2, 3))[:, :, ::2, ::2].max((-1, -2))
    np.testing.assert_allclose(npy(nn.MaxPool2d(3, stride=2, padding=1)(t)), ref)
    ref = sliding(x, (3, 3), axis=(2, 3))[:, :, ::3, ::3].mean((-1, -2))
    np.testing.assert_allclose(npy(nn.AvgPool2d(3)(t)), ref, rtol=1e-5, atol=1e-6)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = sliding(xp, (2, 2), axis=(2, 3))[:, :, ::2, ::2].mean((-1, -2))
    np.testing.assert_allclose(npy(nn.AvgPool2d(2, padding=1)(t)), ref, rtol=1e-5, atol=1e-6)

    out = npy(nn.AdaptiveAvgPool2d((4, 3))(t))
    ref = np.empty((2, 3, 4, 3), np.float32)
    for i in range(4):
        for j in range(3):
            h0, h1 = (i * 9) // 4, -(-((i + 1) * 9) // 4)
            w0, w1 = (j * 8) // 3, -(-((j + 1) * 8) // 3)
            ref[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean((-1, -2))
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    assert nn.AdaptiveAvgPool2d(1)(t).shape == (2, 3, 1, 1)
    with pytest.raises(ValueError, match="MaxPool2d"):
        nn.MaxPool2d(2)(hf.ones(4, 4))


# ---- normalization ----------------------------------------------------------------------------
def np_batch_norm_train(x, rm, rv, w, b, momentum, eps):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean, var = x.mean(axes), x.var(axes)
    n = x.size // x.shape[1]
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    y = y * w.reshape(shape) + b.reshape(shape)
    new_var = (1 - momentum) * rv + momentum * var * n / (n - 1)  # unbiased
    return y, (1 - momentum) * rm + momentum * mean, new_var


def np_batch_norm_eval(x, rm, rv, w, b, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - rm.reshape(shape)) / np.sqrt(rv.reshape(shape) + eps) * w.reshape(shape) + \
        b.reshape(shape)


@pytest.mark.parametrize("cls,shape", [(nn.BatchNorm1d, (8, 3)), (nn.BatchNorm1d, (4, 3, 5)),
                                       (nn.BatchNorm2d, (4, 3, 5, 2))])
def test_batch_norm_train_eval_and_running_stats(cls, shape):
    rng = np.random.default_rng(4)
    bn = cls(3, momentum=0.2).double()
    with hf.no_grad():
        bn.weight.copy_(hf.tensor(rng.standard_normal(3)))
        bn.bias.copy_(hf.tensor(rng.standard_normal(3)))
    w, b = npy(bn.weight), npy(bn.bias)
    rm, rv = np.zeros(3), np.ones(3)
    for step in range(3):
        x = rng.standard_normal(shape) * 2 + 1
        y = npy(bn(hf.tensor(x)))
        ref, rm, rv = np_batch_norm_train(x, rm, rv, w, b, 0.2, bn.eps)
        np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(npy(bn.running_mean), rm, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(npy(bn.running_var), rv, rtol=1e-10, atol=1e-12)
        assert bn.num_batches_tracked.item() == step + 1
    bn.eval()
    x = rng.standard_normal(shape)
    np.testing.assert_allclose(npy(bn(hf.tensor(x))), np_batch_norm_eval(x, rm, rv, w, b, bn.eps),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(npy(bn.running_mean), rm)  # eval leaves the stats alone
    assert bn.num_batches_tracked.item() == 3


def test_group_norm_module():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 6, 4, 5)).astype(np.float32)
    groups = x.reshape(3, 2, -1)
    ref = ((groups - groups.mean(-1, keepdims=True)) /
           np.sqrt(groups.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    gn = nn.GroupNorm(2, 6)
    assert [n for n, _ in gn.named_parameters()] == ["weight", "bias"]
    np.testing.assert_allclose(npy(gn(hf.tensor(x))), ref, rtol=1e-4, atol=1e-5)
    converted = hf.jit.to_static(nn.GroupNorm(2, 6, affine=False),
                                 input_spec=[hf.jit.InputSpec([None, 6, None, None])])
    np.testing.assert_allclose(npy(converted(hf.tensor(x))), ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"GroupNorm: num_channels \(4\) must be divisible"):
        nn.GroupNorm(3, 4)
    with pytest.raises(ValueError, match=r"GroupNorm: expected an \(N, 6, \.\.\.\) input"):
        gn(hf.ones(2, 4, 3))


def test_batch_norm_cumulative_average_and_variants():
    rng = np.random.default_rng(5)
    bn = nn.BatchNorm1d(2, momentum=None).double()
    xs = [rng.standard_normal((6, 2)) for _ in range(3)]
    for x in xs:
        bn(hf.tensor(x))
    np.testing.assert_allclose(npy(bn.running_mean), np.mean([x.mean(0) for x in xs], 0),
                               rtol=1e-10)
    np.testing.assert_allclose(npy(bn.running_var), np.mean([x.var(0, ddof=1) for x in xs], 0),
                               rtol=1e-10)

    static_bn = nn.BatchNorm1d(2, momentum=None)
    converted = hf.jit.to_static(static_bn)  # the count is read on each call, not traced once
    for x in xs:
        converted(hf.tensor(x.astype(np.float32)))
    assert static_bn.num_batches_tracked.item() == 3
    np.testing.assert_allclose(npy(static_bn.running_mean),
                               np.mean([x.mean(0) for x in xs], 0), rtol=1e-5)
    np.testing.assert_allclose(npy(static_bn.running_var),
                               np.mean([x.var(0, ddof=1) for x in xs], 0), rtol=1e-5)

    free = nn.BatchNorm2d(2, affine=False, track_running_stats=False)
    assert list(free.state_dict()) == [] and free.running_mean is None and free.weight is None
    x = rng.standard_normal((3, 2, 4, 4)).astype(np.float32)
    ones, zeros = np.ones(2, np.float32), np.zeros(2, np.float32)
    ref = np_batch_norm_train(x, zeros, ones, ones, zeros, 0.1, 1e-5)[0]
    np.testing.assert_allclose(npy(free(hf.tensor(x))), ref, rtol=1e-4, atol=1e-5)
    free.eval()  # no running stats: still batch statistics
    np.testing.assert_allclose(npy(free(hf.tensor(x))), ref, rtol=1e-4, atol=1e-5)

    bn = nn.BatchNorm2d(3)
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                     "num_batches_tracked"]
    with pytest.raises(ValueError, match=r"BatchNorm2d.*4-D.*\(2, 3\)"):
        bn(hf.ones(2, 3))
    with pytest.raises(ValueError, match=r"BatchNorm1d.*num_features=3.*\(2, 4\)"):
        nn.BatchNorm1d(3)(hf.ones(2, 4))

def test_batch_norm_without_bias():
    rng = np.random.default_rng(9)
    bn = nn.BatchNorm1d(3, bias=False).double()
    assert bn.bias is None and [n for n, _ in bn.named_parameters()] == ["weight"]
    assert list(bn.state_dict()) == ["weight", "running_mean", "running_var",
                                     "num_batches_tracked"]
    assert repr(bn) == ("BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=True, bias=False, "
                        "track_running_stats=True)")
    assert "affine=False, bias=False" in repr(nn.BatchNorm2d(2, affine=False, bias=False))
    assert list(nn.BatchNorm2d(2, affine=False, bias=False).state_dict()) == \
        ["running_mean", "running_var", "num_batches_tracked"]
    with hf.no_grad():
        bn.weight.copy_(hf.tensor([2.0, -1.0, 0.5]))
    x = rng.standard_normal((6, 3))
    ref = np_batch_norm_train(x, np.zeros(3), np.ones(3), npy(bn.weight), np.zeros(3), 0.1,
                              bn.eps)[0]
    np.testing.assert_allclose(npy(bn(hf.tensor(x))), ref, rtol=1e-10, atol=1e-12)
    with pytest.raises(TypeError):
        nn.BatchNorm1d(3, 1e-5, 0.1, True, True, None, None, False)  # bias is keyword-only
    torch = pytest.importorskip("torch")
    tbn = torch.nn.BatchNorm1d(3, bias=False).double()
    assert list(tbn.state_dict()) == list(bn.state_dict()) and repr(tbn) == repr(bn)



def test_batch_norm_gradients_in_train_mode():
    bn = nn.BatchNorm2d(3).double()
    with hf.no_grad():
        bn.weight.copy_(hf.tensor([0.5, 1.5, -1.0]))
        bn.bias.copy_(hf.tensor([0.1, 0.2, 0.3]))
    x = hf.randn(4, 3, 3, 2, dtype=hf.float64, requires_grad=True)
    check_grads(lambda: bn(x), [x, bn.weight, bn.bias])
    bn.eval()
    check_grads(lambda: bn(x), [x, bn.weight, bn.bias])


def test_layer_norm_against_numpy_and_gradients():
    rng = np.random.default_rng(6)
    ln = nn.LayerNorm((3, 4)).double()
    with hf.no_grad():
        ln.weight.copy_(hf.tensor(rng.standard_normal((3, 4))))
        ln.bias.copy_(hf.tensor(rng.standard_normal((3, 4))))
    x = rng.standard_normal((2, 3, 4)) * 3
    mean = x.mean((1, 2), keepdims=True)
    var = x.var((1, 2), keepdims=True)
    ref = (x - mean) / np.sqrt(var + 1e-5) * npy(ln.weight) + npy(ln.bias)
    np.testing.assert_allclose(npy(ln(hf.tensor(x))), ref, rtol=1e-10, atol=1e-12)
    xt = hf.tensor(x, requires_grad=True)
    check_grads(lambda: ln(xt), [xt, ln.weight, ln.bias])
    plain = nn.LayerNorm(4, elementwise_affine=False)
    assert list(plain.parameters()) == []
    assert nn.LayerNorm(4, bias=False).bias is None
    with pytest.raises(ValueError, match=r"LayerNorm.*\(3, 4\).*\(2, 4, 3\)"):
        ln(hf.ones(2, 4, 3, dtype=hf.float64))


# ---- embedding --------------------------------------------------------------------------------
def test_embedding_lookup_padding_and_pretrained():
    emb = nn.Embedding(10, 3, padding_idx=0)
    idx = np.array([[0, 2, 9], [2, 2, 5]])
    out = emb(hf.tensor(idx))
    np.testing.assert_array_equal(npy(out), npy(emb.weight)[idx])
    (out * hf.randn(2, 3, 3)).sum().backward()
    grad = emb.weight.grad.numpy()
    assert not grad[0].any() and grad[2].any() and not grad[1].any()
    weights = hf.randn(4, 2)
    pre = nn.Embedding.from_pretrained(weights)
    assert not pre.weight.requires_grad and pre.weight.shape == (4, 2)
    np.testing.assert_array_equal(npy(pre(hf.tensor([3]))), npy(weights)[[3]])
    assert nn.Embedding.from_pretrained(weights, freeze=False).weight.requires_grad
    assert repr(emb) == "Embedding(10, 3, padding_idx=0)"


# ---- losses -----------------------------------------------------------------------------------
def test_loss_modules_against_numpy():
    rng = np.random.default_rng(7)
    logits = rng.standard_normal((5, 4)).astype(np.float32)
    target = np.array([0, 3, 1, 1, 2])
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    ce = nn.CrossEntropyLoss()(hf.tensor(logits), hf.tensor(target))
    assert ce.item() == pytest.approx(-logp[np.arange(5), target].mean(), rel=1e-5)
    nll = nn.NLLLoss(reduction="sum")(hf.tensor(logp), hf.tensor(target))
    assert nll.item() == pytest.approx(-logp[np.arange(5), target].sum(), rel=1e-5)
    a, b = rng.random((3, 2)).astype(np.float32), rng.random((3, 2)).astype(np.float32)
    assert nn.MSELoss()(hf.tensor(a), hf.tensor(b)).item() == pytest.approx(((a - b) ** 2).mean(),
                                                                            rel=1e-5)
    assert nn.L1Loss(reduction="sum")(hf.tensor(a), hf.tensor(b)).item() == pytest.approx(
        np.abs(a - b).sum(), rel=1e-5)
    bce = -(b * np.log(a) + (1 - b) * np.log(1 - a)).mean()
    assert nn.BCELoss()(hf.tensor(a), hf.tensor(b)).item() == pytest.approx(bce, rel=1e-5)
    s = 1 / (1 + np.exp(-logits[:3, :2]))
    bcel = -(b * np.log(s) + (1 - b) * np.log(1 - s)).mean()
    assert nn.BCEWithLogitsLoss()(hf.tensor(logits[:3, :2]), hf.tensor(b)).item() == \
        pytest.approx(bcel, rel=1e-5)
    d = np.abs(a - b)
    assert nn.SmoothL1Loss(beta=0.1)(hf.tensor(a), hf.tensor(b)).item() == pytest.approx(
        np.where(d < 0.1, 5 * d * d, d - 0.05).mean(), rel=1e-5)
    assert nn.HuberLoss(reduction="sum", delta=0.1)(hf.tensor(a), hf.tensor(b)).item() == \
        pytest.approx(np.where(d < 0.1, 0.5 * d * d, 0.1 * (d - 0.05)).sum(), rel=1e-5)
    p = np.exp(logp)
    kl = nn.KLDivLoss(reduction="batchmean")(hf.tensor(logits), hf.tensor(p))
    assert kl.item() == pytest.approx((p * (logp - logits)).sum() / 5, rel=1e-5)
    kl = nn.KLDivLoss(reduction="none", log_target=True)(hf.tensor(logits), hf.tensor(logp))
    np.testing.assert_allclose(npy(kl), p * (logp - logits), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")

def test_loss_modules_take_torchs_legacy_positional_arguments():
    w = hf.tensor([1.0, 2.0, 0.5])
    ce = nn.CrossEntropyLoss(w, None, 2, None, "sum", 0.1)  # torch's positional order
    assert ce.weight is w and ce.ignore_index == 2 and ce.reduction == "sum"
    assert ce.label_smoothing == 0.1
    nll = nn.NLLLoss(None, None, 1, None, "none")
    assert nll.ignore_index == 1 and nll.reduction == "none"
    pos = hf.tensor([2.0])
    bcel = nn.BCEWithLogitsLoss(None, None, None, "sum", pos)
    assert bcel.pos_weight is pos and bcel.reduction == "sum"
    assert nn.BCELoss(w, None, None, "none").weight is w
    assert nn.MSELoss(None, None, "sum").reduction == "sum"
    # size_average / reduce override reduction by PyTorch's legacy rule, with a warning
    cases = [((False,), "sum"), ((None, False), "none"), ((True, True), "mean"),
             ((False, True, "none"), "sum"), ((True, False), "none")]
    for args, expected in cases:
        with pytest.warns(UserWarning, match=f"please use reduction='{expected}'"):
            assert nn.L1Loss(*args).reduction == expected
    with pytest.warns(UserWarning, match="reduction='none'"):
        loss = nn.MSELoss(reduce=False)
    a, b = np.array([1.0, 2.0]), np.array([0.0, 4.0])
    np.testing.assert_allclose(npy(loss(hf.tensor(a), hf.tensor(b))), (a - b) ** 2)
    with pytest.warns(UserWarning, match="reduction='sum'"):
        nll = nn.NLLLoss(None, False)
    logp = np.log(np.array([[0.25, 0.75], [0.5, 0.5]]))
    assert nll(hf.tensor(logp), hf.tensor([1, 0])).item() == pytest.approx(
        -(np.log(0.75) + np.log(0.5)))
    torch = pytest.importorskip("torch")
    with pytest.warns(UserWarning):
        assert torch.nn.L1Loss(False, True, "none").reduction == "sum"



# ---- PyTorch as an extra oracle ---------------------------------------------------------------
def test_conv_and_batch_norm_match_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tnet = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2, padding=1, groups=1),
                               torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               torch.nn.Conv2d(8, 4, 3, padding=2, dilation=2, groups=2),
                               torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 2 * 2, 5))
    net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.Conv2d(8, 4, 3, padding=2, dilation=2, groups=2), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(16, 5))
    net.load_state_dict({k: v.detach().numpy() for k, v in tnet.state_dict().items()})
    x = np.random.default_rng(8).standard_normal((2, 3, 9, 9)).astype(np.float32)
    for _ in range(2):  # train mode: batch statistics and running-stat updates
        out, tout = net(hf.tensor(x)), tnet(torch.from_numpy(x))
        np.testing.assert_allclose(npy(out), tout.detach().numpy(), atol=1e-5, rtol=1e-4)
    for key, value in tnet.state_dict().items():
        np.testing.assert_allclose(npy(net.state_dict()[key]), value.numpy(), atol=1e-6,
                                   rtol=1e-5)
    tout.sum().backward()
    out.sum().backward()
    for (name, p), (tname, tp) in zip(net.named_parameters(), tnet.named_parameters()):
        assert name == tname
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), atol=1e-4, rtol=1e-4)
    net.eval()
    tnet.eval()
    np.testing.assert_allclose(npy(net(hf.tensor(x))), tnet(torch.from_numpy(x)).detach().numpy(),
                               atol=1e-5, rtol=1e-4)


def test_conv_transpose2d_argument_errors_name_it():
    with pytest.raises(ValueError, match=r"^ConvTranspose2d: kernel_size must be an int or a pair"):
        nn.ConvTranspose2d(2, 2, (1, 2, 3))
    with pytest.raises(ValueError, match=r"^Conv2d: stride must be an int or a pair"):
        nn.Conv2d(2, 2, 3, stride=(1, 2, 3))
