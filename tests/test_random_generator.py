"""hf.Generator: random functions, in-place fills, nn.init and data shuffling given
``generator=`` draw from it, reproducibly per generator and independently of the global seed."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw import data


def _draws(g):
    """One of each random function that takes a generator, as numpy arrays."""
    return [hf.rand(2, 3, generator=g), hf.randn(4, generator=g),
            hf.randint(0, 100, (5,), generator=g), hf.randint(7, (3,), generator=g),
            hf.randperm(6, generator=g), hf.empty(3).normal_(2.0, 0.5, generator=g),
            hf.empty(3).uniform_(-1.0, 1.0, generator=g), hf.normal(0.0, 1.0, (2,), generator=g),
            hf.normal(hf.zeros(3), hf.ones(3), generator=g),
            hf.bernoulli(hf.full((8,), 0.5), generator=g),
            hf.rand_like(hf.zeros(2), generator=g), hf.randn_like(hf.zeros(2), generator=g)]


def _equal(a, b):
    return len(a) == len(b) and all(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(a, b))


def test_draws_repeat_per_seed_and_ignore_the_global_seed():
    g = hf.Generator().manual_seed(5)
    hf.manual_seed(0)
    first = _draws(g)
    hf.manual_seed(123)  # the global seed has no say
    again = _draws(hf.Generator().manual_seed(5))
    assert _equal(first, again)
    assert not _equal(first, _draws(hf.Generator().manual_seed(6)))
    assert not _equal(first, _draws(g))  # the generator moved on
    # drawing from a generator leaves the global stream where it was
    hf.manual_seed(0)
    plain = hf.rand(4)
    hf.manual_seed(0)
    _draws(g)
    assert np.array_equal(hf.rand(4).numpy(), plain.numpy())


def test_seed_and_state_methods_follow_torch():
    g = hf.Generator()
    assert g.initial_seed() == 67280421310721 and g.device == hf.device("cpu")
    assert g.manual_seed(-1) is g and g.initial_seed() == 2 ** 64 - 1
    state = g.get_state()
    a = hf.rand(5, generator=g)
    assert g.set_state(state) is g
    assert np.array_equal(hf.rand(5, generator=g).numpy(), a.numpy())
    s = g.seed()
    assert isinstance(s, int) and g.initial_seed() == s
    with pytest.raises(TypeError, match="Generator.set_state: expected a state"):
        g.set_state([1, 2])
    with pytest.raises(ValueError, match="Generator.set_state: not a state"):
        g.set_state({"bit_generator": "MT19937"})
    with pytest.raises(TypeError, match="Generator.manual_seed: seed must be an int"):
        g.manual_seed("7")


def test_data_shuffling_and_splits_draw_from_the_generator():
    ds = data.TensorDataset(hf.arange(20))

    def epoch(gen):
        loader = data.DataLoader(ds, batch_size=20, shuffle=True, generator=gen)
        return next(iter(loader))[0].tolist()

    hf.manual_seed(0)
    order = epoch(hf.Generator().manual_seed(9))
    hf.manual_seed(1)
    assert epoch(hf.Generator().manual_seed(9)) == order
    assert sorted(order) == list(range(20)) and order != list(range(20))
    assert epoch(hf.Generator().manual_seed(10)) != order
    splits = [[s.indices for s in data.random_split(ds, [15, 5],
                                                    generator=hf.Generator().manual_seed(2))]
              for _ in range(2)]
    assert splits[0] == splits[1] and sorted(splits[0][0] + splits[0][1]) == list(range(20))
    sampler = data.RandomSampler(ds, generator=hf.Generator().manual_seed(9))
    assert list(sampler) == order  # (the loader's shuffle is this sampler)
    assert len(epoch(np.random.default_rng(0))) == 20  # numpy generators still work
    with pytest.raises(TypeError, match="random_split: generator must be an hf.Generator"):
        data.random_split(ds, [10, 10], generator=7)


def test_init_functions_take_a_generator():
    w = hf.nn.Parameter(hf.empty(4, 6))
    for fn in (hf.nn.init.uniform_, hf.nn.init.normal_, hf.nn.init.trunc_normal_,
               hf.nn.init.xavier_uniform_, hf.nn.init.xavier_normal_,
               hf.nn.init.kaiming_uniform_, hf.nn.init.kaiming_normal_, hf.nn.init.orthogonal_):
        hf.manual_seed(0)
        a = fn(w, generator=hf.Generator().manual_seed(4)).detach().numpy().copy()
        hf.manual_seed(1)
        b = fn(w, generator=hf.Generator().manual_seed(4)).detach().numpy().copy()
        np.testing.assert_array_equal(a, b, err_msg=fn.__name__)


def test_wrong_generators_and_static_programs_are_refused():
    with pytest.raises(TypeError, match="rand: generator must be an hf.Generator"):
        hf.rand(2, generator=np.random.default_rng(0))

    @hf.jit.to_static
    def noisy(x):
        return x + hf.randn(3, generator=hf.Generator())

    with pytest.raises(ValueError, match="randn: generator= works in eager code only"):
        noisy(hf.zeros(3))
