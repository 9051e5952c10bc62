"""The main demo: train a tiny two-layer network eagerly and watch the loss fall.

    python -m hybridfw.demo
"""
from __future__ import annotations

import hybridfw as hf


def make_data(n: int = 256):
    """Points in the plane labelled by whether they fall inside a circle of radius 1."""
    x = hf.randn(n, 2)
    y = ((x * x).sum(dim=1, keepdim=True) < 1.0).float()
    return x, y


def train(steps: int = 200, lr: float = 0.5, log_every: int = 20, verbose: bool = True):
    hf.manual_seed(0)
    x, y = make_data()
    w1 = (hf.randn(2, 32) * 0.7).requires_grad_()
    b1 = hf.zeros(32, requires_grad=True)
    w2 = (hf.randn(32, 1) * 0.2).requires_grad_()
    b2 = hf.zeros(1, requires_grad=True)
    params = [w1, b1, w2, b2]
    losses = []
    for step in range(steps):
        h = (x @ w1 + b1).tanh()
        p = (h @ w2 + b2).sigmoid()
        loss = -(y * (p + 1e-7).log() + (1 - y) * (1 - p + 1e-7).log()).mean()
        loss.backward()
        with hf.no_grad():
            for t in params:
                t.sub_(t.grad * lr)
                t.grad = None
        losses.append(loss.item())
        if verbose and (step % log_every == 0 or step == steps - 1):
            acc = ((p > 0.5).float() == y).float().mean().item()
            print(f"step {step:4d}  loss {loss.item():.4f}  accuracy {acc:.3f}")
    return losses


if __name__ == "__main__":
    train()
