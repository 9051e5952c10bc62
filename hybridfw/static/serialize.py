"""Saving and loading static programs: ``save_program`` / ``load_program``.

A saved program is one file written by :func:`hybridfw.save` (so: a zip archive of a JSON
manifest and ``.npy`` arrays, written atomically, read with ``allow_pickle=False``, pickle and
damaged files refused). It holds two things:

- ``program``: the JSON-compatible description from :func:`program_to_dict`: format name and
  version, device, feeds, lineage (Executor.run takes the saved program's Variables in the
  loaded one's fetch_list), parameter names, and every block (parent index, variables with
  name/shape/dtype/persistable, operators with type/inputs/outputs/attributes/sub-blocks and,
  when known, their origin ``[filename, lineno, source_line]``);
- ``arrays``: the value of every persistable the program holds (parameters, buffers, captured
  constants), one array per name, stored bit-exactly.

Attribute and operand values are encoded losslessly: JSON's own null/bool/int/str/list stand
for themselves, finite floats are JSON numbers, and everything else is a one-key object naming
its kind: ``{"tuple": [...]}``, ``{"float": "nan" | "inf" | "-inf"}``, ``{"dtype": "float32"}``,
``{"dict": [[key, value], ...]}``, ``{"block": 2}`` (a sub-block reference),
``{"function": "module.qualname"}`` (the callback of a ``py_func``: only its name is saved,
with a ``UserWarning``; the loaded program holds an
:class:`~hybridfw.static.py_func.UnavailableFunction` that raises when the program calls it, and
nothing named in a file is ever imported or run).

Example::

    >>> import hybridfw as hf
    >>> prog = hf.static.Program()
    >>> with hf.static.program_guard(prog):
    ...     x = hf.static.data("x", [None, 3], "float32")
    ...     y = hf.nn.Linear(3, 2)(x).relu()
    >>> hf.static.save_program(prog, "model.hfp")
    >>> loaded = hf.static.load_program("model.hfp")
    >>> str(loaded) == str(prog)
    True
"""
from __future__ import annotations

import itertools
import math
import os
import re
import warnings

import numpy as np

from ..backend import device as as_device
from ..dtypes import DType, as_dtype
from ..dygraph.tensor import Tensor, from_numpy
from ..ops.registry import all_ops
from ..serialization import load, save
from .executor import OP_COMPILERS
from .ir import Block, Operator, Program, Variable
from .printer import function_name
from .py_func import UnavailableFunction

__all__ = ["save_program", "load_program", "program_to_dict", "program_from_dict",
           "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "hybridfw.static.program"
FORMAT_VERSION = 1
_NON_FINITE = ("nan", "inf", "-inf")


# ---- values: attributes and scalar operands ------------------------------------------------
def _encode(value, where: str):
    """The JSON-compatible form of ``value`` (see the module docstring for the tags)."""
    kind = value.__class__
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    if kind is tuple:
        return {"tuple": [_encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
    if kind is list:
        return [_encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if kind is dict:
        items = []
        for key, item in value.items():
            if key.__class__ is not str:
                raise TypeError(f"save_program: {where} has a key {key!r} of type "
                                f"{type(key).__name__}; only str keys can be saved")
            items.append([key, _encode(item, f"{where}[{key!r}]")])
        return {"dict": items}
    if kind is DType:
        return {"dtype": value.name}
    if kind is Block:
        return {"block": value.idx}
    raise TypeError(f"save_program: {where} is a {kind.__name__} ({value!r}); a saved program "
                    "can hold None, bool, int, float, str, tuples, lists and str-keyed dicts of "
                    "those, hybridfw dtypes and block references")


class _Decoder:
    """Turns the description back into objects, with errors that say where it went wrong."""

    def __init__(self, program: Program):
        self.program = program

    @staticmethod
    def bad(why: str) -> ValueError:
        return ValueError(f"load_program: invalid program description: {why}")

    def value(self, node, where: str):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.value(v, f"{where}[{i}]") for i, v in enumerate(node)]
        if not isinstance(node, dict) or len(node) != 1:
            raise self.bad(f"unexpected value {node!r} at {where}")
        ((tag, body),) = node.items()
        if tag == "tuple" and isinstance(body, list):
            return tuple(self.value(v, f"{where}[{i}]") for i, v in enumerate(body))
        if tag == "float" and body in _NON_FINITE:
            return float(body)
        if tag == "dict" and isinstance(body, list):
            out = {}
            for item in body:
                if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
                    raise self.bad(f"malformed dict item {item!r} at {where}")
                out[item[0]] = self.value(item[1], f"{where}[{item[0]!r}]")
            return out
        if tag == "dtype":
            try:
                return as_dtype(body)
            except TypeError:
                raise self.bad(f"unknown dtype {body!r} at {where}") from None
        if tag == "block":
            return self.block(body, where)
        if tag == "function" and isinstance(body, str):
            return UnavailableFunction(body)
        raise self.bad(f"unknown value {node!r} at {where}")

    def block(self, idx, where: str) -> Block:
        if isinstance(idx, bool) or not isinstance(idx, int) or \
                not 0 < idx < len(self.program.blocks):
            raise self.bad(f"{where} refers to block {idx!r}, which does not exist (or is the "
                           "global block)")
        return self.program.blocks[idx]


# ---- program <-> dict ----------------------------------------------------------------------
def program_to_dict(program: Program) -> dict:
    """A JSON-compatible description of ``program`` (everything but the persistable values).

    Example::

        >>> import json
        >>> text = json.dumps(hf.static.program_to_dict(prog))
    """
    if not isinstance(program, Program):
        raise TypeError(f"program_to_dict: expected a hf.static.Program, got "
                        f"{type(program).__name__}")
    callbacks = sorted({function_name(op.attrs["fn"]) for block in program.blocks
                        for op in block.ops if op.type == "py_func"})
    if callbacks:
        warnings.warn(f"save_program: the program calls the Python function(s) "
                      f"{', '.join(callbacks)} (py_func); a saved program keeps only their names, "
                      "so the loaded program fails where it calls them (a deployment has no "
                      "Python code)", UserWarning, stacklevel=3)
    blocks = []
    for idx, block in enumerate(program.blocks):
        if block.idx != idx:
            raise ValueError(f"save_program: block at position {idx} says its index is "
                             f"{block.idx}")
        blocks.append({
            "parent": None if block.parent is None else block.parent.idx,
            "vars": [{"name": name, "shape": list(var.shape), "dtype": var.dtype.name,
                      "persistable": bool(var.persistable)} for name, var in block.vars.items()],
            "ops": [_op_to_dict(op, f"block {idx}, op {i} ({op.type})")
                    for i, op in enumerate(block.ops)],
        })
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "device": str(program.device),
        "feeds": list(program.feeds),
        "lineage": program.lineage,
        "params": [{"name": name, "requires_grad": bool(getattr(t, "requires_grad", False))}
                   for name, t in program.params.items()],
        "blocks": blocks,
    }


def _op_to_dict(op: Operator, where: str) -> dict:
    for key in op.attrs:
        if key.__class__ is not str:
            raise TypeError(f"save_program: {where} has a non-str attribute name {key!r}")
    node = {
        "type": op.type,
        "inputs": [_encode(v, f"input {i} of {where}") for i, v in enumerate(op.inputs)],
        "outputs": list(op.outputs),
        "attrs": {k: {"function": function_name(v)} if op.type == "py_func" and k == "fn"
                  else _encode(v, f"attribute {k!r} of {where}") for k, v in op.attrs.items()},
        "blocks": [b.idx for b in op.blocks],
    }
    if op.origin is not None:
        filename, lineno, line = op.origin
        node["origin"] = [str(filename), int(lineno), str(line or "")]
    return node


def _field(node, key: str, kind, where: str):
    value = node.get(key) if isinstance(node, dict) else None
    if not isinstance(value, kind):
        raise _Decoder.bad(f"{where} has no valid {key!r}")
    return value


def _check_header(d) -> None:
    if not isinstance(d, dict) or d.get("format") != FORMAT_NAME:
        raise ValueError(f"load_program: not a saved hybridfw program (the description does "
                         f"not name the format {FORMAT_NAME!r})")
    version = d.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or \
            not 1 <= version <= FORMAT_VERSION:
        raise ValueError(f"load_program: program format version {version!r} is not supported "
                         f"(this hybridfw reads versions 1 to {FORMAT_VERSION}); a newer "
                         "hybridfw may have written it: upgrade hybridfw")


def program_from_dict(d: dict, arrays, device=None) -> Program:
    """Rebuild the Program described by ``d`` (from :func:`program_to_dict`) with persistable
    values from ``arrays`` (name -> numpy array or Tensor, used without copying).

    Checks the format name and version, that every operator type is known, and that every name
    an operator reads or writes is a variable of its block or an enclosing one. ``device``
    overrides the device the program was saved for.

    Example::

        >>> d = hf.static.program_to_dict(prog)
        >>> arrays = {name: t.detach().numpy() for name, t in prog.params.items()}
        >>> str(hf.static.program_from_dict(d, arrays)) == str(prog)
        True
    """
    _check_header(d)
    target = as_device(device if device is not None else _field(d, "device", str, "program"))
    program = Program(device=target)
    decoder = _Decoder(program)
    blocks = _field(d, "blocks", list, "program")
    if not blocks:
        raise decoder.bad("the program has no blocks")
    for idx, node in enumerate(blocks):  # all blocks first: operators refer to sub-blocks
        parent = node.get("parent") if isinstance(node, dict) else None
        if idx == 0:
            if parent is not None:
                raise decoder.bad("the global block (block 0) has a parent")
            continue
        if isinstance(parent, bool) or not isinstance(parent, int) or not 0 <= parent < idx:
            raise decoder.bad(f"block {idx} has parent {parent!r}; a block's parent must be an "
                              "earlier block")
        program.blocks.append(Block(program, idx, program.blocks[parent]))
    for block, node in zip(program.blocks, blocks):
        _load_vars(block, _field(node, "vars", list, f"block {block.idx}"))
    known = set(all_ops()) | set(OP_COMPILERS)
    for block, node in zip(program.blocks, blocks):
        for i, op_node in enumerate(_field(node, "ops", list, f"block {block.idx}")):
            block.ops.append(_load_op(decoder, block, op_node, f"block {block.idx}, op {i}",
                                      known))
    _load_feeds(program, _field(d, "feeds", list, "program"))
    _load_params(program, _field(d, "params", list, "program"), arrays)
    program._counter = _name_counter(program)
    lineage = d.get("lineage")  # (files written before it was kept have none)
    if isinstance(lineage, str):
        program.lineage = lineage
    return program


def _load_vars(block: Block, nodes: list) -> None:
    for node in nodes:
        where = f"a variable of block {block.idx}"
        name = _field(node, "name", str, where)
        where = f"variable {name!r} of block {block.idx}"
        shape = _field(node, "shape", list, where)
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= -1 for s in shape):
            raise _Decoder.bad(f"{where} has an invalid shape {shape!r}")
        try:
            dtype = as_dtype(_field(node, "dtype", str, where))
        except TypeError:
            raise _Decoder.bad(f"{where} has an unknown dtype {node['dtype']!r}") from None
        if name in block.vars:
            raise _Decoder.bad(f"{where} is defined twice")
        block.vars[name] = Variable(block, name, shape, dtype,
                                    _field(node, "persistable", bool, where))


def _load_op(decoder: _Decoder, block: Block, node, where: str, known: set) -> Operator:
    op_type = _field(node, "type", str, where)
    where = f"{where} ({op_type})"
    if op_type not in known:
        raise ValueError(f"load_program: unknown operator type {op_type!r} at {where}: this "
                         "hybridfw has no op of that name (it may come from a newer hybridfw, or "
                         "from an extension that must be imported before loading)")
    inputs = [decoder.value(v, f"input {i} of {where}")
              for i, v in enumerate(_field(node, "inputs", list, where))]
    outputs = _field(node, "outputs", list, where)
    for name in [v for v in inputs if isinstance(v, str)] + outputs:
        if not isinstance(name, str) or block.find_var(name) is None:
            raise decoder.bad(f"{where} refers to {name!r}, which is not a variable of block "
                              f"{block.idx} or its parents")
    attrs = {k: decoder.value(v, f"attribute {k!r} of {where}")
             for k, v in _field(node, "attrs", dict, where).items()}
    sub_blocks = [decoder.block(b, f"{where}") for b in _field(node, "blocks", list, where)]
    origin = node.get("origin")
    if origin is not None:
        if not (isinstance(origin, list) and len(origin) == 3 and isinstance(origin[0], str)
                and isinstance(origin[1], int) and isinstance(origin[2], str)):
            raise decoder.bad(f"{where} has an invalid origin {origin!r}")
        origin = tuple(origin)
    return Operator(op_type, inputs, outputs, attrs, sub_blocks, origin)


def _load_feeds(program: Program, feeds: list) -> None:
    for name in feeds:
        if not isinstance(name, str) or name not in program.global_block().vars:
            raise _Decoder.bad(f"feed {name!r} is not a variable of the global block")
        program.feeds.append(name)


def _load_params(program: Program, params: list, arrays) -> None:
    arrays = dict(arrays)
    block = program.global_block()
    for node in params:
        name = _field(node, "name", str, "a parameter")
        var = block.vars.get(name)
        if var is None or not var.persistable:
            raise _Decoder.bad(f"parameter {name!r} is not a persistable variable of the global "
                               "block")
        if name not in arrays:
            raise ValueError(f"load_program: no stored value for parameter {name!r}")
        t = _as_tensor(arrays.pop(name), var, program.device)
        if _field(node, "requires_grad", bool, f"parameter {name!r}"):
            t.requires_grad_(True)
        program.params[name] = t
        program._captured[id(t)] = name
    if arrays:
        raise ValueError(f"load_program: stored values {sorted(arrays)} belong to no parameter "
                         "of the program")


def _as_tensor(value, var: Variable, device) -> Tensor:
    t = value if isinstance(value, Tensor) else from_numpy(np.asarray(value))
    if tuple(t.shape) != var.shape or t.dtype is not var.dtype:
        raise ValueError(f"load_program: the stored value of {var.name!r} has shape "
                         f"{tuple(t.shape)} and dtype {t.dtype.name}; the program declares "
                         f"{var.shape} {var.dtype.name}")
    return t if t.device is device else t.to(device)


def _name_counter(program: Program):
    """A name counter past every numbered name in the program, so names made after loading
    (new operators, constants) never collide with loaded ones."""
    last = -1
    for block in program.blocks:
        for name in block.vars:
            match = re.fullmatch(r"[A-Za-z_]+(\d+)", name)
            if match:
                last = max(last, int(match.group(1)))
    return itertools.count(last + 1)


# ---- files ---------------------------------------------------------------------------------
def save_program(program: Program, path) -> None:
    """Write ``program`` and its persistable values to ``path`` (atomically; no pickle).

    Example::

        >>> hf.static.save_program(prog, "model.hfp")
    """
    description = program_to_dict(program)
    arrays = {name: t.detach().cpu().numpy() for name, t in program.params.items()}
    save({"program": description, "arrays": arrays}, path)


def load_program(path, device=None) -> Program:
    """Read a program written by :func:`save_program`; ``device`` overrides the saved one.

    Raises ``ValueError`` for files that are not saved programs (pickle files are refused and
    never unpickled), that are damaged or truncated, that a newer format version wrote, or that
    use operator types this hybridfw does not know.

    Example::

        >>> prog = hf.static.load_program("model.hfp")
        >>> out, = hf.static.Executor().run(prog, feed={"x": x}, fetch_list=["t3"])
    """
    label = repr(os.fspath(path)) if not hasattr(path, "read") else "the file object"
    try:
        root = load(path)
    except ValueError as exc:
        raise ValueError(f"load_program: {exc}") from None
    if not isinstance(root, dict) or set(root) != {"program", "arrays"} or \
            not isinstance(root["arrays"], dict):
        raise ValueError(f"load_program: {label} is a hybridfw checkpoint (hf.save) but not a "
                         "saved program; load it with hf.load")
    return program_from_dict(root["program"], root["arrays"], device)
