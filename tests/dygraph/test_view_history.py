"""Views and in-place writes under autograd, as PyTorch: a view taken before its base is
written in place gets its gradient through the write (its history is rebuilt on the base's new
one), and a write through a view (getitem, reshape, permute, and chains of them) becomes part
of the base's history. Expected gradients are worked by hand (and equal torch 2.13's)."""
import numpy as np
import pytest

import hybridfw as hf


def leaf(values):
    return hf.tensor(values, dtype="float64", requires_grad=True)


def test_a_view_sees_an_overwrite_of_its_base():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 1
    z = y[:2]
    y[0] = 10.0                      # z = [10, x1]: x0 no longer reaches z
    assert z.tolist() == [10.0, 2.0]
    z.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0]


def test_a_view_sees_an_inplace_op_on_its_base():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 1
    z = y[:2]
    y.mul_(0)
    z.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_a_value_written_into_the_base_reaches_the_views_gradient():
    x, w = leaf([1.0, 2.0, 3.0]), leaf([5.0, 6.0, 7.0])
    y = x * 1
    z = y.reshape(3)
    y[1:] = w[1:]                    # z = [x0, w1, w2]
    (z * z).sum().backward()
    assert x.grad.tolist() == [2.0, 0.0, 0.0]
    assert w.grad.tolist() == [0.0, 12.0, 14.0]


def test_a_view_of_a_view_and_a_base_without_history():
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    y = x * 1
    z = y[:, 1:][1:]                 # y[1, 1]
    y.add_(x)                        # z = 2 x11
    (z * 3).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0], [0.0, 6.0]]
    x = leaf([1.0, 2.0, 3.0])
    y = hf.zeros(3, dtype="float64")  # no history until the write
    z = y[1:]
    y[:] = x * 2
    z.sum().backward()
    assert x.grad.tolist() == [0.0, 2.0, 2.0]


def test_writes_through_views_become_the_bases_history():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 2
    v = y[1:]
    v[0] = 0.0                       # y = [2 x0, 0, 2 x2]
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 0.0, 2.0]
    x = leaf([1.0, 1.0, 1.0])
    y = x * 2
    y[:2].add_(x[:2])                # y = [3 x0, 3 x1, 2 x2]
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 2.0]


def test_writes_through_transposes_reshapes_and_chains():
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    y = x * 1
    y.T[0].mul_(x[0])                # column 0 of y times row 0 of x: y00 = x00^2, y10 = x10 x01
    (y * y).sum().backward()
    # d/dx of x00^4 + (x10 x01)^2 + x01^2 + x11^2
    assert x.grad.tolist() == [[4.0, 2 * 2 + 2 * 9 * 2], [2 * 3 * 4, 8.0]]
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    y = x * 1
    r = y.reshape(4)
    o = y[0]                         # a view taken before the write sees it
    r[1:3] += 5 * x.reshape(4)[1:3]  # y01 = 6 x01, y10 = 6 x10
    (o * 3 + y.sum()).sum().backward()
    assert o.tolist() == [1.0, 12.0]
    assert x.grad.tolist() == [[5.0, 30.0], [12.0, 2.0]]
    x = leaf([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    y = x * 1
    y[:, 1:][1].mul_(2)              # y11, y12 doubled
    (y * y).sum().backward()
    assert y.tolist() == [[1.0, 2.0, 3.0], [4.0, 10.0, 12.0]]
    assert x.grad.tolist() == [[2.0, 4.0, 6.0], [8.0, 40.0, 48.0]]


def test_views_of_a_leaf_that_requires_grad_still_refuse_writes():
    x = leaf([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="leaf"):
        x[:2].add_(1)
    with pytest.raises(RuntimeError, match="leaf"):
        x.reshape(3)[0] = 7.0


def test_a_broadcast_view_still_refuses_a_write():
    x = leaf([1.0, 2.0])
    y = (x * 1).expand(3, 2)
    with pytest.raises(RuntimeError):
        y.add_(x)


def test_many_views_of_one_base_are_not_kept_alive():
    import gc
    import weakref
    base = hf.tensor(np.zeros((4, 4)))
    refs = [weakref.ref(base[i]) for i in range(4) for _ in range(50)]
    gc.collect()
    assert all(r() is None for r in refs)       # the base holds its views weakly
    assert len(base._views) <= 200
    kept = [base[0] for _ in range(300)]
    assert len(base._views) < 300 + 128          # dead ones dropped along the way
    del kept
