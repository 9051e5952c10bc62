"""F.mish hardswish hardsigmoid selu celu glu softmin softsign tanhshrink threshold and their
modules (and LogSigmoid) against PyTorch: values, dtypes, gradients (including PyTorch's
gradients at the kinks), in-place forms, eagerly and under ``hf.jit.to_static``."""
import numpy as np
import pytest

import hybridfw as hf
import hybridfw.nn.functional as F

torch = pytest.importorskip("torch")
# every kink of these functions (-3, 0, 3, the threshold 0.5), tails and random values
X = np.concatenate([[-30.0, -3.0, -1.0, 0.0, 0.5, 1.0, 3.0, 25.0],
                    np.random.default_rng(0).standard_normal(16) * 3]).reshape(4, 6)

CALLS = [
    ("F.mish(x)", "nn.Mish()"),
    ("F.hardswish(x)", "nn.Hardswish()"),
    ("F.hardsigmoid(x)", "nn.Hardsigmoid()"),
    ("F.selu(x)", "nn.SELU()"),
    ("F.celu(x)", "nn.CELU()"),
    ("F.celu(x, alpha=0.5)", "nn.CELU(0.5)"),
    ("F.glu(x)", "nn.GLU()"),
    ("F.glu(x, dim=0)", "nn.GLU(0)"),
    ("F.softmin(x, dim=1)", "nn.Softmin(1)"),
    ("F.softmin(x, 0)", "nn.Softmin(dim=0)"),
    ("F.softsign(x)", "nn.Softsign()"),
    ("F.tanhshrink(x)", "nn.Tanhshrink()"),
    ("F.threshold(x, 0.5, -2.0)", "nn.Threshold(0.5, -2.0)"),
    ("F.logsigmoid(x)", "nn.LogSigmoid()"),
]


def _run(lib, call, x):
    return eval(call, {"F": lib.nn.functional, "nn": lib.nn, "x": x})


@pytest.mark.parametrize("functional, module", CALLS)
def test_matches_torch(functional, module):
    weights = np.random.default_rng(1).standard_normal(_run(torch, functional,
                                                            torch.tensor(X)).shape)
    tx = torch.tensor(X, requires_grad=True)
    want = _run(torch, functional, tx)
    (want * torch.tensor(weights)).sum().backward()
    for call in (functional, module + "(x)"):
        x = hf.tensor(X, requires_grad=True)
        got = _run(hf, call, x)
        assert got.dtype is hf.float64 and got.shape == tuple(want.shape)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12,
                                   atol=1e-300)
        (got * hf.tensor(weights)).sum().backward()
        # (PyTorch's float64 hardsigmoid gradient is float32's 1/6; ELU-like tails differ by
        # rounding)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-7, atol=1e-15)
    # float32
    got = _run(hf, functional, hf.tensor(X, "float32"))
    want32 = _run(torch, functional, torch.tensor(X, dtype=torch.float32))
    assert got.dtype is hf.float32
    np.testing.assert_allclose(got.numpy(), want32.numpy(), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("call", ["F.mish(x, inplace=True)", "F.hardswish(x, True)",
                                  "F.hardsigmoid(x, inplace=True)", "F.selu(x, True)",
                                  "F.celu(x, 2.0, True)", "F.threshold(x, 0.5, 7.0, True)",
                                  "nn.SELU(inplace=True)(x)"])
def test_inplace(call):
    want = _run(torch, call, torch.tensor(X))
    x = hf.tensor(X)
    got = _run(hf, call, x)
    np.testing.assert_allclose(x.numpy(), want.numpy(), rtol=1e-12)
    assert got is x
    # through a non-leaf with gradients: the gradient of the out-of-place form
    leaf = hf.tensor(X, requires_grad=True)
    y = leaf * 1.0
    _run(hf, call, y).sum().backward()
    tleaf = torch.tensor(X, requires_grad=True)
    _run(torch, call, tleaf * 1.0).sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), tleaf.grad.numpy(), rtol=1e-7, atol=1e-15)


def test_to_static_forward_and_backward():
    net = hf.nn.Sequential(hf.nn.Linear(6, 8), hf.nn.Mish(), hf.nn.Hardswish(), hf.nn.SELU(),
                           hf.nn.CELU(0.7), hf.nn.Softsign(), hf.nn.Tanhshrink(),
                           hf.nn.Threshold(0.01, -1.0), hf.nn.GLU(), hf.nn.Hardsigmoid(),
                           hf.nn.LogSigmoid(), hf.nn.Softmin(1)).double()
    x = hf.tensor(X)
    eager = net(x)
    eager.sum().backward()
    grads = [p.grad.numpy().copy() for p in net.parameters()]
    net.zero_grad()
    static = hf.jit.to_static(net)
    out = static(x)
    np.testing.assert_allclose(out.detach().numpy(), eager.detach().numpy(), rtol=1e-12)
    out.sum().backward()
    for p, g in zip(net.parameters(), grads):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-10, atol=1e-14)


def test_threshold_keeps_integer_dtype():
    got = F.threshold(hf.tensor([1, 2, 3]), 1.5, 7.5)
    assert got.dtype is hf.int64 and got.tolist() == [7, 2, 3]


def test_errors():
    with pytest.raises(ValueError, match="even"):
        F.glu(hf.ones(3, 3))
    with pytest.raises(ValueError, match="0-d"):
        F.glu(hf.tensor(1.0))
    with pytest.raises(ValueError, match="alpha"):
        F.celu(hf.ones(2), alpha=0.0)
    for fn in (F.mish, F.hardswish, F.hardsigmoid, F.selu, F.celu, F.glu):
        with pytest.raises(TypeError, match="floating-point"):
            fn(hf.tensor([1, 2]))


@pytest.mark.parametrize("module", ["Mish()", "Mish(inplace=True)", "Hardswish(True)",
                                    "Hardsigmoid(True)", "SELU(True)", "CELU(0.5, True)",
                                    "GLU()", "GLU(0)", "Softmin(1)", "Softsign()",
                                    "Tanhshrink()", "Threshold(0.1, 20)",
                                    "Threshold(0.1, 20.0, True)", "LogSigmoid()"])
def test_repr_matches_torch(module):
    assert repr(eval("hf.nn." + module)) == repr(eval("torch.nn." + module))


def test_silu_module_inplace():
    x = hf.tensor([1.0, -1.0])
    out = hf.nn.SiLU(inplace=True)(x)
    assert out is x
    np.testing.assert_allclose(x.numpy(), [0.7310585786, -0.2689414214], rtol=1e-7)
    assert repr(hf.nn.SiLU(inplace=True)) == "SiLU(inplace=True)"


def test_glu_along_a_run_time_dim_names_the_real_problem():
    # the halved dim's size is unknown while building (-1): not "must be even"
    g = hf.jit.to_static(lambda x: F.glu(x, 1), input_spec=[hf.jit.InputSpec([2, None])])
    with pytest.raises(ValueError, match="only known when the program runs"):
        g(hf.ones(2, 4))
    ok = hf.jit.to_static(lambda x: F.glu(x, 1), input_spec=[hf.jit.InputSpec([None, 4])])
    np.testing.assert_allclose(ok(hf.ones(3, 4)).numpy(), np.full((3, 2), 0.7310586),
                               rtol=1e-6)
