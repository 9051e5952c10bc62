"""What needs no second process: errors before init, argument checks, the sampler's shards,
the ZeRO partition, DDP's bucket assignment, and the post-accumulate-grad hook in autograd."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.nn.parallel.reducer import assign_buckets
from hybridfw.optim.zero import partition_flat

dist = hf.distributed


# ---- before init ---------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda: dist.get_rank(),
    lambda: dist.get_world_size(),
    lambda: dist.barrier(),
    lambda: dist.all_reduce(hf.ones(2)),
    lambda: dist.broadcast(hf.ones(2)),
    lambda: nn.parallel.DistributedDataParallel(nn.Linear(2, 2)),
    lambda: hf.data.DistributedSampler(list(range(4))),
    lambda: hf.optim.ZeroRedundancyOptimizer([hf.ones(2, requires_grad=True)], hf.optim.Adam),
])
def test_calls_before_init_name_the_fix(call):
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match=r"not initialized; call "
                                           r"hf.distributed.init_process_group\('mpi'\)"):
        call()
    with pytest.raises(ValueError):  # what PyTorch raises there
        call()


def test_init_rejects_bad_arguments_before_touching_mpi():
    with pytest.raises(ValueError, match="unknown backend 'gloo'"):
        dist.init_process_group("gloo")
    with pytest.raises(ValueError, match="timeout must be > 0"):
        dist.init_process_group("mpi", timeout=0)
    with pytest.raises(TypeError, match="timeout must be seconds"):
        dist.init_process_group("mpi", timeout="soon")
    assert not dist.is_initialized()


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="cupy is installed")
def test_nccl_without_cupy_says_what_is_missing():
    with pytest.raises(RuntimeError, match="backend 'nccl' needs cupy"):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()


# ---- DistributedSampler --------------------------------------------------------------------
def shards(n, replicas, **kw):
    return [hf.data.DistributedSampler(list(range(n)), num_replicas=replicas, rank=r, **kw)
            for r in range(replicas)]


def test_sampler_drop_last_shards_are_disjoint_and_equal():
    parts = [s.indices() for s in shards(23, 4, drop_last=True, seed=1)]
    assert [len(p) for p in parts] == [5] * 4
    joined = np.concatenate(parts)
    assert len(set(joined.tolist())) == 20 and set(joined.tolist()) <= set(range(23))


def test_sampler_pads_to_cover_everything():
    parts = [list(s) for s in shards(10, 4, shuffle=False)]
    assert parts == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]
    assert all(len(s) == 3 for s in shards(10, 4))


def test_sampler_epochs_reshuffle_identically_on_every_rank():
    a, b = shards(50, 2, seed=5)
    first = np.concatenate([a.indices(), b.indices()])
    assert sorted(first.tolist()) == list(range(50))
    for s in (a, b):
        s.set_epoch(1)
    second = np.concatenate([a.indices(), b.indices()])
    assert sorted(second.tolist()) == list(range(50))
    assert not np.array_equal(first, second)
    again = shards(50, 2, seed=5)[0]
    again.set_epoch(1)
    np.testing.assert_array_equal(again.indices(), a.indices())  # a pure function of the epoch


def test_sampler_rejects_bad_rank():
    with pytest.raises(ValueError, match="rank 2 is out of range for num_replicas=2"):
        hf.data.DistributedSampler(list(range(4)), num_replicas=2, rank=2)


# ---- partitions and buckets ----------------------------------------------------------------
def test_zero_partition_cuts_the_flat_parameters_evenly():
    pieces = partition_flat([100, 10, 60, 40], 2)  # 210 elements: 105 each
    assert pieces == [(0, 0, 100, 0), (1, 0, 5, 0), (1, 5, 10, 1), (2, 0, 60, 1),
                      (3, 0, 40, 1)]
    assert partition_flat([7, 3], 1) == [(0, 0, 7, 0), (1, 0, 3, 0)]
    pieces = partition_flat([5, 5, 5], 4)  # chunk 4: one parameter may span three ranks
    assert [(i, a, b, r) for i, a, b, r in pieces if i == 1] == [(1, 0, 3, 1), (1, 3, 5, 2)]
    for world in (2, 3, 8):
        pieces = partition_flat([100, 10, 60, 40, 1], world)
        counts = [sum(b - a for _, a, b, r in pieces if r == k) for k in range(world)]
        assert sum(counts) == 211 and max(counts) - min(counts) <= world


def test_buckets_follow_reverse_order_and_the_cap():
    named = [(f"p{i}", hf.zeros(n)) for i, n in enumerate([4, 4, 8, 2, 2])]  # float32
    assert assign_buckets(named, cap_bytes=48) == [[4, 3, 2], [1, 0]]  # 8 + 8 + 32 bytes
    assert assign_buckets(named, cap_bytes=1) == [[4], [3], [2], [1], [0]]
    mixed = [("a", hf.zeros(2)), ("b", hf.zeros(2, dtype=hf.float64)), ("c", hf.zeros(2))]
    assert assign_buckets(mixed, cap_bytes=2**20) == [[2], [1], [0]]  # one dtype per bucket


# ---- the autograd hook DDP is built on -------------------------------------------------------
def test_post_accumulate_hook_runs_when_the_leaf_is_complete():
    hf.manual_seed(0)
    w1 = hf.randn(3, 3, requires_grad=True)
    w2 = hf.randn(3, 3, requires_grad=True)
    x = hf.randn(2, 3)
    seen = []
    # w2 (the last layer) is complete before w1's gradient has been computed
    w2.register_post_accumulate_grad_hook(lambda p: seen.append(("w2", w1.grad is None,
                                                                 p.grad.numpy().copy())))
    w1.register_post_accumulate_grad_hook(lambda p: seen.append(("w1", w2.grad is None,
                                                                 p.grad.numpy().copy())))
    ((x @ w1).tanh() @ w2).sum().backward()
    assert [s[0] for s in seen] == ["w2", "w1"]
    assert seen[0][1] is True and seen[1][1] is False
    a = x.numpy() @ w1.detach().numpy()
    expected_w2 = np.tanh(a).T @ np.ones((2, 3))
    expected_w1 = x.numpy().T @ ((1 - np.tanh(a) ** 2) * (np.ones((2, 3)) @
                                                          w2.detach().numpy().T))
    np.testing.assert_allclose(seen[0][2], expected_w2, rtol=1e-5)
    np.testing.assert_allclose(seen[1][2], expected_w1, rtol=1e-5)


def test_post_accumulate_hook_sees_every_use_and_accumulation():
    w = hf.ones(2, requires_grad=True)
    calls = []
    handle = w.register_post_accumulate_grad_hook(lambda p: calls.append(p.grad.tolist()))
    (w * 2 + w * 3 + (w * w)).sum().backward()  # three uses, one hook call, complete grad
    assert calls == [[7.0, 7.0]]
    (w * 1).sum().backward()
    assert calls == [[7.0, 7.0], [8.0, 8.0]]
    handle.remove()
    (w * 1).sum().backward()
    assert len(calls) == 2


def test_early_accumulation_keeps_shared_gradients_independent():
    a = hf.ones(3, requires_grad=True)
    b = hf.ones(3, requires_grad=True)
    a.register_post_accumulate_grad_hook(lambda p: None)
    b.register_post_accumulate_grad_hook(lambda p: None)
    (a + b).sum().backward()  # add hands the same gradient to both inputs
    with hf.no_grad():
        a.grad.mul_(5)
    assert b.grad.tolist() == [1.0, 1.0, 1.0]


def test_hook_rejects_non_leaves_and_callback_needs_a_pass():
    from hybridfw.dygraph.autograd import queue_callback
    x = hf.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="only leaf tensors"):
        (x * 2).register_post_accumulate_grad_hook(lambda p: None)
    with pytest.raises(RuntimeError, match="no backward pass is running"):
        queue_callback(lambda: None)


def test_queued_callback_runs_after_every_leaf_is_accumulated():
    from hybridfw.dygraph.autograd import queue_callback
    w1 = hf.ones(2, requires_grad=True)
    w2 = hf.ones(2, requires_grad=True)
    order = []
    w2.register_post_accumulate_grad_hook(
        lambda p: queue_callback(lambda: order.append(("end", w1.grad.tolist()))))
    ((w1 * 3) * w2).sum().backward()
    assert order == [("end", [3.0, 3.0])]


def test_mpi_backend_without_mpi4py_says_what_to_install(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # as if it were not installed
    with pytest.raises(RuntimeError, match=r"backend 'mpi' needs mpi4py and an MPI library "
                                           r"\(pip install mpi4py mpich\)"):
        dist.init_process_group("mpi")
    assert not dist.is_initialized()


def test_zero_takes_pytorchs_keyword_arguments():
    """parameters_as_bucket_view and overlap_with_ddp are PyTorch's arguments of
    ZeroRedundancyOptimizer: they reached the wrapped optimizer ("SGD.__init__() got an
    unexpected keyword argument 'parameters_as_bucket_view'")."""
    from types import SimpleNamespace
    group = SimpleNamespace(rank=0, world_size=1)
    model = nn.Linear(3, 2)
    for flag in (False, True):
        opt = hf.optim.ZeroRedundancyOptimizer(model.parameters(), hf.optim.SGD, group,
                                               parameters_as_bucket_view=flag, lr=0.5,
                                               momentum=0.9, overlap_with_ddp=False)
        assert opt.parameters_as_bucket_view is flag
        assert opt.local_optimizer.defaults["lr"] == 0.5
        assert "parameters_as_bucket_view" not in opt.local_optimizer.param_groups[0]
    with pytest.raises(ValueError, match="overlap_with_ddp=True .* not supported"):
        hf.optim.ZeroRedundancyOptimizer(model.parameters(), hf.optim.SGD, group, lr=0.5,
                                         overlap_with_ddp=True)


@pytest.mark.parametrize("kwargs", [dict(device_ids=[0]), dict(output_device=0),
                                    dict(device_ids=0)])
def test_ddp_device_ids_of_a_cpu_module_are_refused_as_pytorch_does(kwargs):
    """PyTorch's device_ids/output_device name the CUDA device of the module; a CPU module
    takes None only (PyTorch raises a ValueError too). They were unexpected arguments."""
    with pytest.raises(ValueError, match="device_ids and output_device are for a module on "
                                         "one CUDA device"):
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2), **kwargs)
