"""``hf.static``: the static-graph IR, building programs, and the executor.

Example::

    >>> import hybridfw as hf
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     x = hf.static.data("x", [None, 3], "float32")
    ...     y = (x * 2.0).sum(dim=1)
    >>> out, = hf.static.Executor().run(prog, feed={"x": hf.ones(2, 3)}, fetch_list=[y])
    >>> out.tolist()
    [6.0, 6.0]
"""
from . import assign, fused  # noqa: F401 - register the assign_param and fused_elementwise ops
from . import nn
from .autodiff import gradients
from .builder import (StaticInterpreter, current_program, data, default_main_program,
                      program_guard, set_origin_provider)
from .executor import Executor
from .ir import Block, Operator, Program, Variable
from .memory_plan import plan_arena
from .partition import split_forward_backward
from .py_func import py_func
from .passes import optimize
from .serialize import load_program, program_from_dict, program_to_dict, save_program
from .verifier import verify

__all__ = ["Program", "Block", "Operator", "Variable", "program_guard", "data", "Executor",
           "StaticInterpreter", "default_main_program", "current_program", "nn", "gradients",
           "save_program", "load_program", "program_to_dict", "program_from_dict", "optimize",
           "verify", "plan_arena", "split_forward_backward", "py_func", "set_origin_provider"]
