"""Milliseconds per training step, hybridfw vs PyTorch (when importable), side by side.

MLP 784-512-512-10 at batch 128 with SGD, and a small CNN (conv 1->16 3x3 pad 1, ReLU, maxpool 2,
conv 16->32 3x3 pad 1, ReLU, maxpool 2, linear to 10) on 28x28 inputs at batch 64. Same data and
the same starting weights in both frameworks; warm-up, then the median of repeats.

    python bench/train.py
"""
from __future__ import annotations

import statistics
import time

import numpy as np

import hybridfw as hf
from hybridfw import nn

REPEATS = 9
STEPS = 10


def mlp_hf():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def cnn_hf():
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def time_steps(step) -> float:
    for _ in range(3):
        step()
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(STEPS):
            step()
        times.append((time.perf_counter() - t0) / STEPS)
    return statistics.median(times) * 1e3


def hf_step(model, x, y):
    opt = hf.optim.SGD(model.parameters(), lr=0.01)
    xt, yt = hf.tensor(x), hf.tensor(y)

    def step():
        loss = nn.functional.cross_entropy(model(xt), yt)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def torch_twin(torch, model_hf, kind):
    tnn = torch.nn
    if kind == "mlp":
        m = tnn.Sequential(tnn.Linear(784, 512), tnn.ReLU(), tnn.Linear(512, 512), tnn.ReLU(),
                           tnn.Linear(512, 10))
    else:
        m = tnn.Sequential(tnn.Conv2d(1, 16, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                           tnn.Conv2d(16, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                           tnn.Flatten(), tnn.Linear(32 * 7 * 7, 10))
    m.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                       for k, v in model_hf.state_dict().items()})
    return m


def torch_step(torch, model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        loss = torch.nn.functional.cross_entropy(model(xt), yt)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def main():
    rng = np.random.default_rng(0)
    cases = {
        "MLP 784-512-512-10, batch 128": ("mlp", rng.standard_normal((128, 784), np.float32),
                                          rng.integers(0, 10, 128)),
        "CNN 28x28, batch 64": ("cnn", rng.standard_normal((64, 1, 28, 28), np.float32),
                                rng.integers(0, 10, 64)),
    }
    try:
        import torch
        torch.set_num_threads(2)
    except ImportError:
        torch = None
    targets = {"mlp": 1.3, "cnn": 2.5}
    print(f"{'ms per training step':34s}{'hybridfw':>10s}{'torch':>10s}{'ratio':>8s}{'target':>8s}")
    for name, (kind, x, y) in cases.items():
        hf.manual_seed(0)
        model = mlp_hf() if kind == "mlp" else cnn_hf()
        twin = torch_twin(torch, model, kind) if torch is not None else None
        t_hf = time_steps(hf_step(model, x, y))
        t_torch = time_steps(torch_step(torch, twin, x, y)) if twin is not None else float("nan")
        ratio = t_hf / t_torch
        target = f"<={targets[kind]}x"
        print(f"{name:34s}{t_hf:10.2f}{t_torch:10.2f}{ratio:7.2f}x{target:>8s}")


if __name__ == "__main__":
    main()
