"""squeeze_, unsqueeze_, t_ and transpose_: the tensor itself takes the view's shape and
history, as PyTorch's."""
import numpy as np
import pytest

import hybridfw as hf

A = np.arange(6.0).reshape(2, 3)


@pytest.mark.parametrize("call, expected", [
    (lambda y: y.unsqueeze_(0), A[None]),
    (lambda y: y.unsqueeze_(-1), A[..., None]),
    (lambda y: y.t_(), A.T),
    (lambda y: y.transpose_(0, 1), A.T),
    (lambda y: y.unsqueeze_(1).squeeze_(), A),
    (lambda y: y.unsqueeze_(0).squeeze_(0), A),
])
def test_shape_values_and_gradient(call, expected):
    x = hf.tensor(A, requires_grad=True)
    y = x * 2
    same = call(y)
    assert same is y and y.shape == expected.shape
    np.testing.assert_array_equal(y.detach().numpy(), 2 * expected)
    weights = np.arange(expected.size, dtype=np.float64).reshape(expected.shape)
    (y * hf.tensor(weights)).sum().backward()
    # d/dx sum(w * view(2x)) = 2 * w taken back through the view (a transpose or a reshape)
    back = weights.T if expected.shape == A.T.shape else weights.reshape(A.shape)
    np.testing.assert_array_equal(x.grad.numpy(), 2 * back)


def test_grad_fn_is_the_view_op():
    x = hf.tensor(A, requires_grad=True)
    y = x * 2
    y.t_()
    assert type(y.grad_fn).__name__ != "MulBackward" and y.grad_fn is not None


def test_leaf_that_requires_grad_is_refused():
    x = hf.tensor(A, requires_grad=True)
    for name, call in [("unsqueeze_", lambda: x.unsqueeze_(0)), ("squeeze_", x.squeeze_),
                       ("t_", x.t_), ("transpose_", lambda: x.transpose_(0, 1))]:
        with pytest.raises(RuntimeError, match=f"{name}: a leaf tensor that requires grad"):
            call()
    assert x.shape == (2, 3)
    with hf.no_grad():
        x.unsqueeze_(0)
    assert x.shape == (1, 2, 3) and x.requires_grad and x.is_leaf


def test_plain_tensor_and_errors_as_the_view_methods():
    z = hf.ones(3, 1)
    z.squeeze_()
    assert z.shape == (3,)
    with pytest.raises(ValueError, match="t: expects a tensor of at most 2 dims"):
        hf.ones(2, 3, 4).t_()
    with pytest.raises(IndexError):
        hf.ones(3, 4).unsqueeze_(5)


def test_views_taken_before_keep_their_shape():
    base = hf.zeros(2, 3, 4)
    v = base[0]          # a view
    w = base[0]          # another view of the same part, taken before
    v.t_()
    assert v.shape == (4, 3) and w.shape == (3, 4)
    v[1, 2] = 5.0        # still a view of base: the write reaches base and w
    assert base[0, 2, 1].item() == 5.0 and w[2, 1].item() == 5.0


def test_write_through_a_transposed_view_reaches_the_base_gradient():
    x = hf.tensor(A, requires_grad=True)
    y = x * 1.0
    v = y[:, :2]
    v.t_()               # v: (2, 2), a view of y through getitem then permute
    v.mul_(hf.tensor([[1.0, 2.0], [3.0, 4.0]]))
    y.sum().backward()
    # v[i, j] = y[j, i]: y[0, 1] *= 3, y[1, 0] *= 2, y[1, 1] *= 4
    np.testing.assert_array_equal(x.grad.numpy(), [[1, 3, 1], [2, 4, 1]])


def test_tensor_with_live_views_is_refused():
    y = hf.tensor(A) * 2
    kept = y[0]
    with pytest.raises(RuntimeError, match="unsqueeze_: this tensor has views taken of it"):
        y.unsqueeze_(0)
    assert y.shape == (2, 3) and kept.shape == (3,)
    del kept
    y.unsqueeze_(0)
    assert y.shape == (1, 2, 3)


def test_to_static_names_the_method_and_line():
    def f(x):
        y = x * 2
        y.unsqueeze_(0)
        return y

    with pytest.raises(TypeError, match="unsqueeze_: changing the shape of static Variable") \
            as info:
        hf.jit.to_static(f)(hf.ones(2, 3))
    assert "y.unsqueeze_(0)" in str(info.value)


def test_matches_torch():
    torch = pytest.importorskip("torch")
    for name, args in [("unsqueeze_", (1,)), ("t_", ()), ("transpose_", (1, 0)),
                       ("squeeze_", ())]:
        tx = torch.tensor(A[:, :1] if name == "squeeze_" else A, requires_grad=True)
        hx = hf.tensor(tx.detach().numpy(), requires_grad=True)
        ty, hy = tx * 3, hx * 3
        getattr(ty, name)(*args)
        getattr(hy, name)(*args)
        assert hy.shape == tuple(ty.shape)
        np.testing.assert_array_equal(hy.detach().numpy(), ty.detach().numpy())
        weights = np.arange(ty.numel(), dtype=np.float64).reshape(tuple(ty.shape))
        (ty * torch.tensor(weights)).sum().backward()
        (hy * hf.tensor(weights)).sum().backward()
        np.testing.assert_array_equal(hx.grad.numpy(), tx.grad.numpy())
