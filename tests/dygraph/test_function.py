"""hf.autograd.Function (custom forward/backward, as torch.autograd.Function): it was missing.
Expected values are worked by hand (and equal torch 2.13's)."""
import numpy as np
import pytest

import hybridfw as hf


class GradReverse(hf.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        return -ctx.alpha * grad, None


class MulAndSub(hf.autograd.Function):
    """Two outputs, three inputs, one gradient only when asked for."""

    @staticmethod
    def forward(ctx, a, b, c):
        ctx.save_for_backward(a, b)
        return a * b + c, a - b

    @staticmethod
    def backward(ctx, g_prod, g_diff):
        a, b = ctx.saved_tensors
        return (g_prod * b + g_diff, g_prod * a - g_diff,
                g_prod.sum(dim=0) if ctx.needs_input_grad[2] else None)


class Exp(hf.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)   # an output: given back with its history in backward
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


class Cube(hf.autograd.Function):
    """torch 2's style: forward without ctx, setup_context."""

    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad


def test_custom_gradient_replaces_the_forward_ones():
    x = hf.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = GradReverse.apply(x * 2, 0.5)
    assert y.requires_grad and not y.is_leaf and y.grad_fn.name() == "GradReverseBackward"
    y.sum().backward()
    assert x.grad.tolist() == [-1.0, -1.0, -1.0]
    x.grad = None
    Cube.apply(x).sum().backward()
    assert x.grad.tolist() == [3.0, 12.0, 27.0]


def test_several_outputs_and_inputs_with_broadcast_and_needs_input_grad():
    a = hf.tensor([[1.0, 2.0, 3.0]] * 2, requires_grad=True)
    b = hf.tensor([0.5, 1.0, 2.0], requires_grad=True)
    c = hf.tensor([1.0, 1.0, 1.0], requires_grad=True)
    prod, diff = MulAndSub.apply(a, b, c)
    (prod * prod).sum().backward(retain_graph=True)   # only prod: diff's gradient is zeros
    p = 2 * (np.array([[1.0, 2.0, 3.0]] * 2) * [0.5, 1.0, 2.0] + 1.0)
    np.testing.assert_allclose(a.grad.numpy(), p * [0.5, 1.0, 2.0])
    np.testing.assert_allclose(b.grad.numpy(), (p * [[1.0, 2.0, 3.0]]).sum(axis=0))  # reduced
    np.testing.assert_allclose(c.grad.numpy(), p.sum(axis=0))
    a.grad = b.grad = c.grad = None
    diff.sum().backward()
    assert a.grad.tolist() == [[1.0] * 3] * 2 and b.grad.tolist() == [-2.0] * 3
    assert c.grad.tolist() == [0.0, 0.0, 0.0]           # prod's gradient: materialized zeros
    frozen = hf.tensor([1.0, 1.0, 1.0])
    seen = []

    class Spy(MulAndSub):
        @staticmethod
        def backward(ctx, g_prod, g_diff):
            seen.append(ctx.needs_input_grad)
            return MulAndSub.backward(ctx, g_prod, g_diff)

    Spy.apply(a, b, frozen)[0].sum().backward()
    assert seen == [(True, True, False)]


def test_double_backward_through_the_ops_of_backward():
    x = hf.tensor([0.0, 1.0, -1.0], requires_grad=True)
    y = Exp.apply(x)
    (g,) = hf.autograd.grad(y.sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), np.exp([0.0, 1.0, -1.0]), rtol=1e-6)
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.0, 1.0, -1.0]), rtol=1e-6)


def test_outputs_without_gradient_and_calls_that_record_nothing():
    class MaxAndIndex(hf.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            index = x.argmax()
            ctx.mark_non_differentiable(index)
            ctx.save_for_backward(index)
            return x.max(), index

        @staticmethod
        def backward(ctx, g_value, g_index):
            (index,) = ctx.saved_tensors
            return (hf.arange(3) == index).float() * g_value

    x = hf.tensor([1.0, 5.0, 2.0], requires_grad=True)
    value, index = MaxAndIndex.apply(x)
    assert value.requires_grad and not index.requires_grad and index.item() == 1
    value.backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0]
    with hf.no_grad():
        assert not Exp.apply(x).requires_grad
    assert not Exp.apply(hf.tensor([1.0])).requires_grad

    class Identity(hf.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    y = Identity.apply(x)                              # an input handed back: a copy
    assert y is not x and x.is_leaf and y.data_ptr() != x.data_ptr()
    x.grad = None
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]

    class Flatten(hf.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.reshape(-1)                        # a view of the argument

        @staticmethod
        def backward(ctx, grad):
            return (grad * 3).reshape(2, 2)

    w = hf.ones(2, 2, requires_grad=True)
    h = w * 1.0
    y = Flatten.apply(h)
    with hf.no_grad():
        h.add_(1.0)           # used to change y (a view) and drop the custom backward for it
    (y * y).sum().backward()
    assert y.tolist() == [1.0] * 4 and w.grad.tolist() == [[6.0, 6.0], [6.0, 6.0]]


def test_errors_name_the_function():
    class TooFew(hf.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, grad):
            return grad

    x = hf.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="TooFew.backward returned 1 gradient.* forward \\(2\\)"):
        TooFew.apply(x, x).sum().backward()

    class WrongShape(GradReverse):
        @staticmethod
        def backward(ctx, grad):
            return hf.ones(5), None

    with pytest.raises(RuntimeError, match=r"WrongShape.backward returned a gradient of shape "
                                           r"\(5,\) for argument 0, of shape \(2,\)"):
        WrongShape.apply(hf.ones(2, requires_grad=True), 1.0).sum().backward()
    y = Exp.apply(x * 1.0)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.sum().backward()
    z = x * 1.0
    w = Cube.apply(z)
    with hf.no_grad():
        z.add_(1.0)
    with pytest.raises(RuntimeError, match="saved tensor 0 .* modified in place"):
        w.sum().backward()
    with pytest.raises(NotImplementedError, match="static forward and backward"):
        hf.autograd.Function.apply(x)


def test_a_saved_output_is_freed_without_gc():
    x = hf.ones(1000, requires_grad=True)
    before = hf.memory.allocated()
    y = Exp.apply(x)
    assert hf.memory.allocated() == before + 4000
    del y
    assert hf.memory.allocated() == before


def test_in_static_code_only_without_grad():
    w = hf.ones(3, requires_grad=True)

    def f(x):
        return Exp.apply(x * w).sum()

    strict = hf.jit.to_static(f)
    with pytest.raises(TypeError, match="Exp.apply: a custom backward cannot be built into a "
                                        "static program"):
        strict(hf.ones(3))
    with hf.no_grad():
        np.testing.assert_allclose(strict(hf.ones(3)).item(), 3 * np.e, rtol=1e-6)
    with pytest.warns(UserWarning, match="falling back to eager"):
        out = hf.jit.to_static(f, full_graph=False)(hf.ones(3))
    out.backward()
    np.testing.assert_allclose(w.grad.numpy(), [np.e] * 3, rtol=1e-6)
