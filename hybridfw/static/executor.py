"""The executor: compiles a program once per feed signature into a flat plan, then runs it.

A plan is a list of steps, each a bound kernel call reading and writing numbered slots: no
dictionary lookups, inference or validation happen while it runs. Control-flow operators
(``cond``, ``while``) compile their sub-blocks into nested plans through
:data:`OP_COMPILERS`, which the control-flow module fills.
"""
from __future__ import annotations

import numpy as np

from ..backend import device as as_device
from ..dygraph.tensor import Tensor, tensor, wrap_array
from ..ops.registry import TensorMeta, get_op
from .ir import Program

__all__ = ["Executor", "compile_block", "OP_COMPILERS", "Plan"]

# op type -> function(op, block, slots, xp) -> step callable(env), for operators that are not
# registry ops (cond, while, ...); the modules defining them register here.
OP_COMPILERS: dict = {}


class Plan:
    """A compiled block: ``steps`` run in order over ``env`` (a list indexed by slot)."""

    __slots__ = ("steps", "slots", "size")

    def __init__(self, steps, slots):
        self.steps = steps
        self.slots = slots
        self.size = len(slots)

    def run(self, env) -> None:
        for step in self.steps:
            step(env)


def _meta(block, name):
    v = block.var(name)
    return TensorMeta(v.shape, v.dtype)


def _compile_op(op, block, slots, xp):
    compiler = OP_COMPILERS.get(op.type)
    if compiler is not None:
        return compiler(op, block, slots, xp)
    opdef = get_op(op.type)
    metas = [_meta(block, i) if isinstance(i, str) else i for i in op.inputs]
    _, dtype, cdtype = opdef.infer(*metas, **op.attrs)
    kernel = opdef.kernel
    attrs = op.attrs
    out = slots[op.outputs[0]]
    np_dtype = dtype.np
    sources = []
    for i, m in zip(op.inputs, metas):
        if isinstance(i, str):
            cast = cdtype.np if (cdtype is not None and m.dtype is not cdtype
                                 and m.dtype.name != "bool") else None
            sources.append((slots[i], cast))
        else:
            sources.append((None, i))
    if all(c is None for s, c in sources if s is not None) and \
            all(s is not None for s, _ in sources):
        idx = tuple(s for s, _ in sources)
        if len(idx) == 1:
            (a,) = idx

            def step(env):
                env[out] = _fix(xp, kernel(xp, env[a], **attrs), np_dtype)
        elif len(idx) == 2:
            a, b = idx

            def step(env):
                env[out] = _fix(xp, kernel(xp, env[a], env[b], **attrs), np_dtype)
        else:
            def step(env):
                env[out] = _fix(xp, kernel(xp, *[env[i] for i in idx], **attrs), np_dtype)
        return step

    def step(env):
        args = [(env[s] if c is None else env[s].astype(c)) if s is not None else c
                for s, c in sources]
        env[out] = _fix(xp, kernel(xp, *args, **attrs), np_dtype)
    return step


def _fix(xp, out, np_dtype):
    if not hasattr(out, "dtype") or not hasattr(out, "shape") or isinstance(out, np.generic):
        out = xp.asarray(out)
    if out.dtype != np_dtype:
        out = out.astype(np_dtype)
    return out


def compile_block(block, slots: dict, xp) -> Plan:
    """Compile ``block``'s operators; ``slots`` maps every variable name to its slot (extended
    here for the variables this block defines)."""
    for op in block.ops:
        for name in op.outputs:
            slots.setdefault(name, len(slots))
    steps = [_compile_op(op, block, slots, xp) for op in block.ops]
    return Plan(steps, slots)


class _Compiled:
    __slots__ = ("plan", "feed_slots", "param_slots", "fetch_slots", "size")


class Executor:
    """Runs static programs: ``Executor().run(program, feed={...}, fetch_list=[...])``.

    Compiles once per (program, feed shapes/dtypes, fetch list) and reuses the plan. Returns
    a list of Tensors (numpy arrays with ``return_numpy=True``).
    """

    def __init__(self, place=None):
        self.device = as_device(place) if place is not None else None
        self._cache: dict = {}

    def _compile(self, program: Program, feed_names, fetch_names) -> _Compiled:
        block = program.global_block()
        slots: dict = {}
        for name in program.params:
            slots[name] = len(slots)
        for name in feed_names:
            slots.setdefault(name, len(slots))
        xp = (self.device or program.device).xp
        plan = compile_block(block, slots, xp)
        compiled = _Compiled()
        compiled.plan = plan
        compiled.param_slots = [(slots[n], program.params[n]) for n in program.params]
        compiled.feed_slots = [slots[n] for n in feed_names]
        for name in fetch_names:
            if name not in slots:
                raise KeyError(f"Executor.run: fetch target {name!r} is not a variable of the "
                               "program")
        compiled.fetch_slots = [slots[n] for n in fetch_names]
        compiled.size = len(slots)
        return compiled

    def run(self, program: Program, feed: dict | None = None, fetch_list=None,
            return_numpy: bool = False):
        feed = dict(feed or {})
        fetch_list = list(fetch_list or [])
        fetch_names = tuple(f if isinstance(f, str) else f.name for f in fetch_list)
        block = program.global_block()
        missing = [n for n in program.feeds if n not in feed]
        if missing:
            raise ValueError(f"Executor.run: missing feed for input(s) {missing}")
        arrays = {}
        for name, value in feed.items():
            var = block.vars.get(name)
            if var is None or name not in program.feeds:
                raise ValueError(f"Executor.run: {name!r} is not an input of the program "
                                 f"(inputs: {program.feeds})")
            arr = value._data if isinstance(value, Tensor) else np.asarray(value)
            if arr.dtype != var.dtype.np:
                raise TypeError(f"Executor.run: input {name!r} expects dtype {var.dtype}, got "
                                f"{arr.dtype}")
            if len(arr.shape) != len(var.shape) or any(
                    s != -1 and s != a for s, a in zip(var.shape, arr.shape)):
                raise ValueError(f"Executor.run: input {name!r} expects shape {var.shape}, got "
                                 f"{tuple(arr.shape)}")
            arrays[name] = arr
        feed_names = tuple(program.feeds)
        key = (id(program), len(block.ops), tuple((arrays[n].shape, arrays[n].dtype.str)
                                                  for n in feed_names), fetch_names)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._cache[key] = self._compile(program, feed_names, fetch_names)
        env = [None] * compiled.size
        for slot, t in compiled.param_slots:
            env[slot] = t._data
        for slot, name in zip(compiled.feed_slots, feed_names):
            env[slot] = arrays[name]
        compiled.plan.run(env)
        inputs = {s for s, _ in compiled.param_slots} | set(compiled.feed_slots)
        results = []
        for s in compiled.fetch_slots:
            o = env[s]
            if return_numpy:
                results.append(np.array(o) if s in inputs else np.asarray(o))
            else:  # fresh results become tensors as they are; inputs are copied
                results.append(tensor(o) if s in inputs or o.base is not None else wrap_array(o))
        return results
