"""``hf.jit.to_static`` side by side with hybridfw eager and PyTorch eager (when importable).

Run by hand, in one process, one table:

(a) first call: conversion, tracing, static autodiff, optimization and compilation of a freshly
    converted model, measured as its first forward + backward call (the backward program compiles
    on the first ``backward()``), next to a warm call: the digits CNN of ``hybridfw.demo`` (a
    training step's forward + backward at batch 64), ``nn.LSTM(64, 128)`` on (50, 32, 64), and a
    Module looping over time with ``nn.LSTMCell``;
(b) time per call, hybridfw eager vs to_static vs PyTorch eager on the same data and weights:
    - the LSTM cell loop (``for t in range(50): h, c = self.cell(x[t], (h, c))``, input 64,
      hidden 128, batch 32), forward + backward of ``out.sum()``;
    - a data-dependent ``while`` with an ``if`` inside (``while x.sum() < limit: if x.mean() < 1:
      x = x + 0.1 else: x = x * 1.05``, 95 iterations on 16 floats);
    - Collatz from 27 on a 0-d int32 tensor (111 iterations of a ``while`` with an ``if``);
    - for context, the ``nn.LSTM`` layer and the digits CNN training step (forward + backward).

Every converted workload is first checked against eager (outputs and gradients). Times are
medians of interleaved rounds (one round runs every case of a workload), after warm-up, with
``time.perf_counter``; compare ratios within one run. BLAS and PyTorch use ``--threads`` threads
(1 by default: these matrices are small, and idle threads spinning against other processes on a
busy machine distort the figures).

    python bench/to_static.py [--threads N] [--repeats N]
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import numpy as np

import hybridfw as hf
from hybridfw import nn
from hybridfw.demo import DigitsCNN

RNG = np.random.default_rng(0)
SEQ, BATCH, INPUT, HIDDEN = 50, 32, 64, 128
FIRST_CALL_TARGET_S = 0.5
SPEEDUP_TARGET = 3.0


# ---- workloads (written once, run by hybridfw and by PyTorch) -----------------------------------
class CellLoop(nn.Module):
    """An LSTM cell unrolled over the time steps by a Python loop."""

    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(INPUT, HIDDEN)

    def forward(self, x):
        h = hf.zeros(x.shape[1], HIDDEN)
        c = hf.zeros(x.shape[1], HIDDEN)
        for t in range(SEQ):
            h, c = self.cell(x[t], (h, c))
        return h


class LSTMLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(INPUT, HIDDEN)

    def forward(self, x):
        out, _ = self.lstm(x)
        return out


def grow(x, limit: float):
    """95 iterations from zeros(16) to limit 1000: +0.1 while the mean is below 1, then x1.05."""
    while x.sum() < limit:
        if x.mean() < 1.0:
            x = x + 0.1
        else:
            x = x * 1.05
    return x


def collatz(n):
    """The number of Collatz steps from ``n`` to 1 (111 from 27)."""
    steps = n * 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps = steps + 1
    return steps


# ---- timing -------------------------------------------------------------------------------------
def _calls_per_sample(fn, seconds=0.05) -> int:
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        if time.perf_counter() - start >= seconds or number >= 1 << 12:
            return number
        number *= 2


def side_by_side(cases: dict, repeats: int) -> dict:
    """Median seconds per call of each case, in interleaved rounds so that load from other
    processes hits every case alike."""
    for fn in cases.values():  # warm-up
        fn()
        fn()
    numbers = {name: _calls_per_sample(fn) for name, fn in cases.items()}
    samples: dict = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            number = numbers[name]
            start = time.perf_counter()
            for _ in range(number):
                fn()
            samples[name].append((time.perf_counter() - start) / number)
    return {name: statistics.median(times) for name, times in samples.items()}


def forward_backward(model, x):
    def call():
        model.zero_grad()
        model(x).sum().backward()
    return call


def cnn_step(model, x, y):
    def call():
        model.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
    return call


def first_call(make_model, make_call) -> tuple:
    """Seconds of the first forward + backward of a freshly converted model, and the model."""
    model = make_model()
    start = time.perf_counter()
    hf.jit.to_static(model)
    make_call(model)()
    return time.perf_counter() - start, model


def copy_weights(hf_module, torch, torch_module):
    state = {name: torch.from_numpy(p.detach().numpy().copy())
             for name, p in hf_module.state_dict().items()}
    torch_module.load_state_dict(state)
    return torch_module


def check_close(a, b, what, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, err_msg=what)


# ---- PyTorch twins ------------------------------------------------------------------------------
def torch_workloads(torch):
    tnn = torch.nn

    class TorchCellLoop(tnn.Module):
        def __init__(self):
            super().__init__()
            self.cell = tnn.LSTMCell(INPUT, HIDDEN)

        def forward(self, x):
            h = torch.zeros(x.shape[1], HIDDEN)
            c = torch.zeros(x.shape[1], HIDDEN)
            for t in range(SEQ):
                h, c = self.cell(x[t], (h, c))
            return h

    class TorchDigitsCNN(tnn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = tnn.Conv2d(1, 16, 3, padding=1)
            self.conv2 = tnn.Conv2d(16, 32, 3, padding=1)
            self.pool = tnn.MaxPool2d(2)
            self.fc1 = tnn.Linear(32 * 4 * 4, 64)
            self.fc2 = tnn.Linear(64, 10)

        def forward(self, x):
            x = torch.relu(self.conv1(x))
            x = self.pool(torch.relu(self.conv2(x)))
            x = torch.relu(self.fc1(x.flatten(1)))
            return self.fc2(x)

    return TorchCellLoop, TorchDigitsCNN


def torch_or_none(threads: int):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    return torch


def blas_threads(threads: int):
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(threads, "blas")


# ---- the run ------------------------------------------------------------------------------------
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    torch = torch_or_none(args.threads)
    with blas_threads(args.threads):
        run(torch, args)


def run(torch, args) -> None:
    x_seq_np = RNG.standard_normal((SEQ, BATCH, INPUT)).astype(np.float32)
    x_img_np = RNG.random((64, 1, 8, 8), dtype=np.float32)
    y_img_np = RNG.integers(0, 10, 64)
    x_seq, x_img, y_img = hf.tensor(x_seq_np), hf.tensor(x_img_np), hf.tensor(y_img_np)
    rows = []  # (section, workload, {mode: figure}, unit)

    # (a) first calls, before anything else has been converted in this process
    firsts = {}
    for name, make, call in (
            ("digits CNN train step (batch 64)", DigitsCNN, lambda m: cnn_step(m, x_img, y_img)),
            ("nn.LSTM(64, 128) on (50, 32, 64), fwd+bwd", LSTMLayer,
             lambda m: forward_backward(m, x_seq)),
            ("LSTMCell loop, 50 steps, fwd+bwd", CellLoop, lambda m: forward_backward(m, x_seq))):
        hf.manual_seed(0)
        seconds, model = first_call(make, call)
        firsts[name] = (seconds, model, call)
    for name in ("collatz", "grow"):
        fn = {"collatz": collatz, "grow": grow}[name]
        args_ = (hf.tensor(27, dtype=hf.int32),) if name == "collatz" else (hf.zeros(16), 1000.0)
        start = time.perf_counter()
        hf.jit.to_static(fn)(*args_)
        firsts[name] = (time.perf_counter() - start, None, None)
    for name, (seconds, model, call) in firsts.items():
        warm = side_by_side({"warm": call(model)}, 3)["warm"] if model is not None else None
        rows.append(("a", name, {"first call s": seconds,
                                 "warm call ms": None if warm is None else warm * 1e3}))

    # (b) per call
    hf.manual_seed(0)
    cell_eager = CellLoop()
    cell_static = hf.jit.to_static(CellLoop())
    cell_static.load_state_dict(cell_eager.state_dict())
    check_close(cell_static(x_seq).detach().numpy(), cell_eager(x_seq).detach().numpy(),
                "LSTM cell loop: to_static output")
    forward_backward(cell_eager, x_seq)()
    forward_backward(cell_static, x_seq)()
    for (name, p), q in zip(cell_eager.named_parameters(), cell_static.parameters()):
        check_close(q.grad.numpy(), p.grad.numpy(), f"LSTM cell loop: gradient of {name}")
    cases = {"hybridfw eager": forward_backward(cell_eager, x_seq),
             "hybridfw to_static": forward_backward(cell_static, x_seq)}
    TorchCellLoop, TorchDigitsCNN = torch_workloads(torch) if torch else (None, None)
    if torch is not None:
        tcell = copy_weights(cell_eager, torch, TorchCellLoop())
        tx_seq = torch.from_numpy(x_seq_np)
        check_close(tcell(tx_seq).detach().numpy(), cell_eager(x_seq).detach().numpy(),
                    "LSTM cell loop: torch twin output")

        def torch_cell():
            tcell.zero_grad()
            tcell(tx_seq).sum().backward()
        cases["torch eager"] = torch_cell
    rows.append(("b", "LSTMCell loop, 50 steps, fwd+bwd (ms)",
                 {k: v * 1e3 for k, v in side_by_side(cases, args.repeats).items()}))

    for name, fn, make_args, torch_args in (
            ("while + if, 95 iterations on 16 floats (ms)", grow,
             lambda: (hf.zeros(16), 1000.0), lambda: (torch.zeros(16), 1000.0)),
            ("Collatz from 27, 111 iterations (ms)", collatz,
             lambda: (hf.tensor(27, dtype=hf.int32),),
             lambda: (torch.tensor(27, dtype=torch.int32),))):
        static_fn = hf.jit.to_static(fn)
        call_args = make_args()
        check_close(static_fn(*call_args).numpy(), fn(*call_args).numpy(), f"{name}: to_static")
        cases = {"hybridfw eager": lambda fn=fn, a=call_args: fn(*a),
                 "hybridfw to_static": lambda f=static_fn, a=call_args: f(*a)}
        if torch is not None:
            targs = torch_args()
            check_close(fn(*targs).numpy(), fn(*call_args).numpy(), f"{name}: torch")
            cases["torch eager"] = lambda fn=fn, a=targs: fn(*a)
        rows.append(("b", name,
                     {k: v * 1e3 for k, v in side_by_side(cases, args.repeats).items()}))

    # context: the LSTM layer and the CNN step, warm
    _, lstm_static, _ = firsts["nn.LSTM(64, 128) on (50, 32, 64), fwd+bwd"]
    lstm_eager = LSTMLayer()
    lstm_eager.load_state_dict(lstm_static.state_dict())
    cases = {"hybridfw eager": forward_backward(lstm_eager, x_seq),
             "hybridfw to_static": forward_backward(lstm_static, x_seq)}
    if torch is not None:
        tlstm = copy_weights(lstm_eager.lstm, torch, torch.nn.LSTM(INPUT, HIDDEN))
        tx_seq = torch.from_numpy(x_seq_np)

        def torch_lstm():
            tlstm.zero_grad()
            tlstm(tx_seq)[0].sum().backward()
        cases["torch eager"] = torch_lstm
    rows.append(("b", "nn.LSTM(64, 128) layer, fwd+bwd (ms)",
                 {k: v * 1e3 for k, v in side_by_side(cases, args.repeats).items()}))

    _, cnn_static, _ = firsts["digits CNN train step (batch 64)"]
    cnn_eager = DigitsCNN()
    cnn_eager.load_state_dict(cnn_static.state_dict())
    cases = {"hybridfw eager": cnn_step(cnn_eager, x_img, y_img),
             "hybridfw to_static": cnn_step(cnn_static, x_img, y_img)}
    if torch is not None:
        tcnn = copy_weights(cnn_eager, torch, TorchDigitsCNN())
        tx_img, ty_img = torch.from_numpy(x_img_np), torch.from_numpy(y_img_np)

        def torch_cnn():
            tcnn.zero_grad()
            torch.nn.functional.cross_entropy(tcnn(tx_img), ty_img).backward()
        cases["torch eager"] = torch_cnn
    rows.append(("b", "digits CNN train step, batch 64, fwd+bwd (ms)",
                 {k: v * 1e3 for k, v in side_by_side(cases, args.repeats).items()}))

    report(rows, torch, args)


def _fmt(value, digits=3):
    if value is None:
        return "-"
    return f"{value:.{digits}g}" if value < 100 else f"{value:.0f}"


def report(rows, torch, args) -> None:
    torch_note = f"PyTorch {torch.__version__}" if torch is not None else \
        "PyTorch not importable: its column is skipped"
    print(f"hf.jit.to_static benchmark: {args.threads} BLAS/PyTorch thread(s), median of "
          f"{args.repeats} interleaved rounds; {torch_note}")
    print()
    print("(a) first call of a freshly converted model (convert + trace + autodiff + optimize + "
          f"compile + run), target <= {FIRST_CALL_TARGET_S} s")
    print(f"{'workload':46s} {'first call s':>12s} {'warm call ms':>12s}  target")
    for section, name, figures in rows:
        if section != "a":
            continue
        first = figures["first call s"]
        verdict = "met" if first <= FIRST_CALL_TARGET_S else "MISSED"
        print(f"{name:46s} {_fmt(first):>12s} {_fmt(figures['warm call ms']):>12s}  {verdict}")
    print()
    print(f"(b) time per call, ms (targets: to_static >= {SPEEDUP_TARGET:g}x hybridfw eager on the "
          "LSTM cell loop and the while loops; to_static faster than torch eager on the LSTM "
          "cell loop)")
    header = f"{'workload':46s} {'hf eager':>9s} {'to_static':>9s} {'torch':>9s} " \
        f"{'eager/static':>12s} {'torch/static':>12s}"
    print(header)
    for section, name, figures in rows:
        if section != "b":
            continue
        eager, static = figures["hybridfw eager"], figures["hybridfw to_static"]
        tvalue = figures.get("torch eager")
        speedup = eager / static
        torch_ratio = tvalue / static if tvalue is not None else None
        verdicts = []
        if not name.startswith(("nn.LSTM", "digits")):
            verdicts.append(f"{SPEEDUP_TARGET:g}x: " +
                            ("met" if speedup >= SPEEDUP_TARGET else "MISSED"))
        if name.startswith("LSTMCell") and torch_ratio is not None:
            verdicts.append("vs torch: " + ("met" if torch_ratio > 1 else "MISSED"))
        print(f"{name[:46]:46s} {_fmt(eager):>9s} {_fmt(static):>9s} {_fmt(tvalue):>9s} "
              f"{speedup:11.2f}x {'' if torch_ratio is None else f'{torch_ratio:11.2f}x':>12s}"
              f"  {'; '.join(verdicts)}")


if __name__ == "__main__":
    main()
