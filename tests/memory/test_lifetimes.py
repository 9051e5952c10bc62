"""Storage lifetimes and ``hf.memory`` accounting.

Every test runs with the cyclic garbage collector disabled: memory must come back through plain
reference counting, the moment the last reference goes (no cycles between tensors and graph
nodes), exactly as API.md's "Settled details" require.
"""
import weakref

import numpy as np
import pytest

import hybridfw as hf

mem = hf.memory


# =============================================================================== basic bytes
def test_zeros_adds_exact_bytes_and_frees_immediately():
    base = mem.allocated()
    x = hf.zeros(1024)
    assert mem.allocated() - base == 4096
    del x
    assert mem.allocated() == base


@pytest.mark.parametrize("dtype, itemsize", [("float32", 4), ("float64", 8), ("float16", 2),
                                             ("int32", 4), ("int64", 8), ("bool", 1)])
def test_bytes_follow_dtype(dtype, itemsize):
    base = mem.allocated()
    x = hf.ones(3, 5, dtype=dtype)
    assert mem.allocated() - base == 15 * itemsize
    del x
    assert mem.allocated() == base


def test_allocated_default_device_is_cpu():
    x = hf.zeros(10)
    assert mem.allocated() == mem.allocated("cpu") == mem.allocated(hf.device("cpu"))
    del x


def test_op_results_add_exact_bytes():
    x = hf.ones(100)
    y = hf.ones(100)
    base = mem.allocated()
    z = x + y
    assert mem.allocated() - base == 400
    w = (x * 2).sum()            # the temporary x*2 is freed, the 0-d sum stays
    assert mem.allocated() - base == 400 + 4
    d = x.to(hf.float64)
    assert mem.allocated() - base == 400 + 4 + 800
    del z, w, d
    assert mem.allocated() == base


def test_tensor_factories_and_python_data():
    base = mem.allocated()
    ts = [hf.tensor([1.0, 2.0, 3.0]), hf.tensor([1, 2]), hf.arange(10), hf.eye(3),
          hf.rand(2, 2), hf.randn(5), hf.randint(0, 5, (4,)), hf.full((2,), True)]
    assert mem.allocated() - base == 12 + 16 + 80 + 36 + 16 + 20 + 32 + 2
    del ts
    assert mem.allocated() == base


def test_from_numpy_counts_the_array():
    a = np.zeros(64, dtype=np.float64)
    base = mem.allocated()
    t = hf.from_numpy(a)
    assert mem.allocated() - base == 512
    del t
    assert mem.allocated() == base


# =============================================================================== views
def test_views_add_nothing():
    x = hf.zeros(4, 256)
    base = mem.allocated()
    one = hf.zeros(1, 256)
    base_one = mem.allocated()
    assert base_one - base == 1024
    views = [
        x.reshape(256, 4), x.view(-1), x.transpose(0, 1), x.T, x.permute(1, 0), x[1:3],
        x[0], x[:, ::2], x[..., 3], x[None], x.unsqueeze(0), x.flatten(), x.detach(),
        one.expand(8, 256), one.broadcast_to((3, 256)), one.squeeze(0), x.narrow(1, 0, 10),
        x.split(2)[0], x.chunk(2, dim=1)[1],
    ]
    assert mem.allocated() == base_one
    del views
    assert mem.allocated() == base_one
    del one
    assert mem.allocated() == base
    del x


def test_view_keeps_storage_alive_after_base_is_dropped():
    base = mem.allocated()
    x = hf.zeros(1024)
    v = x[10:20]
    r = x.reshape(32, 32)
    del x
    assert mem.allocated() - base == 4096      # the whole storage, not just the view's bytes
    del v
    assert mem.allocated() - base == 4096
    del r
    assert mem.allocated() == base


def test_detach_of_graph_output_adds_nothing():
    w = hf.ones(8, 8, requires_grad=True)
    y = w * 2
    base = mem.allocated()
    d = y.detach()
    assert mem.allocated() == base
    del d, y
    del w


def test_copies_add_bytes():
    x = hf.zeros(4, 256)
    base = mem.allocated()
    c = x.clone()
    assert mem.allocated() - base == 4096
    t = x.T.contiguous()
    assert mem.allocated() - base == 8192
    a = x[hf.tensor([0, 2])]                    # advanced indexing copies
    assert mem.allocated() - base == 8192 + 2048
    del c, t, a
    assert mem.allocated() == base


def test_inplace_ops_add_nothing():
    x = hf.zeros(256)
    y = hf.ones(256)
    base = mem.allocated()
    x.add_(1)
    x.mul_(y)
    x.zero_()
    x.fill_(2.0)
    x[3:7] = 5.0
    x.copy_(y)
    assert mem.allocated() == base
    i = hf.zeros(256, dtype="int64")
    base = mem.allocated()
    i.copy_(y)                                 # a temporary cast, freed at once
    assert mem.allocated() == base


# =============================================================================== training
def _params(seed=0):
    hf.manual_seed(seed)
    W1 = (hf.randn(8, 16) * 0.3).requires_grad_()
    b1 = hf.zeros(16).requires_grad_()
    W2 = (hf.randn(16, 4) * 0.3).requires_grad_()
    b2 = hf.zeros(4).requires_grad_()
    return [W1, b1, W2, b2]


def _loss(params, X, T):
    W1, b1, W2, b2 = params
    h = (X @ W1 + b1).relu()
    h2 = h.tanh() * h.sigmoid()
    out = h2 @ W2 + b2
    return ((out - T) ** 2).mean()


def _data():
    hf.manual_seed(1)
    return hf.randn(32, 8), hf.randn(32, 4)


def test_after_backward_only_params_and_grads_remain():
    X, T = _data()
    params = _params()
    param_bytes = sum(p.nbytes for p in params)
    assert param_bytes == 4 * (8 * 16 + 16 + 16 * 4 + 4)
    base = mem.allocated()
    loss = _loss(params, X, T)
    loss.backward()
    del loss
    assert mem.allocated() - base == param_bytes          # exactly one grad per parameter
    for p in params:
        assert p.grad.shape == p.shape and p.grad.dtype is p.dtype
    # more iterations: grads accumulate in place, nothing grows
    for _ in range(3):
        loss = _loss(params, X, T)
        loss.backward()
        del loss
        assert mem.allocated() - base == param_bytes
    # an SGD-like update in place changes nothing either
    with hf.no_grad():
        for p in params:
            p.sub_(p.grad * 0.1)
            p.grad = None
    assert mem.allocated() == base


def test_saved_tensors_are_released_by_backward():
    X, T = _data()
    params = _params()
    param_bytes = sum(p.nbytes for p in params)
    base = mem.allocated()
    loss = _loss(params, X, T)
    with_graph = mem.allocated()
    assert with_graph - base > 32 * 16 * 4         # activations are held for backward
    loss.backward()
    # the graph is freed while the loss is still alive: only the grads and the loss remain
    assert mem.allocated() - base == param_bytes + loss.nbytes
    assert mem.allocated() < with_graph
    del loss
    assert mem.allocated() - base == param_bytes


def test_retain_graph_keeps_saved_tensors():
    X, T = _data()
    params = _params()
    param_bytes = sum(p.nbytes for p in params)
    base = mem.allocated()
    loss = _loss(params, X, T)
    with_graph = mem.allocated()
    loss.backward(retain_graph=True)
    assert mem.allocated() == with_graph + param_bytes
    loss.backward(retain_graph=True)               # accumulation in place: no growth
    assert mem.allocated() == with_graph + param_bytes
    loss.backward()                                 # last one frees the graph
    assert mem.allocated() - base == param_bytes + loss.nbytes
    del loss
    assert mem.allocated() - base == param_bytes


def test_dropping_loss_without_backward_frees_everything():
    X, T = _data()
    params = _params()
    base = mem.allocated()
    loss = _loss(params, X, T)
    assert mem.allocated() > base
    del loss
    assert mem.allocated() == base


def test_autograd_grad_does_not_leak():
    X, T = _data()
    params = _params()
    base = mem.allocated()
    grads = hf.autograd.grad(_loss(params, X, T), params)
    assert mem.allocated() - base == sum(g.nbytes for g in grads)
    assert all(p.grad is None for p in params)
    del grads
    assert mem.allocated() == base


def test_double_backward_graph_is_freed():
    x = hf.randn(64).requires_grad_()
    base = mem.allocated()
    (g,) = hf.autograd.grad((x ** 3).sum(), [x], create_graph=True)
    (h,) = hf.autograd.grad(g.sum(), [x])
    del g
    assert mem.allocated() - base == h.nbytes
    del h
    assert mem.allocated() == base


def test_dropping_a_leaf_frees_its_grad():
    base = mem.allocated()
    w = hf.ones(100, requires_grad=True)
    (w * w).sum().backward()
    assert mem.allocated() - base == 800
    del w
    assert mem.allocated() == base


# =============================================================================== peak and stats
def test_peak_and_reset_peak():
    mem.reset_peak()
    base = mem.allocated()
    assert mem.peak() == base
    a = hf.zeros(1000)
    b = hf.zeros(500)
    del a
    c = hf.zeros(250)
    del b, c
    assert mem.allocated() == base
    assert mem.peak() - base == 6000
    mem.reset_peak()
    assert mem.peak() == mem.allocated() == base
    d = hf.zeros(10)
    assert mem.peak() - base == 40
    del d
    assert mem.peak() - base == 40


def test_peak_sees_temporaries_inside_an_expression():
    x = hf.ones(1000)
    mem.reset_peak()
    base = mem.allocated()
    y = (x * 2) + 1          # x*2 and y are alive together for a moment
    assert mem.peak() - base == 8000
    assert mem.allocated() - base == 4000
    del y


def test_stats_keys_and_consistency():
    mem.reset_peak()
    s0 = mem.stats()
    for key in ("allocated_bytes", "peak_bytes", "allocation_count", "largest_block_bytes"):
        assert key in s0
        assert isinstance(s0[key], int)
    assert s0["allocated_bytes"] == mem.allocated()
    assert s0["peak_bytes"] == mem.peak()
    x = hf.zeros(1024)
    v = x.reshape(32, 32)
    s1 = mem.stats()
    assert s1["allocated_bytes"] - s0["allocated_bytes"] == 4096
    assert s1["allocation_count"] - s0["allocation_count"] == 1     # the view allocates nothing
    assert s1["largest_block_bytes"] >= 4096
    assert s1["peak_bytes"] >= s1["allocated_bytes"]
    del x, v
    s2 = mem.stats()
    assert s2["allocated_bytes"] == s0["allocated_bytes"]
    assert s2["peak_bytes"] == s1["peak_bytes"]
    assert mem.stats("cpu")["allocated_bytes"] == mem.allocated("cpu")


# =============================================================================== no cycles
def test_intermediate_dies_with_output():
    x = hf.randn(16).requires_grad_()
    base = mem.allocated()

    def f(x):
        h = x.exp()
        k = h.sin()                  # sin saves h
        return (k * k).sum(), weakref.ref(h), weakref.ref(k)

    out, wh, wk = f(x)
    assert wh() is not None and wk() is not None      # kept for backward
    node_ref = weakref.ref(out.grad_fn)
    del out
    assert wh() is None and wk() is None
    assert node_ref() is None
    assert mem.allocated() == base


def test_intermediate_released_by_backward_while_output_lives():
    x = hf.randn(16).requires_grad_()

    def f(x):
        h = x.sin()
        return (h * h).sum(), weakref.ref(h)

    out, wh = f(x)
    assert wh() is not None
    out.backward()
    assert wh() is None
    assert out.item() == pytest.approx(float((np.sin(x.detach().numpy()) ** 2).sum()), rel=1e-5)


def test_leaf_and_grad_die_without_gc():
    w = hf.ones(4, requires_grad=True)
    y = (w * w).sum()
    y.backward()
    ww, wg = weakref.ref(w), weakref.ref(w.grad)
    del w
    assert ww() is not None      # the graph of y still refers to its leaf, as in PyTorch
    del y
    assert ww() is None and wg() is None


def test_inplace_on_nonleaf_leaves_no_cycle():
    x = hf.ones(256, requires_grad=True)
    base = mem.allocated()
    y = x * 2
    y.add_(1)
    y.mul_(3)
    wy = weakref.ref(y)
    del y
    assert wy() is None
    assert mem.allocated() == base


def test_setitem_on_nonleaf_leaves_no_cycle():
    x = hf.ones(256, requires_grad=True)
    base = mem.allocated()
    y = x * 2
    y[3:9] = x[0:6] * 5
    wy = weakref.ref(y)
    del y
    assert wy() is None
    assert mem.allocated() == base


def test_create_graph_grad_leaves_no_cycle():
    x = hf.ones(64, requires_grad=True)
    base = mem.allocated()
    (x ** 2).sum().backward(create_graph=True)       # x.grad has a graph back to x
    wg = weakref.ref(x.grad)
    x.grad = None
    assert wg() is None
    assert mem.allocated() == base


def test_activations_of_a_forward_that_raised_live_as_long_as_its_exception():
    model = hf.nn.Sequential(hf.nn.Linear(100, 100), hf.nn.ReLU(), hf.nn.Linear(50, 2))
    before = mem.allocated()
    try:
        model(hf.randn(64, 100))
    except ValueError:
        pass
    assert mem.allocated() == before  # Python dropped the traceback at the end of the block
    kept = None
    try:
        model(hf.randn(64, 100))
    except ValueError as e:
        kept = e
    assert mem.allocated() - before >= 2 * 64 * 100 * 4  # the input and first activation
    del kept
    assert mem.allocated() == before


def test_cuda_figures_without_a_gpu_are_zeros_for_every_query():
    """On a machine without CUDA, ``stats('cuda')`` raised (it asked cupy for its pool) while
    ``allocated``/``peak`` gave 0; each now reports zeros."""
    if hf.cuda.is_available():
        pytest.skip("a GPU is visible: the CUDA figures are real")
    assert hf.memory.allocated("cuda") == 0 and hf.memory.peak("cuda") == 0
    hf.memory.reset_peak("cuda")
    stats = hf.memory.stats("cuda")
    assert stats["device"] == "cuda:0"
    assert all(v == 0 for k, v in stats.items() if k != "device")
