"""all/any with an empty dim (``()`` or ``[]``) reduce nothing, as PyTorch: each element's
truth, in the input's shape (they reduced every dim, as sum does for ``dim=()``)."""
import numpy as np
import pytest

import hybridfw as hf

X = [[1.0, 0.0], [2.0, 3.0]]
TRUTH = [[True, False], [True, True]]


@pytest.mark.parametrize("call", [
    lambda x: x.all(dim=()), lambda x: x.any(dim=[]), lambda x: hf.all(x, ()),
    lambda x: hf.any(x, dim=(), keepdim=True)])
def test_all_any_over_no_dims(call):
    out = call(hf.tensor(X))
    assert out.dtype is hf.bool
    np.testing.assert_array_equal(out.numpy(), TRUTH)


def test_all_any_over_dims_still_reduce():
    x = hf.tensor(X)
    assert x.all().item() is False and x.any().item() is True
    np.testing.assert_array_equal(x.all(dim=(0, 1)).numpy(), False)
    np.testing.assert_array_equal(x.any(1).numpy(), [True, True])


def test_matches_torch():
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(torch.tensor(X).all(dim=()).numpy(),
                                  hf.tensor(X).all(dim=()).numpy())
    np.testing.assert_array_equal(torch.tensor(X).any(dim=[]).numpy(),
                                  hf.tensor(X).any(dim=[]).numpy())
