"""unsupported: generators and async code refused at conversion time with the user's line;
``try`` bodies with handlers wrapped in ``with _jst.try_block():``."""
import textwrap

import gast
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.converter import UnsupportedConstructError
from hybridfw.converter.function import unparse
from hybridfw.converter.transformers import unsupported
from hybridfw.converter.transformers.base import Context


def parse(source: str):
    return gast.parse(textwrap.dedent(source)).body[0]


def convert(source: str, filename="user.py"):
    node = unsupported.transform(parse(source), Context(filename))
    return node, unparse(gast.gast_to_ast(node)).strip()


def refused(source: str) -> UnsupportedConstructError:
    with pytest.raises(UnsupportedConstructError) as info:
        convert(source)
    return info.value


def t(*values):
    return hf.tensor(list(values), dtype=hf.float64)


# ---- refusals --------------------------------------------------------------------------------
def test_yield_refused_with_its_line():
    err = refused("""
        def gen(x):
            y = x + 1
            if y:
                yield y
            return 0
    """)
    assert err.lineno == 5
    assert "generator" in err.construct
    assert err.filename == "user.py" and "user.py" in str(err)


def test_yield_from_refused():
    err = refused("def gen(xs):\n    a = 1\n    yield from xs\n")
    assert err.lineno == 3 and "generator" in err.construct


def test_await_refused_with_its_line():
    err = refused("async def co(x):\n    y = 1\n    return await x\n")
    assert err.lineno == 3 and "async" in err.construct


@pytest.mark.parametrize("source, line", [
    ("async def co(xs):\n    async for x in xs:\n        pass\n", 2),
    ("async def co(m):\n    pass\n    async with m:\n        pass\n", 3),
])
def test_async_for_and_with_refused(source, line):
    err = refused(source)
    assert err.lineno == line and "async" in err.construct


def test_async_function_without_await_refused():
    err = refused("async def co(x):\n    return x\n")
    assert err.lineno == 1 and err.construct == "an async function"


def test_nested_generators_and_lambdas_are_not_this_functions_business():
    _, text = convert("""
        def f(xs):
            def gen():
                yield 1
            g = lambda: (yield)
            return list(gen())
    """)
    assert "yield 1" in text  # left as it is


# ---- try blocks ------------------------------------------------------------------------------
def test_try_with_handlers_wrapped_in_try_block():
    node, _ = convert("""
        def f(x):
            try:
                y = x + 1
                z = y
            except ValueError:
                z = 0
            else:
                z = 2
            finally:
                w = 3
            return z
    """)
    (try_,) = [n for n in gast.walk(node) if isinstance(n, gast.Try)]
    (with_,) = try_.body
    assert isinstance(with_, gast.With)
    assert unparse(gast.gast_to_ast(with_.items[0].context_expr)).strip() == \
        "_jst.try_block()"
    assert with_.items[0].optional_vars is None
    assert [type(s).__name__ for s in with_.body] == ["Assign", "Assign"]
    # handlers, else and finally are not wrapped
    assert isinstance(try_.handlers[0].body[0], gast.Assign)
    assert isinstance(try_.orelse[0], gast.Assign)
    assert isinstance(try_.finalbody[0], gast.Assign)
    # the wrapper stands at the try's line
    assert with_.lineno == try_.lineno


def test_try_finally_without_handlers_not_wrapped():
    _, text = convert("def f(x):\n    try:\n        y = 1\n    finally:\n        y = 2\n"
                      "    return y\n")
    assert "try_block" not in text


def test_nested_try_blocks_both_wrapped():
    node, text = convert("""
        def f(x):
            try:
                try:
                    y = 1
                except KeyError:
                    y = 2
            except ValueError:
                y = 3
            return y
    """)
    assert text.count("with _jst.try_block():") == 2
    outer = node.body[0]
    inner = outer.body[0].body[0]
    assert isinstance(inner, gast.Try) and isinstance(inner.body[0], gast.With)


# ---- end to end ----------------------------------------------------------------------------
def generator_fn(x):
    total = x * 0
    for i in range(3):
        yield total + i  # refused here


def test_to_static_refuses_a_generator_at_the_yield():
    import inspect
    lines, first = inspect.getsourcelines(generator_fn)
    line = first + next(i for i, s in enumerate(lines) if "refused here" in s)
    # (to_static converts the function on the first call; a generator function returns a
    # generator eagerly, so the converted call is what is checked)
    with pytest.raises(UnsupportedConstructError) as info:
        hf.jit.to_static(generator_fn)(t(1.0))
    assert info.value.lineno == line


def try_python_values(x, key):
    table = {"a": 1.0}
    try:
        scale = table[key]
    except KeyError:
        scale = -1.0
    if x.sum() > 0:  # a tensor decides this if, outside the try
        x = x * scale
    else:
        x = x - scale
    return x


def test_try_except_on_python_values_then_tensor_control_flow():
    f = hf.jit.to_static(try_python_values)
    for key in ("a", "b"):
        for x in (t(1.0, 2.0), t(-3.0, 1.0)):
            np.testing.assert_allclose(f(x, key).numpy(), try_python_values(x, key).numpy())


def tensor_if_in_try(x):
    try:
        if x.sum() > 0:
            x = x + 1
    except ValueError:
        x = x * 0
    return x


def test_tensor_control_flow_inside_try_refused():
    with pytest.raises(UnsupportedConstructError, match="try/except"):
        hf.jit.to_static(tensor_if_in_try)(t(1.0))
    from hybridfw.converter.runtime import try_block
    assert try_block.depth == 0  # the marker was left on the way out
    # and control flow after it is static again, not refused
    np.testing.assert_allclose(hf.jit.to_static(try_python_values)(t(1.0), "a").numpy(), [1.0])
