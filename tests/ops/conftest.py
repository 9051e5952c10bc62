"""Helpers shared by the op tests."""
import numpy as np
import pytest

import hybridfw as hf


def check_matches_torch(run, call):
    """``run(module, call)`` with torch and with hybridfw give equal values and dtypes (skipped
    without torch)."""
    torch = pytest.importorskip("torch")
    got, ours = run(torch, call), run(hf, call)
    np.testing.assert_array_equal(got.numpy(), ours.numpy())
    assert str(got.dtype).split(".")[-1] == str(ours.dtype).split(".")[-1]


def check_static_equals_eager(f, names, make_env):
    """``f(*arguments)`` (a scalar) and the gradients of its ``names`` arguments, taken from a
    fresh ``make_env()`` dict each time, are equal eagerly and through ``hf.jit.to_static``."""
    env = make_env()
    eager = f(*[env[n] for n in names])
    eager.backward()
    grads = {n: env[n].grad.numpy().copy() for n in names}
    env = make_env()
    static = hf.jit.to_static(f)(*[env[n] for n in names])
    np.testing.assert_allclose(static.detach().numpy(), eager.detach().numpy(), rtol=1e-12)
    static.backward()
    for n in names:
        np.testing.assert_allclose(env[n].grad.numpy(), grads[n], rtol=1e-10, atol=1e-14)
