"""hf.static.gradients: static backward == eager backward == finite differences, through
registry ops, broadcasting, cond and while loops with data-dependent trip counts."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.nn import functional as F

S = hf.static


def run(prog, feed, fetch):
    S.verify(prog)
    # poisoned arena: a backward reading a value the forward's arena already reused sees NaN
    return S.Executor(debug_poison=True).run(prog, feed=feed, fetch_list=fetch,
                                             return_numpy=True)


def numeric_grad(loss, array, eps=1e-6):
    """Central differences of ``loss()`` with respect to ``array`` (changed in place)."""
    grad = np.zeros_like(array)
    for i in np.ndindex(array.shape):
        old = array[i]
        array[i] = old + eps
        up = loss()
        array[i] = old - eps
        down = loss()
        array[i] = old
        grad[i] = (up - down) / (2 * eps)
    return grad


def check_finite_differences(prog, loss, feed, grads, names, rtol=1e-5, atol=1e-7):
    """Static gradients of ``loss`` w.r.t. the float64 feeds ``names`` vs finite differences."""
    values = run(prog, feed, list(grads))
    for name, value in zip(names, values):
        def f():
            return float(run(prog, feed, [loss])[0])
        np.testing.assert_allclose(value, numeric_grad(f, feed[name]), rtol=rtol, atol=atol,
                                   err_msg=f"d loss / d {name}")


def eager_grads(loss, tensors):
    for t in tensors:
        t.grad = None
    loss.backward(retain_graph=True)
    return [t.grad.numpy() if t.grad is not None else None for t in tensors]


# ---- registry ops ---------------------------------------------------------------------------------
def test_mlp_gradients_equal_eager_for_several_batch_sizes():
    hf.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))
    params = list(model.parameters())
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None, 5])
        loss = (model(x).relu() * 2.0).sum()
        grads = S.gradients(loss, params + [x])
    assert all(g is not None for g in grads)
    for batch in (1, 4):
        xv = hf.randn(batch, 5)
        static = run(prog, {"x": xv}, grads)
        xe = xv.clone().requires_grad_(True)
        ref = eager_grads((model(xe).relu() * 2.0).sum(), params + [xe])
        for s, r in zip(static, ref):
            np.testing.assert_allclose(s, r, rtol=1e-5, atol=1e-6)


def test_gradients_of_a_loss_summed_over_a_dynamic_batch_have_the_batch_size():
    hf.manual_seed(3)
    model = nn.Linear(4, 3)
    params = list(model.parameters())
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None, 4])
        target = S.data("target", [None], "int64")
        loss = F.cross_entropy(model(x), target, reduction="sum")
        grads = S.gradients(loss, params + [x])
    for batch in (1, 5):
        xv, tv = hf.randn(batch, 4), hf.randint(0, 3, (batch,))
        static = run(prog, {"x": xv, "target": tv}, grads)
        xe = xv.clone().requires_grad_(True)
        ref = eager_grads(F.cross_entropy(model(xe), tv, reduction="sum"), params + [xe])
        for s, r in zip(static, ref):
            assert s.shape == r.shape
            np.testing.assert_allclose(s, r, rtol=1e-5, atol=1e-6)


def test_conv_net_gradients_equal_eager():
    hf.manual_seed(1)
    conv = nn.Conv2d(2, 3, 3, padding=1)
    head = nn.Linear(3 * 3 * 3, 4)

    def forward(x, target):
        h = F.max_pool2d(conv(x).relu(), 2)
        return F.cross_entropy(head(h.flatten(1)), target)
    params = list(conv.parameters()) + list(head.parameters())
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [2, 2, 6, 6])
        target = S.data("target", [2], "int64")
        loss = forward(x, target)
        grads = S.gradients(loss, params + [x])
    xv, tv = hf.randn(2, 2, 6, 6), hf.tensor([1, 3])
    static = run(prog, {"x": xv, "target": tv}, [loss] + grads)
    xe = xv.clone().requires_grad_(True)
    eager_loss = forward(xe, tv)
    np.testing.assert_allclose(static[0], eager_loss.item(), rtol=1e-5)
    for s, r in zip(static[1:], eager_grads(eager_loss, params + [xe])):
        np.testing.assert_allclose(s, r, rtol=1e-4, atol=1e-6)


def broadcasting_expression(a, b, c):
    mixed = (a + b) * c / (b * b + 1.0) - a.exp()
    return (hf.where(mixed > 0, mixed * b, c - a).maximum(b * 0.5) + (a * c).sum(dim=0)).sum()


def test_broadcast_gradients_are_reduced_to_each_input_shape():
    prog = S.Program()
    with S.program_guard(prog):
        a = S.data("a", [3, 1], "float64")
        b = S.data("b", [4], "float64")
        c = S.data("c", [1, 4], "float64")
        loss = broadcasting_expression(a, b, c)
        grads = S.gradients(loss, [a, b, c])
    assert [g.shape for g in grads] == [(3, 1), (4,), (1, 4)]
    rng = np.random.default_rng(0)
    feed = {"a": rng.standard_normal((3, 1)), "b": rng.standard_normal(4),
            "c": rng.standard_normal((1, 4))}
    eager = [hf.tensor(feed[n], requires_grad=True) for n in "abc"]
    ref = eager_grads(broadcasting_expression(*eager), eager)
    for s, r in zip(run(prog, feed, grads), ref):
        np.testing.assert_allclose(s, r, rtol=1e-12)
    check_finite_differences(prog, loss, feed, grads, ["a", "b", "c"])


def test_broadcast_against_a_dynamic_dim_is_reduced():
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None, 4])
        scale = S.data("scale", [None, 1])
        bias = S.data("bias", [4])
        gx, gs, gb = S.gradients(((x * scale + bias) ** 2).sum(), [x, scale, bias])
    xv, sv, bv = hf.randn(3, 4), hf.randn(3, 1), hf.randn(4)
    eager = [t.clone().requires_grad_(True) for t in (xv, sv, bv)]
    ref = eager_grads(((eager[0] * eager[1] + eager[2]) ** 2).sum(), eager)
    static = run(prog, {"x": xv, "scale": sv, "bias": bv}, [gx, gs, gb])
    for s, r in zip(static, ref):
        assert s.shape == r.shape
        np.testing.assert_allclose(s, r, rtol=1e-5)


def test_gradients_api_details():
    w = hf.ones(3, requires_grad=True)
    unused = hf.ones(3, requires_grad=True)
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [3])
        z = S.data("z", [3])
        y = x * w
        gx, gw, gz, gu = S.gradients([y.sum(), (y * 2.0).sum()], [x, w, z, unused])
        (seeded,) = S.gradients(y, [x], target_gradients=[z])
        with pytest.raises(TypeError, match="only floating-point targets"):
            S.gradients((x > 0).long(), [x])
        with pytest.raises(ValueError, match=r"target gradient of shape \(2,\)"):
            S.gradients(y, [x], target_gradients=[hf.ones(2)])
    assert gz is None and gu is None
    xv, zv = np.array([1.0, 2.0, 3.0], np.float32), np.array([4.0, 5.0, 6.0], np.float32)
    out = run(prog, {"x": xv, "z": zv}, [gx, gw, seeded])
    np.testing.assert_allclose(out[0], [3.0, 3.0, 3.0])
    np.testing.assert_allclose(out[1], 3.0 * xv)
    np.testing.assert_allclose(out[2], zv)


# ---- cond -----------------------------------------------------------------------------------------
def branchy(x, w, pred):
    h = x * w
    y = S.nn.cond(pred,
                  lambda: (hf.tanh(h) * w, h.exp()),        # branch values needed by backward
                  lambda: (h.sin() + x, w * 1.0))           # an outer value read directly
    return (y[0] * y[1]).sum() + y[0].sum()


def test_gradients_through_cond_take_each_branch():
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [3], "float64")
        w = S.data("w", [3], "float64")
        flag = S.data("flag", [], "bool")
        loss = branchy(x, w, flag)
        grads = S.gradients(loss, [x, w])
    rng = np.random.default_rng(1)
    for flag_value in (True, False):
        feed = {"x": rng.standard_normal(3), "w": rng.standard_normal(3),
                "flag": np.array(flag_value)}
        eager = [hf.tensor(feed[n], requires_grad=True) for n in ("x", "w")]
        ref = eager_grads(branchy(*eager, flag_value), eager)
        for s, r in zip(run(prog, feed, grads), ref):
            np.testing.assert_allclose(s, r, rtol=1e-12)
        check_finite_differences(prog, loss, feed, grads, ["x", "w"])


def test_cond_exports_branch_values_for_backward_only_once():
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [3])
        y = S.nn.cond(x.sum() > 0, lambda: x.exp().exp(), lambda: x)
        S.gradients(y.sum(), [x])
        S.gradients((y * 2.0).sum(), [x])
    forward = prog.global_block().ops[2]
    assert forward.type == "cond"
    exported = forward.attrs["true_outputs"][1:]
    assert len(exported) == len(set(exported)) and forward.attrs["false_outputs"][1:] == \
        (None,) * len(exported)


# ---- while ----------------------------------------------------------------------------------------
def rnn_loss(x, h, W, U, steps):
    def body(t, h):
        return t + 1, hf.tanh(x[t] @ W + h @ U)
    _, h = S.nn.while_loop(lambda t, h: t < steps, body, [0, h])
    return (h * h).sum()


def initial_state(h0):
    return h0 * 1.5  # a value computed before the loop is its first loop-carried input


def build_rnn(W, U, time=None):
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [time, 2, 3], "float64")
        steps = S.data("steps", [], "int64")
        h0 = S.data("h0", [2, 4], "float64")
        loss = rnn_loss(x, initial_state(h0), W, U, steps)
    return prog, h0, loss


def test_rnn_over_a_dynamic_number_of_steps_matches_eager():
    hf.manual_seed(2)
    W, U = hf.randn(3, 4, dtype=hf.float64) * 0.5, hf.randn(4, 4, dtype=hf.float64) * 0.5
    W.requires_grad_(True)
    U.requires_grad_(True)
    prog, h0, loss = build_rnn(W, U)
    with S.program_guard(prog):
        grads = S.gradients(loss, [W, U, h0])
    xv, hv = hf.randn(6, 2, 3, dtype=hf.float64), hf.randn(2, 4, dtype=hf.float64)
    for steps in (0, 1, 4, 6):
        static = run(prog, {"x": xv, "steps": np.array(steps), "h0": hv}, [loss] + grads)
        he = hv.clone().requires_grad_(True)
        eager_loss = rnn_loss(xv, initial_state(he), W, U, steps)
        np.testing.assert_allclose(static[0], eager_loss.item(), rtol=1e-12)
        for s, r in zip(static[1:], eager_grads(eager_loss, [W, U, he])):
            np.testing.assert_allclose(s, np.zeros_like(s) if r is None else r, atol=1e-12)


def test_rnn_gradients_match_finite_differences():
    rng = np.random.default_rng(3)
    prog = S.Program()
    with S.program_guard(prog):
        W = S.data("W", [3, 4], "float64")
        U = S.data("U", [4, 4], "float64")
        x = S.data("x", [5, 2, 3], "float64")
        h0 = S.data("h0", [2, 4], "float64")
        steps = S.data("steps", [], "int64")
        loss = rnn_loss(x, h0, W, U, steps)
        grads = S.gradients(loss, [W, U, x, h0])
    feed = {"W": rng.standard_normal((3, 4)) * 0.5, "U": rng.standard_normal((4, 4)) * 0.5,
            "x": rng.standard_normal((5, 2, 3)), "h0": rng.standard_normal((2, 4)),
            "steps": np.array(3)}
    check_finite_differences(prog, loss, feed, grads, ["W", "U", "x", "h0"])


def test_rnn_trains_statically_like_eager():
    hf.manual_seed(4)
    W, U = hf.randn(3, 4, dtype=hf.float64) * 0.5, hf.randn(4, 4, dtype=hf.float64) * 0.5
    We, Ue = W.clone().requires_grad_(True), U.clone().requires_grad_(True)
    W.requires_grad_(True)
    U.requires_grad_(True)
    prog, _, loss = build_rnn(W, U)
    with S.program_guard(prog):
        gW, gU = S.gradients(loss, [W, U])
    exe = S.Executor(debug_poison=True)
    data = [(hf.randn(n, 2, 3, dtype=hf.float64), hf.randn(2, 4, dtype=hf.float64), n)
            for n in (3, 5, 2, 4)]
    static_losses, eager_losses = [], []
    for xv, hv, n in data:
        value, dW, dU = exe.run(prog, feed={"x": xv, "steps": hf.tensor(n), "h0": hv},
                                fetch_list=[loss, gW, gU])
        with hf.no_grad():
            W -= 0.1 * dW
            U -= 0.1 * dU
        static_losses.append(value.item())
        eager_loss = rnn_loss(xv, initial_state(hv), We, Ue, n)
        eager_grads(eager_loss, [We, Ue])
        with hf.no_grad():
            We -= 0.1 * We.grad
            Ue -= 0.1 * Ue.grad
        eager_losses.append(eager_loss.item())
    np.testing.assert_allclose(static_losses, eager_losses, rtol=1e-10)
    np.testing.assert_allclose(W.detach().numpy(), We.detach().numpy(), rtol=1e-10)


def nested_model(x, w, n, m):
    def body(i, h):
        h = S.nn.cond(i % 2 == 0, lambda: hf.tanh(h * w), lambda: h.sin() + w * w)
        _, h = S.nn.while_loop(lambda j, v: j < m,
                               lambda j, v: (j + 1, v * (0.9 + 0.1 * w.cos())), [0, h])
        return i + 1, h
    y = S.nn.cond(x.sum() > -100.0,
                  lambda: S.nn.while_loop(lambda i, h: i < n, body, [0, x])[1],
                  lambda: x * w)
    return (y * y * w).sum()


@pytest.mark.parametrize("n,m", [(0, 0), (1, 2), (4, 1), (3, 3)])
def test_nested_while_cond_while_gradients_match_finite_differences(n, m):
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [3], "float64")
        w = S.data("w", [3], "float64")
        loss = nested_model(x, w, S.data("n", [], "int64"), S.data("m", [], "int64"))
        grads = S.gradients(loss, [x, w])
    rng = np.random.default_rng(n * 10 + m)
    feed = {"x": rng.standard_normal(3), "w": rng.standard_normal(3), "n": np.array(n),
            "m": np.array(m)}
    eager = [hf.tensor(feed[k], requires_grad=True) for k in ("x", "w")]
    ref = eager_grads(nested_model(*eager, n, m), eager)
    for s, r in zip(run(prog, feed, grads), ref):
        np.testing.assert_allclose(s, r, rtol=1e-10, atol=1e-12)
    check_finite_differences(prog, loss, feed, grads, ["x", "w"])


def edge_cases(x, w, n, flag):
    y = S.nn.cond(flag, lambda: x, lambda: x * w)  # a branch yields an outer value itself

    def body(i, v, c, independent):
        # c is replaced by a constant; independent never depends on x or w
        return i + 1, v * w + c, hf.full((3,), 0.5, dtype=hf.float64), independent * 2.0
    _, v, c, u = S.nn.while_loop(lambda i, *_: i < n, body,
                                 [0, y, w, hf.ones(3, dtype=hf.float64)])
    return (v * v).sum() + (c * w).sum() + u.sum()


@pytest.mark.parametrize("flag,n", [(True, 0), (True, 3), (False, 2)])
def test_gradients_through_outer_values_constants_and_independent_loop_variables(flag, n):
    prog = S.Program()
    with S.program_guard(prog):
        x, w = S.data("x", [3], "float64"), S.data("w", [3], "float64")
        loss = edge_cases(x, w, S.data("n", [], "int64"), S.data("flag", [], "bool"))
        grads = S.gradients(loss, [x, w])
    rng = np.random.default_rng(n)
    feed = {"x": rng.standard_normal(3), "w": rng.standard_normal(3), "n": np.array(n),
            "flag": np.array(flag)}
    eager = [hf.tensor(feed[k], requires_grad=True) for k in ("x", "w")]
    ref = eager_grads(edge_cases(*eager, n, flag), eager)
    for s, r in zip(run(prog, feed, grads), ref):
        np.testing.assert_allclose(s, r, rtol=1e-12, atol=1e-12)
    check_finite_differences(prog, loss, feed, grads, ["x", "w"])


def test_while_backward_structure_and_a_second_gradients_call():
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [2])
        n = S.data("n", [], "int64")
        _, y = S.nn.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v.sin() * x), [0, x])
        (g1,) = S.gradients(y.sum(), [x])
        (g2,) = S.gradients((y * y).sum(), [x])
    ops = prog.global_block().ops
    forward = next(op for op in ops if op.type == "while")
    assert forward.outputs[-1] == forward.attrs["stack"]
    grads_ops = [op for op in ops if op.type == "while_grad"]
    assert len(grads_ops) == 2 and all(op.inputs[0] == forward.attrs["stack"]
                                       for op in grads_ops)
    assert "while_grad(" in str(prog)
    xv = np.array([0.3, -0.7], np.float32)
    out1, out2 = run(prog, {"x": xv, "n": np.array(3)}, [g1, g2])
    xe = hf.tensor(xv, requires_grad=True)
    v = xe
    for _ in range(3):
        v = v.sin() * xe
    (ref1,) = eager_grads(v.sum(), [xe])
    (ref2,) = eager_grads((v * v).sum(), [xe])
    np.testing.assert_allclose(out1, ref1, rtol=1e-5)
    np.testing.assert_allclose(out2, ref2, rtol=1e-5)


def test_gradient_of_an_input_broadcast_only_at_run_time():
    # b is declared (-1, 3) but fed as (1, 3): its gradient must be summed over the batch
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        a = hf.static.data("a", [None, 3])
        b = hf.static.data("b", [None, 3])
        loss = (a * b).sum()
        gb, = hf.static.gradients([loss], [b])
    av = np.arange(12, dtype=np.float32).reshape(4, 3)
    bv = np.ones((1, 3), np.float32)
    (got,) = hf.static.Executor().run(prog, feed={"a": av, "b": bv}, fetch_list=[gb])
    np.testing.assert_allclose(got.numpy(), av.sum(0, keepdims=True))
    (got,) = hf.static.Executor().run(prog, feed={"a": av, "b": np.ones((4, 3), np.float32)},
                                      fetch_list=[gb])
    np.testing.assert_allclose(got.numpy(), av)


def test_modules_built_inside_program_guard_keep_eager_parameters():
    from hybridfw import nn
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, 4])
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        y = model(x)
    assert isinstance(model[0].weight, nn.Parameter) and len(prog.params) == 4
    xv = np.ones((3, 4), np.float32)
    (got,) = hf.static.Executor().run(prog, feed={"x": xv}, fetch_list=[y])
    np.testing.assert_allclose(got.numpy(), model(hf.tensor(xv)).detach().numpy(), rtol=1e-6)


def test_double_backward_through_while_is_refused_clearly():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3], "float64")
        n = hf.static.data("n", [], "int64")
        i0 = hf.zeros((), dtype="int64")
        _, y = hf.static.nn.while_loop(lambda i, h: i < n, lambda i, h: (i + 1, (h * x).tanh()),
                                       [i0, x])
        (g,) = hf.static.gradients([y.sum()], [x])
        with pytest.raises(ValueError, match="double backward through while_loop"):
            hf.static.gradients([g.sum()], [x])


# ---- dims known only at run time ------------------------------------------------------------------
def tensor_array_model(x, w, n):
    """The converter's tensor array: grown by cat in a loop, read back by index."""
    def body(i, arr):
        return i + 1, hf.cat([arr, (x[i] * w).tanh().unsqueeze(0)])
    _, arr = S.nn.while_loop(lambda i, a: i < n, body, [hf.tensor(0), x[:0]])
    return (arr * arr[-1]).sum() + arr[1:].sum() * 0.5


def test_tensor_array_grown_by_cat_in_a_loop_has_eager_gradients():
    w = hf.tensor([0.5, -1.0, 2.0], dtype=hf.float64, requires_grad=True)
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None, 3], "float64")
        n = S.data("n", [], "int64")
        loss = tensor_array_model(x, w, n)
        grads = S.gradients(loss, [w, x])
    loop = next(op for op in prog.global_block().ops if op.type == "while")
    body = loop.blocks[1]
    # the growing array's backward takes its sizes from its gradient: no copy per iteration
    assert all(-1 not in body.var(name).shape for name in loop.attrs["saved"])
    rng = np.random.default_rng(0)
    for rows, steps in ((4, 3), (6, 2)):
        feed = {"x": rng.standard_normal((rows, 3)), "n": np.array(steps)}
        xe = hf.tensor(feed["x"], requires_grad=True)
        ref = eager_grads(tensor_array_model(xe, w, steps), [w, xe])
        for got, want in zip(run(prog, feed, grads), ref):
            np.testing.assert_allclose(got, want, rtol=1e-12)
    check_finite_differences(prog, loss, {"x": rng.standard_normal((3, 3)), "n": np.array(3)},
                             grads[1:], ["x"])


def dynamic_cat_stack_index(x, y, idx, mask):
    a = hf.cat([x, y * 2.0, x], dim=0)            # several sizes unknown along the axis
    b = hf.stack([x, y.exp()], dim=1)             # unknown batch dim elsewhere
    c = hf.cat([x, y], dim=1)
    return (a.sin().sum() + (b * b).sum() + c[idx].sum() * 3.0 + c[mask].cos().sum()
            + x[1:].tanh().sum())


def test_cat_stack_and_getitem_gradients_with_unknown_dims_match_eager():
    prog = S.Program()
    with S.program_guard(prog):
        x, y = S.data("x", [None, 3], "float64"), S.data("y", [None, 3], "float64")
        idx, mask = S.data("idx", [None], "int64"), S.data("mask", [None, 6], "bool")
        loss = dynamic_cat_stack_index(x, y, idx, mask)
        grads = S.gradients(loss, [x, y])
    rng = np.random.default_rng(1)
    rows = 3
    feed = {"x": rng.standard_normal((rows, 3)), "y": rng.standard_normal((rows, 3)),
            "idx": np.array([0, 2, 2]), "mask": rng.random((rows, 6)) > 0.5}
    xe, ye = (hf.tensor(feed[k], requires_grad=True) for k in "xy")
    ref = eager_grads(dynamic_cat_stack_index(xe, ye, hf.tensor(feed["idx"]),
                                              hf.tensor(feed["mask"])), [xe, ye])
    for got, want in zip(run(prog, feed, grads), ref):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    check_finite_differences(prog, loss, feed, grads, ["x", "y"])


def test_dropout_with_a_dynamic_batch_dim_has_eager_gradients():
    w = hf.tensor([1.0, -2.0, 0.5], requires_grad=True)
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None, 3])
        loss = (F.dropout(x * w, 0.3) ** 2).sum()
        gw, gx = S.gradients(loss, [w, x])
    xv = hf.randn(5, 3)
    hf.manual_seed(3)
    got = run(prog, {"x": xv}, [gw, gx])
    hf.manual_seed(3)
    xe = xv.clone().requires_grad_(True)
    ref = eager_grads((F.dropout(xe * w, 0.3) ** 2).sum(), [w, xe])
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-6)


def test_operators_built_under_no_grad_pass_no_gradient():
    """A static program built partly under hf.no_grad(): gradients() does not flow back
    through those operators (eager autograd records nothing there)."""
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [3], "float64")
        w = S.data("w", [3], "float64")
        y = x * w
        with hf.no_grad():
            z = y.exp()
        loss = (y * z).sum()
        (gw,) = S.gradients([loss], [w])
    assert z.name in prog.no_grad_values and y.name not in prog.no_grad_values
    xv, wv = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.25, -0.5])
    (got,) = run(prog, {"x": xv, "w": wv}, [gw])
    np.testing.assert_allclose(got, xv * np.exp(xv * wv), rtol=1e-12)  # not (1 + y) e^y x


def test_a_value_only_a_loop_condition_reads_gets_no_gradient():
    """As in eager code (a comparison has no gradient), a value the while loop's condition
    reads, and its body does not, gets None from static autodiff and from to_static, not the
    zeros it got as a captured input of the loop; one the body reads still gets its own."""
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [2])
        limit = S.data("limit", [])
        scale = S.data("scale", [])
        y = S.nn.while_loop(lambda v: v.sum() < limit, lambda v: (v * scale + 1.0,), [x])[0]
        g_limit, g_scale, g_x = S.gradients(y.sum(), [limit, scale, x])
    assert g_limit is None and g_scale is not None and g_x is not None
    xv, sv = np.array([0.5, 1.0], np.float32), np.float32(1.5)
    out_scale, out_x = run(prog, {"x": xv, "limit": np.float32(10.0), "scale": sv},
                           [g_scale, g_x])
    xe = hf.tensor(xv, requires_grad=True)
    se = hf.tensor(sv, requires_grad=True)
    le = hf.tensor(np.float32(10.0), requires_grad=True)
    v = xe
    while v.sum() < le:
        v = v * se + 1.0
    v.sum().backward()
    assert le.grad is None
    np.testing.assert_allclose(out_scale, se.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(out_x, xe.grad.numpy(), rtol=1e-5)

    class Halve(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
            self.limit = nn.Parameter(hf.tensor(1.0))

        def forward(self, x):
            y = self.fc(x)
            while y.abs().sum() > self.limit:
                y = y / 2
            return y
    eager = Halve()
    static = Halve()
    static.load_state_dict(eager.state_dict())
    eager(hf.ones(1, 2) * 3).sum().backward()
    hf.jit.to_static(static)(hf.ones(1, 2) * 3).sum().backward()
    assert eager.limit.grad is None and static.limit.grad is None
    np.testing.assert_allclose(static.fc.weight.grad.numpy(), eager.fc.weight.grad.numpy(),
                               rtol=1e-5)


def test_no_grad_set_stops_gradients_as_paddle():
    """Paddle's gradients(..., no_grad_set=...): the values listed are constants to the
    backward (it was not an argument). d = sum(a*a + a*x) + sum(h) with a = 3x and h = x*a*a
    (a while loop run twice): with a a constant, dd/dx = a + a*a."""
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [2], "float64")
        n = S.data("n", [], "int64")
        a = x * 3.0
        _, h = S.nn.while_loop(lambda i, h: i < n, lambda i, h: (i + 1, h * a), [0, x])
        d = (a * a + a * x).sum() + h.sum()
        full = S.gradients(d, [x, a])
        by_var = S.gradients(d, [x, a], no_grad_set={a})
        (by_name,) = S.gradients(d, [x], no_grad_set=[a.name])
        (itself,) = S.gradients(d, [x], no_grad_set=[x])
    assert by_var[1] is None and itself is None
    xv = np.array([1.0, 2.0])
    got = run(prog, {"x": xv, "n": np.array(2)}, [full[0], full[1], by_var[0], by_name])
    av = 3 * xv
    np.testing.assert_allclose(got[0], 24 * xv + 27 * xv ** 2)
    np.testing.assert_allclose(got[1], 2 * av + xv + 2 * xv * av)
    np.testing.assert_allclose(got[2], av + av ** 2)
    np.testing.assert_allclose(got[3], av + av ** 2)


def test_a_bias_added_to_a_batch_of_unknown_size_keeps_no_activation_for_its_shape():
    """add(h, bias) with h (-1, 16): the output's dim 0 is h's (the bias lacks it), so h's
    gradient is the output's, exactly. The backward read h only to learn its run-time shape
    (a sum_to_like), which kept every Linear output alive until backward: with an InputSpec
    batch of None, a to_static MLP saved twice the activations it saves with a fixed batch."""
    import hybridfw as hf
    from hybridfw import nn

    def model():
        hf.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                             nn.Linear(16, 4))

    eager = model()
    dynamic = hf.jit.to_static(model(), input_spec=[hf.jit.InputSpec([None, 8])])
    fixed = hf.jit.to_static(model())
    for batch in (5, 1):
        x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
        for m in (eager, dynamic, fixed):
            m.zero_grad()
            xx = hf.tensor(x, requires_grad=True)
            (m(xx) * hf.arange(4.0)).sum().backward()
            m.grad_x = xx.grad.numpy()
        for m in (dynamic, fixed):
            np.testing.assert_allclose(m.grad_x, eager.grad_x, rtol=1e-5, atol=1e-6)
            for p, q in zip(m.parameters(), eager.parameters()):
                np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5,
                                           atol=1e-6)
    entry = dynamic.forward._last
    saved = [n for n in entry.saved_names if n not in entry.feed_names]
    fixed_saved = [n for n in fixed.forward._last.saved_names
                   if n not in fixed.forward._last.feed_names]
    assert len(saved) == len(fixed_saved) == 2  # the two tanh outputs
    ops = entry.backward_program.global_block().ops
    assert "sum_to_like" not in [op.type for op in ops]


def test_a_dim_of_unknown_size_that_may_broadcast_is_still_reduced_at_run_time():
    """x (-1, 3) + y (-1, 3): either may be 1 at run time, so each gradient is still reduced
    to its input's actual shape."""
    import hybridfw as hf

    @hf.jit.to_static(input_spec=[hf.jit.InputSpec([None, 3]), hf.jit.InputSpec([None, 3])])
    def f(x, y):
        return ((x + y) * hf.arange(3.0)).sum()

    x = hf.ones(1, 3, requires_grad=True)
    y = hf.ones(4, 3, requires_grad=True)
    f(x, y).backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0.0, 4.0, 8.0]])
    np.testing.assert_allclose(y.grad.numpy(), np.tile([0.0, 1.0, 2.0], (4, 1)))
