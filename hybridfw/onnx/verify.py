"""Checking an exported model: run it in ONNX Runtime and compare with hybridfw's own result.

:func:`example_inputs` makes inputs from InputSpecs (seeded random data; ``None`` dims take
size 3), :func:`compare_with_runtime` runs the model in ONNX Runtime and the same optimized
program on the hybridfw static executor, and raises :class:`OnnxVerificationError` naming the
output and the largest absolute and relative differences when they disagree.
"""
from __future__ import annotations

import numpy as np

__all__ = ["OnnxVerificationError", "example_inputs", "compare_with_runtime", "run_onnx"]

DYNAMIC_DIM_SIZE = 3


class OnnxVerificationError(AssertionError):
    """ONNX Runtime and hybridfw disagree on an exported model's output."""


def example_inputs(specs, seed: int = 0, low: int = 0) -> list:
    """One random numpy array per InputSpec (``None`` dims of size 3; floats normal, ints in
    [low, 4), bools fair coins)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in specs:
        shape = tuple(DYNAMIC_DIM_SIZE if s == -1 else s for s in spec.shape)
        dtype = spec.dtype.np
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.integers(0, 2, shape).astype(bool))
        else:
            arrays.append(rng.integers(low, 4, shape).astype(dtype))
    return arrays


def _as_array(value) -> np.ndarray:
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        return np.asarray(value.detach().cpu().numpy())
    return np.asarray(value)


def run_onnx(model, feeds: dict) -> list:
    """Run ``model`` (a ModelProto, bytes or path) on ``feeds`` in ONNX Runtime (CPU)."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise ImportError("hf.onnx: running a model (verify=True) needs onnxruntime: pip "
                          "install -e '.[onnx]'") from exc
    source = model.SerializeToString() if hasattr(model, "SerializeToString") else model
    session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _largest(got: np.ndarray, expected: np.ndarray):
    """(largest absolute difference, its index, largest relative difference)."""
    got64, exp64 = got.astype(np.float64), expected.astype(np.float64)
    both_nan = np.isnan(got64) & np.isnan(exp64)
    diff = np.where(both_nan, 0.0, np.abs(got64 - exp64))
    diff = np.where(np.isnan(diff), np.inf, diff)
    if diff.size == 0:
        return 0.0, (), 0.0
    index = np.unravel_index(int(np.argmax(diff)), diff.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, diff / np.abs(exp64))
    return float(diff[index]), tuple(int(i) for i in index), float(np.max(rel))


def compare_with_runtime(model, program, specs, fetch, inputs=None, rtol: float = 1e-4,
                         atol: float = 1e-5) -> dict:
    """Run ``model`` in ONNX Runtime and ``program`` on the hybridfw executor on ``inputs``
    (arrays or tensors, one per spec; random ones when None); raise
    :class:`OnnxVerificationError` where an output differs. Returns the largest absolute
    difference per output name."""
    import hybridfw as hf
    from ..ops.elementwise import IntegerDivisionByZeroError
    arrays = example_inputs(specs) if inputs is None else [_as_array(v) for v in inputs]
    if len(arrays) != len(specs):
        raise ValueError(f"hf.onnx.export: {len(arrays)} example input(s) for {len(specs)} "
                         f"input(s) {[s.name for s in specs]}")
    device = program.device  # hybridfw runs where the model lives; ONNX Runtime on the CPU

    def run_hybridfw(feeds):
        return hf.static.Executor().run(
            program, feed={k: hf.from_numpy(np.array(v)).to(device) for k, v in feeds.items()},
            fetch_list=list(fetch), return_numpy=True)
    feeds = {spec.name: array for spec, array in zip(specs, arrays)}
    try:
        expected = run_hybridfw(feeds)
    except IntegerDivisionByZeroError:
        if inputs is not None:
            raise
        # random integers divided by random integers: draw them without zeros
        feeds = {s.name: a for s, a in zip(specs, example_inputs(specs, low=1))}
        expected = run_hybridfw(feeds)
    got = run_onnx(model, feeds)
    report = {}
    for i, (g, e) in enumerate(zip(got, expected)):
        name, e = f"output_{i}", _as_array(e)
        if g.shape != e.shape:
            raise OnnxVerificationError(
                f"hf.onnx.export(verify=True): output {name!r} has shape {g.shape} in ONNX "
                f"Runtime but {e.shape} in hybridfw")
        if g.dtype != e.dtype:
            raise OnnxVerificationError(
                f"hf.onnx.export(verify=True): output {name!r} has dtype {g.dtype} in ONNX "
                f"Runtime but {e.dtype} in hybridfw")
        if e.dtype.kind in "biu":
            bad = g != e
            if bad.any():
                index = tuple(int(j) for j in np.argwhere(bad)[0])
                raise OnnxVerificationError(
                    f"hf.onnx.export(verify=True): output {name!r} differs at {int(bad.sum())} "
                    f"element(s), first at index {index}: ONNX Runtime {g[index]!r}, hybridfw "
                    f"{e[index]!r}")
            report[name] = 0.0
            continue
        largest, index, rel = _largest(g, e)
        if not np.allclose(g, e, rtol=rtol, atol=atol, equal_nan=True):
            raise OnnxVerificationError(
                f"hf.onnx.export(verify=True): ONNX Runtime and hybridfw disagree on output "
                f"{name!r}: largest absolute difference {largest:.3g} at index {index} (ONNX "
                f"Runtime {g[index]!r}, hybridfw {e[index]!r}), largest relative difference "
                f"{rel:.3g}; tolerance rtol={rtol}, atol={atol}")
        report[name] = largest
    return report
