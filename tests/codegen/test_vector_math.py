"""The vectorizable float32 exp/tanh/sigmoid of compiled regions, views and concat in regions,
and what stays out of regions (large matmuls, many-operand ops, trailing views)."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.static import Executor, Program, data, program_guard

RNG = np.random.default_rng(11)
SPECIAL = np.array([0.0, -0.0, 1e-8, -1e-30, 0.6249, 0.625, -0.625, 9.0, 10.0, 20.0, -20.0,
                    88.7, 88.72, 88.8, 89.0, -87.0, -88.0, -100.0, -103.9, -104.0, -200.0,
                    np.inf, -np.inf, np.nan], np.float32)


@pytest.fixture(scope="module")
def vmath(need_numba_module):
    import numba

    from hybridfw.static.lowering import vmath as vm

    def over(fn):
        @numba.njit(error_model="numpy")
        def loop(a, out):
            for i in range(a.shape[0]):
                out[i] = fn(a[i])
        return lambda a: (loop(a, out := np.empty_like(a)), out)[1]
    return {"exp": over(vm.exp32), "tanh": over(vm.tanh32), "sigmoid": over(vm.sigmoid32)}


@pytest.fixture(scope="module")
def need_numba_module():
    from hybridfw.static import lowering
    if not lowering.available(announce=False):
        pytest.skip(f"compiled regions unavailable: {lowering.unavailable_reason()}")


def _ulps(a, b):
    """Distance in float32 units in the last place (same sign assumed)."""
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


def test_exp32_within_one_ulp_of_the_exact_value(vmath):
    x = np.concatenate([RNG.uniform(-87, 88, 200_000), RNG.uniform(-1, 1, 50_000)]
                       ).astype(np.float32)
    got = vmath["exp"](x)
    exact = np.exp(x.astype(np.float64)).astype(np.float32)  # correctly rounded (nearly)
    assert _ulps(got, exact).max() <= 1


def test_exp32_special_values_match_numpy(vmath):
    with np.errstate(all="ignore"):
        expected = np.exp(SPECIAL.astype(np.float64)).astype(np.float32)
    got = vmath["exp"](SPECIAL)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    finite = ~np.isnan(expected)
    # overflow to inf, underflow through the subnormals to 0, as numpy's float32 exp
    np.testing.assert_allclose(got[finite], expected[finite], rtol=2e-7, atol=2e-45)
    assert got[SPECIAL == np.inf][0] == np.inf and got[SPECIAL == -np.inf][0] == 0.0
    assert 0 < got[SPECIAL == np.float32(-100.0)][0] < 1e-38  # a subnormal, not 0


def test_tanh32_and_sigmoid32_close_to_numpy(vmath):
    x = np.concatenate([RNG.uniform(-12, 12, 200_000), RNG.uniform(-0.7, 0.7, 50_000), SPECIAL]
                       ).astype(np.float32)
    got = vmath["tanh"](x)
    expected = np.tanh(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    ok = ~np.isnan(x)
    assert _ulps(got[ok], expected[ok]).max() <= 2
    assert np.signbit(got[x == 0]).tolist() == np.signbit(x[x == 0]).tolist()  # -0.0 stays
    # sigmoid: the interpreter kernel's formula, tanh(x/2)/2 + 1/2
    s = vmath["sigmoid"](x[ok])
    ref = np.tanh(x[ok] * np.float32(0.5)) * np.float32(0.5) + np.float32(0.5)
    np.testing.assert_allclose(s, ref, rtol=1e-6, atol=1e-7)
    assert s.min() >= 0 and s.max() <= 1


def _run_both(prog, feeds, fetch):
    expected = Executor(backend="interpreted").run(prog, feed=feeds, fetch_list=fetch,
                                                   return_numpy=True)
    exe = Executor(backend="compiled")
    got = exe.run(prog, feed=feeds, fetch_list=fetch, return_numpy=True)
    return expected, got, exe.compile(prog, feed=feeds, fetch_list=fetch).lowering


def test_lstm_cell_is_one_vectorized_region_reading_slices_in_place(need_numba):
    """gates -> four slices -> sigmoid/tanh -> cell state: one region, the slices become
    offsets into the gates array (no copies), exp/tanh the vmath versions."""
    h = 16
    prog = Program()
    with program_guard(prog):
        a = data("a", [8, 4 * h])
        b = data("b", [8, 4 * h])
        c = data("c", [8, h])
        gates = a + b
        i = gates[:, :h].sigmoid()
        f = gates[:, h:2 * h].sigmoid()
        g = gates[:, 2 * h:3 * h].tanh()
        o = gates[:, 3 * h:].sigmoid()
        c2 = f * c + i * g
        h2 = o * c2.tanh()
    feeds = {k: RNG.uniform(-4, 4, s).astype(np.float32)
             for k, s in (("a", (8, 4 * h)), ("b", (8, 4 * h)), ("c", (8, h)))}
    expected, got, lowered = _run_both(prog, feeds, [c2, h2])
    ga = feeds["a"] + feeds["b"]
    sig = 1 / (1 + np.exp(-ga.astype(np.float64)))
    ref_c = sig[:, h:2 * h] * feeds["c"] + sig[:, :h] * np.tanh(ga[:, 2 * h:3 * h])
    np.testing.assert_allclose(got[0], ref_c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], sig[:, 3 * h:] * np.tanh(ref_c), rtol=1e-5, atol=1e-6)
    for g_, e_ in zip(got, expected):
        np.testing.assert_allclose(g_, e_, rtol=1e-6, atol=1e-7)
    assert len(lowered.regions) == 1 and not lowered.left_out, lowered.report()
    source = lowered.source
    assert "_hf_sigmoid32(" in source and "_hf_tanh32(" in source
    assert f"+ {h}]" in source and f"+ {3 * h}]" in source  # slices read at an offset


def test_permute_reshape_getitem_views_match_the_interpreter(need_numba):
    prog = Program()
    with program_guard(prog):
        x = data("x", [3, 4, 5])
        y = data("y", [5, 4, 3])
        a = x.permute(2, 1, 0) * y + 1.0                # strided read
        b = x.reshape([12, 5])[::2, 1:4].exp() * 2.0    # reshape keeps order; step 2 slice
        c = x[1, :, None, 2:].reshape([4, 3]) - 1.0     # int, None, slice, then a real reshape
        d = x.reshape([5, 12]) + 0.5                    # a reshape that regroups elements
        e = x[-1].unsqueeze(0) * 3.0                    # negative int and a size-1 dim
    feeds = {"x": RNG.standard_normal((3, 4, 5)).astype(np.float32),
             "y": RNG.standard_normal((5, 4, 3)).astype(np.float32)}
    expected, got, lowered = _run_both(prog, feeds, [a, b, c, d, e])
    xv, yv = feeds["x"], feeds["y"]
    refs = [xv.transpose(2, 1, 0) * yv + 1, np.exp(xv.reshape(12, 5)[::2, 1:4]) * 2,
            xv[1, :, None, 2:].reshape(4, 3) - 1, xv.reshape(5, 12) + 0.5, xv[-1][None] * 3]
    for g_, e_, r_ in zip(got, expected, refs):
        np.testing.assert_allclose(g_, r_, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(g_, e_, rtol=1e-6, atol=0)
    kinds = {op.type for region in lowered.regions for op in region.ops}
    assert {"permute", "reshape", "getitem"} <= kinds, lowered.report()


def test_concat_writes_its_pieces_computed_in_place(need_numba):
    prog = Program()
    with program_guard(prog):
        x = data("x", [6, 4])
        y = data("y", [6, 3])
        z = hf.cat([x.tanh(), (y * 2.0).sigmoid(), x[:, :1] + 1.0], dim=1) * 0.5
    feeds = {"x": RNG.standard_normal((6, 4)).astype(np.float32),
             "y": RNG.standard_normal((6, 3)).astype(np.float32)}
    expected, got, lowered = _run_both(prog, feeds, [z])
    xv, yv = feeds["x"], feeds["y"]
    ref = np.concatenate([np.tanh(xv), 1 / (1 + np.exp(-2 * yv)), xv[:, :1] + 1], axis=1) * 0.5
    np.testing.assert_allclose(got[0], ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6, atol=1e-7)
    assert len(lowered.regions) == 1 and not lowered.left_out, lowered.report()
    # the tanh/sigmoid pieces are computed in the concat's loops: no temporaries for them
    assert lowered.source.count("np.empty(") == 2  # the concat result and the scaled result


def test_large_matmul_many_operands_and_trailing_views_stay_interpreted(need_numba):
    prog = Program()
    with program_guard(prog):
        w = data("w", [64, 64])
        xs = [data(f"x{k}", [64, 64]) for k in range(10)]
        total = xs[0]
        for x in xs[1:]:
            total = total + x       # fused into one 10-input group
        m = (total.tanh() @ w).sigmoid() * 2.0
        v = (m + 1.0).T             # ends in a view
    prog = hf.static.optimize(prog, fetch=[v])  # fusion makes the 10-input group
    feeds = {f"x{k}": RNG.standard_normal((64, 64)).astype(np.float32) for k in range(10)}
    feeds["w"] = RNG.standard_normal((64, 64)).astype(np.float32) * 0.1
    expected, got, lowered = _run_both(prog, feeds, [v.name])
    ref = (np.tanh(sum(feeds[f"x{k}"] for k in range(10))) @ feeds["w"])
    ref = (2 / (1 + np.exp(-ref)) + 1).T
    np.testing.assert_allclose(got[0], ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6, atol=1e-6)
    reasons = {op.type: reason for _, op, reason in lowered.left_out}
    assert "reads 10 arrays" in reasons["fused_elementwise"], lowered.report()
    assert "numpy's kernel is as fast" in reasons["matmul"]
    assert "view at the end of a region" in reasons["permute"]
    assert [op.type for r in lowered.regions for op in r.ops] == ["fused_elementwise"], \
        lowered.report()  # sigmoid(m) * 2 + 1 after the matmul; tanh alone stays a kernel


def test_non_contiguous_feeds_reach_the_c_array_regions(need_numba):
    prog = Program()
    with program_guard(prog):
        x = data("x", [4, 6])
        y = (x * 2.0 + 1.0).tanh()
    base = RNG.standard_normal((6, 4)).astype(np.float32)
    feeds = {"x": base.T}  # F-ordered: the region gets a C copy
    expected, got, lowered = _run_both(prog, feeds, [y])
    np.testing.assert_allclose(got[0], np.tanh(base.T * 2 + 1), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6, atol=0)
    assert len(lowered.regions) == 1


def _lstm_cell_loop():
    """The hand-written LSTM of the slice-gradient pass tests (W4's structure; hidden size
    from w_hh, steps from x), loaded by path as test_control_flow loads the conversion cases."""
    path = pathlib.Path(__file__).parents[1] / "static" / "passes" / "test_slice_gradients.py"
    spec = importlib.util.spec_from_file_location("_codegen_slice_gradient_cases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._lstm


def test_hand_written_lstm_trains_through_compiled_cells(need_numba):
    """W4's structure, small: every elementwise op of the cell, forward and backward, runs in
    compiled regions (only matmuls, reductions and views stay numpy); gradients equal the
    interpreter's and eager autograd's."""
    lstm = _lstm_cell_loop()
    rng = np.random.default_rng(5)
    x = hf.tensor(rng.standard_normal((4, 8, 6)).astype(np.float32))
    init = [rng.uniform(-0.3, 0.3, s).astype(np.float32) for s in ((6, 64), (16, 64), (64,))]
    grads = {}
    for backend in ("eager", "interpreted", "compiled"):
        ws = [hf.tensor(w, requires_grad=True) for w in init]
        fn = lstm if backend == "eager" else hf.jit.to_static(lstm, backend=backend)
        fn(x, *ws).sum().backward()
        grads[backend] = [w.grad.numpy() for w in ws]
        if backend == "compiled":
            report = fn.compile_report()
    for a, b, c in zip(grads["eager"], grads["interpreted"], grads["compiled"]):
        np.testing.assert_allclose(c, b, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(c, a, rtol=1e-4, atol=1e-6)
    forward, backward = report.split("backward program:")
    assert "sigmoid" in forward.split("interpreted:")[0] and "tanh" in forward
    interpreted = [line for line in report.splitlines() if line.strip().startswith("op ")]
    for line in interpreted:  # what stays numpy, and why
        kind = line.split()[2].rstrip(":")
        # no cell math (sum: the bias gradient, one column sum of the stacked step gradients;
        # concat: the stacks of the states and inputs dW and dU read, copies of earlier values)
        assert kind in ("matmul", "permute", "mul", "getitem_backward", "sum", "concat"), line
        assert ("numpy's kernel" in line or "view at the end" in line or "single" in line or
                "no lowering rule" in line or "copies values made before it" in line), line
    # the first step's h = x[0] @ w * 0 slice, dW, dU, db and their two stacks
    assert len(interpreted) <= 9, report
    assert "concat" in backward.split("interpreted:")[0], report  # slice gradients compiled
