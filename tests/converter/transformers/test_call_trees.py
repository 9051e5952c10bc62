"""call_trees: calls go through ``_jst.convert_call``, zero-argument ``super()`` becomes
``super(__class__, self)``, ``with`` items go through ``_jst.convert_with``."""
import contextlib
import functools

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.converter import UnsupportedConstructError
from hybridfw.converter.testing import run_transforms
from hybridfw.converter.transformers import call_trees


def convert(source: str):
    return run_transforms(source, call_trees.transform)


def body_text(source: str) -> list:
    _, text = convert(source)
    return [line.strip() for line in text.splitlines()[1:] if line.strip()]


def t(*values):
    return hf.tensor(list(values), dtype=hf.float64)


# ---- structure -----------------------------------------------------------------------------
def test_call_wrapped_with_arguments_kept():
    assert body_text("def f(x):\n    return g(x, 1, *rest, key=x, **kw)") == \
        ["return _jst.convert_call(g)(x, 1, *rest, key=x, **kw)"]


def test_nested_and_method_calls_all_wrapped():
    assert body_text("def f(x):\n    return g(h(x).sum(), x.mean())") == \
        [("return _jst.convert_call(g)(_jst.convert_call(_jst.convert_call(h)(x).sum)(), "
          "_jst.convert_call(x.mean)())")]


def test_calls_of_call_results_and_in_lambdas():
    assert body_text("def f(x):\n    return make()(x)") == \
        ["return _jst.convert_call(_jst.convert_call(make)())(x)"]
    assert body_text("def f(xs):\n    return map(lambda v: g(v), xs)") == \
        ["return _jst.convert_call(map)((lambda v: _jst.convert_call(g)(v)), xs)"]


def test_runtime_helper_calls_left_alone():
    assert body_text("def f(x):\n    return _jst.convert_len(x)") == \
        ["return _jst.convert_len(x)"]


def test_zero_argument_super_gets_class_and_first_parameter():
    _, text = convert("""
        def forward(self, x):
            y = super().forward(x)
            return super(Other, self).forward(y)
    """)
    assert "_jst.convert_call(super(__class__, self).forward)(x)" in text
    # an explicit super is an ordinary call
    assert "_jst.convert_call(_jst.convert_call(super)(Other, self).forward)(y)" in text


def test_super_uses_the_first_parameter_whatever_its_name():
    assert body_text("def build(cls):\n    return super().build()") == \
        ["return _jst.convert_call(super(__class__, cls).build)()"]


def test_super_without_a_first_parameter_left_alone():
    assert body_text("def f():\n    return super().g()") == \
        ["return _jst.convert_call(super().g)()"]
    _, text = convert("def f(self):\n    h = lambda: super().g()\n    return h")
    assert "(lambda : _jst.convert_call(super().g)())" in text


def test_super_in_a_nested_function_uses_that_functions_parameter():
    _, text = convert("""
        def method(self):
            def inner(other):
                return super().g()
            return super().g()
    """)
    assert "super(__class__, other).g" in text
    assert "super(__class__, self).g" in text


def test_with_items_wrapped():
    _, text = convert("""
        def f(x, m):
            with hf.no_grad(), m as (a, b):
                y = x
            return y
    """)
    assert "with _jst.convert_with(_jst.convert_call(hf.no_grad)()), _jst.convert_with(m) " \
           "as (a, b):" in text


def test_location_of_the_call_kept():
    node, _ = convert("def f(x):\n    pass\n    y = g(x)\n")
    call = node.body[1].value
    assert call.func.lineno == 3 and call.func.func.lineno == 3


# ---- end to end ----------------------------------------------------------------------------
def helper_with_tensor_if(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def calls_helper(x):
    y = helper_with_tensor_if(x)
    return helper_with_tensor_if(-y)


def test_user_functions_called_are_converted_too():
    f = hf.jit.to_static(calls_helper)
    for x in (t(1.0, 2.0), t(-1.0, -2.0), t(3.0, -5.0)):
        np.testing.assert_allclose(f(x).numpy(), calls_helper(x).numpy())
    assert f.cache_info().misses == 1  # the helper's if is in the program, decided at run time


class Base(hf.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


class Child(Base):
    def forward(self, x):
        y = super().forward(x)
        return y + 1


def test_super_in_a_module_method():
    net = Child()
    f = hf.jit.to_static(net)
    for x in (t(1.0, 2.0), t(-1.0, -2.0)):
        np.testing.assert_allclose(f(x).numpy(), net(x).numpy())


def no_grad_block(x):
    with hf.no_grad():
        y = x * 2
    return y + 1


def test_known_context_manager_allowed():
    f = hf.jit.to_static(no_grad_block)
    np.testing.assert_allclose(f(t(1.0, 2.0)).numpy(), [3.0, 5.0])


class SomeContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def some_context():
    return SomeContext()


def unknown_context_block(x):
    with some_context():
        y = x * 2
    return y


def test_unknown_context_manager_refused():
    with pytest.raises(UnsupportedConstructError, match="with"):
        hf.jit.to_static(unknown_context_block)(t(1.0))


def builtins_and_numpy(x, n):
    total = x * 0
    for i in range(len(x)):
        total = total + x[i] * float(n)
    return total + np.float64(2.0)


def test_builtins_through_convert_call():
    f = hf.jit.to_static(builtins_and_numpy)
    np.testing.assert_allclose(f(t(1.0, 2.0), 3).numpy(),
                               builtins_and_numpy(t(1.0, 2.0), 3).numpy())


def double_result(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args) * 2
    return wrapper


@double_result
def decorated(a):
    return a + 1


def calls_decorated(a):
    return decorated(a)


def test_call_of_a_decorated_user_function_keeps_the_decorator():
    assert calls_decorated(1) == 4
    assert hf.jit.to_static(calls_decorated)(1) == 4


@contextlib.contextmanager
def user_contextmanager():
    yield


def with_user_contextmanager(x):
    with user_contextmanager():
        y = x * 2
    return y


def test_user_contextmanager_refused_as_a_with():
    with pytest.raises(UnsupportedConstructError, match="'with' on the context manager"):
        hf.jit.to_static(with_user_contextmanager)(t(1.0))
