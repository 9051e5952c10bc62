"""The static recomputation pass (hybridfw.memory.recompute) and to_static(memory_budget=...)."""
import itertools
import math

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.memory.recompute import _Forward, check_budget, recompute
from hybridfw.static.partition import split_forward_backward
from hybridfw.static.verifier import verify

DEPTH, WIDTH, BATCH = 16, 64, 32
ACTIVATION = BATCH * WIDTH * 4  # bytes of one layer's output


def mlp(depth=DEPTH, width=WIDTH, dropout=0.0, seed=0):
    hf.manual_seed(seed)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
        if dropout:
            layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers)


def train_step(model, x, seed=1):
    """Gradients of one step (parameters in order) and the ConcreteProgram it ran, if any."""
    for p in model.parameters():
        p.grad = None
    hf.manual_seed(seed)
    y = model(x)
    (y * y).mean().backward()
    forward = model.__dict__.get("forward")
    concrete = getattr(forward, "_last", None)
    return [p.grad.numpy().copy() for p in model.parameters()], concrete


def saved_activation_bytes(concrete):
    """Bytes of the arrays the forward run keeps for the backward, program inputs excluded."""
    block = concrete.program.global_block()
    return sum(int(np.prod(block.var(n).shape)) * block.var(n).dtype.itemsize
               for n in concrete.saved_names if n not in concrete.feed_names)


@pytest.fixture(scope="module")
def x():
    hf.manual_seed(123)
    return hf.randn(BATCH, WIDTH)


@pytest.fixture(scope="module")
def eager_and_plain(x):
    eager, _ = train_step(mlp(), x)
    plain, concrete = train_step(hf.jit.to_static(mlp()), x)
    return eager, plain, concrete


def assert_grads_equal(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_sqrt_budget_keeps_about_sqrt_n_values_and_same_gradients(x, eager_and_plain):
    eager, plain, plain_concrete = eager_and_plain
    grads, concrete = train_step(hf.jit.to_static(mlp(), memory_budget="sqrt"), x)
    assert_grads_equal(grads, eager)
    assert_grads_equal(grads, plain)
    report = concrete.recompute_report
    saved = [n for n in concrete.saved_names if n not in concrete.feed_names]
    assert len(saved) <= 2 * math.sqrt(DEPTH)
    assert len(plain_concrete.saved_names) - 1 == DEPTH  # without the pass: every layer's output
    assert saved_activation_bytes(concrete) == report.saved_bytes
    assert report.saved_bytes <= 2 * math.sqrt(DEPTH) * ACTIVATION
    assert report.baseline_saved_bytes == saved_activation_bytes(plain_concrete)
    # about one extra forward: each forward operator recomputed at most once
    assert 0 < report.num_recomputed_ops <= len(concrete.program.global_block().ops)
    assert report.recompute_cost <= report.forward_cost
    assert report.planned_backward_peak_bytes is not None
    assert report.strategy == "sqrt" and report.within_budget


@pytest.mark.parametrize("layers", [1, 3, 6])
def test_byte_budget_is_respected_and_gradients_equal(x, eager_and_plain, layers):
    eager, plain, _ = eager_and_plain
    budget = layers * ACTIVATION
    grads, concrete = train_step(hf.jit.to_static(mlp(), memory_budget=budget), x)
    assert_grads_equal(grads, eager)
    assert_grads_equal(grads, plain)
    report = concrete.recompute_report
    assert report.strategy == "dp"  # an MLP's forward is a chain
    assert report.within_budget
    assert saved_activation_bytes(concrete) == report.saved_bytes <= budget
    assert report.saved_bytes > budget - ACTIVATION  # the budget is used, to one value


def test_smaller_budget_recomputes_more(x):
    costs = []
    for layers in (8, 4, 2, 1):
        _, concrete = train_step(hf.jit.to_static(mlp(), memory_budget=layers * ACTIVATION), x)
        costs.append(concrete.recompute_report.recompute_cost)
    assert costs == sorted(costs)
    assert costs[0] < costs[-1]


@pytest.mark.parametrize("budget", ["sqrt", 8 * ACTIVATION, 0])
def test_dropout_masks_are_not_resampled(x, budget):
    eager, _ = train_step(mlp(depth=6, dropout=0.5), x)
    with pytest.warns(UserWarning, match="below what the backward must keep") if budget == 0 \
            else _no_warning():
        grads, concrete = train_step(hf.jit.to_static(mlp(depth=6, dropout=0.5),
                                                      memory_budget=budget), x)
    assert_grads_equal(grads, eager)
    backward_ops = [op.type for op in concrete.backward_program.global_block().ops]
    assert concrete.recompute_report.num_recomputed_ops > 0
    assert not {"uniform", "bernoulli", "normal", "randint"} & set(backward_ops)


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def chain_program(depth=8):
    """A training program with a chain-shaped forward; returns (program, fetches, seeds)."""
    hf.manual_seed(0)
    weights = [hf.randn(16, 16, requires_grad=True) for _ in range(depth)]
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        h = hf.static.data("x", [8, 16])
        seed = hf.static.data("seed", [])
        for k, w in enumerate(weights):
            h = (h @ w).tanh() if k % 2 else (h @ w).relu() * 0.5
        loss = h.sum()
        grads = hf.static.gradients(loss, weights, target_gradients=[seed])
    return prog, [loss.name], [g.name for g in grads], ["seed"]


def test_dp_is_optimal_and_no_worse_than_greedy_on_a_chain():
    prog, forward_fetch, backward_fetch, seeds = chain_program(depth=5)
    fwd = _Forward(prog, forward_fetch, backward_fetch, seeds, None, None)
    candidates = fwd.candidates()
    unit = 8 * 16 * 4
    for layers in range(6):
        budget = layers * unit
        _, dp = recompute(prog, forward_fetch, backward_fetch, seeds, budget, strategy="dp")
        _, greedy = recompute(prog, forward_fetch, backward_fetch, seeds, budget,
                              strategy="greedy")
        assert dp.strategy == "dp" and greedy.strategy == "greedy"
        assert dp.saved_bytes <= budget and greedy.saved_bytes <= budget
        assert dp.recompute_cost <= greedy.recompute_cost
        best = min(cost for k in range(len(candidates) + 1)
                   for keep in itertools.combinations(candidates, k)
                   for nbytes, cost, _, _ in [fwd.figures(set(keep))] if nbytes <= budget)
        assert dp.recompute_cost == best


def test_rewritten_program_verifies_and_clones_read_the_checkpoints():
    prog, forward_fetch, backward_fetch, seeds = chain_program()
    new, report = recompute(prog, forward_fetch, backward_fetch, seeds, "sqrt")
    verify(new)
    assert len(new.global_block().ops) == len(prog.global_block().ops) + \
        report.num_recomputed_ops
    _, _, saved = split_forward_backward(new, forward_fetch, backward_fetch, seeds)
    assert sorted(saved) == sorted(report.checkpoints + ["x"])
    # results equal the program without the pass
    exe = hf.static.Executor()
    feed = {"x": hf.randn(8, 16), "seed": hf.tensor(1.0)}
    want = exe.run(prog, feed=feed, fetch_list=backward_fetch)
    got = exe.run(new, feed=feed, fetch_list=backward_fetch)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_control_flow_outputs_are_kept_and_gradients_equal():
    def f(x, w):
        h = (x @ w).relu()
        if h.sum() > 0:
            h = h * 2.0
        else:
            h = h - 1.0
        return ((h @ w).tanh() @ w).sum()

    hf.manual_seed(0)
    x, w = hf.randn(4, 8), hf.randn(8, 8, requires_grad=True)
    f(x, w).backward()
    want = w.grad.numpy().copy()
    w.grad = None
    g = hf.jit.to_static(f, memory_budget=0)
    with pytest.warns(UserWarning, match="below what the backward must keep"):
        g(x, w).backward()
    # w's three gradient terms are one batched product (batch_matmul): float32 rounding of
    # another summation order, a few ulp on entries that cancel
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-5, atol=1e-6)
    report = g._last.recompute_report
    cond = next(op for op in g._last.program.global_block().ops if op.type == "cond")
    assert not set(cond.outputs) & set(report.recomputed)


def test_no_report_without_budget_or_gradients(x):
    _, concrete = train_step(hf.jit.to_static(mlp(depth=2)), x)
    assert concrete.recompute_report is None
    model = hf.jit.to_static(mlp(depth=2), memory_budget="sqrt")
    with hf.no_grad():
        model(x)
    assert model.forward._last.recompute_report is None


def test_unknown_dims_are_estimated_and_said():
    prog = hf.static.Program()
    w = hf.randn(4, 4, requires_grad=True)
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [-1, 4])
        seed = hf.static.data("seed", [])
        loss = ((x @ w).relu() @ w).sum()
        gw, = hf.static.gradients(loss, [w], target_gradients=[seed])
    _, one = recompute(prog, [loss.name], [gw.name], ["seed"], "sqrt")
    assert any("counted as 1" in note for note in one.notes)
    _, report = recompute(prog, [loss.name], [gw.name], ["seed"], 10**6, batch_size=32)
    assert report.baseline_saved_bytes == 32 * one.baseline_saved_bytes > 0
    assert any("counted as 32" in note for note in report.notes)


@pytest.mark.parametrize("budget, error", [(-1, ValueError), ("half", ValueError),
                                           (float("nan"), ValueError), (True, TypeError),
                                           ([1], TypeError), (math.inf, ValueError)])
def test_bad_budgets_are_refused(budget, error):
    with pytest.raises(error, match="budget"):
        check_budget(budget)
    with pytest.raises(error, match="budget"):
        hf.jit.to_static(mlp(depth=1), memory_budget=budget)
    with pytest.raises(error, match="budget"):
        hf.jit.to_static(memory_budget=budget)


def test_bad_strategy_is_refused():
    prog, forward_fetch, backward_fetch, seeds = chain_program(depth=2)
    with pytest.raises(ValueError, match="strategy"):
        recompute(prog, forward_fetch, backward_fetch, seeds, 100, strategy="optimal")


def test_dp_spreads_checkpoints_evenly(x):
    """Equal cost plans differ in their backward peak: the DP keeps segments even."""
    _, concrete = train_step(hf.jit.to_static(mlp(), memory_budget=4 * ACTIVATION), x)
    report = concrete.recompute_report
    ops = concrete.program.global_block().ops
    positions = [-1] + sorted(k for k, op in enumerate(ops) if op.outputs[0] in
                              report.checkpoints)
    gaps = [b - a for a, b in itertools.pairwise(positions)]
    assert len(report.checkpoints) == 4
    assert max(gaps) - min(gaps) <= 2  # two operators (one layer) per step


@pytest.mark.parametrize("budget", ["sqrt", 3 * ACTIVATION])
def test_hf_memory_measures_the_planned_saved_bytes(x, budget):
    """Between forward and backward hf.memory counts exactly what the plan keeps
    (report.saved_bytes; the output is one of them, shared with the caller's tensor)."""
    model = hf.jit.to_static(mlp(), memory_budget=budget)
    train_step(model, x)                             # trace, compile, create .grad
    report = model.forward._last.recompute_report
    base = hf.memory.allocated()
    y = model(x)
    held = hf.memory.allocated() - base
    assert held == report.saved_bytes, (held, report.saved_bytes)
    (y * y).mean().backward()
    del y
    assert hf.memory.allocated() == base             # backward freed it all


def test_a_budget_below_what_must_be_kept_warns_at_the_users_call():
    """The warning named a line inside hybridfw (static_function.py); it names the call that
    traced the program."""
    import inspect
    model = hf.jit.to_static(mlp(depth=2, dropout=0.5), memory_budget=0)
    x = hf.randn(4, WIDTH)
    with pytest.warns(UserWarning, match="below what the backward must keep") as record:
        line = inspect.currentframe().f_lineno + 1
        model(x).sum().backward()
    assert record[0].filename == __file__ and record[0].lineno == line


def test_a_budget_planned_for_dynamic_dims_says_which_sizes_it_assumed():
    """The budget is planned for the traced call's sizes; the one program then serves every
    batch size the InputSpec allows (keeping more for a larger batch): the report says so."""
    model = hf.jit.to_static(mlp(depth=4), input_spec=[hf.jit.InputSpec([None, WIDTH])],
                             memory_budget=2 * 8 * WIDTH * 4)
    x = hf.randn(8, WIDTH, requires_grad=True)
    model(x).sum().backward()
    report = model.forward._last.recompute_report
    assert report.saved_bytes <= 2 * 8 * WIDTH * 4
    assert any(f"(8, {WIDTH})" in note and "InputSpec leaves dynamic" in note
               for note in report.notes), report.notes
    fixed = hf.jit.to_static(mlp(depth=4), memory_budget=2 * 8 * WIDTH * 4)
    fixed(x).sum().backward()
    assert not any("InputSpec" in note for note in fixed.forward._last.recompute_report.notes)
