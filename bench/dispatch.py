"""Per-op eager dispatch cost: hybridfw vs raw numpy vs PyTorch (when importable), one run.

Workloads (16-element float32 tensors): one add without grad, one add with requires_grad, and a
chain of 10 adds followed by backward (reported per op: total / 10). Median of repeats.

    python bench/dispatch.py
"""
from __future__ import annotations

import statistics
import timeit

import numpy as np

import hybridfw as hf

N = 16
REPEATS = 9


def per_call_us(fn, number=20000):
    times = timeit.repeat(fn, number=number, repeat=REPEATS)
    return statistics.median(times) / number * 1e6


def chain(add, a, b):
    y = add(a, b)
    for _ in range(9):
        y = add(y, b)
    return y


def bench_hybridfw():
    a = hf.rand(N)
    b = hf.rand(N)
    ag = hf.rand(N, requires_grad=True)
    bg = hf.rand(N, requires_grad=True)

    def chain_backward():
        y = ag + bg
        for _ in range(9):
            y = y + bg
        y.sum().backward()
        ag.grad = None
        bg.grad = None

    return {"add": per_call_us(lambda: a + b),
            "add (requires_grad)": per_call_us(lambda: ag + bg),
            "chain of 10 adds + backward, per op": per_call_us(chain_backward, 2000) / 10}


def bench_numpy():
    a = np.random.rand(N).astype(np.float32)
    b = np.random.rand(N).astype(np.float32)
    return {"add": per_call_us(lambda: a + b), "add (requires_grad)": float("nan"),
            "chain of 10 adds + backward, per op": float("nan")}


def bench_torch():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(2)
    a = torch.rand(N)
    b = torch.rand(N)
    ag = torch.rand(N, requires_grad=True)
    bg = torch.rand(N, requires_grad=True)

    def chain_backward():
        y = ag + bg
        for _ in range(9):
            y = y + bg
        y.sum().backward()
        ag.grad = None
        bg.grad = None

    return {"add": per_call_us(lambda: a + b),
            "add (requires_grad)": per_call_us(lambda: ag + bg),
            "chain of 10 adds + backward, per op": per_call_us(chain_backward, 2000) / 10}


def main():
    rows = {"hybridfw": bench_hybridfw(), "numpy": bench_numpy()}
    t = bench_torch()
    if t is not None:
        rows["torch"] = t
    keys = list(rows["hybridfw"])
    print(f"{'µs per op':40s}" + "".join(f"{name:>12s}" for name in rows)
          + ("   hybridfw/torch" if t else ""))
    for k in keys:
        line = f"{k:40s}" + "".join(f"{rows[n][k]:12.2f}" for n in rows)
        if t:
            line += f"   {rows['hybridfw'][k] / t[k]:8.2f}x"
        print(line)


if __name__ == "__main__":
    main()
