"""Python builtins and statements in converted code with tensor-aware forms: ``print``,
``assert``, ``len``, f-strings and %-formatting (strings a program chooses), shapes,
``with``, list updates (append, extend, insert, pop, item updates) and comprehensions,
``isinstance``/``type``, ``min``/``max``/``sorted``/``any``/``all``, and the table
:func:`~hybridfw.converter.runtime.calls.convert_call` looks builtins up in (``_BUILTINS``).
"""
from __future__ import annotations

import builtins
import functools
import operator
import sys

import numpy as np

from ...dtypes import bool_, float64, int64
from ...ops.registry import TensorLike
from ...static.control_flow import active_program
from ...static.ir import Variable
from ..errors import ConversionError, UnsupportedConstructError, located, user_frame
from .control_flow import (
    convert_enumerate,
    convert_range,
    convert_zip,
    is_static,
    require_one_element,
)
from .tensor_array import flip_rows, is_tensor_array
from .undefined import Undefined

__all__ = ["DeferredString", "chosen_string", "convert_append", "convert_assert", "convert_extend",
           "convert_insert", "convert_item_update", "convert_len", "convert_list_comprehension",
           "convert_pop", "convert_print", "convert_shape", "convert_with", "format_percent",
           "format_string"]


# ---- builtins -------------------------------------------------------------------------------
class DeferredString(str):
    """A string formatting a static value (an f-string, ``str(x)``, ``"%s" % x``,
    ``"{}".format(x)``, and concatenations of those with strings): as a ``str``, what it says
    while the program is built (the value's description); :func:`convert_print` (and a
    converted ``assert``'s message) formats it again on every run, with that run's values:
    ``render(values)`` (``values``: its fields, static or not)."""

    __slots__ = ("render", "values")

    def __add__(self, other):
        if not isinstance(other, str):
            return NotImplemented
        return _joined(self, other, str.__add__(self, other))

    def __radd__(self, other):  # (str + DeferredString: the subclass's reflected method first)
        if not isinstance(other, str):
            return NotImplemented
        return _joined(other, self, str.__add__(other, self))


class ChosenString(DeferredString):
    """One of two strings, chosen by an ``if`` (or a conditional expression) a tensor decides:
    printed and formatted with each run's choice; other uses (comparing it, hashing it, its
    length) would need the choice while the program is built, and are refused."""

    __slots__ = ("choices",)

    def _refuse(self, *args, **kwargs):
        a, b = self.choices
        raise located(f"the string {a!r} or {b!r} is chosen by a condition a tensor decides, "
                      "so it is only known when the program runs: it can be printed or "
                      "formatted (print(s), f'{s}'), not compared or otherwise used while the "
                      "program is built; decide with the tensor condition itself instead",
                      ConversionError)

    __eq__ = __ne__ = __hash__ = __bool__ = __len__ = __getitem__ = __contains__ = _refuse
    __iter__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse


def chosen_string(a: str, b: str, index) -> ChosenString:
    """``a`` where the program's ``index`` (0 or 1) is 0, else ``b``."""
    chosen = ChosenString(f"<{a!r} or {b!r}, chosen when the program runs>")
    chosen.render, chosen.values, chosen.choices = (lambda fields: (a, b)[int(fields[0])],
                                                    (index,), (a, b))
    return chosen


def _deferred_fields(values):
    """``values`` with each DeferredString among them (a string an if chose, an f-string of a
    tensor) spread into its own fields, and ``rebuild(fields)`` giving the values back, each
    DeferredString rendered with that run's fields."""
    if not any(isinstance(v, DeferredString) for v in values):
        return values, lambda fields: fields
    parts = [(v.render, len(v.values)) if isinstance(v, DeferredString) else (None, 1)
             for v in values]
    flat = [f for v in values for f in (v.values if isinstance(v, DeferredString) else (v,))]

    def rebuild(fields):
        out, k = [], 0
        for render, n in parts:
            out.append(fields[k] if render is None else render(fields[k:k + n]))
            k += n
        return out
    return flat, rebuild


def _deferred_string(text: str, render, values) -> DeferredString:
    deferred = DeferredString(text)
    deferred.render, deferred.values = render, tuple(values)
    return deferred


def _joined(left: str, right: str, text: str) -> DeferredString:
    parts = [(p.render, len(p.values)) if isinstance(p, DeferredString) else (None, p)
             for p in (left, right)]
    values = [v for p in (left, right) if isinstance(p, DeferredString) for v in p.values]

    def render(fields):
        out, k = [], 0
        for fn, n in parts:
            if fn is None:
                out.append(n)
            else:
                out.append(fn(fields[k:k + n]))
                k += n
        return "".join(out)
    return _deferred_string(text, render, values)


def _now(values) -> list:
    """The values as they print while the program is built (a static value's description)."""
    return [repr(v) if is_static(v) else v for v in values]


def format_string(template: str, *values):
    """An f-string or ``str.format`` call, as converted code writes it (``f"{x:.2f}"`` ->
    ``format_string("{0:.2f}", x)``): the formatted text, or for a static value a
    :class:`DeferredString` that a converted ``print`` formats on every run."""
    for v in values:
        if isinstance(v, Undefined):
            raise v._error()
    if not any(is_static(v) or isinstance(v, DeferredString) for v in values):
        return template.format(*values)
    try:  # the description while building (a format spec does not apply to it)
        text = template.format(*_now(values))
    except (TypeError, ValueError, IndexError, KeyError):
        text = " ".join(str.__str__(v) if isinstance(v, str) else str(v) for v in _now(values))
    flat, rebuild = _deferred_fields(values)
    return _deferred_string(text, lambda fields: template.format(*rebuild(fields)), flat)


def format_percent(template: str, args):
    """``template % args`` in converted code: the text, or for a static value among ``args`` a
    :class:`DeferredString` formatted on every run (as :func:`format_string`)."""
    single = not isinstance(args, tuple)
    values = (args,) if single else args
    if isinstance(args, dict) or not any(is_static(v) or isinstance(v, DeferredString)
                                         for v in values):
        return template % args
    now = _now(values)
    try:
        text = template % (now[0] if single else tuple(now))
    except (TypeError, ValueError):
        text = " ".join(str.__str__(v) if isinstance(v, str) else str(v) for v in now)
    flat, rebuild = _deferred_fields(values)

    def render(fields):
        fields = rebuild(fields)
        return template % (fields[0] if single else tuple(fields))
    return _deferred_string(text, render, flat)


def convert_print(*args, **kwargs):
    """print: while a program is being built, the program prints, on every run, with the
    values of that run (Python values are those of the call that traced it; an f-string
    of a static value is formatted with that run's value too)."""
    from ...static.control_flow import active_program
    for a in args:
        if isinstance(a, Undefined):  # (not assigned, or no single value after an if)
            raise a._error()
    if active_program() is None and not any(is_static(a) or isinstance(a, DeferredString)
                                            for a in args):
        return print(*args, **kwargs)
    from ...dygraph.tensor import wrap_array
    from ...static import py_func
    slots = []  # (argument index, field index or None) of each static value, in order
    inputs = []
    for i, a in enumerate(args):
        if isinstance(a, DeferredString):
            for k, v in enumerate(a.values):
                if is_static(v):
                    slots.append((i, k))
                    inputs.append(v)
        elif is_static(a):
            slots.append((i, None))
            inputs.append(a)

    # a value standing for a Python number (a loop counter, x.item()) prints as the number
    numbers = [v.name in v.block.program.python_scalars for v in inputs]
    # a tensor prints as eager's would: with requires_grad=True or its grad_fn (which may
    # depend on the branch an if took: its predicate is read too)
    extras = [None if number else _grad_extra(v) for v, number in zip(inputs, numbers)]
    predicates: list = []
    for extra in extras:
        _grad_predicates(extra, predicates)
    predicates = list({id(p): p for p in predicates}.values())
    count = len(inputs)
    # file=sys.stdout/sys.stderr means the stream of each run (pytest's capsys and
    # contextlib.redirect_stderr replace it), not the object the tracing call saw
    standard = next((name for name in ("stdout", "stderr")
                     if kwargs.get("file") is getattr(sys, name)), None)

    def run(*arrays):
        flags = {id(p): bool(a) for p, a in zip(predicates, arrays[count:])}
        full = list(args)
        fields = {i: list(a.values) for i, a in enumerate(args)
                  if isinstance(a, DeferredString)}
        for (i, k), arr, number, extra in zip(slots, arrays, numbers, extras):
            value = arr.item() if number else wrap_array(arr)
            extra = _grad_extra_now(extra, flags)
            if extra is not None:
                value = _Printed(value, extra)
            if k is None:
                full[i] = value
            else:
                fields[i][k] = value
        for i, values in fields.items():
            full[i] = args[i].render(values)
        if standard is not None:
            kwargs["file"] = getattr(sys, standard)
        print(*full, **kwargs)
        return ()
    run.__qualname__ = "print"
    py_func(run, inputs + predicates, [], has_side_effects=True)
    return None


def _grad_extra(value, depth: int = 0):
    """What eager's repr of ``value`` would add about gradients: ``requires_grad=True`` for an
    argument or parameter that requires grad, ``grad_fn=<MulBackward>`` for a result computed
    from one (the operator that made it), None for a value that does not require grad. For a
    value an ``if`` on a tensor gives: ``(predicate, then, else)`` where the predicate is in
    scope here (the branch taken says which), else the then branch's; for a loop's, its body's.
    """
    if depth > 32 or not value.requires_grad:
        return None
    program = value.block.program
    name = value.name
    if name in program.grad_sources or name in program.params:
        return "requires_grad=True"
    op = next((op for block in program.blocks for op in block.ops if name in op.outputs), None)
    if op is None:
        return None
    if not op.blocks:
        return f"grad_fn=<{op.type.capitalize()}Backward>"
    index = op.outputs.index(name)
    sides = [op.attrs.get(key, ()) for key in ("true_outputs", "false_outputs", "body_outputs")]
    extras = [None if index >= len(names) or names[index] is None else
              _grad_extra(_find_var(program, names[index]), depth + 1) for names in sides]
    if op.type != "cond":
        return extras[2]
    pred = _find_var(program, op.inputs[0])
    if extras[0] == extras[1] or not _in_scope(pred, program.current_block()):
        return extras[0]
    return (pred, extras[0], extras[1])


def _find_var(program, name):
    for block in program.blocks:
        var = block.vars.get(name)
        if var is not None:
            return var
    return None


def _in_scope(var, block) -> bool:
    while block is not None:
        if var is not None and var.block is block:
            return True
        block = block.parent
    return False


def _grad_extra_now(extra, flags):
    """``extra`` with the predicates of the ifs it depends on (``flags``: their values this
    run, in the order :func:`_grad_predicates` listed them) decided."""
    while isinstance(extra, tuple):
        extra = extra[1] if flags[id(extra[0])] else extra[2]
    return extra


def _grad_predicates(extra, out: list) -> None:
    if isinstance(extra, tuple):
        out.append(extra[0])
        _grad_predicates(extra[1], out)
        _grad_predicates(extra[2], out)


class _Printed:
    """A tensor a converted ``print`` shows as eager code would show it (its repr with the
    gradient information of the value it stands for)."""

    __slots__ = ("extra", "tensor")

    def __init__(self, tensor, extra: str):
        self.tensor, self.extra = tensor, extra

    def __repr__(self) -> str:
        return f"{repr(self.tensor)[:-1]}, {self.extra})"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:  # a 0-d tensor formats as its number, as eager
        return format(self.tensor, spec) if spec or not self.tensor.shape else repr(self)


def convert_assert(test, message=None):
    """assert: when ``test`` is a static tensor, every run of the program checks it."""
    if not is_static(test):
        if not test:
            msg = message() if message is not None else None
            raise AssertionError(msg) if msg is not None else AssertionError()
        return
    from ...dygraph.tensor import wrap_array
    from ...static import py_func
    frame = user_frame(1)
    where = f" ({frame.f_code.co_filename}, line {frame.f_lineno})" if frame else ""
    fields, slots = [], []  # a message formatting static values: formatted with the run's
    if message is not None:
        try:
            built = message()
        except Exception:  # noqa: BLE001 - as in eager code, the message counts when it fails
            built = None
        if isinstance(built, DeferredString):
            fields = list(built.values)
            slots = [k for k, v in enumerate(fields) if is_static(v)]

    def run(value, *arrays):
        if not bool(np.all(np.asarray(value))):
            if slots:
                for k, arr in zip(slots, arrays):
                    fields[k] = wrap_array(arr)
                msg = built.render(fields)
            else:
                msg = message() if message is not None else None
            raise AssertionError((str(msg) if msg is not None else "assertion failed") + where)
        return ()
    run.__qualname__ = "assert"
    py_func(run, [test, *[fields[k] for k in slots]], [], has_side_effects=True)
    return


def convert_len(value):
    if is_tensor_array(value):
        return value.length()
    if is_static(value):
        if not value.shape:
            raise located("len() of a 0-d tensor", TypeError)
        return convert_shape(value)[0]
    return len(value)


def convert_shape(value):
    """``x.shape`` in converted code. A static value's dims known only when the program runs
    (an InputSpec's None) are values of the program there: 0-d ints standing for Python
    numbers (see ``Variable.python_number``), which ops taking sizes read as that dim
    (``x.view(x.shape[0], -1)``, ``hf.zeros(x.shape[0], 3)``) and which work in arithmetic,
    comparisons and ``range``. Anything else's ``shape`` as it is."""
    shape = value.shape
    if value.__class__ is Variable and -1 in shape:
        return RunTimeShape(_dynamic_dim(value, k) if s == -1 else s
                            for k, s in enumerate(shape))
    return shape


class RunTimeShape(tuple):
    """A shape holding dims known only when the program runs (see :func:`convert_shape`).
    ``==``/``!=`` with another shape compare those dims when the program runs (a bool value of
    the program, which a converted ``if`` branches on), except where the answer is known while
    building: the same dim of the same value, different lengths, or different known sizes."""

    __slots__ = ()

    def __eq__(self, other):
        if not isinstance(other, tuple):  # (as a tuple: never equal to a list)
            return NotImplemented
        if len(self) != len(other):
            return False
        result = True
        for a, b in zip(self, other):
            if a is b or _same_dim(a, b):
                continue
            if not is_static(a) and not is_static(b):
                if a != b:
                    return False
                continue
            equal = a == b
            result = equal if result is True else result & equal
        return result

    def __ne__(self, other):
        equal = self.__eq__(other)
        if equal is NotImplemented or isinstance(equal, bool):
            return equal if equal is NotImplemented else not equal
        return ~equal

    __hash__ = tuple.__hash__


def _same_dim(a, b) -> bool:
    source_a = getattr(a, "dim_source", None)
    source_b = getattr(b, "dim_source", None)
    if source_a is None or source_b is None:
        return False
    source_a, source_b = source_a(), source_b()
    return source_a is not None and source_b is not None and \
        source_a[0].name == source_b[0].name and source_a[1] == source_b[1]


def _dynamic_dim(value, k):
    from ...ops import reduction as R
    from ...ops.registry import apply
    dim = apply(R.dim_numel, value, dim=(k,))
    program = dim.block.program
    program.python_scalars.add(dim.name)
    # (a Variable of its own: an in-place update renames the object the user holds)
    program.dim_sources[dim.name] = (Variable(value.block, value.name, value.shape,
                                              value.dtype), k)
    return dim


def _size(value):
    def size(dim=None):
        shape = convert_shape(value)
        return shape if dim is None else shape[dim]
    return size


def _numel(value):
    def numel():
        n = 1
        for s in convert_shape(value):
            n = n * s
        return n
    return numel


def _cast(python_type, dtype):
    def cast(value=0, *args):
        if is_static(value):
            require_one_element(value, f"{python_type.__name__}() of a tensor with shape "
                                       f"{tuple(value.shape)}: only one-element tensors convert")
            if dtype is bool_:  # a stand-in for the Python number (see Variable.item)
                return (value.reshape(()) != 0).python_number()
            return value.reshape(()).astype(dtype).python_number()  # (int() truncates)
        return python_type(value, *args)
    return cast


def convert_with(manager):
    """Context managers that behave the same while tracing (grad modes, null contexts) pass;
    any other one is refused, since its effect would only happen while tracing."""
    import contextlib

    from ...dygraph.autograd import GradModeContext
    if isinstance(manager, (GradModeContext, contextlib.nullcontext)) or \
            getattr(manager, "__hf_static_safe__", False):
        return manager
    frame = user_frame(1)
    raise UnsupportedConstructError(
        f"'with' on the context manager {type(manager).__qualname__}",
        frame.f_code.co_filename if frame else None, frame.f_lineno if frame else None,
        hint="its enter/exit would only run while tracing; move the with block out of the "
             "converted function or mark the function with hf.jit.not_to_static")


def convert_list_comprehension(iterable, fn, test=None):
    """``[fn(item) for item in iterable if test(item)]``; over a tensor or a tensor array, a
    converted loop that appends to a new list (a tensor array when the loop is static); a
    condition a tensor decides appends under a converted ``if``."""
    from .control_flow import _static_iterable, convert_for, convert_ifelse, is_static
    if not _static_iterable(iterable):
        if test is None:
            return [fn(item) for item in iterable]
        result = []
        for item in iterable:
            keep = test(item)
            if is_static(keep) or is_tensor_array(result):
                (result,) = convert_ifelse(keep, lambda r, item=item: (
                    convert_append(r, fn(item)),), lambda r: (r,), (result,),
                    ("<list comprehension>",))
            elif keep:
                result.append(fn(item))
        return result

    def body(item, result):
        if test is None:
            return (convert_append(result, fn(item)),)
        return tuple(convert_ifelse(test(item), lambda r: (convert_append(r, fn(item)),),
                                    lambda r: (r,), (result,), ("<list comprehension>",)))
    (result,) = convert_for(iterable, body, ([],), ("<list comprehension>",))
    return result


def convert_append(lst, item):
    if is_tensor_array(lst):
        return lst.append(item)
    lst.append(item)
    return lst


_ITEM_OPS = {"+": (operator.add, operator.iadd), "-": (operator.sub, operator.isub),
             "*": (operator.mul, operator.imul), "/": (operator.truediv, operator.itruediv),
             "//": (operator.floordiv, operator.ifloordiv), "%": (operator.mod, operator.imod),
             "**": (operator.pow, operator.ipow), "&": (operator.and_, operator.iand),
             "|": (operator.or_, operator.ior), "^": (operator.xor, operator.ixor)}


def convert_item_update(obj, index, op, operand):
    """The new item of ``obj[index] op= operand``, which the converted code then assigns (see
    transformers/item_updates): out of place where ``obj`` is a tensor of a program being
    built (the assignment updates it; an in-place update of the item's view could not reach
    an ``obj`` from outside a branch a tensor decides), in place as in Python elsewhere."""
    out_of_place, in_place = _ITEM_OPS[op]
    if is_static(obj) or (isinstance(obj, TensorLike) and active_program() is not None):
        return out_of_place(obj[index], operand)
    return in_place(obj[index], operand)


def convert_extend(lst, items):
    """``lst.extend(items)``: an append per item (a tensor array grows one item at a time)."""
    if is_tensor_array(lst):
        for item in items:
            lst = lst.append(item)
        return lst
    lst.extend(items)
    return lst


def convert_insert(lst, index, item):
    if is_tensor_array(lst):
        return lst.insert(index, item)
    lst.insert(index, item)
    return lst


def convert_pop(lst, index=None):
    if is_tensor_array(lst):
        return lst.pop(index)
    item = lst.pop() if index is None else lst.pop(index)
    return lst, item


def _isinstance(value, classes):
    if isinstance(value, Variable):
        from ...dygraph.tensor import Tensor
        if classes is Tensor or (isinstance(classes, tuple) and Tensor in classes):
            return True
    return isinstance(value, classes)


def _type(*args, **kwargs):
    """``type(x)`` of a value the program computes is ``hf.Tensor``, as in eager code (the
    three-argument form creates a class, as ever)."""
    if len(args) == 1 and not kwargs and isinstance(args[0], Variable):
        from ...dygraph.tensor import Tensor
        return Tensor
    return type(*args, **kwargs)


def _extreme(python, pairwise, reduce):
    """``max``/``min`` where tensors a program computes take part: of several values, their
    elementwise extreme (``max(a, b)`` of 0-d tensors, as eager's value); of one tensor, its
    reduction over dim 0's items; else Python's own."""
    def call(*args, **kwargs):
        if set(kwargs) == {"key"} and len(args) == 1 and not is_static(args[0]):
            return _by_key(python, list(args[0]), kwargs["key"])
        if kwargs or not args:
            return python(*args, **kwargs)
        values = list(args[0]) if len(args) == 1 and not is_static(args[0]) else list(args)
        if len(args) == 1 and is_static(args[0]):
            return reduce(args[0])
        if not any(is_static(v) for v in values):
            return python(*args)
        out = values[0]
        for v in values[1:]:
            out = pairwise(out, v)
        return out
    call.__qualname__ = python.__name__
    return call


def _keys(items, key):
    """The keys of ``items`` as one 1-d tensor when the program computes one of them (else
    None: plain Python decides)."""
    import hybridfw as hf
    keys = [key(v) for v in items] if key is not None else list(items)
    if not any(is_static(k) for k in keys):
        return None
    for k in keys:
        if is_static(k) and k.shape not in ((), (1,)):
            raise located(f"a key that is a tensor of shape {tuple(k.shape)}: min(), max() and "
                          "sorted() compare one number per item", TypeError)
    return hf.stack([(k if is_static(k) else hf.tensor(k)).reshape(()) for k in keys])


def _stacked(items, what: str):
    import hybridfw as hf
    if not items or not all(is_static(v) or hf.is_tensor(v) for v in items) or \
            len({tuple(v.shape) for v in items}) != 1:
        raise located(f"{what} with a key the program computes picks the item when the "
                      "program runs, so the items must be tensors of one shape (to stack); "
                      "compute the keys first and pick with hf.where or an index",
                      TypeError)
    return hf.stack(items)


def _by_key(python, items, key):
    """``min(items, key=f)`` / ``max(...)`` where the program computes the keys: the first
    item with the smallest (largest) key, picked when the program runs (its gradient goes to
    that item, as eager's)."""
    keys = _keys(items, key)
    if keys is None:
        return python(items, key=key)
    index = keys.argmin() if python is min else keys.argmax()
    return _stacked(items, f"{python.__name__}()")[index]


def _sorted(iterable, *, key=None, reverse=False):
    """``sorted(items, key=f)`` where the program computes the keys: the items in that order
    (a stable sort, as Python's, also reversed), decided when the program runs."""
    items = list(iterable)
    keys = _keys(items, key)
    if keys is None:
        return sorted(items, key=key, reverse=reverse)
    order = keys.argsort(descending=reverse, stable=True)
    stacked = _stacked(items, "sorted()")
    return [stacked[order[i]] for i in range(len(items))]


def _truth(python, method):
    """``any``/``all`` of a tensor a program computes, or of an iterable holding such values:
    one boolean of the program (a Python bool, as in eager code)."""
    def call(iterable):
        import hybridfw as hf
        if not is_static(iterable):
            items = list(iterable)
            if not any(is_static(v) for v in items):
                return python(items)
            iterable = hf.stack([(v if is_static(v) else hf.tensor(bool(v))).reshape(())
                                 .astype(bool_) for v in items])
        out = getattr(iterable, method)()
        out.block.program.python_scalars.add(out.name)
        return out
    call.__qualname__ = python.__name__
    return call


def _pick(a, b, greater: bool):
    """Python's ``max(a, b)`` (``greater``) / ``min(a, b)`` with a value the program computes:
    ``b`` where it is strictly greater (smaller), else ``a`` -- ties and NaN keep the first, and
    the gradient goes to the one picked, as in eager code. Of two numbers, a number."""
    import hybridfw as hf
    from .logical import _number_like
    x, y = (a if is_static(a) else hf.tensor(a)), (b if is_static(b) else hf.tensor(b))
    out = hf.where(y > x if greater else y < x, y, x)
    if _number_like(a) and _number_like(b) and is_static(out):
        out.block.program.python_scalars.add(out.name)
    return out


def _maximum(a, b):
    return _pick(a, b, True)


def _minimum(a, b):
    return _pick(a, b, False)


def _deferred(python, template):
    """``str(x)``/``repr(x)`` of a value the program computes: a :class:`DeferredString`, so a
    converted ``print`` shows each run's value (as eager ``str(tensor)`` does)."""
    def call(*args, **kwargs):
        if len(args) == 1 and not kwargs and is_static(args[0]):
            return format_string(template, args[0])
        return python(*args, **kwargs)
    call.__qualname__ = python.__name__
    return call


def _reversed(sequence):
    """``reversed(x)`` of a value the program computes: ``x.flip(0)`` (as PyTorch's
    ``Tensor.__reversed__``), also with a dim 0 only known when the program runs."""
    if is_static(sequence) and sequence.ndim:
        return flip_rows(sequence)
    return reversed(sequence)


_BUILTINS = {id(k): (k, v) for k, v in {
    builtins.reversed: _reversed, builtins.sorted: _sorted,
    builtins.print: convert_print, builtins.len: convert_len, builtins.range: convert_range,
    builtins.enumerate: convert_enumerate, builtins.zip: convert_zip,
    builtins.int: _cast(int, int64), builtins.float: _cast(float, float64),
    builtins.bool: _cast(bool, bool_), builtins.isinstance: _isinstance, builtins.type: _type,
    builtins.max: _extreme(max, _maximum, lambda t: t.max(dim=0).values),
    builtins.min: _extreme(min, _minimum, lambda t: t.min(dim=0).values),
    builtins.any: _truth(any, "any"), builtins.all: _truth(all, "all"),
    builtins.str: _deferred(str, "{0!s}"), builtins.repr: _deferred(repr, "{0!r}"),
}.items()}

def _stack(tensors, dim=0, **kwargs):
    import hybridfw as hf
    if is_tensor_array(tensors):
        out = tensors.stacked()
        if dim == 0:
            return out
        order = list(range(1, out.ndim))
        order.insert(dim % out.ndim, 0)
        return out.permute(*order)
    return hf.stack(tensors, dim, **kwargs)


def _cat(tensors, dim=0, **kwargs):
    import hybridfw as hf
    if is_tensor_array(tensors):
        if dim != 0:
            raise located("hf.cat of a list grown inside a loop decided by a tensor: only "
                          "dim=0 is supported", NotImplementedError)
        out = tensors.stacked()
        return out.reshape(-1, *out.shape[2:])
    return hf.cat(tensors, dim, **kwargs)


def _sum(values, start=0):
    if is_tensor_array(values):
        return values.stacked().sum(0) + start
    return sum(values, start)


def _tensor(data, *args, dtype=None, **kwargs):
    import hybridfw as hf
    if is_static(data):
        return data if dtype is None else data.astype(dtype)
    return hf.tensor(data, *args, dtype=dtype, **kwargs)


def _list(values=()):
    return values if is_tensor_array(values) else list(values)


@functools.lru_cache(maxsize=1)
def _array_aware():
    import hybridfw as hf
    table = {hf.stack: _stack, hf.cat: _cat, builtins.sum: _sum, builtins.list: _list,
             hf.tensor: _tensor, hf.from_numpy: _tensor}
    if hasattr(hf, "concat"):
        table[hf.concat] = _cat
    return {id(k): (k, v) for k, v in table.items()}

