"""Readable, stable text of a Program (one operator per line) and Graphviz source for it."""
from __future__ import annotations

__all__ = ["format_program", "program_to_dot", "format_attr", "function_name"]


def function_name(fn) -> str:
    """``module.qualname`` of a Python function (how programs show and save callbacks)."""
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    module = getattr(fn, "__module__", None)
    return f"{module}.{qualname}" if module else qualname


def format_attr(value) -> str:
    if callable(value) and not isinstance(value, type):
        return function_name(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, tuple):
        return "(" + ", ".join(format_attr(v) for v in value) + ("," if len(value) == 1 else "") \
            + ")"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def _operand(value) -> str:
    return value if isinstance(value, str) else repr(value)


def _format_block(program, block, indent: str, lines: list) -> None:
    for op in block.ops:
        outs = ", ".join(op.outputs)
        args = ", ".join(_operand(i) for i in op.inputs)
        attrs = {k: v for k, v in op.attrs.items() if k != "sub_block"}
        attr_text = (" {" + ", ".join(f"{k}={format_attr(v)}" for k, v in attrs.items()) + "}"
                     if attrs else "")
        types = "; ".join(f"{tuple(v.shape)} {v.dtype.name}"
                          for v in (block.var(o) for o in op.outputs))
        if op.outputs:
            lines.append(f"{indent}{outs} = {op.type}({args}){attr_text} : {types}")
        else:  # an operator acting only by its effect (assign_param, a callback)
            lines.append(f"{indent}{op.type}({args}){attr_text}")
        for sub in op.blocks:
            lines.append(f"{indent}  block {sub.idx}:")
            _format_block(program, sub, indent + "    ", lines)


def format_program(program) -> str:
    """``name = op(inputs) {attrs} : shape dtype`` lines, inputs and parameters first."""
    lines = []
    block = program.global_block()
    for name in program.feeds:
        v = block.vars[name]
        lines.append(f"input {name} : {tuple(v.shape)} {v.dtype.name}")
    for name in program.params:
        v = block.vars[name]
        lines.append(f"param {name} : {tuple(v.shape)} {v.dtype.name}")
    _format_block(program, block, "", lines)
    return "\n".join(lines)


def _dot_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def program_to_dot(program) -> str:
    """Graphviz ``digraph`` source: a box per operator, an edge per variable it reads, and each
    sub-block (branches, loop bodies) as a dashed cluster that its operator points into."""
    values = []  # the ellipses of values no operator produces (inputs, parameters, block args)
    body = []
    producer = {}
    counter = [0]

    def visit(block, indent) -> str | None:
        first = None
        for op in block.ops:
            node = f"op{counter[0]}"
            counter[0] += 1
            first = first or node
            label = "\\n".join((_dot_string(op.type), _dot_string(", ".join(op.outputs))))
            body.append(f'{indent}{node} [shape=box, label="{label}"];')
            for name in op.input_names():
                src = producer.get(name)
                if src is None:
                    src = producer[name] = f'"{_dot_string(name)}"'
                    values.append(f"  {src} [shape=ellipse];")
                body.append(f"{indent}{src} -> {node};")
            for name in op.outputs:
                producer[name] = node
            for sub in op.blocks:
                cluster = f"cluster_{sub.idx}"
                body.append(f"{indent}subgraph {cluster} {{")
                body.append(f'{indent}  label="{_dot_string(op.type)}: block {sub.idx}"; '
                            "style=dashed;")
                head = visit(sub, indent + "  ")
                body.append(f"{indent}}}")
                if head is not None:
                    body.append(f"{indent}{node} -> {head} [style=dashed, lhead={cluster}];")
        return first

    visit(program.global_block(), "  ")
    lines = ["digraph program {", "  rankdir=TB;", "  compound=true;",
             '  node [fontname="monospace"];', *values, *body, "}"]
    return "\n".join(lines)
