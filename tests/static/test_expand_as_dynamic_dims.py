"""expand_as to a tensor whose dims a static program knows only at run time follows their
run-time sizes: (1, 3, 1).expand_as(y of (None, 3, 4)) gave (1, 3, 4) (the -1 read as "keep
the size"), and (3, 4) failed in numpy when the program ran; gradients sum back."""
import numpy as np
import pytest

import hybridfw as hf

S = hf.static


@pytest.mark.parametrize("x_shape", [(1, 3, 1), (3, 4), ()])
def test_expand_as_other_with_a_none_dim(x_shape):
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", x_shape)
        y = S.data("y", [None, 3, 4])
        out = x.expand_as(y)
        gx, = S.gradients([out.sum()], [x])
    assert tuple(out.shape) == (-1, 3, 4)
    xv = np.arange(int(np.prod(x_shape)), dtype=np.float32).reshape(x_shape)
    for batch in (2, 5):
        got, grad = S.Executor().run(prog, feed={"x": xv, "y": np.zeros((batch, 3, 4), np.float32)},
                                     fetch_list=[out, gx], return_numpy=True)
        np.testing.assert_array_equal(got, np.broadcast_to(xv, (batch, 3, 4)))
        np.testing.assert_array_equal(grad, np.full(x_shape, batch * 12 / max(xv.size, 1)))


def _expand(x, y):
    return x.expand_as(y) * 2.0


def test_expand_as_under_to_static_with_an_input_spec_none_dim():
    spec = [hf.jit.InputSpec([1, 3, 1]), hf.jit.InputSpec([None, 3, 4])]
    fn = hf.jit.to_static(_expand, input_spec=spec)
    x = hf.ones(1, 3, 1, requires_grad=True)
    out = fn(x, hf.zeros(2, 3, 4))
    assert tuple(out.shape) == (2, 3, 4)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((1, 3, 1), 16.0))


def test_eager_expand_as_unchanged():
    out = hf.tensor([[1.0], [2.0]]).expand_as(hf.zeros(2, 3))
    np.testing.assert_array_equal(out.numpy(), [[1.0] * 3, [2.0] * 3])
    with pytest.raises(ValueError):
        hf.zeros(2, 3).expand_as(hf.zeros(3, 3))
