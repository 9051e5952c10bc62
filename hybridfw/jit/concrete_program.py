""":class:`ConcreteProgram`: one traced program of a converted callable (forward, backward, their
executor plans) and the fast path of a call whose signature equals the previous one's (see
:mod:`hybridfw.jit.static_function`).
"""
from __future__ import annotations

import weakref

import numpy as np

from ..backend import Storage, array_device
from .. import dtypes as _dtypes
from ..dygraph.autograd import GradMode
from ..dygraph.tensor import Tensor, wrap_array
from ..static.codegen import FunctionSource
from .run_program import RunState, attach_node

__all__ = ["ConcreteProgram"]


# ---- the fast path of a call ------------------------------------------------------------------
_MISS = object()  # a fast caller's "these arguments do not match": take the full path


def _fast_caller(key, entry, instance):
    """The function a call whose fast key (:meth:`StaticFunction._fast_key`) is ``key`` runs:
    straight-line checks of the arguments against ``key`` (each a tensor of that shape, dtype
    and requires_grad; the grad mode; the train/eval modes; the default dtype), then the entry. Once an inference
    entry's plan has settled, the plan is called directly and its results wrapped inline, with
    nothing built per call. Returns :data:`_MISS` for other arguments."""
    tensors, grad, mode, default_dtype = key
    fs = FunctionSource("fast_call", np)
    fs.params = ["args"]
    fs.namespace["_MISS"] = _MISS
    names = [f"a{i}" for i in range(len(tensors))]
    fs.line(f"if len(args) != {len(names)}:")
    fs.line("    return _MISS")
    if names:
        fs.line(f"{', '.join(names)}{',' if len(names) == 1 else ''} = args")
    tensor = fs.const(Tensor, "Tensor")
    checks = []
    for a, (shape, dtype, rg) in zip(names, tensors):
        checks += [f"{a}.__class__ is not {tensor}", f"{a}.shape != {shape!r}",
                   f"{a}.dtype is not {fs.const(dtype, dtype.name)}", f"{a}._rg is not {rg!r}"]
    checks.append(f"{fs.const(GradMode, 'GradMode')}.enabled != {grad!r}")
    checks.append(f"{fs.const(_dtypes, 'dtypes')}._default_float is not "
                  f"{fs.const(default_dtype, default_dtype.name)}")
    if mode is not None:
        checks.append(f"tuple([m.training for m in "
                      f"{fs.const(weakref.proxy(instance), 'instance')}.modules()]) != "
                      f"{fs.const(mode, 'mode')}")
    fs.line(f"if {' or '.join(checks)}:")
    fs.line("    return _MISS")
    plan = entry._hot_plan
    if plan is None:  # (a proxy: the entry holds this function, which must not hold it back)
        fs.line(f"return {fs.const(weakref.proxy(entry), 'entry')}(args, True)")
    else:
        run = f"{fs.const(plan, 'plan')}({''.join(a + '._data, ' for a in names)})"
        wrap = fs.const(wrap_array, "wrap")
        if entry.outputs.structure[0] == "leaf" and len(entry.fetch) == 1:
            fs.line(f"return {wrap}({run}[0])")
        else:
            fs.line(f"return {fs.const(entry.outputs.build, 'build')}([{wrap}(r) for r in {run}])")
    return fs.build()[0]


# ---- one traced program ------------------------------------------------------------------------
class ConcreteProgram:
    """One traced signature: its programs and how to run them.

    ``program`` is the optimized forward program (for inference: the whole program);
    ``backward_program`` the backward (None when no gradient was wanted); ``feed_names`` the
    inputs in argument order; ``outputs`` how results are rebuilt.
    """

    def __init__(self, program, outputs, feed_names, executor, backward=None):
        self.program = program
        self.outputs = outputs
        self.feed_names = feed_names
        self.executor = executor
        self.backward_program = backward
        self.saved_names: list = []
        self._saved_plan = None   # built on the first call (see _plan_saved)
        self._saved_fetch: list = []
        self.recompute_report = None  # a RecomputeReport when to_static had a memory_budget
        self.seed_names: list = []
        self.grad_names: list = []
        self.diff_inputs: list = []   # ("input", index) or ("param", tensor)
        self.float_outputs: list = []  # indices into outputs.fetch that get gradients
        self.fetch = list(outputs.fetch)
        self._plans: dict = {}  # id(program) -> (array signature, plan) of its last run
        self._hot_plan = None  # inference: the plan of the last run, once settled (_set_hot)
        self.fast_callers: dict = {}  # fast key -> (function, the _hot_plan it calls)
        self.write_back: list = []  # (argument index, value name): see set_write_back
        self._written: list = []
        # per differentiable input: the name of a bool value saying whether this run used it
        # (it is read only inside branches of top-level conds), or None (always used)
        self.use_flags: list = []
        self.replay_target = None  # a ReplayTarget: how a double backward re-runs it eagerly

    @property
    def _flag_fetch(self) -> list:
        return [f for f in self.use_flags if f is not None]

    def set_write_back(self, updates) -> None:
        """Each call writes the value named for an argument back into that argument's tensor
        (the function updates it in place), after the function's own results."""
        self.write_back = list(updates)
        self._written = [name for _, name in updates]

    def _write_back(self, tensors, arrays) -> None:
        for (i, _), value in zip(self.write_back, arrays):
            t = tensors[i]
            xp = np if t._data.__class__ is np.ndarray else array_device(t._data).xp
            xp.copyto(t._data, value, casting="unsafe")  # (a lower category: cast as eager)
            t._storage.version += 1

    def _run(self, program, arrays, fetch, same_signature=False):
        # fast path: the plan of this program's last run, when it no longer changes (tiering
        # done, or interpreted only) and the arrays have that run's shapes and dtypes (checked
        # here, or known by the caller: ``same_signature``, the to_static call's fast key equal
        # to the previous call's); no feed dict, no cache key. One slot per program: training
        # alternates the forward and backward programs.
        plans = self._plans
        last = plans.get(id(program))
        if program.donated:  # (the backward: its plan takes the arrays in a list it empties)
            key = tuple([(a.shape, a.dtype) for a in arrays])
            if last is not None and last[0] == key:
                return last[1](arrays)
            compiled, fed = self.executor._lookup(program, dict(zip(program.feeds, arrays)),
                                                  fetch)
            arrays.clear()  # (fed holds them now)
        else:
            if same_signature and last is not None:
                return last[1](*arrays)
            key = tuple([(a.shape, a.dtype) for a in arrays])
            if last is not None and last[0] == key:
                return last[1](*arrays)
            compiled, fed = self.executor._lookup(program, dict(zip(program.feeds, arrays)),
                                                  fetch)
        if compiled.runs < 0 or self.executor.backend == "interpreted":
            # (a donated program's plan is called with the list: through the CompiledProgram,
            # which also calls a plan made before the program was marked donated)
            plans[id(program)] = (key, compiled if program.donated else compiled.function)
        else:  # the slot only ever holds the plan of this program's last signature
            plans.pop(id(program), None)
        return compiled(fed)

    def _set_hot(self) -> None:
        """After a run without backward: the plan this run used, when it no longer changes
        (else None). The to_static call's fast path then calls it directly
        (:func:`_fast_caller`)."""
        last = self._plans.get(id(self.program))
        self._hot_plan = None if last is None else last[1]

    def split_gradient(self, packed):
        """The seeds of the backward program from the gradient of the node's output."""
        if len(self.float_outputs) == 1:
            return [packed]
        seeds, offset = [], 0
        block = self.program.global_block()
        for k in self.float_outputs:
            size = int(np.prod(self._shapes[k]))
            seeds.append(packed[offset:offset + size].reshape(self._shapes[k]))
            offset += size
        _ = block
        return seeds

    def _plan_saved(self, n_inputs: int) -> list:
        """Where each value the backward reads comes from: ``("input", i)`` (the i-th input
        tensor), ``("output", k)`` (the k-th fetched result) or ``("fetch", j)`` (the j-th
        extra fetch, in ``_saved_fetch``)."""
        plan, extra = [], []
        for name in self.saved_names:
            if name in self.feed_names:
                plan.append(("input", self.feed_names.index(name)))
            elif name in self.fetch:
                plan.append(("output", self.fetch.index(name)))
            else:
                plan.append(("fetch", len(extra)))
                extra.append(name)
        self._saved_fetch = extra
        self._saved_plan = plan
        # indices into ``pool`` = input arrays + outputs + extra fetches (see __call__)
        n_in, n_out = n_inputs, len(self.fetch)
        base = {"input": 0, "output": n_in, "fetch": n_in + n_out}
        self._saved_pick = [base[kind] + i for kind, i in plan]
        packed = len(self.float_outputs) != 1
        own = [k for k, (kind, _) in enumerate(plan)
               if kind == "fetch" or (kind == "output" and packed)]
        self._saved_own = [self._saved_pick[k] for k in own]
        # the saved values only the run's state holds go to the backward to drop as it goes
        self.backward_program.donated = frozenset(self.saved_names[k] for k in own)
        self._saved_shared = [(kind, i) for kind, i in plan
                              if kind == "input" or (kind == "output" and not packed)]
        return plan

    def run_fetch(self) -> list:
        """What a call's run of :attr:`program` fetches: the results, then (training) the saved
        values only the run produces, the arguments' values written back, the use flags."""
        if self.backward_program is None:
            return self.fetch + self._written
        saved = [n for n in self.saved_names if n not in self.feed_names and
                 n not in self.fetch]
        return self.fetch + saved + self._written + self._flag_fetch

    def run_backward(self, arrays):
        """The input gradients from ``arrays`` (the saved values, then the seeds), a list the
        backward plan empties: the donated saved values nothing else holds are dropped after
        their last use."""
        results = self._run(self.backward_program, arrays, self.grad_names_fetch)
        it = iter(results)
        return [None if n is None else next(it) for n in self.grad_names]

    def __call__(self, tensors, same_signature=False):
        if self.backward_program is None:
            if self.write_back:
                results = self._run(self.program, [t._data for t in tensors],
                                    self.fetch + self._written)
                n = len(self.fetch)
                self._write_back(tensors, results[n:])
                return self.outputs.build([wrap_array(r) for r in results[:n]])
            results = self._run(self.program, [t._data for t in tensors], self.fetch)
            self._set_hot()
            return self.outputs.build([wrap_array(r) for r in results])
        arrays = [t._data for t in tensors]
        plan = self._saved_plan
        if plan is None:
            plan = self._plan_saved(len(arrays))
        replay = self.replay_target
        rng = replay.rng_before(tensors) if replay is not None else None
        flags = self._flag_fetch
        results = self._run(self.program, arrays, self.fetch + self._saved_fetch +
                            self._written + flags, same_signature)
        if flags:  # which differentiable inputs this run's branches left out: no gradient
            unused = iter([not bool(r) for r in results[len(results) - len(flags):]])
            results = results[:len(results) - len(flags)]
        n = len(self.fetch)
        outs = results[:n]
        inputs = [tensors[i] if kind == "input" else i for kind, i in self.diff_inputs]
        wrapped = [wrap_array(r) for r in outs]
        # the saved values, in feed order, picked from the inputs, outputs and extra fetches
        pool = arrays + list(results)
        saved = [pool[j] for j in self._saved_pick]
        storages = []
        if self._saved_own:  # extra fetches, and outputs the node packs into a copy: the
            # state's own arrays, counted by hf.memory while the state holds them (one count)
            storages.append(Storage(sum([pool[j].nbytes for j in self._saved_own]),
                                    array_device(pool[self._saved_own[0]])))
        state = RunState(self, saved, storages)
        if replay is not None:
            state.replay = replay.record(tensors, rng)
        if flags:
            state.unused = [f is not None and next(unused) for f in self.use_flags]
        self._shapes = {k: outs[k].shape for k in self.float_outputs}
        if len(self.float_outputs) == 1:
            k = self.float_outputs[0]
            wrapped[k] = attach_node(outs[k], state, inputs)
        else:
            packed = attach_node(np.concatenate([outs[k].reshape(-1) for k in
                                                 self.float_outputs])
                                 if outs[0].__class__ is np.ndarray else
                                 _concat_any([outs[k].reshape(-1)
                                              for k in self.float_outputs]), state, inputs)
            offset = 0
            for k in self.float_outputs:
                size = outs[k].size
                wrapped[k] = packed[offset:offset + size].reshape(outs[k].shape)
                offset += size
        for kind, i in self._saved_shared:
            # an input or an output the backward reads is shared, not copied: its tensor's
            # storage stays counted (and alive) with the state, and an in-place change of it
            # before backward is caught as eager autograd catches it
            st = (tensors[i] if kind == "input" else wrapped[i])._storage
            storages.append(st)
            state.guards.append((st, st.version, kind, i))
        if self.write_back:  # (after the guards: backward then sees an argument it read change)
            self._write_back(tensors, results[len(results) - len(self._written):])
        return self.outputs.build(wrapped)


def _concat_any(arrays):
    import cupy
    return cupy.concatenate(arrays)
