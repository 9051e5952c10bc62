"""transposed_operands: a transposed matrix read on the right of at least MIN_READS products
is copied once (contiguous) and the products read the copy; fewer reads, left operands and
fetched transposes are left alone; values equal a numpy computation."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.static.passes import transposed_operands

RNG = np.random.default_rng(11)


def _chain(steps, left=False, fetch_transpose=False):
    """h_{t+1} = tanh(h_t @ w.T) (or tanh(w.T @ h_t), ``left``) over ``steps`` steps."""
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        w = hf.static.data("w", [6, 6], "float64")
        h = hf.static.data("h", [6, 6], "float64")
        wt = w.T
        for _ in range(steps):
            h = (wt @ h if left else h @ wt).tanh()
    feed = {"w": RNG.standard_normal((6, 6)) * 0.5, "h": RNG.standard_normal((6, 6))}
    want = feed["h"]
    for _ in range(steps):
        want = np.tanh(feed["w"].T @ want if left else want @ feed["w"].T)
    return prog, ([h, wt] if fetch_transpose else [h]), feed, want


def _ops(program, op_type):
    return [op for op in program.global_block().ops if op.type == op_type]


def _run(program, fetch, feed):
    return hf.static.Executor().run(program, feed=feed, fetch_list=[f.name for f in fetch],
                                    return_numpy=True)


def test_often_read_right_transpose_is_copied_once(apply_pass):
    steps = transposed_operands.MIN_READS
    prog, fetch, feed, want = _chain(steps)
    out = apply_pass(transposed_operands.run, prog, fetch)
    copies = _ops(out, "copy")
    assert len(copies) == 1, out
    permute = _ops(out, "permute")[0]
    assert copies[0].inputs[0] == permute.outputs[0]
    ops = out.global_block().ops
    assert ops.index(copies[0]) == ops.index(permute) + 1
    assert all(m.inputs[1] == copies[0].outputs[0] for m in _ops(out, "matmul")), out
    np.testing.assert_allclose(_run(out, fetch, feed)[0], want, rtol=1e-12)


@pytest.mark.parametrize("case", ["few reads", "left operand", "fetched"])
def test_left_alone(apply_pass, case):
    steps = transposed_operands.MIN_READS - (case == "few reads")
    prog, fetch, feed, want = _chain(steps, left=case == "left operand",
                                     fetch_transpose=case == "fetched")
    out = apply_pass(transposed_operands.run, prog, fetch)
    assert _ops(out, "copy") == [], out
    np.testing.assert_allclose(_run(out, fetch, feed)[0], want, rtol=1e-12)


def test_in_the_pipeline_the_lstm_backward_reads_a_contiguous_transpose():
    """Through to_static: an unrolled recurrence's backward reads W.T at every step; after
    optimization its products read one C-contiguous copy, and gradients equal eager's."""
    def cell_loop(x, w):
        h = x[0]
        for t in range(1, 8):
            h = (h @ w + x[t]).tanh()
        return h.sum()
    x = hf.tensor(RNG.standard_normal((8, 3, 4)).astype(np.float32))
    w_np = RNG.standard_normal((4, 4)).astype(np.float32) * 0.5
    w = hf.tensor(w_np, requires_grad=True)
    static = hf.jit.to_static(cell_loop)
    static(x, w).backward()
    got = w.grad.numpy().copy()
    w.grad = None
    cell_loop(x, w).backward()
    np.testing.assert_allclose(got, w.grad.numpy(), rtol=1e-5)
    backward = static.get_concrete_program(x, w).backward_program
    optimized = hf.static.optimize(backward)
    assert len(_ops(optimized, "copy")) == 1, optimized
