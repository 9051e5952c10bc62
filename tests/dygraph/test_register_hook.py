"""Tensor.register_hook on leaves and non-leaves (as torch.Tensor.register_hook)."""
import numpy as np
import pytest

import hybridfw as hf


def test_leaf_hook_replaces_gradient_and_remove():
    w = hf.ones(2, requires_grad=True)
    handle = w.register_hook(lambda g: g * 10)
    (w * 3).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [30.0, 30.0])
    handle.remove()
    w.grad = None
    (w * 3).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 3.0])


def test_non_leaf_hooks_see_and_replace_the_flowing_gradient_like_torch():
    torch = pytest.importorskip("torch")
    results = []
    for lib in (hf, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        seen = []
        y.register_hook(lambda g, seen=seen: seen.append(g.tolist()))
        y.register_hook(lambda g: g + 1)
        (y * y).sum().backward()
        results.append((seen, x.grad.tolist()))
    assert results[0] == results[1]
    assert results[0] == ([[4.0, 8.0]], [10.0, 18.0])


def test_hook_returning_none_keeps_gradient_and_runs_each_backward():
    x = hf.tensor([1.0, 2.0], requires_grad=True)
    calls = []
    x.register_hook(lambda g: calls.append(1))
    (x * x).sum().backward()
    (x * x).sum().backward()
    assert len(calls) == 2
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 8.0])


def test_hooks_run_in_autograd_grad():
    x = hf.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g * 0 + 5)
    (g,) = hf.autograd.grad((x * x).sum(), [x])
    np.testing.assert_array_equal(g.numpy(), [5.0, 5.0])
    x = hf.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.register_hook(lambda g: g * 2)
    (g,) = hf.autograd.grad(y.sum(), [x])
    np.testing.assert_array_equal(g.numpy(), [6.0, 6.0])


def test_removed_non_leaf_hook_does_not_run():
    x = hf.tensor([1.0], requires_grad=True)
    y = x * 2
    handle = y.register_hook(lambda g: g * 100)
    handle.remove()
    handle.remove()  # a second remove does nothing
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0])


def test_register_hook_errors():
    with pytest.raises(RuntimeError, match="register_hook: cannot register a hook on a tensor "
                                           "that doesn't require gradient"):
        hf.ones(2).register_hook(lambda g: g)
    with pytest.raises(TypeError, match="register_hook: hook must be callable"):
        hf.ones(2, requires_grad=True).register_hook(3)
