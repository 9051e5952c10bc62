"""``hf.memory`` counts what static programs hold: the executor's arena (while its compiled plan
is cached) and the values a to_static forward leaves for its backward (until backward frees
them). Inputs and outputs the backward reads are shared with the caller's tensors, not copied,
and changing them in place before backward is an error, as in eager autograd."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn

mem = hf.memory


def test_the_executor_arena_is_counted_while_its_plan_is_cached():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [64, 64])
        y = ((x * 2.0).exp() + x).tanh().sum()
    exe = hf.static.Executor()
    feed = {"x": np.ones((64, 64), np.float32)}
    base = mem.allocated()
    exe.run(prog, feed=feed, fetch_list=[y])
    compiled = exe.compile(prog, feed=feed, fetch_list=[y])
    arena = compiled.arena.nbytes
    assert arena >= 64 * 64 * 4             # at least one (64, 64) intermediate lives there
    assert mem.allocated() - base == arena  # the fetched scalar is a numpy array, not a tensor
    exe.clear_cache()
    del compiled
    assert mem.allocated() == base


class _Chain(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 32)
        self.b = nn.Linear(32, 32)

    def forward(self, x):
        return self.b(self.a(x).relu()).tanh()


def _step_figures(model, x):
    """(allocated after forward, after backward) above the level before the forward."""
    base = mem.allocated()
    out = model(x)
    after_forward = mem.allocated() - base
    out.sum().backward()
    del out
    return after_forward, mem.allocated() - base


def test_saved_values_are_counted_until_backward_frees_them():
    hf.manual_seed(0)
    eager = _Chain()
    static = hf.jit.to_static(_Chain())
    static.load_state_dict(eager.state_dict())
    x = hf.randn(16, 32)
    for m in (eager, static):          # warm up: trace, compile, and create the .grad tensors
        m(x).sum().backward()
    entry = static.forward._last
    storages = {id(c.storage): c.storage.nbytes for c in entry.executor._cache.values()}
    assert len(storages) == 1  # the forward and backward plans share one arena
    arenas = sum(storages.values())
    fwd_eager, bwd_eager = _step_figures(eager, x)
    fwd_static, bwd_static = _step_figures(static, x)
    act = 16 * 32 * 4
    # eager keeps relu(a(x)) (shared by relu's and b's backward) and the tanh output; the
    # static forward keeps the same values; both free them in backward (the grads are added
    # in place into the existing .grad tensors)
    assert fwd_eager >= 2 * act
    assert fwd_static == fwd_eager, (fwd_static, fwd_eager)
    assert bwd_static == bwd_eager == 0
    assert arenas > 0 and mem.allocated() >= arenas


def test_an_input_the_backward_reads_is_shared_not_copied_and_guarded():
    lin = nn.Linear(256, 256)

    @hf.jit.to_static
    def f(x):
        return lin(x).sum()

    x = hf.randn(128, 256)
    f(x).backward()                         # warm-up
    base = mem.allocated()
    loss = f(x)
    # the backward needs x (for the weight gradient) and nothing else: holding x itself adds
    # nothing, a copy would add 128 KiB
    assert mem.allocated() - base < 128 * 256 * 4
    x.add_(1.0)
    with pytest.raises(RuntimeError, match="input 0 .*modified in place"):
        loss.backward()


def test_an_output_the_backward_reads_is_guarded():
    @hf.jit.to_static
    def f(x):
        return (x * 3.0).exp()

    x = hf.randn(8, requires_grad=True)
    y = f(x)
    expected = 3.0 * y.detach().numpy()
    (y * 1.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)
    y = f(x)
    y.mul_(2.0)
    with pytest.raises(RuntimeError, match="output 0 .*modified in place"):
        y.sum().backward()


def _elementwise_chain(x):
    y = x * 2.0 + 1.0
    return (y.exp() * y).tanh().sum()


@pytest.mark.parametrize("calls", [1, 3])
def test_dropping_a_converted_function_frees_its_arena_at_once(calls):
    """As the contract says for tensors: freed when the last reference goes, with no
    gc.collect() (the fast caller held its program in a reference cycle)."""
    import gc
    gc.collect()
    gc.disable()
    try:
        base = mem.allocated()
        f = hf.jit.to_static(_elementwise_chain)
        x = hf.randn(1000)
        for _ in range(calls):
            f(x)
        assert mem.allocated() - base >= 1000 * 4 + x.numel() * 4  # input and arena
        del f
        assert mem.allocated() - base == 1000 * 4  # x alone
    finally:
        gc.enable()


def test_memory_plan_figures_of_a_converted_function_and_module():
    """f.memory_plan(*inputs): the figures of the program those inputs run; a (32, 8) batch
    through Linear(8, 16) -> ReLU -> Linear(16, 4): the hidden (32, 16) float32 values (2048 B
    each) are what the arena holds, the output is fetched (heap)."""
    model = hf.jit.to_static(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)))
    with hf.no_grad():
        plan = model.memory_plan(hf.jit.InputSpec([32, 8]))
    assert plan.naive_bytes >= plan.arena_bytes >= plan.lower_bound_bytes >= 32 * 16 * 4
    assert plan.arena_bytes % 64 == 0 and plan.arena_bytes <= 2 * 32 * 16 * 4
    f = hf.jit.to_static(_elementwise_chain)
    x = hf.randn(1000)
    plan = f.memory_plan(x)
    assert plan.arena_bytes >= 1000 * 4 and "arena" in str(plan)
    assert f.cache_info().misses == 1
    f(x)
    assert f.cache_info().misses == 1  # the call runs the program the plan was made for


def test_a_converted_module_is_freed_when_dropped_after_training():
    """to_static(module) stores the converted forward on the module: it holds the module
    weakly, and programs hold their blocks and generated functions without cycles, so a
    trained model, its optimizer and its programs go at once (no gc.collect())."""
    import gc
    gc.collect()
    gc.disable()
    try:
        base = mem.allocated()
        model = hf.jit.to_static(nn.Sequential(nn.Linear(20, 20), nn.ReLU(), nn.Linear(20, 3)))
        opt = hf.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(3):
            opt.zero_grad()
            loss = model(hf.randn(4, 20)).sum()
            loss.backward()
            opt.step()
        model.eval()
        with hf.no_grad():
            model(hf.randn(4, 20))
        assert mem.allocated() > base
        del model, opt, loss
        assert mem.allocated() == base
    finally:
        gc.enable()


class _Deep(nn.Module):
    def __init__(self, width=256, depth=6):
        super().__init__()
        self.layers = nn.Sequential(*[m for _ in range(depth)
                                      for m in (nn.Linear(width, width), nn.ReLU())])

    def forward(self, x):
        return self.layers(x)


def _backward_peaks(model, x):
    """(hf.memory peak, tracemalloc peak) of one backward, above the level before it."""
    import tracemalloc
    loss = model(x).sum()
    for p in model.parameters():
        p.grad = None
    mem.reset_peak()
    base = mem.allocated()
    tracemalloc.reset_peak()
    real_base = tracemalloc.get_traced_memory()[0]
    loss.backward()
    return mem.peak() - base, tracemalloc.get_traced_memory()[1] - real_base


def test_the_backward_drops_saved_values_as_it_goes_no_more_than_eager():
    """The forward's saved activations go to the backward program, which drops each after its
    last use (and hf.memory stops counting it), as eager autograd frees them node by node: the
    backward's peak is no higher than eager's. Before, every saved value stayed alive (and
    counted) until the last weight gradient was made: 6 activations above eager here."""
    import tracemalloc
    hf.manual_seed(0)
    eager = _Deep()
    static = hf.jit.to_static(_Deep())
    static.load_state_dict(eager.state_dict())
    x = hf.randn(128, 256)
    activation = 128 * 256 * 4
    tracemalloc.start()
    try:
        for m in (eager, static, eager, static):  # warm up: trace and compile
            _backward_peaks(m, x)
        eager_peak, eager_real = _backward_peaks(eager, x)
        static_peak, static_real = _backward_peaks(static, x)
    finally:
        tracemalloc.stop()
    weight_grads = 6 * (256 * 256 + 256) * 4
    # (the level before includes the saved activations eager frees while it makes the grads)
    assert weight_grads - 6 * activation <= eager_peak
    assert static_peak <= eager_peak, (static_peak, eager_peak)
    # the arrays really are freed, not only uncounted (half an activation of slack for
    # numpy's own small allocations)
    assert static_real <= eager_real + activation // 2, (static_real, eager_real)


def test_retain_graph_keeps_the_saved_values_for_a_second_backward():
    hf.manual_seed(0)
    eager = _Deep(32, 3)
    static = hf.jit.to_static(_Deep(32, 3))
    static.load_state_dict(eager.state_dict())
    x = hf.randn(8, 32)
    grads = []
    for m in (eager, static):
        m(x).sum().backward()  # (warm up)
        for p in m.parameters():
            p.grad = None
        loss = (m(x) ** 2).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        grads.append([p.grad.numpy().copy() for p in m.parameters()])
        with pytest.raises(RuntimeError):
            loss.backward()  # freed by the second one, as in eager
    for e, s in zip(*grads):
        np.testing.assert_allclose(s, e, rtol=1e-5, atol=1e-6)
    # and hf.autograd.grad with and without retain_graph
    loss = (static(x) ** 2).sum()
    params = list(static.parameters())
    first = hf.autograd.grad(loss, params, retain_graph=True)
    second = hf.autograd.grad(loss, params)
    for a, b, e in zip(first, second, grads[0]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
        np.testing.assert_allclose(2 * a.numpy(), e, rtol=1e-5, atol=1e-6)


def test_a_program_with_donated_inputs_runs_as_before_and_drops_them_early():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [64, 64])
        w = hf.static.data("w", [64, 64])
        h = (x @ w).tanh()
        y = (h * 3.0).exp().sum()
    feed = {"x": np.full((64, 64), 0.01, np.float32), "w": np.eye(64, dtype=np.float32)}
    expected = hf.static.Executor().run(prog, feed=feed, fetch_list=[y], return_numpy=True)
    prog.donated = frozenset({"x"})
    exe = hf.static.Executor()
    got = exe.run(prog, feed=feed, fetch_list=[y], return_numpy=True)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
    np.testing.assert_allclose(got[0], 64 * 64 * np.exp(3 * np.tanh(0.01 * 1.0)), rtol=1e-5)
    compiled = exe.compile(prog, feed=feed, fetch_list=[y])
    source = compiled.source
    assert "def run_plan(_inputs):" in source and "_inputs.clear()" in source
    lines = source.splitlines()
    # x is dropped right after the product, its only use; w (not donated) is not
    product = next(i for i, line in enumerate(lines) if "_matmul(" in line)
    assert lines[product + 1].strip() == "del x"
    assert not any(line.strip().startswith("del") and "w" in line for line in lines)
    # the plan empties the list it was given: the caller's list no longer holds the arrays
    import sys
    x_array = feed["x"].copy()
    arrays = [x_array, feed["w"]]
    held = sys.getrefcount(x_array)
    compiled(arrays)
    assert arrays == [] and sys.getrefcount(x_array) == held - 1


def _compiled_plans(entry):
    """The executor's compiled plans of ``entry``'s forward and backward programs."""
    plans = {}
    for compiled in entry.executor._cache.values():
        if compiled.program is entry.program:
            plans["forward"] = compiled.memory
        elif compiled.program is entry.backward_program:
            plans["backward"] = compiled.memory
    return plans


def test_memory_plan_of_a_training_call_is_the_plan_its_forward_and_backward_run():
    """With gradients wanted, the call's forward also fetches the values its backward reads
    (they live until backward, on the heap): f.memory_plan(x) planned them as arena
    intermediates freed early (a 4-layer MLP: arena 256 KiB, the run's 128 KiB). Its
    ``backward`` is the backward program's plan."""
    hf.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.Tanh(), nn.Linear(512, 512), nn.Tanh(),
                          nn.Linear(512, 512), nn.Tanh(), nn.Linear(512, 10))
    f = hf.jit.to_static(model, backend="interpreted")
    x = hf.randn(64, 256)
    plan = f.memory_plan(x)
    f(x).sum().backward()
    entry = f.forward._last
    ran = _compiled_plans(entry)
    assert plan.arena_bytes == ran["forward"].arena_bytes
    assert set(plan.heap) == set(ran["forward"].heap)
    assert set(entry.saved_names) - set(entry.feed_names) <= set(plan.heap)
    assert plan.backward.arena_bytes == ran["backward"].arena_bytes
    assert plan.backward.lower_bound_bytes <= plan.backward.arena_bytes <= \
        plan.backward.naive_bytes
    with hf.no_grad():
        inference = f.memory_plan(x)
    assert inference.backward is None


def test_hf_memory_during_a_training_step_is_what_the_plan_says():
    """Between steps: parameters + grads + Adam's two moments + the inputs + the one arena
    (the larger of the forward's and the backward's); after the forward: the values the plan
    fetches (results and the values the backward reads) on top."""
    import gc
    from hybridfw.nn import functional as F
    gc.collect()
    base = mem.allocated()
    hf.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh(),
                          nn.Linear(128, 10))
    f = hf.jit.to_static(model, backend="interpreted")
    x, y = hf.randn(32, 64), hf.randint(0, 10, (32,))
    opt = hf.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        opt.zero_grad()
        F.cross_entropy(f(x), y).backward()
        opt.step()
    plan = f.memory_plan(x)
    params = sum(p.numel() * 4 for p in model.parameters())
    arena = max(plan.arena_bytes, plan.backward.arena_bytes)
    assert mem.allocated() - base == 4 * params + arena + 32 * 64 * 4 + 32 * 8
    opt.zero_grad()
    before = mem.allocated()
    out = f(x)
    fetched = sum(plan.nbytes(n) for n, why in plan.heap.items() if why == "fetch target")
    assert mem.allocated() - before == fetched == 2 * 32 * 128 * 4 + out.numel() * 4
