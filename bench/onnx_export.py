"""The exported digits CNN in ONNX Runtime vs the hybridfw static executor vs hybridfw eager, side
by side, plus export time (run by hand).

Workloads (float32, CPU, random weights and inputs): ``hybridfw.demo.DigitsCNN`` inference at batch
1 and 64; ``hf.onnx.export`` of it, with and without ``verify=True``. ONNX Runtime runs on one
``InferenceSession`` (default graph optimizations, ``intra_op_num_threads`` as given); the static
executor runs the program ``hf.jit.to_static`` compiled (what the export lowers); eager runs the
module in eval mode under ``no_grad``. Times are medians of interleaved rounds (every case once
per round), so load from other processes hits all cases alike; compare ratios within one run.

    OPENBLAS_NUM_THREADS=2 python bench/onnx_export.py [--threads 2]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

import hybridfw as hf  # noqa: E402
from hybridfw.demo import DigitsCNN  # noqa: E402

REPEATS = 9


def _calls_per_round(fn, seconds: float) -> int:
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        if time.perf_counter() - start >= seconds or number >= 1 << 14:
            return number
        number *= 2


def side_by_side(cases: dict, seconds: float = 0.05) -> dict:
    """Median seconds per call of each case, in interleaved rounds."""
    numbers = {name: _calls_per_round(fn, seconds) for name, fn in cases.items()}
    samples: dict = {name: [] for name in cases}
    for _ in range(REPEATS):
        for name, fn in cases.items():
            start = time.perf_counter()
            for _ in range(numbers[name]):
                fn()
            samples[name].append((time.perf_counter() - start) / numbers[name])
    return {name: statistics.median(times) for name, times in samples.items()}


def export_seconds(model, path, spec, verify: bool, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        hf.onnx.export(model, path, input_spec=[spec], verify=verify)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="ONNX Runtime intra-op threads")
    args = parser.parse_args(argv)
    hf.manual_seed(0)
    cnn = DigitsCNN().eval()
    spec = hf.jit.InputSpec([None, 1, 8, 8], "float32", name="image")
    path = os.path.join(tempfile.mkdtemp(), "digits_cnn.onnx")
    figures = {"export_s": export_seconds(cnn, path, spec, verify=False),
               "export_verify_s": export_seconds(cnn, path, spec, verify=True)}
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    static = hf.jit.to_static(DigitsCNN(), input_spec=[spec])
    static.load_state_dict(cnn.state_dict())
    static.eval()
    print(f"export: {figures['export_s'] * 1e3:.1f} ms, with verify=True "
          f"{figures['export_verify_s'] * 1e3:.1f} ms")
    print(f"{'batch':>5} {'onnxruntime':>13} {'hf static':>13} {'hf eager':>13} "
          f"{'static/ort':>10} {'eager/ort':>10}")
    for batch in (1, 64):
        x = np.random.default_rng(batch).standard_normal((batch, 1, 8, 8)).astype(np.float32)
        tensor = hf.tensor(x)
        with hf.no_grad():
            expected = cnn(tensor).numpy()
            assert np.allclose(session.run(None, {"image": x})[0], expected, atol=1e-4)
            assert np.allclose(static(tensor).numpy(), expected, atol=1e-4)

            times = side_by_side({
                "ort": lambda: session.run(None, {"image": x}),
                "static": lambda: static(tensor),
                "eager": lambda: cnn(tensor),
            })
        for name, seconds in times.items():
            figures[f"{name}_b{batch}_ms"] = seconds * 1e3
        print(f"{batch:>5} {times['ort'] * 1e3:>10.3f} ms {times['static'] * 1e3:>10.3f} ms "
              f"{times['eager'] * 1e3:>10.3f} ms {times['static'] / times['ort']:>9.1f}x "
              f"{times['eager'] / times['ort']:>9.1f}x")
    return figures


if __name__ == "__main__":
    main()
