"""view on non-contiguous tensors, x**0 gradients, and set_grad_enabled as a plain call
(each as PyTorch behaves)."""
import numpy as np
import pytest

import hybridfw as hf


# ---- view ------------------------------------------------------------------------------------
def test_view_of_transposed_tensor_raises_and_reshape_copies():
    x = hf.arange(6.0).reshape(2, 3).t()
    with pytest.raises(RuntimeError, match=r"view.*Use \.reshape"):
        x.view(6)
    with pytest.raises(RuntimeError, match="view"):
        x.view(-1)
    np.testing.assert_array_equal(x.reshape(6).numpy(), [0, 3, 1, 4, 2, 5])


def test_view_that_strides_allow_shares_memory():
    base = hf.arange(12.0).reshape(3, 4)
    x = base[:, :2]  # not contiguous, but each row stays one block
    assert not x.is_contiguous()
    v = x.view(3, 2, 1)
    v[0, 0, 0] = 100.0
    assert base[0, 0].item() == 100.0
    t = hf.arange(6.0).reshape(2, 3).t()
    assert t.view(3, 1, 2).shape == (3, 1, 2)


def test_view_size_mismatch_still_value_error():
    x = hf.arange(6.0).reshape(2, 3).t()
    with pytest.raises(ValueError, match="view"):
        x.view(4)


def test_view_matches_torch_on_which_shapes_need_a_copy():
    torch = pytest.importorskip("torch")
    ours = hf.arange(24.0).reshape(2, 3, 4).permute(0, 2, 1)
    theirs = torch.arange(24.0).reshape(2, 3, 4).permute(0, 2, 1)
    for shape in [(8, 3), (2, 12), (2, 4, 3, 1), (24,), (2, 2, 2, 3)]:
        try:
            theirs.view(shape)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                ours.view(shape)
        else:
            np.testing.assert_array_equal(ours.view(shape).numpy(), theirs.view(shape).numpy())


def test_view_in_to_static_unchanged():
    @hf.jit.to_static
    def f(x):
        return x.t().reshape(6) * 2

    x = hf.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(f(x).numpy(), (x.t().reshape(6) * 2).numpy())


# ---- pow gradient at exponent 0 ------------------------------------------------------------
@pytest.mark.parametrize("make", [lambda a: a ** 0, lambda a: a ** 0.0, lambda a: hf.pow(a, 0),
                                  lambda a: a ** hf.zeros(3, dtype=hf.float64),
                                  lambda a: a.pow(0)])
def test_pow_zero_exponent_gradient_is_zero(make):
    a = hf.tensor([0.0, -2.0, 3.0], dtype=hf.float64, requires_grad=True)
    make(a).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 0.0, 0.0])


@pytest.mark.parametrize("exponent", [0, 1, 2, 0.5, -1, 3.0, -2])
@pytest.mark.parametrize("as_tensor", [False, True])
def test_pow_base_gradient_matches_torch(exponent, as_tensor):
    torch = pytest.importorskip("torch")
    bases = [-2.0, -1.0, -0.5, 0.0, 0.5, 2.0]
    t = torch.tensor(bases, dtype=torch.float64, requires_grad=True)
    h = hf.tensor(bases, dtype=hf.float64, requires_grad=True)
    te = torch.full((6,), float(exponent), dtype=torch.float64) if as_tensor else exponent
    he = hf.full((6,), float(exponent), dtype=hf.float64) if as_tensor else exponent
    with np.errstate(all="ignore"):
        (t ** te).sum().backward()
        (h ** he).sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-12, equal_nan=True)


def test_pow_gradient_gradcheck_and_static():
    a = hf.tensor([0.7, 1.3, 2.0], dtype=hf.float64, requires_grad=True)
    assert hf.autograd.gradcheck(lambda x: x ** 0 + x ** 2, (a,))

    @hf.jit.to_static
    def f(x):
        return (x ** 0).sum()

    x = hf.tensor([0.0, 2.0], requires_grad=True)
    f(x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])


# ---- set_grad_enabled --------------------------------------------------------------------
def test_set_grad_enabled_plain_call_switches_globally():
    x = hf.ones(2, requires_grad=True)
    try:
        hf.set_grad_enabled(False)
        assert not hf.is_grad_enabled()
        assert not (x * 2).requires_grad
        hf.set_grad_enabled(True)
        assert hf.is_grad_enabled()
        assert (x * 2).requires_grad
    finally:
        hf.set_grad_enabled(True)


def test_set_grad_enabled_context_manager_and_decorator_restore():
    with hf.set_grad_enabled(False):
        assert not hf.is_grad_enabled()
    assert hf.is_grad_enabled()
    with hf.no_grad():
        with hf.set_grad_enabled(True):
            assert hf.is_grad_enabled()
        assert not hf.is_grad_enabled()
    assert hf.is_grad_enabled()

    @hf.set_grad_enabled(False)
    def f():
        return hf.is_grad_enabled()

    assert hf.is_grad_enabled()  # decorating changes nothing by itself
    assert f() is False
    assert hf.is_grad_enabled()
