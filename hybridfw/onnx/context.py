"""The graph-building side of the ONNX exporter: names, graphs, and the context a rule sees.

- :class:`Names` hands out value names unique in the whole model (main graph and every
  subgraph), derived from the program's own variable names so the model stays readable.
- :class:`Graph` collects one ONNX graph's nodes, inputs and outputs (the main graph also holds
  the initializers: parameters and constants, which subgraphs read from the outer scope).
- :class:`RuleContext` is what an op's lowering rule (``hybridfw.ops.*``, attached with
  :func:`hybridfw.ops.registry.onnx_rules`) receives: ``args`` (ONNX value names of tensor inputs,
  Python numbers as they are), ``metas`` (their shapes/dtypes), ``out`` (the result's shape and
  dtype), ``compute`` (the dtype the op casts tensor inputs to, or None), and methods that emit
  nodes and constants.

Errors a rule raises through :meth:`RuleContext.fail` name the op and the user's source line.
"""
from __future__ import annotations

import numpy as np
from onnx import helper

from ..dtypes import DType, as_dtype, bool_, result_type
from ..ops.registry import TensorLike, TensorMeta, get_op
from ..static.ir import format_origin

__all__ = ["OnnxExportError", "Names", "Graph", "RuleContext", "onnx_dtype", "value_info"]


class OnnxExportError(ValueError):
    """The program cannot be exported to ONNX (the message names the op and the user's line)."""


def onnx_dtype(dtype) -> int:
    """The TensorProto element type of a hybridfw dtype."""
    return helper.np_dtype_to_tensor_dtype(as_dtype(dtype).np)


def value_info(name: str, dtype, shape, dim_names=None):
    """A typed value: ``-1`` dims are unknown, or named (symbolic) by ``dim_names[i]``."""
    dims = []
    for i, s in enumerate(shape):
        if s == -1:
            dims.append(dim_names[i] if dim_names else None)
        else:
            dims.append(int(s))
    return helper.make_tensor_value_info(name, onnx_dtype(dtype), dims)


class Names:
    """Value names unique across the model, each derived from a readable base name."""

    def __init__(self):
        self.used: set = set()

    def fresh(self, base: str) -> str:
        base = base or "v"
        name, k = base, 1
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name


class Graph:
    """One ONNX graph under construction."""

    def __init__(self, name: str):
        self.name = name
        self.nodes: list = []
        self.inputs: list = []
        self.outputs: list = []
        self.initializers: list = []

    def make(self):
        return helper.make_graph(self.nodes, self.name, self.inputs, self.outputs,
                                 initializer=self.initializers)


class RuleContext:
    """What a lowering rule works with (see the module docstring)."""

    def __init__(self, exporter, graph: Graph, op_name: str, args, metas, attrs, out,
                 compute, base: str, origin):
        self.exporter, self.graph = exporter, graph
        self.op_name, self.args, self.metas, self.attrs = op_name, list(args), list(metas), attrs
        self.out, self.compute, self.base, self.origin = out, compute, base, origin
        self.produced: dict = {}  # value name -> the node of this rule that produced it

    # ---- errors --------------------------------------------------------------------------
    def fail(self, why: str) -> OnnxExportError:
        """An error naming the op and the user's line; ``raise ctx.fail("...")``."""
        return OnnxExportError(f"hf.onnx.export: op '{self.op_name}' cannot be exported: {why}"
                               f"{format_origin(self.origin)}")

    # ---- emitting ------------------------------------------------------------------------
    def node(self, op_type: str, inputs, outputs: int = 1, **attrs):
        """Append an ONNX node; return its output name (a tuple when ``outputs > 1``)."""
        names = [self.exporter.names.fresh(f"{self.base}_{op_type.lower()}")
                 for _ in range(outputs)]
        node = helper.make_node(op_type, list(inputs), names,
                                name=self.exporter.names.fresh(f"{op_type}_{self.base}"),
                                **{k: v for k, v in attrs.items() if v is not None})
        self.graph.nodes.append(node)
        for n in names:
            self.produced[n] = node
        return names[0] if outputs == 1 else tuple(names)

    def const(self, value, dtype=None) -> str:
        """A constant (an initializer of the main graph, shared between equal constants)."""
        array = np.asarray(value, dtype=None if dtype is None else as_dtype(dtype).np)
        return self.exporter.constant(array)

    def ints(self, values) -> str:
        """A 1-D int64 constant (shapes, axes, pads)."""
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(-1))

    def cast(self, name: str, source, target) -> str:
        """``name`` cast from dtype ``source`` to ``target`` (no node when they agree)."""
        if source is not None and as_dtype(source) is as_dtype(target):
            return name
        return self.node("Cast", [name], to=onnx_dtype(target))

    def operand(self, i: int, dtype=None) -> str:
        """Input ``i`` as a tensor of ``dtype`` (its own dtype when None): tensors are cast,
        Python numbers become constants."""
        arg, meta = self.args[i], self.metas[i]
        if not isinstance(meta, TensorLike):
            return self.const(arg, dtype if dtype is not None else result_type(arg))
        return arg if dtype is None else self.cast(arg, meta.dtype, dtype)

    def operand_dtype(self) -> DType:
        """The dtype elementwise operands meet in: the compute dtype, else the promoted one."""
        return self.compute if self.compute is not None else result_type(*self.metas)

    def lower(self, op_name: str, args, metas, attrs: dict) -> tuple:
        """Emit registry op ``op_name`` on ``args`` through its own rule (fused ops use this);
        returns its result's name and :class:`TensorMeta`."""
        opdef = get_op(op_name)
        shape, dtype, compute = opdef.infer(*metas, **attrs)
        meta = TensorMeta(tuple(shape), dtype)
        sub = RuleContext(self.exporter, self.graph, op_name, args, metas, attrs, meta, compute,
                          self.base, self.origin)
        result = self.exporter.apply_rule(opdef, sub)
        self.produced.update(sub.produced)
        return result, meta

    def elem_type(self, dtype) -> int:
        """The ONNX element type of a dtype (for attributes such as Cast's ``to``)."""
        return onnx_dtype(dtype)

    # ---- shapes --------------------------------------------------------------------------
    def shape_of(self, name: str) -> str:
        return self.node("Shape", [name])

    def reshape(self, name: str, shape) -> str:
        shape = list(shape)
        return self.node("Reshape", [name, self.ints(shape)], allowzero=1 if 0 in shape and
                         -1 not in shape else None)


def table_rule(ctx: RuleContext, op_type: str) -> str:
    """A 1:1 op: every tensor operand cast to the op's operand dtype, the result to ``out``."""
    dtype = ctx.operand_dtype()
    result = ctx.node(op_type, [ctx.operand(i, dtype) for i in range(len(ctx.args))])
    natural = bool_ if ctx.out.dtype is bool_ else dtype
    return ctx.cast(result, natural, ctx.out.dtype)

