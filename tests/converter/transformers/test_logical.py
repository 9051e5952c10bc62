"""logical: ``and``/``or``/``not``, comparison chains and conditional expressions become
``_jst.convert_*`` calls with thunks, keeping Python's short-circuit evaluation (also when a
tensor decides: the right side is built into a branch and only runs when it is taken)."""

import gast
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.converter.testing import run_transforms
from hybridfw.converter.transformers import logical


def convert(source: str):
    return run_transforms(source, logical.transform)


def returned(expr: str) -> str:
    """The converted text of ``return <expr>``'s value."""
    _, text = convert(f"def f(a, b, c):\n    return {expr}")
    line = text.splitlines()[1].strip()
    assert line.startswith("return ")
    return line[len("return "):]


def returned_node(expr: str):
    node, _ = convert(f"def f(a, b, c):\n    return {expr}")
    return node.body[0].value


def t(*values):
    return hf.tensor(list(values), dtype=hf.float64)


# ---- structure -----------------------------------------------------------------------------
def test_and_or_become_calls_with_thunks():
    assert returned("a and b") == "_jst.convert_logical_and((lambda : a), (lambda : b))"
    assert returned("a or b") == "_jst.convert_logical_or((lambda : a), (lambda : b))"
    call = returned_node("a and b")
    for thunk in call.args:
        assert isinstance(thunk, gast.Lambda)
        assert not thunk.args.args and thunk.args.vararg is None and thunk.args.kwarg is None


def test_longer_chains_nest_to_the_right():
    assert returned("a and b and c") == \
        "_jst.convert_logical_and((lambda : a), (lambda : " \
        "_jst.convert_logical_and((lambda : b), (lambda : c))))"
    assert returned("a or b and c") == \
        "_jst.convert_logical_or((lambda : a), (lambda : " \
        "_jst.convert_logical_and((lambda : b), (lambda : c))))"


def test_not():
    assert returned("not a") == "_jst.convert_logical_not(a)"
    assert returned("not (a and b)") == \
        "_jst.convert_logical_not(_jst.convert_logical_and((lambda : a), (lambda : b)))"
    assert returned("-a") == "(- a)"  # other unary operators stay


def test_single_comparison_stays():
    assert returned("a < b") == "(a < b)"
    assert returned("a is not b") == "(a is not b)"


def test_is_none_becomes_runtime_call():
    assert returned("a is not None") == "_jst.convert_is_none(a, True)"
    assert returned("a is None") == "_jst.convert_is_none(a, False)"


def test_chained_comparison():
    assert returned("a < b <= c") == \
        "_jst.convert_compare((lambda : a), '<', (lambda : b), '<=', (lambda : c))"


@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">=", "is", "is not", "in",
                                "not in"])
def test_every_comparison_operator_named(op):
    call = returned_node(f"a < b {op} c")
    assert [a.value for a in call.args if isinstance(a, gast.Constant)] == ["<", op]


def test_conditional_expression():
    assert returned("a if c else b") == \
        "_jst.convert_ifexp(c, (lambda : a), (lambda : b))"
    call = returned_node("a if c else b")
    assert not isinstance(call.args[0], gast.Lambda)  # the test is evaluated first, always


def test_nested_inside_other_expressions_and_statements():
    node, _ = convert("""
        def f(a, b):
            if a and not b:
                y = [x for x in b if x or a]
            while 0 < a < 3:
                a = a + 1
            return (a if b else 0) + 1
    """)
    assert not [n for n in gast.walk(node) if isinstance(n, (gast.BoolOp, gast.IfExp))]
    assert not [n for n in gast.walk(node) if isinstance(n, gast.UnaryOp) and
                isinstance(n.op, gast.Not)]
    assert not [n for n in gast.walk(node) if isinstance(n, gast.Compare) and len(n.ops) > 1]


def test_location_kept():
    node, _ = convert("def f(a, b):\n    pass\n    return a and b\n")
    call = node.body[1].value
    assert call.lineno == 2 + 1
    assert all(thunk.lineno == 3 for thunk in call.args)


# ---- end to end: Python values -------------------------------------------------------------
CALLS = []


@hf.jit.not_to_static
def counted(value):
    CALLS.append(value)
    return value


def and_or_python(a, b):
    return (counted(a) and counted(b)), (counted(a) or counted(b))


@pytest.mark.parametrize("a, b", [(0, 5), (3, 5), ([], "x"), ("", 0), (2, None)])
def test_python_values_same_results_and_evaluations(a, b):
    CALLS.clear()
    eager = and_or_python(a, b)
    eager_calls = list(CALLS)
    CALLS.clear()
    assert hf.jit.to_static(and_or_python)(a, b) == eager  # operands, not bools
    assert CALLS == eager_calls  # the right side evaluated exactly when eagerly


def chain_python(a, b, c):
    return counted(a) < counted(b) < counted(c)


@pytest.mark.parametrize("args", [(1, 2, 3), (2, 1, 3), (1, 3, 2)])
def test_python_chain_evaluates_each_operand_once_and_stops(args):
    CALLS.clear()
    eager = chain_python(*args)
    eager_calls = list(CALLS)
    CALLS.clear()
    assert hf.jit.to_static(chain_python)(*args) is eager
    assert CALLS == eager_calls


def not_and_ifexp_python(a):
    return (not a), ("yes" if a else counted("no"))


def test_python_not_and_ifexp():
    f = hf.jit.to_static(not_and_ifexp_python)
    CALLS.clear()
    assert f(1) == (False, "yes") and CALLS == []
    assert f(0) == (True, "no") and CALLS == ["no"]


# ---- end to end: tensors -------------------------------------------------------------------
def loud_check(x):
    print("right side ran")
    return x.sum() > 100


def tensor_and(x):
    if x.sum() > 0 and loud_check(x):
        y = x * 2
    else:
        y = x - 1
    return y


def tensor_or(x):
    if x.sum() > 0 or loud_check(x):
        y = x * 2
    else:
        y = x - 1
    return y


@pytest.mark.parametrize("fn, runs_right", [(tensor_and, [False, True, True]),
                                            (tensor_or, [True, False, False])])
def test_tensor_short_circuit_right_side_runs_only_when_taken(fn, runs_right, capsys):
    f = hf.jit.to_static(fn)
    inputs = [t(-1.0, -2.0), t(1.0, 2.0), t(100.0, 1.0)]
    for x, right in zip(inputs, runs_right):
        eager = fn(x)
        assert ("right side ran" in capsys.readouterr().out) is right
        np.testing.assert_allclose(f(x).numpy(), eager.numpy())
        assert ("right side ran" in capsys.readouterr().out) is right
    assert f.cache_info().misses == 1  # one program: the branch is decided when it runs


def tensor_not_chain_ifexp(x):
    s = x.sum()
    inside = 0 < s < 10
    flipped = not inside
    y = x * 2 if flipped else x - 1
    return y, inside, flipped


def test_tensor_not_chain_and_ifexp():
    f = hf.jit.to_static(tensor_not_chain_ifexp)
    for x in (t(1.0, 2.0), t(-1.0, -2.0), t(6.0, 6.0), t(0.0, 0.0)):
        for e, c in zip(tensor_not_chain_ifexp(x), f(x)):
            np.testing.assert_array_equal(np.asarray(c.numpy() if hasattr(c, "numpy") else c),
                                          np.asarray(e.numpy() if hasattr(e, "numpy") else e))
    assert f.cache_info().misses == 1


def tensor_and_value(x):
    return (x.sum() > 0) and (x.max() > 1)


def test_tensor_and_value_is_a_boolean_tensor():
    f = hf.jit.to_static(tensor_and_value)
    for x in (t(1.0, 2.0), t(0.5, 0.2), t(-3.0, 2.0)):
        assert bool(f(x).numpy()) == bool(tensor_and_value(x))


def and_operands(x, y):
    return x and y


def or_operands(x, y):
    return x or y


def and_mixed(x, y):
    return (x > 0).all() and y


@pytest.mark.parametrize("fn", [and_operands, or_operands])
def test_tensor_and_or_give_the_operand_as_python_does(fn):
    """``x and y`` is ``y`` when ``x`` is true, else ``x`` (``or`` the other way round): the
    operand itself, values and dtype, not its truth value."""
    f = hf.jit.to_static(fn)
    for a, b in (([1.5], [3.0]), ([0.0], [3.0]), ([-2.0], [0.0]), ([0.0], [0.0])):
        x, y = t(*a), t(*b)
        got, want = f(x, y), fn(x, y)
        assert got.dtype is want.dtype is hf.float64
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    ints = f(hf.tensor([0]), hf.tensor([7]))
    assert ints.dtype is hf.int64 and ints.tolist() == fn(hf.tensor([0]), hf.tensor([7])).tolist()
    assert f.cache_info().misses == 2


def test_tensor_and_of_a_bool_and_a_float_is_their_truth_value():
    """Operands of different dtypes cannot be one static value: the result is the truth value
    (what an ``if`` needs); shapes () and (1,) of the two sides agree."""
    f = hf.jit.to_static(and_mixed)
    for a, b in (([1.0], [3.0]), ([1.0], [0.0]), ([-1.0], [3.0])):
        assert bool(f(t(*a), t(*b))) == bool(and_mixed(t(*a), t(*b)))
