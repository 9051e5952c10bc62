"""Optimizers and lr schedulers against hand-written numpy references (and torch if present)."""
import contextlib
import gc
import math
import warnings

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.optim import SGD, Adadelta, Adagrad, Adam, AdamW, NAdam, RAdam, RMSprop
from hybridfw.optim.lr_scheduler import CosineAnnealingLR, StepLR

STEPS = 6
RTOL, ATOL = 1e-10, 1e-12


# ---- a small problem: grad = c * p + d (so each gradient depends on the trajectory) -------
def problem(seed=0, shapes=((3, 4), (5,))):
    rng = np.random.default_rng(seed)
    p0 = [rng.standard_normal(s) for s in shapes]
    c = [rng.uniform(0.5, 2.0, s) for s in shapes]
    d = [rng.standard_normal(s) for s in shapes]
    return p0, c, d


def run_hf(cls, p0, c, d, steps=STEPS, dtype="float64", **kw):
    params = [hf.tensor(p, dtype=dtype, requires_grad=True) for p in p0]
    opt = cls(params, **kw)
    traj = []
    for _ in range(steps):
        for p, ci, di in zip(params, c, d):
            p.grad = hf.tensor(ci * p.detach().numpy() + di, dtype=dtype)
        opt.step()
        traj.append([p.detach().numpy().copy() for p in params])
    return traj, params, opt


def run_ref(update, p0, c, d, steps=STEPS, **kw):
    ps = [p.copy() for p in p0]
    states = [{} for _ in ps]
    traj = []
    for t in range(1, steps + 1):
        ps = [update(p, ci * p + di, s, t, **kw) for p, ci, di, s in zip(ps, c, d, states)]
        traj.append([p.copy() for p in ps])
    return traj


def assert_traj(a, b, rtol=RTOL, atol=ATOL):
    for step, (xs, ys) in enumerate(zip(a, b)):
        for x, y in zip(xs, ys):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=f"step {step + 1}")


# ---- numpy references, written from PyTorch's documented formulas ------------------------
def sgd_ref(p, g, s, t, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False,
            maximize=False):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    if momentum:
        s["b"] = g.copy() if "b" not in s else momentum * s["b"] + (1 - dampening) * g
        g = g + momentum * s["b"] if nesterov else s["b"]
    return p - lr * g


def _moments_ref(p, g, s, lr, betas, weight_decay, decoupled, maximize):
    """The start Adam, NAdam and RAdam share: the effective gradient (or AdamW's decay of p)
    and both moments, updated in ``s``; returns (p, g)."""
    b1, b2 = betas
    g = -g if maximize else g
    if weight_decay:
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
    s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0) + (1 - b2) * g * g
    return p, g


def adam_ref(p, g, s, t, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
             maximize=False, decoupled=False):
    b1, b2 = betas
    p, g = _moments_ref(p, g, s, lr, betas, weight_decay, decoupled, maximize)
    v = s["v"]
    if amsgrad:
        s["vmax"] = v = np.maximum(s.get("vmax", 0), v)
    m_hat = s["m"] / (1 - b1 ** t)
    return p - lr * m_hat / (np.sqrt(v) / math.sqrt(1 - b2 ** t) + eps)


def rmsprop_ref(p, g, s, t, lr, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                centered=False, maximize=False):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    s["sq"] = alpha * s.get("sq", 0) + (1 - alpha) * g * g
    v = s["sq"]
    if centered:
        s["ga"] = alpha * s.get("ga", 0) + (1 - alpha) * g
        v = v - s["ga"] ** 2
    avg = np.sqrt(v) + eps
    if momentum > 0:
        s["b"] = momentum * s.get("b", 0) + g / avg
        return p - lr * s["b"]
    return p - lr * g / avg


def adagrad_ref(p, g, s, t, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                eps=1e-10, maximize=False):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    s["sum"] = s.get("sum", initial_accumulator_value) + g * g
    return p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(s["sum"]) + eps)


def nadam_ref(p, g, s, t, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
              momentum_decay=4e-3, decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    p, g = _moments_ref(p, g, s, lr, betas, weight_decay, decoupled_weight_decay, maximize)

    def mu(k):
        return b1 * (1 - 0.5 * 0.96 ** (k * momentum_decay))

    # the product of the mu's, kept in float32 as PyTorch's scalar state (default dtype)
    s["prod"] = float(np.float32(s.get("prod", 1.0)) * np.float32(mu(t)))
    denom = np.sqrt(s["v"] / (1 - b2 ** t)) + eps
    return (p - lr * (1 - mu(t)) / (1 - s["prod"]) * g / denom
            - lr * mu(t + 1) / (1 - s["prod"] * mu(t + 1)) * s["m"] / denom)


def radam_ref(p, g, s, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
              decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    p, g = _moments_ref(p, g, s, lr, betas, weight_decay, decoupled_weight_decay, maximize)
    m_hat = s["m"] / (1 - b1 ** t)
    rho_inf = 2 / (1 - b2) - 1
    rho = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
    if rho <= 5:  # the variance is not yet tractable: momentum SGD
        return p - lr * m_hat
    rect = math.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
    return p - lr * m_hat * rect * math.sqrt(1 - b2 ** t) / (np.sqrt(s["v"]) + eps)


SGD_CASES = [
    {"lr": 0.1},
    {"lr": 0.05, "momentum": 0.9},
    {"lr": 0.05, "momentum": 0.9, "dampening": 0.3},
    {"lr": 0.05, "momentum": 0.9, "nesterov": True},
    {"lr": 0.05, "momentum": 0.8, "weight_decay": 0.1, "nesterov": True},
    {"lr": 0.1, "weight_decay": 0.2},
    {"lr": 0.05, "momentum": 0.5, "dampening": 0.7, "weight_decay": 0.1, "maximize": True},
    {"lr": 0.1, "maximize": True},
]
ADAM_CASES = [
    {"lr": 0.1},
    {"lr": 0.05, "betas": (0.8, 0.99), "eps": 1e-6},
    {"lr": 0.05, "weight_decay": 0.1},
    {"lr": 0.05, "amsgrad": True},
    {"lr": 0.05, "amsgrad": True, "weight_decay": 0.1, "maximize": True},
    {"lr": 0.05, "betas": (0.3, 0.9)},  # 1 - beta1 >= 0.5: lerp's other rounding branch
]
RMSPROP_CASES = [
    {"lr": 0.01},
    {"lr": 0.01, "alpha": 0.9, "eps": 1e-6},
    {"lr": 0.01, "momentum": 0.9},
    {"lr": 0.01, "centered": True},
    {"lr": 0.01, "centered": True, "momentum": 0.5, "weight_decay": 0.1},
    {"lr": 0.01, "weight_decay": 0.1, "maximize": True},
    {"lr": 0.01, "alpha": 0.3, "centered": True},
]

ADAGRAD_CASES = [
    {"lr": 0.1},
    {"lr": 0.1, "lr_decay": 0.05, "eps": 1e-6},
    {"lr": 0.05, "initial_accumulator_value": 0.5, "weight_decay": 0.1},
    {"lr": 0.05, "weight_decay": 0.1, "maximize": True},
]
ADADELTA_CASES = [
    {},
    {"lr": 0.5, "rho": 0.7, "eps": 1e-4},
    {"weight_decay": 0.1, "maximize": True},
]
NADAM_CASES = [
    {"lr": 0.05},
    {"lr": 0.05, "betas": (0.8, 0.99), "momentum_decay": 0.01, "eps": 1e-6},
    {"lr": 0.05, "weight_decay": 0.1},
    {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True},
    {"lr": 0.05, "betas": (0.3, 0.9)},  # 1 - beta1 >= 0.5: lerp's other rounding branch
]
RADAM_CASES = [
    {"lr": 0.05},  # beta2 0.999: rho_t > 5 from step 6 on
    {"lr": 0.05, "betas": (0.8, 0.9), "eps": 1e-6},  # beta2 0.9: rho_t > 5 from step 5
    {"lr": 0.05, "weight_decay": 0.1},
    {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True},
]


def variants(*groups):
    """pytest params (optimizer class, options), with readable ids."""
    return [pytest.param(cls, kw, id=f"{cls.__name__}-{kw}") for cls, cases in groups
            for kw in cases]


@pytest.mark.parametrize("kw", SGD_CASES, ids=str)
def test_sgd_matches_reference(kw):
    p0, c, d = problem()
    assert_traj(run_hf(SGD, p0, c, d, **kw)[0], run_ref(sgd_ref, p0, c, d, **kw))


@pytest.mark.parametrize("kw", ADAM_CASES, ids=str)
def test_adam_matches_reference(kw):
    p0, c, d = problem(1)
    assert_traj(run_hf(Adam, p0, c, d, **kw)[0], run_ref(adam_ref, p0, c, d, **kw))


ADAMW_CASES = [
    {"lr": 0.05},
    {"lr": 0.05, "weight_decay": 0.3},
    {"lr": 0.05, "weight_decay": 0.1, "amsgrad": True, "maximize": True},
]


@pytest.mark.parametrize("kw", ADAMW_CASES, ids=str)
def test_adamw_matches_reference(kw):
    p0, c, d = problem(2)
    ref_kw = dict(kw, weight_decay=kw.get("weight_decay", 1e-2))  # AdamW's default decay
    assert_traj(run_hf(AdamW, p0, c, d, **kw)[0],
                run_ref(adam_ref, p0, c, d, decoupled=True, **ref_kw))


@pytest.mark.parametrize("kw", RMSPROP_CASES, ids=str)
def test_rmsprop_matches_reference(kw):
    p0, c, d = problem(3)
    assert_traj(run_hf(RMSprop, p0, c, d, **kw)[0], run_ref(rmsprop_ref, p0, c, d, **kw))


@pytest.mark.parametrize("cls, ref, kw", [
    *[pytest.param(Adagrad, adagrad_ref, kw, id=f"Adagrad-{kw}") for kw in ADAGRAD_CASES],
    *[pytest.param(NAdam, nadam_ref, kw, id=f"NAdam-{kw}") for kw in NADAM_CASES],
    *[pytest.param(RAdam, radam_ref, kw, id=f"RAdam-{kw}") for kw in RADAM_CASES]])
def test_adagrad_nadam_radam_match_reference(cls, ref, kw):
    p0, c, d = problem(12)
    assert_traj(run_hf(cls, p0, c, d, steps=20, **kw)[0],
                run_ref(ref, p0, c, d, steps=20, **kw), rtol=1e-9, atol=1e-11)


def test_adagrad_nadam_radam_state_layout():
    p0, c, d = problem()
    _, params, opt = run_hf(Adagrad, p0, c, d, steps=2, initial_accumulator_value=0.25)
    assert sorted(opt.state[params[0]]) == ["step", "sum"]
    _, params, opt = run_hf(NAdam, p0, c, d, steps=3)
    state = opt.state[params[0]]
    assert sorted(state) == ["exp_avg", "exp_avg_sq", "mu_product", "step"]
    assert state["step"] == 3 and type(state["mu_product"]) is float
    _, params, opt = run_hf(RAdam, p0, c, d, steps=2)
    assert sorted(opt.state[params[0]]) == ["exp_avg", "exp_avg_sq", "step"]


def test_float32_parameters_stay_float32_and_close():
    p0, c, d = problem(4)
    traj, params, opt = run_hf(Adam, p0, c, d, dtype="float32", lr=0.05, amsgrad=True)
    assert all(p.dtype == hf.float32 for p in params)
    assert all(v.dtype == hf.float32 for v in opt.state[params[0]].values()
               if isinstance(v, hf.Tensor))
    assert_traj(traj, run_ref(adam_ref, p0, c, d, lr=0.05, amsgrad=True), rtol=1e-5, atol=1e-6)


def test_step_counter_and_state_layout():
    p0, c, d = problem()
    _, params, opt = run_hf(Adam, p0, c, d, steps=3, amsgrad=True)
    state = opt.state[params[0]]
    assert state["step"] == 3
    assert sorted(state) == ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]
    _, params, opt = run_hf(RMSprop, p0, c, d, steps=2, momentum=0.9, centered=True)
    assert sorted(opt.state[params[1]]) == ["grad_avg", "momentum_buffer", "square_avg", "step"]
    _, params, opt = run_hf(SGD, p0, c, d, steps=2, lr=0.1)
    assert not opt.state  # plain SGD keeps no state, like PyTorch
    _, params, opt = run_hf(SGD, p0, c, d, steps=2, lr=0.1, momentum=0.9)
    assert sorted(opt.state[params[0]]) == ["momentum_buffer"]


# ---- training through autograd, closures, skipping, zero_grad ------------------------------
def test_training_loop_with_backward_and_closure():
    hf.manual_seed(0)
    x = hf.randn(32, 3)
    y = x @ hf.tensor([[1.0], [-2.0], [0.5]]) + 0.3
    w = hf.zeros(3, 1, requires_grad=True)
    b = hf.zeros(1, requires_grad=True)
    opt = Adam([w, b], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        return loss

    first = closure().item()
    for _ in range(200):
        loss = opt.step(closure)
    assert loss.item() < first * 1e-3
    assert w.is_leaf and w.requires_grad and w.grad_fn is None  # no history recorded
    np.testing.assert_allclose(w.detach().numpy().ravel(), [1.0, -2.0, 0.5], atol=1e-2)


def test_params_without_grad_are_skipped():
    a = hf.ones(3, requires_grad=True)
    b = hf.ones(3, requires_grad=True)
    opt = Adam([a, b], lr=0.1)
    a.grad = hf.ones(3)
    opt.step()
    assert b.tolist() == [1.0, 1.0, 1.0] and b not in opt.state
    assert a.tolist() != [1.0, 1.0, 1.0]


def test_zero_grad():
    p = hf.ones(2, requires_grad=True)
    opt = SGD([p], lr=0.1)
    (p * 3).sum().backward()
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is g and g.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


# ---- parameter groups -----------------------------------------------------------------------
def test_param_groups_per_group_options():
    p0, c, d = problem(5)
    a = hf.tensor(p0[0], dtype="float64", requires_grad=True)
    b = hf.tensor(p0[1], dtype="float64", requires_grad=True)
    opt = SGD([{"params": [a]}, {"params": b, "lr": 0.01, "momentum": 0.5}], lr=0.1,
              momentum=0.9)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[1]["lr"] == 0.01
    assert opt.param_groups[1]["momentum"] == 0.5 and opt.param_groups[1]["dampening"] == 0
    ref_a = run_ref(sgd_ref, [p0[0]], [c[0]], [d[0]], lr=0.1, momentum=0.9)
    ref_b = run_ref(sgd_ref, [p0[1]], [c[1]], [d[1]], lr=0.01, momentum=0.5)
    for step in range(STEPS):
        for p, ci, di in ((a, c[0], d[0]), (b, c[1], d[1])):
            p.grad = hf.tensor(ci * p.detach().numpy() + di)
        opt.step()
        np.testing.assert_allclose(a.detach().numpy(), ref_a[step][0], rtol=RTOL)
        np.testing.assert_allclose(b.detach().numpy(), ref_b[step][0], rtol=RTOL)


def test_add_param_group():
    a, b = hf.ones(2, requires_grad=True), hf.ones(4, requires_grad=True)
    opt = Adam([a], lr=0.1)
    opt.add_param_group({"params": [b], "lr": 0.5, "betas": [0.5, 0.9]})
    assert opt.param_groups[1]["eps"] == 1e-8 and opt.param_groups[1]["betas"] == (0.5, 0.9)
    a.grad, b.grad = hf.ones(2), hf.ones(4)
    opt.step()
    np.testing.assert_allclose(b.detach().numpy(), 0.5, rtol=1e-6)  # first Adam step: lr
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="lr=-0.5"):
        opt.add_param_group({"params": [hf.ones(1, requires_grad=True)], "lr": -0.5})


@pytest.mark.parametrize("make, exc, match", [
    (lambda p: SGD([p], lr=-1), ValueError, "lr=-1"),
    (lambda p: SGD([p], lr="0.1"), TypeError, "lr must be a number"),
    (lambda p: SGD([p], lr=0.1, momentum=-0.5), ValueError, "momentum=-0.5"),
    (lambda p: SGD([p], lr=0.1, nesterov=True), ValueError, "nesterov"),
    (lambda p: SGD([p], lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), ValueError,
     "dampening=0.1"),
    (lambda p: SGD([p], lr=0.1, weight_decay=-1e-4), ValueError, "weight_decay"),
    (lambda p: Adam([p], betas=(1.0, 0.9)), ValueError, r"betas\[0\]=1.0"),
    (lambda p: Adam([p], betas=(0.9, -0.1)), ValueError, r"betas\[1\]"),
    (lambda p: Adam([p], betas=0.9), ValueError, "pair"),
    (lambda p: AdamW([p], eps=-1.0), ValueError, "AdamW: invalid eps=-1.0"),
    (lambda p: RMSprop([p], alpha=-0.1), ValueError, "alpha=-0.1"),
    (lambda p: RMSprop([p], lr=float("nan")), ValueError, "lr=nan"),
    (lambda p: Adagrad([p], lr_decay=-0.1), ValueError, "Adagrad: invalid lr_decay=-0.1"),
    (lambda p: Adagrad([p], initial_accumulator_value=-1), ValueError,
     "initial_accumulator_value=-1"),
    (lambda p: NAdam([p], momentum_decay=-1e-3), ValueError, "NAdam: invalid momentum_decay"),
    (lambda p: NAdam([p], betas=(0.9, 1.0)), ValueError, r"NAdam: invalid betas\[1\]=1.0"),
    (lambda p: RAdam([p], eps=-1.0), ValueError, "RAdam: invalid eps=-1.0"),
    (lambda p: RAdam([p], decoupled_weight_decay=1), TypeError, "RAdam: decoupled_weight_decay"),
    (lambda p: SGD(p, lr=0.1), TypeError, "single Tensor"),
    (lambda p: SGD([], lr=0.1), ValueError, "empty parameter list"),
    (lambda p: SGD({p}, lr=0.1), TypeError, "set"),
    (lambda p: SGD([p * 2], lr=0.1), ValueError, "non-leaf"),
    (lambda p: SGD([p, "w"], lr=0.1), TypeError, "parameter 1 of the group is a str"),
    (lambda p: SGD([hf.ones(2, dtype="int64")], lr=0.1), TypeError, "int64"),
    (lambda p: SGD([{"lr": 0.1}]), ValueError, "'params'"),
])
def test_validation_errors(make, exc, match):
    p = hf.ones(2, requires_grad=True)
    with pytest.raises(exc, match=match):
        make(p)


DUPLICATE_CASES = [(SGD, {"lr": 0.1}), (SGD, {"lr": 0.1, "momentum": 0.9}), (Adam, {"lr": 0.1}),
                   (AdamW, {"lr": 0.1}), (RMSprop, {"lr": 0.1}), (Adagrad, {"lr": 0.1}),
                   (NAdam, {"lr": 0.1}), (RAdam, {"lr": 0.1}), (Adadelta, {"lr": 0.1})]


@pytest.mark.parametrize("cls, options", DUPLICATE_CASES,
                         ids=[f"{c.__name__}-{len(o)}" for c, o in DUPLICATE_CASES])
def test_duplicate_parameters_warn_and_step_per_occurrence_as_torch(cls, options):
    torch = pytest.importorskip("torch")

    def run(lib, make):
        w = make([1.0, 2.0])
        v = make([3.0])
        with pytest.warns(UserWarning, match="duplicate parameters"):
            opt = getattr(lib.optim, cls.__name__)([w, w], **options)
        opt.add_param_group({"params": [v]})
        for _ in range(2):
            opt.zero_grad()
            ((w ** 2).sum() + (v ** 2).sum()).backward()
            opt.step()
        sd = opt.state_dict()
        return (w.detach().numpy(), v.detach().numpy(),
                [g["params"] for g in sd["param_groups"]], sorted(sd["state"]))

    got = run(hf, lambda x: hf.tensor(x, requires_grad=True))
    want = run(torch, lambda x: torch.nn.Parameter(torch.tensor(x)))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    assert got[2:] == want[2:]  # numbering: [[1, 1], [2]]


def test_a_parameter_in_two_groups_is_still_refused():
    p = hf.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="more than one parameter group"):
        SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


def test_gradient_shape_mismatch_is_reported():
    p = hf.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"different size \(\(2,\)\)"):
        p.grad = hf.ones(2)  # refused where it enters, as PyTorch
    p.grad = hf.ones(3)
    p.data = hf.ones(2)  # the parameter replaced under its gradient
    with pytest.raises(ValueError, match=r"gradient of shape \(3,\)"):
        SGD([p], lr=0.1).step()


# ---- state dicts ----------------------------------------------------------------------------
STATE_DICT_CASES = variants(
    (SGD, [{"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}]),
    (Adam, [{"lr": 0.05, "amsgrad": True}]),
    (AdamW, [{"lr": 0.05}]),
    (RMSprop, [{"lr": 0.01, "momentum": 0.5, "centered": True}]),
    (Adagrad, [{"lr": 0.05, "lr_decay": 0.01, "initial_accumulator_value": 0.1}]),
    (NAdam, [{"lr": 0.05, "weight_decay": 0.01}]),
    (RAdam, [{"lr": 0.05, "betas": (0.8, 0.9)}]),
    (Adadelta, [{"lr": 0.5, "rho": 0.8, "weight_decay": 0.01}]),
)


@pytest.mark.parametrize("cls, kw", STATE_DICT_CASES)
def test_state_dict_round_trip_continues_identically(cls, kw, tmp_path):
    p0, c, d = problem(6)

    def make():
        params = [hf.tensor(p, dtype="float64", requires_grad=True) for p in p0]
        return params, cls([{"params": params[:1]}, {"params": params[1:], "lr": 0.02}], **kw)

    def steps(params, opt, n):
        for _ in range(n):
            for p, ci, di in zip(params, c, d):
                p.grad = hf.tensor(ci * p.detach().numpy() + di)
            opt.step()

    params_a, opt_a = make()
    steps(params_a, opt_a, 3)
    sd = opt_a.state_dict()
    assert sorted(sd) == ["param_groups", "state"]
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert sd["param_groups"][1]["lr"] == 0.02
    for index, values in sd["state"].items():
        for key, value in values.items():
            if isinstance(value, hf.Tensor):  # a copy, not the optimizer's own buffer
                assert value is not opt_a.state[params_a[index]][key]
    hf.save(sd, tmp_path / "opt.hf")
    loaded = hf.load(tmp_path / "opt.hf")

    params_b, opt_b = make()
    for pa, pb in zip(params_a, params_b):
        pb.data = pa.detach().clone()
    opt_b.load_state_dict(loaded)
    assert opt_b.param_groups[1]["lr"] == 0.02
    steps(params_a, opt_a, 3)
    steps(params_b, opt_b, 3)
    for pa, pb in zip(params_a, params_b):
        np.testing.assert_array_equal(pa.detach().numpy(), pb.detach().numpy())


def test_state_dict_tensors_are_copies():
    p = hf.ones(2, requires_grad=True)
    opt = SGD([p], lr=0.1, momentum=0.9)
    p.grad = hf.ones(2)
    opt.step()
    sd = opt.state_dict()
    sd["state"][0]["momentum_buffer"].fill_(100.0)
    assert opt.state[p]["momentum_buffer"].tolist() == [1.0, 1.0]
    opt2 = SGD([p], lr=0.1, momentum=0.9)
    opt2.load_state_dict(sd)
    sd["state"][0]["momentum_buffer"].fill_(7.0)
    assert opt2.state[p]["momentum_buffer"].tolist() == [100.0, 100.0]


def test_load_state_dict_mismatch_errors():
    a, b = hf.ones(2, requires_grad=True), hf.ones(3, requires_grad=True)
    sd = Adam([a, b]).state_dict()
    with pytest.raises(ValueError, match="2 parameters in the state dict, 1 in the optimizer"):
        Adam([a]).load_state_dict(sd)
    with pytest.raises(ValueError, match="1 parameter groups, the optimizer 2"):
        Adam([{"params": [a]}, {"params": [b]}]).load_state_dict(sd)
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        Adam([a, b]).load_state_dict({"state": {}})
    opt = Adam([a, b])
    a.grad, b.grad = hf.ones(2), hf.ones(3)
    opt.step()
    sd = opt.state_dict()
    with pytest.raises(ValueError, match=r"state 'exp_avg' of parameter 0 has shape \(2,\)"):
        Adam([b, a]).load_state_dict(sd)


# ---- memory: no allocation per step -------------------------------------------------------
@contextlib.contextmanager
def no_gc():
    """Keep the cycle collector from freeing other tests' garbage while bytes are counted."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


ALL_VARIANTS = variants((SGD, SGD_CASES), (Adam, ADAM_CASES), (AdamW, ADAMW_CASES),
                        (RMSprop, RMSPROP_CASES), (Adagrad, ADAGRAD_CASES),
                        (NAdam, NADAM_CASES), (RAdam, RADAM_CASES),
                        (Adadelta, ADADELTA_CASES))


@pytest.mark.parametrize("cls, kw", ALL_VARIANTS)
def test_no_allocation_after_first_step(cls, kw):
    params = [hf.randn(64, 32, requires_grad=True), hf.randn(32, requires_grad=True),
              hf.randn(7, 3, dtype="float64", requires_grad=True)]
    for p in params:
        p.grad = hf.randn(*p.shape, dtype=p.dtype)
    opt = cls(params, **kw)
    opt.step()
    with no_gc():
        allocated, count = hf.memory.allocated(), hf.memory.stats()["allocation_count"]
        for _ in range(5):
            opt.step()
        assert hf.memory.allocated() == allocated
        assert hf.memory.stats()["allocation_count"] == count


def test_numpy_scalar_options_are_plain_numbers_and_allocate_nothing():
    p = hf.randn(10, requires_grad=True)
    p.grad = hf.randn(10)
    opt = Adam([p], lr=np.float32(0.01), betas=(np.float64(0.9), 0.99), weight_decay=np.int64(1))
    group = opt.param_groups[0]
    assert type(group["lr"]) is float and type(group["betas"][0]) is float
    assert type(group["weight_decay"]) is float
    opt.step()
    count = hf.memory.stats()["allocation_count"]
    opt.step()
    assert hf.memory.stats()["allocation_count"] == count


def test_scratch_space_is_shared_between_parameters_and_reserved():
    # Plain SGD keeps no state: the first step makes only the shared scratch buffer, 2
    # regions the size of the largest parameter (not a copy of every parameter), counted as
    # reserved memory: allocated() does not change, as PyTorch's does not.
    params = [hf.randn(100, 10, requires_grad=True) for _ in range(5)]
    for p in params:
        p.grad = hf.randn(100, 10)
    opt = SGD(params, lr=0.1)
    with no_gc():
        before, reserved = hf.memory.allocated(), hf.memory.stats()["reserved_bytes"]
        opt.step()
        assert hf.memory.allocated() == before
        assert hf.memory.stats()["reserved_bytes"] - reserved == 2 * 100 * 10 * 4
        del opt
        assert hf.memory.stats()["reserved_bytes"] == reserved


@pytest.mark.parametrize("cls, kw, state_copies", [(Adam, {}, 2), (AdamW, {}, 2),
                                                   (SGD, {"momentum": 0.9}, 1),
                                                   (RMSprop, {"centered": True}, 2)])
def test_allocated_after_a_step_is_parameters_gradients_and_state(cls, kw, state_copies):
    """What PyTorch's allocator reports too: each state tensor the size of its parameter."""
    with no_gc():
        base = hf.memory.allocated()
        model = hf.nn.Linear(10, 5)
        model(hf.randn(3, 10)).sum().backward()
        params = sum(p.numel() * 4 for p in model.parameters())
        assert hf.memory.allocated() - base == 2 * params
        opt = cls(model.parameters(), lr=0.01, **kw)
        opt.step()
        assert hf.memory.allocated() - base == (2 + state_copies) * params


# ---- lr schedulers ---------------------------------------------------------------------------
def _lrs(sched, opt, epochs):
    out = []
    for _ in range(epochs):
        out.append([g["lr"] for g in opt.param_groups])
        assert sched.get_last_lr() == out[-1]
        opt.step()
        sched.step()
    return out


def test_step_lr_sequence():
    p = hf.ones(1, requires_grad=True)
    opt = SGD([{"params": [p]}, {"params": [hf.ones(1, requires_grad=True)], "lr": 1.0}],
              lr=0.1)
    sched = StepLR(opt, step_size=3, gamma=0.5)
    got = _lrs(sched, opt, 10)
    for epoch, lrs in enumerate(got):
        np.testing.assert_allclose(lrs, [0.1 * 0.5 ** (epoch // 3), 1.0 * 0.5 ** (epoch // 3)],
                                   rtol=1e-15)


def test_cosine_annealing_sequence():
    p = hf.ones(1, requires_grad=True)
    opt = SGD([p], lr=0.1)
    t_max, eta_min = 5, 0.01
    sched = CosineAnnealingLR(opt, T_max=t_max, eta_min=eta_min)
    got = [lrs[0] for lrs in _lrs(sched, opt, 23)]
    # the recursive formula, computed by hand
    expected = [0.1]
    for t in range(1, 23):
        prev = expected[-1]
        if (t - 1 - t_max) % (2 * t_max) == 0:
            expected.append(prev + (0.1 - eta_min) * (1 - math.cos(math.pi / t_max)) / 2)
        else:
            expected.append((1 + math.cos(math.pi * t / t_max)) /
                            (1 + math.cos(math.pi * (t - 1) / t_max)) * (prev - eta_min)
                            + eta_min)
    np.testing.assert_allclose(got, expected, rtol=1e-15, atol=1e-17)
    # ... which follows the closed form, periodically
    closed = [eta_min + (0.1 - eta_min) * (1 + math.cos(math.pi * t / t_max)) / 2
              for t in range(23)]
    np.testing.assert_allclose(got, closed, rtol=1e-9, atol=1e-12)


def test_scheduler_state_dict_and_resume():
    p = hf.ones(1, requires_grad=True)
    opt = SGD([p], lr=0.1)
    sched = CosineAnnealingLR(opt, T_max=10)
    for _ in range(4):
        opt.step()
        sched.step()
    state = sched.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 4
    opt_state = opt.state_dict()

    p2 = hf.ones(1, requires_grad=True)
    opt2 = SGD([p2], lr=0.1)
    opt2.load_state_dict(opt_state)
    sched2 = CosineAnnealingLR(opt2, T_max=10)
    sched2.load_state_dict(state)
    for _ in range(3):
        sched.step()
        sched2.step()
        assert sched.get_last_lr() == sched2.get_last_lr()
    with pytest.raises(KeyError, match="initial_lr"):
        StepLR(SGD([p2], lr=0.1), step_size=2, last_epoch=3)


def test_scheduler_validation():
    opt = SGD([hf.ones(1, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="step_size must be a positive int, got 0"):
        StepLR(opt, step_size=0)
    with pytest.raises(ValueError, match="T_max"):
        CosineAnnealingLR(opt, T_max=-3)
    for bad in (True, "2", None):
        with pytest.raises(ValueError, match="step_size"):
            StepLR(opt, step_size=bad)
    with pytest.raises(TypeError, match="optimizer"):
        StepLR(object(), step_size=1)


def test_scheduler_periods_of_any_number_type():
    # as PyTorch: numpy ints and floats are periods too (step_size in // and %, T_max in cos)
    p = hf.ones(1, requires_grad=True)
    for step_size in (np.int64(2), 2.0):
        opt = SGD([p], lr=0.1)
        got = _lrs(StepLR(opt, step_size=step_size, gamma=0.1), opt, 5)
        np.testing.assert_allclose([g[0] for g in got], [0.1, 0.1, 0.01, 0.01, 0.001],
                                   rtol=1e-12)
    opt = SGD([p], lr=0.1)
    got = [g[0] for g in _lrs(CosineAnnealingLR(opt, T_max=2.5), opt, 4)]
    # the recursive formula by hand, T_max = 2.5
    expected = [0.1]
    for t in range(1, 4):
        if (t - 1 - 2.5) % 5 == 0:
            expected.append(expected[-1] + 0.1 * (1 - math.cos(math.pi / 2.5)) / 2)
        else:
            expected.append((1 + math.cos(math.pi * t / 2.5)) /
                            (1 + math.cos(math.pi * (t - 1) / 2.5)) * expected[-1])
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    np.testing.assert_allclose(got, [0.1, 0.06545085, 0.00954915, 0.00954915], rtol=1e-6)


def test_scheduler_stepped_before_the_optimizer_warns():
    p = hf.ones(1, requires_grad=True)
    opt = SGD([p], lr=0.1)
    sched = StepLR(opt, step_size=1)
    with pytest.warns(UserWarning, match="before the optimizer"):
        sched.step()
    opt = SGD([p], lr=0.1)
    sched = StepLR(opt, step_size=1)
    opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched.step()
        sched.step()


# ---- PyTorch's implementation keywords ------------------------------------------------------
TORCH_GROUP_KEYS = {  # sorted(torch.optim.X([...]).param_groups[0]) in torch 2.13, minus params
    SGD: ["dampening", "differentiable", "foreach", "fused", "lr", "maximize", "momentum",
          "nesterov", "weight_decay"],
    Adam: ["amsgrad", "betas", "capturable", "decoupled_weight_decay", "differentiable", "eps",
           "foreach", "fused", "lr", "maximize", "weight_decay"],
    AdamW: ["amsgrad", "betas", "capturable", "decoupled_weight_decay", "differentiable", "eps",
            "foreach", "fused", "lr", "maximize", "weight_decay"],
    RMSprop: ["alpha", "capturable", "centered", "differentiable", "eps", "foreach", "lr",
              "maximize", "momentum", "weight_decay"],
    Adagrad: ["differentiable", "eps", "foreach", "fused", "initial_accumulator_value", "lr",
              "lr_decay", "maximize", "weight_decay"],
    NAdam: ["betas", "capturable", "decoupled_weight_decay", "differentiable", "eps",
            "foreach", "lr", "maximize", "momentum_decay", "weight_decay"],
    RAdam: ["betas", "capturable", "decoupled_weight_decay", "differentiable", "eps",
            "foreach", "lr", "maximize", "weight_decay"],
    Adadelta: ["capturable", "differentiable", "eps", "foreach", "lr", "maximize", "rho",
               "weight_decay"],
}
IMPLEMENTATION_KW = {
    SGD: {"foreach": True, "fused": False, "differentiable": False},
    Adam: {"foreach": False, "fused": True, "capturable": True, "differentiable": False},
    AdamW: {"foreach": None, "fused": None, "capturable": False, "differentiable": False},
    RMSprop: {"foreach": True, "capturable": True, "differentiable": False},
    Adagrad: {"foreach": True, "fused": False, "differentiable": False},
    NAdam: {"foreach": False, "capturable": True, "differentiable": False},
    RAdam: {"foreach": True, "capturable": False, "differentiable": False},
    Adadelta: {"foreach": True, "capturable": True, "differentiable": False},
}


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW, RMSprop, Adagrad, NAdam, RAdam, Adadelta],
                         ids=lambda c: c.__name__)
def test_torch_implementation_keywords_are_accepted_and_change_nothing(cls):
    p0, c, d = problem(9)
    kw = {"lr": 0.05, "weight_decay": 0.1, "maximize": True}
    plain, _, _ = run_hf(cls, p0, c, d, **kw)
    traj, params, opt = run_hf(cls, p0, c, d, **kw, **IMPLEMENTATION_KW[cls])
    assert_traj(traj, plain, rtol=0, atol=0)
    assert sorted(k for k in opt.param_groups[0] if k != "params") == TORCH_GROUP_KEYS[cls]
    assert opt.param_groups[0]["maximize"] is True
    with pytest.raises(ValueError, match=f"{cls.__name__}: differentiable=True is not supported"):
        cls(params, lr=0.1, differentiable=True)
    with pytest.raises(TypeError, match="foreach must be True, False or None"):
        cls(params, lr=0.1, foreach="yes")
    with pytest.raises(ValueError, match="differentiable=True"):
        opt.add_param_group({"params": [hf.zeros(2, requires_grad=True)], "differentiable": True})


def test_rmsprop_takes_torchs_positional_order():
    p0, c, d = problem(10)
    params = [hf.tensor(p, dtype="float64", requires_grad=True) for p in p0]
    # params, lr, alpha, eps, weight_decay, momentum, centered, capturable, foreach, maximize
    opt = RMSprop(params, 0.01, 0.9, 1e-8, 0, 0, False, False, None, True)
    assert opt.param_groups[0]["maximize"] is True and opt.param_groups[0]["alpha"] == 0.9
    for p, ci, di in zip(params, c, d):
        p.grad = hf.tensor(ci * p.detach().numpy() + di)
    opt.step()
    ref = run_ref(rmsprop_ref, p0, c, d, steps=1, lr=0.01, alpha=0.9, maximize=True)
    assert_traj([[p.detach().numpy() for p in params]], ref)


@pytest.mark.parametrize("kw", ADAMW_CASES, ids=str)
def test_adam_decoupled_weight_decay_is_adamw(kw):
    p0, c, d = problem(11)
    kw = dict(kw, weight_decay=kw.get("weight_decay", 1e-2))
    traj, _, opt = run_hf(Adam, p0, c, d, decoupled_weight_decay=True, **kw)
    assert_traj(traj, run_ref(adam_ref, p0, c, d, decoupled=True, **kw))
    assert_traj(traj, run_hf(AdamW, p0, c, d, **kw)[0], rtol=0, atol=0)
    if kw["weight_decay"]:  # and not Adam's L2 penalty
        l2 = run_ref(adam_ref, p0, c, d, **kw)
        assert not np.allclose(traj[-1][0], l2[-1][0], rtol=1e-6, atol=0)
    assert AdamW([hf.zeros(1, requires_grad=True)]).param_groups[0]["decoupled_weight_decay"]
    sd = opt.state_dict()  # an AdamW-like Adam keeps the option through a state dict
    other = Adam([hf.zeros(s, dtype="float64", requires_grad=True) for s in
                  (p.shape for p in p0)], lr=kw["lr"])
    other.load_state_dict(sd)
    assert other.param_groups[0]["decoupled_weight_decay"] is True
    torch = pytest.importorskip("torch")
    tparams = [torch.tensor(p, requires_grad=True) for p in p0]
    topt = torch.optim.Adam(tparams, decoupled_weight_decay=True, **kw)
    for step in range(STEPS):
        for p, ci, di in zip(tparams, c, d):
            p.grad = torch.tensor(ci * p.detach().numpy() + di)
        topt.step()
    assert_traj([[p.detach().numpy() for p in tparams]], [traj[-1]], rtol=1e-12, atol=1e-14)


# ---- torch as an extra oracle -------------------------------------------------------------
@pytest.mark.parametrize("cls, kw", ALL_VARIANTS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_matches_torch(cls, kw, dtype):
    torch = pytest.importorskip("torch")
    name = cls.__name__  # torch.optim has the same names and arguments
    p0, c, d = problem(7)
    traj, _params, _opt = run_hf(cls, p0, c, d, steps=8, dtype=dtype, **kw)
    tparams = [torch.tensor(p, dtype=getattr(torch, dtype), requires_grad=True) for p in p0]
    topt = getattr(torch.optim, name)(tparams, **kw)
    for step in range(8):
        for p, ci, di in zip(tparams, c, d):
            p.grad = torch.tensor(ci * p.detach().numpy() + di, dtype=getattr(torch, dtype))
        topt.step()
        for p, mine in zip(tparams, traj[step]):
            tol = {"rtol": 1e-12, "atol": 1e-14} if dtype == "float64" else {"rtol": 2e-5,
                                                                                "atol": 2e-6}
            np.testing.assert_allclose(mine, p.detach().numpy(), **tol,
                                       err_msg=f"{name} {kw} step {step + 1}")


@pytest.mark.parametrize("cls, kw", variants((Adagrad, ADAGRAD_CASES), (NAdam, NADAM_CASES),
                                             (RAdam, RADAM_CASES)))
def test_adagrad_nadam_radam_match_torch_over_20_steps(cls, kw):
    torch = pytest.importorskip("torch")
    p0, c, d = problem(13)
    traj, _, _ = run_hf(cls, p0, c, d, steps=20, **kw)
    tparams = [torch.tensor(p, requires_grad=True) for p in p0]
    topt = getattr(torch.optim, cls.__name__)(tparams, **kw)
    for step in range(20):
        for p, ci, di in zip(tparams, c, d):
            p.grad = torch.tensor(ci * p.detach().numpy() + di)
        topt.step()
        assert_traj([[p.detach().numpy() for p in tparams]], [traj[step]], rtol=1e-12,
                    atol=1e-14)


@pytest.mark.parametrize("name, kw", [("Adam", {"lr": 0.05, "amsgrad": True}),
                                      ("RMSprop", {"lr": 0.01, "momentum": 0.5}),
                                      ("Adagrad", {"lr": 0.05, "lr_decay": 0.01}),
                                      ("NAdam", {"lr": 0.05, "momentum_decay": 0.01}),
                                      ("RAdam", {"lr": 0.05, "betas": (0.8, 0.9)})])
def test_loads_a_torch_optimizer_state_dict(name, kw):
    torch = pytest.importorskip("torch")
    p0, c, d = problem(8)
    tparams = [torch.tensor(p, requires_grad=True) for p in p0]
    topt = getattr(torch.optim, name)(tparams, **kw)
    params = [hf.tensor(p, dtype="float64", requires_grad=True) for p in p0]
    opt = getattr(hf.optim, name)(params, **kw)
    for step in range(6):
        if step == 3:  # hand torch's state over midway
            for p, tp in zip(params, tparams):
                p.data = hf.tensor(tp.detach().numpy())
            opt.load_state_dict(topt.state_dict())
            assert opt.state[params[0]]["step"] == 3
        for p, tp, ci, di in zip(params, tparams, c, d):
            tp.grad = torch.tensor(ci * tp.detach().numpy() + di)
            p.grad = hf.tensor(ci * p.detach().numpy() + di)
        topt.step()
        if step >= 3:
            opt.step()
            for p, tp in zip(params, tparams):
                np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(),
                                           rtol=1e-12, atol=1e-14)


def test_schedulers_match_torch():
    torch = pytest.importorskip("torch")
    for make_hf, make_torch in [
        (lambda o: StepLR(o, 4, gamma=0.3), lambda o: torch.optim.lr_scheduler.StepLR(o, 4, 0.3)),
        (lambda o: CosineAnnealingLR(o, 7, eta_min=1e-3),
         lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 7, eta_min=1e-3)),
    ]:
        opt = SGD([hf.ones(1, requires_grad=True)], lr=0.2)
        topt = torch.optim.SGD([torch.ones(1, requires_grad=True)], lr=0.2)
        sched, tsched = make_hf(opt), make_torch(topt)
        for _ in range(30):
            assert sched.get_last_lr() == pytest.approx(tsched.get_last_lr(), rel=1e-14)
            opt.step()
            topt.step()
            sched.step()
            tsched.step()


def test_optimizer_takes_named_parameters():
    # as PyTorch 2.13: (name, tensor) pairs; the names are kept in the group and its state
    model = hf.nn.Sequential(hf.nn.Linear(2, 3), hf.nn.ReLU(), hf.nn.Linear(3, 1))
    opt = Adam(model.named_parameters(), lr=0.01)
    group = opt.param_groups[0]
    assert group["param_names"] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert [id(p) for p in group["params"]] == [id(p) for p in model.parameters()]
    model(hf.ones(4, 2)).sum().backward()
    opt.step()
    state = opt.state_dict()
    assert state["param_groups"][0]["param_names"] == group["param_names"]
    assert state["param_groups"][0]["params"] == [0, 1, 2, 3]
    again = Adam(model.named_parameters(), lr=0.01)
    again.load_state_dict(state)
    assert again.param_groups[0]["param_names"] == group["param_names"]
    opt2 = SGD([{"params": model[0].named_parameters(), "lr": 0.5}], lr=0.1)
    assert opt2.param_groups[0]["param_names"] == ["weight", "bias"]
    assert opt2.param_groups[0]["lr"] == 0.5
