"""Double backward (create_graph=True) through a to_static program: the gradients come from an
eager re-run of the original function (hybridfw/jit/eager_replay.py)."""
import gc

import numpy as np
import pytest

import hybridfw as hf

nn = hf.nn


def _critic(seed=0, batch_norm=False, dropout=0.0):
    hf.manual_seed(seed)
    layers = [nn.Linear(4, 8)]
    if batch_norm:
        layers.append(nn.BatchNorm1d(8))
    layers.append(nn.Tanh())
    if dropout:
        layers.append(nn.Dropout(dropout))
    layers += [nn.Linear(8, 8), nn.Tanh()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    layers.append(nn.Linear(8, 1))
    return nn.Sequential(*layers)


def _grads(params):
    return [None if p.grad is None else p.grad.numpy().copy() for p in params]


def _penalty_step(critic, generator, real, z, eps):
    """WGAN-GP's gradient penalty, its gradients into the critic and (through the
    interpolated input's history) into the generator."""
    fake = generator(z)
    x_hat = eps * real + (1 - eps) * fake
    out = critic(x_hat)
    (g,) = hf.autograd.grad(out.sum(), [x_hat], create_graph=True)
    penalty = ((g.flatten(1).norm(dim=1) - 1) ** 2).mean()
    penalty.backward()
    return penalty.item(), _grads(critic.parameters()), _grads(generator.parameters())


def _data():
    rng = np.random.default_rng(0)
    return (hf.tensor(rng.standard_normal((6, 4)).astype("float32")),
            hf.tensor(rng.standard_normal((6, 3)).astype("float32")),
            hf.tensor(rng.random((6, 1)).astype("float32")))


def _assert_grads_equal(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_gradient_penalty_equals_eager():
    """The penalty and every gradient (the critic's parameters, and the generator's, reached
    through the interpolated input) equal those of the eager critic."""
    real, z, eps = _data()
    results = []
    for static in (False, True):
        critic = _critic()
        hf.manual_seed(1)
        generator = nn.Linear(3, 4)
        if static:
            critic = hf.jit.to_static(critic)
        results.append(_penalty_step(critic, generator, real, z, eps))
    (pe, ce, ge), (ps, cs, gs) = results
    np.testing.assert_allclose(ps, pe, rtol=1e-5)
    assert cs[0] is not None and gs[0] is not None
    _assert_grads_equal(cs, ce)
    _assert_grads_equal(gs, ge)


def test_gradient_penalty_matches_torch():
    torch = pytest.importorskip("torch")
    real, z, eps = _data()
    critic = _critic()
    static = hf.jit.to_static(critic)
    x_hat = hf.tensor((eps * real).numpy() + (1 - eps).numpy() * z.numpy()[:, [0, 1, 2, 0]],
                      requires_grad=True)
    (g,) = hf.autograd.grad(static(x_hat).sum(), [x_hat], create_graph=True)
    ((g.norm(dim=1) - 1) ** 2).mean().backward()
    tc = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8),
                             torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()
    with torch.no_grad():
        for tp, p in zip(tc.parameters(), critic.parameters()):
            tp.copy_(torch.from_numpy(p.detach().numpy().astype("float64")))
    tx = torch.from_numpy(x_hat.detach().numpy().astype("float64")).requires_grad_()
    (tg,) = torch.autograd.grad(tc(tx).sum(), [tx], create_graph=True)
    ((tg.norm(dim=1) - 1) ** 2).mean().backward()
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-4, atol=1e-6)
    for tp, p in zip(tc.parameters(), critic.parameters()):
        want = np.zeros(tuple(tp.shape)) if tp.grad is None else tp.grad.numpy()
        got = np.zeros(p.shape) if p.grad is None else p.grad.numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_hessian_vector_product():
    """grad of (grad f . v) is H v, H the hand-computed Hessian of
    f(x) = sum(x^3) + sum(x[:-1] * x[1:])."""
    @hf.jit.to_static
    def f(x):
        return (x ** 3).sum() + (x[:-1] * x[1:]).sum()

    xv = np.array([0.5, -1.0, 2.0, 1.5])
    vv = np.array([1.0, 2.0, -1.0, 0.5])
    hessian = np.diag(6 * xv) + np.eye(4, k=1) + np.eye(4, k=-1)
    x = hf.tensor(xv, dtype="float64", requires_grad=True)
    v = hf.tensor(vv, dtype="float64")
    (g,) = hf.autograd.grad(f(x), [x], create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(),
                               3 * xv ** 2 + np.r_[xv[1:], 0] + np.r_[0, xv[:-1]])
    (hv,) = hf.autograd.grad(g, [x], grad_outputs=v)
    np.testing.assert_allclose(hv.numpy(), hessian @ vv, rtol=1e-12)
    # and a third order: d/dx sum(H v) = 6 v on the diagonal
    (g,) = hf.autograd.grad(f(x), [x], create_graph=True)
    (hv,) = hf.autograd.grad((g * v).sum(), [x], create_graph=True)
    (third,) = hf.autograd.grad(hv.sum(), [x])
    np.testing.assert_allclose(third.numpy(), 6 * vv, rtol=1e-12)


def test_python_arguments_and_nested_tensors():
    """Python values (positional and keyword) are the program's own; tensors inside a tuple
    are re-run in their places; a tensor passed twice gets both shares."""
    def f(pair, w, scale, mode="square"):
        a, b = pair
        y = (a * w).tanh() * scale + b
        if mode == "square":
            y = y * y
        return {"out": y.sum(), "aux": 3}

    rng = np.random.default_rng(2)
    av, wv, bv = (rng.standard_normal(5) for _ in range(3))
    results = []
    for fn in (f, hf.jit.to_static(f)):
        a = hf.tensor(av, dtype="float64", requires_grad=True)
        w = hf.tensor(wv, dtype="float64", requires_grad=True)
        b = hf.tensor(bv, dtype="float64")
        out = fn((a, b), w, 0.5, mode="square")["out"] + fn((a, a), a, 2.0, mode="cube")["out"]
        ga, gw = hf.autograd.grad(out, [a, w], create_graph=True)
        (ga.sum() + (gw * gw).sum()).backward()
        results.append((ga.detach().numpy(), gw.detach().numpy(), a.grad.numpy(), w.grad.numpy()))
    for s, e in zip(results[1], results[0]):
        np.testing.assert_allclose(s, e, rtol=1e-12, atol=1e-14)


def test_several_outputs():
    """A function with several float results (one packed node): each result's gradient seeds
    its own eager result."""
    def f(x):
        return x.sin(), (x * x).sum(), x.shape[0]

    xv = np.array([0.3, -1.2, 2.0])
    results = []
    for fn in (f, hf.jit.to_static(f)):
        x = hf.tensor(xv, dtype="float64", requires_grad=True)
        s, q, n = fn(x)
        (g,) = hf.autograd.grad((s * q).sum() * n, [x], create_graph=True)
        (g * g).sum().backward()
        results.append((g.detach().numpy(), x.grad.numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-12)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-12)


def test_batch_norm_train_mode_updates_running_stats_once():
    """In train mode the re-run normalizes with the batch's statistics, as the program did,
    and BatchNorm's running statistics are updated once per call (by the program), not
    again by the re-run."""
    real, z, eps = _data()
    results, stats = [], []
    for static in (False, True):
        critic = _critic(batch_norm=True)
        hf.manual_seed(1)
        generator = nn.Linear(3, 4)
        if static:
            critic = hf.jit.to_static(critic)
        results.append(_penalty_step(critic, generator, real, z, eps))
        bn = critic[1]
        stats.append((bn.running_mean.numpy().copy(), bn.running_var.numpy().copy(),
                      int(bn.num_batches_tracked.item())))
    (pe, ce, ge), (ps, cs, gs) = results
    np.testing.assert_allclose(ps, pe, rtol=1e-5)
    _assert_grads_equal(cs, ce)
    _assert_grads_equal(gs, ge)
    assert stats[1][2] == stats[0][2] == 1
    np.testing.assert_allclose(stats[1][0], stats[0][0], rtol=1e-6)
    np.testing.assert_allclose(stats[1][1], stats[0][1], rtol=1e-6)


def test_dropout_draws_the_same_mask_again():
    """The re-run replays the generator states of the call, so Dropout draws the program's
    masks: the penalty and gradients equal eager's under the same seed, and the random stream
    goes on afterwards as it does in eager code."""
    real, z, eps = _data()
    results, after = [], []
    for static in (False, True):
        critic = _critic(dropout=0.5)
        hf.manual_seed(1)
        generator = nn.Linear(3, 4)
        if static:
            critic = hf.jit.to_static(critic)
        hf.manual_seed(7)
        results.append(_penalty_step(critic, generator, real, z, eps))
        after.append(hf.rand(3).numpy())
    (pe, ce, ge), (ps, cs, gs) = results
    np.testing.assert_allclose(ps, pe, rtol=1e-5)
    _assert_grads_equal(cs, ce)
    _assert_grads_equal(gs, ge)
    np.testing.assert_array_equal(after[1], after[0])


def test_only_weak_references_to_the_arguments():
    """A call keeps no argument alive for a double backward that may never come: an input its
    backward does not read is freed when the caller drops it (and a double backward then
    says so)."""
    f = hf.jit.to_static(lambda x: x.exp())
    a = hf.ones(1000, requires_grad=True)
    x = a * 2
    before = hf.memory.allocated()
    out = f(x)
    del x
    assert hf.memory.allocated() == before  # x (4000 bytes) freed, out (4000 bytes) held
    with pytest.raises(RuntimeError, match="tensor argument 0 of the call no longer exists"):
        hf.autograd.grad(out.sum(), [a], create_graph=True)
    out = f(a * 2)
    (g,) = hf.autograd.grad(out.sum(), [a])  # a plain backward needs nothing of it
    np.testing.assert_allclose(g.numpy(), 2 * np.exp(2.0), rtol=1e-6)


def test_changes_since_the_call_are_refused():
    critic = hf.jit.to_static(_critic(batch_norm=True))
    x = hf.randn(4, 4, requires_grad=True)
    out = critic(x)
    critic.eval()
    with pytest.raises(RuntimeError, match="train/eval mode changed"):
        hf.autograd.grad(out.sum(), [x], create_graph=True)
    critic.train()
    out = critic(x)
    with hf.no_grad():
        x.add_(1)
    with pytest.raises(RuntimeError, match="modified in place"):
        hf.autograd.grad(out.sum(), [x], create_graph=True)


def test_function_updating_its_argument_is_refused():
    @hf.jit.to_static
    def f(x, counter):
        with hf.no_grad():
            counter.add_(1)
        return (x * x).sum()

    x = hf.randn(3, requires_grad=True)
    counter = hf.zeros(1)
    out = f(x, counter)
    with pytest.raises(RuntimeError, match="updates a tensor argument in place"):
        hf.autograd.grad(out, [x], create_graph=True)
    assert counter.item() == 1


def test_memory_is_freed_without_gc_after_a_double_backward():
    """The gradients a double backward hands out can reach the node again (out * out saves
    the output): the node's state keeps none of them, so dropping the tensors frees all memory
    by reference counting alone, also when no backward runs through the gradient."""
    f = hf.jit.to_static(lambda x, w: (x @ w).tanh())

    def step():
        w = hf.randn(64, 64, requires_grad=True)
        x = hf.randn(32, 64, requires_grad=True)
        out = f(x, w)
        (g,) = hf.autograd.grad((out * out).sum(), [x], create_graph=True)
        assert g.requires_grad

    step()  # (tracing and the executor's first-run state)
    gc.collect()
    gc.disable()
    try:
        baseline = hf.memory.allocated()
        step()
        assert hf.memory.allocated() == baseline
    finally:
        gc.enable()
