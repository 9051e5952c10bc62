"""float16 reductions and gelu compute in float32 and hand back float16, as PyTorch does on the
CPU: a float16 sum or square passes 65504 long before the mean, variance or norm does."""
import numpy as np
import pytest

import hybridfw as hf

F = hf.nn.functional


def test_mean_var_std_norm_do_not_overflow():
    tens = np.full(10000, 10.0, np.float16)
    out = hf.tensor(tens).mean()
    assert out.dtype is hf.float16 and out.item() == 10.0
    np.testing.assert_array_equal(hf.tensor(np.full((2, 10000), 10.0, np.float16)).mean(dim=1)
                                  .numpy(), [10.0, 10.0])
    v = np.random.default_rng(0).uniform(10, 20, 20000).astype(np.float16)
    want = np.var(v.astype(np.float64), ddof=1)
    np.testing.assert_allclose(hf.tensor(v).var().item(), want, rtol=2e-3)
    np.testing.assert_allclose(hf.tensor(v).std().item(), np.sqrt(want), rtol=2e-3)
    norm = hf.norm(hf.tensor(np.full(1000, 10.0, np.float16)))
    assert norm.dtype is hf.float16
    np.testing.assert_allclose(norm.item(), np.sqrt(1000) * 10, rtol=1e-3)
    assert hf.norm(hf.tensor(tens[:10]), dtype=hf.float32).dtype is hf.float32


def test_gradients_stay_float16():
    x = hf.tensor(np.full(4, 2.0, np.float16), requires_grad=True)
    x.mean().backward()
    assert x.grad.dtype is hf.float16
    np.testing.assert_array_equal(x.grad.numpy(), [0.25] * 4)


def test_gelu_in_float16_against_float32():
    g = np.linspace(-5, 5, 101).astype(np.float16)
    want = F.gelu(hf.tensor(g.astype(np.float32))).numpy().astype(np.float16)
    got = F.gelu(hf.tensor(g))
    assert got.dtype is hf.float16
    np.testing.assert_allclose(got.numpy().astype(np.float32), want.astype(np.float32),
                               rtol=1e-3, atol=1e-6)


def test_matches_torch_when_importable():
    torch = pytest.importorskip("torch")
    v = np.random.default_rng(1).uniform(10, 20, 20000).astype(np.float16)
    for name in ("mean", "var", "std"):
        np.testing.assert_allclose(getattr(hf.tensor(v), name)().item(),
                                   getattr(torch.tensor(v), name)().item(), rtol=1e-3)
