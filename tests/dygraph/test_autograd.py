"""Eager autograd: graph traversal, accumulation, retain_graph, grad mode, hf.autograd.grad,
higher-order gradients, error cases, broadcasting reduction and .grad aliasing.

Expected gradients are hand-derived or computed by central finite differences in float64
(forward passes only, under no_grad), never by the autograd under test.
"""
import numpy as np
import pytest

import hybridfw as hf


def _np(t):
    return np.array(t.detach().numpy(), copy=True)


def numeric_grad(f, *arrays, eps=1e-6):
    """Central differences of the scalar ``f(*tensors)`` w.r.t. each float64 array."""
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    grads = []
    with hf.no_grad():
        for k, a in enumerate(arrays):
            g = np.zeros_like(a)
            for idx in np.ndindex(a.shape):
                vals = []
                for sgn in (1, -1):
                    b = a.copy()
                    b[idx] += sgn * eps
                    args = [hf.tensor(b if j == k else arrays[j]) for j in range(len(arrays))]
                    vals.append(f(*args).item())
                g[idx] = (vals[0] - vals[1]) / (2 * eps)
            grads.append(g)
    return grads


def leaf(a, dtype="float64"):
    return hf.tensor(np.asarray(a), dtype=dtype, requires_grad=True)


# =============================================================================== basics
def test_square_gradient():
    x = leaf([1.0, -2.0, 3.0])
    (x * x).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [2.0, -4.0, 6.0])
    assert x.grad.shape == x.shape and x.grad.dtype is x.dtype
    assert not x.grad.requires_grad


def test_tensor_used_twice():
    x = leaf([0.5, 2.0])
    y = x * x + x          # dy/dx = 2x + 1
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), [2.0, 5.0])


def test_diamond_graph():
    x = leaf([1.0, 2.0, -1.5])
    a = x * 2
    b = x * 3
    c = a * b              # 6 x^2 -> 12 x
    c.sum().backward()
    np.testing.assert_allclose(_np(x.grad), 12 * np.array([1.0, 2.0, -1.5]))


def test_reverse_topological_order_with_skip_connections():
    # a node's gradient must be complete (from every consumer) before it propagates further.
    x0 = np.array([0.3, -0.7, 1.1])

    def f(x):
        a = x.tanh()
        b = a * a + a.sin()       # a used twice
        c = b * a + x             # skip from x, a again
        d = (c.exp() + b) * a     # b and a reused deeper
        return d.sum()

    x = leaf(x0)
    f(x).backward()
    (num,) = numeric_grad(f, x0)
    np.testing.assert_allclose(_np(x.grad), num, rtol=1e-6, atol=1e-8)


def test_long_chain_is_not_recursive():
    x = leaf([1.0])
    y = x
    for _ in range(3000):
        y = y * 1.0 + 0.0
    y.sum().backward()
    assert x.grad.tolist() == [1.0]


def test_multiple_leaves_and_mixed_ops_against_finite_differences():
    rng = np.random.default_rng(0)
    a0, b0, c0 = rng.normal(size=(3, 4)), rng.normal(size=(4, 2)), rng.normal(size=(2,))

    def f(a, b, c):
        h = (a @ b + c).sigmoid()
        r = (h * h.log1p()).mean(dim=0)
        return (r - h.max()).sum() + (a.abs() * 0.5).sum() / (1 + b.exp().sum())

    a, b, c = leaf(a0), leaf(b0), leaf(c0)
    f(a, b, c).backward()
    for t, num in zip((a, b, c), numeric_grad(f, a0, b0, c0)):
        np.testing.assert_allclose(_np(t.grad), num, rtol=1e-5, atol=1e-7)


def test_indexing_and_setitem_gradients():
    x = leaf([1.0, 2.0, 3.0, 4.0])
    y = x[hf.tensor([0, 0, 3])].sum() + x[1:3].sum() * 2   # repeated index accumulates
    y.backward()
    np.testing.assert_allclose(_np(x.grad), [2.0, 2.0, 2.0, 1.0])

    x = leaf([1.0, 2.0, 3.0])
    w = leaf(5.0)
    y = x * 2
    y[1] = w * 3                 # overwritten element: no gradient to x[1]
    (y * hf.tensor([1.0, 10.0, 100.0], dtype="float64")).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [2.0, 0.0, 200.0])
    np.testing.assert_allclose(_np(w.grad), 30.0)


def test_inplace_into_plain_tensor_from_grad_requiring_values():
    x = leaf([1.0, 2.0, 3.0])
    y = hf.zeros(3, dtype="float64")
    y[0] = x[1] * 2
    assert y.requires_grad and not y.is_leaf
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), [0.0, 2.0, 0.0])

    x = leaf([1.0, 2.0, 3.0])
    y = hf.zeros(3, dtype="float64")
    y.add_(x)
    (y * y).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [2.0, 4.0, 6.0])

    x = leaf([1.0, 2.0, 3.0])
    y = hf.zeros(3, dtype="float64")
    y.copy_(x)
    (y * 2).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [2.0, 2.0, 2.0])


def test_inplace_on_view_of_nonleaf_updates_the_base_gradient():
    # PyTorch rebases y's history (CopySlices): x.grad == [3, 3, 2]. Refusing with a
    # RuntimeError is acceptable; a silently wrong gradient is not.
    x = leaf([1.0, 1.0, 1.0])
    y = x * 2
    try:
        y[:2].add_(x[:2])
        y.sum().backward()
    except RuntimeError:
        return
    np.testing.assert_allclose(_np(x.grad), [3.0, 3.0, 2.0])


def test_setitem_on_view_of_nonleaf_updates_the_base_gradient():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 2
    try:
        v = y[1:]
        v[0] = x[0] * 10          # y = [2 x0, 10 x0, 2 x2]
        (y * hf.tensor([1.0, 1.0, 1.0], dtype="float64")).sum().backward()
    except RuntimeError:
        return
    np.testing.assert_allclose(_np(x.grad), [12.0, 0.0, 2.0])


def test_inplace_on_view_of_leaf_requiring_grad_raises():
    # PyTorch: "a view of a leaf Variable that requires grad is being used in an in-place
    # operation" -- the leaf's data must not change behind autograd's back.
    x = leaf([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError):
        x[:2].add_(1)
    with pytest.raises(RuntimeError):
        x.reshape(3)[0] = 7.0
    np.testing.assert_allclose(_np(x), [1.0, 2.0, 3.0])
    with hf.no_grad():
        x[:2].add_(1)               # fine without recording
    np.testing.assert_allclose(_np(x), [2.0, 3.0, 3.0])


# =============================================================================== accumulation
def test_repeated_backward_with_retain_graph_accumulates():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    np.testing.assert_allclose(_np(x.grad), [2.0, 4.0])
    y.backward(retain_graph=True)
    np.testing.assert_allclose(_np(x.grad), [4.0, 8.0])
    y.backward()
    np.testing.assert_allclose(_np(x.grad), [6.0, 12.0])


def test_backward_of_two_graphs_accumulates_into_leaf():
    x = leaf([1.0, 2.0])
    (x * 3).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [5.0, 7.0])


def test_grad_can_be_reset_to_none():
    x = leaf([1.0, 2.0])
    (x * 3).sum().backward()
    x.grad = None
    (x * 2).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [2.0, 2.0])


def test_nonleaf_grad_is_not_populated():
    x = leaf([1.0, 2.0])
    y = x * 2
    (y * y).sum().backward()
    assert y.grad is None
    np.testing.assert_allclose(_np(x.grad), [8.0, 16.0])


# =============================================================================== retain_graph
def test_second_backward_without_retain_graph_raises():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        y.backward()
    np.testing.assert_allclose(_np(x.grad), [2.0, 4.0])  # unchanged by the failed call


def test_second_backward_raises_for_saved_output_too():
    x = leaf([0.1, 0.2])
    y = x.exp().sum()        # exp saves its output
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        y.backward()


def test_graph_that_saves_nothing_may_run_twice():
    x = leaf([1.0, 2.0, 3.0])
    z = (x + 1 - x.neg()).sum()             # add, sub, neg, sum: nothing saved
    z.backward()
    z.backward()
    np.testing.assert_allclose(_np(x.grad), [4.0, 4.0, 4.0])


def test_autograd_grad_frees_graph_unless_retained():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    hf.autograd.grad(y, [x])
    with pytest.raises(RuntimeError, match="retain_graph"):
        y.backward()
    y2 = (x * x).sum()
    (g,) = hf.autograd.grad(y2, [x], retain_graph=True)
    y2.backward()
    np.testing.assert_allclose(_np(g), [2.0, 4.0])
    np.testing.assert_allclose(_np(x.grad), [2.0, 4.0])


# =============================================================================== grad mode
def test_no_grad_context():
    x = leaf([1.0, 2.0])
    assert hf.is_grad_enabled()
    with hf.no_grad():
        assert not hf.is_grad_enabled()
        y = x * 2
        z = (y.exp() + x).sum()
    assert hf.is_grad_enabled()
    for t in (y, z):
        assert not t.requires_grad and t.is_leaf and t.grad_fn is None
    with pytest.raises(RuntimeError):
        z.backward()


def test_no_grad_decorator_and_enable_grad():
    x = leaf([1.0, 2.0])

    @hf.no_grad()
    def f(t):
        assert not hf.is_grad_enabled()
        return t * 2

    @hf.enable_grad()
    def g(t):
        assert hf.is_grad_enabled()
        return t * 2

    assert not f(x).requires_grad
    assert f.__name__ == "f"
    with hf.no_grad():
        y = g(x)
        assert not hf.is_grad_enabled()
        with hf.enable_grad():
            z = x * 3
        w = x * 4
    assert y.requires_grad and z.requires_grad and not w.requires_grad
    (y + z).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [5.0, 5.0])


def test_grad_mode_restored_after_exception():
    with pytest.raises(ZeroDivisionError):
        with hf.no_grad():
            1 / 0
    assert hf.is_grad_enabled()

    @hf.no_grad()
    def boom():
        raise KeyError("x")

    with pytest.raises(KeyError):
        boom()
    assert hf.is_grad_enabled()


def test_set_grad_enabled():
    x = leaf([1.0])
    with hf.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    with hf.set_grad_enabled(True):
        assert (x * 2).requires_grad
    assert hf.is_grad_enabled()


# =============================================================================== autograd.grad
def test_autograd_grad_wrt_nonleaf_does_not_touch_leaf_grad():
    x = leaf([1.0, 2.0])
    y = x * 3
    z = (y * y).sum()
    gy, gx = hf.autograd.grad(z, [y, x])
    np.testing.assert_allclose(_np(gy), [6.0, 12.0])      # 2y
    np.testing.assert_allclose(_np(gx), [18.0, 36.0])     # 18x
    assert x.grad is None and y.grad is None


def test_autograd_grad_with_grad_outputs():
    x = leaf([1.0, 2.0, 3.0])
    y = x * x
    v = hf.tensor([1.0, 0.5, -1.0], dtype="float64")
    (g,) = hf.autograd.grad(y, [x], grad_outputs=[v])
    np.testing.assert_allclose(_np(g), [2.0, 2.0, -6.0])
    (g,) = hf.autograd.grad(x * 2, x, grad_outputs=v)   # single tensors accepted too
    np.testing.assert_allclose(_np(g), [2.0, 1.0, -2.0])


def test_autograd_grad_multiple_outputs_sum():
    x = leaf([1.0, 2.0])
    (g,) = hf.autograd.grad([(x * x).sum(), (x * 3).sum()], [x])
    np.testing.assert_allclose(_np(g), [5.0, 7.0])


def test_autograd_grad_allow_unused():
    x = leaf([1.0, 2.0])
    u = leaf([5.0])
    y = (x * 2).sum()
    with pytest.raises(RuntimeError):
        hf.autograd.grad(y, [x, u], retain_graph=True)
    gx, gu = hf.autograd.grad(y, [x, u], allow_unused=True)
    np.testing.assert_allclose(_np(gx), [2.0, 2.0])
    assert gu is None


def test_autograd_grad_input_must_require_grad():
    x = leaf([1.0])
    c = hf.tensor([1.0])
    with pytest.raises(RuntimeError):
        hf.autograd.grad((x * c).sum(), [c])


def test_double_backward_cubic():
    x = leaf([2.0, -1.0, 0.5])
    y = (x ** 3).sum()
    (g,) = hf.autograd.grad(y, [x], create_graph=True)
    np.testing.assert_allclose(_np(g), 3 * np.array([2.0, -1.0, 0.5]) ** 2)
    assert g.requires_grad
    (h,) = hf.autograd.grad(g.sum(), [x], create_graph=True)
    np.testing.assert_allclose(_np(h), 6 * np.array([2.0, -1.0, 0.5]))
    (t,) = hf.autograd.grad(h.sum(), [x])
    np.testing.assert_allclose(_np(t), [6.0, 6.0, 6.0])


def test_double_backward_scalar_docstring_example():
    x = hf.tensor(3.0, requires_grad=True)
    (g,) = hf.autograd.grad(x ** 3, [x], create_graph=True)
    assert g.item() == pytest.approx(27.0)
    assert hf.autograd.grad(g, [x])[0].item() == pytest.approx(18.0)


def test_double_backward_tanh_and_sigmoid():
    x0 = np.array([-1.2, 0.0, 0.4, 2.0])
    x = leaf(x0)
    (g,) = hf.autograd.grad(x.tanh().sum(), [x], create_graph=True)
    t = np.tanh(x0)
    np.testing.assert_allclose(_np(g), 1 - t ** 2, rtol=1e-10)
    (h,) = hf.autograd.grad(g.sum(), [x])
    np.testing.assert_allclose(_np(h), -2 * t * (1 - t ** 2), rtol=1e-9, atol=1e-12)

    x = leaf(x0)
    (g,) = hf.autograd.grad(x.sigmoid().sum(), [x], create_graph=True)
    s = 1 / (1 + np.exp(-x0))
    np.testing.assert_allclose(_np(g), s * (1 - s), rtol=1e-10)
    (h,) = hf.autograd.grad(g.sum(), [x])
    np.testing.assert_allclose(_np(h), s * (1 - s) * (1 - 2 * s), rtol=1e-9, atol=1e-12)


def test_double_backward_matmul_hessian():
    rng = np.random.default_rng(1)
    W0 = rng.normal(size=(3, 3))
    x0 = rng.normal(size=(3,))
    W = hf.tensor(W0)
    x = leaf(x0)
    f = x @ W @ x                                  # quadratic form
    (g,) = hf.autograd.grad(f, [x], create_graph=True)
    H = W0 + W0.T
    np.testing.assert_allclose(_np(g), H @ x0, rtol=1e-10)
    rows = []
    for i in range(3):
        (hi,) = hf.autograd.grad(g[i], [x], retain_graph=True)
        rows.append(_np(hi))
    np.testing.assert_allclose(np.stack(rows), H, rtol=1e-10)


def test_gradient_penalty_backward_through_grad():
    x0 = np.array([1.0, -2.0, 0.5])
    x = leaf(x0)
    (g,) = hf.autograd.grad((x ** 3).sum(), [x], create_graph=True)   # 3x^2
    (g * g).sum().backward()                                          # d/dx 9x^4 = 36x^3
    np.testing.assert_allclose(_np(x.grad), 36 * x0 ** 3)


def test_double_backward_mixed_partials():
    a0, b0 = np.array([1.5, -0.5]), np.array([2.0, 3.0])
    a, b = leaf(a0), leaf(b0)
    f = (a * a * b.sin()).sum()
    ga, = hf.autograd.grad(f, [a], create_graph=True)     # 2 a sin b
    gb, = hf.autograd.grad(ga.sum(), [b])                   # 2 a cos b
    np.testing.assert_allclose(_np(gb), 2 * a0 * np.cos(b0), rtol=1e-10)


# =============================================================================== errors
def test_backward_on_nonscalar_without_gradient_raises():
    x = leaf([1.0, 2.0])
    y = x * 2
    with pytest.raises(RuntimeError):
        y.backward()
    y.backward(hf.tensor([1.0, -1.0], dtype="float64"))
    np.testing.assert_allclose(_np(x.grad), [2.0, -2.0])


def test_backward_on_one_element_nonscalar_is_allowed():
    x = leaf([3.0])
    (x * x).backward()
    np.testing.assert_allclose(_np(x.grad), [6.0])


def test_backward_with_wrong_gradient_shape_raises():
    x = leaf([1.0, 2.0])
    with pytest.raises((ValueError, RuntimeError)):
        (x * 2).backward(hf.ones(3, dtype="float64"))


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError):
        hf.ones(2).sum().backward()


def test_requires_grad_on_integer_tensors_raises():
    with pytest.raises(TypeError):
        hf.tensor([1, 2]).requires_grad_()
    with pytest.raises(TypeError):
        hf.tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError):
        hf.ones(2, dtype="int32", requires_grad=True)
    b = hf.tensor([True])
    with pytest.raises(TypeError):
        b.requires_grad = True
    assert not b.requires_grad


def test_requires_grad_false_on_nonleaf_raises():
    y = leaf([1.0]) * 2
    with pytest.raises(RuntimeError):
        y.requires_grad_(False)


def test_inplace_on_leaf_requiring_grad_raises():
    x = leaf([1.0, 2.0])
    for op in (lambda: x.add_(1), lambda: x.mul_(2), lambda: x.zero_(), lambda: x.fill_(3.0),
               lambda: x.copy_(hf.ones(2, dtype="float64"))):
        with pytest.raises(RuntimeError, match="leaf"):
            op()
    with pytest.raises(RuntimeError, match="leaf"):
        x[0] = 5.0
    np.testing.assert_allclose(_np(x), [1.0, 2.0])
    assert x.is_leaf and x.grad_fn is None


def test_inplace_modification_of_saved_tensor_raises_at_backward():
    x = leaf([1.0, 2.0])
    y = x * 2
    z = y * y            # saves y
    y.add_(1)            # fine now (add_ itself saves nothing) ...
    with pytest.raises(RuntimeError, match="in.place|modified"):
        z.sum().backward()   # ... but mul's saved y changed


def test_inplace_modification_of_saved_leaf_input_raises_at_backward():
    x = leaf([1.0, 2.0])
    c = hf.tensor([3.0, 4.0], dtype="float64")
    z = (x.sin() * c).sum()
    c.mul_(2)
    with pytest.raises(RuntimeError, match="in.place|modified"):
        z.backward()


# =============================================================================== non-float outputs
def test_integer_and_bool_outputs_do_not_require_grad():
    x = leaf([[1.0, 5.0], [7.0, 2.0]])
    outs = [x.argmax(), x.argmax(dim=1), x.argmin(dim=0), x > 2, x == x, x.long(),
            x.max(dim=1).indices, x.isnan()]
    for o in outs:
        assert not o.dtype.is_floating_point
        assert not o.requires_grad
        assert o.grad_fn is None
    v = x.max(dim=1).values
    assert v.requires_grad
    np.testing.assert_array_equal(_np(v), [5.0, 7.0])
    assert x.argmax(dim=1).tolist() == [1, 0]
    assert x.argmax().item() == 2


def test_cast_to_float_and_back_keeps_gradient():
    x = leaf([1.0, 2.0], dtype="float32")
    y = x.to(hf.float64) * hf.tensor([3.0, 4.0], dtype="float64")
    y.sum().backward()
    assert x.grad.dtype is hf.float32
    np.testing.assert_allclose(_np(x.grad), [3.0, 4.0])


def test_detach_blocks_gradient():
    x = leaf([1.0, 2.0])
    y = x * x.detach()
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), [1.0, 2.0])


# =============================================================================== broadcasting
def test_broadcast_gradients_reduce_to_input_shapes():
    x = leaf(np.arange(3.0).reshape(3, 1))
    y = leaf(np.arange(4.0).reshape(1, 4) + 1)
    (x * y).sum().backward()
    assert x.grad.shape == (3, 1) and y.grad.shape == (1, 4)
    np.testing.assert_allclose(_np(x.grad), np.full((3, 1), 1 + 2 + 3 + 4.0))
    np.testing.assert_allclose(_np(y.grad), np.full((1, 4), 0 + 1 + 2.0))


def test_broadcast_gradient_over_leading_dims_and_scalars():
    a = leaf([1.0, 2.0, 3.0, 4.0])
    b = leaf(np.ones((2, 3, 4)))
    s = leaf(2.0)
    ((a + b) * s).sum().backward()
    assert a.grad.shape == (4,) and b.grad.shape == (2, 3, 4) and s.grad.shape == ()
    np.testing.assert_allclose(_np(a.grad), [12.0] * 4)
    np.testing.assert_allclose(_np(b.grad), np.full((2, 3, 4), 2.0))
    np.testing.assert_allclose(_np(s.grad), (np.array([1.0, 2, 3, 4]) + 1).sum() * 6)


def test_broadcast_gradient_keeps_input_dtype():
    h = leaf([1.0, 2.0], dtype="float16")
    s = leaf(3.0, dtype="float32")
    out = h * s
    assert out.dtype is hf.float16
    out.sum().backward()
    assert h.grad.dtype is hf.float16 and s.grad.dtype is hf.float32
    assert s.grad.shape == ()
    np.testing.assert_allclose(_np(h.grad), [3.0, 3.0])
    assert s.grad.item() == pytest.approx(3.0)


def test_broadcast_gradient_matmul_batch():
    rng = np.random.default_rng(2)
    A0, B0 = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 5))
    A, B = leaf(A0), leaf(B0)
    (A @ B).sum().backward()
    np.testing.assert_allclose(_np(B.grad), A0.sum(axis=(0, 1))[:, None] * np.ones((4, 5)))
    np.testing.assert_allclose(_np(A.grad), np.broadcast_to(B0.sum(axis=1), (2, 3, 4)))


# =============================================================================== grad aliasing
def test_grads_of_distinct_leaves_never_alias_add():
    x = leaf([1.0, 2.0])
    y = leaf([3.0, 4.0])
    (x + y).sum().backward()
    x.grad.mul_(2)
    np.testing.assert_allclose(_np(x.grad), [2.0, 2.0])
    np.testing.assert_allclose(_np(y.grad), [1.0, 1.0])


def test_grads_never_alias_with_explicit_gradient():
    x = leaf([1.0, 2.0])
    y = leaf([3.0, 4.0])
    z = x + y
    g = hf.tensor([1.0, 2.0], dtype="float64")
    z.backward(g)
    x.grad.mul_(10)
    np.testing.assert_allclose(_np(y.grad), [1.0, 2.0])
    np.testing.assert_allclose(_np(g), [1.0, 2.0])    # the user's gradient is untouched
    g.mul_(3)
    np.testing.assert_allclose(_np(y.grad), [1.0, 2.0])


def test_grad_of_leaf_backward_on_itself_is_a_copy():
    x = leaf([1.0, 2.0])
    g = hf.tensor([5.0, 6.0], dtype="float64")
    x.backward(g)
    np.testing.assert_allclose(_np(x.grad), [5.0, 6.0])
    g.zero_()
    np.testing.assert_allclose(_np(x.grad), [5.0, 6.0])


def test_grads_never_alias_through_views_and_sub():
    x = leaf([1.0, 2.0])
    y = leaf([[3.0, 4.0]])
    w = leaf([1.0, 1.0])
    (x.reshape(1, 2) - y + w).sum().backward()
    x.grad.add_(100)
    w.grad.mul_(-1)
    np.testing.assert_allclose(_np(y.grad), [[-1.0, -1.0]])
    np.testing.assert_allclose(_np(x.grad), [101.0, 101.0])
    np.testing.assert_allclose(_np(w.grad), [-1.0, -1.0])


def test_accumulated_grad_is_not_shared_with_other_leaf():
    x = leaf([1.0, 2.0])
    y = leaf([3.0, 4.0])
    (x + y).sum().backward()
    (x + y).sum().backward()
    x.grad.mul_(0)
    np.testing.assert_allclose(_np(y.grad), [2.0, 2.0])


def test_grads_never_alias_with_create_graph():
    x = leaf([1.0, 2.0])
    y = leaf([3.0, 4.0])
    (x + y).sum().backward(create_graph=True)
    assert x.grad is not y.grad
    with hf.no_grad():
        x.grad.mul_(2)              # .grad must be an ordinary writeable tensor
    np.testing.assert_allclose(_np(x.grad), [2.0, 2.0])
    np.testing.assert_allclose(_np(y.grad), [1.0, 1.0])


def test_grads_never_alias_with_create_graph_fresh_gradient():
    x = leaf([1.0, 2.0])
    y = leaf([3.0, 4.0])
    ((x + y) * hf.tensor([1.0, 1.0], dtype="float64")).sum().backward(create_graph=True)
    with hf.no_grad():
        x.grad.mul_(2)
    np.testing.assert_allclose(_np(y.grad), [1.0, 1.0])


def test_leaf_gradients_go_into_grad_as_soon_as_they_are_complete():
    """A weight's gradient buffer is not held to the end of backward: accumulating into
    existing .grad tensors, the pass never holds more than a couple of weight gradients."""
    hf.manual_seed(0)
    layers = [hf.nn.Linear(256, 256) for _ in range(8)]
    x = hf.randn(1, 256)

    def step():
        h = x
        for layer in layers:
            h = layer(h).tanh()
        h.sum().backward()

    step()                       # .grad exists from here on; the next step adds into it
    expected = [layer.weight.grad.numpy() * 2 for layer in layers]
    base = hf.memory.allocated()
    hf.memory.reset_peak()
    step()
    weight_grad = 256 * 256 * 4
    # activations are 1 KiB each; held to the end, the 8 weight gradients would be 2 MiB
    assert hf.memory.peak() - base < 2 * weight_grad
    for layer, e in zip(layers, expected):
        np.testing.assert_allclose(layer.weight.grad.numpy(), e, rtol=1e-6)


def test_a_gradient_shared_by_a_leaf_and_a_node_still_in_flight_is_not_aliased():
    a = hf.ones(3, requires_grad=True)
    b = hf.ones(3, requires_grad=True)
    c = hf.ones(3, requires_grad=True)
    # add passes one gradient object to a (a leaf, complete at once) and to (b + c),
    # whose rule passes it on to b and c
    (a + (b + c)).sum().backward()
    a.grad.add_(10.0)
    np.testing.assert_array_equal(b.grad.numpy(), np.ones(3))
    np.testing.assert_array_equal(c.grad.numpy(), np.ones(3))
    np.testing.assert_array_equal(a.grad.numpy(), np.full(3, 11.0))


def test_an_operand_only_another_operands_gradient_needs_is_not_saved():
    """As PyTorch: x[1] / 2 and x[0] * 3 keep nothing of their tensor operand (the scalar needs
    no gradient), so writing the results back into x's rows is fine (it raised 'modified in
    place'); a @ w with w frozen does not keep a (memory), with w trainable it does, and the
    gradients are unchanged."""
    x = hf.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = x.clone()
    y[0, :] = y[0, :] * 3
    y[1] = y[1] / 2
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[3, 3, 3], [0.5, 0.5, 0.5]])
    rng = np.random.default_rng(0)
    a0, w0 = rng.normal(size=(5, 3)), rng.normal(size=(3, 4))
    a = hf.tensor(a0, requires_grad=True)
    frozen = hf.tensor(w0)
    z = a @ frozen
    assert z.grad_fn.saved[0] is None and z.grad_fn.saved[1] is frozen
    z.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.ones((5, 4)) @ w0.T)
    w = hf.tensor(w0, requires_grad=True)
    z = a @ w
    assert z.grad_fn.saved[0] is a
    z.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), a0.T @ np.ones((5, 4)))
    v = hf.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)   # 1-D operands, double
    (g,) = hf.autograd.grad(v @ hf.tensor(w0) @ hf.tensor(np.ones(4)), [v], create_graph=True)
    np.testing.assert_allclose(g.numpy(), w0 @ np.ones(4))
