"""Conversion cases for ``hf.jit.to_static``: converted == eager, one trace per input signature.

Every case is a small module-level function (so ``inspect.getsource`` finds it) listed in a table
together with the inputs it is called with.  The table-driven test converts the function, calls
the eager and the converted version on each input (plus the first input once more at the end),
compares the results (same structure; tensors as hf Tensors with equal shape, dtype and values)
and checks ``cache_info().misses`` equals the number of distinct input signatures (tensor
shape/dtype plus Python argument values).  Cases marked ``dyn`` have control flow that depends on
tensor values: their table holds at least two same-shaped inputs taking different paths, so the
misses check shows that a single program follows the right branch / trip count at run time.

Further tables cover ``print`` (captured stdout must match eager on every call), ``assert``
(raises on the call where it fails, also after tracing), gradients (``x.grad`` equal to eager),
numpy round-trips, ``hf.nn.Module`` conversion and the cache/introspection API.

PYTEST_DONT_REWRITE: the user-level ``assert`` statements under test must keep Python's own
messages, so pytest's assertion rewriting is off for this module.
"""
from __future__ import annotations

import contextlib
import io
import signal
import sys
import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest

import hybridfw as hf

# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------
P = np.array([1.0, 2.0, 3.0])          # sum 6, all > 0
N = np.array([-1.0, -2.0, -3.0])       # sum -6
S = np.array([0.1, 0.2, 0.3])          # sum 0.6, small positive
L = np.array([5.0, 6.0, 7.0])          # sum 18, large
M = np.array([3.0, -1.0, -4.0])        # sum -2, mixed signs
NN = np.array([-10.0, -10.0, -10.0])   # sum -30
Z0 = np.zeros(3)                       # sum 0
P2 = np.array([1.0, 2.0])              # another shape
X4a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [-1.0, -1.0, -1.0], [2.0, 2.0, 2.0]])
X4b = np.array([[-1.0, 0.5, 0.5], [3.0, 3.0, 3.0], [1.0, 1.0, 1.0], [0.0, 0.0, 9.0]])
X4c = np.array([[0.5, 0.5, 0.5], [0.1, 0.1, 0.1], [0.2, 0.2, 0.2], [1.0, 1.0, 1.0]])


def i64(v):
    return np.array(v, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# if / elif / else
# --------------------------------------------------------------------------------------------
def if_basic(x):
    if x.sum() > 0:
        y = x * 2
    else:
        y = x - 1
    return y


def if_no_else(x):
    y = x + 0
    if x.mean() > 0:
        y = y * 3
    return y


def if_elif_else(x):
    s = x.sum()
    if s > 5:
        y = x * 10
    elif s > 0:
        y = x + 100
    else:
        y = -x
    return y


def if_elif_four(x):
    m = x.max()
    if m > 6:
        r = x + 1
    elif m > 2:
        r = x + 2
    elif m > 0:
        r = x + 3
    else:
        r = x + 4
    return r


def if_two_outputs(x, y):
    if (x * y).sum() > 0:
        a = x + y
        b = x * y
    else:
        a = x - y
        b = y / 2
    return a, b


def if_modify_one_of_two(x):
    a = x + 1
    b = x * 2
    if x.sum() < 0:
        a = a * 3
    else:
        b = b - 7
    return a + b, a, b


def if_augassign(x):
    y = x + 0
    if x[0] > 0:
        y += 5
    else:
        y -= 5
    return y


def if_tensor_truthy(x):
    if x.sum():
        return x * 2
    return x + 1


def if_bool_all(x):
    if (x > 0).all():
        y = x.sqrt()
    else:
        y = x.abs()
    return y


def if_not(x):
    if not x.sum() > 0:
        return -x
    return x


def if_not_any(x):
    if not (x > 0).any():
        y = x * 0
    else:
        y = x
    return y


def if_int_tensor(x, n):
    if n > 2:
        y = x * n
    else:
        y = x - n
    return y


def if_python_flag(x, flag):
    if flag:
        return x * 2
    return x * 3


def if_none_arg(x, y=None):
    if y is not None:
        return x + y
    return x


def if_shape_python(x):
    if x.shape[0] > 2:
        return x.sum()
    return x.mean()


def if_python_and_tensor(x, flag):
    if flag and x.sum() > 0:
        y = x + 1
    else:
        y = x - 1
    return y


def if_isinstance(x, y):
    if isinstance(y, hf.Tensor):
        return x + y
    return x * y


def if_python_const_branches(x):
    if x.sum() > 0:
        k = 2
    else:
        k = -3
    return x * k


def if_pass_branch(x):
    y = x
    if x.sum() > 0:
        pass
    else:
        y = x * 4
    return y


def if_compare_shapes(x, y):
    if x.shape == y.shape:
        return x + y
    return x.sum() + y.sum()


def if_where_mix(x):
    y = hf.where(x > 0, x, x * 0)
    if y.sum() > 3:
        y = y - 3
    return y


# nested ifs
def nested_if2(x, y):
    if x.sum() > 0:
        if y.sum() > 0:
            r = x + y
        else:
            r = x - y
    else:
        if y.sum() > 0:
            r = y - x
        else:
            r = -x - y
    return r


def nested_if3(x):
    a = x[0]
    b = x[1]
    c = x[2]
    if a > 0:
        t = x * 2
        if b > 0:
            t = t + 1
            if c > 0:
                t = t * 10
            else:
                t = t - 10
        else:
            t = t - 1
    else:
        t = x * 0 + 5
    return t


def nested_python_in_tensor(x, mode):
    if x.sum() > 0:
        if mode == "a":
            y = x + 1
        else:
            y = x + 2
    else:
        y = x * 0
    return y


def nested_tensor_in_python(x, mode):
    if mode > 0:
        if x.sum() > 0:
            y = x * 2
        else:
            y = x * 3
    else:
        y = x
    return y


def nested_if_in_elif(x):
    if x.sum() > 10:
        y = x
    elif x.sum() > -10:
        if x.min() < 0:
            y = x.abs()
        else:
            y = x * 5
    else:
        y = x * 0
    return y


# names created in only one branch
def name_only_in_branch(x):
    if x.sum() > 0:
        z = x * 2
        out = z + 1
    else:
        out = x - 1
    return out


def name_defined_same_cond_twice(x):
    if x.sum() > 0:
        z = x * 2
    if x.sum() > 0:
        return z + 1
    return x


def name_defined_else_returns(x):
    if x.sum() > 0:
        y = x + 1
    else:
        return x * 0
    return y * 2


def name_defined_in_both_new(x):
    if x.mean() > 0:
        fresh = x * 2
        other = x
    else:
        fresh = x / 2
        other = -x
    return fresh + other


def name_temporaries_each_branch(x):
    if x.sum() > 0:
        tmp = x * 100
        y = tmp - 1
    else:
        tmp2 = x * 3
        y = tmp2
    return y


# --------------------------------------------------------------------------------------------
# conditional expressions, comparison chains, and / or / not
# --------------------------------------------------------------------------------------------
def ifexp_basic(x):
    y = x * 2 if x.sum() > 0 else x * 3
    return y


def ifexp_nested(x):
    return x + 1 if x.sum() > 5 else (x + 2 if x.sum() > 0 else x + 3)


def ifexp_lambdas(x):
    double = lambda t: t * 2
    minus = lambda t: t - 2
    return double(x) if x.mean() > 0 else minus(x)


def ifexp_python(x, k):
    return x * k if k > 1 else x


def ifexp_in_expr(x):
    return (x.sum() if x.sum() > 0 else -x.sum()) + 1


def ifexp_mixed_cond(x, k):
    return x + 1 if (x.sum() > 0 and k > 0) else x - 1


def chain_basic(x):
    if 0 < x.sum() < 10:
        return x * 2
    return x


def chain_python_bounds(x, lo, hi):
    if lo < x.mean() <= hi:
        y = x + 1
    else:
        y = x - 1
    return y


def chain_value(x):
    c = -1 < x.mean() < 1
    return hf.where(c, x, x * 0)


def chain_three(x, y):
    if x.min() < y.min() < x.max() < y.max():
        return x + y
    return x - y


def and_tensors(x, y):
    if x.sum() > 0 and y.sum() > 0:
        return x + y
    return x - y


def or_tensors(x, y):
    if x.sum() > 0 or y.sum() > 0:
        r = x * y
    else:
        r = x + y
    return r


def not_and_or(x, y):
    if not (x.sum() > 0 and y.sum() > 0) or x.mean() > 100:
        r = x - y
    else:
        r = x + y
    return r


def and_value(x, y):
    c = x.sum() > 0 and y.sum() > 0
    return c


def or_value(x, y):
    return (x.sum() > 0) or (y.sum() > 0)


def and_python_left(x, flag):
    c = flag and x.sum() > 0
    if c:
        return x
    return -x


def and_none_check(x, y=None):
    if y is not None and y.sum() > x.sum():
        return y
    return x


def and_three_operands(x, y):
    if x.sum() > 0 and y.sum() > 0 and (x - y).sum() > 0:
        return x
    return y


def checked_positive(t):
    assert t.sum() > 0, "right operand of and/or must not run"
    return t.sum() > 1


def and_shortcircuit_assert(x, y):
    if x.sum() > 0 and checked_positive(y):
        return x
    return y


def or_shortcircuit_assert(x, y):
    if x.sum() > 0 or checked_positive(y):
        return x + 1
    return y - 1


def and_shortcircuit_nan(x):
    if x.min() > 0 and hf.log(x).sum() > 1:
        return x
    return -x


def or_shortcircuit_div(x, y):
    if (y == 0).any() or (x / y).sum() > 0:
        return x
    return y


# --------------------------------------------------------------------------------------------
# while loops
# --------------------------------------------------------------------------------------------
def while_double(x):
    while x.sum() < 10:
        x = x * 2
    return x


def while_counter_python_tensor(x):
    i = 0
    while i < 5 and x.sum() < 100:
        x = x * 3
        i += 1
    return x, i


def while_tensor_counter(x, n):
    i = hf.tensor(0)
    s = x * 0
    while i < n:
        s = s + x
        i = i + 1
    return s, i


def while_python_only(x):
    i = 0
    while i < 3:
        x = x + i
        i += 1
    return x, i


def while_break(x):
    i = 0
    while i < 10:
        x = x + 1
        if x.sum() > 12:
            break
        i += 1
    return x, i


def while_continue(x):
    i = hf.tensor(0)
    s = x * 0
    while i < 6:
        i = i + 1
        if (x * i).sum() > 10:
            continue
        s = s + x * i
    return s


def while_true_break(x):
    while True:
        x = x + 1
        if x.sum() > 10:
            break
    return x


def while_nested(x):
    i = 0
    total = x.sum() * 0
    while i < 3:
        y = x
        while y.sum() < 20:
            y = y * 2
            total = total + 1
        x = x + 1
        i += 1
    return total, x


def while_else(x):
    i = 0
    while i < 4:
        if x.sum() > 20:
            break
        x = x * 2
        i += 1
    else:
        x = x - 1000
    return x


def while_var_set_in_body(x):
    y = x * 0
    k = 0
    while x.sum() < 20:
        y = x + 1
        x = x * 2
        k = k + 1
    return y, k


def while_cond_helper(x):
    def small(t):
        return t.sum() < 10

    while small(x):
        x = x + 1
    return x


def while_or_cond(x, y):
    while x.sum() < 10 or y.sum() < 10:
        x = x + 1
        y = y + 2
    return x, y


def while_not_cond(x):
    while not (x.sum() > 10):
        x = x + 2
    return x


def while_tensor_if_in_body(x):
    i = 0
    s = x * 0
    while i < 5:
        if (x * i).sum() > 10:
            s = s + 1
        else:
            s = s - 1
        i += 1
    return s


# --------------------------------------------------------------------------------------------
# for loops
# --------------------------------------------------------------------------------------------
def for_range_python(x):
    s = x * 0
    for i in range(4):
        s = s + x * i
    return s


def for_range_tensor(x, n):
    s = x * 0
    for i in range(n):
        s = s + x * i
    return s


def for_range_tensor_start_stop(x, a, b):
    s = x * 0
    for i in range(a, b, 2):
        s = s + i
    return s


def for_range_tensor_step(x, n, step):
    s = x * 0
    for i in range(0, n, step):
        s = s + x * i
    return s


def for_range_derived(x):
    n = (x > 0).sum()
    s = x * 0
    for _ in range(n):
        s = s + 1
    return s


def for_range_len(x):
    s = x[0] * 0
    for i in range(len(x)):
        s = s + x[i] * i
    return s


def for_loop_var_after(x, n):
    s = x * 0
    for i in range(n):
        s = s + x
    return s, i


def for_tensor_rows(x):
    s = x[0] * 0
    for row in x:
        s = s + row * 2
    return s


def for_tensor_rows_break(x):
    s = x[0] * 0
    for row in x:
        if row.sum() < 0:
            break
        s = s + row
    return s


def for_tensor_elems_if(x):
    s = x.sum() * 0
    for v in x:
        if v > 0:
            s = s + v
        else:
            s = s - v * 2
    return s


def for_list_literal(x):
    for k in [1, 2, 3]:
        x = x * k
    return x


def for_tuple_of_tensors(x, y):
    s = x * 0
    for t in (x, y, x * y):
        s = s + t
    return s


def for_list_tensor_cond(x):
    s = x * 0
    for k in [0.5, 1.0, 2.0, 4.0]:
        if (x * k).sum() > 5:
            s = s + x * k
        else:
            s = s - k
    return s


def for_enumerate_list(x):
    s = x * 0
    for i, k in enumerate([3.0, 1.0, 2.0]):
        s = s + x * (i * k)
    return s


def for_enumerate_tensor(x):
    s = x.sum() * 0
    for i, v in enumerate(x):
        s = s + v * i
    return s


def for_enumerate_start_break(x):
    s = x.sum() * 0
    for i, v in enumerate(x, 1):
        if v < 0:
            break
        s = s + v * i
    return s


def for_zip_lists(x):
    s = x * 0
    for a, b in zip([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]):
        s = s + x * a - b
    return s


def for_zip_tensors(x, y):
    s = x.sum() * 0
    for a, b in zip(x, y):
        s = s + a * b
    return s


def for_zip_rows_cond(x, y):
    out = x[0] * 0
    for a, b in zip(x, y):
        if (a - b).sum() > 0:
            out = out + a
        else:
            out = out + b
    return out


def for_dict_items(x):
    d = {"a": 1.0, "b": 2.0}
    s = x * 0
    for k, v in d.items():
        s = s + x * v * len(k)
    return s


def for_else_tensor_break(x, n):
    s = x * 0
    for _ in range(n):
        s = s + x
        if s.sum() > 10:
            break
    else:
        s = s * -1
    return s


def for_else_python_range(x):
    for _ in range(4):
        x = x + 1
        if x.sum() > 10:
            break
    else:
        x = x * 0
    return x


def for_break_range_tensor(x, n):
    s = x * 0
    for _ in range(n):
        if (s + x).sum() > 10:
            break
        s = s + x
    return s


def for_continue_range_tensor(x, n):
    s = x * 0
    for i in range(n):
        if i % 2 == 0:
            continue
        s = s + x * i
    return s


def for_continue_python_range(x):
    s = x * 0
    for _ in range(5):
        x = x - 1
        if x.sum() < 0:
            continue
        s = s + x
    return s


def for_break_and_continue(x):
    s = x * 0
    for i in range(6):
        if (x * i).sum() > 20:
            break
        if (x * i).sum() < 2:
            continue
        s = s + x * i
    return s


def for_nested_tensor_ranges(x, n, m):
    s = x * 0
    for i in range(n):
        for j in range(m):
            s = s + x * (i + j)
    return s


def for_inner_bound_from_outer(x):
    s = x.sum() * 0
    for k in x:
        for j in range(k):
            s = s + j
    return s


def for_nested_break_inner(x):
    s = x * 0
    for i in range(3):
        for _ in range(4):
            if (s + x).sum() > 10 * (i + 1):
                break
            s = s + x
    return s


def for_while_in_for(x, n):
    for i in range(n):
        while x.sum() < 10 * (i + 1):
            x = x + 1
    return x


def for_carried_python_range(x):
    prev = x * 0
    cur = x
    for _ in range(4):
        nxt = cur + prev
        prev = cur
        cur = nxt
    return cur


def for_carried_tensor_range(x, n):
    prev = x * 0
    cur = x
    for _ in range(n):
        nxt = cur + prev
        prev = cur
        cur = nxt
    return cur, prev


def for_setitem_in_loop(x, n):
    y = x * 1
    for i in range(n):
        y[i] = y[i] * 10
    return y


# --------------------------------------------------------------------------------------------
# early return
# --------------------------------------------------------------------------------------------
def ret_in_if(x):
    if x.sum() > 0:
        return x * 2
    return x * 3


def ret_in_both(x):
    if x.sum() > 0:
        return x + 1
    else:
        return x - 1


def ret_elif_chain(x):
    s = x.sum()
    if s > 10:
        return x * 0
    elif s > 0:
        y = x + 1
    else:
        return x * 2
    y = y * 5
    return y


def ret_nested(x, y):
    if x.sum() > 0:
        if y.sum() > 0:
            return x + y
        y = y * 2
    return x - y


def ret_in_while(x):
    i = 0
    while i < 10:
        if x.sum() > 15:
            return x * 100
        x = x + 1
        i += 1
    return -x


def ret_in_for_range_tensor(x, n):
    for _ in range(n):
        x = x * 2
        if x.sum() > 20:
            return x
    return x - 1


def ret_in_for_python_range(x):
    for i in range(5):
        if x.sum() > 10:
            return x, i
        x = x + 2
    return x, -1


def ret_after_continue(x):
    s = x * 0
    for i in range(6):
        if (x * i).sum() < 3:
            continue
        s = s + x
        if s.sum() > 10:
            return s
    return s * -1


def ret_tuple_branches(x):
    if x.sum() > 0:
        return x, x * 2
    return x * 3, x


def ret_in_loop_over_rows(x):
    for row in x:
        if row.sum() > 5:
            return row
    return x[0] * 0


def ret_nested_loops(x, n):
    for i in range(n):
        for j in range(n):
            if (x * (i * j)).sum() > 10:
                return x * i + j
    return x * 0


def ret_tuple_in_tensor_loop(x, n):
    for _ in range(n):
        if x.sum() > 0:
            return x * 2, x
        x = x + 1
    return x, x * 0


def ret_tuple_in_while(x):
    i = 0
    while i < 3:
        i = i + 1
        if x.sum() > 0:
            return x * 2, x
        x = x + 1
    return x, x * 0


def ret_in_while_true(x):
    while True:
        x = x * 2
        if x.sum() > 10:
            return x
        if x.sum() < -10:
            return -x


# --------------------------------------------------------------------------------------------
# lists
# --------------------------------------------------------------------------------------------
def list_append_tensor_range(x, n):
    outs = []
    for i in range(n):
        outs.append(x * i)
    return hf.stack(outs)


def list_append_while(x):
    outs = [x]
    while x.sum() < 20:
        x = x * 2
        outs.append(x)
    return hf.stack(outs)


def list_append_stack_sum(x, n):
    acc = []
    for i in range(n):
        acc.append(x + i)
    return hf.stack(acc).sum(0)


def list_append_python_range_cond(x):
    outs = []
    for i in range(4):
        if (x * i).sum() > 5:
            outs.append(x * i)
        else:
            outs.append(x * 0)
    return hf.stack(outs)


def list_append_in_tensor_if(x):
    outs = [x]
    if x.sum() > 0:
        outs.append(x * 2)
    else:
        outs.append(x * 3)
    return hf.cat(outs)


def list_append_cond_in_tensor_loop(x, n):
    outs = [x]
    for i in range(n):
        if (x * i).sum() > 5:
            outs.append(x * i)
    return hf.stack(outs)


def list_append_loop_in_tensor_if(x, n):
    out = [x]
    if x.mean() < 0:
        for k in range(n):
            out.append(x * k)
    return hf.stack(out).sum(0)


def list_of_tuples(x, n):
    pairs = []
    for i in range(n):
        pairs.append((x * i, x + i))
    firsts = hf.stack([p[0] for p in pairs])
    seconds = hf.stack([p[1] for p in pairs])
    return firsts, seconds


def list_of_tuples_unpack(x, n):
    pairs = []
    for i in range(n):
        pairs.append((x * i, x.sum() + i))
    s = x * 0
    for a, b in pairs:
        s = s + a * b
    return s


def list_pop(x, n):
    stack = []
    for i in range(n):
        stack.append(x * i)
        stack.append(x + i)
        stack.pop()
    return hf.stack(stack)


def list_pop_value(x, n):
    items = [x]
    for _ in range(n):
        items.append(items[-1] * 2)
    last = items.pop()
    return last, hf.stack(items)


def list_index_after_loop(x, n):
    outs = []
    for i in range(n):
        outs.append(x * (i + 1))
    return outs[0] + outs[-1]


def list_len_after_loop(x):
    outs = []
    while x.sum() < 20:
        x = x * 2
        outs.append(x)
    return len(outs)


def list_python_range_cat(x):
    parts = []
    for i in range(3):
        parts.append(x * i)
    return hf.cat(parts)


def list_comprehension(x):
    ys = [x * k for k in range(3)]
    return hf.stack(ys).sum(0)


def list_return_list(x):
    if x.sum() > 0:
        y = x * 2
    else:
        y = x * 3
    return [x, y]


def dict_return(x):
    if x.sum() > 0:
        y = x * 2
    else:
        y = x * 3
    return {"a": y, "b": y.sum()}


# --------------------------------------------------------------------------------------------
# builtins
# --------------------------------------------------------------------------------------------
def builtin_len(x):
    return x * len(x)


def builtin_isinstance(x, k):
    if isinstance(k, int):
        return x * k
    return x + k


def builtin_int_of_tensor(x):
    k = int(x.sum())
    return x * k


def builtin_float_of_tensor(x):
    return float(x.mean()) + 1.0


def builtin_bool_of_tensor(x):
    if bool(x.sum() > 0):
        return x
    return -x


def builtin_int_range(x, n):
    s = x * 0
    for _ in range(int(n)):
        s = s + 1
    return s


def builtin_abs_max(x):
    return abs(x) * max(2, 3), min(x.shape)


def builtin_shape_unpack(x):
    n, m = x.shape
    return x.reshape(m, n)


# --------------------------------------------------------------------------------------------
# Python-only code must stay Python
# --------------------------------------------------------------------------------------------
def py_only_return_int(x, n):
    total = 0
    for i in range(n):
        total += i
    return x * total, total


def py_string_arg(x, name):
    if name.startswith("a"):
        return x + 1
    return x - 1


def py_tuple_unpack(x):
    a, (b, c) = x * 1, (x * 2, x * 3)
    return a + b + c


def py_default_arg(x, scale=2.0):
    return x * scale


def py_starargs(*xs):
    s = xs[0]
    for t in xs[1:]:
        s = s + t
    if s.sum() > 0:
        return s
    return -s


def py_while_python_list(x):
    items = [1.0, 2.0, 3.0]
    while items:
        x = x + items.pop()
    return x


# --------------------------------------------------------------------------------------------
# functions, lambdas, closures, globals, user classes
# --------------------------------------------------------------------------------------------
def fn_nested_def(x):
    def helper(t):
        if t.sum() > 0:
            return t * 2
        return t * 3

    return helper(x) + helper(x * 0.5)


def fn_nested_def_closure(x, k):
    def add_k(t):
        return t + k

    return add_k(x)


def fn_lambda_call(x):
    sq = lambda t: t * t
    return sq(x) + (lambda t: t + 1)(x)  # noqa: PLC3002 - the pattern under test


def make_scaled(k):
    def scaled(x):
        if x.sum() > 0:
            return x * k
        return x / k

    return scaled


fn_closure_scaled = make_scaled(3.0)

SCALE = 2.5
OFFSETS = [1.0, 2.0]


def fn_uses_globals(x):
    y = x * SCALE
    for o in OFFSETS:
        y = y + o
    if y.sum() > 10:
        y = y / SCALE
    return y


def helper_branchy(t):
    if t.sum() > 0:
        return t * 2
    return -t


def helper_loop(t, n):
    for _ in range(n):
        t = t + 1
    return t


def fn_calls_user_fn(x):
    return helper_branchy(x) + 1


def fn_calls_user_fn_loop(x, n):
    return helper_branchy(helper_loop(x, n))


def fn_recursive_python(x, n):
    if n == 0:
        return x
    return fn_recursive_python(x * 2, n - 1)


class Accumulator:
    def __init__(self, scale):
        self.scale = scale

    def apply(self, t):
        if t.sum() > 0:
            return t * self.scale
        return t - self.scale

    @staticmethod
    def grow(t):
        while t.sum() < 10:
            t = t + 1
        return t


ACC = Accumulator(4.0)


def fn_calls_method(x):
    return ACC.apply(x) + Accumulator.grow(x)


def fn_creates_object(x):
    acc = Accumulator(2.0)
    return acc.apply(x)


def fn_helper_in_loop(x, n):
    s = x * 0
    for _ in range(n):
        s = s + helper_branchy(x - s)
    return s


# --------------------------------------------------------------------------------------------
# match statements on Python values (tensor control flow and returns/breaks inside cases), and
# generators defined inside the converted function (they stay Python)
# --------------------------------------------------------------------------------------------
def match_return_in_case(x, mode):
    match mode:
        case "a":
            return x + 1
        case "loop":
            for i in range(5):
                match i:
                    case 3:
                        break
                    case _:
                        if x.sum() > 100:
                            continue
                x = x * 2
            return x
        case _:
            if x.sum() > 0:
                return x - 1
            return x * 2


def match_patterns_then_while(x, k):
    match k:
        case 1 | 2:
            y = x + k
        case 7:
            y = x * 3
        case _:
            y = x
    while y.sum() < 20:
        y = y + 1
    return y


def nested_generators(x):
    def outer():
        def inner():
            for i in range(2):
                yield i
        for j in inner():
            yield j * 10
    s = x * 0
    for v in outer():
        if x.sum() > 0:
            s = s + v
    return s


# --------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------
class Case(NamedTuple):
    fn: Callable
    inputs: list
    dyn: bool = False       # control flow depends on tensor values
    loose: bool = False     # a Python scalar in eager may come back as a 0-d Tensor
    no_warn: bool = False   # a RuntimeWarning (e.g. log of a negative) means a lazy part ran
    check_cache: bool = True


def C(fn, *inputs, dyn=False, loose=False, no_warn=False, check_cache=True):
    return Case(fn, list(inputs), dyn, loose, no_warn, check_cache)


CASES = [
    # match statements, nested generators
    C(match_return_in_case, (P, "a"), (P, "b"), (N, "b"), (P, "loop"), (L * 20, "loop"),
      dyn=True),
    C(match_patterns_then_while, (P, 1), (NN, 1), (P, 2), (S, 7), (N, "z"), dyn=True),
    C(nested_generators, (P,), (N,), dyn=True),
    # if / elif / else
    C(if_basic, (P,), (N,), dyn=True),
    C(if_no_else, (P,), (N,), dyn=True),
    C(if_elif_else, (L,), (S,), (N,), dyn=True),
    C(if_elif_four, (L,), (P,), (S,), (N,), dyn=True),
    C(if_two_outputs, (P, P), (P, N), dyn=True),
    C(if_modify_one_of_two, (P,), (N,), dyn=True),
    C(if_augassign, (P,), (N,), dyn=True),
    C(if_tensor_truthy, (P,), (Z0,), (N,), dyn=True),
    C(if_bool_all, (P,), (M,), dyn=True),
    C(if_not, (P,), (N,), dyn=True),
    C(if_not_any, (N,), (M,), dyn=True),
    C(if_int_tensor, (P, i64(3)), (P, i64(1)), dyn=True),
    C(if_python_flag, (P, True), (P, False)),
    C(if_none_arg, (P,), (P, N)),
    C(if_shape_python, (P,), (P2,)),
    C(if_python_and_tensor, (P, True), (N, True), (P, False), dyn=True),
    C(if_isinstance, (P, N), (P, 2.0)),
    C(if_python_const_branches, (P,), (N,), dyn=True),
    C(if_pass_branch, (P,), (N,), dyn=True),
    C(if_compare_shapes, (P, N), (P, P2)),
    C(if_where_mix, (P,), (S,), dyn=True),
    C(nested_if2, (P, P), (P, N), (N, P), (N, N), dyn=True),
    C(nested_if3, (P,), (np.array([1.0, 2.0, -3.0]),), (np.array([1.0, -2.0, 3.0]),),
      (np.array([-1.0, 2.0, 3.0]),), dyn=True),
    C(nested_python_in_tensor, (P, "a"), (N, "a"), (P, "b"), dyn=True),
    C(nested_tensor_in_python, (P, 1), (N, 1), (P, 0), dyn=True),
    C(nested_if_in_elif, (L,), (M,), (S,), (NN,), dyn=True),
    C(name_only_in_branch, (P,), (N,), dyn=True),
    C(name_defined_same_cond_twice, (P,), (N,), dyn=True),
    C(name_defined_else_returns, (P,), (N,), dyn=True),
    C(name_defined_in_both_new, (P,), (N,), dyn=True),
    C(name_temporaries_each_branch, (P,), (N,), dyn=True),
    # conditional expressions, chains, and/or/not
    C(ifexp_basic, (P,), (N,), dyn=True),
    C(ifexp_nested, (P,), (S,), (N,), dyn=True),
    C(ifexp_lambdas, (P,), (N,), dyn=True),
    C(ifexp_python, (P, 2), (P, 1)),
    C(ifexp_in_expr, (P,), (N,), dyn=True),
    C(ifexp_mixed_cond, (P, 1), (N, 1), (P, 0), dyn=True),
    C(chain_basic, (S,), (L,), (N,), dyn=True),
    C(chain_python_bounds, (P, 0, 5), (L, 0, 5), (N, 0, 5), dyn=True),
    C(chain_value, (S,), (P,), dyn=True),
    C(chain_three, (P, L), (P, np.array([1.5, 2.0, 4.0])), (S, P), dyn=True),
    C(and_tensors, (P, P), (P, N), (N, P), dyn=True),
    C(or_tensors, (P, N), (N, P), (N, N), dyn=True),
    C(not_and_or, (P, P), (P, N), (N, N), dyn=True),
    C(and_value, (P, P), (P, N), (N, P), dyn=True),
    C(or_value, (P, N), (N, P), (N, N), dyn=True),
    C(and_python_left, (P, False), (P, True), (N, True), dyn=True),
    C(and_none_check, (P,), (P, L), (P, S), dyn=True),
    C(and_three_operands, (L, P), (P, L), (N, P), dyn=True),
    C(and_shortcircuit_assert, (P, P), (N, N), (P, S), dyn=True),
    C(or_shortcircuit_assert, (P, N), (N, P), (N, S), dyn=True),
    C(and_shortcircuit_nan, (P,), (N,), (S,), dyn=True, no_warn=True),
    C(or_shortcircuit_div, (P, Z0), (P, N), (P, P), dyn=True, no_warn=True),
    # while
    C(while_double, (P,), (S,), (L,), dyn=True),
    C(while_counter_python_tensor, (P,), (S,), (L,), (N,), dyn=True, loose=True),
    C(while_tensor_counter, (P, i64(3)), (P, i64(0)), (P, i64(5)), dyn=True, loose=True),
    C(while_python_only, (P,), (N,)),
    C(while_break, (P,), (N,), (L,), dyn=True, loose=True),
    C(while_continue, (P,), (S,), (N,), (L,), dyn=True),
    C(while_true_break, (P,), (L,), (N,), dyn=True),
    C(while_nested, (P,), (S,), (L,), dyn=True),
    C(while_else, (P,), (S,), dyn=True),
    C(while_var_set_in_body, (P,), (S,), (L,), dyn=True, loose=True),
    C(while_cond_helper, (P,), (N,), (L,), dyn=True),
    C(while_or_cond, (P, N), (L, L), (S, P), dyn=True),
    C(while_not_cond, (P,), (N,), (L,), dyn=True),
    C(while_tensor_if_in_body, (P,), (S,), (L,), dyn=True),
    # for
    C(for_range_python, (P,), (N,)),
    C(for_range_tensor, (P, i64(0)), (P, i64(3)), (P, i64(5)), dyn=True),
    C(for_range_tensor_start_stop, (P, i64(1), i64(7)), (P, i64(0), i64(3)),
      (P, i64(5), i64(2)), dyn=True),
    C(for_range_tensor_step, (P, i64(10), i64(3)), (P, i64(10), i64(4)), (P, i64(3), i64(1)),
      dyn=True),
    C(for_range_derived, (P,), (N,), (M,), dyn=True),
    C(for_range_len, (P,), (N,)),
    C(for_loop_var_after, (P, i64(2)), (P, i64(4)), dyn=True),  # (i: an int, as eager)
    C(for_tensor_rows, (X4a,), (X4b,)),
    C(for_tensor_rows_break, (X4a,), (X4b,), (X4c,), dyn=True),
    C(for_tensor_elems_if, (P,), (M,), (N,), dyn=True),
    C(for_list_literal, (P,), (N,)),
    C(for_tuple_of_tensors, (P, N), (S, L)),
    C(for_list_tensor_cond, (P,), (S,), (L,), dyn=True),
    C(for_enumerate_list, (P,), (N,)),
    C(for_enumerate_tensor, (P,), (M,)),
    C(for_enumerate_start_break, (P,), (M,), (np.array([1.0, -2.0, 3.0]),), dyn=True),
    C(for_zip_lists, (P,), (N,)),
    C(for_zip_tensors, (P, N), (S, L)),
    C(for_zip_rows_cond, (X4a, X4b), (X4b, X4a), (X4c, X4b), dyn=True),
    C(for_dict_items, (P,), (N,)),
    C(for_else_tensor_break, (P, i64(3)), (S, i64(3)), (N, i64(2)), dyn=True),
    C(for_else_python_range, (P,), (N,), dyn=True),
    C(for_break_range_tensor, (P, i64(5)), (S, i64(5)), (P, i64(1)), dyn=True),
    C(for_continue_range_tensor, (P, i64(5)), (P, i64(8)), (P, i64(0)), dyn=True),
    C(for_continue_python_range, (P,), (N,), (L,), dyn=True),
    C(for_break_and_continue, (P,), (S,), (N,), (L,), dyn=True),
    C(for_nested_tensor_ranges, (P, i64(2), i64(3)), (P, i64(3), i64(1)), (P, i64(0), i64(2)),
      dyn=True),
    C(for_inner_bound_from_outer, (i64([2, 0, 3]),), (i64([1, 4, 1]),), dyn=True),
    C(for_nested_break_inner, (P,), (S,), (L,), dyn=True),
    C(for_while_in_for, (P, i64(2)), (N, i64(3)), (L, i64(1)), dyn=True),
    C(for_carried_python_range, (P,), (N,)),
    C(for_carried_tensor_range, (P, i64(0)), (P, i64(4)), (P, i64(6)), dyn=True),
    C(for_setitem_in_loop, (P, i64(2)), (P, i64(3)), (P, i64(0)), dyn=True),
    # early return
    C(ret_in_if, (P,), (N,), dyn=True),
    C(ret_in_both, (P,), (N,), dyn=True),
    C(ret_elif_chain, (L,), (P,), (N,), dyn=True),
    C(ret_nested, (P, P), (P, N), (N, P), dyn=True),
    C(ret_in_while, (P,), (N,), (NN,), dyn=True),
    C(ret_in_for_range_tensor, (P, i64(3)), (S, i64(3)), (P, i64(0)), dyn=True),
    C(ret_in_for_python_range, (P,), (N,), (NN,), dyn=True, loose=True),
    C(ret_after_continue, (P,), (S,), (L,), dyn=True),
    C(ret_tuple_branches, (P,), (N,), dyn=True),
    C(ret_in_loop_over_rows, (X4a,), (X4c,), (X4b,), dyn=True),
    C(ret_nested_loops, (P, i64(3)), (S, i64(3)), (S, i64(6)), dyn=True),
    C(ret_in_while_true, (P,), (N,), (S,), dyn=True),
    C(ret_tuple_in_tensor_loop, (P, i64(2)), (N, i64(2)), (NN, i64(2)), dyn=True),
    C(ret_tuple_in_while, (P,), (N,), (NN,), dyn=True),
    # lists
    C(list_append_tensor_range, (P, i64(2)), (P, i64(4)), dyn=True),
    C(list_append_while, (P,), (S,), (L,), dyn=True),
    C(list_append_stack_sum, (P, i64(1)), (P, i64(3)), dyn=True),
    C(list_append_python_range_cond, (P,), (S,), (N,), dyn=True),
    C(list_append_in_tensor_if, (P,), (N,), dyn=True),
    C(list_append_cond_in_tensor_loop, (P, i64(4)), (S, i64(4)), (P, i64(1)), dyn=True),
    C(list_append_loop_in_tensor_if, (N, i64(2)), (N, i64(3)), (P, i64(2)), dyn=True),
    C(list_of_tuples, (P, i64(2)), (P, i64(3)), dyn=True),
    C(list_of_tuples_unpack, (P, i64(2)), (P, i64(4)), (P, i64(0)), dyn=True),
    C(list_pop, (P, i64(1)), (P, i64(3)), dyn=True),
    C(list_pop_value, (P, i64(1)), (P, i64(3)), dyn=True),
    C(list_index_after_loop, (P, i64(1)), (P, i64(4)), dyn=True),
    C(list_len_after_loop, (P,), (S,), (L,), dyn=True, loose=True),
    C(list_python_range_cat, (P,), (N,)),
    C(list_comprehension, (P,), (N,)),
    C(list_return_list, (P,), (N,), dyn=True),
    C(dict_return, (P,), (N,), dyn=True),
    # builtins
    C(builtin_len, (P,), (P2,)),
    C(builtin_isinstance, (P, 3), (P, 0.5)),
    C(builtin_int_of_tensor, (P,), (S,), (N,), dyn=True),
    C(builtin_float_of_tensor, (P,), (N,), loose=True),
    C(builtin_bool_of_tensor, (P,), (N,), dyn=True),
    C(builtin_int_range, (P, i64(2)), (P, i64(5)), dyn=True),
    C(builtin_abs_max, (N,), (P2,)),
    C(builtin_shape_unpack, (X4a,), (X4a.T.copy(),)),
    # Python stays Python
    C(py_only_return_int, (P, 3), (P, 4)),
    C(py_string_arg, (P, "abc"), (P, "xyz")),
    C(py_tuple_unpack, (P,), (N,)),
    C(py_default_arg, (P,), (P, 3.0)),
    C(py_starargs, (P, N, S), (N, N, S), (P, S), dyn=True),
    C(py_while_python_list, (P,), (N,)),
    # functions, closures, classes
    C(fn_nested_def, (P,), (N,), dyn=True),
    C(fn_nested_def_closure, (P, 1.0), (P, 2.0)),
    C(fn_lambda_call, (P,), (N,)),
    C(fn_closure_scaled, (P,), (N,), dyn=True),
    C(fn_uses_globals, (P,), (N,), dyn=True),
    C(fn_calls_user_fn, (P,), (N,), dyn=True),
    C(fn_calls_user_fn_loop, (N, i64(1)), (N, i64(4)), dyn=True),
    C(fn_recursive_python, (P, 3), (P, 0)),
    C(fn_calls_method, (P,), (N,), dyn=True),
    C(fn_creates_object, (P,), (N,), dyn=True),
    C(fn_helper_in_loop, (P, i64(2)), (N, i64(3)), dyn=True),
]

# --------------------------------------------------------------------------------------------
# known implementation bugs (strict xfail: a fix makes the test XPASS and fail, so drop the entry)
# --------------------------------------------------------------------------------------------
KNOWN_BUGS: dict = {}
HANGS: set = set()   # cases known to loop forever: give up after 2 s instead of 10


def params(items, name=lambda item: item.fn.__name__):
    """pytest params named after each case's function, strict xfail for the known bugs."""
    out = []
    for item in items:
        ident = name(item)
        marks = ()
        if ident in KNOWN_BUGS:
            marks = pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[ident])
        out.append(pytest.param(item, id=ident, marks=marks))
    return out


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def to_hf(value, requires_grad=False):
    if isinstance(value, np.ndarray):
        grad = requires_grad and value.dtype.kind == "f"
        return hf.tensor(value.copy(), requires_grad=grad)
    if isinstance(value, tuple):
        return tuple(to_hf(v, requires_grad) for v in value)
    if isinstance(value, list):
        return [to_hf(v, requires_grad) for v in value]
    return value


def signature(value):
    if isinstance(value, np.ndarray):
        return ("T", value.shape, value.dtype.str)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(signature(v) for v in value)
    return ("P", type(value).__name__, value)


def assert_same(eager, conv, loose=False, path="result"):
    """Structure and values of a converted result equal the eager one."""
    if isinstance(eager, hf.Tensor):
        assert isinstance(conv, hf.Tensor), f"{path}: expected an hf.Tensor, got {type(conv)}"
        assert tuple(conv.shape) == tuple(eager.shape), \
            f"{path}: shape {tuple(conv.shape)} != eager {tuple(eager.shape)}"
        assert conv.dtype == eager.dtype, f"{path}: dtype {conv.dtype} != eager {eager.dtype}"
        np.testing.assert_allclose(conv.numpy(), eager.numpy(), rtol=1e-6, atol=1e-9,
                                   err_msg=path)
    elif isinstance(eager, (list, tuple)):
        assert type(conv) is type(eager), f"{path}: {type(conv)} != eager {type(eager)}"
        assert len(conv) == len(eager), f"{path}: length {len(conv)} != eager {len(eager)}"
        for i, (e, c) in enumerate(zip(eager, conv)):
            assert_same(e, c, loose, f"{path}[{i}]")
    elif isinstance(eager, dict):
        assert isinstance(conv, dict), f"{path}: {type(conv)} is not a dict"
        assert list(conv) == list(eager), f"{path}: keys {list(conv)} != {list(eager)}"
        for k in eager:
            assert_same(eager[k], conv[k], loose, f"{path}[{k!r}]")
    elif loose and isinstance(eager, (bool, int, float)) and isinstance(conv, hf.Tensor):
        assert conv.numel() == 1, f"{path}: {conv} is not a scalar"
        np.testing.assert_allclose(conv.numpy().reshape(()), eager, rtol=1e-6, err_msg=path)
    else:
        assert type(conv) is type(eager), f"{path}: {type(conv)} ({conv!r}) != eager " \
                                          f"{type(eager)} ({eager!r})"
        if isinstance(eager, float):
            np.testing.assert_allclose(conv, eager, rtol=1e-6, err_msg=path)
        else:
            assert conv == eager, f"{path}: {conv!r} != eager {eager!r}"


@contextlib.contextmanager
def time_limit(seconds=10.0):
    """A hung conversion (e.g. an endless loop at trace time) fails the test instead of CI."""
    if not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum, frame):
        raise TimeoutError(f"no result within {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_eager(fn, args, no_warn=False):
    with warnings.catch_warnings():
        if no_warn:
            warnings.simplefilter("error", RuntimeWarning)
        return fn(*to_hf(args))


def cache_info(f):
    info = getattr(f, "cache_info", None)
    if info is None:
        info = f.forward.cache_info
    return info()


# --------------------------------------------------------------------------------------------
# the table-driven test
# --------------------------------------------------------------------------------------------
def test_table_is_large_and_dynamic_cases_have_same_shaped_inputs():
    assert len(CASES) >= 110
    for case in CASES:
        if case.dyn:
            sigs = [signature(a) for a in case.inputs]
            assert len(sigs) > len(set(sigs)), case.fn.__name__


@pytest.mark.parametrize("case", params(CASES))
def test_conversion_case(case):
    f = hf.jit.to_static(case.fn)
    calls = case.inputs + case.inputs[:1]
    for args in calls:
        eager = run_eager(case.fn, args, case.no_warn)
        with time_limit(2.0 if case.fn.__name__ in HANGS else 10.0):
            conv = run_eager(f, args, case.no_warn)
        assert_same(eager, conv, case.loose, f"{case.fn.__name__}{signature(args)}")
    if case.check_cache:
        expected = len({signature(a) for a in case.inputs})
        assert cache_info(f).misses == expected, cache_info(f)


# --------------------------------------------------------------------------------------------
# numpy / item inside the function: the current call's values (no cache assertion)
# --------------------------------------------------------------------------------------------
def np_item_scale(x):
    v = x.sum().item()
    return x * v


def np_item_branch(x):
    if x.sum().item() > 0:
        return x * 2
    return x * 3


def np_sort(x):
    a = np.sort(x.numpy())
    return hf.tensor(a) + x


def np_mean_of_numpy(x):
    m = float(np.mean(x.numpy()))
    return x - m


def np_item_loop(x):
    n = int(x.sum().item())
    s = x * 0
    for _ in range(n):
        s = s + 1
    return s


def np_tolist(x):
    values = x.numpy().tolist()
    return x * values[0]


NUMPY_CASES = [
    C(np_item_scale, (P,), (N,), (S,), check_cache=False),
    C(np_item_branch, (P,), (N,), check_cache=False),
    C(np_sort, (M,), (P,), (np.array([2.0, 9.0, -3.0]),), check_cache=False),
    C(np_mean_of_numpy, (P,), (N,), check_cache=False),
    C(np_item_loop, (np.array([1.0, 1.0, 0.0]),), (np.array([1.0, 2.0, 1.0]),),
      check_cache=False),
    C(np_tolist, (P,), (N,), check_cache=False),
]


@pytest.mark.parametrize("case", params(NUMPY_CASES))
def test_numpy_round_trip(case):
    test_conversion_case(case)


# --------------------------------------------------------------------------------------------
# print: on every call, with the current call's values
# --------------------------------------------------------------------------------------------
def pr_tensor(x):
    print(x)
    return x + 1


def pr_multi(x):
    print("sum:", x.sum(), "first", x[0])
    return x


def pr_in_branch(x):
    if x.sum() > 0:
        print("positive", x.sum())
    else:
        print("negative", x)
    return x


def pr_in_for(x, n):
    for i in range(n):
        print(x * i)
    return x


def pr_in_while(x):
    while x.sum() < 20:
        x = x * 2
        print(x)
    return x


def pr_sep_end(x):
    print(x.sum(), x.mean(), sep=" | ", end="!\n")
    return x


def pr_python_value(x, k):
    print("k is", k)
    return x * k


def noisy_positive(t):
    print("rhs evaluated")
    return t.sum() > 0


def pr_and_shortcircuit(x, y):
    if x.sum() > 0 and noisy_positive(y):
        return x + y
    return x - y


def pr_or_shortcircuit(x, y):
    if x.sum() > 0 or noisy_positive(y):
        return x + y
    return x - y


def pr_in_helper(x):
    def show(t):
        print("helper", t)
        return t

    return show(x * 2)


def pr_str_concat_percent_format(x):
    # str(x) + text, "%s" % x, "{}".format(x): each run's values, as f-strings
    print("sum=" + str(x.sum()), str(x.max()) + " max")
    print("b=%s" % x.sum(), "c=%s/%d" % (x.min(), 3), "lit %d%%" % 5)
    print("d={}".format(x.mean()) + "!", "{0} and {0}".format(x[0]))
    return x * 2


PRINT_CASES = [
    C(pr_str_concat_percent_format, (P,), (N,)),
    C(pr_tensor, (P,), (N,)),
    C(pr_multi, (P,), (N,)),
    C(pr_in_branch, (P,), (N,), dyn=True),
    C(pr_in_for, (P, i64(2)), (P, i64(3)), (P, i64(0)), dyn=True),
    C(pr_in_while, (P,), (S,), (L,), dyn=True),
    C(pr_sep_end, (P,), (N,)),
    C(pr_python_value, (P, 2), (P, 3)),
    C(pr_and_shortcircuit, (P, P), (N, P), (P, N), dyn=True),
    C(pr_or_shortcircuit, (P, P), (N, P), (N, N), dyn=True),
    C(pr_in_helper, (P,), (N,)),
]


@pytest.mark.parametrize("case", params(PRINT_CASES))
def test_print_every_call(case, capsys):
    f = hf.jit.to_static(case.fn)
    for args in case.inputs + case.inputs[:1]:
        eager = case.fn(*to_hf(args))
        expected = capsys.readouterr().out
        conv = f(*to_hf(args))
        got = capsys.readouterr().out
        assert got == expected, f"{case.fn.__name__}{signature(args)}"
        assert_same(eager, conv, path=case.fn.__name__)
    assert cache_info(f).misses == len({signature(a) for a in case.inputs})


# --------------------------------------------------------------------------------------------
# assert: raises on the call where it fails, even after tracing
# --------------------------------------------------------------------------------------------
def as_all_positive(x):
    assert (x > 0).all()
    return x * 2


def as_with_msg(x):
    assert x.sum() > 0, "sum must be positive"
    return x * 2


def as_in_loop(x, n):
    for _ in range(n):
        x = x - 1
        assert x.min() > -5
    return x


def as_in_branch(x):
    if x.mean() > 0:
        assert x.max() < 10
    return x


def as_int_tensor(n):
    assert n
    return n + 1


def as_msg_of_values(x):
    assert (x > 0).all(), f"bad values {x}"
    assert x.sum() < 100, "sum " + str(x.sum()) + " too large"
    return x * 2


def as_python(x, k):
    assert k > 0
    return x * k


ASSERT_CASES = [
    # (fn, passing inputs, failing inputs)
    (as_all_positive, [(P,), (S,)], [(M,)]),
    (as_with_msg, [(P,), (M * -1,)], [(N,)]),
    (as_in_loop, [(P, i64(2)), (N, i64(1))], [(N, i64(3)), (P, i64(8))]),
    (as_in_branch, [(P,), (N,), (NN,)], [(np.array([20.0, 1.0, 1.0]),)]),
    (as_int_tensor, [(i64(3),), (i64(-1),)], [(i64(0),)]),
    (as_python, [(P, 2)], [(P, -1)]),
    # the message formats each failing run's values (as eager's)
    (as_msg_of_values, [(P,), (S,)], [(M,), (L * 10,)]),
]


@pytest.mark.parametrize("fn,passing,failing", ASSERT_CASES,
                         ids=[c[0].__name__ for c in ASSERT_CASES])
def test_assert_at_run_time(fn, passing, failing):
    f = hf.jit.to_static(fn)
    order = [(a, True) for a in passing[:1]] + [(a, False) for a in failing] + \
            [(a, True) for a in passing[1:]] + [(a, False) for a in failing[:1]] + \
            [(a, True) for a in passing[:1]]
    for args, ok in order:
        if ok:
            assert_same(fn(*to_hf(args)), f(*to_hf(args)), path=fn.__name__)
        else:
            with pytest.raises(AssertionError) as eager_info:
                fn(*to_hf(args))
            with pytest.raises(AssertionError) as conv_info:
                f(*to_hf(args))
            if str(eager_info.value):
                assert str(eager_info.value) in str(conv_info.value)
    if fn is not as_python:
        assert cache_info(f).misses == len({signature(a) for a in passing + failing})


# --------------------------------------------------------------------------------------------
# gradients
# --------------------------------------------------------------------------------------------
def g_straight(x):
    return x * x + x.exp()


def g_if(x):
    if x.sum() > 0:
        return x * x
    return x.exp() * 3


def g_if_two_inputs(x, y):
    if (x * y).sum() > 0:
        z = x * y
    else:
        z = x + y * y
    return z


def g_while(x):
    while x.sum() < 10:
        x = x * 2
    return x


def g_while_counter(x):
    i = 0
    y = x
    while i < 4 and y.sum() < 30:
        y = y * x
        i += 1
    return y


def g_for_range(x, n):
    y = x
    for _ in range(n):
        y = y * x
    return y


def g_list_stack(x, n):
    outs = []
    for i in range(n):
        outs.append(x * (i + 1))
    return hf.stack(outs)


def g_early_return(x):
    for _ in range(4):
        if x.sum() > 10:
            return x * x
        x = x * 2
    return x


def g_break(x):
    while True:
        x = x * 1.5
        if x.sum() > 10:
            break
    return x.tanh()


def g_where_and_if(x):
    y = hf.where(x > 0, x * x, -x)
    if y.sum() > 5:
        y = y.sqrt()
    return y


def g_helper(x):
    return helper_branchy(x) * x


GRAD_CASES = [
    C(g_straight, (P,), (N,)),
    C(g_if, (P,), (N,), dyn=True),
    C(g_if_two_inputs, (P, P), (P, N), dyn=True),
    C(g_while, (P,), (S,), (L,), dyn=True),
    C(g_while_counter, (P,), (S,), (L,), dyn=True),
    C(g_for_range, (P, i64(0)), (P, i64(2)), (P, i64(3)), dyn=True),
    C(g_list_stack, (P, i64(1)), (P, i64(3)), dyn=True),
    C(g_early_return, (P,), (S,), (N,), dyn=True),
    C(g_break, (P,), (S,), (L,), dyn=True),
    C(g_where_and_if, (P,), (S,), (M,), dyn=True),
    C(g_helper, (P,), (N,), dyn=True),
]


def _grads(fn, args):
    targs = to_hf(args, requires_grad=True)
    out = fn(*targs)
    out.sum().backward()
    return out, [t.grad for t in targs if isinstance(t, hf.Tensor) and t.requires_grad]


@pytest.mark.parametrize("case", params(GRAD_CASES))
def test_gradients(case):
    f = hf.jit.to_static(case.fn)
    for args in case.inputs + case.inputs[:1]:
        eager_out, eager_grads = _grads(case.fn, args)
        conv_out, conv_grads = _grads(f, args)
        assert_same(eager_out.detach(), conv_out.detach(), path=case.fn.__name__ + " output")
        assert len(conv_grads) == len(eager_grads)
        for eg, cg in zip(eager_grads, conv_grads):
            assert cg is not None, f"{case.fn.__name__}: converted gave no gradient"
            np.testing.assert_allclose(cg.numpy(), eg.numpy(), rtol=1e-6, atol=1e-9,
                                       err_msg=f"{case.fn.__name__}{signature(args)} grad")
    assert cache_info(f).misses == len({signature(a) for a in case.inputs})


# --------------------------------------------------------------------------------------------
# nn.Module conversion
# --------------------------------------------------------------------------------------------
class BranchyNet(hf.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = hf.nn.Linear(3, 4)
        self.fc2 = hf.nn.Linear(4, 2)

    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 0:
            h = h.relu()
        else:
            h = -h * 2
        return self.fc2(h)


class LoopNet(hf.nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = hf.nn.Linear(4, 4)

    def forward(self, x, steps):
        h = x
        i = 0
        while i < steps:
            h = (self.cell(h) + x).tanh()
            i += 1
        return self.cell(h)


class StackNet(hf.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = hf.nn.ModuleList([hf.nn.Linear(4, 4) for _ in range(3)])
        self.inner = BranchyNet()
        self.scale = 0.5

    def forward(self, x):
        outs = []
        for layer in self.layers:
            y = layer(x)
            if y.mean() > 0:
                x = y * self.scale
            else:
                x = y + x
            outs.append(x)
        h = hf.stack(outs).sum(0)
        while h.abs().sum() > 4:
            h = h / 2
        return self.inner(h[..., :3])


def _module_inputs(name):
    rng = np.random.default_rng(0)
    if name == "LoopNet":
        x = rng.standard_normal((2, 4)).astype(np.float32)
        return [(x, i64(0)), (x, i64(3)), (x * 2, i64(5))]
    if name == "BranchyNet":
        x = rng.standard_normal((5, 3)).astype(np.float32)
        return [(x,), (-x,), (x * 3,), (x - 2,)]
    x = rng.standard_normal((2, 4)).astype(np.float32)
    return [(x,), (-x,), (x * 4,), (x - 1,)]


def _param_grads(net):
    return [None if p.grad is None else p.grad.numpy().copy() for p in net.parameters()]


def _zero_grads(net):
    for p in net.parameters():
        p.grad = None


@pytest.mark.parametrize("cls", params([BranchyNet, LoopNet, StackNet], lambda c: c.__name__))
def test_module_forward_and_parameter_grads(cls):
    hf.manual_seed(0)
    net = cls()
    inputs = _module_inputs(cls.__name__)
    expected = []
    for args in inputs:
        _zero_grads(net)
        out = net(*to_hf(args))
        out.sum().backward()
        expected.append((out.detach(), _param_grads(net)))
    # the paths differ: at least two different branches are taken among the inputs
    converted = hf.jit.to_static(net)
    assert isinstance(converted, hf.nn.Module)
    for args, (out_e, grads_e) in zip(inputs, expected):
        _zero_grads(converted)
        out = converted(*to_hf(args))
        assert_same(out_e, out.detach(), path=cls.__name__)
        out.sum().backward()
        for ge, gc in zip(grads_e, _param_grads(converted)):
            assert (ge is None) == (gc is None)
            if ge is not None:
                np.testing.assert_allclose(gc, ge, rtol=1e-4, atol=1e-6)
    assert cache_info(converted).misses == 1


def test_module_train_eval_is_part_of_the_key():
    hf.manual_seed(0)
    net = BranchyNet()
    x = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    conv = hf.jit.to_static(net)
    conv.train()
    conv(hf.tensor(x))
    conv.eval()
    out = conv(hf.tensor(x))
    conv(hf.tensor(-x))
    assert cache_info(conv).misses == 2
    with hf.no_grad():
        h = net.fc(hf.tensor(x))
        h = h.relu() if h.sum().item() > 0 else -h * 2
        ref = net.fc2(h)
    np.testing.assert_allclose(out.detach().numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------------
# decorator, not_to_static, cache and introspection API
# --------------------------------------------------------------------------------------------
PLAIN_CODES = []


def _plain_helper_raw(t, k):
    PLAIN_CODES.append(sys._getframe().f_code)
    count = 0
    while count < k:
        count += 1
    return t * count


plain_helper = hf.jit.not_to_static(_plain_helper_raw)


def uses_plain_helper(x, k):
    if x.sum() > 0:
        y = plain_helper(x, k)
    else:
        y = x
    return y


def test_not_to_static_helper_stays_python():
    PLAIN_CODES.clear()
    f = hf.jit.to_static(uses_plain_helper)
    for args in [(P, 3), (N, 3), (P, 2)]:
        assert_same(uses_plain_helper(*to_hf(args)), f(*to_hf(args)))
    assert PLAIN_CODES and all(c is _plain_helper_raw.__code__ for c in PLAIN_CODES)
    assert cache_info(f).misses == 2


def test_decorator_form_and_attributes():
    @hf.jit.to_static
    def decorated(x, n):
        s = x * 0
        for i in range(n):
            if (x * i).sum() > 5:
                s = s + x
        return s

    raw = decorated.dygraph_function
    assert callable(raw) and raw is not decorated
    for args in [(P, i64(3)), (S, i64(3)), (P, i64(0))]:
        assert_same(raw(*to_hf(args)), decorated(*to_hf(args)))
    info = decorated.cache_info()
    assert info.misses == 1 and info.hits == 2
    assert tuple(info._fields) == ("hits", "misses", "programs")
    code = hf.jit.get_code(decorated)
    assert isinstance(code, str) and "def " in code


def test_dygraph_function_is_the_original():
    f = hf.jit.to_static(if_basic)
    assert f.dygraph_function is if_basic


def test_cache_key_shapes_dtypes_and_python_values():
    f = hf.jit.to_static(if_python_flag)
    f(hf.tensor(P), True)
    f(hf.tensor(N), True)
    assert cache_info(f).misses == 1
    f(hf.tensor(P), False)
    assert cache_info(f).misses == 2
    f(hf.tensor(P2), True)
    assert cache_info(f).misses == 3
    f(hf.tensor(P.astype(np.float32)), True)
    assert cache_info(f).misses == 4
    f(hf.tensor(N), False)
    f(hf.tensor(S.astype(np.float32)), True)
    info = cache_info(f)
    assert info.misses == 4 and info.hits == 3


def test_no_retrace_for_many_values():
    f = hf.jit.to_static(while_double)
    rng = np.random.default_rng(3)
    for _ in range(10):
        x = np.abs(rng.standard_normal(3)) + 0.01
        assert_same(while_double(hf.tensor(x)), f(hf.tensor(x)))
    assert cache_info(f).misses == 1


def prints_to_stderr(x):
    print("loss", x.sum(), file=sys.stderr)
    return x + 1


def test_print_to_sys_stderr_reaches_each_calls_stream():
    # file=sys.stderr is looked up on every run, as eager print does: a stream swapped in
    # after tracing (pytest's capture, contextlib.redirect_stderr) receives the later calls
    f = hf.jit.to_static(prints_to_stderr)
    for value in (1.0, 2.0):
        stream = io.StringIO()
        with contextlib.redirect_stderr(stream):
            f(hf.full((2,), value))
        expected = io.StringIO()
        with contextlib.redirect_stderr(expected):
            prints_to_stderr(hf.full((2,), value))
        assert stream.getvalue() == expected.getvalue() != ""
