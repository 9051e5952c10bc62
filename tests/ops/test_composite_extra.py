"""PyTorch names built as composites (``hybridfw.ops.composite_extra``): swapaxes movedim unbind
flip roll repeat tile tril triu masked_select nansum fmax fmin broadcast_tensors
broadcast_shapes, and ``hf.as_tensor``.

Every case checks an independent numpy computation; where torch is importable it is a second
oracle.
"""
import numpy as np
import pytest

import hybridfw as hf

X = np.arange(6.0).reshape(2, 3)
NAN = float("nan")

# (call on a namespace ``lib`` with x = X; numpy expectation)
CALLS = [
    ("lib.roll(x, 1)", np.roll(X, 1)),
    ("lib.roll(x, -1, 1)", np.roll(X, -1, 1)),
    ("x.roll((1, 1), (0, 1))", np.roll(X, (1, 1), (0, 1))),
    ("x.repeat(2, 1, 2)", np.tile(X, (2, 1, 2))),
    ("x.tile((2,))", np.tile(X, 2)),
    ("lib.tile(lib.arange(3.0), (2, 2))", np.tile(np.arange(3.0), (2, 2))),
    ("lib.tril(x, -1)", np.tril(X, -1)),
    ("lib.triu(x, 1)", np.triu(X, 1)),
    ("x.tril()", np.tril(X)),
    ("x.triu(-1)", np.triu(X, -1)),
    ("lib.flip(x, (0, 1))", X[::-1, ::-1]),
    ("x.flip(1)", X[:, ::-1]),
    ("lib.movedim(x.reshape(1, 2, 3), (0, 1), (2, 0))", np.moveaxis(X.reshape(1, 2, 3),
                                                                    (0, 1), (2, 0))),
    ("x.movedim(0, -1)", X.T),
    ("lib.swapaxes(x, 0, 1)", X.T),
    ("lib.fmax(lib.tensor([NAN, 1.0, NAN]), lib.tensor([2.0, NAN, NAN]))",
     np.fmax([NAN, 1.0, NAN], [2.0, NAN, NAN])),
    ("lib.fmin(lib.tensor([NAN, 1.0]), lib.tensor([2.0, 0.0]))", np.fmin([NAN, 1.0], [2.0, 0.0])),
    ("lib.nansum(lib.tensor([[1.0, NAN], [2.0, 4.0]]), dim=1)", [1.0, 6.0]),
    ("lib.nansum(lib.tensor([1.0, NAN, 2.0]))", 3.0),
    ("lib.masked_select(x, x > 2)", X[X > 2]),
    ("x.masked_select(lib.tensor([True, False, True]))", X[:, [0, 2]].ravel()),
    ("lib.stack(lib.unbind(x, 1))", X.T),
    ("lib.stack(x.unbind())", X),
    ("lib.stack(lib.broadcast_tensors(lib.ones(2, 1), lib.arange(3.0)))",
     np.stack(np.broadcast_arrays(np.ones((2, 1)), np.arange(3.0)))),
]


def _run(lib, call):
    return eval(call, {"lib": lib, "x": lib.tensor(X), "NAN": NAN})


@pytest.mark.parametrize("call, expected", CALLS)
def test_values(call, expected):
    np.testing.assert_array_equal(_run(hf, call).numpy(), expected)


@pytest.mark.parametrize("call, expected", CALLS)
def test_matches_torch(call, expected):
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(_run(torch, call).numpy(), expected)


def test_broadcast_shapes_and_as_tensor():
    assert hf.broadcast_shapes((2, 1), (3,), 1) == (2, 3)
    with pytest.raises(ValueError, match="broadcast_shapes"):
        hf.broadcast_shapes((2,), (3,))
    x = hf.tensor(X)
    assert hf.as_tensor(x) is x
    assert hf.as_tensor(x, dtype=hf.float32).dtype is hf.float32
    assert hf.as_tensor([1, 2]).dtype is hf.int64
    assert hf.as_tensor(np.float64(1.5)).dtype is hf.float64


def test_errors():
    x = hf.tensor(X)
    with pytest.raises(ValueError, match="tril"):
        hf.tril(hf.ones(3))
    with pytest.raises(ValueError, match="repeat"):
        x.repeat(2)
    with pytest.raises(TypeError, match="masked_select"):
        hf.masked_select(x, x)
    with pytest.raises(ValueError, match="movedim"):
        hf.movedim(x, (0, 1), 0)


def test_gradients_and_static_program():
    x = hf.tensor(X, requires_grad=True)
    (hf.roll(x, 1, 1) * hf.tensor(X)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.roll(X, -1, 1))
    y = hf.tensor(X, requires_grad=True)
    (y.repeat(2, 2).sum() + y.flip(0).tril().sum()).backward()
    np.testing.assert_array_equal(y.grad.numpy(), 4 + np.tril(np.ones((2, 3)))[::-1])

    @hf.jit.to_static
    def f(x):
        return hf.triu(x.repeat(1, 2)) + hf.roll(x, 1).tile((1, 2))

    np.testing.assert_array_equal(f(hf.tensor(X)).numpy(),
                                  np.triu(np.tile(X, (1, 2))) + np.tile(np.roll(X, 1), (1, 2)))


def test_repeat_with_one_dim_known_only_at_run_time():
    # an InputSpec None batch: the reshapes infer it, repeated or not (was refused: "the shape
    # (-1, 3) is only known when the program runs"); two such dims are still refused
    def reps(x):
        return x.repeat(1, 2), x.repeat(3, 1), x.repeat(2, 1, 2)

    f = hf.jit.to_static(reps, input_spec=[hf.jit.InputSpec([None, 3])])
    for n in (1, 4):
        a = np.arange(3.0 * n, dtype=np.float32).reshape(n, 3)
        x = hf.tensor(a, requires_grad=True)
        got = f(x)
        for g, want in zip(got, (np.tile(a, (1, 2)), np.tile(a, (3, 1)), np.tile(a, (2, 1, 2)))):
            np.testing.assert_array_equal(g.detach().numpy(), want)
        sum(g.sum() for g in got).backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.full((n, 3), 2.0 + 3.0 + 4.0))
    with pytest.raises(ValueError, match=r"repeat: the shape \(-1, -1\) is only known"):
        hf.jit.to_static(reps, input_spec=[hf.jit.InputSpec([None, None])])(hf.ones(2, 3))


def test_flip_of_a_known_dim_beside_a_run_time_one():
    # an InputSpec None batch: flipping dim 1 (size 3) needs only that size (was refused:
    # "the shape (-1, 3) is only known when the program runs"); flipping the batch still is
    f = hf.jit.to_static(lambda x: x.flip(1), input_spec=[hf.jit.InputSpec([None, 3])])
    for n in (1, 4):
        a = np.arange(3.0 * n, dtype=np.float32).reshape(n, 3)
        np.testing.assert_array_equal(f(hf.tensor(a)).numpy(), a[:, ::-1])
    g = hf.jit.to_static(lambda x: x.flip(0), input_spec=[hf.jit.InputSpec([None, 3])])
    with pytest.raises(ValueError, match=r"flip: dim 0 of the shape \(-1, 3\) is only known"):
        g(hf.ones(2, 3))


def _causal_scores(x):
    t = x.shape[-2]
    mask = hf.ones(t, x.shape[-1]).tril(diagonal=x.shape[-1] - t).bool()
    return x.masked_fill(~mask, 0.0) + x.triu(1) * 10


def test_tril_triu_with_sizes_known_when_the_program_runs():
    """A causal mask over an InputSpec None sequence (also a diagonal from the sizes)."""
    static = hf.jit.to_static(_causal_scores, input_spec=[hf.jit.InputSpec([2, None, None], "float64")])
    for t, s in ((3, 3), (2, 4), (4, 2)):
        a = np.arange(2.0 * t * s).reshape(2, t, s) + 1
        x = hf.tensor(a, dtype=hf.float64, requires_grad=True)
        out = static(x)
        k = s - t
        expected = np.where(np.tril(np.ones((t, s)), k) > 0, a, 0) + np.triu(a, 1) * 10
        np.testing.assert_allclose(out.detach().numpy(), expected)
        out.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.tril(np.ones((t, s)), k) +
                                   np.triu(np.ones((2, t, s)), 1) * 10)
    assert static.cache_info().misses == 1
