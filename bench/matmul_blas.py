"""Matrix products in compiled regions: numpy's BLAS called from numba vs numba's ``np.dot``.

- the call alone, float32 (32, 128) @ (128, 512) and (32, 512) @ (512, 128): numpy's ``@``, a
  numba function calling ``hybridfw.static.lowering.blas.gemm`` (numpy's own BLAS; skipped when
  that module is missing, as before it existed) and one calling ``np.dot`` (SciPy's BLAS), in µs,
  best of several repeats;
- an LSTM (input 64, hidden 128, batch 32, 50 steps) over a tensor-bound ``while`` loop, so the
  loop with its two matmuls per step compiles as a whole: forward + backward of ``.sum()`` per
  step, ``backend='interpreted'`` vs ``'compiled'`` (and, in the same rounds, compiled as before
  this module: ``blas.available`` set False while it compiles, so the loop calls ``np.dot``), in
  ms, median of interleaved rounds.

Run with one BLAS thread (the numbers in the commit message were taken so):

    OPENBLAS_NUM_THREADS=1 python bench/matmul_blas.py [--repeats N]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import timeit

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("HYBRIDFW_CACHE_DIR", tempfile.mkdtemp(prefix="hf-bench-blas-"))

import hybridfw as hf  # noqa: E402
from codegen import BATCH, HIDDEN, INPUT, SEQ, lstm_while  # noqa: E402
from to_static import side_by_side  # noqa: E402


def calls(repeats: int) -> dict:
    import numba
    try:
        from hybridfw.static.lowering import blas
    except ImportError:
        blas = None
    rng = np.random.default_rng(0)
    out = {}
    for m, k, n in ((32, 128, 512), (32, 512, 128)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        cases = {"numpy @": lambda: a @ b}
        dot = numba.njit(lambda x, y: np.dot(x, y))
        cases["numba np.dot"] = lambda: dot(a, b)
        if blas is not None and blas.available:
            gemm = numba.njit(lambda x, y: blas.gemm(x, y))
            np.testing.assert_allclose(gemm(a, b), a @ b, rtol=1e-4, atol=1e-4)
            cases["numba blas.gemm"] = lambda: gemm(a, b)
        for name, fn in cases.items():
            fn()
            best = min(timeit.repeat(fn, number=200, repeat=repeats)) / 200
            out[f"({m},{k})@({k},{n}) {name}"] = best * 1e6
    return out


def lstm(repeats: int) -> dict:
    rng = np.random.default_rng(0)
    x = hf.tensor(rng.standard_normal((SEQ, BATCH, INPUT)).astype(np.float32))
    init = [rng.uniform(-0.1, 0.1, s).astype(np.float32)
            for s in ((INPUT, 4 * HIDDEN), (HIDDEN, 4 * HIDDEN), (4 * HIDDEN,))]
    weights = [hf.tensor(w, requires_grad=True) for w in init]
    steps = hf.tensor(SEQ)

    def step(f):
        def call():
            for w in weights:
                w.grad = None
            f(x, *weights, steps).sum().backward()
        return call

    fns = {backend: hf.jit.to_static(lstm_while, backend=backend)
           for backend in ("interpreted", "compiled")}
    try:
        from hybridfw.static.lowering import blas
    except ImportError:
        blas = None
    if blas is not None and blas.available:  # the same program compiled as before blas.py
        fns["compiled with np.dot"] = hf.jit.to_static(lstm_while, backend="compiled")
    grads = {}
    for backend, f in fns.items():
        if backend == "compiled with np.dot":
            blas.available = False  # read when the region's source is written (first call)
        try:
            step(f)()
        finally:
            if blas is not None:
                blas.available = True
        grads[backend] = [w.grad.numpy().copy() for w in weights]
    for backend in fns:
        for a, b in zip(grads["interpreted"], grads[backend]):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
    report = fns["compiled"].compile_report()
    times = side_by_side({f"while-LSTM {b}": step(f) for b, f in fns.items()}, repeats)
    return {k: v * 1e3 for k, v in times.items()}, report


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    for name, us in calls(args.repeats).items():
        print(f"{name:40s} {us:8.1f} us")
    times, report = lstm(args.repeats)
    for name, ms in times.items():
        print(f"{name:40s} {ms:8.2f} ms")
    print(report)


if __name__ == "__main__":
    main()
