"""hf.jit.to_static end to end: caching per signature, InputSpec dynamic dims, introspection,
training through the static program (equal to eager, Dropout and BatchNorm included), run-time
errors at the user's line."""
import copy
import dataclasses
import logging
import warnings

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.converter import ConversionError


def branchy(x):
    if x.mean() > 0:
        y = x * 2
    else:
        y = x - 1
    i = 0
    while y.abs().sum() < 50:
        y = y * 1.5
        i += 1
    return y, i


def test_one_trace_many_values_and_paths():
    f = hf.jit.to_static(branchy)
    rng = np.random.default_rng(0)
    for _ in range(6):
        x = hf.tensor(rng.normal(size=(4,)).astype("float32"))
        got, want = f(x), branchy(x)
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-6)
        assert int(got[1]) == want[1]
    info = f.cache_info()
    assert (info.misses, info.hits, info.programs) == (1, 5, 1)
    (signature,) = f.signatures()
    assert signature["tensors"] == [((4,), "float32")]


def test_new_shape_retraces_and_logs_the_change(caplog):
    f = hf.jit.to_static(branchy)
    f(hf.ones(3))
    with caplog.at_level(logging.INFO, logger="hybridfw.jit"):
        f(hf.ones(5))
    assert f.cache_info().misses == 2
    assert "(3,)" in caplog.text and "(5,)" in caplog.text and "retracing" in caplog.text


def test_input_spec_keeps_dim_dynamic():
    f = hf.jit.to_static(branchy, input_spec=[hf.jit.InputSpec([None], "float32")])
    for n in (2, 3, 7):
        x = hf.arange(n).astype("float32") - 1.0
        np.testing.assert_allclose(f(x)[0].numpy(), branchy(x)[0].numpy(), rtol=1e-6)
    assert f.cache_info().misses == 1
    # an InputSpec violation is a ValueError naming the argument, the expected and the actual
    # shape and dtype (API.md), dtype included
    with pytest.raises(ValueError, match=r"argument 'x' has shape \(2, 2\) and dtype float32, "
                                         r"but its InputSpec expects shape \(None,\)"):
        f(hf.ones(2, 2))
    with pytest.raises(ValueError, match=r"argument 'x' has shape \(2,\) and dtype float64, .*"
                                         r"and dtype float32"):
        f(hf.ones(2, dtype=hf.float64))


def test_input_spec_errors_name_nested_and_keyword_arguments():
    def pair_sum(pair, *, scale):
        return (pair[0] + pair[1]) * scale

    f = hf.jit.to_static(pair_sum, input_spec=[hf.jit.InputSpec([2]), hf.jit.InputSpec([2]),
                                                hf.jit.InputSpec([1], name="scale")])
    good = [hf.ones(2), hf.ones(2)]
    np.testing.assert_allclose(f(good, scale=hf.ones(1) * 3).numpy(), [6.0, 6.0])
    with pytest.raises(ValueError, match=r"argument 'pair'\[1\] has shape \(3,\)"):
        f([hf.ones(2), hf.ones(3)], scale=hf.ones(1))
    with pytest.raises(ValueError, match=r"argument 'scale' has shape \(1,\) and dtype "
                                         r"float64, but its InputSpec 'scale' expects"):
        f(good, scale=hf.ones(1, dtype="float64"))


def test_warns_past_eight_programs():
    f = hf.jit.to_static(lambda_free_scale)
    with pytest.warns(UserWarning, match="InputSpec"):
        for n in range(1, 11):
            f(hf.ones(n))
    assert f.cache_info().programs == 10


def lambda_free_scale(x):
    return x * 2


def test_python_argument_values_are_part_of_the_key():
    def scaled(x, k):
        return x * k
    f = hf.jit.to_static(scaled_module_level)
    assert f(hf.ones(2), 2).tolist() == [2.0, 2.0]
    assert f(hf.ones(2), 3).tolist() == [3.0, 3.0]
    assert f(hf.ones(2), 3).tolist() == [3.0, 3.0]
    assert f.cache_info().misses == 2
    _ = scaled


def scaled_module_level(x, k):
    return x * k


def test_get_code_and_programs():
    f = hf.jit.to_static(branchy)
    code = hf.jit.get_code(f)
    assert "convert_ifelse" in code and "convert_while" in code
    assert f.concrete_program is None
    program = f.get_program(hf.ones(3))
    assert isinstance(program, hf.static.Program)
    text = str(program)
    assert "cond(" in text and "while(" in text
    assert "digraph" in program.to_dot()
    f(hf.ones(3))
    assert f.concrete_program is not None
    # the program a call runs is the one get_program returns: no second trace
    assert f.get_program(hf.ones(3)) is f.concrete_program
    assert len(f.signatures()) == 1


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(4 * 4 * 4, 10)

    def forward(self, x):
        h = nn.functional.max_pool2d(self.bn(self.conv(x)).relu(), 2)
        h = self.drop(h.flatten(1))
        if h.mean() > 0.2:      # data-dependent branch
            h = h * 0.5
        steps = 0
        while h.abs().max() > 1.0 and steps < 4:   # data-dependent loop
            h = h * 0.8
            steps += 1
        return self.fc(h)


def _twins():
    hf.manual_seed(0)
    eager = Net()
    hf.manual_seed(0)
    static = hf.jit.to_static(Net())
    return eager, static


def test_training_equals_eager_with_dropout_and_batchnorm():
    eager, static = _twins()
    opt_e = hf.optim.SGD(eager.parameters(), lr=0.1)
    opt_s = hf.optim.SGD(static.parameters(), lr=0.1)
    rng = np.random.default_rng(1)
    for step in range(4):
        x = hf.tensor(rng.normal(size=(6, 1, 8, 8)).astype("float32") * (step + 1))
        y = hf.tensor(rng.integers(0, 10, size=6))
        for model, opt in ((eager, opt_e), (static, opt_s)):
            hf.manual_seed(100 + step)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    for (name, a), (_, b) in zip(eager.state_dict().items(), static.state_dict().items()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    assert static.forward.cache_info().misses == 1
    static.eval()
    eager.eval()
    x = hf.randn(2, 1, 8, 8)
    np.testing.assert_allclose(static(x).detach().numpy(), eager(x).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    assert static.forward.cache_info().misses == 2  # eval mode is a new signature


def test_input_gradients_and_retain_graph():
    f = hf.jit.to_static(branchy)
    x = hf.tensor([0.5, -0.2, 0.3], requires_grad=True)
    out, _ = f(x)
    (out * out).sum().backward(retain_graph=True)
    g1 = x.grad.numpy().copy()
    x2 = hf.tensor([0.5, -0.2, 0.3], requires_grad=True)
    ref, _ = branchy(x2)
    (ref * ref).sum().backward()
    np.testing.assert_allclose(g1, x2.grad.numpy(), rtol=1e-5)
    x.grad = None
    (out * out).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), g1, rtol=1e-6)
    with pytest.raises(RuntimeError, match="second time"):
        (out * out).sum().backward()


def test_no_grad_call_builds_no_backward():
    model = hf.jit.to_static(nn.Linear(3, 2))
    with hf.no_grad():
        out = model(hf.ones(4, 3))
    assert out._node is None
    assert model.forward._last.backward_program is None


def multi_output(x):
    return x * 2, (x.sum(), {"neg": -x})


def test_multiple_outputs_get_gradients():
    f = hf.jit.to_static(multi_output)
    x = hf.tensor([1.0, 2.0], requires_grad=True)
    a, (b, d) = f(x)
    (a.sum() + b * 3 + (d["neg"] * x.detach()).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), [2 + 3 - 1, 2 + 3 - 2])


def bad_runtime_reshape(x):
    y = x + 1
    return y.reshape(3, -1)  # fails at run time for some sizes


def test_run_time_error_names_user_line():
    f = hf.jit.to_static(bad_runtime_reshape, input_spec=[hf.jit.InputSpec([None])])
    assert f(hf.ones(6)).shape == (3, 2)
    with pytest.raises(ValueError) as info:
        f(hf.ones(7))
    assert __file__ in str(info.value) and "y.reshape(3, -1)" in str(info.value)


def _pick(x, i):
    return x[i] * 2.0


@pytest.mark.parametrize("backend", ["interpreted", "compiled"])
def test_an_index_error_while_the_program_runs_names_the_users_line(backend):
    """An IndexError an operator raises when the program runs keeps its type and names the
    user's line, on a first call and on the fast path of later calls alike."""
    f = hf.jit.to_static(_pick, backend=backend)
    x = hf.ones(3)
    for _ in range(3):
        assert f(x, hf.tensor(1)).item() == 2.0
        with pytest.raises(IndexError) as info:
            f(x, hf.tensor(7))
        assert "out of" in str(info.value) and "size 3" in str(info.value)
        assert __file__ in str(info.value) and "return x[i] * 2.0" in str(info.value)


def test_method_decorator_binds_per_instance():
    class Scaler(nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k

        @hf.jit.to_static
        def forward(self, x):
            if x.sum() > 0:
                return x * self.k
            return x

    a, b = Scaler(2.0), Scaler(3.0)
    assert a(hf.ones(2)).tolist() == [2.0, 2.0]
    assert b(hf.ones(2)).tolist() == [3.0, 3.0]
    assert a(-hf.ones(2)).tolist() == [-1.0, -1.0]


@pytest.mark.parametrize("make, spec, shapes", [
    (lambda: nn.LSTM(5, 7, num_layers=2, bidirectional=True), [6, None, 5],
     [(6, 3, 5), (6, 4, 5)]),
    (lambda: nn.GRU(5, 7, batch_first=True), [None, 6, 5], [(3, 6, 5), (2, 6, 5)]),
    (lambda: nn.LSTMCell(5, 7), [None, 5], [(3, 5), (4, 5)]),
    (lambda: nn.RNNCell(5, 7), [None, 5], [(3, 5), (1, 5)]),
])
def test_recurrent_layers_without_a_state_run_with_a_dynamic_batch(make, spec, shapes):
    """The zero initial state takes its batch size from the input at run time: one program
    serves every batch size and equals eager."""
    hf.manual_seed(0)
    layer = make()
    static = hf.jit.to_static(layer, input_spec=[hf.jit.InputSpec(spec)])
    for shape in shapes:
        x = hf.randn(*shape)
        got, want = static(x), layer(x)
        got, want = (got[0], want[0]) if isinstance(got, tuple) else (got, want)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    assert static.forward.cache_info().programs == 1


def doubled_sum(x):
    return (x * 2.0).sum() + x[:1] * 0.0


@pytest.mark.parametrize("backend", ["interpreted", "auto"])
def test_a_dynamic_dim_alternating_between_calls_never_runs_a_stale_plan(backend, monkeypatch):
    """One program serves every length (InputSpec); each length has its own plan, and with
    ``auto`` a length's plan is replaced once it tiers up. Calls that alternate lengths, and
    calls that repeat one, must each run the plan of their own shape."""
    monkeypatch.setenv("HYBRIDFW_TIER_BACKGROUND", "0")
    f = hf.jit.to_static(doubled_sum, input_spec=[hf.jit.InputSpec([None], "float32")],
                         backend=backend, tier_after=2)
    for n in (3, 3, 3, 3, 5, 5, 5, 3, 3, 5, 4, 4, 4, 4, 3):
        x = np.arange(n, dtype=np.float32)
        np.testing.assert_allclose(f(hf.tensor(x)).numpy(), [2 * x.sum()])
    assert len(f.signatures()) == 1


def pair_and_constant(x, y):
    return (x * y, x - y), 7


def test_repeated_calls_rebuild_nested_results_each_time():
    """The repeated-call path (same signature, plan settled) returns fresh tensors in the
    function's own structure, each call's own values."""
    f = hf.jit.to_static(pair_and_constant, backend="interpreted")
    outs = []
    for k in range(4):
        x, y = hf.tensor([1.0 + k, 2.0]), hf.tensor([3.0, 4.0 * k])
        (prod, diff), seven = f(x, y)
        assert seven == 7
        np.testing.assert_allclose(prod.numpy(), [3.0 * (1.0 + k), 8.0 * k])
        np.testing.assert_allclose(diff.numpy(), [k - 2.0, 2.0 - 4.0 * k])
        outs.append(prod)
    assert len({id(o) for o in outs}) == 4
    np.testing.assert_allclose(outs[0].numpy(), [3.0, 0.0])  # not overwritten by later calls
    assert f.cache_info().hits == 3


@pytest.mark.parametrize("backend", ["interpreted", "compiled"])
def test_detach_stops_gradients_as_in_eager(backend):
    """``y.detach()`` in converted code: the gradient flows through ``y`` but not through its
    detached copy (d/dw sum((x@w) * (x@w).detach()) = x^T (x@w), half the undetached one)."""
    rng = np.random.default_rng(11)
    x = hf.tensor(rng.standard_normal((4, 3)).astype(np.float64))
    w0 = rng.standard_normal((3, 2))

    def loss(x, w):
        y = x @ w
        return (y * y.detach()).sum() + y.detach().exp().sum()

    grads = []
    for fn in (loss, hf.jit.to_static(loss, backend=backend)):
        w = hf.tensor(w0, requires_grad=True)
        value = fn(x, w)
        value.backward()
        grads.append((value.item(), w.grad.numpy()))
    xn = x.numpy()
    y = xn @ w0
    np.testing.assert_allclose(grads[1][0], (y * y).sum() + np.exp(y).sum(), rtol=1e-12)
    np.testing.assert_allclose(grads[1][1], xn.T @ y, rtol=1e-12)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-12)


def test_to_cpu_contiguous_in_converted_code():
    """Tensor conversions in converted code: ``.to(dtype)``, ``.to(other)``, ``.to('cpu')``,
    ``.cpu()``, ``.contiguous()`` as in eager; a device the program is not on is refused,
    naming the variable."""
    def convert(x, other):
        a = x.to(hf.float64) + x.to(other).contiguous() + x.cpu().to("cpu", hf.float64)
        return a, x.to(dtype="int32"), x.is_contiguous(), x.to(copy=True) * 1

    x = hf.tensor(np.array([1.5, -2.25, 3.0], np.float32))
    other = hf.tensor(np.zeros(1))  # float64
    static = hf.jit.to_static(convert)
    for got, want in zip(static(x, other), convert(x, other)):
        if isinstance(want, bool):
            assert got is want
            continue
        assert got.dtype is want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())

    @hf.jit.to_static
    def to_gpu(x):
        return x.to("cuda") * 2

    with pytest.raises(ValueError, match=r"static Variable 'input_0'.*one device"):
        to_gpu(x)


@pytest.mark.parametrize("backend", ["interpreted", "compiled"])
def test_no_grad_blocks_stop_gradients_as_in_eager(backend):
    """``with hf.no_grad():`` inside converted code records nothing for backward, as in eager:
    d/dw sum((x@w) * z) with z = 2 (x@w) computed under no_grad is x^T z, not 2 x^T z."""
    rng = np.random.default_rng(12)
    x = hf.tensor(rng.standard_normal((4, 3)))
    w0 = rng.standard_normal((3, 2))

    def loss(x, w):
        y = x @ w
        with hf.no_grad():
            z = y * 2
            if z.sum() > 0:  # a converted if under no_grad too
                z = z + 1
            else:
                z = z - 1
        return (y * z).sum()

    grads = []
    for fn in (loss, hf.jit.to_static(loss, backend=backend)):
        w = hf.tensor(w0, requires_grad=True)
        fn(x, w).backward()
        grads.append(w.grad.numpy())
    y = x.numpy() @ w0
    z = 2 * y + (1 if (2 * y).sum() > 0 else -1)
    np.testing.assert_allclose(grads[1], x.numpy().T @ z, rtol=1e-12)
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


def test_outputs_no_gradient_reaches_do_not_require_grad():
    """As eager: a returned value made under no_grad, detached, or only from tensors that need
    no gradient does not require grad (numpy() works on it), while the loss still does."""
    def step(x, w):
        with hf.no_grad():
            target = x * w
        loss = ((x * w - target.mean()) ** 2).sum()
        return loss, target, (x * w).detach(), x * 2

    x = hf.tensor([1.0, 2.0])
    w = hf.tensor([3.0, 4.0], requires_grad=True)
    loss, target, detached, doubled = hf.jit.to_static(step)(x, w)
    assert loss.requires_grad
    assert not target.requires_grad and not detached.requires_grad
    assert not doubled.requires_grad
    np.testing.assert_allclose(target.numpy(), [3.0, 8.0])
    np.testing.assert_allclose(doubled.numpy(), [2.0, 4.0])
    loss.backward()  # d/dw sum((x w - 5.5)^2) = 2 x (x w - 5.5), target held constant
    np.testing.assert_allclose(w.grad.numpy(), [-5.0, 10.0])


@pytest.mark.parametrize("backend", ["interpreted", "compiled"])
def test_an_in_place_update_of_an_argument_reaches_the_callers_tensor(backend):
    """Eager ``x.add_(1)`` / ``x[0] = 5`` change the caller's tensor; so does each call of the
    converted function (the final value is written back, its storage version bumped)."""
    def bump(x):
        x.add_(1.0)
        return x * 2

    def assign(x, y):
        x[0] = 5.0
        x.mul_(y)
        return x.sum() + y.sum()

    for fn, args in ((bump, [[1.0, 2.0, 3.0]]), (assign, [[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]])):
        static = hf.jit.to_static(fn, backend=backend)
        eager_args = [hf.tensor(np.array(a, np.float32)) for a in args]
        static_args = [hf.tensor(np.array(a, np.float32)) for a in args]
        for _ in range(3):  # the repeated (fast-path) calls write back too
            version = static_args[0]._storage.version
            want, got = fn(*eager_args), static(*static_args)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
            for e, s in zip(eager_args, static_args):
                np.testing.assert_array_equal(s.numpy(), e.numpy())
            assert static_args[0]._storage.version > version


def test_training_through_a_function_that_updates_an_argument():
    """The updated argument (no grad) is written back; the weight's gradient is eager's. An
    argument the backward reads from before its update fails at backward, as in eager."""
    def step(x, w):
        x.mul_(0.5)
        return (x * w).sum() + w.sum()

    def stale(x, w):
        y = (x * w).sum()  # saves x for w's gradient
        x.mul_(0.5)
        return y

    w0 = np.array([0.5, -1.0, 2.0])
    results = []
    for fn in (step, hf.jit.to_static(step), hf.jit.to_static(step, memory_budget="sqrt")):
        x = hf.tensor(np.array([1.0, 2.0, 3.0]))
        w = hf.tensor(w0, requires_grad=True)
        fn(x, w).backward()
        results.append((x.numpy(), w.grad.numpy()))
    for got in results[1:]:  # (with a memory budget too: the written value is a forward fetch)
        np.testing.assert_array_equal(got[0], [0.5, 1.0, 1.5])
        np.testing.assert_allclose(got[1], results[0][1], rtol=1e-12)
        np.testing.assert_allclose(got[1], [1.5, 2.0, 2.5], rtol=1e-12)
    for fn in (stale, hf.jit.to_static(stale)):
        x = hf.tensor(np.array([1.0, 2.0, 3.0]))
        out = fn(x, hf.tensor(w0, requires_grad=True))
        np.testing.assert_array_equal(x.numpy(), [0.5, 1.0, 1.5])
        with pytest.raises(RuntimeError, match="modified in place"):
            out.backward()


def test_an_in_place_update_eager_refuses_is_refused_naming_the_line():
    def bump(x):
        x.add_(1.0)
        return x * 2

    def to_float(x):
        x.add_(0.5)  # int64 += float: eager raises TypeError
        return x

    leaf = hf.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(ConversionError, match="argument 0 requires grad") as info:
        hf.jit.to_static(bump)(leaf)
    assert "x.add_(1.0)" in str(info.value) and "test_to_static.py" in str(info.value)
    with pytest.raises(TypeError):
        to_float(hf.tensor([1, 2]))
    with pytest.raises(TypeError, match="can't be cast") as info:  # the error eager raises
        hf.jit.to_static(to_float)(hf.tensor([1, 2]))
    assert "x.add_(0.5)" in str(info.value)


def test_a_clone_updated_in_place_leaves_the_original_alone():
    """``y = x.clone(); y[0] = 5`` then ``x + y``: x keeps its values, as in eager (the clone
    was once the very same Variable, and the update reached x too: [10, 4, 6])."""
    def f(x):
        y = x.clone()
        y[0] = 5.0
        y.mul_(1.0)
        return x + y

    x = hf.tensor(np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_array_equal(hf.jit.to_static(f)(x).numpy(), [6.0, 4.0, 6.0])
    np.testing.assert_array_equal(f(x).numpy(), [6.0, 4.0, 6.0])


def test_in_place_updates_inside_converted_if_and_while():
    """``y.add_(1)`` in a tensor-dependent if/while body updates the local ``y`` as in eager
    (it is a value the branch or loop carries, like ``y[i] = v``); an argument updated in an
    if body is written back to the caller's tensor, as eager changes it; one updated in a loop
    body cannot be and is refused."""
    def branch(x, flag):
        y = x.clone()
        if flag > 0:
            y.add_(1.0)
        else:
            y[0] = -1.0
        return y * 2

    def loop(x, n, local=True):
        y = x * 1 if local else x  # (local=False: the loop updates the argument itself)
        i = n * 0
        while i < n:
            y.mul_(2.0)
            i = i + 1
        return y.sum()

    def argument_in_loop(x, n):
        return loop(x, n, local=False)

    def argument_in_branch(x, flag):
        if flag > 0:
            x.add_(1.0)
        return x * 2

    for fn, extra in ((branch, 1), (branch, -1), (loop, 3), (loop, 0)):
        x = hf.tensor(np.array([1.0, 2.0]))
        want = fn(x, hf.tensor(extra)).numpy()
        np.testing.assert_array_equal(hf.jit.to_static(fn)(x, hf.tensor(extra)).numpy(), want)
        np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    with pytest.raises(ConversionError, match="updated in place inside a converted") as info:
        hf.jit.to_static(argument_in_loop)(hf.tensor(np.array([1.0, 2.0])), hf.tensor(2))
    assert "y.mul_(2.0)" in str(info.value)  # the user's line of the update
    static = hf.jit.to_static(argument_in_branch)
    for flag in (1, -1, 1):
        x, y = hf.tensor(np.array([1.0, 2.0])), hf.tensor(np.array([1.0, 2.0]))
        np.testing.assert_array_equal(static(x, hf.tensor(flag)).numpy(),
                                      argument_in_branch(y, hf.tensor(flag)).numpy())
        np.testing.assert_array_equal(x.numpy(), y.numpy())  # the caller's tensor too


def _alias_updated_in_a_branch(x):
    y = x * 1
    held = [y]
    alias = y
    if x.sum() > 0:
        y.mul_(3)
    return held[0] + alias


def test_an_update_in_a_branch_reaches_every_reference_to_the_tensor():
    """A tensor updated in place in a branch: a list holding it and another name for it see
    the update, as in eager (they kept the old value, gradients included)."""
    f = hf.jit.to_static(_alias_updated_in_a_branch)
    for values in ([1.0, 2.0], [-1.0, -2.0]):
        x, ref = hf.tensor(values, requires_grad=True), hf.tensor(values, requires_grad=True)
        got, want = f(x), _alias_updated_in_a_branch(ref)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy())
        got.sum().backward()
        want.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), ref.grad.numpy())


def test_print_of_f_strings_shows_each_runs_values(capsys):
    """f-strings in converted code: format specs, conversions, ``{x=}``, literal braces and
    Python values give eager's text; a static value printed is formatted with each run's
    value (not the Variable that stood for it while tracing)."""
    def report(x, k: int):
        s = x.sum()
        print(f"{k=} {k:>4d} {{literal}} s={s:.3f} r={s!r} {x.shape} {'txt'!s:>6}")
        if s > 4:
            print(f"big mean {x.mean():.2f}", f"layer_{k}")
        return s * 2

    static = hf.jit.to_static(report)
    for values in ([1.0, 2.0], [5.0, 2.0], [0.5, 0.25]):
        x = hf.tensor(np.array(values, np.float32))
        report(x, 3)
        eager = capsys.readouterr().out
        static(x, 3)
        assert capsys.readouterr().out == eager
        assert "Variable" not in eager
    assert "_jst.format_string(" in hf.jit.get_code(report)


def scaled(x, k=2.0):
    return x * k + 1.0


def test_the_fast_path_checks_everything_the_signature_holds(monkeypatch):
    """Repeated calls skip the signature (one generated check per argument, then the plan).
    Calls alternating each thing that check covers — shape, dtype, requires_grad, grad mode,
    a Python argument, a keyword, the number of arguments, a tensor subclass — each run their
    own program, equal to eager; each check is generated once per signature, not per call."""
    monkeypatch.setenv("HYBRIDFW_TIER_BACKGROUND", "0")
    f = hf.jit.to_static(scaled, backend="auto", tier_after=2)
    rng = np.random.default_rng(5)
    a = hf.tensor(rng.normal(size=(3,)).astype("float32"))
    b = hf.tensor(rng.normal(size=(2, 3)).astype("float32"))
    c = hf.tensor(rng.normal(size=(3,)))  # float64
    d = hf.tensor(rng.normal(size=(3,)).astype("float32"), requires_grad=True)
    p = nn.Parameter(hf.tensor(rng.normal(size=(3,)).astype("float32")))
    # consecutive calls differ in one thing each, so a check left out reuses the wrong program
    calls = [((a,), {}, True), ((c,), {}, True), ((a,), {}, True), ((b,), {}, True),
             ((a,), {}, True), ((d,), {}, True), ((d,), {}, False), ((d,), {}, True),
             ((a, 3.0), {}, True), ((a,), {}, True), ((a,), {"k": 4.0}, True), ((p,), {}, True)]
    for _ in range(4):
        for args, kwargs, grad in calls:
            with hf.set_grad_enabled(grad):
                got, want = f(*args, **kwargs), scaled(*args, **kwargs)
            assert got.dtype == want.dtype and got.requires_grad == want.requires_grad
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    made = sum(len(entry.fast_callers) for entry in f._cache.values())
    assert made == 5, made  # one per fast key: a, b, c, d, d without grad (all tensors)
    for _ in range(3):
        f(a)
    entry = f._fast[1]  # settled after tiering: the caller calls the compiled plan itself
    assert entry._hot_plan is not None
    assert f._fast_call.__globals__["_plan"] is entry._hot_plan
    g = d.detach() * 1.0
    g.requires_grad_(True)
    f(g).sum().backward()  # gradients still flow on the path with a backward
    np.testing.assert_allclose(g.grad.numpy(), np.full(3, 2.0), rtol=1e-6)


def test_the_fast_path_follows_train_and_eval_modes():
    """A Module's fast path also checks its train/eval modes: dropout on in train, off in eval,
    alternating call by call."""
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    static = hf.jit.to_static(model)
    x = hf.ones(8, 4)
    for _ in range(3):
        model.eval()
        with hf.no_grad():
            np.testing.assert_allclose(static(x).numpy(), model(x).numpy(), rtol=1e-6)
        model.train()
        with hf.no_grad():
            out = static(x).numpy()
        with hf.no_grad():
            clean = model[0](x).numpy()
        dropped = out == 0.0
        assert dropped.any() and not dropped.all()
        np.testing.assert_allclose(out[~dropped], 2.0 * clean[~dropped], rtol=1e-5)


def test_the_garbage_collector_pauses_while_a_program_is_traced():
    """Tracing (and optimizing, planning) runs with gc paused: it makes many objects that live
    on, which gc would otherwise walk again and again. The collector is back on afterwards,
    after a failed trace too, and one the caller had disabled stays disabled."""
    import gc
    seen = []

    def probe(x):
        seen.append(gc.isenabled())
        return x + 1.0

    def failing(x):
        seen.append(gc.isenabled())
        return x @ x  # 1-d @ 1-d of different lengths: a shape error at trace time

    assert gc.isenabled()
    np.testing.assert_allclose(hf.jit.to_static(probe)(hf.ones(2)).numpy(), [2.0, 2.0])
    assert seen == [False] and gc.isenabled()
    with pytest.raises(ValueError, match="matmul"):
        hf.jit.to_static(failing)(hf.ones(2, 3))
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        hf.jit.to_static(probe)(hf.ones(3))
        assert seen[-1] is False and not gc.isenabled()
    finally:
        gc.enable()


def test_the_garbage_collector_pauses_while_an_interpreted_plan_is_built(monkeypatch):
    """Building a plan (memory plan, generated source) also runs with gc paused, and gc is back
    on after it; compiling regions with numba does not pause it (seconds of numba's own
    garbage)."""
    import gc

    from hybridfw.static import executor as executor_module
    seen = []
    real = executor_module._compile_program

    def recording(*args, **kwargs):
        seen.append((bool(kwargs.get("lower")), gc.isenabled()))
        return real(*args, **kwargs)

    monkeypatch.setattr(executor_module, "_compile_program", recording)
    f = hf.jit.to_static(scaled, backend="interpreted")
    np.testing.assert_allclose(f(hf.ones(2)).numpy(), [3.0, 3.0])
    assert seen == [(False, False)] and gc.isenabled()
    from hybridfw.static import lowering
    if lowering.available(announce=False):
        seen.clear()
        g = hf.jit.to_static(scaled, backend="compiled")
        np.testing.assert_allclose(g(hf.ones(3)).numpy(), [3.0, 3.0, 3.0])
        assert (True, True) in seen and gc.isenabled()


def scale_by_own_sum(x):
    v = x.sum().item()
    w = float(x.mean())
    return (x * v * w).sum()


def numbers_out(x):
    return x.sum().item(), float(x.mean()), int(x.sum()), bool(x.max() > 2), x.tolist(), x.sum()


@pytest.mark.parametrize("backend", ["interpreted", "compiled"])
def test_item_and_float_are_python_numbers_as_in_eager(backend):
    """``x.item()``, ``float(x)``, ``int(x)``, ``bool(x)`` and ``x.tolist()`` in converted
    code stand for Python numbers, as in eager code: no gradient flows through them
    (d/dx sum(x * v * w) with v = sum(x), w = mean(x) taken as numbers is v * w = 12 for
    x = [1, 2, 3], where following them too would give 12 + 6 * 2 + 6 * 6 / 3 = 36), and the
    converted function returns them as int / float / bool, on every call."""
    f = hf.jit.to_static(scale_by_own_sum, backend=backend)
    for _ in range(3):
        x = hf.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = f(x)
        out.backward()
        assert out.item() == pytest.approx(6.0 * 2.0 * 6.0)
        np.testing.assert_allclose(x.grad.numpy(), [12.0, 12.0, 12.0], rtol=1e-6)
    g = hf.jit.to_static(numbers_out, backend=backend)
    for values in ([1.0, 2.0, 3.0], [0.5, 1.5, 1.0]):
        x = hf.tensor(values)
        got, want = g(x), numbers_out(x)
        assert [type(v) for v in got[:4]] == [float, float, int, bool]
        assert got[:4] == pytest.approx(want[:4]) and got[3] == want[3]
        assert got[4] == pytest.approx(want[4]) and all(type(v) is float for v in got[4])
        assert isinstance(got[5], hf.Tensor) and got[5].item() == pytest.approx(sum(values))
    x = hf.tensor([1.0, 2.0, 3.0], requires_grad=True)  # with gradients wanted too
    got = g(x)
    assert type(got[0]) is float and got[5].requires_grad
    got[5].backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0, 1.0])


def doublings(x):
    n = 0
    while x.sum() < 100:
        x = x * 2
        n += 1
    return x, n


def first_big_step(x):
    for i in range(5):
        if x.sum() > 10:
            return x, i
        x = x * 2
    return x, -1


def sum_of_indices(x):
    total = 0
    for i in range(x.sum().int()):
        total += i
    return total, total * 2 + 1


def test_python_numbers_through_tensor_control_flow_come_back_as_numbers():
    """A Python number a tensor-decided loop or branch carries (a counter, the index of an
    early return, a range index and arithmetic on it) is an int in eager code, and comes back
    as one; a number that meets a tensor becomes a tensor, as in eager code."""
    f, g, h = (hf.jit.to_static(fn) for fn in (doublings, first_big_step, sum_of_indices))
    for values in ([1.0, 2.0], [30.0, 40.0], [3.0, 1.0]):
        x = hf.tensor(values)
        for fn, conv in ((doublings, f), (first_big_step, g)):
            want, got = fn(x), conv(x)
            np.testing.assert_allclose(got[0].numpy(), want[0].numpy())
            assert type(got[1]) is int and got[1] == want[1], (fn.__name__, got[1], want[1])
        assert h(x) == sum_of_indices(x) and all(type(v) is int for v in h(x))
    mixed = hf.jit.to_static(acc_of_sums)
    x = hf.tensor([1.0, 2.0])
    got, want = mixed(x), acc_of_sums(x)
    assert isinstance(got[0], hf.Tensor) and got[0].item() == pytest.approx(want[0].item())
    assert type(got[1]) is float and got[1] == want[1]


def acc_of_sums(x):
    s = 0.0
    k = 0.0
    while x.sum() < 100:
        x = x * 2
        s = s + x.sum()
        k = k + 0.5
    return s, k


# ---- dims known only when the program runs (an InputSpec's None) ---------------------------------
def flatten_rows(x):
    return x.reshape(x.shape[0], -1)


def fresh_state(x):
    return hf.zeros(x.shape[0], 3) + x[:, :1]


def split_pairs(x):
    b = x.size(0)
    return x.view(b, 2, -1).sum(1)


def rows_loop(x):
    s = x[0] * 0
    for i in range(x.shape[0]):
        s = s + x[i] * i
    return s


def mean_by_count(x):
    n = x.shape[0]
    return x / n, n * 2, x.numel(), len(x)


def two_unknowns(x, y):
    return y.reshape(x.shape[0], -1) + hf.ones(x.shape[0], y.shape[1] * y.shape[0] // x.shape[0])


@pytest.mark.parametrize("fn", [flatten_rows, fresh_state, split_pairs, rows_loop, mean_by_count])
def test_converted_code_reads_dims_known_only_when_the_program_runs(fn):
    """With ``InputSpec([None, 4])``, ``x.shape[0]`` is only known when the program runs: the
    converted code gets it as a value of the program (it used to read -1 while tracing and bake
    that in: a reshape failed, ``range(x.shape[0])`` ran no step, ``x / x.shape[0]`` divided by
    -1), so one program gives eager's results for every batch size; sizes stay ints."""
    f = hf.jit.to_static(fn, input_spec=[hf.jit.InputSpec([None, 4])])
    for b in (2, 3, 6):
        x = hf.tensor(np.arange(b * 4, dtype=np.float32).reshape(b, 4) - 5.0)
        want, got = fn(x), f(x)
        want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
        for w, g in zip(want, got):
            if isinstance(w, hf.Tensor):
                assert g.shape == w.shape
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)
            else:
                assert type(g) is type(w) and g == w
    assert f.cache_info().misses == 1


def test_a_size_read_from_another_tensor_reshapes_at_run_time():
    """Sizes combining two tensors' unknown dims (``y.reshape(x.shape[0], -1)``): the reshape
    reads them when the program runs, for every pair of sizes, and gradients flow back."""
    spec = [hf.jit.InputSpec([None, 2]), hf.jit.InputSpec([None, 3])]
    f = hf.jit.to_static(two_unknowns, input_spec=spec)
    for bx, by in ((2, 4), (3, 2), (1, 5)):
        x = hf.ones(bx, 2)
        y = hf.tensor(np.arange(by * 3, dtype=np.float32).reshape(by, 3), requires_grad=True)
        got = f(x, y)
        np.testing.assert_allclose(got.detach().numpy(), two_unknowns(x, y).detach().numpy())
        got.sum().backward()
        np.testing.assert_allclose(y.grad.numpy(), np.ones((by, 3)))
    assert f.cache_info().misses == 1  # one program for every pair of sizes


def expand_rows(x):
    return x.expand(x.shape[0], 4) * 2


def expand_to_other(x, y):
    return x.expand(y.shape[0], 4)


def test_expand_takes_a_run_time_size_as_the_tensors_own_dim():
    f = hf.jit.to_static(expand_rows, input_spec=[hf.jit.InputSpec([None, 1])])
    for b in (2, 5):
        x = hf.arange(b).astype("float32").reshape(b, 1)
        np.testing.assert_allclose(f(x).numpy(), expand_rows(x).numpy())
    g = hf.jit.to_static(expand_to_other, input_spec=[hf.jit.InputSpec([None, 1]),
                                                      hf.jit.InputSpec([None])])
    with pytest.raises(TypeError, match="expand: size 0 is only known when the program runs"):
        g(hf.ones(3, 1), hf.ones(3))


class _ClassToken(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls = nn.Parameter(hf.arange(4).astype("float32").reshape(1, 1, 4))

    def forward(self, x):
        cls = self.cls.expand(x.shape[0], -1, -1)  # (ViT's class token, one per sample)
        return hf.cat([cls, x], dim=1), self.cls[0].expand(x.size(0), 2, 4)


def test_expand_of_a_parameter_to_another_tensors_run_time_size():
    # a parameter's dims of 1 (or new leading dims) broadcast to an input's InputSpec None dim,
    # gradient summed over it (was: AttributeError 'Parameter' object has no attribute 'name')
    model = _ClassToken()
    f = hf.jit.to_static(model, input_spec=[hf.jit.InputSpec([None, 3, 4])])
    for b in (1, 3):
        x = hf.ones(b, 3, 4)
        tokens, repeated = f(x)
        assert tokens.shape == (b, 4, 4) and repeated.shape == (b, 2, 4)
        np.testing.assert_allclose(tokens.detach().numpy()[:, 0], np.tile(np.arange(4.0), (b, 1)))
        model.cls.grad = None
        tokens.sum().backward()
        np.testing.assert_allclose(model.cls.grad.numpy(), np.full((1, 1, 4), float(b)))
    assert f.forward.cache_info().misses == 1


def add_if_same_shape(x, y):
    if x.shape == y.shape:
        return x + y
    return x * 0


def shape_facts(x):
    return (x.shape == x.shape, x.shape != (3, 4), x.shape == (2, 4) or x.shape[0] == 5,
            x.shape == [2, 4])  # (a tuple is never equal to a list)


def test_shapes_with_run_time_dims_compare_when_the_program_runs():
    """``x.shape == y.shape`` with batch dims known only at run time is decided when the
    program runs (a converted if branches on it); the same dim of the same tensor is equal
    while building; comparisons of sizes come back as Python bools, as in eager code."""
    spec = hf.jit.InputSpec([None, 4])
    f = hf.jit.to_static(add_if_same_shape, input_spec=[spec, spec])
    for bx, by in ((2, 2), (2, 3), (3, 3)):
        x, y = hf.ones(bx, 4), hf.ones(by, 4) * 2
        np.testing.assert_allclose(f(x, y).numpy(), add_if_same_shape(x, y).numpy())
    g = hf.jit.to_static(shape_facts, input_spec=[spec])
    for b in (2, 3, 5):
        got, want = g(hf.ones(b, 4)), shape_facts(hf.ones(b, 4))
        assert got == want and all(type(v) is bool for v in got), (b, got, want)


def dict_accumulator(x):
    d = {"sum": x[0] * 0, "count": 0}
    for row in x:
        d["sum"] = d["sum"] + row
        d["count"] = d["count"] + 1
    return d


class _Holder:
    def __init__(self):
        self.value = 0.0


def attribute_accumulator(x):
    box = _Holder()
    i = 0
    while x.sum() > i:
        box.value = box.value + x.mean()
        i += 1
    return box.value


def nested_list_append(x):
    d = {"rows": []}
    for row in x:
        d["rows"].append(row * 2)
    return hf.stack(d["rows"])


def test_containers_written_in_a_tensor_loop():
    """A dict item written in a loop over a tensor is carried by the loop (the probe of the
    body used to write into the caller's dict itself); values that leave the body another way
    (an object's attribute, a list inside a dict) get a clear error naming the line, not an
    internal KeyError."""
    x = hf.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    got, want = hf.jit.to_static(dict_accumulator)(x), dict_accumulator(x)
    np.testing.assert_allclose(got["sum"].numpy(), want["sum"].numpy())
    assert got["count"] == want["count"] == 3 and type(got["count"]) is int
    for fn in (attribute_accumulator, nested_list_append):
        with pytest.raises(ValueError, match="made inside the body of a loop or branch") as info:
            hf.jit.to_static(fn)(x)
        assert "test_to_static.py" in str(info.value)


def none_on_one_path_unused(x):
    if x.sum() > 0:
        extra = None
    else:
        extra = x * 3
    return x + 1


def none_on_one_path_used(x):
    if x.sum() > 0:
        extra = None
    else:
        extra = x * 3
    return x + extra  # the use: line of the error


def tuples_of_two_lengths(x):
    if x.sum() > 0:
        r = (x, x)
    else:
        r = (x,)
    return r


def test_branch_values_that_cannot_meet_fail_only_where_used():
    """An if a tensor decides whose branches give a variable values of different kinds (None
    and a tensor, tuples of different lengths) converts while the variable is not used
    afterwards; a use raises a ConversionError saying why, at the line of the use (for a
    returned value, the if's)."""
    f = hf.jit.to_static(none_on_one_path_unused)
    for v in (1.0, -1.0):
        np.testing.assert_allclose(f(hf.tensor([v, v])).numpy(), [v + 1, v + 1])
    for fn, line in ((none_on_one_path_used, "return x + extra"),  # (the use)
                     (tuples_of_two_lengths, "if x.sum() > 0:")):  # (returned: the if)
        with pytest.raises(ConversionError, match="in the if branch but") as info:
            hf.jit.to_static(fn)(hf.ones(2))
        assert line in str(info.value)


class _BatchHead(nn.Module):
    def __init__(self, norm):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.norm = norm
        self.fc = nn.Linear(64, 3)

    def forward(self, x):
        batch = x.size(0)
        h = nn.functional.max_pool2d(self.conv(x).relu(), 2)
        return self.fc(self.norm(h.view(batch, -1)))


def regroup(x):
    batch = x.size(0)
    h = x.reshape(-1, 2)  # (2 * batch, 2): its rows are not x's
    return h.view(batch, -1)


@pytest.mark.parametrize("norm", [nn.LayerNorm(64), nn.BatchNorm1d(64)],
                         ids=["LayerNorm", "BatchNorm1d"])
def test_a_batch_size_read_from_the_input_reshapes_a_tensor_computed_from_it(norm):
    """``batch = x.size(0)`` ... ``h.view(batch, -1)``: h's unknown dim is provably x's, so the
    reshape knows its other size while building (a LayerNorm / BatchNorm1d over it checks it)
    and stays a plain reshape; where the dims differ (``regroup``) it reads both at run time."""
    hf.manual_seed(0)
    model = _BatchHead(norm)
    static = hf.jit.to_static(model, input_spec=[hf.jit.InputSpec([None, 1, 8, 8])])
    for batch in (2, 3):
        x = hf.randn(batch, 1, 8, 8)
        np.testing.assert_allclose(static(x).detach().numpy(), model(x).detach().numpy(),
                                   rtol=1e-5, atol=1e-5)
    assert "reshape_dynamic" not in str(static.forward.concrete_program)
    f = hf.jit.to_static(regroup, input_spec=[hf.jit.InputSpec([None, 4])])
    for batch in (2, 3):
        x = hf.arange(batch * 4).float().reshape(batch, 4)
        np.testing.assert_allclose(f(x).numpy(), regroup(x).numpy())
    assert "reshape_dynamic" in str(f.concrete_program)


def test_attention_trains_with_batch_and_length_unknown():
    """to_static over a TransformerEncoderLayer with InputSpec([None, None, 8]): one program
    for every batch and length, outputs and parameter gradients equal to eager's."""
    hf.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
    static = hf.jit.to_static(layer, input_spec=[hf.jit.InputSpec([None, None, 8])])
    for shape in ((2, 5, 8), (3, 4, 8)):
        x = hf.randn(*shape)
        layer.zero_grad()
        layer(x).pow(2).sum().backward()
        want = [p.grad.numpy().copy() for p in layer.parameters()]
        layer.zero_grad()
        out = static(x)
        np.testing.assert_allclose(out.detach().numpy(), layer(x).detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        out.pow(2).sum().backward()
        for g, w in zip([p.grad.numpy() for p in layer.parameters()], want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    assert static.forward.cache_info().misses == 1


def test_unflatten_matches_its_reshape():
    x = hf.arange(24).float().reshape(2, 12)
    np.testing.assert_allclose(x.unflatten(1, (3, -1)).numpy(), x.numpy().reshape(2, 3, 4))
    np.testing.assert_allclose(x.unflatten(-2, (1, 2)).numpy(), x.numpy().reshape(1, 2, 12))


def grad_flags(x, w):
    y = x * 2
    z = (w * y).sum()
    return (x.requires_grad, y.requires_grad, z.requires_grad, z.detach().requires_grad,
            (x > 0).requires_grad)


def test_requires_grad_read_in_converted_code_is_eagers():
    """``t.requires_grad`` inside a converted function says what eager says: whether gradients
    reach t from an argument (or parameter) that requires them, through differentiable
    operators built with grad enabled (it said True for every float value)."""
    f = hf.jit.to_static(grad_flags)
    cases = [(hf.ones(2), hf.ones(2)), (hf.ones(2, requires_grad=True), hf.ones(2)),
             (hf.ones(2), hf.ones(2, requires_grad=True))]
    for x, w in cases:
        assert f(x, w) == grad_flags(x, w)
    with hf.no_grad():
        x, w = hf.ones(2, requires_grad=True), hf.ones(2)
        assert f(x, w) == grad_flags(x, w) == (True, False, False, False, False)
    layer = nn.Linear(2, 2)

    def through_layer(x):
        return layer(x).requires_grad

    g = hf.jit.to_static(through_layer)
    assert g(hf.ones(2)) is True
    layer.requires_grad_(False)
    assert hf.jit.to_static(through_layer)(hf.ones(2)) is False


def gather_rows(x, idx):
    return x.gather(1, idx) * 2


@pytest.mark.parametrize("backend", ["interpreted", "compiled"])
def test_gather_trains_with_a_dim_known_only_at_run_time(backend):
    """gather's gradient scatters into zeros of its input's shape: with an InputSpec None dim
    that shape is read when the program runs (it was refused while building)."""
    spec = [hf.jit.InputSpec([None, 4]), hf.jit.InputSpec([None, 2], "int64")]
    f = hf.jit.to_static(gather_rows, input_spec=spec, backend=backend)
    rng = np.random.default_rng(4)
    for n in (3, 5):
        idx = hf.tensor(rng.integers(0, 4, (n, 2)))
        grads = []
        for fn in (gather_rows, f):
            x = hf.tensor(rng.standard_normal((n, 4)).astype(np.float32), requires_grad=True)
            fn(x, idx).sum().backward()
            grads.append(x.grad.numpy())
        want = np.zeros((n, 4), np.float32)
        np.add.at(want, (np.arange(n)[:, None], idx.numpy()), 2.0)
        np.testing.assert_allclose(grads[0], want)
        np.testing.assert_allclose(grads[1], want)


_SCALE = hf.tensor([1.0, 2.0])


def _scaled(x):
    return x * _SCALE.reshape(1, 2) + 1.0


@pytest.mark.parametrize("backend", ["interpreted", "compiled"])
def test_buffers_and_globals_updated_between_calls_are_read_anew(backend):
    """A converted BatchNorm going train -> eval -> train -> eval uses the running statistics
    of the moment, and a global tensor updated in place is read anew at each call (constant
    folding once froze both at their first trace)."""
    hf.manual_seed(0)
    eager_bn = nn.BatchNorm1d(2)
    static_bn = hf.jit.to_static(nn.BatchNorm1d(2), backend=backend)
    x = hf.randn(4, 2) * 3 + 5
    for mode in ("eval", "train", "eval", "train", "eval"):
        for m in (eager_bn, static_bn):
            getattr(m, mode)()
        np.testing.assert_allclose(static_bn(x).detach().numpy(), eager_bn(x).detach().numpy(),
                                   rtol=1e-5, atol=1e-6, err_msg=mode)
    with hf.no_grad():
        for m in (eager_bn, static_bn):
            m.running_var.fill_(9.0)
    np.testing.assert_allclose(static_bn(x).detach().numpy(), eager_bn(x).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    static = hf.jit.to_static(_scaled, backend=backend)
    ones = hf.ones(1, 2)
    np.testing.assert_allclose(static(ones).numpy(), [[2.0, 3.0]])
    with hf.no_grad():
        _SCALE.mul_(10.0)
    try:
        np.testing.assert_allclose(static(ones).numpy(), [[11.0, 21.0]])
    finally:
        with hf.no_grad():
            _SCALE.div_(10.0)


def test_a_converted_module_exposes_its_programs():
    """hf.jit.to_static(module) is the converted callable: module.concrete_program and
    module.get_program(...) are its forward's (API.md), and a plain module has neither."""
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    assert not hasattr(model, "concrete_program")
    static = hf.jit.to_static(model)
    assert static.concrete_program is None
    x = hf.ones(4, 3)
    program = static.get_program(x)
    assert isinstance(program, hf.static.Program) and "linear" in str(program)
    static(x)
    assert static.concrete_program is program is static.forward.concrete_program
    assert "digraph" in static.concrete_program.to_dot()
    assert static.cache_info().misses == 1 and "forward" in static.code


def _counting_print(x):
    i = 0
    while x.sum() > i:
        print("i =", i, not (x.sum() > i + 1))
        i += 1
    print("total", x.sum().item(), f"{i}")
    return not (x.sum() > 0), i


def test_print_and_not_show_python_values_as_eager_does(capsys):
    """A Python number carried by a tensor loop prints as the number inside the body, x.item()
    prints as a float, and `not tensor` is a Python bool, printed and returned, as in eager."""
    x = hf.tensor([1.0, 1.0])
    eager = _counting_print(x)
    expected = capsys.readouterr().out
    assert expected == "i = 0 False\ni = 1 True\ntotal 2.0 2\n"
    static = hf.jit.to_static(_counting_print)
    for _ in range(2):
        got = static(x)
        assert capsys.readouterr().out == expected
        assert got == eager and type(got[0]) is bool and type(got[1]) is int


def _one_sided(x):
    if x.sum() > 0:
        y = x + 1
    return y


def _one_sided_used_where_assigned(x):
    if x.sum() > 0:
        y = x * 2
    z = x - 1
    if x.sum() > 0:
        z = z + y
    return z


def _nested_one_sided(x):
    if x.sum() > 0:
        if x.max() > 2:
            y = x * 3
        else:
            y = x * 4
    else:
        if x.min() < -2:
            y = x * 5
    return y * 1.0


def _returns_on_one_path(x):
    if x.sum() > 0:
        return x + 1


@pytest.mark.parametrize("backend", ["interpreted", "compiled"])
def test_a_variable_one_branch_leaves_unassigned_fails_only_where_eager_fails(backend):
    """A variable an if on a tensor condition assigns in one branch only: reading it after the
    other branch ran raises UnboundLocalError naming the if, as eager Python does (zeros were
    read silently); reading it only where it was assigned works on every path; a function
    returning on one path only returns None on the other."""
    f = hf.jit.to_static(_one_sided, backend=backend)
    np.testing.assert_allclose(f(hf.tensor([1.0, 2.0])).numpy(), [2.0, 3.0])
    with pytest.raises(UnboundLocalError, match=r"'y'.*test_to_static.py, line \d+"):
        f(hf.tensor([-1.0, -2.0]))
    with pytest.raises(UnboundLocalError):
        _one_sided(hf.tensor([-1.0, -2.0]))
    g = hf.jit.to_static(_one_sided_used_where_assigned, backend=backend)
    nested = hf.jit.to_static(_nested_one_sided, backend=backend)
    for values in ([1.0, 2.0], [-1.0, -2.0], [3.0, 1.0], [-1.0, -3.0], [-1.0, 0.5]):
        x = hf.tensor(values)
        np.testing.assert_allclose(g(x).numpy(), _one_sided_used_where_assigned(x).numpy())
        try:
            want = _nested_one_sided(x).numpy()
        except UnboundLocalError:
            with pytest.raises(UnboundLocalError, match="'y'"):
                nested(x)
        else:
            np.testing.assert_allclose(nested(x).numpy(), want)
    r = hf.jit.to_static(_returns_on_one_path, backend=backend)
    assert r(hf.tensor([-1.0])) is None and _returns_on_one_path(hf.tensor([-1.0])) is None
    np.testing.assert_allclose(r(hf.tensor([1.0])).numpy(), [2.0])


def _scaled_if_positive(x, a, b=1.0):
    return x * b if x.sum() > a else x


def test_a_functools_partial_converts_with_its_bound_arguments(tmp_path):
    import functools
    partial = functools.partial(_scaled_if_positive, a=0.0, b=3.0)
    f = hf.jit.to_static(partial)
    for values in ([1.0, 2.0], [-1.0, -2.0]):
        x = hf.tensor(values, requires_grad=True)
        np.testing.assert_allclose(f(x).detach().numpy(), partial(x).detach().numpy())
        f(x).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0] if values[0] > 0 else [1.0, 1.0])
    assert "convert_ifexp" in hf.jit.get_code(f) and "partial" in f.__qualname__
    hf.jit.save(f, str(tmp_path / "p"), input_spec=[hf.jit.InputSpec([2], name="x")])
    np.testing.assert_allclose(hf.jit.load(str(tmp_path / "p"))(hf.ones(2)).numpy(), [3.0, 3.0])


def _dict_in_branches(x, cache):
    out = {"keep": x}
    if x.sum() > 0:
        out["y"] = x * 2
    else:
        out["y"] = x * 3
    if x.sum() > 5:
        out["keep"] = x + 1
    return out["y"] + out["keep"] + cache["bias"]


def test_dict_items_written_in_both_branches_of_a_tensor_if():
    """A dict item each branch writes is merged like a variable (it raised an internal
    error naming a value of one branch); a dict neither branch writes stays the caller's."""
    f = hf.jit.to_static(_dict_in_branches)
    cache = {"bias": hf.tensor(0.5)}
    for values in ([1.0, 2.0], [-1.0, -2.0], [3.0, 4.0]):
        x = hf.tensor(values)
        np.testing.assert_allclose(f(x, cache).numpy(), _dict_in_branches(x, cache).numpy())
    assert list(cache) == ["bias"]


def _row_by_value(x):
    rows = list(x)
    return rows[int(x.sum() > 0)] * 2


def _first_n(x):
    n = int(x.sum().item())
    return x[:n]


@pytest.mark.parametrize("fn", [_row_by_value])
def test_full_graph_false_falls_back_where_python_needs_a_concrete_value(fn):
    """With full_graph=False, Python that needs a value the program only has when it runs (a
    Python list's index) runs eagerly, with a warning naming the line; with
    full_graph=True it is an error."""
    x = hf.tensor([1.0, -2.0, 3.0])
    with pytest.warns(UserWarning, match=r"falling back to eager(.|\n)*test_to_static.py"):
        got = hf.jit.to_static(fn, full_graph=False)(x)
    np.testing.assert_allclose(got.numpy(), fn(x).numpy())
    with pytest.raises(TypeError):
        hf.jit.to_static(fn)(x)


def test_a_slice_bound_from_item_converts():
    # x[:n] with n = int(x.sum().item()): the program slices by the value of each run
    f = hf.jit.to_static(_first_n)
    for values in ([1.0, -2.0, 3.0], [1.0, 1.0, 1.0], [0.5, 0.0, 0.0]):
        x = hf.tensor(values)
        np.testing.assert_array_equal(f(x).numpy(), _first_n(x).numpy())
    assert f.cache_info().misses == 1


def _checked_double(x):
    if x.sum() < 0:
        raise ValueError("negative input")
    return x * 2


def _past_the_end_on_one_path(x):
    n = 0
    if x.sum() > 0:
        y = x + 1
        n = 1
    else:
        y = x[10]
    return y, n


@pytest.mark.parametrize("backend", ["interpreted", "compiled"])
def test_a_branch_that_raises_raises_only_when_the_program_takes_it(backend):
    """An explicit raise, or an error such as x[10] past the end, in one branch of an if on a
    tensor condition: the conversion succeeds, and the error (its type and message, the
    user's line) comes only from runs that take that branch, as in eager Python."""
    f = hf.jit.to_static(_checked_double, backend=backend)
    g = hf.jit.to_static(_past_the_end_on_one_path, backend=backend)
    for _ in range(2):
        x = hf.tensor([1.0, 2.0], requires_grad=True)
        f(x).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
        with pytest.raises(ValueError, match=r"negative input(.|\n)*test_to_static.py"):
            f(hf.tensor([-1.0, -2.0]))
        y, n = g(hf.tensor([1.0, 2.0]))
        np.testing.assert_allclose(y.numpy(), [2.0, 3.0])
        assert n == 1 and type(n) is int
        with pytest.raises(IndexError, match=r"10(.|\n)*y = x\[10\]"):
            g(hf.tensor([-1.0, -2.0]))
    with pytest.raises(IndexError):
        _past_the_end_on_one_path(hf.tensor([-1.0, -2.0]))


def _or_past_the_end(x):
    return (x.sum() > 0) or (x[5] > 0)


def test_the_right_side_of_or_that_would_fail_fails_only_when_evaluated():
    f = hf.jit.to_static(_or_past_the_end)
    assert bool(f(hf.tensor([1.0, 2.0]))) is True  # short-circuited: x[5] never runs
    with pytest.raises(IndexError, match=r"(.|\n)*x\[5\]"):
        f(hf.tensor([-1.0, -2.0]))
    with pytest.raises(IndexError):
        _or_past_the_end(hf.tensor([-1.0, -2.0]))


def _views_see_updates(x):
    y = x * 1
    v = y[0:1]
    v.mul_(3)           # writes through to y
    w = y.reshape(2, 1)
    t = y.reshape(1, 2).permute(1, 0)
    y.add_(1)           # v, w and t see it
    return y * w.sum() + v.sum() + t.sum()


def _views_see_updates_functional(x):
    y = hf.cat([x[0:1] * 3, x[1:]]) + 1
    return y * y.sum() + y[0:1].sum() + y.sum()


def _view_updated_in_a_branch(x):
    y = x * 2
    v = y[1:]
    if x.sum() > 0:
        v.add_(10)
    return y


def test_in_place_updates_reach_views_as_in_eager():
    """A view (slice, reshape, permute) taken before an in-place update of its value sees the
    update, and an update of a view writes through to the value it views, as in eager code
    (static programs are functional: the views read stale values silently). Where the update
    happens inside a branch the view was not taken in, using the stale value is an error."""
    f = hf.jit.to_static(_views_see_updates)
    for values in ([1.0, 2.0], [-1.0, 3.0]):
        np.testing.assert_allclose(f(hf.tensor(values)).numpy(),
                                   _views_see_updates(hf.tensor(values)).numpy())
        x = hf.tensor(values, requires_grad=True)
        f(x).sum().backward()
        ref = hf.tensor(values, requires_grad=True)
        _views_see_updates_functional(ref).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), ref.grad.numpy(), rtol=1e-6)
    with pytest.raises(ConversionError, match="a view of it was updated in place inside"):
        hf.jit.to_static(_view_updated_in_a_branch)(hf.tensor([1.0, 2.0]))


def _soft_target_loss(x):
    return nn.functional.cross_entropy(x, nn.functional.softmax(x * 2, dim=1))


def test_cross_entropy_with_probability_targets_at_a_run_time_batch_size():
    """The mean over positions is counted when the program runs (a None batch dim read as -1
    gave the sum divided by -1)."""
    f = hf.jit.to_static(_soft_target_loss, input_spec=[hf.jit.InputSpec([None, 4])])
    for n in (3, 5):
        x = hf.tensor(np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32))
        logp = x.numpy() - np.log(np.exp(x.numpy()).sum(1, keepdims=True))
        target = np.exp(2 * x.numpy()) / np.exp(2 * x.numpy()).sum(1, keepdims=True)
        expected = -(logp * target).sum(1).mean()
        np.testing.assert_allclose(f(x).item(), expected, rtol=1e-5)
        np.testing.assert_allclose(_soft_target_loss(x).item(), expected, rtol=1e-5)


def _returns_on_every_path(x):
    if x.mean() > 0:
        return x + 1
    return x - 1


def test_a_function_returning_on_every_path_has_one_output(tmp_path):
    """Early returns on every path: the program fetches the value alone (no "was a value
    returned" flag), so an ONNX export has the eager function's one output."""
    f = hf.jit.to_static(_returns_on_every_path)
    np.testing.assert_allclose(f(hf.ones(3)).numpy(), [2.0] * 3)
    np.testing.assert_allclose(f(-hf.ones(3)).numpy(), [-2.0] * 3)
    assert f.get_concrete_program(hf.ones(3)).outputs.structure == ("leaf", 0)
    assert f.get_concrete_program(hf.ones(3)).fetch == f.get_concrete_program(hf.ones(3)).fetch[:1]
    onnx = pytest.importorskip("onnx")
    path = str(tmp_path / "f.onnx")
    hf.onnx.export(_returns_on_every_path, path, input_spec=[hf.jit.InputSpec([None, 3])])
    assert len(onnx.load(path).graph.output) == 1


def _positions(x):
    return hf.arange(x.shape[0]) * 2 + hf.arange(1, x.shape[0]).sum()


def test_arange_of_a_run_time_dim_and_clear_errors_where_unsupported():
    f = hf.jit.to_static(_positions, input_spec=[hf.jit.InputSpec([None, 4])])
    for n in (3, 5):
        got = f(hf.ones(n, 4))
        np.testing.assert_array_equal(got.numpy(), np.arange(n) * 2 + np.arange(1, n).sum())
        assert got.dtype is hf.int64
    spec = [hf.jit.InputSpec([None, 4])]
    with pytest.raises(TypeError, match="randn: a size known only when the program runs"):
        hf.jit.to_static(lambda_free_randn, input_spec=spec)(hf.ones(3, 4))
    with pytest.raises(ValueError, match="pad: reflect padding of dim 0, whose size is known"):
        hf.jit.to_static(lambda_free_pad, input_spec=spec)(hf.ones(3, 4))


def lambda_free_randn(x):
    return hf.randn(x.shape[0], 2)


def lambda_free_pad(x):
    return nn.functional.pad(x, (0, 0, 1, 1), mode="reflect")


def _accumulate_in_branches(x):
    acc = [x * 0]
    for v in x:
        if v > 0:
            acc[0] += v
    return acc[0]


def _accumulate_in_a_loop(n, x):
    acc = [x * 0, 1]
    kept = []
    for i in range(n):
        acc[0] += x
        kept.append(acc[0] * 1)
    return acc[0], len(kept)


def test_augmented_item_assignment_in_tensor_loops_and_branches():
    """acc[0] += v inside a tensor loop or branch (an in-place op on a list item) works as
    in eager code (it raised internal KeyErrors); len() of a list grown in a tensor loop is
    a Python int."""
    f = hf.jit.to_static(_accumulate_in_branches)
    g = hf.jit.to_static(_accumulate_in_a_loop)
    for values in ([1.0, -2.0, 3.0], [-1.0, -2.0, 0.5]):
        x = hf.tensor(values)
        np.testing.assert_allclose(f(x).numpy(), _accumulate_in_branches(x).numpy())
    for n in (0, 2, 3):
        got, count = g(hf.tensor(n), hf.tensor([1.0, 2.0]))
        want, want_count = _accumulate_in_a_loop(hf.tensor(n), hf.tensor([1.0, 2.0]))
        np.testing.assert_allclose(got.numpy(), want.numpy())
        assert count == want_count == n and type(count) is int


def _extended(n, x):
    out = [x]
    for i in range(n):
        out.extend([x * i, x + i])
    return hf.stack(out)


def test_list_extend_in_a_tensor_loop():
    f = hf.jit.to_static(_extended)
    for n in (0, 1, 3):
        np.testing.assert_allclose(f(hf.tensor(n), hf.tensor([1.0])).numpy(),
                                   _extended(hf.tensor(n), hf.tensor([1.0])).numpy())


def _builtins_on_tensors(x):
    top = max(x.sum(), x.max() * 2, 1.0) + min(x.min(), hf.tensor(0.5))
    if any(x > 2):
        top = top * 2
    return top, all(t.sum() > 0 for t in [x, x - 1]), any(x > 5), max(x)


def test_max_min_any_all_of_tensors_in_converted_code():
    """max/min of several tensors (or one tensor's items), any/all of a tensor or of tensor
    conditions: values of the program, as eager's values (they raised 'the truth value of
    static Variable'); any/all come back as Python bools."""
    f = hf.jit.to_static(_builtins_on_tensors)
    for values in ([1.0, 3.0], [-1.0, 0.25], [0.5, 1.5]):
        x = hf.tensor(values)
        got, want = f(x), _builtins_on_tensors(x)
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy())
        assert got[1] == bool(want[1]) and type(got[1]) is bool
        assert got[2] is bool(want[2])
        np.testing.assert_allclose(got[3].numpy(), want[3].numpy())


def _printed_strings(x):
    s = x.sum()
    i = 0
    while s > i:
        i += 1
    print(str(s), repr(s), str(i), str("plain"), repr([1]))
    return s


def _returned_string(x):
    return str(x.sum())


def test_str_and_repr_of_program_values_print_each_runs_value(capsys):
    """str(t)/repr(t) in converted code print the run's value as eager's text (they printed
    'Variable(t0: ...)'); returning such a string is a clear error (full_graph=False: eager)."""
    f = hf.jit.to_static(_printed_strings)
    for values in ([1.0, 2.0], [0.5, 0.25]):
        _printed_strings(hf.tensor(values))
        want = capsys.readouterr().out
        f(hf.tensor(values))
        assert capsys.readouterr().out == want
    with pytest.raises(ConversionError, match="formats a value the program computes"):
        hf.jit.to_static(_returned_string)(hf.ones(2))
    with pytest.warns(UserWarning, match="falling back"):
        assert hf.jit.to_static(_returned_string, full_graph=False)(hf.ones(2)) == "tensor(2.)"


class _RunningMean(hf.nn.Module):
    """Rebinds a buffer in forward (the running-average pattern), once in a tensor branch."""

    def __init__(self):
        super().__init__()
        self.register_buffer("ema", hf.zeros([]))
        self.lin = hf.nn.Linear(3, 3)

    def forward(self, x):
        self.ema = 0.9 * self.ema + 0.1 * x.mean()
        y = self.lin(x) - self.ema
        if y.sum() > 0:
            self.ema = self.ema * 2
        return y


def test_forward_rebinding_a_buffer_updates_it_on_every_call():
    hf.manual_seed(0)
    eager = _RunningMean()
    converted = _RunningMean()
    converted.load_state_dict(eager.state_dict())
    static = hf.jit.to_static(converted)
    buffer = converted.ema
    ema = 0.0
    for x in (hf.ones(2, 3), -3 * hf.ones(2, 3), 5 * hf.ones(2, 3), hf.ones(2, 3)):
        want = eager(x)
        got = static(x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
        # by hand: the running mean, doubled when the output's sum is positive
        ema = 0.9 * ema + 0.1 * float(x.mean())
        if float((eager.lin(x) - ema).sum()) > 0:
            ema *= 2
        np.testing.assert_allclose(float(converted.ema), ema, rtol=1e-6)
        np.testing.assert_allclose(float(eager.ema), ema, rtol=1e-6)
    assert converted.ema is buffer  # updated in place: the program writes into the buffer
    assert static.forward.cache_info().misses == 1


def test_forward_rebinding_a_buffer_needs_its_shape():
    class Grow(hf.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("seen", hf.zeros(2))

        def forward(self, x):
            self.seen = hf.cat([self.seen, x])
            return x

    with pytest.raises(ValueError, match=r"buffer 'seen'.*shape \(5,\).*needs its shape \(2,\)"):
        hf.jit.to_static(Grow())(hf.ones(3))


class _TwoHeads(hf.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = hf.nn.Linear(2, 2)
        self.b = hf.nn.Linear(2, 2)
        self.c = hf.nn.Linear(2, 2)

    def forward(self, x):
        x = self.c(x)
        if x.sum() > 0:
            return self.a(x)
        return self.b(x)


class _NestedHeads(_TwoHeads):
    def forward(self, x):
        x = self.c(x)
        if x.sum() > 0:
            if x.max() > 0:  # (true whenever the outer branch runs)
                x = self.a(x)
            else:
                x = x * 2.0
        else:
            x = self.b(x)
        return x


def test_a_parameter_read_only_in_a_nested_branch_of_the_untaken_branch_gets_no_gradient():
    """``a`` is read only inside an inner branch of the outer ``if``: when the outer branch is
    not taken, eager gives it None; to_static gave zeros (nested branches counted as always
    run), so weight decay and momentum moved it."""
    hf.manual_seed(0)
    eager, converted = _NestedHeads(), _NestedHeads()
    converted.load_state_dict(eager.state_dict())
    static = hf.jit.to_static(converted)
    seen = set()
    for x in ([[1.0, 2.0]], [[-5.0, -5.0]]):
        x = hf.tensor(x)
        for fn in (eager, static):
            for p in fn.parameters():
                p.grad = None
            fn(x).sum().backward()
        want = [n for n, p in eager.named_parameters() if p.grad is None]
        got = [n for n, p in converted.named_parameters() if p.grad is None]
        assert got == want, (x.tolist(), got, want)
        seen.add(tuple(want))
    assert seen == {("b.weight", "b.bias"), ("a.weight", "a.bias")}


def test_parameters_of_the_untaken_branch_get_no_gradient():
    # as eager autograd: a parameter only the untaken branch reads gets None (not zeros), so
    # weight decay and momentum leave it alone: training matches eager step for step
    hf.manual_seed(0)
    eager, converted = _TwoHeads(), _TwoHeads()
    converted.load_state_dict(eager.state_dict())
    static = hf.jit.to_static(converted)
    opts = [hf.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=0.5)
            for m in (eager, converted)]
    untaken = []
    for x in ([[1.0, 2.0]], [[-5.0, -5.0]], [[1.0, 2.0]], [[-3.0, 1.0]]):
        x = hf.tensor(x)
        for fn, opt in zip((eager, static), opts):
            opt.zero_grad()
            fn(x).sum().backward()
        want = [n for n, p in eager.named_parameters() if p.grad is None]
        got = [n for n, p in converted.named_parameters() if p.grad is None]
        assert got == want and len(want) == 2
        untaken.append(want[0][0])
        for opt in opts:
            opt.step()
    assert set(untaken) == {"a", "b"}  # both branches were taken, and skipped
    for p, q in zip(eager.parameters(), converted.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert static.forward.cache_info().misses == 1

    def add_if_positive(x, y):
        if x.sum() > 0:
            x = x + y
        return x * 2

    f = hf.jit.to_static(add_if_positive)
    for sign, y_grad in ((-1.0, None), (1.0, [2.0, 2.0])):
        x = hf.tensor([sign, sign], requires_grad=True)
        y = hf.ones(2, requires_grad=True)
        f(x, y).sum().backward()
        assert x.grad.tolist() == [2.0, 2.0]
        assert (y.grad if y.grad is None else y.grad.tolist()) == y_grad

    def add_if_its_sum_is_positive(x, y):
        # y is also read outside the branch, by the condition alone: still no gradient (None,
        # as eager) on a call that skipped the branch, not zeros
        if y.sum() > 0:
            x = x + y
        return x * 2

    f = hf.jit.to_static(add_if_its_sum_is_positive)
    for sign, y_grad in ((-1.0, None), (1.0, [2.0, 2.0])):
        x = hf.ones(2, requires_grad=True)
        y = hf.tensor([sign, sign], requires_grad=True)
        f(x, y).sum().backward()
        assert x.grad.tolist() == [2.0, 2.0]
        assert (y.grad if y.grad is None else y.grad.tolist()) == y_grad


def test_an_input_a_branch_returns_as_it_is_gets_its_gradient():
    # `return x` on the path not taken by the branch that reads x in an op (and a loop started
    # from x) still carries x's gradient: the pass-through counts as a use
    def scale_if_positive(x, y):
        if y.sum() > 0:
            return x * 2
        return x

    def grow(x, y):
        h = x
        if y.sum() > 0:
            h = x * 2
        i = 0
        while y.sum() + i < 3:
            h = h + 1
            i += 1
        return h

    for fn, cases in ((scale_if_positive, ((-1.0, [1.0, 1.0]), (1.0, [2.0, 2.0]))),
                      (grow, ((-1.0, [1.0, 1.0]), (1.0, [2.0, 2.0])))):
        f = hf.jit.to_static(fn)
        for sign, x_grad in cases:
            x = hf.tensor([1.0, 2.0], requires_grad=True)
            f(x, hf.tensor([sign, sign])).sum().backward()
            assert x.grad is not None and x.grad.tolist() == x_grad, (fn.__name__, sign)


def test_split_along_a_dim_known_only_at_run_time_is_refused_clearly():
    def first_piece(x):
        return hf.split(x, 1, 0)[0]

    def first_chunk(x):
        return hf.chunk(x, 2, 0)[0]

    spec = [hf.jit.InputSpec([None, 4])]
    for fn, name in ((first_piece, "split"), (first_chunk, "chunk")):
        with pytest.raises(ValueError, match=rf"{name}: dim 0 of the input of shape \(-1, 4\)"):
            hf.jit.to_static(fn, input_spec=spec)(hf.ones(3, 4))
    # along a dim of fixed size it works
    def second_half(x):
        return hf.split(x, 2, 1)[1]

    x = hf.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    out = hf.jit.to_static(second_half, input_spec=spec)(x)
    np.testing.assert_array_equal(out.numpy(), x.numpy()[:, 2:])


# ---- programs follow the modules they were traced from -----------------------------------------
class _Scaled(hf.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = hf.nn.Linear(3, 2)
        self.scale = 1.0
        self.use_relu = False

    def forward(self, x):
        y = self.fc(x) * self.scale
        if self.use_relu:
            y = hf.relu(y)
        return y


def test_replaced_parameters_submodules_and_attributes_are_seen():
    """As eager (and torch.compile's guards): a new Parameter, submodule or plain attribute
    value after the first call retraces; train()/eval() and in-place updates do not."""
    eager = _Scaled()
    model = hf.jit.to_static(eager)
    x = hf.tensor([[1.0, 2.0, -3.0]])

    def check():
        with hf.no_grad():
            got = model(x)
            want = _Scaled.forward(eager, x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)

    check()
    eager.fc.bias = hf.nn.Parameter(hf.tensor([5.0, -7.0]))
    check()
    eager.scale = 2.5
    check()
    eager.use_relu = True
    check()
    eager.fc = hf.nn.Linear(3, 2)
    check()
    traces = model.cache_info().misses
    with hf.no_grad():
        eager.fc.weight.mul_(2.0)  # in place: the program reads the same Parameter
    model.eval()
    check()
    model.train()
    check()
    assert model.cache_info().misses == traces + 1  # eval, once; train's program is kept
    check()
    assert model.cache_info().misses == traces + 1


def test_a_function_sees_a_replaced_parameter_of_a_module_it_calls():
    net = hf.nn.Linear(3, 1)

    @hf.jit.to_static
    def f(x):
        return net(x) * 2.0
    x = hf.ones(2, 3)
    np.testing.assert_allclose(f(x).detach().numpy(), net(x).detach().numpy() * 2, rtol=1e-6)
    net.weight = hf.nn.Parameter(hf.full((1, 3), 4.0))
    np.testing.assert_allclose(f(x).detach().numpy(), net(x).detach().numpy() * 2, rtol=1e-6)


_GLOBAL_SCALE = 3.0
_GLOBAL_SHIFT = 2
_GLOBAL_CALLS = 0


def _shifted(x):
    return x + _GLOBAL_SHIFT


def _scaled_by_global(x):
    return _shifted(x * _GLOBAL_SCALE)


def _counts_calls(x):
    global _GLOBAL_CALLS
    _GLOBAL_CALLS += 1
    return x * 2.0


def test_rebound_plain_globals_retrace():
    """A number a converted function (or one it calls) reads from its module's globals is
    checked on each call: rebinding it retraces, as eager would see the new value."""
    global _GLOBAL_SCALE, _GLOBAL_SHIFT
    f = hf.jit.to_static(_scaled_by_global)
    x = hf.tensor([1.0, 2.0, 3.0])
    try:
        for scale, shift in ((3.0, 2), (5.0, 2), (5.0, -4), (5.0, -4)):
            _GLOBAL_SCALE, _GLOBAL_SHIFT = scale, shift
            np.testing.assert_allclose(f(x).numpy(), _scaled_by_global(x).numpy())
        assert f.cache_info().misses == 3 and f.cache_info().hits == 1
    finally:
        _GLOBAL_SCALE, _GLOBAL_SHIFT = 3.0, 2


def test_a_global_the_function_assigns_is_not_a_reason_to_retrace():
    f = hf.jit.to_static(_counts_calls)
    x = hf.ones(2)
    for _ in range(3):
        f(x)
    assert f.cache_info().misses == 1


# ---- several dims known only at run time ---------------------------------------------------
_dyn_linear = hf.nn.Linear(4, 4)
_dyn_cell = hf.nn.LSTMCell(4, 5)


def _dyn_reduce_square(x):
    return _dyn_linear(x).sum(-1).pow(2).sum()


def _dyn_unsqueeze_squeeze(x):
    return (x.unsqueeze(1) * 2.0).squeeze(1).sum(1).unsqueeze(0).mean()


def _dyn_cell_loop(x):
    h = hf.zeros(x.shape[0], 5)
    c = hf.zeros(x.shape[0], 5)
    outs = []
    for t in range(x.shape[1]):
        h, c = _dyn_cell(x[:, t], (h, c))
        outs.append(h * 2.0)
    return (hf.stack(outs, dim=1) ** 2).sum()


@pytest.mark.parametrize("fn", [_dyn_reduce_square, _dyn_unsqueeze_squeeze, _dyn_cell_loop])
def test_batch_and_length_both_dynamic(fn):
    """InputSpec([None, None, 4]): reductions' gradients, unsqueeze/squeeze and a list
    appended to in a loop over the length work for every size (they failed with two unknown
    dims), values and gradients equal to eager."""
    f = hf.jit.to_static(fn, input_spec=[hf.jit.InputSpec([None, None, 4])])
    params = list(_dyn_linear.parameters()) + list(_dyn_cell.parameters())
    for shape in ((2, 3, 4), (1, 5, 4), (4, 1, 4)):
        x = hf.randn(*shape, requires_grad=True)
        got = f(x)
        got.backward()
        grads = [x.grad.numpy().copy()] + [None if p.grad is None else p.grad.numpy().copy()
                                            for p in params]
        x.grad = None
        for p in params:
            p.grad = None
        want = fn(x)
        want.backward()
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5)
        for g, p in zip(grads, [x] + params):
            if g is None:
                assert p.grad is None
            else:
                np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-5, atol=1e-6)
        x.grad = None
        for p in params:
            p.grad = None
    assert f.cache_info().misses == 1


def _trains_inside(model, opt, x):
    opt.zero_grad()
    loss = model(x).sum()
    loss.backward()
    opt.step()
    return loss


def _autograd_inside(x):
    y = (x * x).sum()
    return hf.autograd.grad([y], [x])[0]


def test_eager_autograd_inside_converted_code_falls_back_or_says_why():
    """loss.backward() / hf.autograd.grad on static values: a clear TypeError naming the
    user's line; with full_graph=False the function runs eagerly (with a warning)."""
    x = hf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.warns(UserWarning, match="falling back to eager.*grad: output 0"):
        got = hf.jit.to_static(_autograd_inside, full_graph=False)(x)
    np.testing.assert_allclose(got.numpy(), [2.0, 4.0, 6.0])
    with pytest.raises(TypeError, match="hf.static.gradients"):
        hf.jit.to_static(_autograd_inside)(x)
    model = hf.nn.Linear(3, 1)
    opt = hf.optim.SGD(model.parameters(), lr=0.1)
    before = model.weight.detach().numpy().copy()
    with pytest.warns(UserWarning, match="falling back to eager.*backward\\(\\) on static"):
        hf.jit.to_static(_trains_inside, full_graph=False)(model, opt, hf.ones(2, 3))
    np.testing.assert_allclose(model.weight.detach().numpy(), before - 0.1 * 2.0, rtol=1e-6)
    with pytest.raises(TypeError, match="call loss.backward\\(\\) on the result"):
        hf.jit.to_static(_trains_inside)(model, opt, hf.ones(2, 3))


def returns_early(x):
    if x.sum() > 0:
        return x * 2
    return x * 3


@pytest.mark.parametrize("spec", [[None], [2]])
def test_early_return_backward_on_both_paths_with_fixed_and_dynamic_specs(spec):
    """The backward of a program whose return value one branch leaves unassigned (the zeros
    standing in for it: with a dim of None, their shape read at run time) checks nothing: it
    raised UnboundLocalError on the path that returned late."""
    f = hf.jit.to_static(returns_early, input_spec=[hf.jit.InputSpec(spec)])
    for values in ([-1.0, -2.0], [1.0, 2.0], [3.0, -5.0]):
        x_s = hf.tensor(values, requires_grad=True)
        x_e = hf.tensor(values, requires_grad=True)
        out_s, out_e = f(x_s), returns_early(x_e)
        np.testing.assert_allclose(out_s.detach().numpy(), out_e.detach().numpy())
        (out_s * out_s).sum().backward()
        (out_e * out_e).sum().backward()
        np.testing.assert_allclose(x_s.grad.numpy(), x_e.grad.numpy())
    assert f.cache_info().programs == 1


@dataclasses.dataclass
class _Pair:
    a: object
    b: object
    tag: str = "pair"


@dataclasses.dataclass(frozen=True)
class _Frozen:
    a: object


def _returns_dataclasses(x):
    if x.sum() > 0:
        y = x * 2.0
    else:
        y = x - 1.0
    return _Pair(y, x + 1.0), _Frozen(x * 3.0)


def test_dataclass_results_hold_tensors():
    """A dataclass the function returns comes back with tensors in its fields (it held the
    program's values), other fields as traced; gradients flow through its tensors."""
    f = hf.jit.to_static(_returns_dataclasses)
    for values in ([1.0, 2.0], [-1.0, -2.0]):
        x = hf.tensor(values, requires_grad=True)
        pair, frozen = f(x)
        want_pair, want_frozen = _returns_dataclasses(x)
        assert type(pair) is _Pair and type(frozen) is _Frozen and pair.tag == "pair"
        for got, want in ((pair.a, want_pair.a), (pair.b, want_pair.b), (frozen.a, want_frozen.a)):
            assert isinstance(got, hf.Tensor)
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy())
        (pair.a.sum() + pair.b.sum()).backward()
        np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0] if values[0] > 0 else [2.0, 2.0])
    assert f.cache_info().misses == 1


def test_batchnorm1d_training_with_two_dynamic_dims():
    """A BatchNorm1d over (N, C, L) with N and L both dynamic trains in a static program (the
    values per channel, unknown until run time, are not taken as the product -1 * -1 = 1)."""
    eager_bn = nn.BatchNorm1d(4)
    static_bn = hf.jit.to_static(nn.BatchNorm1d(4),
                                 input_spec=[hf.jit.InputSpec([None, 4, None])])
    rng = np.random.default_rng(0)
    for n, length in ((2, 3), (5, 4)):
        x = rng.standard_normal((n, 4, length)).astype("float32")
        x_e, x_s = hf.tensor(x, requires_grad=True), hf.tensor(x, requires_grad=True)
        out_e, out_s = eager_bn(x_e), static_bn(x_s)
        np.testing.assert_allclose(out_s.detach().numpy(), out_e.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
        (out_e * out_e * out_e).sum().backward()
        (out_s * out_s * out_s).sum().backward()
        np.testing.assert_allclose(x_s.grad.numpy(), x_e.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(static_bn.running_mean.numpy(), eager_bn.running_mean.numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(static_bn.weight.grad.numpy(), eager_bn.weight.grad.numpy(),
                               rtol=1e-4, atol=1e-5)


def test_gradient_of_broadcast_input_with_two_dynamic_dims():
    """The gradient of an input broadcast against new leading dims, whose own dims are all
    known only at run time (a float (L, S) attention mask added to (N, H, L, S) scores), is
    summed down to it (no reshape of (1, 1, -1, -1) to (-1, -1), which nothing can infer)."""
    def f(scores, mask):
        return (scores + mask).exp()

    g = hf.jit.to_static(f, input_spec=[hf.jit.InputSpec([None, 2, None, None]),
                                        hf.jit.InputSpec([None, None])])
    rng = np.random.default_rng(1)
    for n, length in ((2, 3), (3, 4)):
        s = rng.standard_normal((n, 2, length, length)).astype("float32")
        m = rng.standard_normal((length, length)).astype("float32")
        s_t, m_t = hf.tensor(s, requires_grad=True), hf.tensor(m, requires_grad=True)
        out = g(s_t, m_t)
        out.sum().backward()
        np.testing.assert_allclose(m_t.grad.numpy(), np.exp(s + m).sum((0, 1)), rtol=1e-5)
        np.testing.assert_allclose(s_t.grad.numpy(), np.exp(s + m), rtol=1e-5)


def test_conv2d_training_with_dynamic_height_and_width():
    """A Conv2d whose input height and width are InputSpec None dims trains through a static
    program: for stride 1 the input gradient takes its size from the gradient when the program
    runs (it was computed for a -1 size: numpy's 'negative dimensions'); for stride 2, where the
    size cannot be recovered, a clear error names the op and the remedy."""
    spec = [hf.jit.InputSpec([None, 3, None, None])]
    hf.manual_seed(0)
    eager = nn.Conv2d(3, 4, 3, padding="same", dilation=2)
    static = hf.jit.to_static(nn.Conv2d(3, 4, 3, padding="same", dilation=2), input_spec=spec)
    static.load_state_dict(eager.state_dict())
    rng = np.random.default_rng(0)
    for shape in ((2, 3, 6, 7), (1, 3, 5, 9)):
        x = rng.standard_normal(shape).astype("float32")
        x_e, x_s = hf.tensor(x, requires_grad=True), hf.tensor(x, requires_grad=True)
        out_e, out_s = eager(x_e), static(x_s)
        (out_e * out_e).sum().backward()
        (out_s * out_s).sum().backward()
        np.testing.assert_allclose(x_s.grad.numpy(), x_e.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(static.weight.grad.numpy(), eager.weight.grad.numpy(),
                               rtol=1e-4, atol=1e-4)
    strided = hf.jit.to_static(nn.Conv2d(3, 4, 3, stride=2, padding=1), input_spec=spec)
    x = hf.tensor(rng.standard_normal((2, 3, 6, 7)).astype("float32"), requires_grad=True)
    out = strided(x)
    assert out.shape == (2, 4, 3, 4)
    with pytest.raises(ValueError, match=r"conv2d_input_grad: .*stride is 2.*InputSpec"):
        out.sum().backward()


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_bias_kv_and_zero_attn_with_dynamic_batch(batch_first):
    """MultiheadAttention(add_bias_kv=True, add_zero_attn=True) in a program whose batch is an
    InputSpec None dim: the appended key / zero attention are built for the run-time batch (an
    expand / zeros with n = -1 made a (1, 1, E) key that failed to concatenate, or a -1 size)."""
    hf.manual_seed(0)
    kw = dict(add_bias_kv=True, add_zero_attn=True, batch_first=batch_first)
    eager = nn.MultiheadAttention(8, 2, **kw)
    static = hf.jit.to_static(nn.MultiheadAttention(8, 2, **kw),
                              input_spec=[hf.jit.InputSpec([None, None, 8])] * 3)
    static.load_state_dict(eager.state_dict())
    rng = np.random.default_rng(0)
    for n, length in ((2, 3), (3, 5)):
        shape = (n, length, 8) if batch_first else (length, n, 8)
        x = rng.standard_normal(shape).astype("float32")
        x_e, x_s = hf.tensor(x, requires_grad=True), hf.tensor(x, requires_grad=True)
        (out_e, w_e), (out_s, w_s) = eager(x_e, x_e, x_e), static(x_s, x_s, x_s)
        np.testing.assert_allclose(out_s.detach().numpy(), out_e.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(w_s.detach().numpy(), w_e.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
        (out_e * out_e).sum().backward()
        (out_s * out_s).sum().backward()
        np.testing.assert_allclose(x_s.grad.numpy(), x_e.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(static.bias_k.grad.numpy(), eager.bias_k.grad.numpy(),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layer, op", [(nn.MaxPool2d(2), "max_pool2d"),
                                       (nn.AvgPool2d(2), "avg_pool2d"),
                                       (nn.AdaptiveAvgPool2d(1), "adaptive_avg_pool2d")])
def test_pool_training_with_dynamic_height_and_width_names_the_remedy(layer, op):
    """A pooling layer whose input height and width are InputSpec None dims runs forward; its
    gradient, which cannot recover those sizes, raises a ValueError naming the op, the shapes
    and the remedy (fixed sizes in the InputSpec)."""
    static = hf.jit.to_static(layer, input_spec=[hf.jit.InputSpec([None, 2, None, None])])
    x = np.random.default_rng(0).standard_normal((2, 2, 4, 6)).astype("float32")
    x_t = hf.tensor(x, requires_grad=True)
    out = static(x_t)
    np.testing.assert_allclose(out.detach().numpy(), layer(hf.tensor(x)).numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match=rf"{op}_backward: .*\(-1, 2, -1, -1\).*fixed sizes in "
                                         rf"the InputSpec to train through {op}"):
        out.sum().backward()


class _Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        if x.sum() > 0:
            return self.fc(x)
        return x * 3


class _Scaler:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        if x.sum() > 0:
            return x * self.k
        return x - self.k


def test_bound_methods_callable_objects_and_lambdas_convert():
    # to_static(model.forward) and to_static(obj) (a __call__) run the method on its object
    # (the object was dropped: "missing 1 required positional argument"); a lambda is traced
    # as it is, as lambdas inside converted code are called
    hf.manual_seed(0)
    model = _Gate()
    forward = hf.jit.to_static(model.forward)
    for v in (1.0, -1.0):
        x = hf.tensor([[v, 2 * v]])
        got, want = forward(x), model(x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    model.zero_grad()
    forward(hf.tensor([[1.0, 2.0]])).sum().backward()
    np.testing.assert_allclose(model.fc.weight.grad.numpy(), [[1.0, 2.0], [1.0, 2.0]])
    assert "def forward(self, x):" in hf.jit.get_code(model.forward)

    scaler = hf.jit.to_static(_Scaler(3.0))
    assert scaler(hf.tensor([1.0, 2.0])).tolist() == [3.0, 6.0]
    assert scaler(hf.tensor([-1.0, -2.0])).tolist() == [-4.0, -5.0]
    assert "def __call__(self, x):" in hf.jit.get_code(_Scaler(3.0))

    double = hf.jit.to_static(lambda x: x * 2 + 1)
    assert double(hf.tensor([1.0, 2.0])).tolist() == [3.0, 5.0]
    assert double(hf.tensor([3.0])).tolist() == [7.0]


def prefix_sums(x):
    y = hf.zeros_like(x)
    for i in range(len(x)):
        y[i] = x[:i + 1].sum()
    return y


def test_slices_by_bounds_known_only_at_run_time():
    # x[:i + 1] with i the index of a loop over an InputSpec None dim, x[a:b] / x[-a:, ::2] /
    # y[:n] = 0 with tensor bounds: one program for every size and bound, gradients as eager
    # (was: "int() argument must be ..., not 'Variable'")
    f = hf.jit.to_static(prefix_sums, input_spec=[hf.jit.InputSpec([None])])
    assert f(hf.tensor([1.0, 2.0, 3.0])).tolist() == [1.0, 3.0, 6.0]
    assert f(hf.tensor([1.0, 1.0])).tolist() == [1.0, 2.0]
    g = hf.jit.to_static(slices_by_tensors)
    for a, b in ((1, 4), (0, 9), (3, 2), (2, -1)):
        x = hf.tensor(np.arange(30.0, dtype=np.float32).reshape(5, 6), requires_grad=True)
        want = slices_by_tensors(x, hf.tensor(a), hf.tensor(b))
        x2 = hf.tensor(x.detach().numpy(), requires_grad=True)
        got = g(x2, hf.tensor(a), hf.tensor(b))
        for w, o in zip(want, got):
            assert o.shape == w.shape
            np.testing.assert_array_equal(o.detach().numpy(), w.detach().numpy())
        sum((t * t).sum() for t in want).backward()
        sum((t * t).sum() for t in got).backward()
        np.testing.assert_array_equal(x2.grad.numpy(), x.grad.numpy())
    assert g.cache_info().misses == 1


def slices_by_tensors(x, a, b):
    y = x * 1.0
    y[:, b:] = 0.0
    return x[a:b], x[-a:, ::2], x[..., a:b][:, :1], y



def bump_argument(x):
    x += 1
    x *= 3
    return x * 2


def test_in_place_update_of_an_argument_eager_refuses_is_a_runtime_error_too():
    # as eager raises RuntimeError for an in-place update of a leaf that requires grad, the
    # converted function's refusal is one (and still a ConversionError naming the line)
    x = hf.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        bump_argument(x)
    with pytest.raises(RuntimeError, match=r"requires grad and is updated in place \(add\)") \
            as info:  # (the first update, as eager's error)
        hf.jit.to_static(bump_argument)(x)
    assert isinstance(info.value, ConversionError) and "x += 1" in str(info.value)


def show_gradient_information(x, w):
    print("x", x, "w", w)
    h = x * w
    print(f"h {h} mean={h.mean():.2f}", "s " + str(h.sum()))
    if h.sum() > 0:
        h = h * 2
    else:
        h = h - 1
    print("after", h)
    with hf.no_grad():
        print("detached", h * 3)
    return h


def test_print_shows_requires_grad_and_grad_fn_as_eager(capsys):
    # a printed tensor says requires_grad=True or its grad_fn as eager's does (the branch an
    # if on a tensor took decides which operator made it), on every call
    f = hf.jit.to_static(show_gradient_information)
    for sign in (1.0, -1.0, 1.0):
        args = (hf.tensor([sign, 2 * sign]), hf.tensor([1.0, 0.5], requires_grad=True))
        show_gradient_information(*args)
        expected = capsys.readouterr().out
        f(*args)
        assert capsys.readouterr().out == expected
    assert "grad_fn=<MulBackward>" in expected and "requires_grad=True" in expected


class _NoGradStats(nn.Module):
    @hf.no_grad()
    def forward(self, x):
        if x.mean() > 0:
            return x.std()
        return x.abs().mean()


class _Normalized(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.stats = _NoGradStats()

    @hf.no_grad
    def scale(self, x):
        if x.sum() > 0:
            return x.max()
        return -x.min()

    def forward(self, x):
        return self.fc(x) / (self.stats(x) + self.scale(x) + 1)


def test_functions_decorated_with_a_grad_mode_are_converted():
    # @hf.no_grad() methods and forwards called from converted code are converted (their
    # wrapper is library code, which was called as it is: "the truth value of static
    # Variable ... is only known when the program runs") and run in that mode
    hf.manual_seed(0)
    eager = _Normalized()
    converted = _Normalized()
    converted.load_state_dict(eager.state_dict())
    static = hf.jit.to_static(converted)
    for sign in (1.0, -1.0):
        x = hf.tensor(np.array([[1.0, 2.0, 0.5], [0.1, 0.3, 2.0]], np.float32) * sign,
                      requires_grad=True)
        x2 = hf.tensor(x.detach().numpy(), requires_grad=True)
        want, got = eager(x), static(x2)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
        want.sum().backward()
        got.sum().backward()
        np.testing.assert_allclose(x2.grad.numpy(), x.grad.numpy(), rtol=1e-5)
        np.testing.assert_allclose(converted.fc.weight.grad.numpy(),
                                   eager.fc.weight.grad.numpy(), rtol=1e-5)
        eager.zero_grad()
        converted.zero_grad()


def grows_while_small(x, n):
    h = x * 1
    i = 0
    while i < n:
        h = h * 2
        print("in loop", h, h.requires_grad)
        i += 1
    print("after", h)
    return h


def test_values_inside_a_loop_on_a_tensor_know_they_require_grad(capsys):
    # a loop variable stands for its initial value (and the body's result): inside the body
    # h.requires_grad is True and print shows h's grad_fn, as eager (was: False, bare tensor)
    f = hf.jit.to_static(grows_while_small)
    for n in (2, 1):
        x = hf.tensor([1.0, 2.0], requires_grad=True)
        grows_while_small(x, hf.tensor(n))
        expected = capsys.readouterr().out
        f(x, hf.tensor(n))
        assert capsys.readouterr().out == expected
    assert "in loop tensor([2., 4.], grad_fn=<MulBackward>) True" in expected


def test_squeeze_of_a_dim_known_only_at_run_time_is_refused_not_silently_kept():
    """x.squeeze(0) over an InputSpec None batch: eager drops the dim on a batch of 1 and keeps
    it otherwise, which no one program does; it raises naming the op, the dim and the user's
    line (it was kept: shape (1, 3) where eager gives (3,)). Known dims still squeeze."""
    def f(x):
        return x.squeeze(0) * 2

    g = hf.jit.to_static(f, input_spec=[hf.jit.InputSpec([None, 3])])
    with pytest.raises(ValueError, match=r"squeeze: dim 0 of input \(None, 3\)") as info:
        g(hf.ones(1, 3))
    assert "x.squeeze(0) * 2" in str(info.value) + "".join(getattr(info.value, "__notes__", []))

    def k(x):
        return x.squeeze(1) * 2, x.squeeze() + 0

    h = hf.jit.to_static(k, input_spec=[hf.jit.InputSpec([None, 1])])
    a, b = h(hf.ones(4, 1))
    assert a.shape == (4,) and b.shape == (4,)
    a, b = h(hf.ones(1, 1))
    assert a.shape == (1,)
    assert b.shape == (1,)  # dim=None keeps the run-time dim (documented)


def test_a_converted_function_called_inside_another_is_part_of_its_program():
    """to_static(submodule) inside a to_static training step, and a to_static function under
    an if on a tensor, run inline in the outer program (they tried to trace a program of their
    own on the outer program's values: 'value of another program' / 'not defined here');
    gradients equal eager's. Under hf.static.program_guard too."""
    hf.manual_seed(0)
    inner_eager = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    inner = hf.jit.to_static(copy.deepcopy(inner_eager))
    double = hf.jit.to_static(lambda t: t * 2.0)

    def step(model, scale, x):
        y = model(x)
        if y.sum() > 0:
            y = scale(y)
        return (y ** 2).mean()

    outer = hf.jit.to_static(step)
    x = hf.randn(5, 4)
    for data in (x, -x):
        got = outer(inner, double, data)
        want = step(inner_eager, lambda t: t * 2.0, data)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
        for m in (inner, inner_eager):
            m.zero_grad()
        got.backward()
        want.backward()
        for p, q in zip(inner.parameters(), inner_eager.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7)
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        d = hf.static.data("d", [5, 4])
        out = double(d)
    (res,) = hf.static.Executor().run(prog, feed={"d": x.numpy()}, fetch_list=[out])
    np.testing.assert_allclose(np.asarray(res), x.numpy() * 2.0)


def _scale(x, k):
    return x * k


def test_float_arguments_key_the_cache_by_their_exact_value():
    # -0.0 == 0.0 as dict keys, yet the programs differ (1 * -0.0 is -0.0); nan != nan as a key
    # would retrace on every call
    f = hf.jit.to_static(_scale)
    assert np.signbit(f(hf.ones(1), -0.0).numpy()).all()
    assert not np.signbit(f(hf.ones(1), 0.0).numpy()).any()
    assert f.cache_info().misses == 2
    assert np.isnan(f(hf.ones(1), float("nan")).numpy()).all()
    assert np.isnan(f(hf.ones(1), float("nan")).numpy()).all()
    assert f.cache_info().misses == 3


def test_a_numpy_array_where_an_input_spec_expects_a_tensor_is_refused_naming_it():
    """It was taken as a constant of the program, and the next argument's tensor was checked
    against this argument's spec (an int64 spec on a float32 tensor passed unnoticed)."""
    def f(x, y):
        return x + y

    g = hf.jit.to_static(f, input_spec=[hf.jit.InputSpec([None, 3]),
                                        hf.jit.InputSpec([None, 3], "int64")])
    with pytest.raises(TypeError, match=r"argument 'x' is a numpy array where the InputSpecs "
                                        r"expect a tensor.*from_numpy"):
        g(np.ones((2, 3), np.float32), hf.ones(2, 3))
    with pytest.raises(ValueError, match="argument 'y'"):
        g(hf.ones(2, 3), hf.ones(2, 3))
    out = g(hf.ones(2, 3), hf.ones(2, 3, dtype="int64"))
    np.testing.assert_array_equal(out.numpy(), np.full((2, 3), 2.0))


def test_a_python_number_where_an_input_spec_expects_a_tensor_is_refused_naming_it():
    """``f(x, 3.0)`` with an InputSpec for ``y`` made 3.0 a constant of the program; a None
    (an optional tensor left out) and an argument beyond the specs stay Python values."""
    def f(x, y=None, scale=1.0):
        return x * scale if y is None else (x + y) * scale

    g = hf.jit.to_static(f, input_spec=[hf.jit.InputSpec([None, 3]), hf.jit.InputSpec([3])])
    with pytest.raises(TypeError, match=r"argument 'y' is a Python float \(3.0\) where "
                                        r"InputSpec 1 expects a tensor"):
        g(hf.ones(5, 3), 3.0)
    np.testing.assert_array_equal(g(hf.ones(2, 3), None, 2.0).numpy(), np.full((2, 3), 2.0))
    np.testing.assert_array_equal(g(hf.ones(2, 3), hf.ones(3), 2.0).numpy(),
                                  np.full((2, 3), 4.0))


def test_programs_traced_under_another_default_dtype_are_not_shared():
    # the default dtype decides dtypes while tracing: int_tensor * 1.5 and hf.ones(2)
    f = hf.jit.to_static(lambda x: x * 1.5 + hf.ones(2))
    x = hf.tensor([1, 2])
    assert f(x).dtype is hf.float32 and f(x).dtype is hf.float32  # (the second: fast path)
    hf.set_default_dtype(hf.float64)
    try:
        out = f(x)
        assert out.dtype is hf.float64 and f(x).dtype is hf.float64
        np.testing.assert_array_equal(out.numpy(), [2.5, 4.0])
    finally:
        hf.set_default_dtype(hf.float32)
    assert f(x).dtype is hf.float32
    assert sorted(s["default_dtype"] for s in f.signatures()) == ["float32", "float64"]


def _zero_d_in_fstring(x):
    s = x.sum()
    print(f"s={s} n={x.shape[0]}", str(s))
    return s


def test_fstring_of_a_zero_d_value_prints_its_number_as_eager(capsys):
    """``f"{s}"`` of a 0-d value prints its number in eager code (PyTorch's __format__) and
    in the program alike, while ``str(s)`` keeps the repr in both."""
    x = hf.tensor([1.0, 2.0])
    _zero_d_in_fstring(x)
    eager = capsys.readouterr().out
    assert eager == "s=3.0 n=2 tensor(3.)\n"
    hf.jit.to_static(_zero_d_in_fstring)(x)
    assert capsys.readouterr().out == eager


@pytest.mark.parametrize("shape", ["abc", [2.5], [None, "a"], [True], 3])
def test_input_spec_refuses_a_shape_that_is_not_ints_or_none(shape):
    # [2.5] became (2,) and [True] (1,); 'abc' failed inside int() with a message naming
    # neither InputSpec nor the shape
    with pytest.raises(TypeError, match="InputSpec: shape must be a sequence of ints or None"):
        hf.jit.InputSpec(shape)


def test_input_spec_takes_numpy_ints_and_tensor_shapes():
    assert hf.jit.InputSpec([None, np.int64(3), -1]).shape == (-1, 3, -1)
    assert hf.jit.InputSpec.from_tensor(hf.zeros(2, 5)).shape == (2, 5)


def test_eye_of_sizes_known_only_when_the_program_runs():
    # hf.eye(x.shape[0], x.shape[1]) under InputSpec None dims was refused ("sizes must be
    # non-negative ints, got shape (Variable(...), ...)"); zeros/ones/arange take such sizes
    def add_eye(x):
        return x + hf.eye(x.shape[0], x.shape[1])

    def square(x):
        return hf.eye(x.shape[0], dtype="float64") * 2

    f = hf.jit.to_static(add_eye, input_spec=[hf.jit.InputSpec([None, None])])
    for shape in ((2, 3), (3, 2), (1, 1)):
        np.testing.assert_array_equal(f(hf.zeros(*shape)).numpy(), np.eye(*shape))
    g = hf.jit.to_static(square, input_spec=[hf.jit.InputSpec([None])])
    out = g(hf.zeros(3))
    assert out.dtype is hf.float64 and out.tolist() == (2 * np.eye(3)).tolist()


def _decode_step(x, cache):
    if "k" in cache:
        x = x + cache["k"]
    cache["k"] = x * 2
    return x


def _reads_its_list(x, ws):
    return x * ws[0] + len(ws)


def test_changing_a_list_or_dict_argument_warns_that_the_caller_keeps_its_own():
    static = hf.jit.to_static(_decode_step)
    with pytest.warns(UserWarning, match=r"changes its argument 'cache' \(a dict: adds keys "
                                         r"'k'\).*caller's dict does not change"):
        static(hf.ones(2), {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hf.jit.to_static(_reads_its_list)(hf.ones(2), [2.0, 3.0])


def _scaled_by_cfg(x, cfg, *, temperature=1.0):
    return x * cfg["scale"] / temperature


def test_retrace_warning_names_the_python_argument_that_changes():
    static = hf.jit.to_static(_scaled_by_cfg)
    with pytest.warns(UserWarning, match=r"argument 'temperature': 1\.7 -> 1\.8\)"):
        for i in range(10):
            static(hf.ones(2), {"scale": 2}, temperature=1.0 + i / 10)
    static = hf.jit.to_static(_scaled_by_cfg)
    with pytest.warns(UserWarning, match=r"argument 'cfg'\['scale'\]: 7 -> 8\)"):
        for i in range(10):
            static(hf.ones(2), {"scale": i})


class _Stepper:
    """A plain object (not a Module) with a converted method reading its attributes."""

    def __init__(self, k):
        self.k, self.step, self.name = k, 0, "a"

    @hf.jit.to_static
    def run(self, x):
        if x.sum() > 0:
            return x * self.k + self.step
        return x


def test_plain_attribute_of_the_instance_of_a_converted_method_is_read_anew():
    stepper, x = _Stepper(3.0), hf.tensor([1.0, 2.0])
    np.testing.assert_allclose(stepper.run(x).numpy(), [3.0, 6.0])
    stepper.k = 10.0
    np.testing.assert_allclose(stepper.run(x).numpy(), [10.0, 20.0])
    for step in range(1, 4):
        stepper.step = step
        np.testing.assert_allclose(stepper.run(x).numpy(), [10.0 + step, 20.0 + step])
    stepper.run(x)
    assert stepper.run.cache_info().hits >= 1   # an unchanged object keeps its program


@dataclasses.dataclass
class _Batch:
    x: object
    y: object
    scale: float = 1.0


def _batch_loss(batch):
    if batch.x.sum() > 0:
        return (batch.x * batch.y * batch.scale).sum()
    return (batch.x * batch.scale).sum()


def test_dataclass_argument_tensors_are_inputs_not_a_new_trace_per_call():
    static = hf.jit.to_static(_batch_loss)
    for data in ([1.0, 2.0], [-1.0, -2.0], [3.0, 1.0]):
        eager_x, x = (hf.tensor(data, requires_grad=True) for _ in range(2))
        y = hf.tensor([3.0, 4.0])
        expected = _batch_loss(_Batch(eager_x, y, 2.0))
        got = static(_Batch(x, y, 2.0))
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy())
        expected.backward()
        got.backward()
        np.testing.assert_allclose(x.grad.numpy(), eager_x.grad.numpy())
    assert static.cache_info().misses == 1


class _Graph:
    """A plain object holding tensors (no dataclass, compared by identity)."""

    def __init__(self, feats, hops):
        self.feats, self.hops = feats, hops

    def degree(self):
        return self.feats.abs().sum()


def _graph_score(graph, w):
    out = graph.feats * w
    for _ in range(graph.hops):
        if out.sum() > 0:
            out = out * 2
    return out.sum() + graph.degree()


def test_tensors_held_by_a_plain_object_argument_are_inputs():
    static = hf.jit.to_static(_graph_score)
    w = hf.tensor([1.0, -0.5])
    graph = _Graph(hf.tensor([1.0, 2.0], requires_grad=True), 2)
    for step in range(3):
        np.testing.assert_allclose(static(graph, w).detach().numpy(),
                                   _graph_score(graph, w).detach().numpy())
        graph.feats = hf.tensor([3.0 + step, -4.0 * step], requires_grad=True)  # set anew
    with hf.no_grad():
        graph.feats.mul_(2)                                                  # in place
    np.testing.assert_allclose(static(graph, w).detach().numpy(),
                               _graph_score(graph, w).detach().numpy())
    other = _Graph(hf.tensor([1.0, 1.0], requires_grad=True), 2)
    static(other, w).backward()
    np.testing.assert_allclose(other.feats.grad.numpy(), [5.0, -1.0])  # 4 * w + sign
    assert static.cache_info().misses == 1
    graph.hops = 3                                             # a plain attribute: a new trace
    np.testing.assert_allclose(static(graph, w).detach().numpy(),
                               _graph_score(graph, w).detach().numpy())
    assert static.cache_info().misses == 2


def _tenth(x):
    return x[10] * 2


def test_index_past_a_run_time_size_names_the_users_line():
    static = hf.jit.to_static(_tenth, input_spec=[hf.jit.InputSpec([None])])
    assert float(static(hf.arange(12.0))) == 20.0
    with pytest.raises(IndexError, match=r"(?s)index 10 is out of bounds for dim 0 with size "
                                         r"3.*line \d+.*return x\[10\] \* 2"):
        static(hf.arange(3.0))


class _Config:
    def __init__(self):
        self.scale = 2.0


class _Helper:
    def __init__(self):
        self.k = 3.0

    def apply(self, x):
        if x.sum() > 0:
            return x * self.k
        return x


_CONFIG, _HELPER = _Config(), _Helper()


def _uses_config_and_helper(x):
    return _HELPER.apply(x) + x * _CONFIG.scale


def test_plain_attributes_of_objects_a_converted_function_reads_are_read_anew():
    static = hf.jit.to_static(_uses_config_and_helper)
    x = hf.tensor([1.0, 2.0])
    try:
        np.testing.assert_allclose(static(x).numpy(), [5.0, 10.0])
        _HELPER.k, _CONFIG.scale = 10.0, 100.0
        np.testing.assert_allclose(static(x).numpy(), _uses_config_and_helper(x).numpy())
        static(x)
        assert static.cache_info().hits == 1   # unchanged: no new trace
    finally:
        _HELPER.k, _CONFIG.scale = 3.0, 2.0


def _caches_on_the_graph(graph, w):
    graph.cached = graph.feats * w
    return graph.cached.sum()


def test_setting_an_attribute_of_a_tensor_holding_argument_warns():
    graph = _Graph(hf.tensor([1.0, 2.0]), 1)
    with pytest.warns(UserWarning, match=r"changes its argument 'graph' \(a _Graph: adds "
                                         r"attributes 'cached'\)"):
        hf.jit.to_static(_caches_on_the_graph)(graph, hf.tensor([1.0, 1.0]))


def test_a_lambda_given_to_to_static_is_converted():
    """A lambda was traced as it is: a ternary on a tensor raised the truth-value error and
    ``x.shape[0]`` under an InputSpec None dim read -1. Two lambdas of the same parameters on
    one line cannot be told apart: those are still traced as they are."""
    pick = hf.jit.to_static(lambda x: x * 2 if x.sum() > 0 else x - 1)
    np.testing.assert_array_equal(pick(hf.ones(2)).numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(pick(-hf.ones(2)).numpy(), [-2.0, -2.0])
    rows = hf.jit.to_static(lambda x: hf.ones(x.shape[0]) * x.sum(),
                            input_spec=[hf.jit.InputSpec([None, 4])])
    for n in (3, 5):
        np.testing.assert_array_equal(rows(hf.ones(n, 4)).numpy(), np.full(n, 4.0 * n))
    assert "def _hf_lambda(x)" in hf.jit.get_code(pick)
    twins = [hf.jit.to_static(f) for f in (lambda x: x + 1, lambda x: x + 2)]
    assert [t(hf.ones(1)).item() for t in twins] == [2.0, 3.0]  # (as they are)
