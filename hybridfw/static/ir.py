"""The static IR: a Program of Blocks of Operators over Variables.

- A :class:`Variable` is a named value of known dtype and shape (``-1`` for a dim only known at
  run time). It has every tensor method (``TensorMethods``), so ordinary hybridfw code builds
  programs unchanged. ``persistable`` marks values that live across runs (parameters, buffers,
  constants), held by the Program in ``params``.
- An :class:`Operator` names a registry op (or a control-flow kind such as ``cond``/``while``),
  its inputs (variable *names*, or Python scalars), its outputs (variable names), its attributes
  and, for control flow, its sub-blocks. Its ``origin`` (not an attribute: kernels never see it)
  is the user's source line that built it, ``(filename, lineno, source_line)`` or None; errors
  name it (see :func:`format_origin`).
- A :class:`Block` is an ordered list of operators with the variables they define; block 0 is the
  global block, others are nested bodies whose ``parent`` is the enclosing block.

Operators refer to variables by name, so rebinding a Python name after an in-place update only
has to point that Variable at a new name.
"""
from __future__ import annotations

import weakref

import itertools
import uuid

from ..backend import cpu
from ..dtypes import DType, as_dtype
from ..dygraph.autograd import GradMode
from ..ops.methods import TensorMethods

__all__ = ["Variable", "Operator", "Block", "Program", "format_origin"]

# set by hybridfw.static.builder.set_origin_provider: called for each new operator
_origin_provider = None


SAME_DIM_MAX_OPS = 5000  # Variable.same_dim resolves the whole global block twice
_SAME_DIM_PRIMES = ((1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069),
                    (2003, 2011, 2017, 2027, 2029, 2039, 2053, 2063, 2069, 2081, 2083, 2087))


def _none():
    return None


def _weakref(obj):
    """A weak reference to ``obj`` (a callable giving None for None)."""
    return _none if obj is None else weakref.ref(obj)


class Variable(TensorMethods):
    """A value in a static program (the static counterpart of an eager Tensor)."""

    # (the block is held weakly, as a block holds its program and parent: a program is a tree
    # of plain references, freed as soon as the last holder drops it, with the constants and
    # parameters it holds; see hf.memory's contract)
    __slots__ = ("name", "shape", "dtype", "persistable", "_block", "__weakref__")

    def __init__(self, block: "Block", name: str, shape, dtype, persistable: bool = False):
        self._block = _weakref(block)
        self.name = name
        self.shape = tuple(map(int, shape))
        self.dtype: DType = as_dtype(dtype)
        self.persistable = persistable

    def _copy(self, block: "Block") -> "Variable":
        """The same variable in ``block`` (of a program copy), its fields taken as they are
        (already normalized by the constructor)."""
        var = object.__new__(Variable)
        var._block, var.name, var.shape, var.dtype, var.persistable = \
            _weakref(block), self.name, self.shape, self.dtype, self.persistable
        return var

    @property
    def block(self) -> "Block":
        return self._block()

    @block.setter
    def block(self, block: "Block") -> None:
        self._block = _weakref(block)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def device(self):
        return self.block.program.device

    @property
    def requires_grad(self) -> bool:
        """As eager: whether gradients reach this value from an input or parameter that
        requires them (``Program.grad_sources``, set by ``hf.jit.to_static``: the tensor
        arguments that require grad), through operators with a gradient rule built with grad
        enabled. In a program built by hand (no sources given): every float value."""
        program = self.block.program
        if not self.dtype.is_floating_point:
            return False
        if program.grad_sources is None:
            return True
        return program.reaches_gradient(self.name)

    def _become_view(self, name: str, view: "Variable"):
        # (an in-place shape change: eager tensors take the view's shape; a static value's
        # shape is fixed where the program uses it)
        raise TypeError(f"{name}: changing the shape of static Variable '{self.name}' in place "
                        f"is not supported in a static program; rebind it instead: "
                        f"x = x.{name[:-1]}(...)")

    def _to_tensor(self, value):
        return self.block.program.constant(value)

    def __repr__(self) -> str:
        kind = "param " if self.persistable else ""
        return f"Variable({kind}{self.name}: {self.shape} {self.dtype.name})"

    def __bool__(self):
        raise TypeError(f"the truth value of static Variable '{self.name}' is only known when the "
                        "program runs; use hf.static.nn.cond (or hf.jit.to_static, which converts "
                        "`if` statements) instead of Python `if`; in hf.jit.to_static code this "
                        "is Python the converter does not rewrite (a library function, a lambda, "
                        "a function marked not_to_static) deciding on a tensor: decide in "
                        "converted code, or compute both sides and pick with hf.where")

    def __index__(self):
        raise TypeError(f"static Variable '{self.name}' (a value the program computes: a tensor, "
                        "x.item(), int(x), or a size under an InputSpec None such as "
                        "x.shape[0]) is only known when the program runs, so it cannot "
                        "be a Python index while the program is built (a list, tuple or "
                        "ModuleList index, a repeat count); index a tensor instead "
                        "(hf.stack(items)[i]), pick with hf.where, or use "
                        "to_static(..., full_graph=False) to run this function eagerly")

    def __len__(self) -> int:
        if not self.shape or self.shape[0] == -1:
            raise TypeError(f"len() of static Variable '{self.name}' with shape {self.shape} is "
                            "not known while building the program")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def backward(self, *args, **kwargs):
        # (a TypeError: under to_static(full_graph=False) the function then runs eagerly)
        raise TypeError(f"backward() on static Variable '{self.name}': a static program has "
                        "no eager autograd graph to run backward through; return the loss "
                        "from the converted function and call loss.backward() on the result "
                        "(it trains through the program), or build gradients into a program "
                        "with hf.static.gradients")

    def numpy(self) -> "Variable":
        """In converted code (``hf.jit.to_static``): the value itself, a tensor of the program
        (numpy functions applied to it run as Python-callback operators)."""
        return self

    def item(self) -> "Variable":
        """In converted code: the one element, as a 0-d value of the program that stands for a
        Python number: no gradient flows through it (eager ``item()`` gives a plain number),
        and ``hf.jit.to_static`` returns it as a Python number."""
        numel = 1
        for s in self.shape:
            numel *= max(s, 1)
        if numel != 1:
            raise ValueError(f"item(): static Variable '{self.name}' has shape {self.shape}; "
                             "only one-element tensors convert")
        return self.reshape(()).python_number()

    def dim_source(self):
        """``(value, k)`` when this value is dim ``k`` of ``value`` (read by converted code's
        ``x.shape[k]``, see ``hf.ops.shape_ops.size_entries``), else None."""
        return self.block.program.dim_sources.get(self.name)

    def same_dim(self, k: int, other: "Variable", other_k: int) -> bool:
        """Whether dim ``k`` of this value and dim ``other_k`` of ``other`` (both of the global
        block) are equal for every size of the program's inputs: the global block's shapes
        resolved for two assignments of distinct primes to the inputs' unknown dims agree on
        them both times (a dim computed from them, such as a reshape's -1, agrees once at most).
        False where that cannot be shown (values inside loops or branches, dims decided by data,
        programs of more than :data:`SAME_DIM_MAX_OPS` operators)."""
        from .memory_plan import resolve_shapes
        program = self.block.program
        block = program.global_block()
        if block.vars.get(self.name) is None or block.vars.get(other.name) is None or \
                len(block.ops) > SAME_DIM_MAX_OPS:
            return False
        for primes in _SAME_DIM_PRIMES:
            it = iter(primes)
            feeds = {}
            try:
                for name in program.feeds:
                    feeds[name] = tuple(next(it) if s == -1 else s for s in block.vars[name].shape)
                metas, _ = resolve_shapes(program, feeds)
            except (StopIteration, ValueError, TypeError, KeyError):
                return False
            a, b = metas[self.name].shape[k], metas[other.name].shape[other_k]
            if a == -1 or a != b:
                return False
        return True

    def python_number(self) -> "Variable":
        """This 0-d value as converted code's stand-in for a Python number (see :meth:`item`):
        detached, and returned by ``hf.jit.to_static`` as ``int``, ``float`` or ``bool``."""
        out = self.detach()
        out.block.program.python_scalars.add(out.name)
        return out

    def detach(self) -> "Variable":
        """The same value with no gradient path: the program's gradients stop here (eager
        ``Tensor.detach`` shares the data without autograd history)."""
        from ..ops.registry import apply
        from ..ops.shape_ops import detach
        return apply(detach, self)

    def to(self, *args, dtype=None, device=None, copy: bool = False,
           non_blocking: bool = False) -> "Variable":
        """``.to(hf.float64)``, ``.to(other)``, ``.to(device, dtype)`` as on a Tensor: a cast
        (``copy=True``: a copy even when nothing changes). A program runs on one device, so
        the device must be the program's; ``non_blocking`` is accepted and changes nothing."""
        dtype, device = self._to_arguments(args, dtype, device)
        if device is not None:
            from ..backend import device as as_device
            if as_device(device) is not self.device:
                raise ValueError(f"to(): static Variable '{self.name}' lives in a program on "
                                 f"{self.device}; a program runs on one device, so it cannot "
                                 f"move to {as_device(device)} (build the program on that "
                                 "device, or move the inputs before the call)")
        out = self if dtype is None else self.astype(dtype)
        return self.clone() if copy and out is self else out

    def cpu(self) -> "Variable":
        return self.to("cpu")

    def cuda(self, device=None, non_blocking: bool = False) -> "Variable":
        return self.to("cuda" if device is None else
                       device if not isinstance(device, int) else f"cuda:{device}")

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def contiguous(self) -> "Variable":
        """The value itself: a program's values have no memory layout to change."""
        return self

    def is_contiguous(self) -> bool:
        return True

    def tolist(self):
        """In converted code: nested Python lists of the elements, each a stand-in for a Python
        number (see :meth:`item`; the shape must be known while building)."""
        if -1 in self.shape:
            raise TypeError(f"tolist(): static Variable '{self.name}' has shape {self.shape}, "
                            "with a dim only known when the program runs")
        if not self.shape:
            return self.python_number()
        return [self[i].tolist() for i in range(self.shape[0])]

    def __array__(self, *args, **kwargs):
        raise TypeError(f"static Variable '{self.name}' has no value while the program is being "
                        "built; run it with hf.static.Executor().run(...)")


class Operator:
    """One operator: ``outputs = type(inputs, **attrs)`` (plus sub-blocks for control flow)."""

    __slots__ = ("type", "inputs", "outputs", "attrs", "blocks", "origin", "_names_of",
                 "_names")

    def __init__(self, type_: str, inputs, outputs, attrs=None, blocks=(), origin=None):
        self.type = type_
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.attrs = dict(attrs or {})
        self.blocks = tuple(blocks)
        self.origin = origin
        self._names_of = self._names = None  # the ``inputs`` tuple ``_names`` comes from

    def _copy(self, attrs: dict, blocks: tuple = ()) -> "Operator":
        """A copy with new ``attrs`` and ``blocks`` (for a program copy): what the constructor
        would make of the same fields, keeping the input names already found."""
        op = object.__new__(Operator)
        inputs, outputs = self.inputs, self.outputs
        op.type, op.attrs, op.blocks, op.origin = self.type, attrs, blocks, self.origin
        op.inputs = inputs if inputs.__class__ is tuple else tuple(inputs)
        op.outputs = outputs if outputs.__class__ is tuple else tuple(outputs)
        op._names_of, op._names = self._names_of, self._names
        return op

    def input_names(self) -> tuple:
        """The inputs that are variable names (not Python numbers), in order. Passes ask for
        them over and over, so they are kept until ``inputs`` is assigned another tuple."""
        inputs = self.inputs
        if inputs is self._names_of:
            return self._names
        names = tuple([i for i in inputs if isinstance(i, str)])
        if inputs.__class__ is tuple:  # a list could change in place: never cached
            self._names_of, self._names = inputs, names
        return names

    def __repr__(self) -> str:
        return f"Operator({self.type}: {self.inputs} -> {self.outputs})"


class Block:
    """An ordered list of operators and the variables they define."""

    def __init__(self, program: "Program", idx: int, parent: "Block | None"):
        self.program = program
        self.idx = idx
        self.parent = parent
        self.ops: list[Operator] = []
        self.vars: dict[str, Variable] = {}

    # the program and the parent block, held weakly (see Variable)
    @property
    def program(self) -> "Program":
        return self._program()

    @program.setter
    def program(self, program: "Program") -> None:
        self._program = _weakref(program)

    @property
    def parent(self) -> "Block | None":
        return self._parent()

    @parent.setter
    def parent(self, parent: "Block | None") -> None:
        self._parent = _weakref(parent)

    def create_var(self, shape, dtype, name: str | None = None,
                   persistable: bool = False) -> Variable:
        name = name or self.program.unique_name("t")
        if name in self.vars:
            raise ValueError(f"a variable named {name!r} already exists in block {self.idx}")
        var = Variable(self, name, shape, dtype, persistable)
        self.vars[name] = var
        return var

    def find_var(self, name: str) -> Variable | None:
        block = self
        while block is not None:
            var = block.vars.get(name)
            if var is not None:
                return var
            block = block.parent
        return None

    def var(self, name: str) -> Variable:
        var = self.find_var(name)
        if var is None:
            raise KeyError(f"no variable named {name!r} in block {self.idx} or its parents")
        return var

    def append_op(self, op: Operator) -> Operator:
        """Append ``op``; a new operator gets its origin from the origin provider, if one is
        set (:func:`hybridfw.static.builder.set_origin_provider`). Under ``hf.no_grad()`` its
        outputs join the program's ``no_grad_values``: gradients do not flow back through it,
        as eager autograd records nothing there."""
        if op.origin is None and _origin_provider is not None:
            op.origin = _origin_provider()
        if not GradMode.enabled:
            self.program.no_grad_values.update(op.outputs)
        self.ops.append(op)
        return op


class Program:
    """A static program: ``blocks[0]`` is the global block; ``params`` holds persistable values.

    Example::

        >>> import hybridfw as hf
        >>> prog = hf.static.Program()
        >>> with hf.static.program_guard(prog):
        ...     x = hf.static.data("x", [-1, 3], "float32")
        ...     y = (x * 2).sum(dim=1)
        >>> print(prog)  # doctest: +SKIP
    """

    def __init__(self, device=cpu):
        self.blocks: list[Block] = [Block(self, 0, None)]
        self.params: dict = {}        # name -> eager Tensor (parameters, buffers, constants)
        self.feeds: list[str] = []    # names of hf.static.data inputs, in creation order
        self.device = device
        self._counter = itertools.count()
        self._captured: dict = {}     # id(eager tensor) -> variable name
        self._updated: dict = {}      # id(eager tensor) -> name of its value after an update
        self._current = 0
        # shared by the copies passes make (clone_program) and by the program save_program /
        # load_program give back: the Variables of one are accepted as the same values of
        # another (Executor.run's fetch_list), a different program's not
        self.lineage = uuid.uuid4().hex
        self.no_grad_values: set = set()  # outputs of operators built under hf.no_grad()
        # values an in-place op inside a branch or loop body updated (hf.jit.to_static cannot
        # write such an update of an argument back to the caller's tensor)
        self.updated_in_blocks: set = set()
        # values converted code turned into Python numbers (x.item(), float(x), x.tolist()):
        # hf.jit.to_static returns them as Python numbers, as the eager function does
        self.python_scalars: set = set()
        # a loop block's variable -> the value it starts as (while the loop is being built:
        # Variable.requires_grad of values inside it)
        self.loop_sources: dict = {}
        # values that are a dim of another value known only at run time (converted code's
        # x.shape[k] for an InputSpec's None): name -> (that value, k), for ops taking sizes
        self.dim_sources: dict = {}
        # names of the inputs gradients start from (see Variable.requires_grad); None: unknown
        self.grad_sources: set | None = None
        # persistables nothing but this program holds (constants it made from Python data,
        # values constant folding computed): their values never change, so they may be folded.
        # A captured tensor (a buffer, a global) is not: its owner may update it in place
        self.owned: set = set()
        # values an if on a tensor condition assigns on one path only (zeros stand in on the
        # other): name -> (name of the bool telling whether it was assigned, the variable's
        # name, (file, line) of the if). A use checks the flag when the program runs
        # (static.builder.require_defined); a function's return value becomes None
        self.maybe_undefined: dict = {}
        # of those, return values that are None where their flag is false (an explicit
        # ``return None`` or bare ``return`` on the other path): kept when every path returns
        self.none_returns: set = set()
        # views taken while building (getitem with a basic index, reshape, permute), so that an
        # in-place update reaches them as in eager code: name of the value viewed -> [(the
        # view's Variable, op, attrs)], and name of a view -> (the viewed Variable, op, attrs)
        self.view_links: dict = {}
        self.view_bases: dict = {}
        # views (or viewed values) an update inside a branch or loop body could not reach:
        # name -> the error a later use raises
        self.stale: dict = {}
        # origins of the operators of blocks built and dropped again (the converter builds a
        # loop body once to learn its variables' types): name of a value -> (file, line,
        # source), so an error about a value that leaked from such a block can name its line
        self.dropped_origins: dict = {}
        # inputs whose arrays the caller hands over (as JAX's donated arguments): a compiled
        # plan takes its feed arrays in a list it empties, and drops each of these right after
        # its last use, so its memory can go before the run ends (to_static's backward drops
        # the forward's saved values as it goes, as eager autograd frees them node by node)
        self.donated: frozenset = frozenset()

    def reaches_gradient(self, name: str) -> bool:
        """Whether a path of differentiable operators (built with grad enabled) leads from one
        of ``grad_sources`` (or a parameter that requires grad) to value ``name``."""
        from ..ops.registry import all_ops
        registry = all_ops()
        producer = {}
        carried = {}  # a loop block's variable -> the values it stands for (first, and later)
        for block in self.blocks:
            for op in block.ops:
                for out in op.outputs:
                    producer.setdefault(out, op)
                if op.type == "while":
                    attrs = op.attrs
                    for args in (attrs.get("cond_args", ()), attrs.get("body_args", ())):
                        for k, arg in enumerate(args):
                            carried[arg] = (op.inputs[k], attrs["body_outputs"][k])
        seen, stack = set(), [name]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if n in self.grad_sources or getattr(self.params.get(n), "_rg", False):
                return True
            op = producer.get(n)
            if op is None and n in carried:  # (a loop variable, inside the loop)
                stack.extend(carried[n])
                continue
            if op is None and n in self.loop_sources:  # (... of a loop being built)
                stack.append(self.loop_sources[n])
                continue
            if op is None or n in self.no_grad_values:
                continue
            opdef = registry.get(op.type)
            if opdef is not None and not op.blocks and opdef.vjp is None:
                continue  # (detach, comparisons, ...: no gradient through it)
            stack.extend(op.input_names())
        return False

    # ---- structure --------------------------------------------------------------------------
    def global_block(self) -> Block:
        return self.blocks[0]

    def block(self, index: int) -> Block:
        return self.blocks[index]

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def list_vars(self):
        """Every Variable of every block (Paddle's ``Program.list_vars``)."""
        for block in self.blocks:
            yield from block.vars.values()

    def all_parameters(self) -> list:
        """The Variables standing for the captured tensors that require grad (parameters)."""
        return [self.global_block().vars[name] for name in self.trainable_params()]

    def clone(self, for_test: bool = False) -> "Program":
        """A copy that may be changed without touching this program; its Variables are this
        program's for ``Executor.run`` (Paddle's ``Program.clone``). ``for_test=True`` (Paddle's
        pruning of training-only operators) is not supported: build the program again with
        the layers in ``eval()`` mode instead."""
        if for_test:
            raise NotImplementedError("Program.clone(for_test=True) is not supported: dropout "
                                      "and batch-norm statistics are built into the program; "
                                      "build it again with the model in eval() mode")
        from .passes.clone import clone_program
        return clone_program(self)

    def current_block(self) -> Block:
        return self.blocks[self._current]

    def new_block(self) -> Block:
        block = Block(self, len(self.blocks), self.current_block())
        self.blocks.append(block)
        return block

    def unique_name(self, prefix: str) -> str:
        blocks = self.blocks
        while True:
            name = f"{prefix}{next(self._counter)}"
            for block in blocks:
                if name in block.vars:
                    break
            else:
                return name

    # ---- values from outside ----------------------------------------------------------------
    def capture(self, tensor, prefix: str = "param") -> Variable:
        """The persistable Variable standing for an eager tensor (one per tensor)."""
        name = self._captured.get(id(tensor))
        if name is None:
            name = self.unique_name(prefix)
            self._captured[id(tensor)] = name
            self.params[name] = tensor
            self.global_block().create_var(tensor.shape, tensor.dtype, name, persistable=True)
        return self.global_block().vars[name]

    def value_of(self, tensor) -> Variable:
        """The Variable holding an eager tensor's value where the current block reads it: the
        value its latest in-place update in scope wrote (``assign_param``), else the captured
        parameter itself."""
        name = self._updated.get(id(tensor))
        if name is not None:
            var = self.current_block().find_var(name)
            if var is not None:
                return var
        return self.capture(tensor)

    def constant(self, value) -> Variable:
        """A persistable constant made from Python data or a numpy array."""
        from ..dygraph.tensor import tensor
        var = self.capture(tensor(value, device=self.device), prefix="const")
        self.owned.add(var.name)
        return var

    def trainable_params(self) -> list:
        return [n for n, t in self.params.items() if getattr(t, "requires_grad", False)]

    def __str__(self) -> str:
        from .printer import format_program
        return format_program(self)

    def to_dot(self) -> str:
        from .printer import program_to_dot
        return program_to_dot(self)


def format_origin(origin) -> str:
    """Lines naming the user's source of an operator, as a traceback shows them (empty for
    None)::

        File "model.py", line 12
          y = x.reshape(3, 4)
    """
    if origin is None:
        return ""
    filename, lineno, line = origin
    text = f'\n  File "{filename}", line {lineno}'
    return text + f"\n    {line.strip()}" if line else text
