"""One cupy ``ElementwiseKernel`` per ``fused_elementwise`` group, on CUDA.

The group's sub-ops become one CUDA C body from their lowering rules' ``cuda`` templates
(:func:`hybridfw.ops.lowering_rules.elementwise_rule`), with the casts the executor makes:
operands to the compute dtype, each result to its dtype; cupy broadcasts the inputs. A group
with a sub-op that has no CUDA template (``floor_divide``, ``pow``...), attributes, a non-finite
constant or bool operands of a float op keeps the per-op kernels.

Not yet verified on a GPU (none was available while it was written), so it is opt-in:
``HYBRIDFW_CUPY_FUSE=1``. ``tests/codegen/test_cuda.py`` (``@pytest.mark.gpu``) checks it against
the numpy kernels on a GPU; on the CPU, the same file compiles every fusible op's body (and mixed
groups with int operands) as C++ and compares its results with the numpy kernels.
"""
from __future__ import annotations

import math
import os

from ...dtypes import as_dtype, result_type
from ...ops.registry import TensorMeta, get_op

__all__ = ["ENV_VAR", "enabled", "fused_kernel", "kernel_source"]

ENV_VAR = "HYBRIDFW_CUPY_FUSE"
_CTYPES = {"float32": "float", "float64": "double", "int8": "signed char",
           "uint8": "unsigned char", "int16": "short", "int32": "int", "int64": "long long",
           "bool": "bool"}
_kernels: dict = {}


def enabled() -> bool:
    return os.environ.get(ENV_VAR, "") == "1"


def _literal(value, ctype):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return f"(({ctype}){value!r})" if not isinstance(value, bool) else \
        f"(({ctype}){int(value)})"


def kernel_source(dtypes, ops):
    """``(in_params, out_params, body)`` of the group for inputs of ``dtypes``, or None."""
    from ..fused import _infer_steps, parse_ref
    metas = [TensorMeta((), as_dtype(d)) for d in dtypes]
    inferred = _infer_steps(metas, ops)
    lines = []
    for j, ((name, refs, attrs), (_, rdtype, cdtype)) in enumerate(zip(ops, inferred)):
        rule = getattr(get_op(name), "lower", None)
        template = getattr(rule, "cuda", None)
        if template is None or attrs:
            return None
        operands = []
        for ref in refs:
            kind, value = parse_ref(ref, j, len(dtypes))
            operands.append((kind, value, metas[value].dtype if kind == "in" else
                             inferred[value][1] if kind == "op" else None))
        cast = rule.values if rule.values is not None else range(len(refs))
        compute = cdtype or result_type(*[metas[v] if k == "in" else
                                          TensorMeta((), d) if k == "op" else v
                                          for i, (k, v, d) in enumerate(operands) if i in cast])
        tensors = [d for k, v, d in operands if k != "const"]
        if compute.is_floating_point and tensors and all(d.name == "bool" for d in tensors):
            return None
        ctype, rtype = _CTYPES.get(compute.name), _CTYPES.get(rdtype.name)
        if ctype is None or rtype is None:
            return None
        args = []
        for i, (kind, value, dtype) in enumerate(operands):
            text = f"in{value}" if kind == "in" else f"v{value}" if kind == "op" else \
                _literal(value, ctype)
            if text is None:
                return None
            if kind != "const" and i in cast and dtype is not compute:
                text = f"(({ctype}){text})"
            args.append(text)
        lines.append(f"{rtype} v{j} = ({rtype})({template.format(*args, t=ctype)});")
    out_type = _CTYPES[inferred[-1][1].name]
    lines.append(f"out0 = v{len(ops) - 1};")
    in_params = ", ".join(f"{_CTYPES.get(as_dtype(d).name, '?')} in{i}"
                          for i, d in enumerate(dtypes))
    if "?" in in_params:
        return None
    return in_params, f"{out_type} out0", "\n".join(lines)


def fused_kernel(cupy, arrays, ops):
    """The group's result computed by one ElementwiseKernel, or None when it has none."""
    key = (id(ops), tuple(a.dtype.str for a in arrays))
    entry = _kernels.get(key)
    if entry is None or entry[0] is not ops:
        source = kernel_source([a.dtype.name for a in arrays], ops)
        kernel = None if source is None else cupy.ElementwiseKernel(
            *source, name=f"hf_fused_{len(_kernels)}")
        entry = _kernels[key] = (ops, kernel)
    kernel = entry[1]
    return None if kernel is None else kernel(*arrays)
