"""Compiled regions (numba) side by side with the interpreter, PyTorch eager and JAX (when
importable), in one run:

- W1: ``y = relu(x * a + b) * c`` repeated 25 times on 16 floats (100 ops), per op
  (target <= 0.1 us per op, compiled);
- W5: Collatz from 27 as a to_static ``while`` with an ``if`` (111 iterations), per call
  (target <= 9 us);
- W4: a hand-written LSTM cell (input 64, hidden 128, batch 32) over 50 steps, forward +
  backward (target <= 10 ms), with the time of its matrix products alone (numpy, same shapes,
  one after the other: a floor no one-thread schedule goes below on this machine); and the same
  cell over a tensor-bound ``while`` loop (one compiled loop forward, one ``while_grad``
  backward). hybridfw's plans use a second thread for large products when the cores allow
  (``hf.set_num_interop_threads``); the same program compiled for one thread is timed beside
  it;
- the compile time of each program (``backend='compiled'``: first call minus the interpreted
  first call) and the first-call time with tiering (``backend='auto'``, target <= 0.5 s; the
  median of three fresh conversions, see :func:`first_calls`), and the first call in three new
  processes that import hybridfw only (:func:`fresh_process_first_calls`: what a user's script
  feels, cold, with no PyTorch in the heap).

Every compiled result is first checked against the interpreter. Each time is also given as a
fraction of PyTorch eager's in the same run: this machine's speed drifts by tens of percent
between runs, ratios within one run are what compare with ../shared/research/peers.md. Times are medians of interleaved
rounds (see bench/to_static.py); the numba cache directory is a fresh temporary one, so compile
times are cold. BLAS and PyTorch use ``--threads`` threads (default 1); hybridfw's plans add
their worker thread to that when the cores hold two BLAS calls at once (one BLAS thread on two
cores: see hybridfw/static/streams.py).

    python bench/codegen.py [--threads N] [--repeats N]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("HYBRIDFW_CACHE_DIR", tempfile.mkdtemp(prefix="hf-bench-codegen-"))

import hybridfw as hf  # noqa: E402
from hybridfw.converter.function import _cache as converted_cache  # noqa: E402
from hybridfw.static import streams  # noqa: E402
from to_static import blas_threads, collatz, side_by_side, torch_or_none  # noqa: E402

RNG = np.random.default_rng(0)
SEQ, BATCH, INPUT, HIDDEN = 50, 32, 64, 128


def chain(x, a, b, c):
    for _ in range(25):
        x = (x * a + b).relu() * c
    return x


def lstm_cell(x_t, h, c, w_ih, w_hh, bias):
    """A hand-written LSTM cell (gates i, f, g, o): the new ``(h, c)``."""
    gates = x_t @ w_ih + h @ w_hh + bias
    i = gates[:, :HIDDEN].sigmoid()
    f = gates[:, HIDDEN:2 * HIDDEN].sigmoid()
    g = gates[:, 2 * HIDDEN:3 * HIDDEN].tanh()
    o = gates[:, 3 * HIDDEN:].sigmoid()
    c = f * c + i * g
    return o * c.tanh(), c


def lstm_loop(x, w_ih, w_hh, bias):
    """The cell over the SEQ time steps (a Python loop: to_static unrolls it)."""
    h = x[0] @ w_ih * 0.0
    h = h[:, :HIDDEN]
    c = h
    for t in range(SEQ):
        h, c = lstm_cell(x[t], h, c, w_ih, w_hh, bias)
    return h


def lstm_while(x, w_ih, w_hh, bias, n):
    """The cell over a tensor-bound ``while`` loop of ``n`` steps: one loop in the program,
    trained through its records (``while_grad``)."""
    h = x[0] @ w_ih * 0.0
    h = h[:, :HIDDEN]
    c = h
    t = n * 0
    while t < n:
        h, c = lstm_cell(x[t], h, c, w_ih, w_hh, bias)
        t = t + 1
    return h


def check(a, b, label, rtol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=1e-6,
                               err_msg=label)


def first_calls(fn, args, grad=False, fresh=3) -> dict:
    """Seconds of the first call of a fresh conversion, per backend (and the compiled one's
    result). ``interpreted`` and ``auto``: the median of ``fresh`` conversions, interleaved (a
    full garbage collection, ~0.3 s with PyTorch's objects in the heap too, falls inside about
    one first call in two; the median shows the call's own cost, the maximum is printed too);
    ``compiled``: the first conversion only (later ones find the regions compiled)."""
    times: dict = {"interpreted": [], "auto": [], "compiled": []}
    out = {}
    for round_ in range(fresh):
        for backend in ("interpreted", "auto", "compiled"):
            if backend == "compiled" and round_:
                continue
            converted_cache.clear()  # each conversion converts the source again, as a first does
            f = hf.jit.to_static(fn, backend=backend)
            start = time.perf_counter()
            result = f(*args)
            if grad:
                result.sum().backward()
            times[backend].append(time.perf_counter() - start)
            out[f"{backend} fn"] = f
    for backend, seconds in times.items():
        out[backend] = statistics.median(seconds)
        out[f"{backend} max"] = max(seconds)
    return out


def fresh_process_first_calls(name: str, threads: int, runs: int = 3) -> list:
    """Seconds of workload ``name``'s first call (``backend='auto'``, backward included for
    W4) in each of ``runs`` new Python processes that import hybridfw and nothing else: what a
    user's script feels, without PyTorch's ~300k objects in the heap (a full garbage collection
    inside the call then costs ~30 ms, not ~0.3 s)."""
    code = (f"import sys; sys.path[:0] = [{os.path.dirname(os.path.abspath(__file__))!r}]; "
            f"import codegen; print(codegen.time_first_call({name!r}))")
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    return [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True, env=env).stdout.split()[-1]) for _ in range(runs)]


def time_first_call(name: str) -> float:
    """The first call of a fresh ``to_static(backend='auto')`` conversion of workload ``name``
    (``W1``, ``W5``, ``W4`` or ``W4-while``), in seconds."""
    if name == "W1":
        fn, args = chain, [hf.tensor(RNG.uniform(0.5, 1.0, 16).astype(np.float32))
                           for _ in range(4)]
    elif name == "W5":
        fn, args = collatz, [hf.tensor(27, dtype="int32")]
    else:
        fn = lstm_while if name == "W4-while" else lstm_loop
        args = [hf.tensor(RNG.standard_normal((SEQ, BATCH, INPUT)).astype(np.float32))]
        args += [hf.tensor(RNG.uniform(-0.1, 0.1, s).astype(np.float32), requires_grad=True)
                 for s in ((INPUT, 4 * HIDDEN), (HIDDEN, 4 * HIDDEN), (4 * HIDDEN,))]
        args += [hf.tensor(SEQ)] if name == "W4-while" else []
    f = hf.jit.to_static(fn)
    start = time.perf_counter()
    result = f(*args)
    if name.startswith("W4"):
        result.sum().backward()
    return time.perf_counter() - start


def w1(torch, repeats):
    data = [RNG.uniform(0.5, 1.0, 16).astype(np.float32) for _ in range(4)]
    args = [hf.tensor(d) for d in data]
    firsts = first_calls(chain, args)
    compiled, interpreted = firsts["compiled fn"], firsts["interpreted fn"]
    check(compiled(*args).numpy(), interpreted(*args).numpy(), "W1 compiled vs interpreted")
    cases = {"hybridfw eager": lambda: chain(*args),
             "hybridfw to_static interpreted": lambda: interpreted(*args),
             "hybridfw to_static compiled": lambda: compiled(*args)}
    if torch is not None:
        targs = [torch.from_numpy(d) for d in data]
        cases["torch eager"] = lambda: chain(*targs)
    jax = _jax()
    if jax is not None:
        jchain = jax.jit(lambda x, a, b, c: _jax_chain(jax, x, a, b, c))
        jargs = [jax.numpy.asarray(d) for d in data]
        cases["jax jit"] = lambda: jchain(*jargs).block_until_ready()
    times = side_by_side(cases, repeats)
    return {k: v * 1e6 / 100 for k, v in times.items()}, firsts, compiled


def _jax():
    try:
        import jax
        return jax
    except ImportError:
        return None


def _jax_chain(jax, x, a, b, c):
    for _ in range(25):
        x = jax.numpy.maximum(x * a + b, 0) * c
    return x


def w5(torch, repeats):
    args = [hf.tensor(27, dtype="int32")]
    firsts = first_calls(collatz, args)
    compiled, interpreted = firsts["compiled fn"], firsts["interpreted fn"]
    assert compiled(*args).item() == interpreted(*args).item() == 111
    cases = {"hybridfw eager": lambda: collatz(*args),
             "hybridfw to_static interpreted": lambda: interpreted(*args),
             "hybridfw to_static compiled": lambda: compiled(*args)}
    if torch is not None:
        t = torch.tensor(27, dtype=torch.int32)
        cases["torch eager"] = lambda: collatz(t)
    times = side_by_side(cases, repeats)
    return {k: v * 1e6 for k, v in times.items()}, firsts, compiled


def w4(torch, repeats, loop=False):
    """W4 as written (``lstm_loop``) or, with ``loop``, over a ``while`` (``lstm_while``)."""
    fn = lstm_while if loop else lstm_loop
    x_np = RNG.standard_normal((SEQ, BATCH, INPUT)).astype(np.float32)
    w_np = [RNG.uniform(-0.1, 0.1, s).astype(np.float32)
            for s in ((INPUT, 4 * HIDDEN), (HIDDEN, 4 * HIDDEN), (4 * HIDDEN,))]
    x = hf.tensor(x_np)
    weights = [hf.tensor(w, requires_grad=True) for w in w_np]
    extra = [hf.tensor(SEQ)] if loop else []

    def step(f):
        def call():
            for w in weights:
                w.grad = None
            f(x, *weights, *extra).sum().backward()
        return call
    firsts = first_calls(fn, [x, *weights, *extra], grad=True)
    compiled, interpreted = firsts["compiled fn"], firsts["interpreted fn"]
    step(interpreted)()
    expected = [w.grad.numpy().copy() for w in weights]
    step(compiled)()
    for w, e in zip(weights, expected):
        check(w.grad.numpy(), e, "W4 gradients compiled vs interpreted", rtol=1e-4)
    cases = {"hybridfw eager": step(fn),
             "hybridfw to_static interpreted": step(interpreted),
             "hybridfw to_static compiled": step(compiled)}
    if streams.active():  # the same, compiled for one thread (no worker)
        hf.set_num_interop_threads(1)
        try:
            one = hf.jit.to_static(types.FunctionType(fn.__code__, fn.__globals__, fn.__name__),
                                   backend="compiled")
            step(one)()
        finally:
            hf.set_num_interop_threads(2)
        cases["hybridfw to_static compiled, 1 thread"] = step(one)
    if not loop:  # (in the loop, matmuls run inside the compiled region)
        cases["floor: its matmuls alone, 1 thread"] = matmul_floor(compiled, [x, *weights])
    if torch is not None:
        tx = torch.from_numpy(x_np)
        tw = [torch.from_numpy(w.copy()).requires_grad_(True) for w in w_np]
        textra = [torch.tensor(SEQ)] if loop else []

        def torch_step():
            for w in tw:
                w.grad = None
            fn(tx, *tw, *textra).sum().backward()
        cases["torch eager"] = torch_step
    times = side_by_side(cases, repeats)
    return {k: v * 1e3 for k, v in times.items()}, firsts, compiled


def matmul_floor(function, args):
    """A call running, in numpy, the matmuls that ``function(*args)``'s compiled forward and
    backward plans run (same shapes and order, random data): no schedule of this program does less BLAS
    work, so its time is a floor for the compiled step on this machine."""
    entry = function.get_concrete_program(*args)
    programs = {id(entry.program), id(entry.backward_program)}
    operands = []
    for plan in entry.executor._cache.values():
        if id(plan.program) not in programs or plan.lowering is None:
            continue
        metas = plan.memory.metas
        for op in plan.program.global_block().ops:
            if op.type == "matmul":
                operands.append([RNG.standard_normal(metas[n].shape).astype(metas[n].dtype.np)
                                 for n in op.inputs])
    assert operands, "no compiled plan with matmuls found"

    def call():
        for a, b in operands:
            np.matmul(a, b)
    call.count = len(operands)
    return call


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch = torch_or_none(args.threads)
    print(f"codegen benchmark: {args.threads} BLAS/PyTorch thread(s), median of "
          f"{args.repeats} interleaved rounds; numba cache {os.environ['HYBRIDFW_CACHE_DIR']}")
    with blas_threads(args.threads):
        for label, unit, target, run in (("W1 100-op chain on 16 floats", "us/op", 0.1, w1),
                                         ("W5 Collatz from 27", "us/call", 9.0, w5),
                                         ("W4 LSTM cell 50 steps fwd+bwd", "ms/step", 10.0, w4),
                                         ("W4 written with a while loop (trained through "
                                          "while_grad)", "ms/step", 10.0,
                                          lambda t, r: w4(t, r, loop=True))):
            times, firsts, compiled = run(torch, args.repeats)
            print(f"\n{label} ({unit}; target <= {target} compiled)")
            torch_eager = times.get("torch eager")
            for name, value in times.items():
                ratio = f"  ({value / torch_eager:.3f} of torch eager)" if torch_eager else ""
                print(f"  {name:34s} {value:10.3f}{ratio}")
            print(f"  first call (median of 3 fresh conversions, max): interpreted "
                  f"{firsts['interpreted']:.3f} s ({firsts['interpreted max']:.3f}), auto "
                  f"(tiering) {firsts['auto']:.3f} s ({firsts['auto max']:.3f}; target <= 0.5), "
                  f"compiled {firsts['compiled']:.3f} s (compile time "
                  f"~{firsts['compiled'] - firsts['interpreted']:.3f} s)")
            fresh = fresh_process_first_calls(
                label.split()[0] + ("-while" if "while" in label else ""), args.threads)
            print(f"  first call in a new process importing hybridfw only (auto, 3 processes): "
                  f"median {statistics.median(fresh):.3f} s, max {max(fresh):.3f} s "
                  f"(target <= 0.5)")
            print("  " + compiled.compile_report().replace("\n", "\n  ")[:600])


if __name__ == "__main__":
    main()
