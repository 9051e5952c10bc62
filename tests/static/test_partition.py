"""split_forward_backward: a forward program and a backward program run separately (backward
of while loops through the stack token fed from the forward run) give what the unsplit program
and eager autograd give."""
import numpy as np
import pytest

import hybridfw as hf

S = hf.static


def _model(w, x, n, scale):
    """cond + while (trip count fed at run time) + matmul, the same code eager and static."""
    def body(i, h):
        h = (h.unsqueeze(0) @ w).squeeze(0).tanh()
        h = S.nn.cond(h.sum() > 0, lambda: h * 2.0, lambda: h - 1.0)
        return i + 1, h
    _, h = S.nn.while_loop(lambda i, h: i < n, body, [hf.tensor(0), x])
    h = S.nn.cond(scale.sum() > 0, lambda: (h * scale).exp(), lambda: h * h)
    return (h @ w).sum()


def _build():
    hf.manual_seed(0)
    w = hf.randn(3, 3, requires_grad=True) * 0.5
    w = w.detach().requires_grad_(True)
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [3])
        n = S.data("n", [], "int64")
        scale = S.data("scale", [3])
        seed = S.data("seed", [])
        loss = _model(w, x, n, scale)
        gw, gx = S.gradients(loss, [w, x], target_gradients=[seed])
    return w, prog, loss.name, [gw.name, gx.name]


def _eager(w, feed, seed):
    x = feed["x"].clone().requires_grad_(True)
    w.grad = None
    loss = _model(w, x, int(feed["n"].item()), feed["scale"])
    loss.backward(hf.tensor(seed))
    return loss.item(), w.grad.numpy(), x.grad.numpy()


FEEDS = [
    {"x": hf.tensor([0.5, -0.2, 0.9]), "n": hf.tensor(3), "scale": hf.tensor([0.3, 0.2, -0.1])},
    {"x": hf.tensor([-0.4, 0.1, 0.3]), "n": hf.tensor(1), "scale": hf.tensor([-1.0, 0.2, 0.1])},
    {"x": hf.tensor([0.2, 0.7, -0.6]), "n": hf.tensor(0), "scale": hf.tensor([0.5, 0.5, 0.5])},
]


@pytest.mark.parametrize("optimized", [False, True])
def test_split_runs_forward_and_backward_in_separate_runs_like_unsplit_and_eager(optimized):
    w, prog, loss, grads = _build()
    if optimized:
        prog = S.optimize(prog, fetch=[loss] + grads)
    fwd, bwd, saved = S.split_forward_backward(prog, [loss], grads)
    S.verify(fwd)
    S.verify(bwd)
    assert bwd.feeds == saved + ["seed"] and "seed" not in fwd.feeds
    assert any(bwd.global_block().var(n).shape == (0,) for n in saved)  # the loop's stack token
    exe = S.Executor(debug_poison=True)
    # all forwards first, then the backwards in reverse order: each token carries its own stack
    forwards = [exe.run(fwd, feed=f, fetch_list=[loss] + saved) for f in FEEDS]
    for feed, seed, (value, *kept) in reversed(list(zip(FEEDS, (1.0, 0.5, 2.0), forwards))):
        got = exe.run(bwd, feed={**dict(zip(saved, kept)), "seed": hf.tensor(seed)},
                      fetch_list=grads, return_numpy=True)
        whole = exe.run(prog, feed={**feed, "seed": hf.tensor(seed)}, fetch_list=[loss] + grads,
                        return_numpy=True)
        ref_loss, ref_gw, ref_gx = _eager(w, feed, seed)
        np.testing.assert_allclose(value.item(), ref_loss, rtol=1e-5)
        np.testing.assert_allclose(whole[0], ref_loss, rtol=1e-5)
        for g, u, r in zip(got, whole[1:], (ref_gw, ref_gx)):
            np.testing.assert_array_equal(g, u)
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


def test_seeds_default_to_the_inputs_only_backward_reads_and_can_be_given():
    _, prog, loss, grads = _build()
    _, bwd, saved = S.split_forward_backward(prog, loss, grads)
    _, bwd2, saved2 = S.split_forward_backward(prog, [loss], grads, seed_names=["seed"])
    assert saved == saved2 and bwd.feeds == bwd2.feeds == saved + ["seed"]
    assert "x" not in saved  # x is read by the forward loop only; its gradient needs no copy


def test_a_saved_value_a_fetch_shares_and_a_forward_input_the_backward_reads():
    w = hf.tensor([1.0, 2.0], requires_grad=True)
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [2])
        seed = S.data("seed", [])
        y = x * w
        loss = y.exp().sum()
        gw, = S.gradients(loss, [w], target_gradients=[seed])
    fwd, bwd, saved = S.split_forward_backward(prog, [loss, y], [gw])
    assert "x" in saved and "x" in fwd.feeds
    exe = S.Executor()
    xv = hf.tensor([0.5, -1.0])
    kept = exe.run(fwd, feed={"x": xv}, fetch_list=[loss.name, y.name] + saved)[2:]
    got, = exe.run(bwd, feed={**dict(zip(saved, kept)), "seed": hf.tensor(3.0)},
                   fetch_list=[gw], return_numpy=True)
    np.testing.assert_allclose(got, 3.0 * xv.numpy() * np.exp(xv.numpy() * w.detach().numpy()),
                               rtol=1e-6)


def test_split_errors_name_the_problem():
    _, prog, loss, grads = _build()
    with pytest.raises(ValueError, match="depend on the backward seed"):
        S.split_forward_backward(prog, [grads[0]], grads, seed_names=["seed"])
    with pytest.raises(ValueError, match="'nope' is not a value"):
        S.split_forward_backward(prog, [loss], ["nope"])
    with pytest.raises(ValueError, match="seed 'x2' is not an input"):
        S.split_forward_backward(prog, [loss], grads, seed_names=["x2"])
    fwd, bwd, saved = S.split_forward_backward(prog, [loss], grads)
    stack = next(n for n in saved if bwd.global_block().var(n).shape == (0,))
    kept = S.Executor().run(fwd, feed=FEEDS[0], fetch_list=[loss] + saved)[1:]
    feed = {**dict(zip(saved, kept)), "seed": hf.tensor(1.0), stack: np.zeros(0, np.int64)}
    with pytest.raises(RuntimeError, match=f"while_grad: '{stack}' holds no stack"):
        S.Executor().run(bwd, feed=feed, fetch_list=grads)


def _nested(x, w, n, m):
    def body(i, h):
        h = S.nn.cond(i % 2 == 0, lambda: hf.tanh(h * w), lambda: h.sin() + w * w)
        _, h = S.nn.while_loop(lambda j, v: j < m,
                               lambda j, v: (j + 1, v * (0.9 + 0.1 * w.cos())), [0, h])
        return i + 1, h
    y = S.nn.cond(x.sum() > 0.0, lambda: S.nn.while_loop(lambda i, h: i < n, body, [0, x])[1],
                  lambda: x * w)
    return (y * y * w).sum()


def test_nested_loops_push_inner_tokens_that_survive_the_split():
    prog = S.Program()
    with S.program_guard(prog):
        x, w = S.data("x", [3], "float64"), S.data("w", [3], "float64")
        seed = S.data("seed", [], "float64")
        loss = _nested(x, w, S.data("n", [], "int64"), S.data("m", [], "int64"))
        grads = [g.name for g in S.gradients(loss, [x, w], target_gradients=[seed])]
    fwd, bwd, saved = S.split_forward_backward(prog, [loss], grads)
    S.verify(fwd)
    S.verify(bwd)
    exe = S.Executor(debug_poison=True)
    rng = np.random.default_rng(1)
    for n, m, sign in ((3, 2, 1.0), (2, 0, 1.0), (2, 2, -1.0)):
        feed = {"x": sign * np.abs(rng.standard_normal(3)), "w": rng.standard_normal(3),
                "n": np.array(n), "m": np.array(m)}
        kept = exe.run(fwd, feed=feed, fetch_list=[loss] + saved)[1:]
        got = exe.run(bwd, feed={**dict(zip(saved, kept)), "seed": np.array(1.0)},
                      fetch_list=grads, return_numpy=True)
        eager = [hf.tensor(feed[k], requires_grad=True) for k in ("x", "w")]
        _nested(*eager, n, m).backward()
        for g, t in zip(got, eager):
            np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_parameter_writes_go_with_the_forward_program():
    hf.manual_seed(2)
    bn, lin = hf.nn.BatchNorm1d(3), hf.nn.Linear(3, 1)
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None, 3])
        seed = S.data("seed", [])
        loss = lin(bn(x)).sum()
        gw, = S.gradients(loss, [lin.weight], target_gradients=[seed])
    fwd, bwd, saved = S.split_forward_backward(prog, [loss], [gw])
    assert "assign_param" in str(fwd) and "assign_param" not in str(bwd)
    eager_bn = hf.nn.BatchNorm1d(3)
    xv = hf.randn(5, 3)
    kept = S.Executor().run(fwd, feed={"x": xv}, fetch_list=[loss] + saved)[1:]
    S.Executor().run(bwd, feed={**dict(zip(saved, kept)), "seed": hf.tensor(1.0)},
                     fetch_list=[gw])
    eager_bn(xv)
    np.testing.assert_allclose(bn.running_var.numpy(), eager_bn.running_var.numpy(), rtol=1e-6)
    assert bn.num_batches_tracked.item() == 1
