"""Optimizer.register_step_pre_hook / register_step_post_hook, as torch's."""
import pytest

import hybridfw as hf


def sgd():
    w = hf.ones(2, requires_grad=True)
    w.grad = hf.ones(2)
    return w, hf.optim.SGD([w], lr=0.1)


def test_hooks_run_around_step_in_order_and_are_removable():
    w, opt = sgd()
    seen = []
    pre = opt.register_step_pre_hook(
        lambda o, args, kwargs: seen.append(("pre", o is opt, args[0] is opt, kwargs,
                                             round(w.tolist()[0], 6))))
    post = opt.register_step_post_hook(
        lambda o, args, kwargs: seen.append(("post", o is opt, len(args), kwargs,
                                             round(w.tolist()[0], 6))))
    opt.step()
    opt.step(closure=None)
    assert seen == [("pre", True, True, {}, 1.0), ("post", True, 1, {}, 0.9),
                    ("pre", True, True, {"closure": None}, 0.9),
                    ("post", True, 1, {"closure": None}, 0.8)]
    pre.remove()
    opt.step()
    assert [s[0] for s in seen[4:]] == ["post"]
    post.remove()
    opt.step()
    assert len(seen) == 5
    pre.remove()  # twice is harmless


def test_pre_hook_can_replace_arguments():
    w, opt = sgd()
    calls = []

    def closure():
        calls.append(1)
        return hf.tensor(3.0)

    opt.register_step_pre_hook(lambda o, args, kwargs: (args, {"closure": closure}))
    got = []
    opt.register_step_post_hook(lambda o, args, kwargs: got.append(kwargs["closure"]))
    assert float(opt.step()) == 3.0
    assert calls == [1] and got == [closure]


def test_bad_pre_hook_result_raises():
    _, opt = sgd()
    opt.register_step_pre_hook(lambda o, args, kwargs: "nope")
    with pytest.raises(RuntimeError, match="SGD.step: a pre-hook must return None or a tuple"):
        opt.step()


def test_hooks_run_once_for_an_overriding_step():
    class Counting(hf.optim.SGD):
        def step(self, closure=None):
            self.calls = getattr(self, "calls", 0) + 1
            return super().step(closure)

    w = hf.ones(2, requires_grad=True)
    w.grad = hf.ones(2)
    opt = Counting([w], lr=0.5)
    seen = []
    opt.register_step_pre_hook(lambda o, args, kwargs: seen.append("pre"))
    opt.register_step_post_hook(lambda o, args, kwargs: seen.append("post"))
    opt.step()
    assert seen == ["pre", "post"] and opt.calls == 1
    assert w.tolist() == [0.5, 0.5]


def test_hook_arguments_match_torch():
    torch = pytest.importorskip("torch")
    logs = []
    for lib in (hf, torch):
        w = lib.ones(2, requires_grad=True)
        w.grad = lib.ones(2)
        opt = lib.optim.SGD([w], lr=0.1)
        log = []
        opt.register_step_pre_hook(lambda o, a, k, log=log: log.append((len(a), dict(k))))
        opt.register_step_post_hook(lambda o, a, k, log=log: log.append((len(a), dict(k))))
        opt.step()
        opt.step(None)
        opt.step(closure=None)
        logs.append(log)
    assert logs[0] == logs[1]
