"""``hf.cat`` skips PyTorch's legacy empty tensor (shape (0,), ``hf.tensor([])``) beside
tensors of other shapes; its dtype still promotes the result's."""
import numpy as np
import pytest

import hybridfw as hf

X = np.arange(6, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize("lib_name", ["hf", "torch"])
def test_legacy_empty_is_skipped(lib_name):
    lib = hf if lib_name == "hf" else pytest.importorskip("torch")
    x = lib.tensor(X)
    for out in (lib.cat([x, lib.tensor([])]), lib.cat([lib.tensor([]), x], dim=-1),
                lib.cat([x, lib.tensor([]), x], dim=1)[:, :3]):
        assert tuple(out.shape) == (2, 3)
        np.testing.assert_array_equal(out.numpy(), X)
    ints = lib.cat([lib.tensor(X).long(), lib.tensor([])])
    assert str(ints.dtype).endswith("float32")  # float32 of the empty tensor promotes
    assert tuple(lib.cat([lib.tensor([]), lib.tensor([])]).shape) == (0,)
    np.testing.assert_array_equal(lib.cat([lib.tensor([1.0, 2.0]), lib.tensor([])]).numpy(),
                                  [1.0, 2.0])
    with pytest.raises((ValueError, RuntimeError)):
        lib.cat([x, lib.zeros(0, 2)])  # only shape (0,) is skipped


def test_gradient_and_static_program():
    x = hf.tensor(X, requires_grad=True)
    hf.cat([x, hf.tensor([])]).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((2, 3)))

    @hf.jit.to_static
    def f(x):
        return hf.cat([x, hf.tensor([]), x * 2])

    np.testing.assert_array_equal(f(hf.tensor(X)).numpy(), np.concatenate([X, 2 * X]))


@pytest.mark.parametrize("lib_name", ["hf", "torch"])
def test_one_tensor_still_checks_dim(lib_name):
    lib = hf if lib_name == "hf" else pytest.importorskip("torch")
    x = lib.tensor(X)
    assert lib.cat([x], -1) is x or np.array_equal(lib.cat([x], -1).numpy(), X)
    for dim in (2, -3):
        with pytest.raises(IndexError):
            lib.cat([x], dim)
