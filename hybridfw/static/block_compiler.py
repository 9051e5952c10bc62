"""Compiling one block of a program into a generated Python function: the operators in
order, each a direct kernel call writing into its arena view (or onto the heap), compiled
regions called where the lowering made them, control-flow operators through the compilers
in :data:`OP_COMPILERS`. :mod:`~hybridfw.static.executor` compiles whole programs with it
(and control-flow compilers their bodies, with :func:`compile_block`)."""
from __future__ import annotations

import numpy as np

from ..ops.registry import TensorMeta, all_ops
from .codegen import OUT_UPDATES_INPUT0, FunctionSource, OpCall, runtime_helpers
from .ir import Block
from .liveness import analyze_block
from .loop_stack import stacked_loop_stack, stacked_records
from .memory_plan import MemoryPlan
from . import streams

__all__ = ["OP_COMPILERS", "POISON_ENV_VAR", "Plan", "compile_block"]


# op type -> function(op, block, slots, xp) -> step callable(env), for operators that are not
# registry ops (cond, while, ...); the modules defining them register here.
OP_COMPILERS: dict = {}

POISON_ENV_VAR = "HYBRIDFW_POISON_ARENA"
_POISON_BYTE = 0xFF  # all-ones bytes are NaN in float16/32/64 (and -1 in signed ints)


class Plan:
    """A compiled nested block: ``run(env)`` executes it over ``env`` (a list indexed by slot).

    ``steps`` holds the one generated function; ``source`` is its code.
    """

    __slots__ = ("size", "slots", "source", "steps")

    def __init__(self, steps, slots, source=""):
        self.steps = steps
        self.slots = slots
        self.size = len(slots)
        self.source = source

    def run(self, env) -> None:
        for step in self.steps:
            step(env)


def _count(items, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def _slot(slots: dict, name: str) -> int:
    try:
        return slots[name]
    except KeyError:
        raise KeyError(f"executor: value {name!r} is read before any operator or input defines "
                       "it") from None


class _BlockEmitter:
    """Emits the lines of one block's operators into a :class:`FunctionSource`.

    With a ``memory`` plan (the global block), planned values go to their arena views, heap
    values are deleted after their last use and, when ``poison`` is set, dead regions are filled.
    """

    def __init__(self, fs: FunctionSource, block: Block, slots: dict, live, metas: dict,
                 op_infos, memory: MemoryPlan | None = None, buffers=None, poison_after=None):
        self.fs = fs
        self.block = block
        self.slots = slots
        self.metas = metas
        self.op_infos = op_infos
        self.memory = memory
        self.buffers = buffers or {}            # planned value -> name of its arena view
        self.poison_after = poison_after or {}  # op index -> names of regions to poison after it
        self.live = live
        self.uses_env = False
        self._registry = all_ops()
        self.asyncs = {}   # op index -> anchor: products run on the worker (see .streams)
        self.donated = ()  # donated inputs, dropped after their last use (Program.donated)
        self._waits = {}   # anchor -> [(op index, op)] to wait for before it

    def emit(self, lowered=None) -> None:
        dying = self.live.dying() if self.memory is not None else None
        if dying is not None and self.donated:
            last = self.live.last_use
            for name in self.donated:  # dropped after their last use (unused: at once)
                end = last.get(name, -1)
                if end < self.live.num_ops:
                    if end < 0:
                        self._after(-1, [name])
                    else:
                        dying[end].append(name)
        starts, inside, internal = _region_index(lowered)
        for i, anchor in self.asyncs.items():
            self._waits.setdefault(anchor, []).append((i, self.block.ops[i]))
        if self.asyncs:  # a run that raised may have left products writing into the arena
            self.fs.line(f"{self.fs.const(streams.drain, 'drain')}()")
        for i, op in enumerate(self.block.ops):
            where = (self.block.idx, i, op)  # what an error on these lines is traced back to
            self._wait(i)
            if i in inside:
                if i in starts:
                    self._region(starts[i], where)
                if self.memory is not None:
                    self._after(i, [n for n in dying[i] if n not in internal])
                continue
            if self.op_infos[i] is None:
                self._control_flow(i, op, where)
            else:
                self._registry_op(op, self.op_infos[i], where)
            if self.memory is not None:
                self._after(i, dying[i])
        self._wait(len(self.block.ops))

    def _wait(self, anchor) -> None:
        for i, op in self._waits.get(anchor, ()):
            ident = self.fs.ident(op.outputs[0])
            self.fs.line(f"{ident} = {ident}_job.result()", (self.block.idx, i, op))

    def _registry_op(self, op, info, where) -> None:
        fs, memory = self.fs, self.memory
        opdef = self._registry[op.type]
        out = op.outputs[0]
        ident = fs.ident(out)
        if opdef.subscript is not None and (memory is None or out not in memory.offsets) and \
                op.inputs[0].__class__ is str and where[1] not in self.asyncs:
            index = opdef.subscript(*op.inputs[1:], **op.attrs)
            if index is not None:  # input0[index]: a 0-d result is a numpy scalar then
                value = f"{fs.ident(op.inputs[0])}[{fs.const(index, 'index')}]"
                fs.line(f"{ident} = " + (value if len(info[0]) else f"_as_array({value})"),
                        where)
                return
        metas = [self.metas[i] if isinstance(i, str) else None for i in op.inputs]
        call = OpCall(fs, op, opdef, info, metas)
        if memory is not None and out in memory.offsets:
            buf = self.buffers[out]
            in_place_update = op.type in OUT_UPDATES_INPUT0 and \
                memory.buffer_of.get(op.inputs[0]) == memory.buffer_of[out]
            if call.accepts_out or in_place_update:
                value = call.expr(buf)
            else:
                value = f"_copyto({buf}, {call.expr()})"
        elif opdef.view:
            value = f"_as_array({call.expr()})"
        elif call.fresh:
            value = call.expr()
        else:
            value = f"_fix({call.expr()}, {fs.dtype_const(info[1].np)})"
        if where[1] in self.asyncs:  # on the worker: its operands bound now, waited at anchor
            names = dict.fromkeys(fs.ident(n) for n in op.input_names())
            bound = ", ".join(f"{n}={n}" for n in names)
            fs.line(f"{ident}_job = {fs.const(streams.submit, 'submit')}(lambda {bound}: "
                    f"{value})", where)
        else:
            fs.line(f"{ident} = {value}", where)

    def _region(self, region, where) -> None:
        """One call of a compiled region. Its outputs are planned on the heap (see
        :func:`_compile_program`); one planned in the arena all the same is copied there, so
        operators after it find it where the plan says (in-place updates included)."""
        fs = self.fs
        function = fs.const(self.lowered.entry(region.name), region.name)
        contig = fs.const(np.ascontiguousarray, "_contig")  # the regions take C arrays
        args = []
        for name in region.inputs:
            stack = region.stack_inputs.get(name)
            if stack is not None:  # a loop stack while_grad reads: its records, stacked
                index, forms = stack
                forms = tuple((shape, np.dtype(dt[3:])) for shape, dt in forms)
                args.append(f"{fs.const(stacked_records, 'stacked_records')}({fs.ident(name)}, "
                            f"{fs.const(tuple(index), 'index')}, {fs.const(forms, 'forms')})")
            elif len(self.metas[name].shape):
                args.append(f"{contig}({fs.ident(name)})")
            else:
                args.append(fs.ident(name))
        targets = ", ".join(fs.ident(n) for n in region.outputs)  # one: returned bare
        fs.line(f"{targets} = {function}({', '.join(args)})" if region.outputs else
                f"{function}({', '.join(args)})", where)
        for name in region.records:  # a differentiated loop's records: the stack token
            token = fs.const(stacked_loop_stack, "stacked_loop_stack")
            fs.line(f"{fs.ident(name)} = {token}({fs.ident(name)})", where)
        for name in region.outputs:
            if name in region.records:
                continue
            if self.memory is not None and name in self.memory.offsets:
                buf = self.buffers[name]
                fs.line(f"{fs.ident(name)} = _copyto({buf}, {fs.ident(name)})", where)

    def _control_flow(self, i, op, where) -> None:
        compiler = OP_COMPILERS.get(op.type)
        if compiler is None:
            raise KeyError(f"executor: operator type {op.type!r} is neither a registry op nor "
                           "registered in hybridfw.static.executor.OP_COMPILERS (import the "
                           "module that defines it)")
        fs = self.fs
        self.uses_env = True
        step = fs.const(compiler(op, self.block, self.slots, fs.xp), f"{op.type}_step")
        for name in self.live.reads[i]:
            fs.line(f"_env[{_slot(self.slots, name)}] = {fs.ident(name)}", where)
        fs.line(f"{step}(_env)", where)
        for name in self.live.writes[i]:
            fs.line(f"{fs.ident(name)} = _own(_env[{_slot(self.slots, name)}])", where)

    def _after(self, i, dying) -> None:
        fs = self.fs
        for region in self.poison_after.get(i, ()):
            fs.line(f"{region}.fill({_POISON_BYTE})")
        heap = [fs.ident(n) for n in dying if n not in self.memory.offsets]
        if heap:
            fs.line(f"del {', '.join(heap)}")


def _region_index(lowered):
    """(first op index -> region, indices of ops inside regions, names only regions see)."""
    if lowered is None:
        return {}, frozenset(), frozenset()
    starts, inside, internal = {}, set(), set()
    for region in lowered.regions:
        starts[region.start] = region
        inside.update(range(region.start, region.stop))
        outputs = set(region.outputs)
        internal.update(n for op in region.ops for n in op.outputs if n not in outputs)
    return starts, inside, internal


def compile_block(block: Block, slots: dict, xp) -> Plan:
    """Compile a nested block (a control-flow body) into a :class:`Plan` over ``env``.

    ``slots`` maps every variable name to its index in ``env``; it is extended here with the
    values this block defines. The plan loads the values of enclosing scopes it reads from
    ``env``, and stores every value it writes back into ``env``. Its values live on the heap.
    """
    for op in block.ops:
        for name in op.outputs:
            slots.setdefault(name, len(slots))
    live = analyze_block(block)
    fs = FunctionSource(f"block_{block.idx}", xp)
    fs.params = ["_env"]
    fs.namespace.update(runtime_helpers(xp, None))
    registry = all_ops()
    metas, op_infos = {}, []
    defined, loads = set(), []
    for i, op in enumerate(block.ops):
        loads += [n for n in live.reads[i] if n not in defined and n not in loads]
        defined.update(live.writes[i])
        for name in live.reads[i]:
            var = block.var(name)
            metas.setdefault(name, TensorMeta(var.shape, var.dtype))
        opdef = registry.get(op.type)
        if opdef is None or op.blocks:
            op_infos.append(None)
            continue
        info = opdef.infer(*[metas[a] if isinstance(a, str) else a for a in op.inputs],
                           **op.attrs)
        op_infos.append(info)
        metas[op.outputs[0]] = TensorMeta(tuple(info[0]), info[1])
    for name in loads:
        fs.line(f"{fs.ident(name)} = _env[{_slot(slots, name)}]")
    _BlockEmitter(fs, block, slots, live, metas, op_infos).emit()
    for name in dict.fromkeys(n for written in live.writes for n in written):
        fs.line(f"_env[{_slot(slots, name)}] = {fs.ident(name)}")
    function, source = fs.build(f"block {block.idx}: {_count(block.ops, 'operator')}")
    return Plan([function], slots, source)
