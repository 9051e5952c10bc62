"""nn.PReLU and F.prelu against PyTorch, eagerly and under to_static."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.nn import functional as F


@pytest.mark.parametrize("num_parameters, shape", [(1, (2, 3, 4)), (3, (2, 3, 4)),
                                                   (3, (2, 3)), (4, (2, 4, 3, 2)), (1, (5,))])
def test_prelu_matches_torch(matches_torch, num_parameters, shape):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    x.flat[0] = 0.0  # the gradient at 0 is the slope
    reference = torch.nn.PReLU(num_parameters, init=0.1)
    with torch.no_grad():
        reference.weight.copy_(torch.linspace(-0.5, 0.5, num_parameters))
    matches_torch(lambda: nn.PReLU(num_parameters, init=0.1), reference, [x])


def test_prelu_module_defaults_and_functional():
    m = nn.PReLU()
    assert [(n, p.shape) for n, p in m.named_parameters()] == [("weight", (1,))]
    assert m.weight.tolist() == [0.25] and repr(m) == "PReLU(num_parameters=1)"
    assert nn.PReLU(3, init=0.5, dtype=hf.float64).weight.dtype == hf.float64
    x = hf.tensor([[-2.0, 0.0, 4.0], [1.0, -1.0, -3.0]])
    out = F.prelu(x, hf.tensor([0.5, 0.25, 2.0]))
    assert out.tolist() == [[-1.0, 0.0, 4.0], [1.0, -0.25, -6.0]]
    assert F.prelu(hf.tensor(-2.0), hf.tensor([0.25])).shape == ()
    with pytest.raises(ValueError, match=r"prelu.*\(2,\).*\(2, 3\)"):
        F.prelu(x, hf.tensor([0.5, 0.25]))
    with pytest.raises(ValueError, match=r"prelu.*\(1, 1\)"):
        F.prelu(x, hf.tensor([[0.5]]))


def test_prelu_under_input_spec_none_channels():
    m = nn.PReLU(3)
    with hf.no_grad():
        m.weight.copy_(hf.tensor([0.1, -0.2, 0.3]))
    converted = hf.jit.to_static(nn.PReLU(3), input_spec=[hf.jit.InputSpec([None, None, 5])])
    converted.load_state_dict(m.state_dict())
    for x in (hf.randn(2, 3, 5), hf.randn(4, 3, 5)):
        np.testing.assert_allclose(converted(x).detach().numpy(), m(x).detach().numpy(),
                                   rtol=1e-6)
    assert converted.forward.cache_info().misses == 1
