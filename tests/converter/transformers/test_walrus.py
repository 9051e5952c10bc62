"""walrus: an assignment expression (``:=``) in a ``while`` test, or in a short-circuited
operand of an ``if`` test or an assigned value, becomes statements (so no later pass moves it
into a function of its own); logical evaluates one in a first operand where it stands."""
import textwrap

from hybridfw.converter.testing import run_transforms
from hybridfw.converter.transformers import logical, walrus


def lines(source: str, *transforms):
    _, text = run_transforms(textwrap.dedent(source), *transforms)
    return [line.strip() for line in text.splitlines()[1:]]


def test_while_test_evaluated_before_the_loop_and_at_the_end_of_its_body():
    assert lines("""
        def f(x):
            while (m := g(x)) > 1:
                x = h(x)
    """, walrus.transform) == [
        "_hf_test_0 = ((m := g(x)) > 1)", "while _hf_test_0:", "x = h(x)",
        "_hf_test_0 = ((m := g(x)) > 1)"]


def test_short_circuited_walrus_becomes_ifs():
    assert lines("""
        def f(a):
            if a and (m := g(a)) > 0:
                a = m
    """, walrus.transform) == [
        "_hf_test_0 = a", "if _hf_test_0:", "_hf_test_0 = ((m := g(a)) > 0)",
        "if _hf_test_0:", "a = m"]
    assert lines("""
        def f(a, b):
            y = a or (m := b) or 2
    """, walrus.transform) == [
        "_hf_value_0 = a", "if (not _hf_value_0):", "_hf_value_0 = ((m := b) or 2)",
        "y = _hf_value_0"]   # (the walrus is first in what is left)


def test_other_tests_left_alone():
    source = """
        def f(a, b):
            if (m := a) and b:
                a = m
            while a and b:
                a = g(a)
    """
    assert lines(source, walrus.transform) == lines(source)


def test_logical_evaluates_a_first_operand_walrus_where_it_stands():
    (line,) = lines("def f(a, b):\n    return (m := a) and b", logical.transform)
    assert line == ("return _jst.convert_logical_and((lambda _hf_value: (lambda : _hf_value))"
                    "((m := a)), (lambda : b))")
    (line,) = lines("def f(a, b):\n    return g(a and (m := b))", logical.transform)
    assert line == "return g((a and (m := b)))"   # elsewhere: left as Python's
