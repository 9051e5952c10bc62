"""Variations on the conversion catalogue that real model code writes: converted == eager
(values and gradients), one program per input signature."""
import numpy as np
import pytest

import hybridfw as hf


def _check(fn, calls, programs=1):
    """Call ``fn`` eagerly and converted on each argument tuple of ``calls`` (float lists become
    float64 tensors requiring grad); results, and the gradients of their sum, must agree."""
    static = hf.jit.to_static(fn)

    def run(f, args):
        args = [hf.tensor(a, dtype=hf.float64, requires_grad=True) if isinstance(a, list)
                and isinstance(a[0], (float, list)) else a for a in args]
        out = f(*args)
        out.sum().backward()
        return out.detach().numpy(), [a.grad.numpy() for a in args
                                      if isinstance(a, hf.Tensor) and a.requires_grad]

    for args in calls:
        value, grads = run(fn, args)
        got, got_grads = run(static, args)
        np.testing.assert_allclose(got, value)
        assert len(got_grads) == len(grads)
        for g, e in zip(got_grads, grads):
            np.testing.assert_allclose(g, e)
    assert static.cache_info().misses == programs


# ---- lists grown in loops a tensor decides ---------------------------------------------------
def stack_list_plus_list(x, n):
    out = []
    for i in range(n):
        out.append(x * i)
    return hf.stack(out + [x] + [x * 2])


def stack_list_iadd(x, n):
    out = [x]
    for i in range(n):
        out += [x * i, x + i]
    return hf.stack([x * 3] + out)


def stack_list_insert(x, n):
    out = [x]
    for i in range(n):
        out.insert(len(out), x * i)   # at the end
        out.insert(0, x + i)          # at the front
        out.insert(-1, x - i)         # before the last item
    return hf.stack(out)


@pytest.mark.parametrize("fn", [stack_list_plus_list, stack_list_iadd, stack_list_insert])
def test_list_grown_in_tensor_loop_concatenates_and_inserts(fn):
    _check(fn, [([1.0, 2.0], hf.tensor(3)), ([1.0, -2.0], hf.tensor(0)),
                ([0.5, 2.0], hf.tensor(1))])
