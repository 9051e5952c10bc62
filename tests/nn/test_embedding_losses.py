"""F.cosine_embedding_loss, F.margin_ranking_loss, F.triplet_margin_loss and their modules
against PyTorch: values, gradients, reductions, eager and ``hf.jit.to_static``; errors."""
import numpy as np
import pytest

import hybridfw as hf

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(0)
X1 = RNG.standard_normal((5, 4))
X2 = RNG.standard_normal((5, 4))
X3 = RNG.standard_normal((5, 4))
Y = np.array([1, -1, 1, -1, 0])  # (0: neither, counts 0 in the cosine loss)
S = np.array([1.0, -1.0, 1.0, 1.0, -1.0])

CALLS = [
    "F.cosine_embedding_loss(a, b, lib.tensor(Y))",
    "F.cosine_embedding_loss(a, b, lib.tensor(Y), margin=-0.3, reduction='none')",
    "F.cosine_embedding_loss(a[0], b[0], lib.tensor(-1), 0.2, reduction='sum')",
    "nn.CosineEmbeddingLoss(0.1)(a, b, lib.tensor(Y))",
    "F.margin_ranking_loss(a[:, 0], b[:, 0], lib.tensor(S))",
    "F.margin_ranking_loss(a, b, lib.tensor(S)[:, None], margin=0.5, reduction='none')",
    "nn.MarginRankingLoss(0.2, reduction='sum')(a[:, 1], b[:, 1], lib.tensor(S))",
    "F.margin_ranking_loss(a[:, 0], a[:, 0], lib.tensor(S))",  # (at the kink: grad flows)
    "F.triplet_margin_loss(a, b, c)",
    "F.triplet_margin_loss(a, b, c, margin=2.0, p=1, swap=True, reduction='none')",
    "F.triplet_margin_loss(a[0], b[0], c[0], eps=0.0, p=3)",
    "nn.TripletMarginLoss(margin=0.5, swap=True)(a, b, c)",
]


def _run(lib, call, a, b, c):
    return eval(call, {"lib": lib, "F": lib.nn.functional, "nn": lib.nn, "a": a, "b": b,
                       "c": c, "Y": Y, "S": S})


@pytest.mark.parametrize("call", CALLS)
def test_matches_torch(call):
    ts = [torch.tensor(x, requires_grad=True) for x in (X1, X2, X3)]
    want = _run(torch, call, *ts)
    want.sum().backward()
    hs = [hf.tensor(x, requires_grad=True) for x in (X1, X2, X3)]
    got = _run(hf, call, *hs)
    assert got.shape == tuple(want.shape) and got.dtype is hf.float64
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    got.sum().backward()
    for h, t in zip(hs, ts):
        if t.grad is None:
            assert h.grad is None
        else:
            np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-14)


def test_to_static_forward_and_backward():
    def f(a, b, c, y, s):
        return (hf.nn.functional.cosine_embedding_loss(a, b, y)
                + hf.nn.functional.margin_ranking_loss(a[:, 0], b[:, 0], s)
                + hf.nn.functional.triplet_margin_loss(a, b, c, swap=True))

    def run(fn):
        hs = [hf.tensor(x, requires_grad=True) for x in (X1, X2, X3)]
        out = fn(*hs, hf.tensor(Y), hf.tensor(S))
        out.backward()
        return out.item(), [h.grad.numpy() for h in hs]

    eager, static = run(f), run(hf.jit.to_static(f))
    assert static[0] == pytest.approx(eager[0], rel=1e-12)
    for g, e in zip(static[1], eager[1]):
        np.testing.assert_allclose(g, e, rtol=1e-10)


def test_errors():
    F = hf.nn.functional
    a, b = hf.tensor(X1), hf.tensor(X2)
    with pytest.raises(ValueError, match="0-d or 1-d target"):
        F.cosine_embedding_loss(a, b, hf.tensor(Y)[:, None])
    with pytest.raises(ValueError, match="expects 2-d inputs"):
        F.cosine_embedding_loss(a[0], b[0], hf.tensor(Y))
    with pytest.raises(ValueError, match="expects 1-d inputs"):
        F.cosine_embedding_loss(a, b, hf.tensor(1))
    with pytest.raises(ValueError, match="same number"):
        F.margin_ranking_loss(a, b, hf.tensor(S))
    with pytest.raises(ValueError, match="same number"):
        F.triplet_margin_loss(a, b, a[0])
    with pytest.raises(ValueError, match="margin"):
        F.triplet_margin_loss(a, b, a, margin=0.0)
    with pytest.raises(ValueError, match="reduction"):
        hf.nn.TripletMarginLoss(reduction="avg")
