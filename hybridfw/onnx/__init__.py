"""``hf.onnx``: export a model or function to ONNX, control flow included, checked and verified.

:func:`export` traces the model exactly as ``hf.jit.save`` does (a fresh converted function, in
eval mode, without gradients, for the given ``input_spec``), takes the same optimized static
program ``to_static`` runs, and lowers it: registry ops through their own ONNX rules, ``cond``
to ``If``, ``while`` to ``Loop`` (see :mod:`.exporter`). The model passes
``onnx.checker.check_model(full_check=True)``; ``verify=True`` also runs it in ONNX Runtime and
compares with hybridfw (:mod:`.verify`). The file is written atomically and only after every
check passed, so an error leaves nothing behind.

Example::

    >>> import hybridfw as hf
    >>> net = hf.nn.Sequential(hf.nn.Linear(4, 8), hf.nn.ReLU(), hf.nn.Linear(8, 2))
    >>> model = hf.onnx.export(net, "mlp.onnx", input_spec=[hf.jit.InputSpec([None, 4])],
    ...                        verify=True)
    >>> [i.name for i in model.graph.input], [o.name for o in model.graph.output]
    (['input_0'], ['output_0'])
"""
from __future__ import annotations


try:
    import onnx
except ImportError as exc:  # an optional extra
    raise ImportError("hf.onnx needs the onnx package (and onnxruntime for verify=True): "
                      "pip install -e '.[onnx]'") from exc

from ..nn import Module
from .context import OnnxExportError
from .exporter import EXPORTER_OPS, program_to_onnx
from .verify import OnnxVerificationError, compare_with_runtime, example_inputs, run_onnx

__all__ = ["export", "OnnxExportError", "OnnxVerificationError", "EXPORTER_OPS",
           "example_inputs", "run_onnx", "MIN_OPSET"]

MIN_OPSET = 18


def export(model_or_fn, path, input_spec=None, opset_version: int = 18, verify: bool = False,
           example_inputs=None, rtol: float = 1e-4, atol: float = 1e-5):
    """Write the ONNX model of ``model_or_fn`` (an ``hf.nn.Module``, a function or a converted
    function) to ``path``; return the ``onnx.ModelProto``.

    ``input_spec``: one :class:`hf.jit.InputSpec` or example tensor per positional argument
    (``None`` dims become symbolic dims). ``verify=True`` runs the model in ONNX Runtime on
    ``example_inputs`` (or random inputs made from ``input_spec``) and compares every output with
    hybridfw's result within ``rtol``/``atol``, raising :class:`OnnxVerificationError` with the
    largest difference. Raises :class:`OnnxExportError` naming the op and the user's source line
    for what ONNX cannot hold (Python callbacks, ops without a lowering rule); nothing is
    written unless every check passed.
    """
    max_opset = onnx.defs.onnx_opset_version()
    if isinstance(opset_version, bool) or not isinstance(opset_version, int) or \
            not MIN_OPSET <= opset_version <= max_opset:
        raise ValueError(f"hf.onnx.export: opset_version must be an int from {MIN_OPSET} to "
                         f"{max_opset} (the onnx package's newest), got {opset_version!r}")
    program, specs, fetch, readable = _trace(model_or_fn, input_spec)
    model = program_to_onnx(program, specs, fetch, readable, opset_version)
    onnx.checker.check_model(model, full_check=True)
    if verify:
        compare_with_runtime(model, program, specs, fetch, example_inputs, rtol, atol)
    _write_atomic(model, path)
    return model


def _trace(model_or_fn, input_spec):
    """The optimized inference program ``hf.jit.save`` would export (same tracing path)."""
    from ..jit.serialization import inference_program
    from ..jit.static_function import spec_leaves
    static_fn, concrete = inference_program(model_or_fn, input_spec, api="hf.onnx.export")
    specs, instance = spec_leaves(static_fn.input_spec), static_fn.instance
    program = concrete.program
    return program, specs, list(concrete.outputs.fetch), _readable_names(program, instance)


def _readable_names(program, instance) -> dict:
    """Program parameter name -> the module's name for it (``fc1.weight``), where known."""
    if not isinstance(instance, Module):
        return {}
    by_id = {id(t): n for n, t in instance.named_parameters()}
    by_id.update((id(t), n) for n, t in instance.named_buffers())
    return {var: by_id[key] for key, var in program._captured.items() if key in by_id}


def _write_atomic(model, path) -> None:
    from ..serialization import write_atomically  # (hf.save's: permissions, fsync, errors)
    write_atomically(path, lambda f: f.write(model.SerializeToString()), "hf.onnx.export")
