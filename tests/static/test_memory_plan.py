"""The arena planner: exact figures on small programs, quality on the benchmark programs."""
import itertools

import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.static.memory_plan import plan_arena, resolve_shapes


def _assert_valid(plan):
    """No two planned values live at the same time share a byte; all offsets aligned."""
    live = plan.liveness
    ends = {}
    for name in plan.offsets:
        ends[name] = max([live.last_use[name]] + [live.last_use[v] for v, root in
                                                  plan.aliases.items() if root == name])
    for a, b in itertools.combinations(plan.offsets, 2):
        assert plan.offsets[a] % plan.alignment == 0
        if plan.buffer_of[a] == plan.buffer_of[b]:
            continue
        overlap_in_time = live.definition[a] <= ends[b] and live.definition[b] <= ends[a]
        lo_a, lo_b = plan.offsets[a], plan.offsets[b]
        overlap_in_memory = lo_a < lo_b + plan.nbytes(b) and lo_b < lo_a + plan.nbytes(a)
        assert not (overlap_in_time and overlap_in_memory and plan.nbytes(a) and plan.nbytes(b)), \
            (a, b)
    assert plan.lower_bound_bytes <= plan.arena_bytes <= plan.naive_bytes


def _chain(n=256):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, n])
        y = ((x * 2.0 + 1.0).relu() * 3.0).sum()
    return prog, y


# ---- exact figures ------------------------------------------------------------------------
def test_exact_figures_of_a_small_chain():
    prog, y = _chain()
    plan = plan_arena(prog, {"x": (8, 256)}, [y.name])
    # four 8 KiB intermediates, two live at a time; the fetched sum is on the heap
    assert (plan.arena_bytes, plan.lower_bound_bytes, plan.naive_bytes) == (16384, 16384, 32768)
    assert sorted(set(plan.offsets.values())) == [0, 8192]
    assert plan.heap == {"x": "input", y.name: "fetch target"}
    _assert_valid(plan)


def test_sizes_are_aligned_to_64_bytes():
    prog, y = _chain(3)
    plan = plan_arena(prog, {"x": (1, 3)}, [y.name])  # 12-byte values take 64 bytes each
    assert (plan.arena_bytes, plan.lower_bound_bytes, plan.naive_bytes) == (128, 128, 256)
    assert plan_arena(prog, {"x": (1, 3)}, [y.name], alignment=256).arena_bytes == 512


def test_best_fit_reuses_the_smallest_gap_that_fits():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [1024])
        big = x * 2.0                  # 4 KiB, dies at op 1
        small = big[:256] * 3.0        # view of big, then 1 KiB
        keep = x * 5.0                 # 4 KiB, read at the end
        s = (small[:16] + keep[:16])   # both live here
    plan = plan_arena(prog, {"x": (1024,)}, [s.name])
    _assert_valid(plan)
    assert plan.aliases[prog.global_block().ops[1].outputs[0]] == big.name
    assert plan.arena_bytes == plan.lower_bound_bytes


def test_views_keep_the_value_they_view_alive():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [64])
        a = x * 2.0
        v = a.reshape(8, 8)       # a's memory, read at the end
        b = x + 1.0
        c = b * 3.0
        out = v.sum() + c.sum()
    plan = plan_arena(prog, {"x": (64,)}, [out.name])
    assert v.name in plan.aliases and v.name not in plan.offsets
    assert plan.buffer_end[a.name] == plan.liveness.last_use[v.name]
    assert plan.offsets[a.name] not in (plan.offsets[b.name], plan.offsets[c.name])
    _assert_valid(plan)


def test_heap_values_and_their_reasons():
    lin = nn.Linear(4, 4)
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, 4])
        y = lin(x)
        masked = y[y > 0]              # data-dependent size: a view of y (getitem)
        doubled = masked * 2.0         # ... and so is everything computed from it
        z = y.relu()
    plan = plan_arena(prog, {"x": (5, 4)}, [doubled.name, z.name])
    assert plan.heap[x.name] == "input"
    assert all(plan.heap[p] == "parameter" for p in prog.params)
    assert plan.heap[z.name] == "fetch target"
    assert plan.heap[doubled.name] == "size known only at run time"
    assert plan.aliases[masked.name] == y.name
    assert plan.buffer_end[y.name] >= plan.liveness.last_use[masked.name]
    forced = plan_arena(prog, {"x": (5, 4)}, [doubled.name, z.name], heap=[y.name])
    assert forced.heap[y.name] == "kept on the heap by the caller"


def test_control_flow_outputs_and_what_they_read_stay_on_the_heap():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [4])
        a = x * 2.0
        (y,) = hf.static.nn.while_loop(lambda v: v.sum() < 100.0, lambda v: [v * 2.0 + 1.0],
                                       [a])
        z = y * 3.0 + 1.0
    plan = plan_arena(prog, {"x": (4,)}, [z.name])
    assert plan.heap[y.name] == "control-flow output"
    assert plan.heap[a.name] == "read by a control-flow operator"
    assert len(plan.offsets) == 1  # only y * 3.0
    _assert_valid(plan)


def test_resolved_shapes_follow_the_feed_shapes():
    prog, y = _chain()
    metas, infos = resolve_shapes(prog, {"x": (3, 256)})
    assert metas[prog.global_block().ops[0].outputs[0]].shape == (3, 256)
    assert metas[y.name].shape == () and infos[0][0] == (3, 256)


def test_planner_errors_are_clear():
    prog, y = _chain()
    with pytest.raises(ValueError, match=r"declared with shape \(-1, 256\), got \(8, 3\)"):
        plan_arena(prog, {"x": (8, 3)}, [y.name])
    with pytest.raises(ValueError, match="not inputs of the program"):
        plan_arena(prog, {"nope": (1,)}, [y.name])
    with pytest.raises(KeyError, match="fetch target 'nope'"):
        plan_arena(prog, {"x": (8, 256)}, ["nope"])
    with pytest.raises(ValueError, match="power of two"):
        plan_arena(prog, {"x": (8, 256)}, [y.name], alignment=48)


# ---- in place -----------------------------------------------------------------------------
def _elementwise_chain(k=32, n=1024):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [n])
        values = [x * 1.5]
        for i in range(k - 1):
            values.append(values[-1] * 0.5 + 1.0 if i % 2 else values[-1].tanh())
        out = values[-1].sum()
    return prog, out


def _all_inplace(prog):
    """What an in-place pass records: each elementwise output may reuse its first input."""
    block = prog.global_block()
    return {op.outputs[0]: op.inputs[0] for op in block.ops
            if op.type in ("mul", "add", "tanh") and isinstance(op.inputs[0], str)
            and op.inputs[0] not in prog.feeds}


def test_inplace_pairs_are_honoured_when_the_input_dies_there():
    prog, out = _elementwise_chain()
    before = plan_arena(prog, {"x": (1024,)}, [out.name])
    prog.inplace = _all_inplace(prog)
    after = plan_arena(prog, {"x": (1024,)}, [out.name])
    assert before.arena_bytes == 2 * 4096
    assert after.arena_bytes == 4096  # G3: a chain of k elementwise ops needs <= 2x size(x)
    assert len(after.inplace) == len(prog.inplace) and len(after.buffer_end) == 1
    _assert_valid(after)


def test_inplace_is_refused_when_the_input_has_a_later_reader_or_another_shape():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [16])
        a = x * 2.0
        b = a + 1.0        # may not reuse a: a is read again below
        c = b + a
        d = c.sum(dim=0, keepdim=True) + 0.0
        e = d * c          # 1-element d, 16-element e: different shapes
        f = e.reshape(4, 4) * 1.0
        g = f + f.T        # another input views f's memory
        h = g * 1.0
        k = h + h          # the same value twice is fine
        out = k.sum()
    prog.inplace = {b.name: a.name, e.name: d.name, g.name: f.name, k.name: h.name}
    plan = plan_arena(prog, {"x": (16,)}, [out.name])
    assert plan.inplace == {k.name: h.name}


# ---- quality on the benchmark programs ----------------------------------------------------
def _mlp(dims, batch, train):
    layers = []
    for i in range(len(dims) - 1):
        layers += [nn.Linear(dims[i], dims[i + 1]), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, dims[0]])
        fetch = [model(x)]
        if train:
            t = hf.static.data("t", [None], "int64")
            loss = nn.functional.cross_entropy(fetch[0], t)
            fetch = [loss] + hf.static.gradients(loss, list(model.parameters()))
    return prog, {"x": (batch, dims[0]), "t": (batch,)} if train else {"x": (batch, dims[0])}, \
        fetch


def _cnn(batch, train):
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(16 * 7 * 7, 10))
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, 1, 28, 28])
        fetch = [model(x)]
        if train:
            t = hf.static.data("t", [None], "int64")
            loss = nn.functional.cross_entropy(fetch[0], t)
            fetch = [loss] + hf.static.gradients(loss, list(model.parameters()))
    shapes = {"x": (batch, 1, 28, 28)}
    if train:
        shapes["t"] = (batch,)
    return prog, shapes, fetch


def _lstm(steps, train, batch=32, inputs=64, hidden=128):
    w_ih = (hf.randn(4 * hidden, inputs) * 0.1).requires_grad_()
    w_hh = (hf.randn(4 * hidden, hidden) * 0.1).requires_grad_()
    bias = hf.zeros(4 * hidden, requires_grad=True)
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        xs = hf.static.data("xs", [steps, batch, inputs])
        h = c = hf.zeros(batch, hidden)
        for s in range(steps):
            i, f, g, o = (xs[s] @ w_ih.T + h @ w_hh.T + bias).chunk(4, 1)
            c = f.sigmoid() * c + i.sigmoid() * g.tanh()
            h = o.sigmoid() * c.tanh()
        loss = (h * h).mean()
        fetch = [loss] + (hf.static.gradients(loss, [w_ih, w_hh, bias]) if train else [])
    return prog, {"xs": (steps, batch, inputs)}, fetch


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("build", [
    lambda train: _mlp((784, 512, 512, 10), 128, train),
    lambda train: _cnn(16, train),
    lambda train: _lstm(8, train),
], ids=["mlp", "cnn", "lstm"])
def test_arena_is_within_10_percent_of_the_lower_bound(build, train):
    hf.manual_seed(0)
    prog, shapes, fetch = build(train)
    plan = plan_arena(prog, shapes, fetch)
    assert plan.arena_bytes <= 1.10 * plan.lower_bound_bytes, plan.summary()
    _assert_valid(plan)


def test_sharing_gain_on_a_32_layer_mlp_is_at_least_5x():
    hf.manual_seed(0)
    prog, shapes, fetch = _mlp((256,) * 33, 64, train=False)
    plan = plan_arena(prog, shapes, fetch)
    assert plan.naive_bytes >= 5 * plan.arena_bytes, plan.summary()
    assert plan.arena_bytes == plan.lower_bound_bytes


def test_repeated_inferences_are_shared_only_between_equal_numbers_and_types():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [-1, 3], "int32")
        names = [(x * 2).name, (x * 2.0).name, (x * 2).name, (x * True).name, (x * 2.0).name]
    metas, _ = resolve_shapes(prog, {"x": (4, 3)})
    assert [metas[n].dtype.name for n in names] == \
        ["int32", "float32", "int32", "int32", "float32"]
    assert all(metas[n].shape == (4, 3) for n in names)
