"""Deployment export: ``hf.jit.save`` writes a converted model's inference program and weights to
one file; ``hf.jit.load`` reads it back as a :class:`TranslatedLayer` that runs without the
original Python code.

The file is an :func:`hybridfw.save` archive (a zip of a JSON manifest and ``.npy`` arrays,
written atomically, read with ``allow_pickle=False``; pickle and damaged files are refused) of
one dict:

- ``program``: the forward program's description (:func:`hybridfw.static.program_to_dict`);
- ``arrays``: the value of each of its persistables (weights, buffers, constants), by name;
- ``export``: what calling it needs: ``format`` and ``version``; ``inputs``, one
  ``{"name", "shape", "dtype"}`` per argument in call order (``-1`` marks a dynamic dim);
  ``fetch``, the names of the variables the call fetches; ``outputs``, how the result is
  rebuilt from the fetched values, as JSON: ``{"leaf": k}`` (fetched value ``k``),
  ``{"scalar": k}`` (fetched value ``k`` as a Python number: ``x.item()`` in the function),
  ``{"maybe": [node, f]}`` (``node``, a leaf or scalar, where fetched bool ``f`` is true, else
  None: a function returning on some paths of an if only),
  ``{"tuple": [...]}``, ``{"list": [...]}``, ``{"dict": [[key, node], ...]}`` (str or int keys),
  ``{"const": value}`` (None, bool, int, float or str) and ``{"array": [start, count], "item":
  item}`` (a list grown in a loop the program decides: fetched values ``start`` to
  ``start + count`` hold the items' leaves stacked on dim 0; ``item`` is ``null`` for tensor
  items, else nested ``{"tuple"|"list": [...]}`` with ``null`` leaves);
  ``state`` (optional; files from before it have none): the exported module's
  ``state_dict()`` entries in order, each ``{"name": "0.weight", "kind": "parameter" |
  "buffer", "param": "param0"}`` (the program's persistable holding it) or, for an entry the
  program does not read as it is (a buffer eval mode leaves unused), ``"value": array``.

Loading builds the program with :func:`hybridfw.static.program_from_dict` and checks it with
:func:`hybridfw.static.verify`; nothing named in the file is imported or called.

Example::

    >>> import hybridfw as hf
    >>> model = hf.nn.Sequential(hf.nn.Linear(4, 8), hf.nn.ReLU(), hf.nn.Linear(8, 2))
    >>> hf.jit.save(model, "mlp.hfm", input_spec=[hf.jit.InputSpec([None, 4])])
    >>> layer = hf.jit.load("mlp.hfm")
    >>> layer(hf.ones(3, 4)).shape
    (3, 2)
"""
from __future__ import annotations

import os
import warnings

from ..dtypes import as_dtype
from ..dygraph.autograd import no_grad
from ..dygraph.tensor import Tensor, from_numpy
from ..nn import Module, Parameter
from ..serialization import load as load_archive
from ..serialization import save as save_archive
from ..static import Executor, Program, program_from_dict, program_to_dict, verify
from ..static.printer import function_name
from .input_spec import InputSpec
from .static_function import spec_leaves
from .static_function import StaticFunction

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "TranslatedLayer", "load", "save"]

FORMAT_NAME = "hybridfw.jit.layer"
FORMAT_VERSION = 1
# program_to_dict's own py_func warning, replaced by save's (one warning per save)
_PROGRAM_PY_FUNC_WARNING = "save_program: the program calls the Python function"


# ---- save ----------------------------------------------------------------------------------
def save(module_or_fn, path, input_spec=None) -> None:
    """Export the inference program of ``module_or_fn`` and its weights to the file ``path``.

    ``module_or_fn`` is an ``hf.nn.Module`` (its ``forward``; converted with
    :func:`hf.jit.to_static` or not), a function, or a :class:`StaticFunction`. ``input_spec``
    lists one :class:`InputSpec` (``None``/``-1`` dims stay dynamic in the file) or example
    tensor (fixed shape) per positional argument; it may be left out when the StaticFunction was
    created with one. The program is traced afresh in eval mode (modules' modes are restored
    afterwards) without gradients; the user's model and converted function are not modified.

    Raises ``ValueError``/``TypeError`` for a missing or malformed ``input_spec`` and for results
    the file cannot describe (see the module docstring), and warns (``UserWarning``) when the
    program calls Python functions (``py_func``: numpy callbacks, ``print``/``assert`` on tensors),
    which a loaded program cannot run. The file is written atomically.

    Example::

        >>> net = hf.nn.Linear(3, 2)
        >>> hf.jit.save(net, "linear.hfm", input_spec=[hf.jit.InputSpec([None, 3], "float32")])
    """
    static_fn, concrete = inference_program(module_or_fn, input_spec)
    specs = spec_leaves(static_fn.input_spec)
    program = concrete.program
    export = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "inputs": [{"name": s.name, "shape": list(s.shape), "dtype": s.dtype.name} for s in specs],
        "fetch": list(concrete.outputs.fetch),
        "outputs": _encode_structure(concrete.outputs.structure, "the result"),
    }
    if any(not isinstance(s, InputSpec) for s in static_fn.input_spec):
        export["input_structure"] = [_spec_structure(s) for s in static_fn.input_spec]
    if isinstance(static_fn.instance, Module):
        export["state"] = _state_entries(static_fn.instance, program)
    callbacks = sorted({_callback_name(op) for block in program.blocks for op in block.ops
                        if op.type == "py_func"})
    if callbacks:
        warnings.warn(
            f"hf.jit.save: the exported program calls the Python function(s) "
            f"{', '.join(callbacks)} (py_func: numpy calls on tensors, or print/assert of "
            "tensors, in converted code); the file keeps only their names, so the loaded layer "
            "raises where the program calls them (a deployment has no Python code). Rewrite "
            "that code with hybridfw ops to export it.", UserWarning, stacklevel=2)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_PROGRAM_PY_FUNC_WARNING, category=UserWarning)
        description = program_to_dict(program)
    for param in description["params"]:
        param["requires_grad"] = False  # an inference export: weights load as constants
    arrays = {name: t.detach().cpu().numpy() for name, t in program.params.items()}
    save_archive({"export": export, "program": description, "arrays": arrays}, path)


def _state_entries(module: Module, program: Program) -> list:
    """The manifest's ``state``: each ``module.state_dict()`` entry, by the name of the
    program persistable that is that very tensor, else with its value."""
    held = {id(t): name for name, t in program.params.items()}
    entries = []
    for key, t in module.state_dict(keep_vars=True).items():
        entry = {"name": key, "kind": "parameter" if isinstance(t, Parameter) else "buffer"}
        if id(t) in held:
            entry["param"] = held[id(t)]
        else:
            entry["value"] = t.detach().cpu().numpy()
        entries.append(entry)
    return entries


def _callback_name(op) -> str:
    """A py_func's function as the user knows it (``numpy.sin``, ``print``) and, when known,
    the user's line that built it."""
    fn = op.attrs["fn"]
    name = function_name(fn)
    if (getattr(fn, "__module__", None) or "").startswith("hybridfw."):
        name = fn.__qualname__  # a callback the converter made: the user wrote its qualname
    if op.origin is not None:
        name += f" ({op.origin[0]}, line {op.origin[1]})"
    return name


def inference_program(module_or_fn, input_spec, api: str = "hf.jit.save"):
    """``(static_fn, concrete)``: a fresh converted function for ``module_or_fn`` and its
    optimized inference program for ``input_spec`` (traced in eval mode under no_grad; the
    modules' train/eval flags are put back). What ``hf.jit.save`` and ``hf.onnx.export``
    export (``api`` names the caller in argument errors)."""
    static_fn = _static_function(module_or_fn, input_spec, api)
    instance = static_fn.instance
    modes = [(m, m.training) for m in instance.modules()] if isinstance(instance, Module) else []
    try:
        if isinstance(instance, Module):
            instance.eval()
        with no_grad():
            concrete = static_fn.get_concrete_program(*static_fn.input_spec)
    finally:
        for module, training in modes:
            module.training = training
    return static_fn, concrete


def _static_function(obj, input_spec, api: str = "hf.jit.save") -> StaticFunction:
    """A fresh StaticFunction for ``obj``'s forward/function with the checked input specs (a new
    one, so the user's object and its program cache are left as they are)."""
    instance = None
    if isinstance(obj, Module):
        forward = obj.__dict__.get("forward")
        if not isinstance(forward, StaticFunction):
            forward = type(obj).forward
        instance = obj
    elif isinstance(obj, StaticFunction):
        forward, instance = obj, obj.instance
    elif callable(obj):
        forward = obj
        if isinstance(getattr(obj, "__self__", None), Module) and hasattr(obj, "__func__"):
            forward, instance = obj.__func__, obj.__self__  # a bound method of a module
    else:
        raise TypeError(f"{api}: expected an hf.nn.Module, a function or a converted "
                        f"function (hf.jit.to_static), got {type(obj).__name__}")
    options = {}
    if isinstance(forward, StaticFunction):
        options = {"full_graph": forward.full_graph}
        if input_spec is None:
            input_spec = forward.input_spec
        forward = forward.dygraph_function
    specs = _input_specs(input_spec, api)
    return StaticFunction(forward, specs, instance=instance, **options)


def _input_specs(input_spec, api: str = "hf.jit.save") -> list:
    if input_spec is None:
        raise ValueError(f"{api}: input_spec is required (the converted function was not "
                         "created with one): pass input_spec=[hf.jit.InputSpec([None, ...], "
                         "'float32'), ...] or example tensors, one per argument")
    if isinstance(input_spec, (InputSpec, Tensor)) or not isinstance(input_spec, (list, tuple)):
        raise TypeError(f"{api}: input_spec must be a list of hf.jit.InputSpec or tensors "
                        f"(one per argument), got {type(input_spec).__name__}")
    def checked(spec, where: str):
        if isinstance(spec, (tuple, list)) and spec and not hasattr(spec, "_fields"):
            # a tuple/list argument of tensors (an LSTM's (h_0, c_0))
            return type(spec)(checked(v, f"{where}_{j}") for j, v in enumerate(spec))
        if isinstance(spec, Tensor):
            spec = InputSpec.from_tensor(spec)
        elif not isinstance(spec, InputSpec):
            raise TypeError(f"{api}: input_spec[{where.replace('_', '][')}] must be an "
                            f"hf.jit.InputSpec or a tensor (or a tuple/list of them), got "
                            f"{type(spec).__name__}; an exported program takes tensors only "
                            "(bake Python arguments into the function)")
        name = spec.name if spec.name is not None else f"input_{where}"
        if not isinstance(name, str) or not name:
            raise TypeError(f"{api}: input_spec[{where.replace('_', '][')}] has name "
                            f"{spec.name!r}; names are non-empty strings")
        return InputSpec(spec.shape, spec.dtype, name)
    specs = [checked(spec, str(i)) for i, spec in enumerate(input_spec)]
    names = [s.name for s in spec_leaves(specs)]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{api}: input names {duplicates} are used more than once in "
                         f"input_spec (inputs: {names})")
    return specs


def _spec_structure(spec):
    """The manifest's form of one argument's spec: null for a tensor, else the list of its
    items' forms (a tuple or list argument)."""
    return None if isinstance(spec, InputSpec) else [_spec_structure(v) for v in spec]


def _encode_structure(node, where: str):
    """The JSON form of an ``_Outputs`` structure (see the module docstring)."""
    kind = node[0]
    if kind in ("leaf", "scalar"):
        return {kind: node[1]}
    if kind == "maybe":
        return {"maybe": [_encode_structure(node[1], where), node[2]]}
    if kind == "seq":
        seq_type, children = node[1], node[2]
        if seq_type not in (list, tuple):
            raise TypeError(f"hf.jit.save: {where} has type {seq_type.__name__}; an exported "
                            "result holds plain tuples, lists and dicts (return a tuple or a "
                            "dict instead)")
        return {seq_type.__name__: [_encode_structure(c, f"{where}[{i}]")
                                    for i, c in enumerate(children)]}
    if kind == "dict":
        items = []
        for key, child in node[1]:
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise TypeError(f"hf.jit.save: {where} has a key {key!r} of type "
                                f"{type(key).__name__}; an exported result's dict keys are "
                                "str or int")
            items.append([key, _encode_structure(child, f"{where}[{key!r}]")])
        return {"dict": items}
    if kind == "array":
        _, start, count, item = node
        return {"array": [start, count], "item": _encode_item(item, where)}
    value = node[1]
    if value is not None and value.__class__ not in (bool, int, float, str):
        raise TypeError(f"hf.jit.save: {where} has type {type(value).__name__} ({value!r}); an "
                        "exported result holds tensors and None, bool, int, float or str "
                        "values (in tuples, lists and dicts)")
    return {"const": value}


def _encode_item(item, where: str):
    if item is None:
        return None
    seq_type, children = item
    if seq_type not in (list, tuple):
        raise TypeError(f"hf.jit.save: the items of the list {where} are {seq_type.__name__}s; "
                        "an exported result holds tuples, lists and dicts")
    return {seq_type.__name__: [_encode_item(c, where) for c in children]}


# ---- load ----------------------------------------------------------------------------------
def load(path, device=None) -> TranslatedLayer:
    """Read a file written by :func:`save` as a :class:`TranslatedLayer`.

    ``device`` overrides the device the program was saved for. Never runs code from the file;
    raises ``ValueError`` naming the file when it is not an exported layer (a checkpoint, a
    saved program, a pickle), is truncated or corrupted, or was written by a newer format.

    Example::

        >>> layer = hf.jit.load("linear.hfm")
        >>> layer(hf.zeros(5, 3)).shape
        (5, 2)
    """
    label = repr(os.fspath(path)) if not hasattr(path, "read") else "the file object"
    try:
        root = load_archive(path)
    except ValueError as exc:
        raise ValueError(f"hf.jit.load: {exc}") from None
    if not isinstance(root, dict) or "export" not in root:
        if isinstance(root, dict) and set(root) == {"program", "arrays"}:
            raise ValueError(f"hf.jit.load: {label} is a static program "
                             "(hf.static.save_program), not an exported layer; load it with "
                             "hf.static.load_program")
        raise ValueError(f"hf.jit.load: {label} is a hybridfw checkpoint (hf.save), not an "
                         "exported layer (hf.jit.save); load it with hf.load")
    reader = _Reader(label)
    if set(root) != {"export", "program", "arrays"} or not isinstance(root["arrays"], dict):
        raise reader.bad(f"unexpected top-level entries {sorted(map(str, root))}")
    export = root["export"]
    reader.header(export)
    try:
        program = program_from_dict(root["program"], root["arrays"], device)
        verify(program)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
        raise reader.bad(f"its program is invalid ({exc})") from None
    specs = reader.inputs(export.get("inputs"), program)
    fetch = reader.fetch(export.get("fetch"), program)
    structure = reader.structure(export.get("outputs"), len(fetch), "outputs")
    arguments = reader.input_structure(export.get("input_structure"), len(specs))
    state = reader.state(export.get("state"), program)
    return TranslatedLayer(program, specs, fetch, structure, arguments, state)


class _Reader:
    """Checks the ``export`` manifest, with errors naming the file and the bad entry."""

    def __init__(self, label: str):
        self.label = label

    def bad(self, why: str) -> ValueError:
        return ValueError(f"hf.jit.load: {self.label} is not a valid exported layer: {why}")

    def header(self, export) -> None:
        if not isinstance(export, dict) or export.get("format") != FORMAT_NAME:
            raise self.bad(f"the manifest does not name the format {FORMAT_NAME!r}")
        version = export.get("version")
        if isinstance(version, bool) or not isinstance(version, int) or \
                not 1 <= version <= FORMAT_VERSION:
            raise ValueError(f"hf.jit.load: {self.label} has export format version {version!r}, "
                             f"this hybridfw reads versions 1 to {FORMAT_VERSION}; a newer "
                             "hybridfw may have written it: upgrade hybridfw")

    def inputs(self, nodes, program: Program) -> list:
        if not isinstance(nodes, list):
            raise self.bad("the manifest has no input list")
        block = program.global_block()
        specs = []
        for i, node in enumerate(nodes):
            if not isinstance(node, dict) or not isinstance(node.get("name"), str) or \
                    not isinstance(node.get("shape"), list) or \
                    not isinstance(node.get("dtype"), str):
                raise self.bad(f"input {i} is malformed: {node!r}")
            name = node["name"]
            try:
                spec = InputSpec(node["shape"], as_dtype(node["dtype"]), name)
            except (TypeError, ValueError) as exc:
                raise self.bad(f"input {name!r} has an invalid shape or dtype ({exc})") from None
            var = block.vars.get(name)
            if name not in program.feeds or var is None:
                raise self.bad(f"input {name!r} is not an input of the program "
                               f"(inputs: {program.feeds})")
            if tuple(var.shape) != spec.shape or var.dtype is not spec.dtype:
                raise self.bad(f"input {name!r} is declared {spec.shape} {spec.dtype.name} but "
                               f"the program's input is {tuple(var.shape)} {var.dtype.name}")
            specs.append(spec)
        names = [s.name for s in specs]
        if sorted(names) != sorted(program.feeds):
            raise self.bad(f"the inputs {names} are not the program's inputs {program.feeds}")
        return specs

    def input_structure(self, nodes, count: int):
        """The arguments' nesting (None: one tensor per argument), checked to hold ``count``
        tensors."""
        if nodes is None:
            return None

        def leaves(node) -> int:
            if node is None:
                return 1
            if not isinstance(node, list) or not node:
                raise self.bad(f"the input structure is malformed: {nodes!r}")
            return sum(leaves(n) for n in node)
        if not isinstance(nodes, list) or sum(leaves(n) for n in nodes) != count:
            raise self.bad(f"the input structure {nodes!r} does not hold its {count} inputs")
        return nodes

    def state(self, entries, program: Program) -> list:
        """The ``state`` entries as ``(name, kind, program param name or None, tensor)``."""
        if entries is None:
            return []
        if not isinstance(entries, list):
            raise self.bad("the state entry is not a list")
        out, seen = [], set()
        for node in entries:
            ok = isinstance(node, dict) and isinstance(node.get("name"), str) and \
                node["name"] and node.get("kind") in ("parameter", "buffer") and \
                node["name"] not in seen and len(node) == 3
            param = node.get("param") if ok else None
            if ok and isinstance(param, str) and param in program.params:
                out.append((node["name"], node["kind"], param, program.params[param]))
            elif ok and "value" in node and hasattr(node["value"], "dtype"):
                try:
                    value = from_numpy(node["value"])
                except TypeError as exc:
                    raise self.bad(f"state entry {node['name']!r}: {exc}") from None
                out.append((node["name"], node["kind"], None, value.to(program.device)))
            else:
                raise self.bad(f"malformed state entry {node!r}")
            seen.add(node["name"])
        return out

    def fetch(self, names, program: Program) -> list:
        block = program.global_block()
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise self.bad("the manifest has no list of fetched names")
        missing = [n for n in names if n not in block.vars]
        if missing:
            raise self.bad(f"fetched names {missing} are not variables of the program")
        return names

    def structure(self, node, count: int, where: str):
        """The ``_Outputs``-style structure of a JSON node, every leaf index checked."""
        if isinstance(node, dict) and len(node) == 1:
            ((tag, body),) = node.items()
            if tag in ("leaf", "scalar") and _index(body) and body < count:
                return (tag, body)
            if tag == "maybe" and isinstance(body, list) and len(body) == 2 and \
                    _index(body[1]) and body[1] < count:
                value = self.structure(body[0], count, where)
                if value[0] in ("leaf", "scalar"):
                    return ("maybe", value, body[1])
            if tag in ("tuple", "list") and isinstance(body, list):
                return ("seq", tuple if tag == "tuple" else list,
                        tuple(self.structure(c, count, f"{where}[{i}]")
                              for i, c in enumerate(body)))
            if tag == "dict" and isinstance(body, list):
                items = []
                for item in body:
                    if not (isinstance(item, list) and len(item) == 2 and
                            not isinstance(item[0], bool) and isinstance(item[0], (str, int))):
                        raise self.bad(f"malformed dict item {item!r} at {where}")
                    items.append((item[0], self.structure(item[1], count,
                                                          f"{where}[{item[0]!r}]")))
                return ("dict", tuple(items))
            if tag == "const" and (body is None or isinstance(body, (bool, int, float, str))):
                return ("const", body)
        if isinstance(node, dict) and set(node) == {"array", "item"}:
            span = node["array"]
            if isinstance(span, list) and len(span) == 2 and all(map(_index, span)) and \
                    span[1] >= 1 and span[0] + span[1] <= count:
                item = self.item(node["item"], where)
                if _leaf_count(item) == span[1]:
                    return ("array", span[0], span[1], item)
        raise self.bad(f"invalid output structure at {where}: {node!r}")

    def item(self, node, where: str):
        if node is None:
            return None
        if isinstance(node, dict) and len(node) == 1:
            ((tag, body),) = node.items()
            if tag in ("tuple", "list") and isinstance(body, list):
                return (tuple if tag == "tuple" else list,
                        tuple(self.item(c, where) for c in body))
        raise self.bad(f"invalid list item structure at {where}: {node!r}")


def _index(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _leaf_count(item) -> int:
    return 1 if item is None else sum(_leaf_count(c) for c in item[1])


# ---- the loaded layer ----------------------------------------------------------------------
class TranslatedLayer(Module):
    """An exported inference program with its weights, as a Module (what :func:`load` returns).

    Call it with tensors matching ``input_spec`` (positionally, or by input name); it runs
    ``program`` on its own :class:`hybridfw.static.Executor` (one compiled plan per input shape)
    and returns the result with the structure the exported function returned. Outputs carry no
    autograd history (inference only). A dim the export left dynamic takes any size.

    Attributes: ``program`` (the :class:`hybridfw.static.Program`; its ``params`` hold the
    weights), ``input_spec`` (list of :class:`InputSpec`), ``fetch`` (fetched variable names).
    ``state_dict()``, ``named_parameters()`` and ``named_buffers()`` give the exported module's
    names (``'0.weight'``) and values; the parameters (which do not require grad) and buffers
    are the program's own tensors, so ``load_state_dict`` changes what the program computes
    (except for an entry the program does not read as it is, such as a buffer eval mode
    leaves unused).

    Example::

        >>> layer = hf.jit.load("linear.hfm")
        >>> layer.input_spec
        [InputSpec(shape=(-1, 3), dtype=float32, name='input_0')]
        >>> layer(hf.zeros(1, 3)).shape, layer(hf.zeros(64, 3)).shape
        ((1, 2), (64, 2))
    """

    def __init__(self, program: Program, input_spec: list, fetch: list, structure,
                 arguments=None, state=()):
        super().__init__()
        self._register_state(program, state)
        self.program = program
        self.input_spec = list(input_spec)
        self.fetch = list(fetch)
        self._structure = structure
        self._arguments = arguments  # tuple/list arguments' nesting (see _Reader.input_structure)
        self._executor = Executor()
        self.training = False  # the program is the exported eval-mode one

    def _register_state(self, program: Program, state) -> None:
        """Register the exported module's state under its names (submodules made as needed);
        a parameter becomes a Parameter that the program reads in place of its tensor."""
        made: dict = {}
        for name, kind, param, value in state:
            *path, leaf = name.split(".")
            owner = self
            try:
                for part in path:
                    child = owner._modules.get(part)
                    if child is None:
                        child = Module()
                        owner.add_module(part, child)
                    owner = child
                if kind == "parameter":
                    if param is not None and param in made:
                        value = made[param]
                    elif param is not None:
                        value = made[param] = Parameter(value, requires_grad=False)
                        del program._captured[id(program.params[param])]
                        program.params[param] = value
                        program._captured[id(value)] = param
                    else:
                        value = Parameter(value, requires_grad=False)
                    owner.register_parameter(leaf, value)
                else:
                    owner.register_buffer(leaf, value)
            except KeyError as exc:  # a name TranslatedLayer itself uses (program, fetch...)
                warnings.warn(f"hf.jit.load: the state entry {name!r} is left out of "
                              f"state_dict(): {exc}", UserWarning, stacklevel=4)

    def _apply(self, fn) -> Module:
        """``to()``/``double()``/``cuda()``...: refused where they would change a dtype or a
        device, which the program's variables fix (load with ``hf.jit.load(path, device=...)``
        for another device)."""
        with no_grad():
            for name, t in list(self.named_parameters()) + list(self.named_buffers()):
                new = fn(t.detach())
                if new.dtype is not t.dtype or new.device != t.device:
                    raise TypeError(
                        f"TranslatedLayer: its program was exported for {name!r} as "
                        f"{t.dtype.name} on {t.device}, which cannot change to "
                        f"{new.dtype.name} on {new.device}; load the file with "
                        "hf.jit.load(path, device=...) for another device")
        return super()._apply(fn)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy values into the program's weights (``assign=True``, which would put other
        tensors in their place, is refused: the program reads its own)."""
        if assign:
            raise ValueError("TranslatedLayer.load_state_dict: assign=True is not supported; "
                             "the values are copied into the program's weights")
        return super().load_state_dict(state_dict, strict=strict)

    def forward(self, *args, **kwargs):
        if self._arguments is not None:
            args = self._flatten_arguments(args)
        feed = self._bind(args, kwargs)
        results = self._executor.run(self.program, feed=feed, fetch_list=self.fetch)
        return _build(self._structure, results)

    def _flatten_arguments(self, args) -> list:
        """The tensors of tuple/list arguments (``layer(x, (h, c))``), in input order."""
        out: list = []

        def walk(value, node, where):
            if node is None:
                out.append(value)
                return
            if not isinstance(value, (tuple, list)) or len(value) != len(node):
                raise TypeError(f"TranslatedLayer: argument {where} must be a tuple or list of "
                                f"{len(node)} items, got {type(value).__name__}"
                                f"{f' of {len(value)}' if isinstance(value, (tuple, list)) else ''}")
            for j, (v, n) in enumerate(zip(value, node)):
                walk(v, n, f"{where}[{j}]")
        for i, (value, node) in enumerate(zip(args, self._arguments)):
            walk(value, node, str(i))
        return out + list(args[len(self._arguments):])

    def _bind(self, args, kwargs) -> dict:
        specs = self.input_spec
        names = [s.name for s in specs]
        if len(args) > len(specs):
            raise TypeError(f"TranslatedLayer takes {len(specs)} input(s) {names}, got "
                            f"{len(args)}")
        values = dict(zip(names, args))
        for name, value in kwargs.items():
            if name not in names:
                raise TypeError(f"TranslatedLayer got an unexpected input {name!r} (inputs: "
                                f"{names})")
            if name in values:
                raise TypeError(f"TranslatedLayer got input {name!r} twice (by position and "
                                "by name)")
            values[name] = value
        missing = [n for n in names if n not in values]
        if missing:
            raise TypeError(f"TranslatedLayer is missing input(s) {missing} (inputs: {names})")
        feed = {}
        for spec in specs:
            value = values[spec.name]
            if not isinstance(value, Tensor):
                raise TypeError(f"TranslatedLayer: input {spec.name!r} must be an hf.Tensor, "
                                f"got {type(value).__name__}")
            if value.dtype is not spec.dtype:  # (an InputSpec violation: a ValueError, as API.md says)
                raise ValueError(f"TranslatedLayer: input {spec.name!r} expects dtype "
                                 f"{spec.dtype.name}, got {value.dtype.name}")
            if not spec.matches(value.shape):
                raise ValueError(f"TranslatedLayer: input {spec.name!r} expects shape "
                                 f"{_format_shape(spec.shape)}, got {tuple(value.shape)}")
            feed[spec.name] = value
        return feed

    def extra_repr(self) -> str:
        return ", ".join(f"{s.name}: {_format_shape(s.shape)} {s.dtype.name}"
                         for s in self.input_spec)


def _format_shape(shape) -> str:
    return "(" + ", ".join("None" if s == -1 else str(s) for s in shape) + \
        ("," if len(shape) == 1 else "") + ")"


def _build(structure, values):
    kind = structure[0]
    if kind == "leaf":
        return values[structure[1]]
    if kind == "scalar":  # x.item(), float(x), ... in the function: a Python number
        return values[structure[1]].item()
    if kind == "seq":
        return structure[1](_build(c, values) for c in structure[2])
    if kind == "dict":
        return {k: _build(c, values) for k, c in structure[1]}
    if kind == "maybe":  # returned on some paths only: None where the flag says it was not
        return _build(structure[1], values) if bool(values[structure[2]]) else None
    if kind == "array":
        _, start, count, item = structure
        buffers = values[start:start + count]
        return [_build_item(item, iter([b[i] for b in buffers]))
                for i in range(buffers[0].shape[0])]
    return structure[1]


def _build_item(item, leaves):
    if item is None:
        return next(leaves)
    return item[0](_build_item(c, leaves) for c in item[1])
