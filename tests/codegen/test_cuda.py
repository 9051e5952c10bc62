"""The cupy path: a fused group as one ElementwiseKernel equals the numpy kernels (GPU only),
and its CUDA source is generated from the ops' rules (checked on the CPU)."""
from __future__ import annotations

import numpy as np
import pytest

from hybridfw.ops.registry import get_op
from hybridfw.static.lowering import cuda

GROUP = (("mul", ("in0", 2.0), ()), ("add", ("op0", "in1"), ()), ("relu", ("op1",), ()),
         ("sigmoid", ("op2",), ()), ("lt", ("op3", 0.75), ()),
         ("where", ("op4", "op3", "in1"), ()))


def test_kernel_source_casts_and_inlines():
    in_params, out_params, body = cuda.kernel_source(["float32", "int32"], GROUP)
    assert in_params == "float in0, int in1" and out_params == "float out0"
    lines = body.splitlines()
    assert len(lines) == len(GROUP) + 1 and lines[-1] == "out0 = v5;"
    assert "((float)in1)" in lines[1]            # the int input cast to the compute dtype
    assert lines[4].startswith("bool v4")        # a comparison gives bool
    assert cuda.kernel_source(["float32"], (("pow", ("in0", 2.0), ()),
                                            ("neg", ("op0",), ()))) is None  # no C form


@pytest.mark.gpu
def test_elementwise_kernel_equals_numpy(monkeypatch):
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001
        pytest.skip("no CUDA device")
    monkeypatch.setenv(cuda.ENV_VAR, "1")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 33)).astype(np.float32)
    b = rng.integers(-3, 4, (33,)).astype(np.int32)
    op = get_op("fused_elementwise")
    expected = op.kernel(np, a, b, ops=GROUP, dtype="float32")
    got = op.kernel(cupy, cupy.asarray(a), cupy.asarray(b), ops=GROUP, dtype="float32")
    assert cuda._kernels, "the ElementwiseKernel path did not run"
    np.testing.assert_allclose(cupy.asnumpy(got), expected, rtol=1e-6)
