"""Differential fuzzing of ``hf.jit.to_static``: random small programs, converted == eager.

A seeded generator writes a few hundred small functions as Python source: nested if/elif/else,
while and for loops (over ``range`` of a Python int, over ``range`` of a 0-d int64 tensor and over
a tensor's elements) whose conditions depend on tensor values, break/continue, early returns,
conditional expressions, and/or/not and comparison chains, and list appends that are stacked at
the end.  Every loop is bounded (``while w < K and <tensor condition>``), every value is clamped,
so each program terminates and stays finite.  The sources are written to a module file under
``tmp_path`` and imported (so ``inspect.getsource`` works), each function is converted and called
on several same-shaped inputs; results must equal eager and the program must be traced once.
A failure prints the generated source of each failing function.
"""
from __future__ import annotations

import importlib.util
import os
import random
import signal
import sys
import traceback

import numpy as np
import pytest

import hybridfw as hf

SEED = 20240611
# 300 functions keep this file near 15 s on 2 cores;
# HF_FUZZ_FUNCTIONS=2000 runs a deeper search (the first 300 stay the same).
N_FUNCTIONS = int(os.environ.get("HF_FUZZ_FUNCTIONS", "300"))
CHUNK = 20
N_INPUTS = 4

# Names of generated functions that fail because of a known implementation bug (none at
# present).  Checked strictly: one that starts passing must be taken off.
KNOWN_FAILURES = frozenset("""
""".split())  # noqa: SIM905

TENSOR_VARS = ("a", "b", "c")
CONSTANTS = ("-2.0", "-1.0", "-0.5", "0.0", "0.5", "1.0", "2.0", "3.0")


class ProgramGenerator:
    """Writes one random function as source text."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.counter = 0
        self.loop_vars: list[str] = []   # loop variables usable in expressions (ints / 0-d)
        self.returns_tuple = False
        self.budget = 0                   # statements left for the current function

    # -- expressions --------------------------------------------------------------------------
    def var(self):
        return self.rng.choice(TENSOR_VARS + ("x", "y"))

    def const(self):
        return self.rng.choice(CONSTANTS)

    def expr(self, depth=0):
        r = self.rng
        u, v, k = self.var(), self.var(), self.const()
        choices = [
            f"{u} + {v}", f"{u} - {v}", f"{u} * {k}", f"({u} * {v}).clamp(-20.0, 20.0)",
            f"{u}.tanh() * {k}", f"hf.where({u} > {v}, {u}, {v})", f"-{u}", f"{u} * 0.5 + y",
            f"{u}.abs() - {k}", f"{u} + {u}.sum() * 0.1", f"{u}.clamp(-5.0, 5.0) + {k}",
            f"{u} * {v}.mean()",
        ]
        if self.loop_vars:
            lv = r.choice(self.loop_vars)
            choices += [f"{u} + {lv} * 0.25", f"{u} * 0.5 + {lv}"]
        if depth < 1 and r.random() < 0.15:
            return f"({self.expr(depth + 1)} if {self.cond(1)} else {self.expr(depth + 1)})"
        return r.choice(choices)

    def atom_cond(self):
        r = self.rng
        u, v = r.sample(TENSOR_VARS + ("x", "y"), 2)
        c = self.const()
        lo, hi = sorted(r.sample(CONSTANTS, 2), key=float)
        choices = [
            f"{u}.sum() > {c}", f"{u}.mean() < {c}", f"({u} > {v}).any()", f"({u} > {c}).all()",
            f"{u}.max() > {v}.min()", f"{lo} < {u}.sum() < {hi}", f"{u}[0] > {v}[1]",
        ]
        return r.choice(choices)

    def cond(self, depth=0):
        r = self.rng.random()
        if depth < 1 and r < 0.12:
            return f"{self.cond(depth + 1)} and {self.cond(depth + 1)}"
        if depth < 1 and r < 0.24:
            return f"({self.cond(depth + 1)} or {self.cond(depth + 1)})"
        if depth < 1 and r < 0.3:
            return f"not ({self.cond(depth + 1)})"
        return self.atom_cond()

    # -- statements ---------------------------------------------------------------------------
    def ret(self):
        u, v = self.rng.choice(TENSOR_VARS), self.var()
        if self.returns_tuple:
            return f"return {u} - {v}, hf.stack(out)"
        return f"return {u} + {v} + hf.stack(out).sum(0)"

    def assign(self):
        return [f"{self.rng.choice(TENSOR_VARS)} = ({self.expr()}).clamp(-100.0, 100.0)"]

    def block(self, depth, in_loop, n=None):
        r = self.rng
        n = n if n is not None else r.randint(1, 2)
        lines = []
        for _ in range(n):
            if self.budget <= 0 and lines:
                break
            self.budget -= 1
            lines += self.statement(depth, in_loop)
        return lines

    @staticmethod
    def indent(lines):
        return ["    " + line for line in lines]

    def statement(self, depth, in_loop):
        r = self.rng
        kinds = ["assign", "assign", "append"]
        if depth < 3 and self.budget > 0:
            kinds += ["if", "if", "while", "for_py", "for_tensor", "for_elems"]
        if in_loop:
            kinds += ["break", "continue"]
        if depth > 0:
            kinds += ["return"]
        kind = r.choice(kinds)
        if kind == "assign":
            return self.assign()
        if kind == "append":
            return [f"out.append(({self.expr()}).clamp(-100.0, 100.0))"]
        if kind == "return":
            return [f"if {self.cond()}:"] + self.indent([self.ret()])
        if kind in ("break", "continue"):
            return [f"if {self.cond()}:"] + self.indent([kind])
        if kind == "if":
            lines = [f"if {self.cond()}:"] + self.indent(self.block(depth + 1, in_loop))
            if r.random() < 0.3:
                lines += [f"elif {self.cond()}:"] + self.indent(self.block(depth + 1, in_loop))
            if r.random() < 0.6:
                lines += ["else:"] + self.indent(self.block(depth + 1, in_loop))
            return lines
        self.counter += 1
        i = self.counter
        if kind == "while":
            bound = r.randint(1, 4)
            body = [f"w{i} += 1"] + self.block(depth + 1, True)
            return [f"w{i} = 0", f"while w{i} < {bound} and {self.cond()}:"] + self.indent(body)
        if kind == "for_py":
            header = f"for k{i} in range({r.randint(1, 4)}):"
        elif kind == "for_tensor":
            header = f"for k{i} in range(n):"
        else:
            header = f"for k{i} in {r.choice(('x', 'y'))}:"
        self.loop_vars.append(f"k{i}")
        body = self.block(depth + 1, True)
        self.loop_vars.pop()
        lines = [header] + self.indent(body)
        if r.random() < 0.1:
            lines += ["else:"] + self.indent(self.assign())
        return lines

    def function(self, name):
        self.returns_tuple = self.rng.random() < 0.25
        self.budget = self.rng.randint(4, 12)
        body = ["a = x * 1.0", "b = y + 1.0", "c = (x * y).clamp(-10.0, 10.0)", "out = [x * 0.0]"]
        body += self.block(0, False, n=self.rng.randint(2, 4))
        body.append(self.ret())
        return "\n".join([f"def {name}(x, y, n):"] + self.indent(body)) + "\n"


def generate_sources(seed=SEED, count=N_FUNCTIONS):
    rng = random.Random(seed)
    gen = ProgramGenerator(rng)
    return [(f"fz_{i:03d}", gen.function(f"fz_{i:03d}")) for i in range(count)]


SOURCES = generate_sources()
CHUNKS = [SOURCES[i:i + CHUNK] for i in range(0, len(SOURCES), CHUNK)]


def make_inputs(index):
    rng = np.random.default_rng(SEED + index)
    return [(rng.standard_normal(3) * 1.5, rng.standard_normal(3) * 1.5,
             np.array(int(rng.integers(0, 4)), dtype=np.int64)) for _ in range(N_INPUTS)]


def to_hf(args):
    return tuple(hf.tensor(a.copy()) for a in args)


def compare(eager, conv, path="result"):
    if isinstance(eager, tuple):
        assert isinstance(conv, tuple) and len(conv) == len(eager), \
            f"{path}: {type(conv)} != {type(eager)}"
        for i, (e, c) in enumerate(zip(eager, conv)):
            compare(e, c, f"{path}[{i}]")
        return
    assert isinstance(conv, hf.Tensor), f"{path}: got {type(conv)}"
    assert tuple(conv.shape) == tuple(eager.shape), f"{path}: shape {conv.shape} != {eager.shape}"
    assert conv.dtype == eager.dtype, f"{path}: dtype {conv.dtype} != {eager.dtype}"
    np.testing.assert_allclose(conv.numpy(), eager.numpy(), rtol=1e-6, atol=1e-8, err_msg=path)


def load_module(tmp_path, chunk_index, sources):
    path = tmp_path / f"hf_fuzz_chunk_{chunk_index:02d}.py"
    text = "import hybridfw as hf\n\n\n" + "\n\n".join(src for _, src in sources)
    path.write_text(text)
    name = f"hf_fuzz_chunk_{chunk_index:02d}_{id(tmp_path)}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class _TimeLimit:
    """A hung conversion fails the function instead of hanging the suite."""

    def __init__(self, seconds):
        self.seconds = seconds

    def _alarm(self, signum, frame):
        raise TimeoutError(f"no result within {self.seconds} s")

    def __enter__(self):
        if hasattr(signal, "setitimer"):
            self.previous = signal.signal(signal.SIGALRM, self._alarm)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *exc):
        if hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)


def check_function(fn, index):
    """None when converted == eager on every input and one trace; otherwise the reason."""
    inputs = make_inputs(index)
    eager_results = [fn(*to_hf(args)) for args in inputs]   # the generator's code must run
    try:
        with _TimeLimit(10.0):
            f = hf.jit.to_static(fn)
            for args, eager in zip(inputs + inputs[:1], eager_results + eager_results[:1]):
                compare(eager, f(*to_hf(args)))
            info = f.cache_info()
            assert info.misses == 1, f"expected one trace, got {info}"
    except Exception:  # noqa: BLE001 - reported with the source
        lines = traceback.format_exc().strip().splitlines()
        return "\n".join(lines[-6:])
    return None


def test_generator_is_deterministic_and_varied():
    again = generate_sources()
    assert again == SOURCES
    text = "".join(src for _, src in SOURCES)
    for construct in ("while ", "for k", "in range(n)", "break", "continue", "elif ",
                      " and ", " or ", "not (", " if ", "return a", "out.append", "else:"):
        assert text.count(construct) >= 10, construct


@pytest.mark.parametrize("chunk_index", range(len(CHUNKS)))
def test_fuzz_chunk(chunk_index, tmp_path):
    """Every generated function converts and agrees with eager, except the known failures
    (strictly: a known failure that now passes must be taken off the list)."""
    sources = CHUNKS[chunk_index]
    module = load_module(tmp_path, chunk_index, sources)
    failures, fixed = [], []
    for offset, (name, src) in enumerate(sources):
        reason = check_function(getattr(module, name), chunk_index * CHUNK + offset)
        if reason is not None and name not in KNOWN_FAILURES:
            failures.append(f"--- {name} ---\n{src}{reason}\n")
        elif reason is None and name in KNOWN_FAILURES:
            fixed.append(name)
    message = ""
    if failures:
        message += (f"{len(failures)}/{len(sources)} generated functions differ from eager:\n\n"
                    + "\n".join(failures))
    if fixed:
        message += f"\nnow pass, take them off KNOWN_FAILURES: {' '.join(fixed)}\n"
    if message:
        pytest.fail(message, pytrace=False)
