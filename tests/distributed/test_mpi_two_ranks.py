"""Two-rank tests under ``mpiexec -n 2``: one launch runs every check (dist_worker.py), the
assertions here compare what each rank saw with numpy and with single-process training."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.nn import functional as F

import dist_worker as W
from mpi_launch import launch, requires_mpi

pytestmark = requires_mpi


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("mpi")
    done, _ = launch(["checks", str(out)])
    assert done.returncode == 0, f"mpiexec failed:\n{done.stdout}\n{done.stderr}"
    results = [json.load(open(os.path.join(out, f"rank{r}.json"))) for r in range(W.WORLD)]
    assert [r["rank"] for r in results] == [0, 1]
    assert all(r["world_size"] == 2 for r in results)
    return results


def test_init_takes_pytorchs_world_size_and_rank_arguments(ranks):
    for rank, r in enumerate(ranks):
        message, initialized = r["wrong_size"]
        assert "world_size=3 but the launcher started this process as rank" in message
        assert f"rank {rank} of 2" in message
        assert initialized is False
        assert r["of_group"] == [rank, 2]


def contributions(shape=(3, 4)) -> np.ndarray:
    return np.stack([W.rank_data(r, shape) for r in range(W.WORLD)])


# ---- collectives ---------------------------------------------------------------------------
@pytest.mark.parametrize("op,reduce", [("sum", np.sum), ("mean", np.mean), ("max", np.max),
                                       ("min", np.min)])
def test_all_reduce_matches_numpy_in_place(ranks, op, reduce):
    expected = reduce(contributions(), axis=0)
    for r in ranks:
        np.testing.assert_allclose(r[f"all_reduce_{op}"], expected, rtol=1e-6, atol=1e-6)
        assert r[f"all_reduce_{op}_in_place"] is True


def test_async_broadcast_gather_scatter_match_numpy(ranks):
    data = contributions()
    for rank, r in enumerate(ranks):
        assert r["async_type"] == "Work"
        np.testing.assert_allclose(r["async_sum"], data.sum(0), rtol=1e-6)
        np.testing.assert_array_equal(r["broadcast_src1"], data[1])
        np.testing.assert_array_equal(r["all_gather"], data)
        np.testing.assert_array_equal(r["all_gather_into_tensor"], data.reshape(6, 4))
        # rank k receives the sum over ranks j of their input_list[k] = rank_data(j + 10 k)
        expected = sum(W.rank_data(j + 10 * rank) for j in range(W.WORLD))
        np.testing.assert_allclose(r["reduce_scatter"], expected, rtol=1e-6)
        blocks = contributions((4, 4)).max(0).reshape(W.WORLD, 2, 4)
        np.testing.assert_array_equal(r["reduce_scatter_tensor_max"], blocks[rank])


def test_collectives_on_non_contiguous_views_write_through_to_their_bases(ranks):
    data = contributions()
    for rank, r in enumerate(ranks):
        np.testing.assert_allclose(r["nc_all_reduce_T_mean"], data.mean(0), rtol=1e-6)
        expected = data[rank].copy()
        expected[:, 1] = data[:, :, 1].max(0)  # only the column changes
        np.testing.assert_array_equal(r["nc_all_reduce_column_max"], expected)
        expected = data[rank].copy()
        expected[::2] = data[1][::2]
        np.testing.assert_array_equal(r["nc_broadcast_rows"], expected)
        for src, got in enumerate(r["nc_all_gather"]):
            expected = np.zeros((3, 4), np.float32)
            expected[:, ::2] = data[src][:, 1::2]
            np.testing.assert_array_equal(got, expected)
        # rank k's (2, 3) base receives the transpose of the sum of everyone's input_list[k]
        total = sum(W.rank_data(j + 10 * rank, (3, 2)) for j in range(W.WORLD))
        np.testing.assert_allclose(r["nc_reduce_scatter"], total.T, rtol=1e-6)


def test_in_place_reduce_scatter_and_all_gather_and_bool_all_reduce(ranks):
    flats = np.stack([W.rank_data(r, (W.WORLD * 4,)) for r in range(W.WORLD)])
    bools = np.stack([W.rank_data(r, (6,)) > 0 for r in range(W.WORLD)])
    for rank, r in enumerate(ranks):
        expected = flats[rank].copy()
        expected[4 * rank:4 * (rank + 1)] = flats[:, 4 * rank:4 * (rank + 1)].sum(0)
        np.testing.assert_allclose(r["rs_tensor_in_place"], expected, rtol=1e-6)
        for i, got in enumerate(r["rs_list_in_place"]):
            want = np.max([W.rank_data(j + 10 * rank, (3,)) for j in range(W.WORLD)], 0) \
                if i == rank else W.rank_data(rank + 10 * i, (3,))
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(r["ag_tensor_in_place"], np.concatenate(
            [W.rank_data(j, (3,)) for j in range(W.WORLD)]))
        np.testing.assert_array_equal(r["bool_sum"], bools.any(0))  # True + True is True
        np.testing.assert_array_equal(r["bool_max"], bools.any(0))
        np.testing.assert_array_equal(r["bool_min"], bools.all(0))


def test_collective_errors_are_clear_on_every_rank(ranks):
    for r in ranks:
        e = r["errors"]
        assert e["shape"][0] == "ValueError"
        assert "rank 0: all_reduce of float32 (2,)" in e["shape"][1]
        assert "rank 1: all_reduce of float32 (3,)" in e["shape"][1]
        assert e["dtype"][0] == "TypeError" and "float64 (2,)" in e["dtype"][1]
        assert e["int_mean"][0] == "TypeError" and "int64" in e["int_mean"][1]
        assert e["read_only"][0] == "ValueError" and "read-only" in e["read_only"][1]
        assert e["bad_op"][0] == "ValueError" and "'prod'" in e["bad_op"][1]
        assert e["bad_src"][0] == "ValueError" and "got 5" in e["bad_src"][1]
        assert e["rs_shape"] == ["ValueError", "hf.distributed.reduce_scatter: input_list[0] "
                                 "has shape (3,), the output (2,); they must match"]
        assert e["rs_dtype"][0] == "TypeError"
        assert "input_list[0] has dtype hybridfw.float64, the output hybridfw.float32" in \
            e["rs_dtype"][1]
        assert e["gather_length"] == ["ValueError", "hf.distributed.all_gather: tensor_list "
                                      "must be a list of world_size=2 tensors, got 1"]


# ---- DistributedDataParallel ---------------------------------------------------------------
def reference_sgd(model) -> list:
    """Single-process training on the concatenated (global) batches."""
    opt = hf.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = W.batches()
    for step in range(W.STEPS):
        opt.zero_grad()
        F.cross_entropy(model(hf.tensor(x[step])), hf.tensor(y[step])).backward()
        opt.step()
    return [p.detach().numpy() for p in model.parameters()]


def assert_params_close(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_ddp_equals_single_process_training_on_the_whole_batch(ranks):
    expected = reference_sgd(W.mlp(seed=0))
    assert len(ranks[0]["ddp_buckets"]) > 1  # several buckets were exercised
    for r in ranks:
        assert_params_close(r["ddp_params"], expected)
    assert ranks[0]["ddp_params"] == ranks[1]["ddp_params"]  # replicas bit-identical


def test_ddp_over_a_to_static_module(ranks):
    expected = reference_sgd(W.mlp(seed=0))
    for r in ranks:
        assert_params_close(r["ddp_static_params"], expected)


def test_ddp_takes_pytorchs_keyword_arguments(ranks):
    """device_ids=None, output_device, dim, bucket_cap_mb=None, gradient_as_bucket_view,
    static_graph: a PyTorch script's DDP call (they were unexpected keyword arguments)."""
    expected = reference_sgd(W.mlp(seed=0))
    for r in ranks:
        assert_params_close(r["ddp_pytorch_kwargs_params"], expected)


def test_no_sync_accumulates_then_averages(ranks):
    model = W.mlp(seed=0)
    opt = hf.optim.SGD(model.parameters(), lr=0.1)
    x, y = W.batches(batch=2 * W.GLOBAL_BATCH)
    for step in range(W.STEPS):
        opt.zero_grad()
        # every rank's two micro-batch losses summed, averaged over the ranks
        micro = np.split(np.arange(2 * W.GLOBAL_BATCH), 2 * W.WORLD)
        loss = sum(F.cross_entropy(model(hf.tensor(x[step][m])), hf.tensor(y[step][m]))
                   for m in micro) / W.WORLD
        loss.backward()
        opt.step()
    expected = [p.detach().numpy() for p in model.parameters()]
    for r in ranks:
        assert_params_close(r["no_sync_params"], expected)


def test_the_forward_decides_whether_backward_synchronizes(ranks):
    mean = sum(r + 1.0 for r in range(W.WORLD)) / W.WORLD  # each rank's gradient is rank + 1
    for rank, r in enumerate(ranks):
        f = r["forward_decides"]
        assert f["forward_in_no_sync"] == [[rank + 1.0] * 2]
        assert f["backward_in_no_sync"] == [[mean] * 2]
        assert f["direct"] == ([[1.0, 1.0]] if rank == 0 else None)
        assert f["after"] == [[mean] * 2]
        assert f["after_unused_forward"] == [[rank + 1.0] * 2]


def test_buffers_are_broadcast_before_forwards_as_pytorch_does(ranks):
    # PyTorch broadcasts rank 0's buffers before the first forward and after each forward
    # that synchronizes its backward (grad mode on, outside no_sync), then each rank updates
    # its running mean with its own batch: m <- 0.9 m + 0.1 * batch mean
    means = np.zeros((W.WORLD, 2))
    broadcast = True
    for step, (grad, no_sync, offset) in enumerate(W.BUFFER_FORWARDS):
        if broadcast:
            means[:] = means[0]
        for r in range(W.WORLD):
            means[r] = 0.9 * means[r] + 0.1 * W.buffer_batch(offset(r)).mean(0)
        broadcast = grad and not no_sync
        for r in range(W.WORLD):
            np.testing.assert_allclose(ranks[r]["buffer_sync"][step], means[r], rtol=1e-5)


def test_bucket_all_reduce_starts_before_backward_ends(ranks):
    for r in ranks:
        events = r["events"]
        first_launch = next(i for i, e in enumerate(events) if e.startswith("all_reduce"))
        last_grad = max(i for i, e in enumerate(events) if e.startswith("grad"))
        # the first bucket (last layer) is on the wire while earlier layers' gradients are
        # still being computed
        assert first_launch < events.index("grad 0.weight")
        assert first_launch < last_grad
        assert sum(e.startswith("all_reduce") for e in events) == 6
        assert events[-1] == "backward returned"


def test_unused_parameters_are_named_or_tolerated(ranks):
    for r in ranks:
        u = r["unused"]
        assert "spare.bias" in u["error"] and "spare.weight" in u["error"]
        assert "find_unused_parameters=True" in u["error"]
        assert "head" not in u["error"].split("pass")[0]
        assert u["head_bias_grad"] == [3.0, 3.0]  # d sum / d bias = 3 rows on each rank
        assert u["spare_grad"] is None  # no rank used it: .grad untouched, as PyTorch
        # d sum / d rank1_only.bias = 3 rows on rank 1, nothing on rank 0: mean 1.5; the
        # second pass (no zero_grad) adds 3 on rank 1 to the 1.5 both hold: (1.5 + 4.5) / 2
        first, second = u["rank1_only_passes"]
        assert first == [[1.5, 1.5], [3.0, 3.0], None]
        assert second == [[3.0, 3.0], [6.0, 6.0], None]


# ---- ZeRO-1 --------------------------------------------------------------------------------
def test_zero1_equals_plain_adam(ranks):
    model = W.mlp(seed=0)
    opt = hf.optim.Adam(model.parameters(), lr=0.01)
    x, y = W.batches()
    for step in range(W.STEPS):
        opt.zero_grad()
        F.cross_entropy(model(hf.tensor(x[step])), hf.tensor(y[step])).backward()
        opt.step()
    expected = [p.detach().numpy() for p in model.parameters()]
    for r in ranks:
        assert_params_close(r["zero_params"], expected)
    assert ranks[0]["zero_params"] == ranks[1]["zero_params"]


def test_zero1_shards_elements_evenly_whatever_the_layer_sizes(ranks):
    sizes = [p.numel() for p in W.mlp().parameters()]  # 96, 16, 256, 16, 48, 3: 435
    chunk = -(-sum(sizes) // W.WORLD)
    owned = [chunk, sum(sizes) - chunk]  # elements per rank, parameters cut where needed
    for rank, r in enumerate(ranks):
        assert r["zero_mlp_state_bytes"] == 2 * 4 * owned[rank]  # Adam: two float32 moments


def test_zero1_state_per_rank_is_half_of_adams(ranks):
    model = W.balanced_model()
    opt = hf.optim.Adam(model.parameters(), lr=0.01)
    model(hf.randn(2, 32)).sum().backward()
    before = hf.memory.allocated()
    opt.step()
    full_growth = hf.memory.allocated() - before
    full_state = sum(v.nbytes for s in opt.state.values() for v in s.values()
                     if isinstance(v, hf.Tensor))
    assert full_state == 2 * sum(p.nbytes for p in model.parameters())
    for r in ranks:
        assert r["zero_owned"] == 2
        assert r["zero_state_bytes"] == full_state // W.WORLD
        # hf.memory sees the same saving: the first step grows by half the state less
        assert r["zero_memory_growth"] == full_growth - full_state // W.WORLD


def test_zero1_consolidated_state_dict_is_the_plain_optimizers(ranks):
    model = W.mlp(seed=0)
    opt = hf.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = W.batches()
    for step in range(2):
        opt.zero_grad()
        F.cross_entropy(model(hf.tensor(x[step])), hf.tensor(y[step])).backward()
        opt.step()
    expected = opt.state_dict()
    assert ranks[0]["zero_consolidated"] is None
    got = ranks[1]["zero_consolidated"]
    assert len(got["param_groups"]) == 1
    assert got["param_groups"][0] == {k: (list(v) if isinstance(v, tuple) else v)
                                      for k, v in expected["param_groups"][0].items()}
    assert sorted(got["state"]) == sorted(str(i) for i in expected["state"])
    for i, s in expected["state"].items():
        assert set(got["state"][str(i)]) == {"momentum_buffer"}
        np.testing.assert_allclose(got["state"][str(i)]["momentum_buffer"],
                                   s["momentum_buffer"].numpy(), rtol=1e-5, atol=1e-7)
    # a fresh ZeRO (lr=7) that loads the plain state dict resumes as plain SGD does
    opt.zero_grad()
    F.cross_entropy(model(hf.tensor(x[2])), hf.tensor(y[2])).backward()
    opt.step()
    for r in ranks:
        assert r["zero_loaded_lr"] == 0.1
        assert_params_close(r["zero_resumed_params"], [p.detach().numpy()
                                                       for p in model.parameters()])


def test_zero1_add_param_group_after_construction_equals_plain_adam(ranks):
    model = W.mlp(seed=0)
    opt = hf.optim.Adam(model[0].parameters(), lr=0.05)
    x, y = W.batches(steps=4)
    for step in range(4):
        if step == 2:
            opt.add_param_group({"params": list(model[4].parameters()), "lr": 0.01})
        opt.zero_grad()
        F.cross_entropy(model(hf.tensor(x[step])), hf.tensor(y[step])).backward()
        opt.step()
    for r in ranks:
        assert_params_close(r["zero_added_group_params"], [p.detach().numpy()
                                                           for p in model.parameters()])


# ---- DistributedSampler --------------------------------------------------------------------
def test_distributed_sampler_shards_cover_the_data(ranks):
    for epoch in range(2):
        shards = [r["sampler_epochs"][epoch] for r in ranks]
        assert [len(s) for s in shards] == [11, 11]  # ceil(21 / 2), padded
        assert set(shards[0]) | set(shards[1]) == set(range(21))
        assert len(set(shards[0]) & set(shards[1])) == 1  # only the one padding index
    assert ranks[0]["sampler_epochs"][0] != ranks[0]["sampler_epochs"][1]  # set_epoch
    ds = hf.data.TensorDataset(hf.arange(21))
    for rank, r in enumerate(ranks):
        local = hf.data.DistributedSampler(ds, num_replicas=2, rank=rank, seed=3)
        assert list(local) == r["sampler_epochs"][0]


# ---- failures end the job --------------------------------------------------------------------
def test_a_stalled_rank_times_out_with_a_clear_error():
    done, seconds = launch(["stall"], timeout=45, env={"HYBRIDFW_DIST_TIMEOUT": "1.5"})
    assert done.returncode != 0
    assert "DistributedTimeoutError" in done.stderr
    assert "hf.distributed.all_reduce: rank 0 of 2 waited 1.5 s" in done.stderr
    assert "aborting all 2 ranks" in done.stderr
    assert seconds < 40  # rank 1 sleeps 60 s: the abort ended it


def test_a_failing_rank_aborts_the_others():
    done, seconds = launch(["fail"], timeout=45, env={"HYBRIDFW_DIST_TIMEOUT": "60"})
    assert done.returncode != 0
    assert "rank 1 failed on purpose" in done.stderr
    assert "hf.distributed: rank 1 failed with an uncaught ValueError" in done.stderr
    assert "finished" not in done.stdout  # rank 0 never completed its all_reduce
    assert seconds < 40  # far below the 60 s timeout rank 0 would otherwise wait


def test_a_killed_rank_ends_the_job():
    done, seconds = launch(["kill"], timeout=45, env={"HYBRIDFW_DIST_TIMEOUT": "60"})
    assert done.returncode != 0
    assert "signal 9" in done.stdout + done.stderr or "Killed" in done.stdout + done.stderr
    assert "finished" not in done.stdout
    assert seconds < 40
