"""gather refuses out-of-range and negative indices (as PyTorch, with an error that is both
RuntimeError and IndexError); creation ops refuse float sizes with a TypeError."""
import numpy as np
import pytest

import hybridfw as hf


@pytest.mark.parametrize("index, bad", [([[-1], [0]], -1), ([[4], [0]], 4), ([[0], [-5]], -5)])
def test_gather_out_of_bounds_index_raises(index, bad):
    x = hf.arange(8.0).reshape(2, 4)
    with pytest.raises(RuntimeError, match=f"gather: index {bad} is out of bounds for "
                                           f"dimension 1 with size 4"):
        x.gather(1, hf.tensor(index))
    with pytest.raises(IndexError):
        hf.gather(x, 1, hf.tensor(index))


def test_gather_zero_d_index_minus_one_raises_like_torch():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        torch.tensor(5.0).gather(0, torch.tensor(-1))
    with pytest.raises(IndexError, match="index -1 is out of bounds"):
        hf.tensor(5.0).gather(0, hf.tensor(-1))


def test_gather_in_range_unchanged_and_static_raises():
    x = hf.arange(8.0).reshape(2, 4)
    i = hf.tensor([[3, 0], [1, 1]])
    np.testing.assert_array_equal(x.gather(1, i).numpy(), [[3.0, 0.0], [5.0, 5.0]])

    @hf.jit.to_static
    def f(x, i):
        return x.gather(1, i)

    np.testing.assert_array_equal(f(x, i).numpy(), x.gather(1, i).numpy())
    with pytest.raises(IndexError, match="out of bounds"):
        f(x, hf.tensor([[-1, 0], [0, 0]]))


@pytest.mark.parametrize("call, op, bad", [
    (lambda: hf.zeros(2.5), "zeros", "2.5"), (lambda: hf.ones(2.9, 1.7), "ones", "2.9"),
    (lambda: hf.zeros((2.5, 3)), "zeros", "2.5"), (lambda: hf.empty(2.0), "empty", "2.0"),
    (lambda: hf.rand(3, 2.5), "rand", "2.5"), (lambda: hf.randn([1, 2.0]), "randn", "2.0"),
    (lambda: hf.full((2.5,), 1.0), "full", "2.5"), (lambda: hf.full(2.5, 1.0), "full", "2.5"),
    (lambda: hf.zeros(size=(2, 1.5)), "zeros", "1.5"),
])
def test_float_sizes_raise_type_error(call, op, bad):
    with pytest.raises(TypeError, match=rf"{op}: argument 'size' must be tuple of ints, but "
                                        rf"found element of type float \({bad}\)"):
        call()


def test_integer_like_sizes_accepted():
    assert hf.zeros(np.int64(2), hf.tensor(3)).shape == (2, 3)
    assert hf.full(hf.tensor(2), 1.0).shape == (2,)
    assert hf.ones((np.int32(1), 4)).shape == (1, 4)
    assert hf.empty(2, 3).shape == (2, 3)
    assert hf.rand(np.int64(3)).shape == (3,)
    assert hf.randint(0, 5, (np.int32(2),)).shape == (2,)
    with pytest.raises(TypeError, match="zeros"):
        hf.zeros(hf.tensor(2.0))


@pytest.mark.parametrize("index, bad", [([-1], -1), ([4, 0], 4), ([0, -4], -4)])
def test_index_select_out_of_bounds_index_raises_like_torch(index, bad):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        torch.arange(8.0).reshape(2, 4).index_select(1, torch.tensor(index))
    x = hf.arange(8.0).reshape(2, 4)
    with pytest.raises(RuntimeError, match=f"index_select: index {bad} is out of bounds for "
                                           f"dimension 1 with size 4"):
        x.index_select(1, hf.tensor(index))
    with pytest.raises(IndexError):
        hf.index_select(x, -1, hf.tensor(index))


def test_index_select_in_range_unchanged_eager_and_static():
    x = hf.arange(8.0).reshape(2, 4)
    i = hf.tensor([3, 0, 3])
    np.testing.assert_array_equal(x.index_select(1, i).numpy(), np.take(x.numpy(), [3, 0, 3], 1))
    assert hf.tensor(3.0).index_select(0, hf.tensor(0)).item() == 3.0
    with pytest.raises(IndexError):
        hf.tensor(3.0).index_select(0, hf.tensor([-1]))

    @hf.jit.to_static
    def f(x, i):
        return x.index_select(1, i)

    np.testing.assert_array_equal(f(x, i).numpy(), x.index_select(1, i).numpy())
    with pytest.raises(IndexError, match="out of bounds"):
        f(x, hf.tensor([-1, 0, 0]))


@pytest.mark.parametrize("op", ["reshape", "view"])
@pytest.mark.parametrize("sizes", [(2.5, -1), ((2, 1.5),), (6 / 2, 2)])
def test_reshape_and_view_refuse_float_sizes(op, sizes):
    # reshape(2.5, -1) of 6 elements gave shape (2, 3), and view(n / 2, ...) (a float from /)
    # passed where PyTorch raises TypeError
    x = hf.ones(6)
    with pytest.raises(TypeError, match=rf"{op}: sizes must be ints, but found element of "
                                        r"type float"):
        getattr(x, op)(*sizes)
    assert getattr(x, op)(np.int64(2), hf.tensor(3)).shape == (2, 3)


def test_eye_refuses_float_sizes():
    # eye(2.5) gave a 2 x 2 matrix (PyTorch: TypeError)
    with pytest.raises(TypeError, match=r"eye: argument 'size' must be tuple of ints, but found "
                                        r"element of type float \(2.5\)"):
        hf.eye(2.5)
    with pytest.raises(TypeError, match="eye"):
        hf.eye(2, 3.0)
    assert hf.eye(np.int64(2), hf.tensor(3)).shape == (2, 3)
