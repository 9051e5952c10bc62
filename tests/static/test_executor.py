"""The executor: results equal eager (with freed arena regions poisoned), plan reuse, fetched
values independent of the arena, out= kernels, dtype corners, control flow, clear errors."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.static import executor as executor_module
from hybridfw.static.executor import OP_COMPILERS, POISON_ENV_VAR, Executor, compile_block
from hybridfw.static.ir import Operator


def _mlp():
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 5))


def _cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 4 * 4, 3))


def _program(model, shape):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None] + list(shape[1:]))
        y = model(x)
        loss = (y * y).sum()
    return prog, y, loss


@pytest.mark.parametrize("make, shape", [(_mlp, (6, 20)), (_cnn, (3, 1, 12, 12))],
                         ids=["mlp", "cnn"])
@pytest.mark.parametrize("poison", [False, True], ids=["plain", "poisoned"])
def test_nn_models_equal_eager(make, shape, poison):
    hf.manual_seed(0)
    model = make()
    prog, y, loss = _program(model, shape)
    exe = Executor(debug_poison=poison)
    for batch in (shape[0], shape[0] + 2):
        xv = hf.randn(batch, *shape[1:])
        out, lval = exe.run(prog, feed={"x": xv}, fetch_list=[y, loss])
        ref = model(xv)
        np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(lval.numpy(), (ref * ref).sum().item(), rtol=1e-5)


def test_poisoned_training_step_equals_eager_gradients():
    hf.manual_seed(0)
    model = _mlp()
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [7, 20])
        t = hf.static.data("t", [7], "int64")
        loss = nn.functional.cross_entropy(model(x), t)
        grads = hf.static.gradients(loss, list(model.parameters()))
    xv, tv = hf.randn(7, 20), hf.randint(0, 5, (7,))
    out = Executor(debug_poison=True).run(prog, feed={"x": xv, "t": tv}, fetch_list=[loss] + grads)
    eager = nn.functional.cross_entropy(model(xv), tv)
    eager.backward()
    np.testing.assert_allclose(out[0].numpy(), eager.item(), rtol=1e-5)
    for g, p in zip(out[1:], model.parameters()):
        np.testing.assert_allclose(g.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_poison_fills_every_dead_region_and_the_env_var_turns_it_on(monkeypatch):
    prog, _, loss = _program(_mlp(), (4, 20))
    monkeypatch.setenv(POISON_ENV_VAR, "1")
    exe = Executor()
    assert exe.debug_poison
    feed = {"x": hf.randn(4, 20)}
    exe.run(prog, feed=feed, fetch_list=[loss])
    arena = exe.compile(prog, feed, [loss]).arena
    assert arena.size > 0 and np.all(arena == 0xFF)  # every planned value died before the end
    assert np.isnan(arena[:4].view(np.float32)).all()
    monkeypatch.delenv(POISON_ENV_VAR)
    assert not Executor().debug_poison


def test_compiled_plan_is_reused_per_feed_signature(monkeypatch):
    prog, y, loss = _program(_mlp(), (4, 20))
    calls = []
    real = executor_module._compile_program
    monkeypatch.setattr(executor_module, "_compile_program",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    exe = Executor()
    for _ in range(3):
        exe.run(prog, feed={"x": hf.randn(4, 20)}, fetch_list=[y])
    assert len(calls) == 1
    exe.run(prog, feed={"x": np.ones((4, 20), np.float32)}, fetch_list=[y])  # same signature
    assert len(calls) == 1
    exe.run(prog, feed={"x": hf.randn(9, 20)}, fetch_list=[y])      # new batch size
    exe.run(prog, feed={"x": hf.randn(4, 20)}, fetch_list=[y, loss])  # new fetch list
    assert len(calls) == 3
    feed = {"x": hf.randn(4, 20)}
    assert exe.compile(prog, feed, [y]) is exe.compile(prog, feed, [y])
    small = Executor(max_plans=2)
    for batch in (1, 2, 3, 1):
        small.run(prog, feed={"x": hf.randn(batch, 20)}, fetch_list=[y])
    assert len(calls) == 3 + 4 and len(small._cache) == 2  # batch 1 was dropped, compiled again


def test_fetched_values_never_alias_the_arena():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [4, 4])
        a = (x * 2.0).relu()
        v = a.reshape(16)             # a view of an arena value
        b = a + 1.0
    exe = Executor()
    first = exe.run(prog, feed={"x": hf.ones(4, 4)}, fetch_list=[v, b, x])
    snapshot = [t.numpy().copy() for t in first]
    exe.run(prog, feed={"x": hf.full((4, 4), 7.0)}, fetch_list=[v, b, x])
    arena = exe.compile(prog, {"x": hf.ones(4, 4)}, [v, b, x]).arena
    for tensor_, expected in zip(first, snapshot):
        np.testing.assert_array_equal(tensor_.numpy(), expected)
        assert not np.shares_memory(tensor_.numpy(), arena)


def test_out_kernels_write_into_arena_views_and_others_are_copied_in():
    prog, _, loss = _program(_mlp(), (4, 20))
    source = Executor().compile(prog, {"x": hf.randn(4, 20)}, [loss]).source
    assert "_relu(_xp, " in source and "out=_buf_" in source
    assert "_linear(_xp, x, param0, out=_buf_" in source  # linear writes into its view
    assert "_add(" in source  # ufunc kernels are called directly
    # an op without out= (max_pool2d) computes a fresh result that is copied into its view
    prog, _, loss = _program(_cnn(), (2, 1, 12, 12))
    source = Executor().compile(prog, {"x": hf.randn(2, 1, 12, 12)}, [loss]).source
    assert "_copyto(_buf_" in source
    compile(source, "<plan>", "exec")  # the shown source is the code that runs


def test_copy_into_arena_off_keeps_ops_without_out_on_the_heap():
    hf.manual_seed(0)
    model = _cnn()
    prog, y, _ = _program(model, (2, 1, 12, 12))
    xv = hf.randn(2, 1, 12, 12)
    exe = Executor(copy_into_arena=False, debug_poison=True)
    (out,) = exe.run(prog, feed={"x": xv}, fetch_list=[y])
    np.testing.assert_allclose(out.numpy(), model(xv).detach().numpy(), rtol=1e-5, atol=1e-6)
    compiled = exe.compile(prog, {"x": xv}, [y])
    assert "_copyto" not in compiled.source
    assert any(why == "kept on the heap by the caller" for why in compiled.memory.heap.values())


def test_dtype_corners_and_scalars_match_eager():
    def fn(x):
        y = x * 1.0
        y[0] = 5.0                        # index_put
        return [y, x[x > 0.5],            # data-dependent size
                (y.floor().int() // 2),   # int floor_divide
                (x.long() + 2).floor() * 3,  # floor of int64 computes float64 in numpy
                (x.long() / 3),           # int / int -> float32
                (x > 1.0) & (x < 2.0), (2.0 - x) ** 2, x.sum(), x[1, 2], x.clamp(0.5, 1.5)]

    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        xs = hf.static.data("x", [4, 3])
        outs = fn(xs)
        internal = [(o * 1).sum() if o.dtype is not hf.bool else o.sum() for o in outs]
    xv = hf.rand(4, 3) * 3
    ref = fn(xv)
    got = Executor(debug_poison=True).run(prog, feed={"x": xv}, fetch_list=outs + internal)
    for g, r in zip(got, ref + [(o * 1).sum() if o.dtype is not hf.bool else o.sum()
                                for o in ref]):
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-6)


def test_inplace_pairs_run_correctly():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [8])
        a = x * 2.0
        b = a.tanh()
        c = b * 3.0 + 1.0
        d = c * 1.0
        d[2] = -1.0           # index_put, in place on d
        out = d.sum()
    block = prog.global_block()
    prog.inplace = {op.outputs[0]: op.inputs[0] for op in block.ops[1:-1]}
    xv = hf.randn(8)
    exe = Executor(debug_poison=True)
    (got,) = exe.run(prog, feed={"x": xv}, fetch_list=[out])
    ref = (xv * 2.0).tanh() * 3.0 + 1.0
    ref[2] = -1.0
    np.testing.assert_allclose(got.item(), ref.sum().item(), rtol=1e-6)
    compiled = exe.compile(prog, {"x": xv}, [out])
    assert len(compiled.memory.inplace) == 5 and len(compiled.memory.buffer_end) == 1
    assert "_index_put(_xp, " in compiled.source and "out=_buf_" in compiled.source


def test_control_flow_with_gradients_equals_eager_when_poisoned():
    w = hf.randn(4, 4) * 0.5
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [2, 4])
        h0 = (x * 2.0).tanh()
        _, h = hf.static.nn.while_loop(lambda i, h: i < 5,
                                       lambda i, h: (i + 1, (h @ w + h).tanh()),
                                       [hf.tensor(0), h0])
        y = hf.static.nn.cond(h.sum() > 0, lambda: h * 2.0, lambda: h0 - 1.0)
        loss = (y * y).sum()
        (gx,) = hf.static.gradients(loss, [x])
    xv = hf.randn(2, 4)
    got = Executor(debug_poison=True).run(prog, feed={"x": xv}, fetch_list=[y, loss, gx])
    xe = xv.clone().requires_grad_()
    he = h0e = (xe * 2.0).tanh()
    for _ in range(5):
        he = (he @ w + he).tanh()
    ye = he * 2.0 if he.sum().item() > 0 else h0e - 1.0
    (ye * ye).sum().backward()
    np.testing.assert_allclose(got[0].numpy(), ye.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(got[2].numpy(), xe.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_op_compilers_hook_and_compile_block():
    """A control-flow operator registered in OP_COMPILERS runs its sub-block through
    compile_block, which reads outer values from env and writes its values back there."""
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        a = x + 1.0
    block = prog.global_block()
    sub = prog.new_block()
    sub.create_var((3,), "float32", "inner")
    sub.create_var((), "float32", "total")
    sub.append_op(Operator("mul", [a.name, 10.0], ["inner"]))
    sub.append_op(Operator("sum", ["inner"], ["total"], {"dim": None, "keepdim": False}))
    block.create_var((), "float32", "result")
    block.append_op(Operator("twice", [a.name], ["result"], blocks=[sub]))

    def compile_twice(op, blk, slots, xp):
        plan = compile_block(op.blocks[0], slots, xp)
        assert "def block_1(_env):" in plan.source
        src, dst = slots["total"], slots["result"]

        def step(env):
            plan.run(env)
            env[dst] = env[src] * 2
        return step

    OP_COMPILERS["twice"] = compile_twice
    try:
        exe = Executor(debug_poison=True)
        (got,) = exe.run(prog, feed={"x": hf.ones(3)}, fetch_list=["result"])
        source = exe.compile(prog, {"x": hf.ones(3)}, ["result"]).source
    finally:
        del OP_COMPILERS["twice"]
    assert got.item() == 120.0
    assert "_twice_step(_env)" in source and "result = _own(_env[" in source


def test_errors_are_clear():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, 2])
        y = x + 1.0
    exe = Executor()
    with pytest.raises(ValueError, match=r"'z' is not an input"):
        exe.run(prog, feed={"x": np.ones((1, 2), np.float32), "z": 1}, fetch_list=[y])
    with pytest.raises(KeyError, match="fetch target 'nope'"):
        exe.run(prog, feed={"x": np.ones((1, 2), np.float32)}, fetch_list=["nope"])
    with pytest.raises(TypeError, match="expected a hf.static.Program"):
        exe.run(object(), feed={}, fetch_list=[])
    with pytest.raises(TypeError, match="fetch_list holds Variables"):
        exe.run(prog, feed={"x": np.ones((1, 2), np.float32)}, fetch_list=[hf.ones(1)])
    (single,) = exe.run(prog, feed={"x": np.ones((1, 2), np.float32)}, fetch_list=y)
    assert single.tolist() == [[2.0, 2.0]]
    prog.global_block().append_op(Operator("unknown_kind", [y.name], [y.name]))
    with pytest.raises(KeyError, match="'unknown_kind' is neither a registry op"):
        exe.run(prog, feed={"x": np.ones((1, 2), np.float32)}, fetch_list=[y])



def test_a_variable_of_another_program_is_not_fetched_by_its_name():
    """Two programs both have a 't0'/'t1': fetching the other program's Variable used to hand
    back this program's value of that name (another shape, dtype and meaning) silently."""
    first, second = hf.static.Program(), hf.static.Program()
    with hf.static.program_guard(first):
        x = hf.static.data("x", [None, 2])
        y = (x * 2.0) + 1.0
    with hf.static.program_guard(second):
        u = hf.static.data("u", [3], "float64")
        v = (u * 3.0) - 1.0
    assert y.name == v.name
    exe = Executor()
    feed = {"x": np.ones((1, 2), np.float32)}
    with pytest.raises(ValueError, match=r"Variable\(t1: \(3,\) float64\) is a variable of "
                                         r"another program.*pass its name \('t1'\)"):
        exe.run(first, feed=feed, fetch_list=[v])
    exe.run(first, feed=feed, fetch_list=[y])  # a cached plan for that name: still refused
    with pytest.raises(ValueError, match="another program"):
        exe.run(first, feed=feed, fetch_list=[y, v])
    (by_name,) = exe.run(first, feed=feed, fetch_list=[v.name])
    assert by_name.tolist() == [[3.0, 3.0]]
    (got,) = exe.run(second, feed={"u": np.arange(3.0)}, fetch_list=[v])
    assert got.tolist() == [-1.0, 2.0, 5.0]
    # a copy a pass made is the same program: its Variables are the original's
    optimized = hf.static.optimize(first, fetch=[y])
    (same,) = exe.run(optimized, feed=feed, fetch_list=[y])
    assert same.tolist() == [[3.0, 3.0]]
    # and so is the program save_program / load_program gives back
    loaded = hf.static.program_from_dict(hf.static.program_to_dict(first), {})
    (again,) = exe.run(loaded, feed=feed, fetch_list=[y])
    assert again.tolist() == [[3.0, 3.0]]
    with pytest.raises(ValueError, match="another program"):
        exe.run(loaded, feed=feed, fetch_list=[v])


def test_a_feed_that_is_not_a_dict_or_not_an_array_is_named():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, 2])
        y = x + 1.0
    exe = Executor()
    with pytest.raises(TypeError, match="feed must be a dict .* got list"):
        exe.run(prog, feed=[np.ones((1, 2), np.float32)], fetch_list=[y])
    with pytest.raises(ValueError, match=r"feed for input 'x' is not an array of shape \(-1, 2\)"):
        exe.run(prog, feed={"x": [[1.0, 2.0], [3.0]]}, fetch_list=[y])

def test_return_numpy_and_fetching_inputs_and_parameters():
    lin = nn.Linear(2, 2)
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [1, 2])
        y = lin(x)
    w_name = next(iter(prog.params))
    xv = np.ones((1, 2), np.float32)
    got_x, got_w, got_y = Executor().run(prog, feed={"x": xv}, fetch_list=[x, w_name, y],
                                         return_numpy=True)
    assert isinstance(got_y, np.ndarray)
    assert not np.shares_memory(got_x, xv) and not np.shares_memory(got_w, lin.weight.detach().numpy())
    np.testing.assert_allclose(got_y, lin(hf.tensor(xv)).detach().numpy(), rtol=1e-6)


@pytest.mark.gpu
def test_gpu_plan_equals_cpu():
    if not hf.cuda.is_available():
        pytest.skip("needs cupy and a CUDA device")
    hf.manual_seed(0)
    model = _cnn()
    xv = hf.randn(2, 1, 12, 12)
    prog, y, loss = _program(model, (2, 1, 12, 12))
    cpu_out = Executor().run(prog, feed={"x": xv}, fetch_list=[y, loss], return_numpy=True)
    model.to("cuda")
    gpu_prog = hf.static.Program(device=hf.device("cuda"))
    with hf.static.program_guard(gpu_prog):
        gy = model(hf.static.data("x", [None, 1, 12, 12]))
        gloss = (gy * gy).mean()
    exe = Executor(debug_poison=True)
    gpu_out = exe.run(gpu_prog, feed={"x": xv.to("cuda")}, fetch_list=[gy, gloss],
                      return_numpy=True)
    for c, g in zip(cpu_out, gpu_out):
        np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-5)
    assert exe.compile(gpu_prog, {"x": xv.to("cuda")}, [gloss]).memory.alignment == 256


def test_optimized_programs_run_poisoned_and_inplace_shrinks_the_arena():
    passes = pytest.importorskip("hybridfw.static.passes")
    hf.manual_seed(0)
    model = _mlp()
    prog, y, loss = _program(model, (6, 20))
    xv = hf.randn(6, 20)
    ref = model(xv).detach().numpy()
    sizes = {}
    for disable in ((), ("fusion",), ("fusion", "inplace")):
        optimized = passes.optimize(prog, fetch=[y, loss], disable=disable)
        exe = Executor(debug_poison=True)
        out, _ = exe.run(optimized, feed={"x": xv}, fetch_list=[y.name, loss.name])
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)
        sizes[disable] = exe.compile(optimized, {"x": xv}, [y.name, loss.name]).memory
    assert sizes[("fusion",)].inplace
    assert sizes[("fusion",)].arena_bytes <= sizes[("fusion", "inplace")].arena_bytes

    chain = hf.static.Program()  # elementwise only: in place, one buffer is enough
    with hf.static.program_guard(chain):
        x = hf.static.data("x", [256])
        z = ((x * 2.0).exp() + 1.0).tanh().relu().sum()
    arenas = []
    for disable in (("fusion",), ("fusion", "inplace")):
        optimized = passes.optimize(chain, fetch=[z], disable=disable)
        exe = Executor(debug_poison=True)
        (got,) = exe.run(optimized, feed={"x": hf.ones(256)}, fetch_list=[z.name])
        np.testing.assert_allclose(got.item(), 256 * np.tanh(np.exp(2.0) + 1.0), rtol=1e-5)
        arenas.append(exe.compile(optimized, {"x": hf.ones(256)}, [z.name]).arena.nbytes)
    assert arenas == [1024, 2048]


@pytest.mark.parametrize("op", ["exp", "sin", "sqrt", "log1p", "sigmoid", "tanh"])
def test_float_ops_of_bool_inputs_compute_in_the_result_dtype_as_eager(op):
    """numpy evaluates exp(bool) in float16; the executor casts like eager does, so the static
    result equals eager's float32 one exactly (2.7182817, not 2.71875)."""
    mask = np.array([True, False, True])
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        a = hf.static.data("a", [3], "bool")
        y = getattr(hf, op)(a)
    (got,) = hf.static.Executor().run(prog, feed={"a": mask}, fetch_list=[y])
    want = getattr(hf, op)(hf.tensor(mask))
    assert got.dtype == want.dtype == hf.float32
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    x = mask.astype(np.float32)
    reference = {"exp": np.exp, "sin": np.sin, "sqrt": np.sqrt, "log1p": np.log1p,
                 "tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v))}[op](x)
    np.testing.assert_allclose(got.numpy(), reference, rtol=1e-6)


def _indexing_program():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [4, 3])
        i = hf.static.data("i", [2], "int64")
        outs = [x[1:, ::2], x[-1], x[None, ..., 0], x[2, 1], x[i], x[..., -2:, None]]
    return prog, outs


def test_getitem_without_index_tensors_is_a_subscript():
    # the index is made once, at plan time: the line subscripts the array itself; a 0-d
    # result (a numpy scalar) becomes an array; an index tensor still goes through the kernel
    prog, outs = _indexing_program()
    x_np = np.arange(12, dtype=np.float32).reshape(4, 3)
    feed = {"x": hf.tensor(x_np), "i": hf.tensor([0, 2])}
    source = Executor().compile(prog, feed, outs).source
    lines = [line.strip() for line in source.splitlines()]
    assert sum(line.startswith("t") and "= x[_index" in line for line in lines) == 4
    assert "_as_array(x[_index" in source  # x[2, 1]: 0-d
    assert source.count("_getitem(") == 1  # x[i]
    results = Executor().run(prog, feed, outs, return_numpy=True)
    expected = [x_np[1:, ::2], x_np[-1], x_np[None, ..., 0], x_np[2, 1], x_np[[0, 2]],
                x_np[..., -2:, None]]
    for got, want in zip(results, expected):
        assert isinstance(got, np.ndarray) and got.shape == np.shape(want)
        np.testing.assert_array_equal(got, want)
    # out of range (a dim known at run time): the subscript raises as the kernel does
    dyn = hf.static.Program()
    with hf.static.program_guard(dyn):
        y = hf.static.data("y", [-1, 3])[3]
    assert Executor().run(dyn, {"y": hf.ones(4, 3)}, [y], return_numpy=True)[0].shape == (3,)
    with pytest.raises(IndexError, match="getitem"):
        Executor().run(dyn, {"y": hf.ones(2, 3)}, [y])


def test_ufunc_results_of_the_output_dtype_need_no_fix():
    # a ufunc called without out= returns a fresh array: no _fix around it when its dtype is
    # the output's; kernels of our own (sigmoid), 0-d results and other dtypes keep it
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [4, 3])
        k = hf.static.data("k", [4, 3], "int32")
        outs = [x * x, x + 1.5, k + 0.5, k * 3, x.sigmoid(), x[0, 0] * 2.0, x.tanh()]
    x_np = np.linspace(-2, 2, 12, dtype=np.float32).reshape(4, 3)
    k_np = np.arange(12, dtype=np.int32).reshape(4, 3)
    feed = {"x": hf.tensor(x_np), "k": hf.tensor(k_np)}
    source = Executor().compile(prog, feed, outs).source
    body = [line.strip() for line in source.splitlines()[2:-1]]
    fixed = [line for line in body if "_fix(" in line]
    assert len(fixed) == 2 and "_sigmoid(" in fixed[0] and "_multiply(t5" in fixed[1], body
    results = Executor().run(prog, feed, outs, return_numpy=True)
    expected = [x_np * x_np, x_np + np.float32(1.5), k_np.astype(np.float32) + np.float32(0.5),
                k_np * np.int32(3), 1 / (1 + np.exp(-x_np.astype(np.float64))),
                np.float32(x_np[0, 0] * 2), np.tanh(x_np)]
    for got, want, var in zip(results, expected, outs):
        assert got.dtype == var.dtype.np and got.shape == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_python_lists_and_numbers_feed_in_the_inputs_dtype():
    """Python data has no dtype of its own: it takes the declared one where nothing is lost
    (ints or floats into a float32 input); a float into an int input stays an error."""
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, 3])
        n = hf.static.data("n", [], "int64")
        y = x * 2.0 + n
    exe = hf.static.Executor()
    for data in ([[1.0, 2.0, 3.0]], [[1, 2, 3]], ((1.0, 2, 3.0),)):
        out = exe.run(prog, feed={"x": data, "n": 2}, fetch_list=[y])[0]
        assert out.dtype is hf.float32
        np.testing.assert_array_equal(out.numpy(), [[4.0, 6.0, 8.0]])
    with pytest.raises(TypeError, match="input 'n' expects dtype"):
        exe.run(prog, feed={"x": [[1.0, 2.0, 3.0]], "n": 2.5}, fetch_list=[y])
    with pytest.raises(TypeError, match="input 'x' expects dtype"):
        exe.run(prog, feed={"x": np.ones((1, 3)), "n": 2}, fetch_list=[y])  # float64 array


def test_get_default_device():
    assert hf.get_default_device() == hf.device("cpu")


def _chain_program(n):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [n])
        y = ((x * 2.0).exp() + x).tanh() * 3.0 + x.sin()
    return prog, y


def test_plans_of_one_executor_share_one_arena_that_grows_once_needed():
    """Two programs in one executor: the second, larger, grows the shared arena; the first
    plan's views move there (no recompilation) and both still compute right, poisoned; hf.memory
    counts the arena once, and not after the plans are gone."""
    import gc
    gc.collect()
    base = hf.memory.allocated()
    exe = Executor(debug_poison=True)
    small, y_small = _chain_program(64)
    large, y_large = _chain_program(4096)
    xs = np.linspace(-1, 1, 64, dtype=np.float32)
    xl = np.linspace(-2, 2, 4096, dtype=np.float32)

    def want(x):
        return np.tanh(np.exp(x * 2) + x) * 3 + np.sin(x)

    (got,) = exe.run(small, feed={"x": xs}, fetch_list=[y_small], return_numpy=True)
    np.testing.assert_allclose(got, want(xs), rtol=1e-5)
    first = exe.compile(small, {"x": xs}, [y_small])
    function, before = first.function, first.arena
    assert hf.memory.allocated() - base == before.nbytes
    (got,) = exe.run(large, feed={"x": xl}, fetch_list=[y_large], return_numpy=True)
    np.testing.assert_allclose(got, want(xl), rtol=1e-5)
    second = exe.compile(large, {"x": xl}, [y_large])
    assert second.arena is first.arena and first.arena is not before  # grown, first rebound
    assert first.arena.nbytes == second.memory.arena_bytes > before.nbytes
    assert first.function is function                     # not compiled again
    assert first.storage is second.storage
    assert hf.memory.allocated() - base == first.arena.nbytes  # counted once, the old one freed
    for _ in range(2):
        (got,) = exe.run(small, feed={"x": xs}, fetch_list=[y_small], return_numpy=True)
        np.testing.assert_allclose(got, want(xs), rtol=1e-5)
        (got,) = exe.run(large, feed={"x": xl}, fetch_list=[y_large], return_numpy=True)
        np.testing.assert_allclose(got, want(xl), rtol=1e-5)
    del first, second, function, before
    exe.clear_cache()
    assert hf.memory.allocated() == base


def test_a_background_compilation_that_does_not_fit_takes_a_private_arena():
    exe = Executor()
    small, y_small = _chain_program(64)
    large, y_large = _chain_program(4096)
    xs, xl = np.ones(64, np.float32), np.ones(4096, np.float32)
    shared = exe.compile(small, {"x": xs}, [y_small])
    pool = exe._pool(np)
    plan = executor_module._compile_program(large, {"x": (4096,)}, [y_large.name], np,
                                            poison=False, copy_into_arena=True, pool=pool,
                                            grow=False)
    assert plan.pool is None and plan.arena is not shared.arena   # private
    assert pool.array is shared.arena                                 # not grown
    assert plan.storage.nbytes == plan.arena.nbytes
    np.testing.assert_allclose(plan([xl])[0], np.tanh(np.exp(2.0) + 1) * 3 + np.sin(1.0),
                               rtol=1e-5)


def test_to_static_forward_and_backward_share_the_arena():
    hf.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 8))
    eager = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 8))
    eager.load_state_dict(model.state_dict())
    static = hf.jit.to_static(model)
    x = hf.randn(16, 32)
    for _ in range(2):
        for m in (eager, static):
            m.zero_grad()
            (m(x) ** 2).mean().backward()
        for (name, p), q in zip(static.named_parameters(), eager.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7,
                                       err_msg=name)
    entry = static.forward._last
    plans = list(entry.executor._cache.values())
    assert {id(p.program) for p in plans} == {id(entry.program), id(entry.backward_program)}
    assert len({id(p.arena) for p in plans}) == 1
    assert plans[0].arena.nbytes == max(p.memory.arena_bytes for p in plans)


def test_feed_takes_the_inputs_variables_as_keys():
    """``feed={x: array}`` with ``x`` what ``static.data`` returned: it reported "missing feed
    for input(s) ['x']"; a Variable of another program, an input fed twice or another key
    type are refused by name."""
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [2, 3])
        w = hf.static.data("w", [3])
        y = x * w + 1.0
    exe = hf.static.Executor()
    xs, ws = np.arange(6, dtype=np.float32).reshape(2, 3), np.float32([1, 2, 3])
    got = exe.run(prog, feed={x: xs, "w": ws}, fetch_list=[y], return_numpy=True)[0]
    np.testing.assert_array_equal(got, xs * ws + 1)
    other = hf.static.Program()
    with hf.static.program_guard(other):
        x2 = hf.static.data("x", [2, 3])
    with pytest.raises(ValueError, match="feed key .* another program"):
        exe.run(prog, feed={x2: xs, w: ws}, fetch_list=[y])
    with pytest.raises(ValueError, match="'x' is fed twice"):
        exe.run(prog, feed={x: xs, "x": xs, w: ws}, fetch_list=[y])
    with pytest.raises(TypeError, match="feed keys are input names or their Variables"):
        exe.run(prog, feed={0: xs, w: ws}, fetch_list=[y])
