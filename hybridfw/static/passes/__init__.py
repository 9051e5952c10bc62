"""Program-to-program passes, applied in the order of one annotated list: :data:`PASSES`.

Each pass is a module with ``run(program, fetch=None) -> Program`` that returns a rewritten copy
and never touches the program it is given: it starts from :func:`~.clone.working_copy`, which
inside :func:`optimize` is optimize's own private copy (so the passes do not clone it each).
``fetch`` lists the values the caller will fetch (names or Variables); ``None`` means the
program's *sinks*, the global-block values nothing reads.
:func:`optimize` runs the list, skipping the passes named in ``disable``, checks the program with
:func:`~hybridfw.static.verifier.verify` before the first pass and after each one (``verify``,
on by default), and prints the program after each pass with ``debug=True``.

Example::

    >>> import hybridfw as hf
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     x = hf.static.data("x", [3])
    ...     unused = x.exp()
    ...     y = ((x * 1.0) * 2.0 + 1.0).relu()
    >>> print(hf.static.optimize(prog, fetch=[y]))
    input x : (3,) float32
    t4 = fused_elementwise(x) {ops=(('mul', ('in0', 2.0), ()), ('add', ('op0', 1.0), ()), ('relu', ('op1',), ())), dtype=hybridfw.float32} : (3,) float32
"""  # noqa: E501 - a printed line
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..ir import Program
from ..verifier import verify as verify_program
from . import (algebraic, batch_matmul, batch_projections, constant_folding, cse, dce, fusion,
               inplace, slice_gradients, transposed_operands)
from .analysis import resolve_fetch
from .clone import clone_program, private_copy

__all__ = ["PASSES", "Pass", "optimize", "clone_program"]


class Pass(NamedTuple):
    name: str
    run: Callable
    why: str


PASSES: tuple = (
    Pass("algebraic", algebraic.run,
         "first: x*1, x+0 and permute/reshape chains go, so more expressions become identical"),
    Pass("cse", cse.run,
         "before folding, so a constant subgraph written twice becomes one parameter, not two"),
    Pass("constant_folding", constant_folding.run,
         "computations on constants become parameters; leaves the constants it read unread"),
    Pass("dce", dce.run,
         "after every pass that can leave values unread, before the passes that count readers"),
    Pass("slice_gradients", slice_gradients.run, "before fusion, which would fuse its adds"),
    Pass("batch_matmul", batch_matmul.run,
         "after dce (exact reader counts), before fusion turns its sums of products into one "
         "many-input elementwise group"),
    Pass("batch_projections", batch_projections.run,
         "with a second stream only; after CSE (one product per step), before fusion"),
    Pass("transposed_operands", transposed_operands.run,
         "after the passes that add products, before fusion (its copy stays a lone operator)"),
    Pass("fusion", fusion.run,
         "on the final set of operators, where 'only reader' is exact; its op has no gradient"),
    Pass("inplace", inplace.run,
         "last: its annotation depends on the final operators and their order"),
)


def optimize(program: Program, fetch=None, *, disable=(), debug: bool = False,
             verify: bool = True, copy: bool = True) -> Program:
    """Run :data:`PASSES` on a copy of ``program`` and return the result.

    ``fetch``: the values the caller will fetch (names or Variables; default: the sinks).
    ``disable``: names of passes to skip. ``debug``: print the program after each pass.
    ``verify``: verify the program before the first pass and after each one.
    ``copy=False``: the caller hands ``program`` over (it must not use it afterwards): the
    passes rewrite it rather than a copy, which spares copying every operator and variable
    (``to_static`` does so with the program it has just traced).
    """
    names = [p.name for p in PASSES]
    if isinstance(disable, str):
        raise TypeError(f"optimize: disable takes a tuple of pass names, e.g. ({disable!r},)")
    unknown = [name for name in disable if name not in names]
    if unknown:
        raise ValueError(f"optimize: unknown pass name(s) {unknown}; the passes are {names}")
    fetch = resolve_fetch(program, fetch)
    if verify:
        _verify(program, "before any pass")
    if copy:  # the result is a new program even when every pass is off
        program = clone_program(program)
    with private_copy(program) as make_private:  # the passes rewrite this copy, not a clone each
        for step in PASSES:
            if step.name in disable:
                continue
            program = step.run(program, fetch)
            make_private(program)
            if debug:
                print(f"---- after {step.name} ----\n{program}")
            if verify:
                _verify(program, f"after pass {step.name!r}")
    return program


def _verify(program: Program, when: str) -> None:
    try:
        verify_program(program)
    except ValueError as exc:
        raise ValueError(f"optimize: the program is broken {when}: {exc}") from exc
