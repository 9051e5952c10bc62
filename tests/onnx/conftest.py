"""Shared helpers of the ONNX export tests: run an exported model in ONNX Runtime and compare
with hybridfw's eager result (an independent path: the eager interpreter, not the program)."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import hybridfw as hf  # noqa: E402


def leaves(value) -> list:
    """The tensors of a (nested tuple/list of) result(s), in order, as numpy arrays."""
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in leaves(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in leaves(v)]
    return [value.detach().numpy()]


def eager(model, *arrays):
    """``model(*arrays)`` eagerly, in eval mode when it is a module, without gradients."""
    if isinstance(model, hf.nn.Module):
        model.eval()
    with hf.no_grad():
        return leaves(model(*(hf.from_numpy(np.array(a)) for a in arrays)))


def run_ort(path, *arrays) -> list:
    import onnxruntime as ort
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, arrays)))


def assert_matches_eager(path, model, *arrays, rtol=1e-4, atol=1e-5):
    got, expected = run_ort(path, *arrays), eager(model, *arrays)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, e.shape, g.dtype, e.dtype)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
    return got
