"""In-place reuse: program.inplace lists the outputs that may take over an input's buffer."""
import numpy as np

import hybridfw as hf
from hybridfw.static.memory_plan import plan_arena
from hybridfw.static.passes import inplace


def _build(fn, **feeds):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        args = [hf.static.data(name, shape) for name, shape in feeds.items()]
        results = fn(*args)
    return prog, results if isinstance(results, tuple) else (results,)


def test_a_chain_reuses_each_dying_input(apply_pass, golden, same_results):
    def fn(x):
        a = x.exp()           # x is a feed: never overwritten
        b = a + 1.0           # a dies here
        c = b.relu()
        d = c * c             # both reads are this op's: c still dies here
        e = d.sigmoid() + d   # sigmoid is not d's last reader; the add is sigmoid's result's
        return e > 0.5        # a bool result cannot reuse a float buffer
    prog, (y,) = _build(fn, x=[2, 3])
    out = apply_pass(inplace.run, prog, [y])
    assert out.inplace == {"t1": "t0", "t2": "t1", "t3": "t2", "t5": "t4"}
    golden(out, str(prog))  # the operators are unchanged
    same_results(prog, out, {"x": np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)}, [y])


def test_fetch_targets_keep_their_own_memory(apply_pass):
    def fn(x):
        a = x.exp()
        b = a + 1.0
        c = b.tanh()
        return a, b, c * 2.0
    prog, (a, b, d) = _build(fn, x=[3])
    # a is fetched: b may not overwrite it; d is fetched: it gets memory of its own
    assert apply_pass(inplace.run, prog, [a, d]).inplace == {"t2": "t1"}
    assert apply_pass(inplace.run, prog, [b, d]).inplace == {}
    assert apply_pass(inplace.run, prog, [d]).inplace == {"t1": "t0", "t2": "t1"}


def test_broadcasting_to_a_bigger_shape_is_not_in_place(apply_pass):
    prog, (y,) = _build(lambda v, m: v.exp() + m.exp(), v=[3], m=[2, 3])
    assert apply_pass(inplace.run, prog, [y]).inplace == {}


def test_unknown_dims_only_when_the_other_operand_cannot_broadcast(apply_pass):
    def fn(p, q, r):
        y = p.exp() + q.exp()    # q's rows may outnumber p's: the sum may be bigger than p
        z = p.tanh() * r.exp()   # r (3,) cannot make the product bigger than p.tanh()
        return y.sum(), z.sum()
    prog, fetch = _build(fn, p=[-1, 3], q=[-1, 3], r=[3])
    assert apply_pass(inplace.run, prog, fetch).inplace == {"t5": "t3"}


def test_a_buffer_read_through_a_view_later_is_not_reused(apply_pass):
    def fn(x):
        a = x.exp()
        v = a.reshape(6)      # a view of a's buffer, read after the add
        b = a + 1.0
        return b, v.sum()
    prog, fetch = _build(fn, x=[2, 3])
    assert apply_pass(inplace.run, prog, fetch).inplace == {}


def test_an_operator_reading_a_view_of_its_target_is_not_in_place(apply_pass):
    prog, (y,) = _build(lambda x: (lambda a: a + a.T)(x.exp()), x=[3, 3])
    assert apply_pass(inplace.run, prog, [y]).inplace == {}


def test_branch_results_are_not_overwritten(apply_pass, same_results):
    def fn(x):
        def true_fn():
            t = x * 2.0       # t dies in the exp: reusable
            return t.exp() + 1.0
        def false_fn():
            t = x * 3.0       # t is the branch result: kept
            t.exp()
            return t
        return hf.static.nn.cond(x.sum() > 0, true_fn, false_fn)
    prog, (y,) = _build(fn, x=[3])
    out = apply_pass(inplace.run, prog, [y])
    assert out.inplace == {"t3": "t2", "t4": "t3"}
    for sign in (1, -1):
        same_results(prog, out, {"x": sign * np.ones(3, np.float32)}, [y])


def test_the_arena_planner_honours_the_annotation(apply_pass, same_results):
    def fn(x):
        h = x.exp()
        for _ in range(4):
            h = (h * 0.5 + 1.0).tanh()
        return h.sum()
    prog, (y,) = _build(fn, x=[8, 256])
    out = apply_pass(inplace.run, prog, [y])
    before = plan_arena(prog, {"x": (8, 256)}, [y.name])
    after = plan_arena(out, {"x": (8, 256)}, [y.name])
    assert after.inplace == out.inplace and len(out.inplace) == 12
    assert after.arena_bytes == 8 * 256 * 4 < before.arena_bytes
    same_results(prog, out, {"x": np.ones((8, 256), np.float32)}, [y])
