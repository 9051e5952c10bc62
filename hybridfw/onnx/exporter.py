"""Lowering an optimized static program to an ONNX ModelProto.

Each registry operator goes through its op's own lowering rule (``OpDef.onnx``, attached at the
end of each module of :mod:`hybridfw.ops` with :func:`~hybridfw.ops.registry.onnx_rules`);
``fused_elementwise`` lowers its sub-ops through theirs. The operators that are not registry
ops are handled here:

- ``cond`` becomes ``If``: each branch block becomes a subgraph whose outputs are the values the
  branch yields; the blocks read enclosing values by name (ONNX's outer scope).
- ``while`` becomes ``Loop`` with no trip count: the condition block is emitted once before the
  loop (on the initial values, giving the Loop's initial condition) and again at the end of the
  body graph (on the body's results), so data-dependent trip counts and loop-carried values map
  directly. A list grown in the loop (a tensor array: a buffer the body only extends with
  ``concat(buffer, item)``) becomes a scan output of the Loop (one item per iteration, stacked by
  ONNX Runtime); a buffer the loop also reads stays a loop-carried value whose first dim grows.
- ``py_func`` (Python callbacks), ``assign_param`` (writes to parameters), ``while_grad`` and
  differentiated loops (stacks) are refused with the op and the user's source line.

Parameters become initializers named after the module's parameters (``fc1.weight``), inputs keep
their InputSpec names with ``None`` dims as symbolic dims (``<input>_dim<i>``), intermediate
values keep the program's variable names, outputs are ``output_<i>``.
"""
from __future__ import annotations

from collections import ChainMap

import numpy as np
from onnx import helper, numpy_helper, shape_inference

from .. import __version__
from ..ops.registry import OnnxNotExportable, TensorMeta, all_ops
from ..static.ir import Block, Operator, Program, format_origin
from .context import Graph, Names, OnnxExportError, RuleContext, table_rule, value_info

__all__ = ["program_to_onnx", "EXPORTER_OPS"]

# operator types the exporter itself handles (not registry ops, or not lowerable by a rule)
EXPORTER_OPS = ("cond", "while", "while_grad", "py_func", "assign_param")


def _origin_text(op: Operator) -> str:
    return format_origin(op.origin)


class _Exporter:
    def __init__(self, program: Program, readable: dict):
        self.program = program
        self.readable = readable
        self.names = Names()
        self.main = Graph("hybridfw")
        self.consts: dict = {}

    # ---- values -----------------------------------------------------------------------------
    def constant(self, array: np.ndarray) -> str:
        key = (array.dtype.str, array.shape, array.tobytes())
        name = self.consts.get(key)
        if name is None:
            name = self.names.fresh("const")
            self.main.initializers.append(numpy_helper.from_array(array, name))
            self.consts[key] = name
        return name

    def lookup(self, name: str, env: ChainMap) -> str:
        """The ONNX name of program value ``name`` (parameters become initializers on first
        use)."""
        found = env.get(name)
        if found is not None:
            return found
        tensor = self.program.params.get(name)
        if tensor is None:
            raise OnnxExportError(f"hf.onnx.export: the program reads {name!r}, which no "
                                  "operator defines and which is not a parameter")
        onnx_name = self.names.fresh(self.readable.get(name, name))
        array = np.asarray(tensor.detach().cpu().numpy(), order="C")
        self.main.initializers.append(numpy_helper.from_array(array, onnx_name))
        env.maps[-1][name] = onnx_name
        return onnx_name

    def scalar_flag(self, graph: Graph, name: str, base: str) -> str:
        """A one-element bool tensor as the 0-d tensor If and Loop take."""
        out = self.names.fresh(f"{base}_flag")
        graph.nodes.append(helper.make_node("Reshape", [name, self.constant(
            np.zeros((0,), dtype=np.int64))], [out], name=self.names.fresh(f"Reshape_{base}")))
        return out

    def identity(self, graph: Graph, source: str, base: str) -> str:
        out = self.names.fresh(base)
        graph.nodes.append(helper.make_node("Identity", [source], [out],
                                            name=self.names.fresh(f"Identity_{base}")))
        return out

    # ---- operators --------------------------------------------------------------------------
    def emit_block(self, block: Block, graph: Graph, env: ChainMap, skip=frozenset()) -> None:
        """Emit ``block``'s operators into ``graph`` (those whose id is in ``skip`` aside)."""
        for op in block.ops:
            if id(op) in skip:
                continue
            handler = _HANDLERS.get(op.type)
            if handler is not None:
                handler(self, op, block, graph, env)
            else:
                self.emit_registry_op(op, block, graph, env)

    def emit_registry_op(self, op: Operator, block: Block, graph: Graph, env: ChainMap):
        opdef = all_ops().get(op.type)
        if opdef is None:
            raise OnnxExportError(f"hf.onnx.export: op '{op.type}' cannot be exported: it is "
                                  "neither a registry op nor one the exporter handles "
                                  f"({', '.join(EXPORTER_OPS)}){_origin_text(op)}")
        args = [self.lookup(i, env) if isinstance(i, str) else i for i in op.inputs]
        metas = [block.var(i) if isinstance(i, str) else i for i in op.inputs]
        out_var = block.var(op.outputs[0])
        try:
            _, _, compute = opdef.infer(*metas, **op.attrs)
        except (TypeError, ValueError) as exc:
            raise OnnxExportError(f"hf.onnx.export: op '{op.type}': {exc}"
                                  f"{_origin_text(op)}") from None
        ctx = RuleContext(self, graph, op.type, args, metas, op.attrs,
                          TensorMeta(out_var.shape, out_var.dtype), compute, out_var.name,
                          op.origin)
        result = self.apply_rule(opdef, ctx)
        env[op.outputs[0]] = self.rename(ctx, result, out_var.name)

    def apply_rule(self, opdef, ctx: RuleContext) -> str:
        """Run ``opdef``'s lowering rule in ``ctx``; refusals and rule failures name the op and
        the user's line."""
        rule = opdef.onnx
        if rule is None or isinstance(rule, OnnxNotExportable):
            raise ctx.fail(rule.reason if rule is not None else "it has no ONNX lowering rule")
        try:
            if isinstance(rule, str):
                return table_rule(ctx, rule)
            return rule(ctx, *ctx.args, **ctx.attrs)
        except OnnxExportError:
            raise
        except (TypeError, ValueError, KeyError, IndexError) as exc:
            raise ctx.fail(f"its lowering rule failed ({type(exc).__name__}: {exc})") from exc

    def rename(self, ctx: RuleContext, result: str, var_name: str) -> str:
        """Give the rule's result the program variable's name (readable graphs)."""
        node = ctx.produced.get(result)
        if node is None:
            return result
        new = self.names.fresh(var_name)
        for i, out in enumerate(node.output):
            if out == result:
                node.output[i] = new
        return new


# ---- control flow ---------------------------------------------------------------------------
def _branch_graph(ex: _Exporter, op: Operator, block: Block, env: ChainMap, index: int):
    label = ("then", "else")[index]
    sub = Graph(ex.names.fresh(f"{op.outputs[0] if op.outputs else 'cond'}_{label}"))
    branch_env = env.new_child()
    ex.emit_block(op.blocks[index], sub, branch_env)
    yielded = op.attrs[("true_outputs", "false_outputs")[index]]
    for out_name, source in zip(op.outputs, yielded):
        if source is None:
            raise OnnxExportError(f"hf.onnx.export: the {label} branch of cond does not produce "
                                  f"{out_name!r} (a program differentiated by "
                                  "hf.static.gradients; export the inference program)"
                                  f"{_origin_text(op)}")
        var = op.blocks[index].var(source)
        produced = ex.identity(sub, ex.lookup(source, branch_env), f"{out_name}_{label}")
        sub.outputs.append(value_info(produced, var.dtype, var.shape))
    return sub.make()


def _emit_cond(ex: _Exporter, op: Operator, block: Block, graph: Graph, env: ChainMap):
    flag = ex.scalar_flag(graph, ex.lookup(op.inputs[0], env), op.inputs[0])
    then_graph = _branch_graph(ex, op, block, env, 0)
    else_graph = _branch_graph(ex, op, block, env, 1)
    outs = [ex.names.fresh(n) for n in op.outputs]
    graph.nodes.append(helper.make_node("If", [flag], outs, name=ex.names.fresh("If"),
                                        then_branch=then_graph, else_branch=else_graph))
    for name, out in zip(op.outputs, outs):
        env[name] = out


def _emit_condition(ex: _Exporter, op: Operator, graph: Graph, env: ChainMap, values) -> str:
    """The loop condition block on ``values``, in ``graph``; its flag as a 0-d bool."""
    cond_env = env.new_child()
    for arg, value in zip(op.attrs["cond_args"], values):
        cond_env[arg] = value
    ex.emit_block(op.blocks[0], graph, cond_env)
    flag = op.attrs["cond_output"]
    return ex.scalar_flag(graph, ex.lookup(flag, cond_env), flag)


def _reads(ops, name: str) -> list:
    return [op for op in ops if name in op.input_names()]


def _tensor_arrays(op: Operator) -> dict:
    """Loop variables that are tensor arrays: index -> (the body's append op, the appended
    (1, ...) value). Such a variable is a buffer the body only extends, ``concat(buffer,
    item, dim=0)``, and that nothing else in the loop reads; its items become a scan output."""
    attrs, (cond_block, body_block) = op.attrs, op.blocks
    found = {}
    for k, (arg, out) in enumerate(zip(attrs["body_args"], attrs["body_outputs"])):
        readers = _reads(body_block.ops, arg)
        if len(readers) != 1 or readers[0].type != "concat":
            continue
        append = readers[0]
        if append.outputs != (out,) or append.attrs.get("dim") != 0 or \
                len(append.inputs) != 2 or append.inputs[0] != arg or \
                not isinstance(append.inputs[1], str):
            continue
        if _reads(body_block.ops, out) or list(attrs["body_outputs"]).count(out) != 1 or \
                arg in attrs["body_outputs"]:
            continue
        cond_arg = attrs["cond_args"][k]
        if _reads(cond_block.ops, cond_arg) or attrs["cond_output"] == cond_arg:
            continue
        found[k] = (append, append.inputs[1])
    return found


def _emit_while(ex: _Exporter, op: Operator, block: Block, graph: Graph, env: ChainMap):
    attrs = op.attrs
    if "stack" in attrs:
        raise OnnxExportError("hf.onnx.export: this while loop was differentiated "
                              "(hf.static.gradients keeps a stack of its iterations); export "
                              f"the inference program{_origin_text(op)}")
    count = len(attrs["body_args"])
    arrays = _tensor_arrays(op)
    carried = [k for k in range(count) if k not in arrays]
    init = ["" if k in arrays else ex.lookup(n, env) for k, n in enumerate(op.inputs[:count])]
    first = _emit_condition(ex, op, graph, env, init)
    body_block = op.blocks[1]
    body = Graph(ex.names.fresh(f"{op.outputs[0]}_body"))
    iteration, cond_in = ex.names.fresh("iteration"), ex.names.fresh("cond_in")
    body.inputs += [value_info(iteration, "int64", ()), value_info(cond_in, "bool", ())]
    body_env = env.new_child()
    for k in carried:
        var = body_block.var(attrs["body_args"][k])
        name = body_env[var.name] = ex.names.fresh(var.name)
        body.inputs.append(value_info(name, var.dtype, var.shape))
    ex.emit_block(body_block, body, body_env, skip={id(a) for a, _ in arrays.values()})
    results = [None if k in arrays else ex.lookup(n, body_env)
               for k, n in enumerate(attrs["body_outputs"])]
    flag = _emit_condition(ex, op, body, body_env, [r or "" for r in results])
    body.outputs.append(value_info(ex.identity(body, flag, "cond_out"), "bool", ()))
    for k in carried:
        var = body_block.var(attrs["body_args"][k])
        body.outputs.append(value_info(ex.identity(body, results[k], f"{op.outputs[k]}_next"),
                                       var.dtype, var.shape))
    for k, (_, item) in arrays.items():  # one item per iteration, stacked by the Loop
        var = body_block.var(item)
        squeezed = ex.names.fresh(f"{op.outputs[k]}_item")
        body.nodes.append(helper.make_node("Squeeze", [ex.lookup(item, body_env),
                                                       ex.constant(np.zeros(1, np.int64))],
                                           [squeezed], name=ex.names.fresh("Squeeze_item")))
        body.outputs.append(value_info(squeezed, var.dtype, var.shape[1:]))
    outs = {k: ex.names.fresh(op.outputs[k]) for k in carried}
    outs.update({k: ex.names.fresh(f"{op.outputs[k]}_items") for k in arrays})
    graph.nodes.append(helper.make_node(
        "Loop", ["", first, *(init[k] for k in carried)],
        [outs[k] for k in carried] + [outs[k] for k in arrays],
        name=ex.names.fresh("Loop"), body=body.make()))
    for k in carried:
        env[op.outputs[k]] = outs[k]
    for k in arrays:
        env[op.outputs[k]] = _after_initial_items(ex, graph, env, op, k, outs[k])


def _after_initial_items(ex: _Exporter, graph: Graph, env: ChainMap, op: Operator, k: int,
                         items: str) -> str:
    """The final buffer: the loop's items after the buffer's initial items (none, usually)."""
    source = op.inputs[k]
    tensor = ex.program.params.get(source)
    if tensor is not None and tensor.shape[0] == 0:
        return items
    out = ex.names.fresh(op.outputs[k])
    graph.nodes.append(helper.make_node("Concat", [ex.lookup(source, env), items], [out], axis=0,
                                        name=ex.names.fresh("Concat_items")))
    return out


def _refuse_py_func(ex: _Exporter, op: Operator, block: Block, graph: Graph, env: ChainMap):
    from ..static.printer import function_name
    name = function_name(op.attrs["fn"])
    fn = op.attrs["fn"]
    if (getattr(fn, "__module__", None) or "").startswith("hybridfw."):
        name = fn.__qualname__
    raise OnnxExportError(
        f"hf.onnx.export: op 'py_func' cannot be exported: the program calls the Python "
        f"function {name} (numpy or other Python code on tensors in converted code, or "
        "print/assert of tensors); an ONNX model cannot call Python. Rewrite it with hybridfw "
        f"ops to export it{_origin_text(op)}")


def _refuse_assign_param(ex: _Exporter, op: Operator, block: Block, graph: Graph,
                         env: ChainMap):
    raise OnnxExportError(
        f"hf.onnx.export: op 'assign_param' cannot be exported: the program writes parameter "
        f"{op.inputs[0]!r} in place (an in-place update of a module's tensor, such as "
        "BatchNorm's running statistics in training mode); an ONNX model has no state"
        f"{_origin_text(op)}")


def _refuse_while_grad(ex: _Exporter, op: Operator, block: Block, graph: Graph,
                       env: ChainMap):
    raise OnnxExportError("hf.onnx.export: op 'while_grad' cannot be exported: it is the "
                          "backward of a loop; an exported model is inference only"
                          f"{_origin_text(op)}")


_HANDLERS = {"cond": _emit_cond, "while": _emit_while, "while_grad": _refuse_while_grad,
             "py_func": _refuse_py_func, "assign_param": _refuse_assign_param}


# ---- the model ------------------------------------------------------------------------------
def program_to_onnx(program: Program, specs, fetch, readable: dict | None = None,
                    opset_version: int = 18):
    """The ONNX ModelProto of ``program`` called with inputs ``specs`` (InputSpecs, named as
    the program's feeds) returning the values ``fetch`` (as ``output_<i>``)."""
    ex = _Exporter(program, readable or {})
    root: dict = {}
    env = ChainMap(root)
    block = program.global_block()
    for spec in specs:
        name = ex.names.fresh(spec.name)
        root[spec.name] = name
        var = block.var(spec.name)
        dims = [f"{spec.name}_dim{i}" for i in range(len(spec.shape))]
        ex.main.inputs.append(value_info(name, var.dtype, spec.shape, dims))
    for i in range(len(fetch)):
        ex.names.used.add(f"output_{i}")
    ex.emit_block(block, ex.main, env)
    for i, name in enumerate(fetch):
        var = block.var(name)
        out = f"output_{i}"
        ex.main.nodes.append(helper.make_node("Identity", [ex.lookup(name, env)], [out],
                                              name=ex.names.fresh(f"Identity_{out}")))
        ex.main.outputs.append(value_info(out, var.dtype, var.shape))
    opset = [helper.make_opsetid("", opset_version)]
    model = helper.make_model(ex.main.make(), opset_imports=opset, producer_name="hybridfw",
                              producer_version=__version__,
                              ir_version=helper.find_min_ir_version_for(opset))
    _name_output_dims(model)
    return model


def _name_output_dims(model) -> None:
    """Outputs take the dims shape inference finds where the program knew them only at run
    time (``output_0: [input_0_dim0, 10]`` rather than ``[?, 10]``)."""
    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - the checker reports real problems; this is cosmetic
        return
    by_name = {o.name: o for o in inferred.graph.output}
    for output in model.graph.output:
        found = by_name.get(output.name)
        dims, new = output.type.tensor_type.shape.dim, found and found.type.tensor_type
        if new is None or not new.HasField("shape") or len(new.shape.dim) != len(dims):
            continue
        for dim, known in zip(dims, new.shape.dim):
            named = known.HasField("dim_param") and not known.dim_param.startswith("unk__")
            if not dim.HasField("dim_value") and not dim.HasField("dim_param") and \
                    (named or known.HasField("dim_value")):
                dim.CopyFrom(known)

