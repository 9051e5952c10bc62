"""asserts: ``assert test, msg`` -> ``_jst.convert_assert(test, lambda: msg)``.

PYTEST_DONT_REWRITE: the user-level asserts under test keep Python's own messages.
"""

import gast
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.converter.testing import run_transforms
from hybridfw.converter.transformers import asserts


def convert(source: str):
    return run_transforms(source, asserts.transform)


def calls_of(node, helper="convert_assert"):
    return [n for n in gast.walk(node) if isinstance(n, gast.Call) and
            isinstance(n.func, gast.Attribute) and n.func.attr == helper and
            getattr(n.func.value, "id", None) == "_jst"]


def t(*values):
    return hf.tensor(list(values), dtype=hf.float64)


def test_assert_with_message():
    node, text = convert("def f(x):\n    assert x > 0, 'x must be positive'\n    return x")
    assert "_jst.convert_assert((x > 0), (lambda : 'x must be positive'))" in text
    assert not [n for n in gast.walk(node) if isinstance(n, gast.Assert)]
    (call,) = calls_of(node)
    thunk = call.args[1]
    assert isinstance(thunk, gast.Lambda) and not thunk.args.args


def test_assert_without_message_gets_a_none_thunk():
    _, text = convert("def f(x):\n    assert x\n")
    assert "_jst.convert_assert(x, (lambda : None))" in text


def test_message_expression_kept_whole_inside_the_thunk():
    _, text = convert("def f(x):\n    assert x.sum() > 0, f'bad {x}' + describe(x)\n")
    assert "(lambda : (f'bad {x}' + describe(x)))" in text


def test_asserts_in_nested_blocks_and_functions():
    node, _ = convert("""
        def f(xs):
            for x in xs:
                if x:
                    assert x > 1
            def inner(y):
                assert y, 'inner'
            return inner
    """)
    assert len(calls_of(node)) == 2
    assert not [n for n in gast.walk(node) if isinstance(n, gast.Assert)]


def test_location_of_the_assert_kept():
    node, _ = convert("def f(x):\n    y = 1\n    assert x > 0, 'm'\n")
    stmt = node.body[1]
    assert isinstance(stmt, gast.Expr)
    for sub in gast.walk(stmt):
        if hasattr(sub, "lineno"):
            assert sub.lineno == 3, type(sub).__name__


# ---- end to end ----------------------------------------------------------------------------
class Boom(Exception):
    pass


def message_that_raises():
    raise Boom("the message was built although the assert passed")


def assert_python(a):
    assert a > 0, message_that_raises()
    return a * 2


def assert_python_message(a):
    assert a > 0, f"a is {a}"
    return a


def test_python_value_assert_builds_the_message_only_on_failure():
    f = hf.jit.to_static(assert_python)
    assert f(3) == assert_python(3) == 6
    with pytest.raises(Boom):
        f(-1)
    with pytest.raises(AssertionError, match=r"^a is -2\n"):
        hf.jit.to_static(assert_python_message)(-2)


def assert_tensor(x):
    assert x.sum() > 0, "sum must be positive"
    return x * 2


def assert_tensor_no_message(x):
    y = x + 1
    assert (y > 0).all()
    return y


def test_tensor_assert_checked_on_every_run():
    f = hf.jit.to_static(assert_tensor)
    np.testing.assert_allclose(f(t(1.0, 2.0)).numpy(), assert_tensor(t(1.0, 2.0)).numpy())
    with pytest.raises(AssertionError, match="sum must be positive"):
        assert_tensor(t(-1.0, -2.0))
    with pytest.raises(AssertionError, match="sum must be positive"):
        f(t(-1.0, -2.0))  # same signature: the traced program checks it when it runs
    assert f.cache_info().misses == 1
    np.testing.assert_allclose(f(t(3.0, 0.0)).numpy(), [6.0, 0.0])


def test_tensor_assert_without_message():
    f = hf.jit.to_static(assert_tensor_no_message)
    np.testing.assert_allclose(f(t(0.0, 1.0)).numpy(), [1.0, 2.0])
    with pytest.raises(AssertionError):
        f(t(0.0, -5.0))
