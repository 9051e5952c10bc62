"""LR schedulers step by step against torch.optim.lr_scheduler (the lrs and momenta of every
parameter group after each step), plus hand-computed values, state dicts and argument errors."""
import math
import warnings

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.optim import lr_scheduler as S

STEPS = 30


def make_opts(torch, kind="sgd"):
    """The same two-group optimizer in hybridfw and torch."""
    def groups(lib):
        w = [lib.zeros(3, requires_grad=True) for _ in range(2)]
        return [{"params": [w[0]]}, {"params": [w[1]], "lr": 0.3}]
    if kind == "sgd":
        return (hf.optim.SGD(groups(hf), lr=0.1, momentum=0.9),
                torch.optim.SGD(groups(torch), lr=0.1, momentum=0.9))
    return hf.optim.Adam(groups(hf), lr=0.1), torch.optim.Adam(groups(torch), lr=0.1)


def group_values(opt):
    return [(g["lr"], g.get("momentum"), tuple(g.get("betas", ()))) for g in opt.param_groups]


def assert_same(ours, theirs, o_opt, t_opt, where):
    np.testing.assert_allclose(ours.get_last_lr(), [float(x) for x in theirs.get_last_lr()],
                               rtol=1e-13, atol=0, err_msg=where)
    for a, b in zip(group_values(o_opt), group_values(t_opt)):
        np.testing.assert_allclose([a[0]] + ([a[1]] if a[1] is not None else []) + list(a[2]),
                                   [b[0]] + ([b[1]] if b[1] is not None else []) + list(b[2]),
                                   rtol=1e-13, atol=0, err_msg=where)


# (name, factory(lib_scheduler_module, optimizer), optimizer kind); each runs in both libraries
CASES = [
    ("StepLR", lambda L, o: L.StepLR(o, step_size=4, gamma=0.5), "sgd"),
    ("CosineAnnealingLR", lambda L, o: L.CosineAnnealingLR(o, T_max=7, eta_min=0.01), "sgd"),
    ("LambdaLR", lambda L, o: L.LambdaLR(o, lambda e: 0.9 ** e + 0.01 * e), "sgd"),
    ("LambdaLR-per-group", lambda L, o: L.LambdaLR(o, [lambda e: 1 / (e + 1),
                                                       lambda e: 0.97 ** e]), "sgd"),
    ("MultiplicativeLR", lambda L, o: L.MultiplicativeLR(o, lambda e: 0.95), "sgd"),
    ("MultiplicativeLR-per-group", lambda L, o: L.MultiplicativeLR(
        o, [lambda e: 0.9, lambda e: 1.0 - 0.01 * e]), "sgd"),
    ("MultiStepLR", lambda L, o: L.MultiStepLR(o, milestones=[3, 8, 8, 20], gamma=0.3), "sgd"),
    ("ExponentialLR", lambda L, o: L.ExponentialLR(o, gamma=0.87), "sgd"),
    ("ConstantLR", lambda L, o: L.ConstantLR(o), "sgd"),
    ("ConstantLR-args", lambda L, o: L.ConstantLR(o, factor=0.25, total_iters=11), "sgd"),
    ("LinearLR", lambda L, o: L.LinearLR(o), "sgd"),
    ("LinearLR-args", lambda L, o: L.LinearLR(o, start_factor=0.05, end_factor=0.5,
                                              total_iters=13), "sgd"),
    ("PolynomialLR", lambda L, o: L.PolynomialLR(o), "sgd"),
    ("PolynomialLR-args", lambda L, o: L.PolynomialLR(o, total_iters=17, power=2.5), "sgd"),
    ("CosineAnnealingWarmRestarts", lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=5), "sgd"),
    ("CosineAnnealingWarmRestarts-mult", lambda L, o: L.CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2, eta_min=0.001), "sgd"),
    ("SequentialLR", lambda L, o: L.SequentialLR(
        o, [L.LinearLR(o, start_factor=0.1, total_iters=5), L.ExponentialLR(o, gamma=0.9)],
        milestones=[5]), "sgd"),
    ("SequentialLR-3", lambda L, o: L.SequentialLR(
        o, [L.ConstantLR(o, factor=0.5, total_iters=3), L.StepLR(o, 3, 0.5),
            L.CosineAnnealingLR(o, T_max=6)], milestones=[4, 12]), "sgd"),
    ("ChainedScheduler", lambda L, o: L.ChainedScheduler(
        [L.ConstantLR(o, factor=0.1, total_iters=2), L.ExponentialLR(o, gamma=0.9)]), "sgd"),
    ("ChainedScheduler-opt", lambda L, o: L.ChainedScheduler(
        [L.LinearLR(o, total_iters=4), L.MultiStepLR(o, [5, 9])], optimizer=o), "sgd"),
    ("OneCycleLR", lambda L, o: L.OneCycleLR(o, max_lr=1.0, total_steps=STEPS), "sgd"),
    ("OneCycleLR-linear-3", lambda L, o: L.OneCycleLR(
        o, max_lr=[0.5, 2.0], epochs=3, steps_per_epoch=10, pct_start=0.25,
        anneal_strategy="linear", three_phase=True, div_factor=10.0), "sgd"),
    ("OneCycleLR-adam", lambda L, o: L.OneCycleLR(
        o, max_lr=0.01, total_steps=STEPS + 5, base_momentum=[0.8, 0.7]), "adam"),
    ("OneCycleLR-no-momentum", lambda L, o: L.OneCycleLR(
        o, max_lr=0.01, total_steps=STEPS, cycle_momentum=False), "adam"),
    ("CyclicLR", lambda L, o: L.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4), "sgd"),
    ("CyclicLR-triangular2", lambda L, o: L.CyclicLR(
        o, base_lr=[0.01, 0.02], max_lr=[0.1, 0.3], step_size_up=3, step_size_down=5,
        mode="triangular2"), "sgd"),
    ("CyclicLR-exp-range-adam", lambda L, o: L.CyclicLR(
        o, 0.001, 0.01, step_size_up=4, mode="exp_range", gamma=0.95), "adam"),
    ("CyclicLR-scale-fn", lambda L, o: L.CyclicLR(
        o, 0.001, 0.01, step_size_up=2, scale_fn=lambda x: 1 / (x + 1),
        scale_mode="iterations", cycle_momentum=False), "sgd"),
]


def run_pair(torch, factory, kind, steps=STEPS, on_step=None):
    o_opt, t_opt = make_opts(torch, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = factory(S, o_opt), factory(torch.optim.lr_scheduler, t_opt)
        assert_same(ours, theirs, o_opt, t_opt, "after construction")
        for i in range(steps):
            o_opt.step()
            t_opt.step()
            ours.step()
            theirs.step()
            assert_same(ours, theirs, o_opt, t_opt, f"after step {i + 1}")
            if on_step is not None:
                ours = on_step(i, ours, o_opt)
    return ours, o_opt


@pytest.mark.parametrize("name,factory,kind", CASES, ids=[c[0] for c in CASES])
def test_trajectory_matches_torch(name, factory, kind):
    torch = pytest.importorskip("torch")
    run_pair(torch, factory, kind)


@pytest.mark.parametrize("name,factory,kind", CASES, ids=[c[0] for c in CASES])
def test_state_dict_resume_matches_torch(name, factory, kind):
    """Half way, a fresh scheduler (on a fresh optimizer with the same group state) loads the
    state dict and carries on: the rest of the trajectory is still torch's."""
    torch = pytest.importorskip("torch")

    def resume(i, ours, o_opt):
        if i != STEPS // 2:
            return ours
        state = ours.state_dict()
        groups = [{k: v for k, v in g.items() if k != "params"} for g in o_opt.param_groups]
        fresh = factory(S, o_opt)
        for g, saved in zip(o_opt.param_groups, groups):
            g.update(saved)
        fresh.load_state_dict(state)
        return fresh

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_pair(torch, factory, kind, on_step=resume)


@pytest.mark.parametrize("kwargs", [
    {}, {"mode": "max", "factor": 0.5, "patience": 2, "threshold_mode": "abs",
         "threshold": 0.05, "cooldown": 3, "min_lr": [0.02, 0.001]},
    {"patience": 0, "factor": 0.3, "min_lr": 0.04, "eps": 1e-3},
])
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    torch = pytest.importorskip("torch")
    o_opt, t_opt = make_opts(torch)
    ours = S.ReduceLROnPlateau(o_opt, **kwargs)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(t_opt, **kwargs)
    metrics = [1.0, 0.9, 0.95, 0.95, 0.96, 0.9, 0.9, 0.5, 0.6, 0.7, 0.8, 0.8, 0.8, 0.8] * 3
    for i, m in enumerate(metrics):
        ours.step(hf.tensor(m, dtype="float64") if i % 2 else m)
        theirs.step(m)
        assert_same(ours, theirs, o_opt, t_opt, f"after step {i + 1}")
        assert (ours.best, ours.num_bad_epochs, ours.cooldown_counter, ours.last_epoch) == \
            (theirs.best, theirs.num_bad_epochs, theirs.cooldown_counter, theirs.last_epoch)
        if i == 20:
            fresh = S.ReduceLROnPlateau(o_opt, **kwargs)
            fresh.load_state_dict(ours.state_dict())
            ours = fresh


def test_resume_with_last_epoch_matches_torch():
    torch = pytest.importorskip("torch")
    for factory in (lambda L, o: L.ExponentialLR(o, 0.9, last_epoch=4),
                    lambda L, o: L.LambdaLR(o, lambda e: 1 / (e + 1), last_epoch=4),
                    lambda L, o: L.PolynomialLR(o, total_iters=9, last_epoch=4),
                    lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=4, T_mult=2,
                                                               last_epoch=4)):
        o_opt, t_opt = make_opts(torch)
        for opt in (o_opt, t_opt):
            for g in opt.param_groups:
                g["initial_lr"] = g["lr"] * 2
        ours, theirs = factory(S, o_opt), factory(torch.optim.lr_scheduler, t_opt)
        for i in range(10):
            assert_same(ours, theirs, o_opt, t_opt, f"step {i}")
            o_opt.step(), t_opt.step(), ours.step(), theirs.step()


def test_warm_restarts_fractional_epochs_match_torch():
    torch = pytest.importorskip("torch")
    o_opt, t_opt = make_opts(torch)
    ours = S.CosineAnnealingWarmRestarts(o_opt, T_0=2, T_mult=3, eta_min=0.01)
    theirs = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(t_opt, T_0=2, T_mult=3,
                                                                  eta_min=0.01)
    for epoch in np.arange(0, 20, 0.35):
        ours.step(float(epoch))
        theirs.step(float(epoch))
        assert_same(ours, theirs, o_opt, t_opt, f"epoch {epoch}")


# ---- hand-computed values (no torch needed) ---------------------------------------------------
def sgd(lr=1.0, **kw):
    return hf.optim.SGD([hf.zeros(2, requires_grad=True)], lr=lr, **kw)


def lrs(sched, n):
    out = [sched.get_last_lr()[0]]
    for _ in range(n):
        sched.optimizer.step()
        sched.step()
        out.append(sched.get_last_lr()[0])
    return out


def test_hand_computed_schedules():
    assert lrs(S.MultiStepLR(sgd(), [2, 4, 4], gamma=0.5), 5) == [1, 1, 0.5, 0.5, 0.125, 0.125]
    assert lrs(S.ConstantLR(sgd(), factor=0.5, total_iters=2), 3) == [0.5, 0.5, 1.0, 1.0]
    assert lrs(S.LinearLR(sgd(), start_factor=0.25, total_iters=3), 4) == \
        pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0])
    assert lrs(S.PolynomialLR(sgd(), total_iters=4, power=2.0), 5) == \
        pytest.approx([1, 0.5625, 0.25, 0.0625, 0, 0])
    assert lrs(S.LambdaLR(sgd(0.5), lambda e: e + 1), 2) == [0.5, 1.0, 1.5]
    assert lrs(S.ExponentialLR(sgd(), 0.5), 2) == [1, 0.5, 0.25]
    warm = lrs(S.CosineAnnealingWarmRestarts(sgd(), T_0=2), 4)
    assert warm == pytest.approx([1, 0.5, 1, 0.5, 1])
    cyc = lrs(S.CyclicLR(sgd(momentum=0.9), 0.0, 1.0, step_size_up=2), 5)
    assert cyc == pytest.approx([0, 0.5, 1, 0.5, 0, 0.5])
    one = S.OneCycleLR(sgd(momentum=0.9), max_lr=1.0, total_steps=10, anneal_strategy="linear",
                       pct_start=0.5, div_factor=10.0, final_div_factor=1.0)
    assert lrs(one, 4)[:2] == pytest.approx([0.1, 0.1 + 0.9 / 4])


def test_get_last_lr_and_base_lrs_follow_groups():
    opt = hf.optim.SGD([{"params": [hf.zeros(1, requires_grad=True)], "lr": 0.2},
                        {"params": [hf.zeros(1, requires_grad=True)]}], lr=1.0)
    sched = S.MultiStepLR(opt, milestones=[1])
    assert sched.base_lrs == [0.2, 1.0]
    opt.step()
    sched.step()
    assert sched.get_last_lr() == pytest.approx([0.02, 0.1])
    assert [g["lr"] for g in opt.param_groups] == sched.get_last_lr()


def test_lambda_state_dict_keeps_callable_objects_state():
    class Decay:
        def __init__(self, rate):
            self.rate = rate

        def __call__(self, epoch):
            return self.rate ** epoch

    sched = S.LambdaLR(sgd(), [Decay(0.5)])
    sched.lr_lambdas[0].rate = 0.25
    state = sched.state_dict()
    assert state["lr_lambdas"] == [{"rate": 0.25}]
    assert S.LambdaLR(sgd(), lambda e: 1.0).state_dict()["lr_lambdas"] == [None]
    other = S.LambdaLR(sgd(), [Decay(0.9)])
    other.load_state_dict(state)
    assert other.lr_lambdas[0].rate == 0.25
    assert "lr_lambdas" in state  # the caller's dict is left whole


def test_lr_scheduler_alias_and_all():
    assert S._LRScheduler is S.LRScheduler
    for name in S.__all__:
        assert hasattr(S, name)
    assert issubclass(S.OneCycleLR, S.LRScheduler)


def test_argument_errors():
    with pytest.raises(ValueError, match="ConstantLR.*factor"):
        S.ConstantLR(sgd(), factor=1.5)
    with pytest.raises(ValueError, match="LinearLR.*start_factor"):
        S.LinearLR(sgd(), start_factor=0)
    with pytest.raises(ValueError, match="LinearLR.*end_factor"):
        S.LinearLR(sgd(), end_factor=2.0)
    with pytest.raises(ValueError, match="LambdaLR: expected 1 values for lr_lambda"):
        S.LambdaLR(sgd(), [lambda e: 1, lambda e: 2])
    with pytest.raises(TypeError, match="MultiplicativeLR: lr_lambda should be a function"):
        S.MultiplicativeLR(sgd(), 0.9)
    with pytest.raises(ValueError, match="CosineAnnealingWarmRestarts.*T_0.*0"):
        S.CosineAnnealingWarmRestarts(sgd(), T_0=0)
    with pytest.raises(ValueError, match="CosineAnnealingWarmRestarts.*T_mult.*1.5"):
        S.CosineAnnealingWarmRestarts(sgd(), T_0=2, T_mult=1.5)
    with pytest.raises(ValueError, match="SequentialLR.*2 schedulers and 0 milestones"):
        opt = sgd()
        S.SequentialLR(opt, [S.StepLR(opt, 2), S.StepLR(opt, 3)], milestones=[])
    with pytest.raises(ValueError, match="ChainedScheduler.*ReduceLROnPlateau"):
        opt = sgd()
        S.ChainedScheduler([S.StepLR(opt, 2), S.ReduceLROnPlateau(opt)])
    with pytest.raises(ValueError, match="SequentialLR.*same optimizer"):
        opt = sgd()
        S.SequentialLR(opt, [S.StepLR(opt, 2), S.StepLR(sgd(), 3)], milestones=[2])
    with pytest.raises(ValueError, match="ReduceLROnPlateau: factor should be < 1.0"):
        S.ReduceLROnPlateau(sgd(), factor=1.0)
    with pytest.raises(ValueError, match="ReduceLROnPlateau: mode 'up' is unknown"):
        S.ReduceLROnPlateau(sgd(), mode="up")
    with pytest.raises(ValueError, match="OneCycleLR: you must define either total_steps"):
        S.OneCycleLR(sgd(momentum=0.9), max_lr=1.0)
    with pytest.raises(ValueError, match="OneCycleLR: expected a float between 0 and 1"):
        S.OneCycleLR(sgd(momentum=0.9), max_lr=1.0, total_steps=5, pct_start=1)
    with pytest.raises(ValueError, match="OneCycleLR: anneal_strategy"):
        S.OneCycleLR(sgd(momentum=0.9), max_lr=1.0, total_steps=5, anneal_strategy="step")
    with pytest.raises(ValueError, match="CyclicLR: the optimizer must support momentum"):
        S.CyclicLR(_no_momentum_optimizer(), 0.01, 0.1)
    with pytest.raises(ValueError, match="CyclicLR: mode 'sine' is invalid"):
        S.CyclicLR(sgd(momentum=0.9), 0.01, 0.1, mode="sine")
    one = S.OneCycleLR(sgd(momentum=0.9), max_lr=1.0, total_steps=2)
    one.step(), one.step()
    with pytest.raises(ValueError, match="OneCycleLR: tried to step 3 times"):
        one.step()


def _no_momentum_optimizer():
    class Plain(hf.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {"lr": 0.1})

        def step(self, closure=None):
            return None
    return Plain([hf.zeros(1, requires_grad=True)])


def test_cosine_warm_restarts_closed_form():
    opt = sgd()
    sched = S.CosineAnnealingWarmRestarts(opt, T_0=4, T_mult=2)
    sched.step(5)  # second cycle (length 8), 1 epoch in
    assert sched.get_last_lr()[0] == pytest.approx((1 + math.cos(math.pi / 8)) / 2)
