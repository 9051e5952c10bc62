"""A variable starting as a Python number that a loop body or one branch of an ``if`` on a
tensor makes a tensor (``total = 0; ...: total += x``): the number becomes a tensor of the
other side's (fully known) shape and dtype; with sizes known only at run time, a clear error."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.converter import ConversionError


def loop_total(x, n):
    total = 0
    for i in range(n):
        total += x * (i + 1)
    return total


def while_total(x):
    total = 1.5
    while x.sum() < 10:
        x = x * 2
        total *= x
    return total


def branch_total(x):
    total = 0
    if x.sum() > 0:
        total += x * x
    return total * 3


def else_total(x):
    if x.sum() > 0:
        total = x.exp()
    else:
        total = 2
    return total + x


def _run(fn, *args):
    """fn's result and the gradient of sum(result * x) w.r.t. x (x the first argument)."""
    x = hf.tensor(args[0], dtype=hf.float64, requires_grad=True)
    out = fn(x, *args[1:])
    (out * x).sum().backward()
    value = out.detach().numpy() if isinstance(out, hf.Tensor) else \
        np.broadcast_to(np.float64(out), x.shape)
    return value, x.grad.numpy()


@pytest.mark.parametrize("fn, calls, broadcast", [
    (loop_total, [([1.0, 2.0], hf.tensor(3)), ([1.0, -2.0], hf.tensor(0)),
                  ([0.5, 2.0], hf.tensor(1))], "zero iterations"),
    (while_total, [([1.0, 2.0],), ([20.0, 1.0],)], "zero iterations"),
    (branch_total, [([1.0, 2.0],), ([-1.0, -2.0],)], "else"),
    (else_total, [([1.0, 2.0],), ([-1.0, -2.0],)], None),
])
def test_number_accumulator_matches_eager(fn, calls, broadcast):
    static = hf.jit.to_static(fn)
    for args in calls:
        got, got_grad = _run(static, *args)
        want, want_grad = _run(fn, *args)
        # (where eager keeps the Python number, the program gives it broadcast to the tensor's
        # shape, with no gradient)
        np.testing.assert_allclose(got, want)
        np.testing.assert_allclose(got_grad, want_grad)
    assert static.cache_info().programs == 1


def test_number_accumulator_with_a_dynamic_size_is_a_clear_error():
    f = hf.jit.to_static(loop_total, input_spec=[hf.jit.InputSpec([None]),
                                                 hf.jit.InputSpec([], "int64")])
    with pytest.raises(ConversionError, match=r"Python number before the loop.*\(None,\).*"
                                              r"total = hf.zeros_like\(x\)"):
        f(hf.tensor([1.0, 2.0]), hf.tensor(2))
    g = hf.jit.to_static(branch_total, input_spec=[hf.jit.InputSpec([None])])
    with pytest.raises(ConversionError, match=r"Python number in one branch.*zeros_like"):
        g(hf.tensor([1.0, 2.0]))
