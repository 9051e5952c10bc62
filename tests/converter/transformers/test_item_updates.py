"""item_updates: ``y[i] op= v`` becomes ``y[i] = _jst.convert_item_update(y, i, op, v)``; inside
an ``if`` on a tensor it updates ``y`` (a local tensor or a module's buffer) on the path taken,
values and gradients as in eager code."""
import numpy as np

import hybridfw as hf
from hybridfw import nn
from hybridfw.converter.testing import run_transforms
from hybridfw.converter.transformers import item_updates


def body_text(source: str) -> list:
    _, text = run_transforms(source, item_updates.transform)
    return [line.strip() for line in text.splitlines()[1:] if line.strip()]


def test_item_augmented_assignment_becomes_an_assignment():
    assert body_text("def f(y, x):\n    y[0, 1:] += x") == \
        ["y[0, 1:] = _jst.convert_item_update(y, (0, slice(1, None, None)), '+', x)"]


def test_items_with_side_effects_and_plain_names_stay():
    assert body_text("def f(y, x):\n    y[g()] += x\n    h(y)[0] *= x\n    y += x") == \
        ["y[g()] += x", "h(y)[0] *= x", "y += x"]


def test_python_containers_keep_in_place_semantics():
    from hybridfw.converter.runtime import convert_item_update
    inner = [1]
    items = [inner]
    assert convert_item_update(items, 0, "+", [2]) is inner and inner == [1, 2]


def bump_first(x):
    y = x * 2
    if x.sum() > 0:
        y[0] += x[1]
        y[1:] *= 3
    else:
        y[-1] -= x[0] * x[0]
    return y * x


class Accumulates(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", hf.zeros(2, dtype=hf.float64))
        self.w = nn.Parameter(hf.tensor([1.5, -0.5], dtype=hf.float64))

    def forward(self, x):
        if x.sum() > 0:  # (a running statistic: no gradient flows into the buffer)
            self.buf[0] += x.sum().detach()
        return (self.buf + 1) * x * self.w


def test_item_updates_in_a_tensor_if_match_eager_on_both_paths():
    static = hf.jit.to_static(bump_first)
    for values in ([1.0, 2.0, 3.0], [-1.0, -2.0, 0.5]):
        x_s = hf.tensor(values, dtype=hf.float64, requires_grad=True)
        x_e = hf.tensor(values, dtype=hf.float64, requires_grad=True)
        out_s, out_e = static(x_s), bump_first(x_e)
        np.testing.assert_allclose(out_s.detach().numpy(), out_e.detach().numpy())
        out_s.sum().backward()
        out_e.sum().backward()
        np.testing.assert_allclose(x_s.grad.numpy(), x_e.grad.numpy())
    assert static.cache_info().programs == 1


def test_module_buffer_item_update_in_a_tensor_if_matches_eager():
    eager, converted = Accumulates(), Accumulates()
    static = hf.jit.to_static(converted)
    for values in ([1.0, 2.0], [-1.0, -2.0], [3.0, 1.0]):
        x_s = hf.tensor(values, dtype=hf.float64, requires_grad=True)
        x_e = hf.tensor(values, dtype=hf.float64, requires_grad=True)
        out_s, out_e = static(x_s), eager(x_e)
        np.testing.assert_allclose(out_s.detach().numpy(), out_e.detach().numpy())
        np.testing.assert_allclose(converted.buf.detach().numpy(), eager.buf.detach().numpy())
        out_s.sum().backward()
        out_e.sum().backward()
        np.testing.assert_allclose(x_s.grad.numpy(), x_e.grad.numpy())
        np.testing.assert_allclose(converted.w.grad.numpy(), eager.w.grad.numpy())
