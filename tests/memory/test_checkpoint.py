"""``hf.memory.checkpoint`` / ``checkpoint_sequential``: gradients bit for bit those of the plain
run, random streams and BatchNorm statistics as if nothing had been recomputed, less memory.

The cyclic garbage collector is off in every test: the recomputation must not leave cycles
behind, and the peak figures count only what reference counting frees.
"""

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.memory.checkpoint import segment_sizes

mem = hf.memory


def arrays(tensors):
    return [None if t is None else t.detach().numpy().copy() for t in tensors]


def assert_bitwise(a, b):
    assert len(a) == len(b)
    for i, (u, v) in enumerate(zip(a, b)):
        assert (u is None) == (v is None), i
        if u is not None:
            assert u.dtype == v.dtype and np.array_equal(u, v), f"array {i} differs"


def one_step(make, run, seed=0):
    """Build the model and input from ``seed``, run one forward/backward with ``run(model, x)``
    and return everything a step changes: output, gradients, buffers, the next random draw."""
    hf.manual_seed(seed)
    model = make()
    x = hf.randn(8, 16, requires_grad=True)
    y = run(model, x)
    y.sum().backward()
    return {"out": arrays([y]), "x_grad": arrays([x.grad]),
            "grads": arrays(p.grad for p in model.parameters()),
            "buffers": arrays(model.buffers()), "next_draw": hf.rand(3).numpy()}


def assert_same_step(a, b):
    for key in a:
        assert_bitwise(a[key] if isinstance(a[key], list) else [a[key]],
                       b[key] if isinstance(b[key], list) else [b[key]])


def mlp_dropout():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 32),
                         nn.Tanh(), nn.Dropout(0.3), nn.Linear(32, 4))


def mlp_batchnorm():
    return nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2),
                         nn.Linear(32, 32), nn.BatchNorm1d(32, momentum=None), nn.ReLU(),
                         nn.Linear(32, 4))


# =============================================================================== equality
@pytest.mark.parametrize("make", [mlp_dropout, mlp_batchnorm])
def test_checkpoint_of_a_module_matches_the_plain_step_bit_for_bit(make):
    plain = one_step(make, lambda m, x: m(x))
    ckpt = one_step(make, lambda m, x: mem.checkpoint(m, x))
    assert_same_step(plain, ckpt)


@pytest.mark.parametrize("segments", [1, 2, 3, 7])
@pytest.mark.parametrize("make", [mlp_dropout, mlp_batchnorm])
def test_checkpoint_sequential_matches_the_plain_step_bit_for_bit(make, segments):
    plain = one_step(make, lambda m, x: m(x))
    ckpt = one_step(make, lambda m, x: mem.checkpoint_sequential(m, segments, x))
    assert_same_step(plain, ckpt)


@pytest.mark.parametrize("how", ["sequential", "closure"])
def test_batchnorm_statistics_are_updated_once_per_step(how):
    # "closure": checkpoint cannot see the model's buffers, only is_recomputing() protects them
    def run(ckpt):
        hf.manual_seed(0)
        model = mlp_batchnorm()
        x = hf.randn(8, 16)
        for _ in range(2):
            if not ckpt:
                y = model(x)
            elif how == "sequential":
                y = mem.checkpoint_sequential(model, 3, x)
            else:
                y = mem.checkpoint(lambda a: model(a), x)
            y.sum().backward()
        return model
    plain, ckpt = run(False), run(True)
    for bn in (ckpt[1], ckpt[5]):
        assert bn.num_batches_tracked.item() == 2
    assert_bitwise(arrays(plain.buffers()), arrays(ckpt.buffers()))


def test_batch_norm_function_skips_the_running_update_while_recomputing():
    seen = []

    def fn(x, mean, var):
        seen.append((mem.is_recomputing(), mean.numpy().copy()))
        return nn.functional.batch_norm(x, mean, var, training=True)

    hf.manual_seed(0)
    x = hf.randn(6, 3, requires_grad=True)
    mean, var = hf.zeros(3), hf.ones(3)
    mem.checkpoint(fn, x, mean, var).sum().backward()
    after_forward = seen[0][1]
    assert [s[0] for s in seen] == [False, True]
    assert not np.array_equal(mean.numpy(), after_forward)   # the forward updated it ...
    assert np.array_equal(seen[1][1], mean.numpy())          # ... the recomputation did not
    assert not mem.is_recomputing()


def test_rng_stream_after_a_step_is_the_plain_runs():
    plain = one_step(mlp_dropout, lambda m, x: m(x))
    ckpt = one_step(mlp_dropout, lambda m, x: mem.checkpoint(m, x))
    assert np.array_equal(plain["next_draw"], ckpt["next_draw"])


def test_rng_drawn_between_forward_and_backward_is_not_replayed_away():
    def run(ckpt):
        hf.manual_seed(1)
        model = mlp_dropout()
        x = hf.randn(8, 16)
        y = mem.checkpoint(model, x) if ckpt else model(x)
        between = hf.rand(2).numpy()
        y.sum().backward()
        return between, hf.rand(2).numpy(), arrays(p.grad for p in model.parameters())
    assert_bitwise(list(run(False)[:2]) + run(False)[2], list(run(True)[:2]) + run(True)[2])


def test_without_preserve_rng_state_the_dropout_mask_is_redrawn():
    plain = one_step(mlp_dropout, lambda m, x: m(x))
    ckpt = one_step(mlp_dropout, lambda m, x: mem.checkpoint(m, x, preserve_rng_state=False))
    assert not np.array_equal(plain["grads"][0], ckpt["grads"][0])


# =============================================================================== calling forms
def test_multiple_outputs_kwargs_and_non_tensor_values():
    def fn(x, w, *, scale, mode="tanh", extra=None):
        h = x @ w
        a = h.tanh() if mode == "tanh" else h.relu()
        return {"a": a * scale, "pair": (a.exp(), h.argmax(dim=1)), "note": mode,
                "extra": extra}

    def run(ckpt):
        hf.manual_seed(0)
        x = hf.randn(5, 4, requires_grad=True)
        w = hf.randn(4, 3, requires_grad=True)
        args = (x, w)
        kwargs = {"scale": 0.5, "mode": "relu", "extra": [1, "two"]}
        out = mem.checkpoint(fn, *args, **kwargs) if ckpt else fn(*args, **kwargs)
        assert out["note"] == "relu" and out["extra"] == [1, "two"]
        index = out["pair"][1]
        assert index.dtype == hf.int64 and not index.requires_grad
        (out["a"].sum() + (out["pair"][0] * 3).sum()).backward()
        return arrays([out["a"], out["pair"][0], index, x.grad, w.grad])
    assert_bitwise(run(False), run(True))


def test_an_output_without_gradient_and_an_input_returned_as_is():
    w = hf.randn(3, 3, requires_grad=True)
    x = hf.randn(2, 3, requires_grad=True)
    x_node = x._node
    y, z, same = mem.checkpoint(lambda a: (a @ w, (a @ w).detach(), a), x)
    assert same is x and x._node is x_node
    y.sum().backward()           # z's gradient is never asked for
    (expected,) = hf.autograd.grad((x @ w).sum(), [x])
    assert np.array_equal(x.grad.numpy(), expected.numpy())
    assert z.requires_grad       # it is a float result made by the call (see the docstring)


def test_inputs_that_do_not_require_grad_still_give_parameter_gradients():
    plain = one_step(mlp_dropout, lambda m, x: m(x.detach()))
    ckpt = one_step(mlp_dropout, lambda m, x: mem.checkpoint(m, x.detach()))
    assert plain["x_grad"] == [None] and ckpt["x_grad"] == [None]
    assert_same_step(plain, ckpt)


def test_non_leaf_inputs_pass_their_gradient_on():
    def run(ckpt):
        hf.manual_seed(0)
        x = hf.randn(4, 4, requires_grad=True)
        w = hf.randn(4, 4, requires_grad=True)
        h = (x * 2).sin()
        def fn(a, b):
            return (a @ w * b).sigmoid()

        y = mem.checkpoint(fn, h, h) if ckpt else fn(h, h)
        y.sum().backward()
        return arrays([x.grad, w.grad])
    assert_bitwise(run(False), run(True))


def test_retain_graph_allows_a_second_backward_and_its_absence_does_not():
    hf.manual_seed(0)
    model = mlp_dropout()
    x = hf.randn(8, 16, requires_grad=True)
    hf.manual_seed(5)
    y = model(x)
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    twice = arrays([x.grad] + [p.grad for p in model.parameters()])
    for t in [x, *model.parameters()]:
        t.grad = None
    hf.manual_seed(5)
    y = mem.checkpoint(model, x)
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    assert_bitwise(twice, arrays([x.grad] + [p.grad for p in model.parameters()]))
    with pytest.raises(RuntimeError, match="second time"):
        y.sum().backward()


def test_under_no_grad_it_just_calls_the_function():
    calls = []

    def fn(x):
        calls.append(hf.is_grad_enabled())
        return x * 2

    x = hf.randn(3, requires_grad=True)
    with hf.no_grad():
        y = mem.checkpoint(fn, x)
    assert calls == [False] and y.grad_fn is None and not y.requires_grad


def test_the_graph_names_and_what_is_freed_after_backward():
    w = hf.randn(64, 64, requires_grad=True)
    x = hf.randn(32, 64, requires_grad=True)
    w.grad = hf.zeros(64, 64)
    x.grad = hf.zeros(32, 64)
    base = mem.allocated()
    y = mem.checkpoint(lambda a: (a @ w).relu() @ w, x)
    assert repr(y.grad_fn) == "<CheckpointBackward>"
    assert repr(y.grad_fn.next_functions[0]) == "<RecomputeBackward>"
    # the forward keeps the input (already counted) and the output, no activation
    assert mem.allocated() - base == 32 * 64 * 4
    y.sum().backward()
    del y
    assert mem.allocated() == base


def test_autograd_grad_through_a_checkpoint():
    def run(ckpt):
        hf.manual_seed(0)
        model = mlp_dropout()
        x = hf.randn(8, 16, requires_grad=True)
        y = mem.checkpoint(model, x) if ckpt else model(x)
        (gx,) = hf.autograd.grad(y.sum(), [x])
        assert all(p.grad is None for p in model.parameters())
        return arrays([gx])
    assert_bitwise(run(False), run(True))


# =============================================================================== to_static
def test_to_static_function_calling_checkpoint_matches_eager():
    hf.manual_seed(0)
    inner, head = nn.Linear(6, 8), nn.Linear(8, 2)

    def block(h, scale):
        return (inner(h) * scale).tanh()

    def step(x):
        return head(mem.checkpoint(block, x, 0.5)).sum()

    def run(fn):
        x = hf.randn(4, 6, requires_grad=True)
        for p in [*inner.parameters(), *head.parameters()]:
            p.grad = None
        loss = fn(x)
        loss.backward()
        return arrays([loss, x.grad] + [p.grad for p in [*inner.parameters(),
                                                          *head.parameters()]])
    hf.manual_seed(1)
    eager = run(step)
    hf.manual_seed(1)
    static = run(hf.jit.to_static(step))
    for a, b in zip(eager, static):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_checkpoint_of_a_to_static_module_with_batchnorm():
    def make():
        return nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 4))

    def run(ckpt):
        hf.manual_seed(0)
        model = make()
        converted = hf.jit.to_static(model)
        x = hf.randn(8, 16, requires_grad=True)
        for _ in range(2):
            y = mem.checkpoint(converted, x) if ckpt else converted(x)
            y.sum().backward()
        return model, arrays([y, x.grad] + [p.grad for p in model.parameters()] +
                             list(model.buffers()))
    _, plain = run(False)
    ckpt_model, ckpt = run(True)
    assert ckpt_model[1].num_batches_tracked.item() == 2
    for a, b in zip(plain, ckpt):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


class _Checkpointed(nn.Module):
    """Four two-layer blocks, each checkpointed (``mode='checkpoint'``), the first two and last
    two as checkpoint_sequential's segments (``'sequential'``), or plain."""

    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(64, 64), nn.Tanh(),
                                                   nn.Linear(64, 64), nn.Tanh())
                                     for _ in range(4)])

    def forward(self, x):
        if self.mode == "sequential":
            return mem.checkpoint_sequential(list(self.blocks), 2, x).sum()
        for block in self.blocks:
            x = mem.checkpoint(block, x) if self.mode == "checkpoint" else block(x)
        return x.sum()


@pytest.mark.parametrize("mode", ["checkpoint", "sequential"])
def test_checkpoint_inside_to_static_recomputes_as_in_eager(mode):
    """Inside converted code, checkpoint was a plain call: the static forward kept every
    activation of the checkpointed blocks (8 of them here). Now the values a checkpointed
    call computes, its results excepted, are recomputed by the backward program: the forward
    keeps what eager checkpointing keeps, and gradients stay equal."""
    import gc
    x = hf.randn(32, 64)
    act = 32 * 64 * 4
    results = {}
    for name, make in (("eager", lambda m: m), ("static", hf.jit.to_static)):
        for ckpt in (mode, "plain"):
            hf.manual_seed(0)
            model = _Checkpointed(ckpt)
            run = make(model)
            xx = x.detach().requires_grad_()
            run(xx).backward()                  # warm-up (trace, compile, create .grad)
            xx.grad = None
            gc.collect()
            base = mem.allocated()
            loss = run(xx)
            held = mem.allocated() - base
            loss.backward()
            del loss  # (its node holds the converted function's arena)
            results[name, ckpt] = held, arrays([xx.grad] + list(model.parameters()) +
                                               [p.grad for p in model.parameters()])
    assert results["static", "plain"][0] >= 8 * act
    eager_held = results["eager", mode][0]
    assert eager_held < 6 * act
    assert results["static", mode][0] <= eager_held + act, (results["static", mode][0],
                                                            eager_held)
    for key, (_, got) in results.items():
        for a, b in zip(got, results["eager", "plain"][1]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=str(key))


# =============================================================================== memory
def deep_mlp(n, width):
    layers = []
    for _ in range(n):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers)


def activation_peak(model, x, run):
    """Bytes above what was allocated before one step (parameters, their gradients from a
    warm-up step -- accumulated in place -- and the input)."""
    base = mem.allocated()
    mem.reset_peak()
    y = run(model, x)
    y.sum().backward()
    del y
    return mem.peak() - base


def test_checkpoint_sequential_cuts_the_measured_peak():
    hf.manual_seed(0)
    model = deep_mlp(32, 256)
    x = hf.randn(64, 256)
    model(x).sum().backward()   # the gradients exist from here on
    plain = activation_peak(model, x, lambda m, a: m(a))
    ckpt = activation_peak(model, x, lambda m, a: mem.checkpoint_sequential(m, 6, a))
    # 32 kept activations of 64 KiB each at least; measured 2.39 MiB plain vs 1.08 MiB
    # checkpointed (0.45; the weight gradients, 256 KiB each, go into .grad as soon as they
    # are computed, so they do not pile up until the end of backward); exact bytes
    assert plain >= 32 * 64 * 256 * 4
    assert ckpt < 0.5 * plain, (ckpt, plain)


def _peak_units(sizes):
    """The peak of ``max_i(i + size_i)``: kept segment inputs plus one segment's activations."""
    return max(i + s for i, s in enumerate(sizes))


def _compositions(n, k):
    if k == 1:
        yield (n,)
        return
    for first in range(1, n - k + 2):
        for rest in _compositions(n - first, k - 1):
            yield (first, *rest)


@pytest.mark.parametrize("n", [1, 2, 5, 9, 12])
def test_segment_sizes_minimize_the_peak_exactly(n):
    for k in range(1, n + 1):
        sizes = segment_sizes(n, k)
        assert len(sizes) == k and sum(sizes) == n and min(sizes) >= 1
        best = min(_peak_units(c) for c in _compositions(n, k))
        assert _peak_units(sizes) == best, (n, k, sizes)


def test_segment_sizes_against_equal_segments():
    sizes = segment_sizes(64, 8)
    assert sizes == [8, 11, 10, 9, 8, 7, 6, 5]   # the last one, never recomputed, longest
    assert _peak_units(sizes) == 12 < _peak_units([8] * 8) == 15


def test_checkpoint_sequential_over_layer_blocks_is_below_a_quarter_at_depth_64():
    """Issue 6's N = 64 target (<= 25% of the plain run's activation peak) on a smaller width:
    64 layers, each one block (Linear + ReLU), round(sqrt(64)) = 8 segments."""
    hf.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.ReLU()) for _ in range(64)])
    x = hf.randn(256, 64)
    model(x).sum().backward()
    plain = activation_peak(model, x, lambda m, a: m(a))
    ckpt = activation_peak(model, x, lambda m, a: mem.checkpoint_sequential(m, 8, a))
    layer = 256 * 64 * 4
    assert plain >= 64 * layer             # one kept activation per layer at least
    # exact bytes, measured 16.5 layers' worth vs 66.5 plain (0.248): at the worst segment 13
    # kept or recomputed activations (segment_sizes: 12 + its own input), the gradient flowing
    # in and out (2) and the loss's; equal segments of 8 would hold 16 + the same
    assert ckpt <= 17 * layer, (ckpt / layer, plain / layer)
    assert ckpt <= 0.25 * plain, (ckpt / layer, plain / layer)


# =============================================================================== misuse
def test_clear_errors_on_misuse():
    layers = [nn.Linear(2, 2), nn.ReLU()]
    x = hf.randn(1, 2)
    with pytest.raises(ValueError, match="between 1 and the number of functions \\(2\\)"):
        mem.checkpoint_sequential(layers, 3, x)
    with pytest.raises(ValueError, match="between 1 and"):
        mem.checkpoint_sequential(layers, 0, x)
    with pytest.raises(ValueError, match="empty"):
        mem.checkpoint_sequential([], 1, x)
    with pytest.raises(ValueError, match="empty"):
        mem.checkpoint_sequential(nn.Sequential(), 1, x)
    with pytest.raises(TypeError, match="segments must be an int"):
        mem.checkpoint_sequential(layers, 1.5, x)
    with pytest.raises(TypeError, match=r"functions\[1\] is a str"):
        mem.checkpoint_sequential([layers[0], "relu"], 1, x)
    with pytest.raises(TypeError, match="expected a callable"):
        mem.checkpoint(x, x)


def test_input_modified_in_place_before_backward_is_an_error():
    w = hf.randn(3, 3, requires_grad=True)
    x = hf.randn(2, 3)
    y = mem.checkpoint(lambda a: a @ w, x)
    x.add_(1)
    with pytest.raises(RuntimeError, match="modified in place after the checkpointed call"):
        y.sum().backward()


def test_a_function_that_computes_something_else_when_rerun_is_an_error():
    calls = []
    w = hf.randn(3, 3, requires_grad=True)

    def fn(a):
        calls.append(1)
        return (a @ w)[: len(calls)]

    y = mem.checkpoint(fn, hf.randn(2, 3))
    with pytest.raises(RuntimeError, match="must compute the same thing"):
        y.sum().backward()


def test_double_backward_and_grad_of_a_captured_parameter_are_refused():
    w = hf.randn(3, 3, requires_grad=True)
    x = hf.randn(2, 3, requires_grad=True)
    y = mem.checkpoint(lambda a: (a @ w).tanh(), x)
    with pytest.raises(RuntimeError, match="double backward"):
        hf.autograd.grad(y.sum(), [x], create_graph=True)
    y = mem.checkpoint(lambda a: (a @ w).tanh(), x)
    with pytest.raises(RuntimeError, match="pass it to checkpoint\\(\\) as an argument"):
        hf.autograd.grad(y.sum(), [x, w])
    (gw,) = hf.autograd.grad(mem.checkpoint(lambda a, b: (a @ b).tanh(), x, w).sum(), [w])
    (expected,) = hf.autograd.grad((x @ w).tanh().sum(), [w])
    assert np.array_equal(gw.numpy(), expected.numpy())


@pytest.mark.parametrize("use_reentrant", [True, False, None])
def test_pytorch_checkpoint_options_are_taken_not_passed_on(use_reentrant):
    """Ported code passes use_reentrant (PyTorch 2.x warns without it): it is checkpoint's own
    option, never an argument of the function; gradients equal the plain run's."""
    hf.manual_seed(3)
    model = hf.nn.Sequential(hf.nn.Linear(4, 6), hf.nn.Tanh(), hf.nn.Linear(6, 2))
    x = hf.randn(5, 4, requires_grad=True)
    model(x).sum().backward()
    want = [x.grad.numpy().copy()] + [p.grad.numpy().copy() for p in model.parameters()]
    for run in (lambda: mem.checkpoint(model, x, use_reentrant=use_reentrant),
                lambda: mem.checkpoint_sequential(model, 2, x, use_reentrant=use_reentrant,
                                                  determinism_check="none", debug=False)):
        x.grad = None
        model.zero_grad()
        run().sum().backward()
        got = [x.grad.numpy()] + [p.grad.numpy() for p in model.parameters()]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    with pytest.raises(TypeError, match="use_reentrant"):
        mem.checkpoint(model, x, use_reentrant="yes")
    with pytest.raises(ValueError, match="determinism_check"):
        mem.checkpoint_sequential(model, 2, x, determinism_check="strict")


def inplace_relu_mlp():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(inplace=True), nn.Linear(32, 32),
                         nn.ReLU(inplace=True), nn.Linear(32, 4))


@pytest.mark.parametrize("segments", [4, 5])
def test_a_segment_starting_with_an_inplace_relu_on_a_grad_input_is_refused(segments):
    # segments [Linear, ReLU_], [Linear], [ReLU_], [Linear]: the third got the second's output
    # and handed it back relu'd in place but with the second's history (no ReLU mask in it),
    # so x.grad silently differed from the plain run's (PyTorch raises at backward)
    hf.manual_seed(0)
    model = inplace_relu_mlp()
    x = hf.randn(8, 16, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"checkpoint: the function modified its argument 0 "
                                           r"\(shape \(8, 32\)\) in place"):
        mem.checkpoint_sequential(model, segments, x)


def test_a_function_modifying_a_grad_input_in_place_is_refused():
    w = hf.randn(3, 3, requires_grad=True)
    h = hf.randn(2, 3, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="modified its argument 0"):
        mem.checkpoint(lambda a: a.mul_(2) @ w, h)


@pytest.mark.parametrize("segments", [1, 2])
def test_inplace_relus_inside_segments_still_match_the_plain_step(segments):
    # an in-place layer that is not first in its segment changes only values made inside it,
    # and one on an input that needs no gradient is replayed on the value it left
    plain = one_step(inplace_relu_mlp, lambda m, x: m(x))
    ckpt = one_step(inplace_relu_mlp, lambda m, x: mem.checkpoint_sequential(m, segments, x))
    assert_same_step(plain, ckpt)
    no_grad_x = one_step(inplace_relu_mlp, lambda m, x: mem.checkpoint_sequential(
        [nn.ReLU(inplace=True), m], 2, x.detach() * 1))
    plain_no_grad_x = one_step(inplace_relu_mlp, lambda m, x: m((x.detach() * 1).relu()))
    assert_same_step(plain_no_grad_x, no_grad_x)
