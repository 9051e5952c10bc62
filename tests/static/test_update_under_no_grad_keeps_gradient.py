"""An in-place update under hf.no_grad() of a tensor that needs gradients keeps its gradient
path in static programs, as in eager code: later uses send their gradient to the tensor (the
program's value was a no-grad value, so the gradient was None -- Embedding(max_norm=...) under
to_static trained no weights)."""
import numpy as np

import hybridfw as hf
import hybridfw.nn.functional as F

IDS = [[1, 5], [0, 2]]
# every looked-up row gets a gradient of ones; rows 3 and 4 are not looked up
EXPECTED_GRAD = np.array([[1.0] * 3] * 3 + [[0.0] * 3] * 2 + [[1.0] * 3])


def _weights():
    return np.random.RandomState(0).randn(6, 3).astype(np.float32)


def _lookup(ids, weight):
    return F.embedding(ids, weight, max_norm=1.0)


def _scaled_product(x, w):
    with hf.no_grad():
        w.mul_(2.0)
    return x * w


def test_embedding_max_norm_argument_under_to_static():
    results = []
    for fn in (_lookup, hf.jit.to_static(_lookup)):
        w = hf.tensor(_weights(), requires_grad=True)
        out = fn(hf.tensor(IDS), w)
        out.sum().backward()
        results.append((out.detach().numpy(), w.detach().numpy(), w.grad.numpy()))
        np.testing.assert_array_equal(w.grad.numpy(), EXPECTED_GRAD)
    for eager, static in zip(*results):
        np.testing.assert_allclose(static, eager, rtol=1e-6)
    norms = np.linalg.norm(results[1][1][[0, 1, 2, 5]], axis=1)
    assert (norms <= 1.0 + 1e-6).all()  # the rows looked up were renormalized in place


def test_embedding_module_with_max_norm_under_to_static_trains_its_weight():
    hf.manual_seed(0)
    eager = hf.nn.Embedding(6, 3, max_norm=1.0)
    static = hf.jit.to_static(hf.nn.Embedding(6, 3, max_norm=1.0))
    static.load_state_dict(eager.state_dict())
    for module in (eager, static):
        for _ in range(2):  # the cached program too
            module.weight.grad = None
            module(hf.tensor(IDS)).sum().backward()
            np.testing.assert_array_equal(module.weight.grad.numpy(), EXPECTED_GRAD)
    np.testing.assert_allclose(static.weight.detach().numpy(), eager.weight.detach().numpy(),
                               rtol=1e-6)


def test_argument_updated_under_no_grad_then_used():
    for fn in (_scaled_product, hf.jit.to_static(_scaled_product)):
        w = hf.tensor([1.0, 2.0], requires_grad=True)
        x = hf.tensor([3.0, 4.0], requires_grad=True)
        fn(x, w).sum().backward()
        np.testing.assert_array_equal(w.grad.numpy(), [3.0, 4.0])
        np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
        np.testing.assert_array_equal(w.detach().numpy(), [2.0, 4.0])


def test_static_gradients_through_a_no_grad_update():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [2])
        y = x * 1.0
        with hf.no_grad():
            y.add_(1.0)
        loss = (y * y).sum()
        gx, = hf.static.gradients(loss, [x])
    got, = hf.static.Executor().run(prog, feed={"x": np.array([1.0, 2.0], np.float32)},
                                    fetch_list=[gx], return_numpy=True)
    np.testing.assert_array_equal(got, [4.0, 6.0])  # 2 * (x + 1)
