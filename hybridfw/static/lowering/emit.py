"""numba source for one region: a run of operators becomes one ``@njit`` function.

Values inside a region take one of three forms:

- :class:`Scalar`: a 0-d value, a local of its exact dtype (``np.int32(...)``): loops over
  scalars (a Collatz step) allocate nothing;
- :class:`Array`: a materialized array of known shape;
- :class:`Deferred`: an elementwise result not yet computed: its one reader inlines it, element
  by element, into its own loop, so a chain (or a ``fused_elementwise`` group) is one loop with
  no temporaries.

Every elementwise expression is cast to the op's result dtype and its operands to the compute
dtype, as the executor casts them for the kernel (``infer``'s ``compute_dtype``, else the
promoted dtype of the operands; Python numbers take that dtype, as numpy's weak scalars do), so
integer results are bitwise the interpreter's (wrap-around included: ``np.int32(a * b)``).
``while`` and ``cond`` become Python loops and branches over the same forms.
"""
from __future__ import annotations

import contextlib
import math
import re

from ...dtypes import result_type
from ...ops.lowering_rules import ScalarIndex, Unsupported
from ...ops.registry import TensorMeta, get_op

__all__ = ["GEMM", "GEMM_ADD", "NUMBA_DTYPES", "RegionEmitter", "Unsupported"]

NUMBA_DTYPES = {"float32": "np.float32", "float64": "np.float64", "int8": "np.int8",
                "uint8": "np.uint8", "int16": "np.int16", "int32": "np.int32",
                "int64": "np.int64", "bool": "np.bool_"}


def numba_dtype(dtype) -> str:
    name = NUMBA_DTYPES.get(dtype.name)
    if name is None:
        raise Unsupported(f"dtype {dtype.name} is not compiled")
    return name


def literal(value, dtype: str) -> str:
    """``value`` (a Python number) as source of numba dtype ``dtype``."""
    if value.__class__ is float and not math.isfinite(value):
        text = "np.nan" if math.isnan(value) else ("np.inf" if value > 0 else "-np.inf")
    else:
        text = repr(value)
    return f"{dtype}({text})"


class Scalar:
    __slots__ = ("name", "dtype")

    def __init__(self, name, dtype):
        self.name, self.dtype = name, dtype


class Array:
    __slots__ = ("name", "shape", "dtype")

    def __init__(self, name, shape, dtype):
        self.name, self.shape, self.dtype = name, tuple(shape), dtype


class Stacked:
    """A differentiated ``while``'s records in stacked form (see
    :class:`~hybridfw.static.loop_stack.LoopStack`): ``count`` (a local) and one array per
    record item, of shape ``(count, *shape)``. A loop of the region makes it (the region
    returns ``(count, item_0, ...)``, the executor wraps it in a ``LoopStack`` token), or it
    arrives as an argument of that form for a ``while_grad`` (``items`` then holds only the
    items that ``while_grad`` reads, in its ``saved_index`` order)."""

    __slots__ = ("count", "items")

    def __init__(self, count, items):
        self.count, self.items = count, list(items)


class Deferred:
    """``transpose_of``: for the transposing view of a 2-D :class:`Array` (its view rule's
    mapping says ``transposes``), that array, so a matrix product reads it transposed."""

    __slots__ = ("gen", "shape", "dtype", "transpose_of")

    def __init__(self, gen, shape, dtype, transpose_of=None):
        self.gen, self.shape, self.dtype = gen, tuple(shape), dtype
        self.transpose_of = transpose_of


def _known(shape, what: str) -> tuple:
    if any(s < 0 for s in shape):
        raise Unsupported(f"{what} has a dim known only at run time {tuple(shape)}")
    return tuple(shape)


def _mapped(shape, out_shape, idx) -> list:
    """Indices into a value of ``shape`` broadcast to ``out_shape`` at ``idx``."""
    offset = len(out_shape) - len(shape)
    return ["0" if s == 1 else idx[offset + k] for k, s in enumerate(shape)]


# ufuncs with a vectorizable float32 version in :mod:`.vmath` (the generated module imports it
# under this name; numba's own calls the C library per element, which stops vectorization)
VECTOR_FLOAT32 = {"exp": "_hf_exp32", "tanh": "_hf_tanh32", "sigmoid": "_hf_sigmoid32"}
# integer division refusing a zero divisor (:mod:`.checked`), under the names the generated
# module imports them as
INTEGER_DIVISION = {"floor_divide": "_hf_floor_divide_int", "remainder": "_hf_remainder_int"}
# :func:`.blas.gemm` and :func:`.blas.gemm_add`, under the names the generated module imports
# them as
GEMM = "_hf_gemm"
GEMM_ADD = "_hf_gemm_add"
# a region's own argument (``p0``, ``p1``...): read as it arrives, the same at every iteration
_PARAMETER = re.compile(r"p\d+")


class _ElementContext:
    """What an elementwise rule sees: the compute dtype, its constants and ufunc calls."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: str):
        self.dtype = dtype

    def const(self, value) -> str:
        return literal(value, self.dtype)

    def vector(self, name: str, *args) -> str | None:
        """The call of ``name``'s vectorizable version for this dtype, or None."""
        fn = VECTOR_FLOAT32.get(name) if self.dtype == "np.float32" else None
        return None if fn is None else f"{fn}({', '.join(args)})"

    def ufunc(self, name: str, *args) -> str:
        return self.vector(name, *args) or f"np.{name}({', '.join(args)})"

    def integer_division(self, name: str, a: str, b: str) -> str:
        """The call of integer ``floor_divide`` or ``remainder`` raising the interpreter's
        error for a zero divisor."""
        return f"{INTEGER_DIVISION[name]}({a}, {b})"


class ArrayContext:
    """What an array rule sees: ``shapes`` of its operands, ``out_shape``/``out_dtype`` of its
    result, ``array(k)`` (operand ``k`` materialized), ``element(k, shape, idx)``, ``loop``,
    ``line``, ``temp``, ``reduce`` and ``gemm``."""

    def __init__(self, emitter, operands, out_shape, out_dtype):
        self.emitter = emitter
        self.operands = operands
        self.shapes = [getattr(v, "shape", ()) for v in operands]
        self.out_shape = out_shape
        self.out_dtype = out_dtype

    def array(self, k: int) -> str:
        value = self.emitter.materialize(self.operands[k])
        if isinstance(value, Scalar):
            raise Unsupported("an array rule got a 0-d operand")
        return value.name

    def element(self, k, shape, idx) -> str:
        return self.emitter.element(self.operands[k], shape, idx)

    def gemm(self, a: int = 0, b: int = 1) -> str | None:
        """The call of :func:`.blas.gemm` (numpy's own BLAS) computing the matrix product of
        operands ``a`` and ``b`` (2-D, one float dtype), or None when that BLAS was not found
        (the rule then writes ``np.dot``). An operand that is a transposing view of an array
        (``permute(w, (1, 0))``, as in every weight gradient) is not copied: BLAS reads the
        array transposed. Looked up here, not in the op's rule, so the ops never import this
        floor."""
        operands = self.gemm_operands(a, b)
        return None if operands is None else f"{GEMM}({', '.join(operands)})"

    def gemm_operands(self, a: int = 0, b: int = 1) -> list | None:
        """The arguments of a :mod:`.blas` product of operands ``a`` and ``b`` (the two arrays,
        then the two transpose flags; see :meth:`gemm`), or None when that BLAS was not found."""
        from . import blas  # numba is there: only regions being generated get here
        if not blas.available:
            return None
        args, flags = [], []
        for k in (a, b):
            base = getattr(self.operands[k], "transpose_of", None)
            if base is not None and k == b and self.emitter.depth > 1 and \
                    _PARAMETER.fullmatch(base.name):
                # a region argument read transposed on the right inside a loop: BLAS ran such
                # thin products ~35% slower (a (32, 512) @ W.T: 53.6 against 39.4 us), so its
                # transpose is copied once, at the region's start (see transposed_operands)
                args.append(self.emitter.hoisted_transpose(base.name))
                flags.append("False")
                continue
            args.append(f"np.ascontiguousarray({base.name if base is not None else self.array(k)})")
            flags.append(str(base is not None))
        return args + flags

    def loop(self, shape):
        return self.emitter.loop(shape)

    def line(self, text: str) -> None:
        self.emitter.line(text)

    def temp(self, hint: str = "t") -> str:
        return self.emitter.temp(hint)

    def reduce(self, k: int, dims, keepdim: bool, *, start, combine) -> str:
        """Fold operand ``k`` over ``dims`` from ``start`` with ``combine(acc, x)`` (both
        expressions of the result dtype); returns the result's local name."""
        em, dt = self.emitter, self.out_dtype
        shape = self.shapes[k]
        if not shape:
            return f"{dt}({self.element(k, (), [])})"
        if not self.out_shape:
            acc = em.temp("acc")
            em.line(f"{acc} = {literal(start, dt)}")
            with em.loop(shape) as idx:
                x = f"{dt}({self.element(k, shape, idx)})"
                em.line(f"{acc} = {combine(acc, x)}")
            return acc
        out = em.temp("red")
        em.line(f"{out} = np.full({self.out_shape!r}, {literal(start, dt)}, {dt})")
        with em.loop(shape) as idx:
            x = f"{dt}({self.element(k, shape, idx)})"
            kept = [("0" if keepdim else None) if d in dims else i for d, i in enumerate(idx)]
            target = f"{out}[{', '.join(i for i in kept if i is not None)}]"
            em.line(f"{target} = {combine(target, x)}")
        return out


class RegionEmitter:
    """Emits one region (operators of the global block, in order) as a function's body.

    ``meta(name)`` gives any value's TensorMeta (shapes resolved for the global block);
    ``readers`` maps a name to the operators reading it (for the inlining decision);
    ``outputs`` are the names the region must return.
    """

    def __init__(self, meta, readers, outputs=()):
        self.meta = meta
        self.readers = readers
        self.outputs = set(outputs)
        self.lines: list = []
        self.depth = 1
        self.values: dict = {}
        self.records: set = set()  # names of the loop stacks the region makes (Stacked)
        self.recorded: set = set()  # values a differentiated loop records: computed once
        self.stack_inputs: dict = {}  # input name -> (saved_index, item forms) of its reader
        self.fresh: set = set()  # outputs returned in an array made for them (boxed scalars)
        self._memo: list = [{}]
        self._count = 0
        self._hoisted: dict = {}  # region argument -> local of its contiguous transpose

    # ---- text -----------------------------------------------------------------------------
    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def hoisted_transpose(self, arg: str) -> str:
        """The local holding a C-contiguous copy of region argument ``arg`` transposed, made
        once as the region's first line."""
        name = self._hoisted.get(arg)
        if name is None:
            name = self._hoisted[arg] = self.temp("tr")
            self.lines.insert(0, f"    {name} = np.ascontiguousarray({arg}.T)")
        return name

    def temp(self, hint: str = "t") -> str:
        self._count += 1
        return f"{hint}{self._count}"

    @contextlib.contextmanager
    def indented(self):
        self.depth += 1
        self._memo.append({})
        try:
            yield
        finally:
            self._memo.pop()
            self.depth -= 1

    @contextlib.contextmanager
    def loop(self, shape):
        idx = []
        for size in shape:
            i = self.temp("i")
            self.line(f"for {i} in range({size}):")
            self.depth += 1
            idx.append(i)
        self._memo.append({})
        try:
            yield idx
        finally:
            self._memo.pop()
            self.depth -= len(shape)

    # ---- values ---------------------------------------------------------------------------
    def bind_input(self, name: str, arg: str) -> None:
        """Region input ``name`` arrives as the array argument ``arg`` (a loop stack that a
        ``while_grad`` of the region reads: as a tuple ``(count, item, ...)``, see
        :class:`Stacked`)."""
        grads = [op for _, op in self.readers.get(name, ())
                 if op.type == "while_grad" and op.inputs[0] == name]
        if grads:
            self._bind_stack(name, arg, grads)
            return
        meta = self.meta(name)
        dt = numba_dtype(meta.dtype)
        shape = _known(meta.shape, f"input {name!r}")
        if shape:
            self.values[name] = Array(arg, shape, dt)
        else:
            local = self.temp("s")
            self.line(f"{local} = {arg}[()]")
            self.values[name] = Scalar(local, dt)

    def _bind_stack(self, name: str, arg: str, readers) -> None:
        index = tuple(readers[0].attrs["saved_index"])
        forms = []
        for saved in readers[0].attrs["saved_args"]:
            meta = self.meta(saved)
            forms.append((_known(meta.shape, f"saved value {saved!r}"), numba_dtype(meta.dtype)))
        for op in readers[1:]:
            if tuple(op.attrs["saved_index"]) != index:
                raise Unsupported(f"loop stack {name!r} read by while_grads of different "
                                  "records")
        count = self.temp("n")
        self.line(f"{count} = {arg}[0]")
        items = []
        for j, (shape, dt) in enumerate(forms):
            item = self.temp("st")
            self.line(f"{item} = {arg}[{j + 1}]")
            items.append(Array(item, (-1, *shape), dt))
        self.values[name] = Stacked(count, items)
        self.stack_inputs[name] = (index, forms)

    def value(self, operand):
        if isinstance(operand, str):
            try:
                value = self.values[operand]
            except KeyError:
                raise Unsupported(f"value {operand!r} is not available in the region") from None
            if isinstance(value, Stacked):
                raise Unsupported(f"a loop's records ({operand!r}) read inside the region")
            return value
        if operand.__class__ in (int, float, bool):
            return operand
        raise Unsupported(f"operand of type {type(operand).__name__}")

    def element(self, value, out_shape, idx) -> str:
        """Source of one element of ``value`` (broadcast to ``out_shape``) at ``idx``."""
        if value.__class__ in (int, float, bool):
            return repr(value)
        if isinstance(value, Scalar):
            return value.name
        mapped = tuple(_mapped(value.shape, out_shape, idx))
        if isinstance(value, Array):
            return f"{value.name}[{', '.join(mapped)}]"
        memo = self._memo[-1]
        key = (id(value), mapped)
        name = memo.get(key)
        if name is None:
            name = memo[key] = value.gen(list(mapped))
        return name

    def materialize(self, value):
        if not isinstance(value, Deferred):
            return value
        out = self.temp("a")
        self.line(f"{out} = np.empty({value.shape!r}, {value.dtype})")
        with self.loop(value.shape) as idx:
            self.line(f"{out}[{', '.join(idx)}] = {self.element(value, value.shape, idx)}")
        return Array(out, value.shape, value.dtype)

    def scalar(self, value, what: str) -> str:
        """A one-element value (a predicate) as a scalar expression."""
        if isinstance(value, Scalar):
            return value.name
        if isinstance(value, (Array, Deferred)) and all(s == 1 for s in value.shape):
            return self.element(value, value.shape, ["0"] * len(value.shape))
        raise Unsupported(f"{what} is not a one-element value")

    def as_loop_value(self, value):
        """``value`` in the form a loop variable or branch output keeps (scalar or array)."""
        if value.__class__ in (int, float, bool):
            raise Unsupported("a Python number as a loop value")
        return self.materialize(value)

    # ---- operators ------------------------------------------------------------------------
    def emit_ops(self, block, ops) -> None:
        for op in ops:
            self.emit_op(block, op)

    def emit_op(self, block, op) -> None:
        if op.type == "while":
            self._while(op)
        elif op.type == "while_grad":
            self._while_grad(op)
        elif op.type == "cond":
            self._cond(op)
        elif op.type == "fused_elementwise":
            self._fused(block, op)
        else:
            opdef = get_op(op.type) if not op.blocks else None
            rule = getattr(opdef, "lower", None)
            if rule is None:
                raise Unsupported(f"operator {op.type!r} has no lowering rule")
            if len(op.outputs) != 1:
                raise Unsupported(f"operator {op.type!r} has {len(op.outputs)} outputs")
            operands = [self.value(a) for a in op.inputs]
            if rule.elementwise:
                self._elementwise(block, op.outputs[0], opdef, rule, operands, op.attrs)
            elif getattr(rule, "view", False):
                self._view(op, opdef, rule, operands)
            else:
                self._array_op(op, opdef, rule, operands)

    def _metas(self, operands):
        return [TensorMeta(getattr(v, "shape", ()), _DTYPE_OF[v.dtype])
                if isinstance(v, (Scalar, Array, Deferred)) else v for v in operands]

    def _elementwise_value(self, opdef, rule, operands, attrs):
        """The Deferred (or the scalar expression generator) of one elementwise op."""
        metas = self._metas(operands)
        shape, rdtype, cdtype = opdef.infer(*metas, **attrs)
        shape = _known(shape, f"{opdef.name}'s result")
        out_dt = numba_dtype(rdtype)
        cast = rule.values if rule.values is not None else range(len(operands))
        # no operand values cast (a constant such as ``full``): computed in the result dtype
        compute = cdtype or (result_type(*[metas[k] for k in cast]) if cast else rdtype)
        tensors = [v for v in operands if isinstance(v, (Scalar, Array, Deferred))]
        if compute.is_floating_point and tensors and all(v.dtype == "np.bool_" for v in tensors):
            # the executor leaves bool operands uncast: numpy then picks its smallest loop
            # (float16 for exp of bool), which a float32 computation would not match
            raise Unsupported(f"{opdef.name} of bool tensors in a float dtype")
        ctx = _ElementContext(numba_dtype(compute))

        def expr(idx):
            args = []
            for k, v in enumerate(operands):
                e = self.element(v, shape, idx)
                if k in cast and (not isinstance(v, (Scalar, Array, Deferred))
                                  or v.dtype != ctx.dtype):
                    e = literal(v, ctx.dtype) if v.__class__ in (int, float, bool) else \
                        f"{ctx.dtype}({e})"
                args.append(e)
            return f"{out_dt}({rule(ctx, *args, **attrs)})"
        return shape, out_dt, expr

    def _gen(self, expr):
        def gen(idx):
            t = self.temp("e")
            self.line(f"{t} = {expr(idx)}")
            return t
        return gen

    def _elementwise(self, block, name, opdef, rule, operands, attrs) -> None:
        shape, out_dt, expr = self._elementwise_value(opdef, rule, operands, attrs)
        if not shape:
            local = self.temp("s")
            self.line(f"{local} = {expr([])}")
            self.values[name] = Scalar(local, out_dt)
            return
        value = Deferred(self._gen(expr), shape, out_dt)
        self.values[name] = value if self._inline(block, name, shape) else \
            self.materialize(value)

    def _inline(self, block, name, shape) -> bool:
        """Whether ``name``'s one reader, an elementwise op of this block with the same shape,
        may compute it inside its own loop."""
        if name in self.outputs or name in self.recorded:
            return False  # (a record reads it too: inlined, it would be computed twice)
        readers = self.readers.get(name, ())
        if len(readers) != 1:
            return False
        reader_block, reader = readers[0]
        if reader_block is not block or reader.blocks:
            return False
        if reader.type != "fused_elementwise":
            rule = getattr(get_op(reader.type), "lower", None)
            if rule is None:
                return False
            if getattr(rule, "inlines", False):
                return True  # it reads each element once, in its own loops
            if not rule.elementwise:
                return False
        out = self.meta(reader.outputs[0])
        return tuple(out.shape) == tuple(shape)

    def _fused(self, block, op) -> None:
        operands = [self.value(a) for a in op.inputs]
        subs: list = []
        steps = op.attrs["ops"]
        for j, (sub_name, refs, attrs) in enumerate(steps):
            opdef = get_op(sub_name)
            rule = getattr(opdef, "lower", None)
            if rule is None or not rule.elementwise:
                raise Unsupported(f"fused_elementwise sub-op {sub_name!r} has no elementwise "
                                  "lowering rule")
            args = [operands[int(r[2:])] if isinstance(r, str) and r.startswith("in") else
                    subs[int(r[2:])] if isinstance(r, str) else r for r in refs]
            shape, out_dt, expr = self._elementwise_value(opdef, rule, args, dict(attrs))
            if not shape:
                local = self.temp("s")
                self.line(f"{local} = {expr([])}")
                subs.append(Scalar(local, out_dt))
            else:
                subs.append(Deferred(self._gen(expr), shape, out_dt))
        result = subs[-1]
        name = op.outputs[0]
        if isinstance(result, Deferred) and not self._inline(block, name, result.shape):
            result = self.materialize(result)
        self.values[name] = result

    def _view(self, op, opdef, rule, operands) -> None:
        """A view: readers index operand 0 through the rule's mapping (no copy)."""
        base = operands[0]
        if not isinstance(base, (Array, Deferred, Scalar)):
            raise Unsupported(f"{op.type} of a Python number")
        shape, _, _ = opdef.infer(*self._metas(operands), **op.attrs)
        shape = _known(shape, f"{op.type}'s result")
        if isinstance(base, Scalar):  # every element of a view of a 0-d value is that value
            if len(operands) > 1:
                raise Unsupported(f"{op.type} of a 0-d value with index tensors")
            self.values[op.outputs[0]] = base if not shape else \
                Deferred(lambda idx: base.name, shape, base.dtype)
            return
        index = []
        for value in operands[1:]:
            if not isinstance(value, Scalar):
                raise Unsupported(f"{op.type} with an index tensor that is not 0-d")
            index.append(ScalarIndex(_DTYPE_OF[value.dtype], value.name, self.line, self.temp))
        mapping = rule(base.shape, shape, *index, **op.attrs)

        def gen(idx):
            return self.element(base, base.shape, mapping(idx))
        if not shape:
            local = self.temp("s")
            self.line(f"{local} = {gen([])}")
            self.values[op.outputs[0]] = Scalar(local, base.dtype)
        else:
            transposed = isinstance(base, Array) and len(base.shape) == 2 and \
                getattr(mapping, "transposes", False)
            self.values[op.outputs[0]] = Deferred(gen, shape, base.dtype,
                                                  base if transposed else None)

    def _array_op(self, op, opdef, rule, operands) -> None:
        metas = self._metas(operands)
        shape, rdtype, _ = opdef.infer(*metas, **op.attrs)
        shape = _known(shape, f"{op.type}'s result")
        ctx = ArrayContext(self, operands, shape, numba_dtype(rdtype))
        result = rule(ctx, *operands, **op.attrs)
        local = self.temp("s" if not shape else "a")
        self.line(f"{local} = {result}")
        self.values[op.outputs[0]] = Scalar(local, ctx.out_dtype) if not shape else \
            Array(local, shape, ctx.out_dtype)

    # ---- control flow ---------------------------------------------------------------------
    def _check_form(self, name, value) -> None:
        meta = self.meta(name)
        _known(meta.shape, f"loop or branch value {name!r}")
        if tuple(getattr(value, "shape", ())) != tuple(meta.shape):
            raise Unsupported(f"value {name!r} changes shape")

    def _while(self, op) -> None:
        """A Python ``while True`` loop; a differentiated loop also appends, after each
        iteration's body, a record (copies of its ``saved`` values, in that order) to a list,
        as the interpreter's loop does (:mod:`hybridfw.static.control_flow`)."""
        attrs = op.attrs
        stack = attrs.get("stack")
        if (stack is None) != ("saved" not in attrs):
            raise Unsupported("a while loop with records but no stack (or the reverse)")
        cond_block, body_block = op.blocks
        records = None
        if stack is not None:
            records = self.temp("rec")
            self.line(f"{records} = []")
            self.recorded.update(attrs["saved"])
        count = len(attrs["body_args"])
        loop_vars = self._loop_vars(op.inputs[:count], attrs["body_args"])
        self.line("while True:")
        with self.indented():
            for name, var in zip(attrs["cond_args"], loop_vars):
                self.values[name] = var
            self.emit_ops(cond_block, cond_block.ops)
            flag = self.scalar(self.value(attrs["cond_output"]), "the loop condition")
            self.line(f"if not {flag}:")
            self.line("    break")
            for name, var in zip(attrs["body_args"], loop_vars):
                self.values[name] = var
            self.emit_ops(body_block, body_block.ops)
            new = self._body_results(attrs["body_outputs"])
            if records is not None:  # before the loop variables take their next values
                items = [self._record_item(self.value(name), name) for name in attrs["saved"]]
                self.line(f"{records}.append(({', '.join(items)}{',' if len(items) == 1 else ''}))")
            self._rebind(loop_vars, new)
        for name, var in zip(op.outputs[:count], loop_vars):
            self.values[name] = var
        if records is not None:
            self.values[stack] = self._stacked(records, attrs["saved"])
            self.records.add(stack)

    def _loop_vars(self, initial, args) -> list:
        """Locals holding a loop's variables (``args``), set to the ``initial`` values."""
        loop_vars = []
        for name, arg in zip(initial, args):
            value = self.as_loop_value(self.value(name))
            self._check_form(arg, value)
            var = self.temp("lv")
            self.line(f"{var} = {value.name}")
            loop_vars.append(_like(value, var))
        return loop_vars

    def _body_results(self, names) -> list:
        """The locals of a loop body's results ``names`` (materialized, forms checked)."""
        new = []
        for name in names:
            value = self.as_loop_value(self.value(name))
            self._check_form(name, value)
            new.append(value.name)
        return new

    def _rebind(self, loop_vars, new) -> None:
        """The loop variables take their next values (all at once: one may read another)."""
        comma = "," if len(loop_vars) == 1 else ""
        self.line(f"{', '.join(v.name for v in loop_vars)}{comma} = {', '.join(new)}{comma}")

    def _record_item(self, value, name: str) -> str:
        """A record item: the array or scalar itself. Nothing in a region writes into an array
        after making it, and the records are copied into their stacked form before the
        region returns (:meth:`_stacked`), so a reference is enough."""
        if value.__class__ in (int, float, bool):
            raise Unsupported(f"a Python number ({name!r}) in a loop's records")
        self._check_form(name, value)
        return self.materialize(value).name

    def _stacked(self, records: str, names) -> Stacked:
        """After the loop: the list of record tuples copied into one array per item."""
        count = self.temp("n")
        self.line(f"{count} = len({records})")
        items = []
        for j, name in enumerate(names):
            meta = self.meta(name)
            shape, dt = _known(meta.shape, f"recorded value {name!r}"), numba_dtype(meta.dtype)
            item, k = self.temp("st"), self.temp("k")
            self.line(f"{item} = np.empty(({count}, {''.join(f'{s}, ' for s in shape)}), {dt})")
            self.line(f"for {k} in range({count}):")
            with self.indented():
                value = self.temp("rv")
                self.line(f"{value} = {records}[{k}][{j}]")
                # element by element: numba compiles ``item[k] = value`` (an array assigned
                # to a slice) into about a second of LLVM work per use
                with self.loop(shape) as idx:
                    self.line(f"{item}[{', '.join([k, *idx])}] = {value}"
                              f"{'[' + ', '.join(idx) + ']' if idx else ''}")
            items.append(Array(item, (-1, *shape), dt))
        return Stacked(count, items)

    def _while_grad(self, op) -> None:
        """The backward of a differentiated ``while``: its body once per record, last first
        (as :mod:`hybridfw.static.control_flow` runs it), each record's saved values read from
        the stacked items."""
        attrs = op.attrs
        (body,) = op.blocks
        source = self.values.get(op.inputs[0])
        if not isinstance(source, Stacked):
            raise Unsupported(f"while_grad's stack {op.inputs[0]!r} is not a loop's records")
        if op.inputs[0] in self.stack_inputs:  # an argument: the items while_grad reads
            items = source.items
        else:  # made by a loop of this region: every item it records
            items = [source.items[j] for j in attrs["saved_index"]]
        count = len(attrs["body_args"])
        loop_vars = self._loop_vars(op.inputs[1:1 + count], attrs["body_args"])
        sums = self._accumulations(body, attrs)
        for j, _ in sums.values():  # accumulated in place: a private copy of the initial value
            self.line(f"{loop_vars[j].name} = {loop_vars[j].name}.copy()")
        k = self.temp("k")
        self.line(f"for {k} in range({source.count} - 1, -1, -1):")
        with self.indented():
            for name, item in zip(attrs["saved_args"], items):
                local = self.temp("sv")
                self.line(f"{local} = {item.name}[{k}]")
                shape = item.shape[1:]
                self.values[name] = Array(local, shape, item.dtype) if shape else \
                    Scalar(local, item.dtype)
            for name, var in zip(attrs["body_args"], loop_vars):
                self.values[name] = var
            added = set()  # the adds folded into their products
            for inner in body.ops:
                if id(inner) in added:
                    continue
                found = sums.get(id(inner))
                if found is not None and self._gemm_add(inner, loop_vars[found[0]]):
                    self.values[found[1].outputs[0]] = loop_vars[found[0]]
                    added.add(id(found[1]))
                    continue
                self.emit_op(body, inner)
            self._rebind(loop_vars, self._body_results(attrs["body_outputs"]))
        for name, var in zip(op.outputs, loop_vars):
            self.values[name] = var

    def _accumulations(self, body, attrs) -> dict:
        """``{id(matmul): (j, add)}`` for the loop variables ``j`` of a ``while_grad`` body that
        only accumulate a product (``s_j + a @ b``, a weight's gradient summed over the
        iterations): ``s_j`` and the product read by that ``add`` alone, one shape and float
        dtype. Their products add into the variable in place (BLAS's ``beta`` 1), with no
        temporary product and no pass of an add over it: an LSTM's backward loop made two
        weight-sized arrays per step for that."""
        if any(inner.blocks for inner in body.ops):
            return {}
        producer = {name: inner for inner in body.ops for name in inner.outputs}
        reads: dict = {}
        for inner in body.ops:
            for name in inner.input_names():
                reads[name] = reads.get(name, 0) + 1
        found = {}
        for j, (arg, out) in enumerate(zip(attrs["body_args"], attrs["body_outputs"])):
            add = producer.get(out)
            if add is None or add.type != "add" or len(add.inputs) != 2 or \
                    arg not in add.inputs or reads.get(out) or reads.get(arg) != 1:
                continue
            other = add.inputs[1] if add.inputs[0] == arg else add.inputs[0]
            product = producer.get(other) if isinstance(other, str) else None
            if product is None or product.type != "matmul" or reads.get(other) != 1 or \
                    other in attrs["body_outputs"]:
                continue
            state, made = self.meta(arg), self.meta(other)
            if len(state.shape) != 2 or tuple(state.shape) != tuple(made.shape) or \
                    state.dtype is not made.dtype or state.dtype.name not in ("float32",
                                                                               "float64"):
                continue
            found[id(product)] = (j, add)
        return found

    def _gemm_add(self, op, accumulator) -> bool:
        """``accumulator += op``'s product (a ``matmul`` of 2-D operands of its dtype) as one
        BLAS call; False (nothing written) when that BLAS is missing or the operands differ."""
        operands = [self.value(a) for a in op.inputs]
        if any(not isinstance(v, (Array, Deferred)) or len(v.shape) != 2 or
               v.dtype != accumulator.dtype for v in operands):
            return False
        ctx = ArrayContext(self, operands, accumulator.shape, accumulator.dtype)
        args = ctx.gemm_operands(0, 1)
        if args is None:
            return False
        self.line(f"{GEMM_ADD}({', '.join(args[:2] + [accumulator.name] + args[2:])})")
        return True

    def _cond(self, op) -> None:
        pred = self.scalar(self.value(op.inputs[0]), "the cond predicate")
        true_block, false_block = op.blocks
        outs = [self.temp("co") for _ in op.outputs]
        forms = [None] * len(outs)
        for branch, block, names in ((f"if {pred}:", true_block, op.attrs["true_outputs"]),
                                     ("else:", false_block, op.attrs["false_outputs"])):
            self.line(branch)
            with self.indented():
                self.emit_ops(block, block.ops)
                for k, (name, out) in enumerate(zip(names, outs)):
                    if name is None:
                        raise Unsupported("a cond branch without a value for an output")
                    value = self.as_loop_value(self.value(name))
                    self._check_form(op.outputs[k], value)
                    self.line(f"{out} = {value.name}")
                    forms[k] = _like(value, out)
                if not names:
                    self.line("pass")
        for name, form in zip(op.outputs, forms):
            self.values[name] = form

    # ---- results --------------------------------------------------------------------------
    def return_line(self, names) -> None:
        results = []
        for name in names:
            stacked = self.values.get(name)
            if isinstance(stacked, Stacked):
                results.append(f"({', '.join([stacked.count] + [a.name for a in stacked.items])}"
                               f"{',' if not stacked.items else ''})")
                continue
            value = self.materialize(self.value(name))
            if isinstance(value, Scalar):
                box = self.temp("r")
                self.line(f"{box} = np.empty((), {value.dtype})")
                self.line(f"{box}[()] = {value.name}")
                results.append(box)
                self.fresh.add(name)
            else:
                results.append(value.name)
        # one result: returned bare (numba boxes a 1-tuple around an array for ~0.3 us a call)
        self.line(f"return {results[0]}" if len(results) == 1 else
                  f"return ({', '.join(results)})")


def _like(value, name):
    return Scalar(name, value.dtype) if isinstance(value, Scalar) else \
        Array(name, value.shape, value.dtype)


def _dtype_table():
    from ...dtypes import as_dtype
    return {v: as_dtype(k) for k, v in NUMBA_DTYPES.items()}


_DTYPE_OF = _dtype_table()
