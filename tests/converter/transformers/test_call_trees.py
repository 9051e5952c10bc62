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


@double_result
def decorated_branch(x):
    if x.sum() > 0:
        return x * 3
    return x - 1


def scaled_branch(x, scale=1.0):
    if x.sum() > 0:
        return x * scale
    return x - scale


scaled_twice = functools.partial(scaled_branch, scale=2.0)


def calls_wrapped_and_partial(x):
    return decorated_branch(x) + scaled_twice(x) * x


def _check_both_paths(fn):
    """``to_static(fn)`` against eager, values and gradients, on inputs taking each path of one
    cached program."""
    static = hf.jit.to_static(fn)
    for values in ((1.0, 2.0), (-1.0, -3.0)):
        x_e = hf.tensor(list(values), dtype=hf.float64, requires_grad=True)
        x_s = hf.tensor(list(values), dtype=hf.float64, requires_grad=True)
        out_e, out_s = fn(x_e), static(x_s)
        np.testing.assert_allclose(out_s.detach().numpy(), out_e.detach().numpy())
        (out_e * out_e).sum().backward()
        (out_s * out_s).sum().backward()
        np.testing.assert_allclose(x_s.grad.numpy(), x_e.grad.numpy())
    assert len(static._cache) == 1


def test_to_static_of_a_wraps_decorated_function_keeps_the_decoration():
    """The wrapper's own code is converted (its source, not the wrapped function's), and its
    call of the wrapped function converted in turn."""
    _check_both_paths(decorated_branch)
    np.testing.assert_allclose(hf.jit.to_static(decorated)(t(1.0)).numpy(), [4.0])


def test_wraps_decorated_functions_and_partials_called_in_converted_code_are_converted():
    _check_both_paths(calls_wrapped_and_partial)
    _check_both_paths(scaled_twice)


def by_type(x, k):
    if type(x) is hf.Tensor:
        x = x * 2
    if type(k) is int:  # a Python number stays what it is
        x = x + k
    if x.sum() > 0:
        x = x * x
    return x + (1.0 if type(x) == hf.Tensor else 100.0)


def test_type_of_a_static_value_is_tensor():
    _check_both_paths(lambda_free_by_type)
    Made = hf.jit.to_static(makes_a_class)(t(1.0))
    assert Made.__name__ == "Made" and Made.scale == 3


def lambda_free_by_type(x):
    return by_type(x, 1)


def makes_a_class(x):
    return type("Made", (), {"scale": 3})


@hf.no_grad()
def _under_no_grad(x):
    return x * 2


def calls_library_wrapper(x):
    return _under_no_grad(x) + x


def test_library_wrappers_are_called_as_they_are():
    """hf.no_grad's wrapper (code of hybridfw) is not converted; the user's function it wraps
    is, and runs under no_grad (see test_to_static's grad-mode test for tensor ifs in it)."""
    from hybridfw.converter.runtime.calls import convert_call
    assert convert_call(_under_no_grad) is not _under_no_grad
    assert convert_call(_under_no_grad).__wrapped__ is _under_no_grad.__wrapped__
    x = hf.tensor([1.0, 2.0], requires_grad=True)
    out = hf.jit.to_static(calls_library_wrapper)(x)
    np.testing.assert_allclose(out.detach().numpy(), [3.0, 6.0])
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])


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


def _builtin_extremes(a, b):
    return max(a, b) * 2.0 + min(a, b)


def _extremes_of_numbers(x):
    v = x.sum().item()
    return min(v, 0.5), max(2.0, v)


def test_builtin_max_min_pick_as_python_does():
    """max(a, b)/min(a, b) of values the program computes keep the first on ties (all the
    gradient to it, as eager), and of two numbers give a number."""
    f = hf.jit.to_static(_builtin_extremes)
    for av, bv in ((1.0, 1.0), (2.0, 1.0), (1.0, 3.0)):
        a = hf.tensor([av], requires_grad=True)
        b = hf.tensor([bv], requires_grad=True)
        f(a, b).sum().backward()
        got = [a.grad.numpy().copy(), b.grad.numpy().copy()]
        a.grad = b.grad = None
        _builtin_extremes(a, b).sum().backward()
        np.testing.assert_array_equal(got[0], a.grad.numpy())
        np.testing.assert_array_equal(got[1], 0.0 if b.grad is None else b.grad.numpy())
    g = hf.jit.to_static(_extremes_of_numbers)
    for values in ([0.2, 0.1], [3.0, 0.1]):
        x = hf.tensor(values)
        got, want = g(x), _extremes_of_numbers(x)
        assert all(type(v) is float for v in got)
        np.testing.assert_allclose(got, want, rtol=1e-6)
