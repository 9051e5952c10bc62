"""optim.Adadelta against torch.optim.Adadelta: several steps, options, state layout."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.optim import Adadelta


def _problem(dtype):
    rng = np.random.default_rng(0)
    params = [rng.standard_normal(s).astype(dtype) for s in ((3, 4), (5,))]
    targets = [rng.standard_normal(p.shape).astype(dtype) for p in params]
    return params, targets


def _trajectory(lib, make_opt, params, targets, steps):
    """Parameters after each of ``steps`` steps; the gradient, of sum(0.3 (p - t)^2 +
    sin(p t)), is computed in numpy, so both libraries' steps see the same one."""
    ps = [lib.tensor(p.copy(), requires_grad=True) for p in params]
    opt = make_opt(ps)
    out = []
    for _ in range(steps):
        for p, t in zip(ps, targets):
            x = p.detach().numpy()
            p.grad = lib.tensor(0.6 * (x - t) + np.cos(x * t) * t)
        opt.step()
        out.append([p.detach().numpy().copy() for p in ps])
    return out, opt


@pytest.mark.parametrize("kw", [{}, {"lr": 0.5, "rho": 0.8, "eps": 1e-4},
                                {"weight_decay": 0.1}, {"maximize": True, "weight_decay": 0.05},
                                {"rho": 0.0}, {"rho": 1.0}])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_steps_match_torch(kw, dtype):
    torch = pytest.importorskip("torch")
    params, targets = _problem(dtype)
    ours, opt = _trajectory(hf, lambda ps: Adadelta(ps, **kw), params, targets, 6)
    theirs, ref = _trajectory(torch, lambda ps: torch.optim.Adadelta(ps, **kw), params,
                              targets, 6)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-12, err_msg=f"step {step}")
    ours_state, theirs_state = opt.state_dict(), ref.state_dict()
    assert ours_state["param_groups"] == theirs_state["param_groups"]
    for i, st in theirs_state["state"].items():
        assert list(ours_state["state"][i]) == list(st) == ["step", "square_avg", "acc_delta"]
        assert ours_state["state"][i]["step"] == int(st["step"])
        for name in ("square_avg", "acc_delta"):
            np.testing.assert_allclose(ours_state["state"][i][name].numpy(), st[name].numpy(),
                                       rtol=1e-6, atol=1e-12)


def test_param_groups_and_state_dict_round_trip():
    torch = pytest.importorskip("torch")
    params, targets = _problem(np.float64)

    def groups(ps):
        return [{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.3, "rho": 0.5}]

    ours, opt = _trajectory(hf, lambda ps: Adadelta(groups(ps), weight_decay=0.01), params,
                            targets, 3)
    theirs, _ = _trajectory(torch, lambda ps: torch.optim.Adadelta(groups(ps),
                                                                   weight_decay=0.01),
                            params, targets, 3)
    for x, y in zip(ours[-1], theirs[-1]):
        np.testing.assert_allclose(x, y, rtol=1e-6)
    saved = opt.state_dict()
    ps = [hf.tensor(p, requires_grad=True) for p in ours[-1]]
    restored = Adadelta(groups(ps), weight_decay=0.01)
    restored.load_state_dict(saved)
    assert restored.state_dict()["param_groups"] == saved["param_groups"]
    assert restored.state[ps[1]]["step"] == 3


@pytest.mark.parametrize("kw, match", [({"lr": -1.0}, "lr"), ({"rho": 1.5}, "rho"),
                                       ({"eps": -1e-6}, "eps"),
                                       ({"weight_decay": -0.1}, "weight_decay")])
def test_invalid_options_are_refused(kw, match):
    with pytest.raises(ValueError, match=rf"Adadelta: invalid {match}="):
        Adadelta([hf.zeros(2, requires_grad=True)], **kw)
