"""``global``/``nonlocal`` assignments and ``del`` inside converted if/while/for bodies.

The bodies become nested functions; a name the user's function declares global or nonlocal
stays so there (it used to become a local of the nested function: UnboundLocalError), and a
tensor-decided construct that assigns one is refused by name (its body is traced once, so the
assignment could not happen per call). A name deleted in a body is unbound afterwards, as in
Python, instead of failing inside the generated code."""
import warnings

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.converter import ConversionError, UnsupportedConstructError

calls = 0
seen = []


def count_python_branch(x, flag):
    global calls
    if flag:
        calls = calls + 1
        y = x * 2
    else:
        y = x
    return y


def test_global_assigned_under_python_condition_runs_as_python():
    global calls
    calls = 0
    f = hf.jit.to_static(count_python_branch)
    np.testing.assert_allclose(f(hf.ones(2), True).numpy(), [2.0, 2.0])
    assert calls == 1  # the trace ran the branch once
    np.testing.assert_allclose(f(hf.ones(2), False).numpy(), [1.0, 1.0])
    assert calls == 1


def count_in_python_loop(x, n):
    global calls
    for _ in range(n):
        calls += 1
        x = x + 1
    k = 0
    while k < n:
        calls += 10
        k += 1
    return x


def test_global_assigned_in_python_loops():
    global calls
    calls = 0
    out = hf.jit.to_static(count_in_python_loop)(hf.zeros(2), 3)
    np.testing.assert_allclose(out.numpy(), [3.0, 3.0])
    assert calls == 33


def count_tensor_branch(x):
    global calls
    if x.sum() > 0:
        calls = calls + 1
        y = x * 2
    else:
        y = x
    return y


def count_tensor_while(x):
    global calls
    while x.sum() < 10:
        x = x + 1
        calls += 1
    return x


def count_tensor_for(x):
    global calls
    for row in x:
        calls += 1
    return x


@pytest.mark.parametrize("fn, construct", [(count_tensor_branch, "an if"),
                                           (count_tensor_while, "a while loop"),
                                           (count_tensor_for, "a for loop over a tensor")])
def test_global_assigned_under_tensor_control_flow_is_refused_by_name(fn, construct):
    global calls
    calls = 0
    with pytest.raises(UnsupportedConstructError) as info:
        hf.jit.to_static(fn)(hf.ones(2, 2))
    message = str(info.value)
    assert "'calls'" in message and construct in message and __file__ in message
    assert calls == 0  # refused before the body was traced
    # full_graph=False runs it eagerly: the global counts each call, as in Python
    g = hf.jit.to_static(fn, full_graph=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = fn(hf.ones(2, 2))
        calls_eager = calls
        out = g(hf.ones(2, 2))
        g(hf.ones(2, 2))
    np.testing.assert_allclose(out.numpy(), eager.numpy())
    assert calls == 3 * calls_eager > 0


def make_counter():
    count = 0

    def step(x, flag):
        nonlocal count
        if flag:
            count += 1
        return x + count

    def read():
        return count
    return step, read


def test_nonlocal_assigned_under_python_condition_writes_the_closure():
    step, read = make_counter()
    f = hf.jit.to_static(step)
    np.testing.assert_allclose(f(hf.zeros(2), True).numpy(), [1.0, 1.0])
    assert read() == 1


def make_tensor_counter():
    count = 0

    def step(x):
        nonlocal count
        if x.sum() > 0:
            count += 1
        return x
    return step


def test_nonlocal_assigned_under_tensor_condition_is_refused():
    with pytest.raises(ConversionError, match="'count'"):
        hf.jit.to_static(make_tensor_counter())(hf.ones(2))


def delete_in_tensor_branch(x):
    y = x * 2
    if x.sum() > 0:
        del y
        return x
    return y


def delete_in_python_branch(x, flag):
    y = x * 2
    z = x + 1
    if flag:
        del y
    else:
        del z
    return z if flag else y


def delete_then_use(x):
    y = x * 2
    if x.sum() > 0:
        del y
    return y


def test_del_in_branches_unbinds_as_python():
    f = hf.jit.to_static(delete_in_tensor_branch)
    np.testing.assert_allclose(f(hf.ones(2)).numpy(), [1.0, 1.0])
    np.testing.assert_allclose(f(-hf.ones(2)).numpy(), [-2.0, -2.0])
    g = hf.jit.to_static(delete_in_python_branch)
    np.testing.assert_allclose(g(hf.ones(2), True).numpy(), [2.0, 2.0])
    np.testing.assert_allclose(g(hf.ones(2), False).numpy(), [2.0, 2.0])
    with pytest.raises(UnboundLocalError, match="'y'"):
        hf.jit.to_static(delete_then_use)(hf.ones(2))
