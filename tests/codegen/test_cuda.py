"""The cupy path: a fused group as one ElementwiseKernel equals the numpy kernels (GPU only),
and its CUDA source is generated from the ops' rules (checked on the CPU: compiled and run as
C++)."""
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


# ----------------------------------------------------------------- the CUDA bodies, on the CPU
# With no GPU, each generated ElementwiseKernel body is compiled as C++ (the body's syntax and
# types are C's: the same operators, casts and <cmath> functions) and run over test values, and
# its results are compared with the numpy kernels: a template that does not parse, casts wrongly
# or computes something else fails here, not first on a GPU.

_VALUES = [-3.5, -1.0, -0.25, 0.0, 0.5, 1.0, 2.75, 40.0]
_CXX_HEADER = """#include <cmath>
#include <cstdio>
using std::exp; using std::log; using std::log1p; using std::sqrt; using std::sin; using std::cos;
using std::tanh; using std::min;
"""


def _cuda_ops() -> list:
    """(op name, its CUDA template) for every fusible op whose lowering rule has one (the
    ElementwiseKernel path serves fused groups only)."""
    from hybridfw.ops.registry import all_ops
    from hybridfw.static.fused import FUSIBLE_OPS
    return sorted((name, op.lower.cuda) for name, op in all_ops().items()
                  if name in FUSIBLE_OPS and getattr(getattr(op, "lower", None), "cuda", None))


def _arity(template: str) -> int:
    import string
    fields = [f for _, f, _, _ in string.Formatter().parse(template) if f and f.isdigit()]
    return max(int(f) for f in fields) + 1


def _cases() -> list:
    """(label, group, input dtypes, input arrays): each CUDA op alone on float32 (a bool
    condition for where), an int32 operand cast to float32, and the module's mixed GROUP."""
    n = len(_VALUES)
    grid = np.array(_VALUES, np.float32)
    cases = []
    for name, template in _cuda_ops():
        k = _arity(template)
        dtypes = ["bool"] + ["float32"] * (k - 1) if name == "where" else ["float32"] * k
        arrays = [np.roll(grid, 3 * i) for i in range(k)]
        if name == "where":
            arrays[0] = (np.arange(n) % 3 == 0)
        group = ((name, tuple(f"in{i}" for i in range(k)), ()),)
        cases.append((name, group, dtypes, arrays))
    ints = np.array([-3, -1, 0, 1, 2, 5, 7, 9], np.int32)
    cases.append(("mixed group", GROUP, ["float32", "int32"], [grid, ints]))
    cases.append(("int operand", (("add", ("in0", "in1"), ()), ("exp", ("op0",), ())),
                  ["int32", "float32"], [ints, grid / 8]))
    return cases


def test_every_cuda_body_compiles_as_cxx_and_equals_numpy(tmp_path):
    import shutil
    import subprocess
    compiler = shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no C++ compiler to check the CUDA bodies with")
    from hybridfw.dtypes import as_dtype
    from hybridfw.ops.registry import TensorMeta
    from hybridfw.static.fused import _infer_steps
    fused = get_op("fused_elementwise")
    cases = _cases()
    assert len(cases) >= 15  # every CUDA template is covered
    source = [_CXX_HEADER]
    expected = []
    for c, (label, group, dtypes, arrays) in enumerate(cases):
        generated = cuda.kernel_source(dtypes, group)
        assert generated is not None, label
        in_params, out_params, body = generated
        out_type, out_name = out_params.rsplit(" ", 1)
        source.append(f"static void k{c}({in_params}, {out_type} &{out_name}) {{\n{body}\n}}")
        metas = [TensorMeta(a.shape, as_dtype(a.dtype)) for a in arrays]
        dtype = _infer_steps(metas, group)[-1][1]
        with np.errstate(all="ignore"):
            want = np.asarray(fused.kernel(np, *arrays, ops=group, dtype=dtype.name))
        expected.append((label, want, out_type))
    main = ["int main() {"]
    for c, (label, group, dtypes, arrays) in enumerate(cases):
        out_type = expected[c][2]
        main.append("  {")
        for i, (dt, a) in enumerate(zip(dtypes, arrays)):
            ctype = cuda._CTYPES[dt]
            values = ", ".join(repr(int(v)) if dt in ("bool", "int32") else f"{float(v)!r}f"
                               for v in a)
            main.append(f"    {ctype} a{i}[] = {{{values}}};")
        args = ", ".join(f"a{i}[j]" for i in range(len(arrays)))
        main.append(f"    for (int j = 0; j < {len(_VALUES)}; j++) {{ {out_type} r; k{c}({args}, r);"
                    f" std::printf(\"%.9g \", (double)r); }}\n    std::printf(\"\\n\");\n  }}")
    main.append("  return 0;\n}")
    path = tmp_path / "bodies.cpp"
    path.write_text("\n".join(source + main))
    binary = tmp_path / "bodies"
    built = subprocess.run([compiler, "-O1", "-o", str(binary), str(path)], capture_output=True,
                           text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    lines = subprocess.run([str(binary)], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert len(lines) == len(cases)
    for (label, want, _), line in zip(expected, lines):
        got = np.array([float(v) for v in line.split()])
        np.testing.assert_allclose(got, want.astype(np.float64), rtol=2e-6, atol=1e-30,
                                   equal_nan=True, err_msg=label)
