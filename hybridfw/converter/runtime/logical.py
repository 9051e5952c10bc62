"""``and``/``or``/``not``, comparison chains and conditional expressions, with Python's
short-circuit semantics also when a tensor decides: the right side is then built into one
branch of a ``cond``, so it only runs when the program takes that branch."""
from __future__ import annotations

import operator

from ...ops import elementwise as E
from ...ops.registry import apply
from ...static.control_flow import active_program, cond
from ...static.ir import Variable
from ..transformers.base import is_generated
from ..errors import ConversionError, located
from .control_flow import is_static, raise_when_run, to_predicate, truth_of

__all__ = [
    "convert_compare",
    "convert_is_none",
    "convert_ifexp",
    "convert_logical_and",
    "convert_logical_not",
    "convert_logical_or",
]


def _side(thunk, numbers: list, predicate: bool):
    """The builder of one side of ``and``/``or``: its value (its truth value with
    ``predicate``); an error it raises is raised when the program evaluates that side."""
    def build():
        try:
            value = thunk()
        except ConversionError:
            raise
        except Exception as exc:  # noqa: BLE001 - raised when the program evaluates this side
            program = active_program()
            raise_when_run(program, program.current_block(), exc)
            value = False
        numbers.append(_number_like(value))
        if not predicate:
            return value
        return _zero_dim(to_predicate(value)) if is_static(value) else bool(value)
    return build


def _zero_dim(pred):
    """A one-element predicate as a 0-d one, so two predicates of shapes (1,) and () agree."""
    return pred if pred.shape == () else pred.reshape(())


def _short_circuit(left, rhs, is_and: bool, what: str):
    """``left and rhs()`` / ``left or rhs()`` for a static ``left``: a cond whose result is the
    operand Python would give (``x and y`` is ``y`` when ``x`` is true, else ``x``). Where the
    two operands cannot be one value (dtypes or structures differ, e.g. a bool and a float
    tensor), the result is their truth value instead, which is all an ``if`` or ``while``
    needs. Two sides standing for Python numbers (``x.item() > 0 or n == 3``) give one too
    (see ``Variable.python_number``)."""
    pred = to_predicate(left, what)
    numbers = [_number_like(left)]
    right, keep = _side(rhs, numbers, False), lambda: left
    try:
        out = cond(pred, right, keep) if is_and else cond(pred, keep, right)
    except (TypeError, ValueError):  # the operands differ: fall back to their truth value
        del numbers[1:]
    else:
        if all(numbers) and is_static(out):
            out.block.program.python_scalars.add(out.name)
        return out
    right, pred = _side(rhs, numbers, True), _zero_dim(pred)
    out = cond(pred, right, lambda: pred) if is_and else cond(pred, lambda: pred, right)
    if all(numbers) and is_static(out):
        out.block.program.python_scalars.add(out.name)
    return out


def _number_like(value) -> bool:
    return not is_static(value) or value.name in value.block.program.python_scalars


def convert_logical_and(lhs, rhs):
    left = truth_of(lhs())
    if not is_static(left):
        return rhs() if left else left
    return _short_circuit(left, rhs, True, "left side of 'and'")


def convert_logical_or(lhs, rhs):
    left = truth_of(lhs())
    if not is_static(left):
        return left if left else rhs()
    return _short_circuit(left, rhs, False, "left side of 'or'")


def convert_logical_not(value):
    value = truth_of(value)
    if is_static(value):  # a Python bool in eager code, whatever the operand
        out = apply(E.eq, to_predicate(value, "operand of 'not'"), False)
        out.block.program.python_scalars.add(out.name)
        return out
    return not value


_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge, "is": operator.is_, "is not": operator.is_not,
            "in": lambda a, b: a in b, "not in": lambda a, b: a not in b}


def convert_compare(first, *rest):
    """``first() op1 second() op2 third() ...``: each operand evaluated once, in order, and
    only while the chain is still true."""
    pairs = list(zip(rest[0::2], rest[1::2]))

    def chain(left, pairs):
        op, thunk = pairs[0]
        right = thunk()
        result = _COMPARE[op](left, right)
        if len(pairs) == 1:
            return result
        return convert_logical_and(lambda: result, lambda: chain(right, pairs[1:]))
    return chain(first(), pairs)


def convert_is_none(value, negate: bool = False):
    """``value is None`` (``is not None`` with ``negate``). A function's result that is None
    on the paths a tensor decides it returns None on (``return None``, or falling off its
    end) is one only when the program runs: there the answer is a bool of the program (an
    ``if`` on it then takes the right branch on every call)."""
    if value.__class__ is Variable:
        program = value.block.program
        guard = program.maybe_undefined.get(value.name)
        if guard is not None and is_generated(guard[1]):
            assigned = program.current_block().var(guard[0])
            out = assigned if negate else apply(E.eq, assigned, False)
            program.python_scalars.add(out.name)
            return out
    return (value is not None) if negate else (value is None)


def convert_ifexp(test, body, orelse):
    test = truth_of(test)
    if is_static(test):
        strings = {}

        def arm(fn, k):
            def run():
                value = fn()
                if type(value) is str:  # "neg" if x.sum() < 0 else "pos": chosen when it runs
                    strings[k] = value
                    return k
                return value
            return run
        out = cond(to_predicate(test, "condition of the conditional expression"),
                   arm(body, 0), arm(orelse, 1))
        if not strings:
            return out
        if len(strings) == 1:
            raise located("conditional expression on a tensor condition: one side is the "
                          f"string {next(iter(strings.values()))!r} and the other is not; a "
                          "static cond needs the same kind of value on both", ConversionError)
        from .python_builtins import chosen_string
        return chosen_string(strings[0], strings[1], out)
    return body() if test else orelse()
