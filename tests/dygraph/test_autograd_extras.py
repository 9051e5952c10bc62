"""PyTorch behaviours a probe found missing: retain_grad, @hf.no_grad / @hf.enable_grad used
bare, Python bools as indices, and clip_grad_norm_ with norm_type=0. Expected values are worked
by hand (and equal torch 2.13's)."""
import numpy as np
import pytest

import hybridfw as hf


def test_retain_grad_keeps_a_non_leaf_gradient_and_accumulates():
    x = hf.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    z = y * y
    assert y.retains_grad and not z.retains_grad
    (z.sum() + y.sum()).backward(retain_graph=True)   # d/dy = 2y + 1
    assert y.grad.tolist() == [5.0, 9.0]
    assert x.grad.tolist() == [10.0, 18.0]
    (y * 3).sum().backward()
    assert y.grad.tolist() == [8.0, 12.0]
    assert z.grad is None


def test_retain_grad_on_leaves_and_tensors_without_grad():
    w = hf.tensor([1.0], requires_grad=True)
    w.retain_grad()                                   # a leaf keeps its gradient anyway
    (w * 3).sum().backward()
    assert w.grad.tolist() == [3.0]
    with pytest.raises(RuntimeError, match="retain_grad"):
        hf.tensor([1.0]).retain_grad()


def test_retain_grad_is_left_out_of_autograd_grad():
    x = hf.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    (g,) = hf.autograd.grad((y * y).sum(), [x])
    assert g.tolist() == [8.0, 16.0] and y.grad is None


def test_no_grad_and_enable_grad_as_bare_decorators():
    @hf.no_grad
    def doubled(x):
        return x * 2

    @hf.enable_grad
    def tripled(x):
        return x * 3

    x = hf.tensor([1.0], requires_grad=True)
    assert not doubled(x).requires_grad and doubled.__name__ == "doubled"
    with hf.no_grad():
        assert tripled(x).requires_grad
    with pytest.raises(TypeError, match="no_grad"):
        hf.no_grad(3)


def test_python_bools_index_like_a_0d_mask():
    a = hf.arange(6.0).reshape(2, 3)
    assert a[True].shape == (1, 2, 3) and a[False].shape == (0, 2, 3)
    assert a[True, 0].shape == (1, 3) and a[False, 1:].shape == (0, 1, 3)
    np.testing.assert_array_equal(a[True].numpy(), np.arange(6.0).reshape(1, 2, 3))


def test_clip_grad_norm_of_order_zero_counts_the_nonzero_gradients():
    p = hf.nn.Parameter(hf.tensor([3.0, 0.0, 4.0]))
    q = hf.nn.Parameter(hf.tensor([1.0]))
    p.grad, q.grad = hf.tensor([3.0, 0.0, 4.0]), hf.tensor([0.0])
    norm = hf.nn.utils.clip_grad_norm_([p, q], 0.5, norm_type=0)
    assert float(norm) == 1.0                         # one gradient with a nonzero entry
    np.testing.assert_allclose(p.grad.numpy(), [3 * 0.5 / (1 + 1e-6), 0.0, 4 * 0.5 / (1 + 1e-6)],
                               rtol=1e-6)


@pytest.mark.parametrize("shape,dim,zeros", [((3, 4), 1, 0), ((3, 4), 0, 2), ((2, 3, 4), (0, 2), 1),
                                             ((2, 3), None, 1), ((3, 1), 1, 0)])
def test_double_backward_through_prod_matches_finite_differences(shape, dim, zeros):
    """prod's second derivative (zeros in the input included) against central differences of
    its first derivative."""
    rng = np.random.default_rng(7)
    start = rng.standard_normal(shape)
    start.reshape(-1)[:zeros] = 0.0

    def first(values, create_graph):
        x = hf.tensor(values, dtype="float64", requires_grad=True)
        y = x.prod(dim) if not isinstance(dim, tuple) else x.prod(dim[1]).prod(dim[0])
        (g,) = hf.autograd.grad((y * y).sum(), [x], create_graph=create_graph)
        return x, g

    x, g = first(start, True)
    (h,) = hf.autograd.grad((g * g).sum(), [x])
    eps = 1e-6
    numeric = np.zeros(shape)
    for i in np.ndindex(*shape):
        up, down = start.copy(), start.copy()
        up[i] += eps
        down[i] -= eps
        f_up = float((first(up, False)[1].numpy() ** 2).sum())
        f_down = float((first(down, False)[1].numpy() ** 2).sum())
        numeric[i] = (f_up - f_down) / (2 * eps)
    np.testing.assert_allclose(h.numpy(), numeric, rtol=1e-5, atol=1e-6)


def test_double_backward_through_prod_in_a_static_program():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3], "float64")
        (g,) = hf.static.gradients([x.prod()], [x])
        (h,) = hf.static.gradients([g.sum()], [x])
    got = hf.static.Executor().run(prog, feed={"x": np.array([1.0, 2.0, 3.0])},
                                   fetch_list=[g, h], return_numpy=True)
    np.testing.assert_allclose(got[0], [6.0, 3.0, 2.0])
    np.testing.assert_allclose(got[1], [5.0, 4.0, 3.0])   # by hand: sum of the other pairs


def test_backward_inputs_accumulates_into_those_tensors_only():
    """torch's backward(inputs=...): .grad of the listed tensors (leaves or not, once each,
    after their hooks), the other leaves untouched."""
    x = hf.tensor([1.0, 2.0], requires_grad=True)
    unused = hf.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    loss = (y * y).sum()                              # d/dy = 2y = [4, 8]; d/dx = [8, 16]
    loss.backward(inputs=[y, unused], retain_graph=True)
    assert y.grad.tolist() == [4.0, 8.0] and x.grad is None and unused.grad is None
    hf.autograd.backward(loss, inputs=y, retain_graph=True)
    assert y.grad.tolist() == [8.0, 16.0]
    loss.backward(inputs=[x, x], retain_graph=True)
    assert x.grad.tolist() == [8.0, 16.0]
    handle = x.register_hook(lambda g: g * 10)
    loss.backward(inputs=(x,), retain_graph=True)
    handle.remove()
    assert x.grad.tolist() == [88.0, 176.0]
    (g,) = hf.autograd.grad(loss, x, create_graph=True)
    x.grad = None
    g.sum().backward(inputs=[x])                      # d/dx sum(8x) = 8
    assert x.grad.tolist() == [8.0, 8.0]
    with pytest.raises(RuntimeError, match=r"inputs\[0\] \(shape \(2,\)\) does not require grad"):
        loss.backward(inputs=[hf.tensor([1.0, 2.0])], retain_graph=True)
    with pytest.raises(RuntimeError, match="cannot be empty"):
        loss.backward(inputs=[], retain_graph=True)


def test_grad_materialize_grads_gives_zeros_for_unused_inputs():
    x = hf.tensor([1.0, 2.0], requires_grad=True)
    z = hf.tensor([[1.0], [3.0]], dtype=hf.float64, requires_grad=True)
    loss = (x * x).sum()
    gx, gz = hf.autograd.grad(loss, [x, z], materialize_grads=True, retain_graph=True)
    assert gx.tolist() == [2.0, 4.0]
    assert gz.tolist() == [[0.0], [0.0]] and gz.dtype == hf.float64
    assert hf.autograd.grad(loss, [x, z], allow_unused=True, retain_graph=True)[1] is None
    with pytest.raises(ValueError, match="materialize_grads=True .* allow_unused=False"):
        hf.autograd.grad(loss, [x, z], materialize_grads=True, allow_unused=False)
    # torch's other keywords, positions as torch's
    assert hf.autograd.grad(loss, x, None, True, False, True, None, False)[0].tolist() == \
        [2.0, 4.0]
    with pytest.raises(NotImplementedError, match="is_grads_batched"):
        hf.autograd.grad(loss, x, is_grads_batched=True)


def test_inference_mode_records_no_graph_like_no_grad():
    w = hf.tensor([1.0, 2.0], requires_grad=True)
    with hf.inference_mode():
        assert not (w * 2).requires_grad and not hf.is_grad_enabled()
    with hf.inference_mode(False):
        assert (w * 2).requires_grad
    with hf.no_grad(), hf.inference_mode(False):
        assert (w * 2).requires_grad                  # as torch: mode=False turns recording on

    @hf.inference_mode
    def bare(x):
        return x * 2

    @hf.autograd.inference_mode()
    def called(x):
        return x * 3

    assert not bare(w).requires_grad and not called(w).requires_grad
    assert bare.__name__ == "bare" and hf.is_grad_enabled()


def test_detect_anomaly_names_the_node_whose_gradient_holds_nan():
    """torch's set_detect_anomaly / detect_anomaly (they were missing)."""
    x = hf.tensor([0.0, 1.0], requires_grad=True)
    with hf.autograd.detect_anomaly():
        assert hf.autograd.is_anomaly_enabled()
        with pytest.raises(RuntimeError, match=r"the gradient that 'sqrt' \(<SqrtBackward>\) "
                                               r"gave its input 0 holds NaN"):
            (hf.sqrt(x) * 0 + x).sum().backward()
        (x * x).sum().backward()                     # no NaN: nothing to say
        assert x.grad.tolist() == [0.0, 2.0]
    assert not hf.autograd.is_anomaly_enabled()
    x.grad = None
    (hf.sqrt(x) * 0 + x).sum().backward()            # off: NaN flows as in torch
    assert np.isnan(x.grad.numpy()[0]) and x.grad.numpy()[1] == 1.0
    hf.autograd.set_detect_anomaly(True)
    try:
        assert hf.autograd.is_anomaly_enabled()
    finally:
        hf.autograd.set_detect_anomaly(False)
    assert not hf.autograd.is_anomaly_enabled()
