"""Empty inputs that PyTorch accepts: softmax/log_softmax over a dim of size 0 (numpy's max
of an empty dim raised), embedding's backward for no indices (a reshape by -1 raised) and
conv2d on a batch of 0 (a reshape by -1 raised), with their gradients."""
import numpy as np
import pytest

import hybridfw as hf
import hybridfw.nn.functional as F


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
@pytest.mark.parametrize("shape, dim", [((0, 3), 0), ((2, 0), -1), ((0, 3), 1)])
def test_softmax_of_empty_inputs(fn, shape, dim):
    x = hf.zeros(*shape, requires_grad=True)
    out = fn(x, dim=dim)
    assert tuple(out.shape) == shape and out.dtype is hf.float32
    out.sum().backward()
    assert tuple(x.grad.shape) == shape


def test_softmax_of_an_empty_dim_in_a_static_program():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [0, 3])
        out = F.log_softmax(x, dim=0)
    got, = hf.static.Executor().run(prog, feed={"x": np.zeros((0, 3), np.float32)},
                                    fetch_list=[out], return_numpy=True)
    assert got.shape == (0, 3)


def test_embedding_backward_for_no_indices_is_zero():
    weight = hf.ones(6, 3, requires_grad=True)
    out = F.embedding(hf.zeros(0, 2, dtype=hf.int64), weight)
    assert tuple(out.shape) == (0, 2, 3)
    out.sum().backward()
    np.testing.assert_array_equal(weight.grad.numpy(), np.zeros((6, 3)))


@pytest.mark.parametrize("groups, out_channels, kwargs", [
    (1, 4, {}), (3, 6, {}), (1, 4, {"stride": 2, "padding": 1}),
    (3, 3, {"stride": 2, "dilation": 2, "padding": 2})])
def test_conv2d_on_a_batch_of_zero(groups, out_channels, kwargs):
    x = hf.zeros(0, 3, 7, 6, requires_grad=True)
    w = hf.ones(out_channels, 3 // groups, 3, 3, requires_grad=True)
    b = hf.ones(out_channels, requires_grad=True)
    out = F.conv2d(x, w, b, groups=groups, **kwargs)
    full = F.conv2d(hf.zeros(1, 3, 7, 6), w, b, groups=groups, **kwargs)
    assert tuple(out.shape) == (0,) + tuple(full.shape[1:])
    out.sum().backward()
    assert tuple(x.grad.shape) == (0, 3, 7, 6)
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros(tuple(w.shape)))
    np.testing.assert_array_equal(b.grad.numpy(), np.zeros(out_channels))
