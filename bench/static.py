"""Static graphs side by side with eager (hybridfw, and PyTorch when importable), in one run.

Workloads (same numpy-generated data and weights everywhere, float32, CPU):

- chain: ``y = relu(x*a+b)*c`` repeated 25x on 16 floats (100 tiny ops), per op; numpy with
  preallocated ``out=`` buffers is the floor, and the static executor's per-op overhead is its
  time minus that floor;
- MLP 784-512-512-10, batch 128: forward, and a training step (forward, backward, SGD update)
  when ``hf.static.gradients`` exists;
- CNN (conv 1->8, pool, conv 8->16, pool, linear), batch 64: forward and training step;
- LSTM cell (input 64, hidden 128, batch 32) over 50 steps: forward and forward+backward,
  unrolled statically, and as a ``hf.static.nn.while_loop`` when that exists;
- memory plans of those programs (and of a 32-layer MLP inference program): arena, lower bound
  (most bytes simultaneously live) and naive (sum of all intermediates).

Static rows run on ``Executor()`` (ops without ``out=`` copy their result into the arena) and, for
the models, ``Executor(copy_into_arena=False)`` (such results stay on the heap). Times are medians
of interleaved rounds (every case once per round), so load from other processes hits all cases of
a table alike; compare ratios within one run.

    OPENBLAS_NUM_THREADS=2 python bench/static.py [--quick]
"""
from __future__ import annotations

import argparse
import statistics
import time
import timeit

import numpy as np

import hybridfw as hf
from hybridfw import nn
from hybridfw.static.memory_plan import plan_arena

REPEATS = 7
SETTLE_SECONDS = 0.3
RNG = np.random.default_rng(0)


def _calls_per_round(fn, seconds) -> int:
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        if time.perf_counter() - start >= seconds or number >= 1 << 16:
            return number
        number *= 2


def side_by_side(cases: dict, seconds=0.03) -> dict:
    """Median seconds per call of each case, measured in interleaved rounds (one round of every
    case, REPEATS times) so that load from other processes hits them all alike."""
    numbers = {name: _calls_per_round(fn, seconds) for name, fn in cases.items()}
    samples = {name: [] for name in cases}
    pool = None
    for _ in range(REPEATS):
        for name, fn in cases.items():
            if ("torch" in name) != pool:
                # the other library's worker threads (OpenBLAS, PyTorch's OpenMP) keep spinning
                # on the two cores for a while after their last call: let them go to sleep
                pool = "torch" in name
                time.sleep(SETTLE_SECONDS)
            fn()
            samples[name].append(timeit.timeit(fn, number=numbers[name]) / numbers[name])
    return {name: statistics.median(times) for name, times in samples.items()}


def no_grad(fn, module=hf):
    def call():
        with module.no_grad():
            return fn()
    return call


def torch_or_none():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(2)
    return torch


def rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


# ---- W1: tiny elementwise chain -----------------------------------------------------------------
def bench_chain(torch):
    n, reps = 16, 25
    a_np, b_np, c_np, x_np = (RNG.random(n, dtype=np.float32) for _ in range(4))
    a, b, c, x = (hf.tensor(v) for v in (a_np, b_np, c_np, x_np))

    def chain(v, a, b, c, relu):
        for _ in range(reps):
            v = relu(v * a + b) * c
        return v

    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        y = chain(hf.static.data("x", [n]), a, b, c, lambda t: t.relu())
    exe = hf.static.Executor()
    feed = {"x": x}
    compiled = exe.compile(prog, feed, [y])
    np.testing.assert_allclose(exe.run(prog, feed, [y])[0].numpy(),
                               chain(x, a, b, c, lambda t: t.relu()).numpy(), rtol=1e-6)
    bufs = [np.empty(n, np.float32) for _ in range(4)]

    def numpy_out(v=x_np):
        o1, o2, o3, o4 = bufs
        for _ in range(reps):
            np.multiply(v, a_np, out=o1)
            np.add(o1, b_np, out=o2)
            np.maximum(o2, 0, out=o3)
            v = np.multiply(o3, c_np, out=o4)
        return v

    cases = {
        "numpy, out= buffers (floor)": numpy_out,
        "hybridfw eager": lambda: chain(x, a, b, c, lambda t: t.relu()),
        "hybridfw static (run)": lambda: exe.run(prog, feed, [y]),
        "hybridfw static (plan function only)": lambda: compiled([x._data]),
    }
    if torch is not None:
        ta, tb, tc, tx = (torch.from_numpy(v) for v in (a_np, b_np, c_np, x_np))
        cases["torch eager"] = lambda: chain(tx, ta, tb, tc, torch.relu)
    return {name: t / (4 * reps) for name, t in side_by_side(cases).items()}


# ---- models -------------------------------------------------------------------------------------
def mlp_model(dims=(784, 512, 512, 10)):
    layers = []
    for i in range(len(dims) - 1):
        layers += [nn.Linear(dims[i], dims[i + 1]), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def cnn_model():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(16 * 7 * 7, 10))


def static_program(model, x_shape, batch, train):
    """(program, fetch list): the model's logits, or its loss and parameter gradients."""
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", list(x_shape))
        logits = model(x)
        if not train:
            return prog, [logits]
        t = hf.static.data("t", [batch], "int64")
        loss = nn.functional.cross_entropy(logits, t)
        return prog, [loss] + hf.static.gradients(loss, list(model.parameters()))


def torch_twin(torch, model):
    """The same architecture in PyTorch with the same weights."""
    tnn = torch.nn
    layers = []
    for layer in model:
        if isinstance(layer, nn.Linear):
            t = tnn.Linear(layer.in_features, layer.out_features)
        elif isinstance(layer, nn.Conv2d):
            t = tnn.Conv2d(layer.in_channels, layer.out_channels, layer.kernel_size,
                           padding=layer.padding)
        else:
            t = {nn.ReLU: tnn.ReLU, nn.MaxPool2d: lambda: tnn.MaxPool2d(2),
                 nn.Flatten: tnn.Flatten}[type(layer)]()
        for name, p in getattr(t, "_parameters", {}).items():
            p.data = torch.from_numpy(getattr(layer, name).detach().numpy().copy())
        layers.append(t)
    return tnn.Sequential(*layers)


def bench_model(torch, name, model, x_shape, lr=0.01):
    batch = x_shape[0]
    x_np = rand(*x_shape)
    t_np = RNG.integers(0, 10, batch)
    x, t = hf.tensor(x_np), hf.tensor(t_np)
    rows = {}
    prog, fetch = static_program(model, x_shape, batch, train=False)
    rows[f"{name} forward: hybridfw eager"] = no_grad(lambda: model(x))
    for label, exe in (("", hf.static.Executor()),
                       (", no copy into arena", hf.static.Executor(copy_into_arena=False))):
        np.testing.assert_allclose(exe.run(prog, {"x": x}, fetch)[0].numpy(),
                                   model(x).detach().numpy(), rtol=1e-4, atol=1e-5)
        rows[f"{name} forward: hybridfw static{label}"] = \
            lambda exe=exe, prog=prog, fetch=fetch: exe.run(prog, {"x": x}, fetch)
    tmodel = torch_twin(torch, model) if torch is not None else None
    if tmodel is not None:
        tx, tt = torch.from_numpy(x_np), torch.from_numpy(t_np)
        rows[f"{name} forward: torch eager"] = no_grad(lambda: tmodel(tx), torch)
    if not hasattr(hf.static, "gradients"):
        return side_by_side(rows)
    params = list(model.parameters())

    def eager_step():
        loss = nn.functional.cross_entropy(model(x), t)
        loss.backward()
        with hf.no_grad():
            for p in params:
                p.sub_(p.grad * lr)
                p.grad = None

    train_prog, train_fetch = static_program(model, x_shape, batch, train=True)
    rows[f"{name} train step: hybridfw eager"] = eager_step
    for label, exe in (("", hf.static.Executor()),
                       (", no copy into arena", hf.static.Executor(copy_into_arena=False))):
        def static_step(exe=exe):
            grads = exe.run(train_prog, {"x": x, "t": t}, train_fetch)[1:]
            with hf.no_grad():
                for p, g in zip(params, grads):
                    p.sub_(g * lr)
        rows[f"{name} train step: hybridfw static{label}"] = static_step
    if tmodel is not None:
        opt = torch.optim.SGD(tmodel.parameters(), lr=lr)

        def torch_step():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(tmodel(tx), tt).backward()
            opt.step()
        rows[f"{name} train step: torch eager"] = torch_step
    return side_by_side(rows)


# ---- W4: LSTM cell over 50 steps ----------------------------------------------------------------
def lstm_step(x, h, c, w_ih, w_hh, bias):
    i, f, g, o = (x @ w_ih.T + h @ w_hh.T + bias).chunk(4, 1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def lstm_eager(xs, weights, steps):
    batch, hidden = xs.shape[1], weights[1].shape[1]
    h = c = hf.zeros(batch, hidden)
    for s in range(steps):
        h, c = lstm_step(xs[s], h, c, *weights)
    return (h * h).sum()


def lstm_while(xs, weights, steps):
    batch, hidden = xs.shape[1], weights[1].shape[1]

    def body(i, h, c):
        h, c = lstm_step(xs[i], h, c, *weights)
        return i + 1, h, c

    _, h, _ = hf.static.nn.while_loop(lambda i, h, c: i < steps, body,
                                      [hf.tensor(0), hf.zeros(batch, hidden),
                                       hf.zeros(batch, hidden)])
    return (h * h).sum()


def lstm_program(build, xs_shape, weights, steps, train):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        loss = build(hf.static.data("xs", list(xs_shape)), weights, steps)
        fetch = [loss] + (hf.static.gradients(loss, list(weights)) if train else [])
    return prog, fetch


def bench_lstm(torch, steps=50, batch=32, inputs=64, hidden=128):
    xs_np = rand(steps, batch, inputs)
    w_np = [rand(4 * hidden, inputs, scale=0.1), rand(4 * hidden, hidden, scale=0.1),
            rand(4 * hidden, scale=0.1)]
    xs = hf.tensor(xs_np)
    weights = [hf.tensor(w, requires_grad=True) for w in w_np]
    rows, programs = {}, {}
    rows["LSTM forward: hybridfw eager"] = no_grad(lambda: lstm_eager(xs, weights, steps))

    def eager_backward():
        lstm_eager(xs, weights, steps).backward()
        for w in weights:
            w.grad = None
    has_grad = hasattr(hf.static, "gradients")
    if has_grad:
        rows["LSTM fwd+bwd: hybridfw eager"] = eager_backward
    builds = [("unrolled", lstm_eager)]
    if hasattr(hf.static, "nn") and hasattr(hf.static.nn, "while_loop"):
        builds.append(("while_loop", lstm_while))
    reference = lstm_eager(xs, weights, steps).item()
    for label, build in builds:
        for train in (False, True) if has_grad else (False,):
            try:
                prog, fetch = lstm_program(build, xs.shape, weights, steps, train)
                exe = hf.static.Executor()
                got = exe.run(prog, {"xs": xs}, fetch)[0].item()
            except Exception as exc:  # noqa: BLE001 - report the row as failed, go on
                rows[f"LSTM {'fwd+bwd' if train else 'forward'}: static {label}"] = \
                    f"failed: {type(exc).__name__}: {str(exc)[:80]}"
                continue
            assert abs(got - reference) <= 1e-3 * abs(reference), (got, reference)
            kind = "fwd+bwd" if train else "forward"
            rows[f"LSTM {kind}: hybridfw static {label}"] = \
                lambda exe=exe, prog=prog, fetch=fetch: exe.run(prog, {"xs": xs}, fetch)
            programs[f"LSTM {label} {'training' if train else 'inference'}"] = \
                (prog, {"xs": tuple(xs.shape)}, fetch)
    if torch is not None:
        txs = torch.from_numpy(xs_np)
        tw = [torch.from_numpy(w).requires_grad_() for w in w_np]

        def torch_lstm():
            h = c = torch.zeros(batch, hidden)
            for s in range(steps):
                i, f, g, o = (txs[s] @ tw[0].T + h @ tw[1].T + tw[2]).chunk(4, 1)
                c = f.sigmoid() * c + i.sigmoid() * g.tanh()
                h = o.sigmoid() * c.tanh()
            return (h * h).sum()

        def torch_backward():
            torch_lstm().backward()
            for w in tw:
                w.grad = None
        rows["LSTM forward: torch eager"] = no_grad(torch_lstm, torch)
        rows["LSTM fwd+bwd: torch eager"] = torch_backward
    failed = {k: v for k, v in rows.items() if isinstance(v, str)}
    times = side_by_side({k: v for k, v in rows.items() if k not in failed})
    return {k: failed.get(k, times.get(k)) for k in rows}, programs


# ---- memory plans -------------------------------------------------------------------------------
def memory_rows(programs):
    rows = []
    for name, (prog, shapes, fetch) in programs.items():
        start = time.perf_counter()
        plan = plan_arena(prog, shapes, fetch)
        seconds = time.perf_counter() - start
        rows.append((name, len(prog.global_block().ops), plan.arena_bytes,
                     plan.lower_bound_bytes, plan.naive_bytes, seconds))
    return rows


def model_programs(has_grad):
    hf.manual_seed(0)
    out = {}
    for name, model, shape in (("MLP 784-512-512-10", mlp_model(), (128, 784)),
                               ("CNN", cnn_model(), (64, 1, 28, 28))):
        for train in (False, True) if has_grad else (False,):
            prog, fetch = static_program(model, shape, shape[0], train)
            shapes = {"x": shape, "t": (shape[0],)} if train else {"x": shape}
            out[f"{name} {'training' if train else 'inference'}"] = (prog, shapes, fetch)
    prog, fetch = static_program(mlp_model((256,) * 33), (64, 256), 64, train=False)
    out["MLP 32 layers of 256, inference"] = (prog, {"x": (64, 256)}, fetch)
    return out


# ---- report -------------------------------------------------------------------------------------
def print_times(title, rows, unit, scale):
    print(f"\n{title}")
    width = max(len(k) for k in rows) + 2
    for key, value in rows.items():
        text = value if isinstance(value, str) else f"{value * scale:10.3f} {unit}"
        print(f"  {key:<{width}}{text}")


def main():
    global REPEATS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        REPEATS = 3
    torch = torch_or_none()
    has_grad = hasattr(hf.static, "gradients")
    print(f"hybridfw static benchmark; numpy {np.__version__}; torch "
          f"{torch.__version__ if torch else 'not importable'}; static gradients: "
          f"{'yes' if has_grad else 'no (training rows skipped)'}")

    chain = bench_chain(torch)
    print_times("W1 chain of 100 tiny elementwise ops (16 floats), per op", chain, "us", 1e6)
    static, floor = chain["hybridfw static (run)"], chain["numpy, out= buffers (floor)"]
    print(f"  static per-op overhead over numpy's own out= calls: {(static - floor) * 1e6:.3f} us"
          f" (target <= 1 us)")
    if "torch eager" in chain:
        print(f"  static vs torch eager: {chain['torch eager'] / static:.2f}x faster "
              f"(target >= 2x)")

    hf.manual_seed(0)
    rows = bench_model(torch, "MLP", mlp_model(), (128, 784))
    rows.update(bench_model(torch, "CNN", cnn_model(), (64, 1, 28, 28)))
    print_times("Models (batch 128 MLP, batch 64 CNN), per call", rows, "ms", 1e3)

    lstm, lstm_programs = bench_lstm(torch)
    print_times("W4 LSTM cell (64 -> 128, batch 32), 50 steps, per call", lstm, "ms", 1e3)

    programs = model_programs(has_grad)
    programs.update(lstm_programs)
    print("\nMemory plans (bytes; lower bound = most bytes live at once; naive = no reuse)")
    print(f"  {'program':<38}{'ops':>6}{'arena':>12}{'lower bound':>13}{'naive':>12}"
          f"{'arena/LB':>10}{'naive/arena':>13}{'plan s':>8}")
    for name, n_ops, arena, lb, naive, seconds in memory_rows(programs):
        print(f"  {name:<38}{n_ops:>6}{arena:>12}{lb:>13}{naive:>12}"
              f"{arena / lb if lb else 1:>10.3f}{naive / arena if arena else 1:>13.1f}"
              f"{seconds:>8.2f}")
    print("  targets: arena <= 1.10x lower bound (MLP, CNN, LSTM); naive/arena >= 5x "
          "(32-layer MLP inference)")


if __name__ == "__main__":
    main()
