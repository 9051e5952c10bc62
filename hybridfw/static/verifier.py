"""The IR verifier: :func:`verify` checks a program's invariants (torch.fx's ``lint``).

Passes run it after every rewrite in tests (``optimize(..., verify=True)``), so a pass that
breaks the IR fails where it breaks it, with a message naming the block, the operator and the
variable. The invariants:

- **Blocks** are well nested: ``program.blocks[i].idx == i``; every sub-block is held by exactly
  one operator, whose block is the sub-block's ``parent``; every block is reachable from the
  global block.
- **Variables** are declared once, under their own name, in the block they say they belong to;
  every feed and parameter is a variable of the global block (parameters persistable, with the
  shape and dtype of their value).
- **Operator kinds** exist: a registry op (``fused_elementwise`` included) or a control-flow
  kind with a compiler in :data:`~hybridfw.static.executor.OP_COMPILERS` (``cond``, ``while``,
  ``while_grad``).
- **Definitions come first**: every input an operator reads is a feed, a parameter, the output
  of an earlier operator of its block or of an enclosing block (before the operator holding the
  sub-block), or a *block argument* of an enclosing sub-block (a variable of that block no
  operator defines, set by the construct). Inputs are names or Python numbers.
- **Single assignment**: every name is the output of at most one operator in the whole program,
  and never of a feed or parameter.
- **Captures**: every name a sub-block reads from outside it is among the inputs of the
  operator holding it (liveness and autodiff rely on seeing all uses at that operator).
- **Inference**: a registry op has one output, whose shape and dtype equal what the op's
  ``infer`` gives for its inputs' shapes and dtypes. Control-flow operators are not inferred
  themselves; their blocks are checked like any other. ``assign_param(param, value)`` writes a
  parameter of the program with a value of its dtype and shape; a ``py_func`` declares its
  outputs as its ``out_specs`` say.
- **In-place annotations** (``program.inplace``, see :mod:`.passes.inplace`): each maps the
  output of an operator to one of that operator's inputs, of the same shape and dtype, that is
  neither a feed nor a parameter.

Example::

    >>> import hybridfw as hf
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     x = hf.static.data("x", [2])
    ...     y = x * 2.0
    >>> hf.static.verify(prog)            # passes silently
    >>> prog.global_block().ops[0].inputs = ("nope", 2.0)
    >>> hf.static.verify(prog)
    Traceback (most recent call last):
    ...
    ValueError: verify: block 0, op 0 (t0 = mul(nope, 2.0)): input 'nope' is not defined ...
"""
from __future__ import annotations

from ..ops.registry import TensorMeta, get_op
from .executor import OP_COMPILERS
from .ir import Block, Operator, Program

__all__ = ["verify", "is_registry_op", "is_control_flow", "describe_op"]

_SCALARS = (int, float, bool)


_REGISTERED: set = set()  # op types found in the registry (ops are never unregistered)


def is_registry_op(op_type: str) -> bool:
    """Whether ``op_type`` names an op of the registry."""
    if op_type in _REGISTERED:
        return True
    try:
        get_op(op_type)
    except KeyError:
        return False
    _REGISTERED.add(op_type)
    return True


def is_control_flow(op_type: str) -> bool:
    """Whether ``op_type`` is a control-flow kind (not a registry op; the executor compiles it
    with a hook in ``OP_COMPILERS``)."""
    return op_type in OP_COMPILERS and not is_registry_op(op_type)


def describe_op(block: Block, index: int, op: Operator) -> str:
    """``block 0, op 3 (t3 = add(t1, 1.0))``: where an error is, for messages."""
    args = ", ".join(i if isinstance(i, str) else repr(i) for i in op.inputs)
    return f"block {block.idx}, op {index} ({', '.join(op.outputs)} = {op.type}({args}))"


def _fail(message: str):
    raise ValueError(f"verify: {message}")


def verify(program: Program) -> None:
    """Check ``program``'s invariants (see the module docstring); raise ``ValueError`` naming
    the first broken one, else return None."""
    if not isinstance(program, Program):
        raise TypeError(f"verify: expected a hf.static.Program, got {type(program).__name__}")
    holders = _check_blocks(program)
    _check_variables(program)
    produced = _outputs(program)
    block_args = {name for b in program.blocks[1:] for name in b.vars if name not in produced}
    defined = set(program.feeds) | set(program.params)
    _check_block(program.global_block(), defined, block_args)
    names = {name for b in program.blocks for name in b.vars}
    for block, index, op in {id(h[2]): h for h in holders.values()}.values():
        _check_captures(names, block, index, op)
    _check_inplace(program)


# ---- structure ----------------------------------------------------------------------------------
def _check_blocks(program: Program) -> dict:
    """Nesting and numbering; returns block index -> (holding block, index, op)."""
    holders: dict = {}
    for i, block in enumerate(program.blocks):
        if block.idx != i:
            _fail(f"program.blocks[{i}] says it is block {block.idx}")
        if block.program is not program:
            _fail(f"block {i} belongs to another program")
    if program.global_block().parent is not None:
        _fail("the global block (block 0) must have no parent")
    for block in program.blocks:
        for index, op in enumerate(block.ops):
            for sub in op.blocks:
                if not isinstance(sub, Block) or sub.program is not program or \
                        sub.idx >= len(program.blocks) or program.blocks[sub.idx] is not sub:
                    _fail(f"{describe_op(block, index, op)}: holds a block that is not in "
                          "program.blocks")
                if sub.idx in holders:
                    other = holders[sub.idx]
                    _fail(f"block {sub.idx} is held by two operators: "
                          f"{describe_op(*other)} and {describe_op(block, index, op)}")
                if sub.parent is not block:
                    parent = "none" if sub.parent is None else f"block {sub.parent.idx}"
                    _fail(f"{describe_op(block, index, op)}: its sub-block {sub.idx} has parent "
                          f"{parent}, expected block {block.idx} (the block holding the op)")
                holders[sub.idx] = (block, index, op)
    for block in program.blocks[1:]:
        if block.idx not in holders:
            _fail(f"block {block.idx} is not held by any operator (unreachable)")
    return holders


def _check_variables(program: Program) -> None:
    seen: dict = {}
    for block in program.blocks:
        for name, var in block.vars.items():
            if var.name != name:
                _fail(f"block {block.idx} lists variable {var.name!r} under the name {name!r}")
            if var.block is not block:
                _fail(f"variable {name!r} is listed in block {block.idx} but says it belongs to "
                      f"block {var.block.idx}")
            if name in seen:
                _fail(f"variable {name!r} is declared in block {seen[name]} and again in block "
                      f"{block.idx}; names must be unique in the program")
            seen[name] = block.idx
    glob = program.global_block()
    for name in program.feeds:
        if name not in glob.vars:
            _fail(f"feed {name!r} is not a variable of the global block")
    for name, value in program.params.items():
        var = glob.vars.get(name)
        if var is None:
            _fail(f"parameter {name!r} is not a variable of the global block")
        if not var.persistable:
            _fail(f"parameter {name!r} is not marked persistable")
        shape, dtype = tuple(getattr(value, "shape", ())), getattr(value, "dtype", None)
        if shape != var.shape or dtype is not var.dtype:
            _fail(f"parameter {name!r} is declared {var.shape} {var.dtype.name} but its value "
                  f"is {shape} {getattr(dtype, 'name', dtype)}")


def _outputs(program: Program) -> dict:
    """name -> where, for every operator output, failing on a second definition."""
    where: dict = {}
    inputs = set(program.feeds) | set(program.params)
    for block in program.blocks:
        for index, op in enumerate(block.ops):
            for name in op.outputs:
                here = describe_op(block, index, op)
                if not isinstance(name, str):
                    _fail(f"{here}: output {name!r} is not a variable name")
                if name in inputs:
                    _fail(f"{here}: writes {name!r}, which is a feed or parameter")
                if name in where:
                    _fail(f"{here}: output {name!r} is already defined by {where[name]}")
                if block.find_var(name) is None:
                    _fail(f"{here}: output {name!r} has no Variable in block {block.idx} or "
                          "its parents")
                where[name] = here
    return where


# ---- operators ----------------------------------------------------------------------------------
def _check_block(block: Block, defined: set, block_args: set) -> None:
    defined = defined | {n for n in block.vars if n in block_args}
    for index, op in enumerate(block.ops):
        here = describe_op(block, index, op)
        for k, name in enumerate(op.inputs):
            if isinstance(name, str):
                if name not in defined:
                    _fail(f"{here}: input {name!r} is not defined before it (not a feed, "
                          "parameter, block argument or output of an earlier operator in scope)")
            elif not isinstance(name, _SCALARS):
                _fail(f"{here}: input {k} is a {type(name).__name__}; expected a variable name "
                      "or a Python number")
        if is_registry_op(op.type):
            _check_inference(block, here, op)
        elif op.type == "assign_param":
            _check_assign(block, here, op)
        elif op.type == "py_func":
            _check_py_func(block, here, op)
        elif not is_control_flow(op.type):
            _fail(f"{here}: unknown op type {op.type!r} (neither a registry op nor a control-flow "
                  "kind registered in hf.static.executor.OP_COMPILERS)")
        for sub in op.blocks:
            _check_block(sub, defined, block_args)
        defined.update(op.outputs)


def _check_inference(block: Block, here: str, op: Operator) -> None:
    if op.blocks:
        _fail(f"{here}: registry op {op.type!r} cannot hold sub-blocks")
    if len(op.outputs) != 1:
        _fail(f"{here}: registry op {op.type!r} must have exactly one output, has "
              f"{len(op.outputs)}")
    metas = []
    for name in op.inputs:
        if isinstance(name, str):
            var = block.var(name)
            metas.append(TensorMeta(var.shape, var.dtype))
        else:
            metas.append(name)
    try:
        shape, dtype, _ = get_op(op.type).infer(*metas, **op.attrs)
    except Exception as exc:  # noqa: BLE001 - any inference failure is a broken operator
        _fail(f"{here}: inference fails on its inputs: {type(exc).__name__}: {exc}")
    out = block.var(op.outputs[0])
    if tuple(shape) != out.shape or dtype is not out.dtype:
        _fail(f"{here}: output {out.name!r} is declared {out.shape} {out.dtype.name} but "
              f"{op.type} infers {tuple(shape)} {dtype.name}")


def _check_assign(block: Block, here: str, op: Operator) -> None:
    if len(op.inputs) != 2 or op.outputs or op.blocks or \
            not all(isinstance(i, str) for i in op.inputs):
        _fail(f"{here}: assign_param takes two names (parameter, value) and has no outputs")
    param, value = (block.var(n) for n in op.inputs)
    if param.name not in block.program.params:
        _fail(f"{here}: writes {param.name!r}, which is not a parameter of the program")
    if param.dtype is not value.dtype or len(param.shape) != len(value.shape) or any(
            a != b and b != -1 for a, b in zip(param.shape, value.shape)):
        _fail(f"{here}: value {value.name!r} ({value.shape} {value.dtype.name}) does not fit "
              f"parameter {param.name!r} ({param.shape} {param.dtype.name})")


def _check_py_func(block: Block, here: str, op: Operator) -> None:
    if not callable(op.attrs.get("fn")):
        _fail(f"{here}: py_func needs a callable 'fn' attribute")
    specs = op.attrs.get("out_specs", ())
    if len(specs) != len(op.outputs):
        _fail(f"{here}: {len(op.outputs)} outputs but {len(specs)} out_specs")
    for name, (shape, dtype) in zip(op.outputs, specs):
        var = block.var(name)
        if var.shape != tuple(shape) or var.dtype is not dtype:
            _fail(f"{here}: output {name!r} is declared {var.shape} {var.dtype.name} but its "
                  f"out_spec says {tuple(shape)} {dtype.name}")


def _attr_strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _attr_strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _attr_strings(v)


def _check_captures(names: set, block: Block, index: int, op: Operator) -> None:
    """What a control-flow operator's sub-blocks read from outside them, and the outer names its
    attributes refer to (branch or loop results taken from outside), must be among its inputs."""
    listed = set(op.input_names())
    inside = {name for sub in op.blocks for name in sub.vars}
    reads = [(name, f"sub-block {sub.idx} reads {name!r} (in op {inner.type} -> "
              f"{', '.join(inner.outputs)})")
             for sub in op.blocks for inner in sub.ops for name in inner.input_names()]
    reads += [(name, f"its attributes refer to {name!r}")
              for name in _attr_strings(op.attrs) if name in names and name not in op.outputs]
    for name, what in reads:
        if name not in inside and name not in listed:
            _fail(f"{describe_op(block, index, op)}: {what}, defined outside it, but the "
                  "operator does not list it among its inputs")


def _check_inplace(program: Program) -> None:
    inplace = getattr(program, "inplace", None) or {}
    ops = {name: (block, op) for block in program.blocks for op in block.ops
           for name in op.outputs}
    for out, source in inplace.items():
        if out not in ops:
            _fail(f"program.inplace: {out!r} is not the output of any operator")
        block, op = ops[out]
        if source not in op.input_names():
            _fail(f"program.inplace: {out!r} may reuse {source!r}, but {op.type} -> {out} does "
                  "not read it")
        if source in program.feeds or source in program.params:
            _fail(f"program.inplace: {out!r} may not reuse {source!r}, a feed or parameter")
        a, b = block.var(out), block.var(source)
        if a.shape != b.shape or a.dtype is not b.dtype:
            _fail(f"program.inplace: {out!r} ({a.shape} {a.dtype.name}) may not reuse "
                  f"{source!r} ({b.shape} {b.dtype.name}): shape and dtype must match")
