"""Normalization layers under an InputSpec whose every dim is None (channels and normalized
dims included): they were refused while tracing (LayerNorm: "normalized_shape must match",
GroupNorm/InstanceNorm: the truth value of a run-time size); now outputs, running statistics
and gradients equal eager's."""
import copy

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn

CASES = [(lambda: nn.BatchNorm1d(3), (4, 3)), (lambda: nn.BatchNorm2d(3), (4, 3, 5, 5)),
         (lambda: nn.GroupNorm(3, 6), (2, 6, 5)), (lambda: nn.LayerNorm([4, 5]), (2, 4, 5)),
         (lambda: nn.InstanceNorm1d(3, affine=True, track_running_stats=True), (2, 3, 5))]


@pytest.mark.parametrize("make, shape", CASES)
@pytest.mark.parametrize("training", [True, False])
def test_all_dims_dynamic_equals_eager(make, shape, training):
    eager = make().train(training)
    converted = copy.deepcopy(eager)
    static = hf.jit.to_static(converted, input_spec=[hf.jit.InputSpec([None] * len(shape))])
    x_np = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    outs = []
    for model, module in ((eager, eager), (static, converted)):
        x = hf.tensor(x_np, requires_grad=True)
        y = model(x)
        (y * y).sum().backward()
        grads = [x.grad.numpy()] + [p.grad.numpy() for p in module.parameters()]
        stats = [b.numpy().copy() for b in module.buffers() if b.dtype.is_floating_point]
        outs.append((y.detach().numpy(), grads, stats))
    (y0, g0, s0), (y1, g1, s1) = outs
    np.testing.assert_allclose(y1, y0, rtol=1e-5, atol=1e-6)
    for a, b in zip(g1 + s1, g0 + s0):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
