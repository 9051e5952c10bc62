"""Python source generation for compiled blocks (the executor's flat plans).

A compiled block is one generated Python function, in the spirit of torch.fx's code generation:
each value is a local variable, each operator one line calling its kernel with constant
attributes written inline, so running it costs no dictionary lookups, inference or validation.
The source stays readable for debugging (``Executor().compile(...).source``)::

    def run_plan(x):
        param0 = _tensor_param0._data
        t1 = _multiply(x, param0, out=_buf_t1)
        t2 = _add(t1, _c0, out=_buf_t2)
        t3 = _fix(_sum(_xp, t2, dim=None, keepdim=False), _float32)
        return (t3,)

Names starting with ``_`` are constants bound in the function's namespace: kernels (``_sum``),
ufuncs called directly (``_multiply``), arena views (``_buf_t1``), dtypes, Python scalars
pre-converted to 0-d arrays (``_c0``) and nested-tuple attributes (``spec=_spec_4``,
``ops=_ops_7``), bound once per distinct value: written inline, Python's compiler spends about
as long on them as on all the rest of a plan's source.

Each line may say which operator it runs; the namespace (the generated function's globals)
keeps that table under :data:`LINE_OPERATORS`, so an error can be traced from a traceback's
frame and line number to its operator after the fact (:func:`operator_at`), at no cost while
nothing fails.
"""
from __future__ import annotations

import functools
import itertools
import keyword
import linecache
import math

import numpy as np

from ..dtypes import DType
from ..ops import elementwise

__all__ = ["FunctionSource", "OpCall", "runtime_helpers", "LINE_OPERATORS", "operator_at",
           "exact_key"]

# namespace key of a generated function's line -> operator table (a list indexed by line number)
LINE_OPERATORS = "__hybridfw_line_operators__"

# Kernels made by the elementwise ufunc factory only forward to ``xp.<ufunc>``: calling the
# ufunc itself saves a Python frame per operator (about 0.2 us, half of a tiny add).
_UFUNC_KERNEL_CODE = elementwise._ufunc_kernel("add").__code__

# Ops whose ``out=`` means "update input 0 in place" rather than "write the result there": they
# may write into their own buffer only when it is input 0's buffer (an in-place pair).
OUT_UPDATES_INPUT0 = frozenset({"index_put"})

_sources = itertools.count()

_NEP50 = int(np.__version__.split(".")[0]) >= 2  # a Python or 0-d operand never sets the dtype


_LITERAL_CLASSES = frozenset({type(None), bool, int, str})


def _is_literal(value) -> bool:
    """Whether ``repr(value)`` is Python source evaluating to an equal value of the same type."""
    cls = value.__class__
    if cls in _LITERAL_CLASSES:
        return True
    if cls is float:
        return math.isfinite(value)
    if cls is not tuple:
        return False
    pending = [value]  # a stack, not recursion: attribute tuples nest deep (fused op lists)
    while pending:
        for v in pending.pop():
            cls = v.__class__
            if cls in _LITERAL_CLASSES:
                continue
            if cls is tuple:
                pending.append(v)
            elif cls is not float or not math.isfinite(v):
                return False
    return True


@functools.lru_cache(maxsize=4096)
def _identifier(text: str) -> str:
    """A Python identifier made from ``text`` (invalid characters become ``_``)."""
    ident = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in text)
    if not ident or ident[0].isdigit():
        ident = "v" + ident
    return ident


class FunctionSource:
    """The lines of one generated function, the identifiers of its values and its constants."""

    def __init__(self, name: str, xp):
        self.name = name
        self.xp = xp
        self.params: list = []
        self.lines: list = []
        self.line_operators: list = []  # per line: what ``line(..., operator=)`` said, or None
        # (its module name: numpy's floating-point warnings from it are silenced, see
        # hybridfw/__init__.py)
        self.namespace: dict = {"_xp": xp, "__name__": "hybridfw.static.generated"}
        self._ids: dict = {}
        self._literals: dict = {}  # repr of a nested-tuple literal -> its namespace name
        self._exact: dict = {}     # what decides _result_dtype -> its answer
        self._taken: set = set()
        self._counter = itertools.count()

    def ident(self, var_name: str) -> str:
        """The local variable holding value ``var_name`` (never starting with ``_``)."""
        ident = self._ids.get(var_name)
        if ident is None:
            base = _identifier(var_name)
            if base.startswith("_") or keyword.iskeyword(base):
                base = "v" + base
            ident = base
            n = 1
            while ident in self._taken:
                ident = f"{base}_{n}"
                n += 1
            self._taken.add(ident)
            self._ids[var_name] = ident
        return ident

    def const(self, value, hint: str) -> str:
        """Bind ``value`` in the namespace under a readable name derived from ``hint``."""
        name = "_" + _identifier(hint)
        existing = self.namespace.get(name, self)
        if existing is value:
            return name
        if existing is not self:
            name = f"{name}_{next(self._counter)}"
        self.namespace[name] = value
        return name

    def literal(self, value, hint: str) -> str:
        """Source text for an attribute ``value`` that :func:`_is_literal` accepts: its ``repr``,
        or for a tuple holding tuples the name (from ``hint``) it is bound under, once per
        distinct ``repr`` (exact for literals: ``1``, ``1.0`` and ``True`` differ)."""
        text = repr(value)
        if value.__class__ is not tuple or not any(v.__class__ is tuple for v in value):
            return text
        name = self._literals.get(text)
        if name is None:
            name = self._literals[text] = self.const(value, hint)
        return name

    def numbered_const(self, value) -> str:
        """Bind ``value`` (an operand) in the namespace as ``_c<n>``."""
        name = f"_c{next(self._counter)}"
        self.namespace[name] = value
        return name

    def dtype_const(self, dtype) -> str:
        """The namespace name of a numpy dtype (``_float32``)."""
        return self.const(np.dtype(dtype), np.dtype(dtype).name)

    def line(self, text: str, operator=None) -> None:
        """Append a line; ``operator`` (any object describing the operator the line runs) is what
        :func:`operator_at` gives for an error raised on it."""
        self.lines.append(text)
        self.line_operators.append(operator)

    def insert(self, index: int, text: str) -> None:
        """Insert a line (belonging to no operator) before line ``index`` of the body."""
        self.lines.insert(index, text)
        self.line_operators.insert(index, None)

    def source(self, docstring: str = "") -> str:
        head = f"def {self.name}({', '.join(self.params)}):"
        body = ([f'    """{docstring}"""'] if docstring else []) + \
            ["    " + line for line in self.lines]
        return "\n".join([head] + (body or ["    pass"])) + "\n"

    def build(self, docstring: str = ""):
        """Compile the source; returns ``(function, source)``."""
        source = self.source(docstring)
        header = 2 if docstring else 1  # the def line (and the docstring) come before the body
        self.namespace[LINE_OPERATORS] = [None] * (header + 1) + self.line_operators
        filename = f"<hybridfw {self.name} {next(_sources)}>"
        # tracebacks through generated code then show its lines
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        code = compile(source, filename, "exec")
        exec(code, self.namespace)  # noqa: S102 - our own generated source, no user text
        # (taken out of its own globals: the two would make a reference cycle, keeping what the
        # namespace holds, an arena for one, alive until the garbage collector runs)
        return self.namespace.pop(self.name), source


def operator_at(traceback):
    """What the innermost generated line in ``traceback`` said it runs (see
    :meth:`FunctionSource.line`), or None when no generated line with an operator is in it."""
    found = None
    while traceback is not None:
        table = traceback.tb_frame.f_globals.get(LINE_OPERATORS)
        if table is not None and traceback.tb_lineno < len(table):
            found = table[traceback.tb_lineno] or found
        traceback = traceback.tb_next
    return found


class OpCall:
    """How one registry operator is called from generated code.

    ``expr(out)`` is the call expression (``out`` the namespace name of a buffer to write into,
    or None); ``accepts_out`` says whether writing into a buffer of the output's dtype gives
    exactly what a fresh result cast to that dtype would.
    """

    def __init__(self, fs: FunctionSource, op, opdef, info, metas):
        xp = fs.xp
        kernel = opdef.kernel
        _, dtype, cdtype = info
        ufunc = ufunc_name = None
        if getattr(kernel, "__code__", None) is _UFUNC_KERNEL_CODE:
            ufunc_name = kernel.__closure__[0].cell_contents
            ufunc = getattr(xp, ufunc_name)
        tensor_dtypes = set()
        args = []
        for k, (operand, meta) in enumerate(zip(op.inputs, metas)):
            if isinstance(operand, str):
                expr = fs.ident(operand)
                dt = meta.dtype
                # cast as eager does (a bool operand too: numpy computes exp(bool) in float16),
                # except where's condition, which stays a mask
                if cdtype is not None and dt is not cdtype and not (k == 0 and
                                                                    op.type == "where"):
                    expr = f"{expr}.astype({fs.dtype_const(cdtype.np)})"
                    dt = cdtype
                tensor_dtypes.add(dt)
                args.append(expr)
            else:
                args.append(operand)
        # numpy parses Python scalars on every call; a 0-d array of the tensors' one floating
        # dtype gives the same result (NEP 50 casts the scalar to it) at half the cost
        scalar_dtype = next(iter(tensor_dtypes)) if len(tensor_dtypes) == 1 else None
        convert = (ufunc is not None and xp is np and scalar_dtype is not None
                   and scalar_dtype.is_floating_point)
        parts = []
        for arg in args:
            if isinstance(arg, str):
                parts.append(arg)
            elif convert and arg.__class__ in (int, float):
                parts.append(fs.numbered_const(np.asarray(arg, dtype=scalar_dtype.np)))
            elif _is_literal(arg):
                parts.append(repr(arg))
            else:
                parts.append(fs.numbered_const(arg))
        for key, value in op.attrs.items():
            if _is_literal(value):
                text = fs.literal(value, key)
            else:
                hint = f"hf_{value.name}" if isinstance(value, DType) else f"{op.type}_{key}"
                text = fs.const(value, hint)
            if key.isidentifier() and not keyword.iskeyword(key):
                parts.append(f"{key}={text}")
            else:
                parts.append(f"**{{{key!r}: {text}}}")
        if ufunc is not None:
            self._function = fs.const(ufunc, ufunc_name)
        else:
            self._function = fs.const(kernel, op.type)
            parts.insert(0, "_xp")
        self._parts = parts
        result = None
        if opdef.supports_out and op.type not in OUT_UPDATES_INPUT0 or ufunc is not None:
            result = _cached_result_dtype(fs, kernel, op, metas, cdtype)
        self.accepts_out = opdef.supports_out and op.type not in OUT_UPDATES_INPUT0 and \
            result is not None and np.can_cast(result, dtype.np, "same_kind")
        # a ufunc called without out= returns a fresh array (of at least one dim when the result
        # has one); when its dtype is the output's, generated code needs no _fix around it.
        # (numpy 1's value-based casting makes a 0-d operand's dtype depend on its value.)
        self.fresh = ufunc is not None and xp is np and result is not None and \
            result == dtype.np and len(info[0]) > 0 and \
            (_NEP50 or all(len(m.shape) for m in metas if m is not None))

    def expr(self, out: str | None = None) -> str:
        parts = self._parts + [f"out={out}"] if out else self._parts
        return f"{self._function}({', '.join(parts)})"


def _cached_result_dtype(fs: FunctionSource, kernel, op, metas, cdtype):
    """:func:`_result_dtype`, asked once per function for each combination of what decides it
    (kernel, compute dtype, operand ranks and dtypes, Python operands and attributes); operators
    whose operands or attributes have no exact key are tried each."""
    parts = [(len(meta.shape), meta.dtype.name) if isinstance(operand, str) else
             exact_key(operand) for operand, meta in zip(op.inputs, metas)]
    parts += [exact_key(value) for value in op.attrs.values()]
    if any(part is None for part in parts):
        return _result_dtype(fs.xp, kernel, op, metas, cdtype)
    key = (kernel, cdtype and cdtype.name, tuple(op.attrs), *parts)
    answer = fs._exact.get(key, fs)
    if answer is fs:
        answer = fs._exact[key] = _result_dtype(fs.xp, kernel, op, metas, cdtype)
    return answer


def exact_key(value):
    """A key equal only for values that are the same to a kernel or an inference (``1``,
    ``1.0`` and ``True`` differ): for dtypes and literals (:func:`_is_literal`); else None."""
    if value.__class__ is DType:
        return ("dtype", value.name)
    return ("literal", repr(value)) if _is_literal(value) else None


def _result_dtype(xp, kernel, op, metas, cdtype):
    """The numpy dtype of the kernel's natural result (None when it fails or gives no array),
    tried once on one-element arrays: whether it casts to the output's dtype the way ``out=``
    does (numpy's "same_kind"; ``floor`` of an int64 tensor computes float64, which cannot be
    written into an int64 buffer), or is exactly it."""
    args = []
    for operand, meta in zip(op.inputs, metas):
        if isinstance(operand, str):
            dt = meta.dtype if (cdtype is None or meta.dtype.name == "bool") else cdtype
            args.append(xp.ones((1,) * len(meta.shape), dtype=dt.np))
        else:
            args.append(operand)
    try:
        with np.errstate(all="ignore"):
            result = kernel(xp, *args, **op.attrs)
    except Exception:  # noqa: BLE001 - any failure means: do not rely on the result's dtype
        return None
    return getattr(result, "dtype", None)


def runtime_helpers(xp, arena) -> dict:
    """Functions generated code calls: ``_fix`` (a fresh kernel result as an array of the given
    dtype that does not alias the arena), ``_as_array`` (numpy scalars from indexing become 0-d
    arrays), ``_own`` (a value a control-flow step left in ``env``: numpy scalars become arrays) and
    ``_copyto`` (a copy into an arena view, which it returns). ``arena``: None, or a one-item
    list holding the arena (the executor puts a larger one there when its plans' shared arena
    grows)."""
    ndarray = xp.ndarray
    asarray = xp.asarray

    def views_arena(value) -> bool:
        base = value.base
        current = arena[0]
        while base is not None:
            if base is current:
                return True
            base = getattr(base, "base", None)
        return False

    def fix(value, dtype):
        if value.__class__ is not ndarray:
            value = asarray(value)
        if value.dtype is not dtype and value.dtype != dtype:
            return value.astype(dtype)
        if arena is not None and value.base is not None and views_arena(value):
            return value.copy()
        return value

    def as_array(value):
        return value if value.__class__ is ndarray else asarray(value)

    def own(value):
        # numpy scalars become arrays; other values (None, a while loop's stack list) pass
        return asarray(value) if isinstance(value, np.generic) else value

    def copyto(dst, src):
        xp.copyto(dst, src, casting="unsafe")
        return dst  # generated code: ``t = _copyto(_buf_t, ...)`` (one line, not two)

    return {"_fix": fix, "_as_array": as_array, "_own": own, "_copyto": copyto}
