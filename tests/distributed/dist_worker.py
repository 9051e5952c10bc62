"""Run by ``mpiexec -n 2`` from the tests: one launch runs many checks, each rank writes what it
saw to ``<out>/rank<r>.json`` (atomically) and the test process asserts on it.

``python dist_worker.py checks OUT`` runs the checks; ``stall`` / ``fail`` / ``kill`` make rank 1
misbehave so the test can see how rank 0 and the launcher end the job. The model builders and
data are shared with the tests, which compute the single-process references themselves.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time

import numpy as np

import hybridfw as hf
from hybridfw import nn
from hybridfw.nn import functional as F

WORLD = 2
STEPS = 3
GLOBAL_BATCH = 8


def rank_data(rank: int, shape=(3, 4), dtype=np.float32) -> np.ndarray:
    """What rank ``rank`` contributes to the collectives (the test recomputes it)."""
    return np.random.default_rng(100 + rank).standard_normal(shape).astype(dtype)


def mlp(seed: int = 0) -> nn.Module:
    hf.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 3))


def batches(steps: int = STEPS, batch: int = GLOBAL_BATCH):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((steps, batch, 6)).astype(np.float32)
    y = rng.integers(0, 3, (steps, batch)).astype(np.int64)
    return x, y


def shard(a: np.ndarray, rank: int) -> np.ndarray:
    per = a.shape[0] // WORLD
    return a[rank * per:(rank + 1) * per]


def params_of(model: nn.Module) -> list:
    return [p.detach().numpy().tolist() for p in model.parameters()]


def balanced_model(seed: int = 0) -> nn.Module:
    """Four equal bias-free layers: ZeRO gives each of two ranks exactly half the state."""
    hf.manual_seed(seed)
    return nn.Sequential(*[nn.Linear(32, 32, bias=False) for _ in range(4)])


# ---- checks ------------------------------------------------------------------------------
def check_collectives(dist, rank: int) -> dict:
    out = {}
    for op in ("sum", "mean", "max", "min"):
        t = hf.tensor(rank_data(rank))
        buffer = t._data
        dist.all_reduce(t, op=op)
        out[f"all_reduce_{op}"] = t.tolist()
        out[f"all_reduce_{op}_in_place"] = t._data is buffer
    t = hf.tensor(rank_data(rank))
    work = dist.all_reduce(t, async_op=True)
    out["async_type"] = type(work).__name__
    work.wait()
    out["async_sum"] = t.tolist()
    t = hf.tensor(rank_data(rank))
    dist.broadcast(t, src=1)
    out["broadcast_src1"] = t.tolist()
    parts = [hf.empty(3, 4) for _ in range(WORLD)]
    dist.all_gather(parts, hf.tensor(rank_data(rank)))
    out["all_gather"] = [p.tolist() for p in parts]
    gathered = hf.empty(WORLD * 3, 4)
    dist.all_gather_into_tensor(gathered, hf.tensor(rank_data(rank)))
    out["all_gather_into_tensor"] = gathered.tolist()
    inputs = [hf.tensor(rank_data(rank + 10 * i)) for i in range(WORLD)]
    received = hf.empty(3, 4)
    dist.reduce_scatter(received, inputs)
    out["reduce_scatter"] = received.tolist()
    received = hf.empty(2, 4)
    dist.reduce_scatter_tensor(received, hf.tensor(rank_data(rank, (4, 4))), op="max")
    out["reduce_scatter_tensor_max"] = received.tolist()
    out.update(non_contiguous_collectives(dist, rank))
    out.update(aliased_and_bool_collectives(dist, rank))
    dist.barrier()
    out["errors"] = collective_errors(dist, rank)
    return out


def non_contiguous_collectives(dist, rank: int) -> dict:
    """Collectives on transposed and strided views: the results reach the views' bases."""
    out = {}
    base = hf.tensor(rank_data(rank, (3, 4)))
    dist.all_reduce(base.T, op="mean")
    out["nc_all_reduce_T_mean"] = base.tolist()
    base = hf.tensor(rank_data(rank, (3, 4)))
    work = dist.all_reduce(base[:, 1], op="max", async_op=True)
    work.wait()
    out["nc_all_reduce_column_max"] = base.tolist()
    base = hf.tensor(rank_data(rank, (3, 4)))
    dist.broadcast(base[::2], src=1)
    out["nc_broadcast_rows"] = base.tolist()
    bases = [hf.zeros(3, 4) for _ in range(WORLD)]
    dist.all_gather([b[:, ::2] for b in bases], hf.tensor(rank_data(rank, (3, 4)))[:, 1::2])
    out["nc_all_gather"] = [b.tolist() for b in bases]
    base = hf.zeros(2, 3)
    dist.reduce_scatter(base.T, [hf.tensor(rank_data(rank + 10 * i, (3, 2))) for i in
                                 range(WORLD)])
    out["nc_reduce_scatter"] = base.tolist()
    return out


def aliased_and_bool_collectives(dist, rank: int) -> dict:
    """In-place reduce-scatter and all-gather (the output is this rank's block of the input or
    the input is its block of the output), and bool all-reduces."""
    out = {}
    flat = hf.tensor(rank_data(rank, (WORLD * 4,)))
    dist.reduce_scatter_tensor(flat[4 * rank:4 * (rank + 1)], flat)
    out["rs_tensor_in_place"] = flat.tolist()
    inputs = [hf.tensor(rank_data(rank + 10 * i, (3,))) for i in range(WORLD)]
    dist.reduce_scatter(inputs[rank], inputs, op="max")
    out["rs_list_in_place"] = [t.tolist() for t in inputs]
    flat = hf.zeros(WORLD * 3)
    flat[3 * rank:3 * (rank + 1)] = hf.tensor(rank_data(rank, (3,)))
    dist.all_gather_into_tensor(flat, flat[3 * rank:3 * (rank + 1)])
    out["ag_tensor_in_place"] = flat.tolist()
    for op in ("sum", "max", "min"):
        t = hf.tensor(rank_data(rank, (6,)) > 0)
        dist.all_reduce(t, op=op)
        out[f"bool_{op}"] = t.tolist()
    return out


def collective_errors(dist, rank: int) -> dict:
    errors = {}
    cases = {
        "shape": lambda: dist.all_reduce(hf.ones(2 + rank)),
        "dtype": lambda: dist.all_reduce(hf.ones(2, dtype=hf.float64 if rank else hf.float32)),
        "int_mean": lambda: dist.all_reduce(hf.ones(2, dtype=hf.int64), op="mean"),
        "read_only": lambda: dist.all_reduce(hf.ones(1, 4).expand(3, 4)),
        "bad_op": lambda: dist.all_reduce(hf.ones(2), op="prod"),
        "bad_src": lambda: dist.broadcast(hf.ones(2), src=5),
        "rs_shape": lambda: dist.reduce_scatter(hf.empty(2), [hf.ones(3)] * WORLD),
        "rs_dtype": lambda: dist.reduce_scatter(hf.empty(2), [hf.ones(2, dtype=hf.float64)] *
                                                WORLD),
        "gather_length": lambda: dist.all_gather([hf.empty(2)], hf.ones(2)),
    }
    for name, call in cases.items():
        try:
            call()
            errors[name] = None
        except Exception as exc:  # noqa: BLE001 - the test asserts the type and message
            errors[name] = [type(exc).__name__, str(exc)]
    return errors


def train_ddp(rank: int, model: nn.Module, **ddp_kwargs) -> nn.Module:
    ddp = nn.parallel.DistributedDataParallel(model, **ddp_kwargs)
    opt = hf.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    x, y = batches()
    for step in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(ddp(hf.tensor(shard(x[step], rank))),
                               hf.tensor(shard(y[step], rank)))
        loss.backward()
        opt.step()
    return ddp


def check_ddp(rank: int) -> dict:
    out = {}
    model = mlp(seed=rank)  # rank 1 starts different: the broadcast must fix it
    ddp = train_ddp(rank, model, bucket_cap_mb=400 / 2**20)
    out["ddp_params"] = params_of(model)
    out["ddp_buckets"] = ddp.bucket_sizes
    static = hf.jit.to_static(mlp(seed=0))
    train_ddp(rank, static, bucket_cap_mb=400 / 2**20)
    out["ddp_static_params"] = params_of(static)
    pytorch_kwargs = dict(device_ids=None, output_device=None, dim=0, bucket_cap_mb=None,
                          gradient_as_bucket_view=True, static_graph=True)
    out["ddp_pytorch_kwargs_params"] = params_of(train_ddp(rank, mlp(seed=0),
                                                           **pytorch_kwargs).module)
    out["no_sync_params"] = params_of(train_no_sync(rank))
    out["events"] = overlap_events(rank)
    out["unused"] = unused_parameters(rank)
    out["forward_decides"] = forward_decides_sync(rank)
    out["buffer_sync"] = buffer_sync(rank)
    return out


#: The forwards of buffer_sync: (grad mode on, under no_sync, batch offset per rank)
BUFFER_FORWARDS = [(True, False, lambda r: r), (False, False, lambda r: 10 * r),
                   (True, False, lambda r: r), (True, False, lambda r: r),
                   (True, True, lambda r: 5 + r), (True, False, lambda r: r)]


def buffer_batch(offset: float) -> np.ndarray:
    return (np.full((4, 2), offset) + np.arange(4.0)[:, None]).astype(np.float32)


def buffer_sync(rank: int) -> list:
    """BatchNorm running means after each forward of BUFFER_FORWARDS."""
    bn = nn.BatchNorm1d(2)
    ddp = nn.parallel.DistributedDataParallel(nn.Sequential(bn))
    means = []
    for grad, no_sync, offset in BUFFER_FORWARDS:
        with hf.enable_grad() if grad else hf.no_grad():
            if no_sync:
                with ddp.no_sync():
                    ddp(hf.tensor(buffer_batch(offset(rank))))
            else:
                ddp(hf.tensor(buffer_batch(offset(rank))))
        means.append(bn.running_mean.tolist())
    return means


def forward_decides_sync(rank: int) -> dict:
    """d sum(x @ w.T) / dw = x = rank + 1 on each rank: which backward passes average it."""
    hf.manual_seed(0)
    lin = nn.Linear(2, 1, bias=False)
    ddp = nn.parallel.DistributedDataParallel(lin)
    x = hf.ones(1, 2) * (rank + 1)
    out = {}
    with ddp.no_sync():
        y = ddp(x)
    y.sum().backward()  # the forward ran inside no_sync: local
    out["forward_in_no_sync"] = lin.weight.grad.tolist()
    lin.weight.grad = None
    y = ddp(x)
    with ddp.no_sync():
        y.sum().backward()  # the forward ran outside: averaged
    out["backward_in_no_sync"] = lin.weight.grad.tolist()
    lin.weight.grad = None
    if rank == 0:  # the wrapped module called directly on one rank: no communication
        lin(x).sum().backward()
    out["direct"] = None if lin.weight.grad is None else lin.weight.grad.tolist()
    lin.weight.grad = None
    ddp(x).sum().backward()
    out["after"] = lin.weight.grad.tolist()
    lin.weight.grad = None
    ddp(x)  # a forward nobody differentiates, then one under no_sync: local
    with ddp.no_sync():
        ddp(x).sum().backward()
    out["after_unused_forward"] = lin.weight.grad.tolist()
    return out


def train_no_sync(rank: int) -> nn.Module:
    """Each step: two micro-batches, the first under no_sync; loss summed over them."""
    model = mlp(seed=0)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = hf.optim.SGD(ddp.parameters(), lr=0.1)
    x, y = batches(batch=2 * GLOBAL_BATCH)
    for step in range(STEPS):
        opt.zero_grad()
        xs, ys = shard(x[step], rank), shard(y[step], rank)
        half = len(xs) // 2
        with ddp.no_sync():
            F.cross_entropy(ddp(hf.tensor(xs[:half])), hf.tensor(ys[:half])).backward()
        F.cross_entropy(ddp(hf.tensor(xs[half:])), hf.tensor(ys[half:])).backward()
        opt.step()
    return model


def overlap_events(rank: int) -> list:
    """The order of gradient-ready hooks, all-reduce launches and the end of backward."""
    hf.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(64, 64) for _ in range(6)])
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=20000 / 2**20)
    events = []
    backend = ddp.group.backend
    launch = backend.all_reduce

    def logged_all_reduce(arr, op):
        events.append(f"all_reduce {arr.nbytes}")
        return launch(arr, op)

    backend.all_reduce = logged_all_reduce
    try:
        for name, p in model.named_parameters():
            p.register_post_accumulate_grad_hook(lambda _p, name=name: events.append(
                f"grad {name}"))
        ddp(hf.randn(4, 64)).square().sum().backward()
        events.append("backward returned")
    finally:
        del backend.all_reduce
    return events


def unused_parameters(rank: int) -> dict:
    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(4, 4)
            self.head = nn.Linear(4, 2)
            self.spare = nn.Linear(4, 2)
            self.rank1_only = nn.Linear(4, 2)
            self.use_rank1_only = False

        def forward(self, x):
            out = self.head(self.body(x))
            return out + self.rank1_only(x) if self.use_rank1_only else out

    hf.manual_seed(0)
    x = hf.tensor(rank_data(rank, (3, 4)))
    ddp = nn.parallel.DistributedDataParallel(TwoHeads())
    try:
        ddp(x).sum().backward()
        error = None
    except RuntimeError as exc:
        error = str(exc)
    hf.manual_seed(0)
    model = TwoHeads()
    ddp = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    ddp(x).sum().backward()
    result = {"error": error, "head_bias_grad": model.head.bias.grad.tolist(),
              "spare_grad": None if model.spare.weight.grad is None else
              model.spare.weight.grad.tolist()}
    # rank1_only is used on rank 1 only, twice without zero_grad: rank 0 contributes the
    # gradient it holds from the first pass (PyTorch), not zeros
    hf.manual_seed(0)
    model = TwoHeads()
    model.use_rank1_only = rank == 1
    ddp = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    passes = []
    for _ in range(2):
        ddp(x).sum().backward()
        passes.append([model.rank1_only.bias.grad.tolist(), model.head.bias.grad.tolist(),
                       None if model.spare.bias.grad is None else
                       model.spare.bias.grad.tolist()])
    result["rank1_only_passes"] = passes
    return result


def check_zero(rank: int) -> dict:
    model = mlp(seed=0)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = hf.optim.ZeroRedundancyOptimizer(ddp.parameters(), hf.optim.Adam, lr=0.01)
    x, y = batches()
    for step in range(STEPS):
        opt.zero_grad()
        F.cross_entropy(ddp(hf.tensor(shard(x[step], rank))),
                        hf.tensor(shard(y[step], rank))).backward()
        opt.step()
    mlp_state_bytes = opt.state_bytes()
    balanced = balanced_model()
    ddp = nn.parallel.DistributedDataParallel(balanced)
    zero = hf.optim.ZeroRedundancyOptimizer(ddp.parameters(), hf.optim.Adam, lr=0.01)
    ddp(hf.randn(2, 32)).sum().backward()
    before = hf.memory.allocated()
    zero.step()
    grew = hf.memory.allocated() - before
    result = {"zero_params": params_of(model), "zero_state_bytes": zero.state_bytes(),
              "zero_memory_growth": grew,
              "zero_owned": sum(1 for *_, r in zero.pieces if r == rank),
              "zero_mlp_state_bytes": mlp_state_bytes}
    result.update(zero_checkpoints(rank))
    result["zero_added_group_params"] = zero_add_param_group(rank)
    return result


def zero_add_param_group(rank: int) -> list:
    """ZeRO Adam over the first layer; after two steps the last layer joins as a new group."""
    model = mlp(seed=0)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = hf.optim.ZeroRedundancyOptimizer(model[0].parameters(), hf.optim.Adam, lr=0.05)
    x, y = batches(steps=4)
    for step in range(4):
        if step == 2:
            opt.add_param_group({"params": list(model[4].parameters()), "lr": 0.01})
        opt.zero_grad()
        F.cross_entropy(ddp(hf.tensor(shard(x[step], rank))),
                        hf.tensor(shard(y[step], rank))).backward()
        opt.step()
    return params_of(model)


def state_dict_to_json(state_dict: dict) -> dict:
    return {"state": {str(i): {k: (v.tolist() if isinstance(v, hf.Tensor) else v)
                               for k, v in s.items()} for i, s in state_dict["state"].items()},
            "param_groups": [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()}
                             for g in state_dict["param_groups"]]}


def zero_checkpoints(rank: int) -> dict:
    """ZeRO with SGD momentum: the state consolidated on rank 1 after two steps, then a fresh
    ZeRO that loads a plain SGD's whole state dict (the test's reference) and trains on."""
    model = mlp(seed=0)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = hf.optim.ZeroRedundancyOptimizer(ddp.parameters(), hf.optim.SGD, lr=0.1,
                                           momentum=0.9)
    x, y = batches()
    for step in range(2):
        opt.zero_grad()
        F.cross_entropy(ddp(hf.tensor(shard(x[step], rank))),
                        hf.tensor(shard(y[step], rank))).backward()
        opt.step()
    opt.consolidate_state_dict(to=1)
    out = {"zero_consolidated": state_dict_to_json(opt.state_dict()) if rank == 1 else None}
    reference = mlp(seed=0)
    plain = hf.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for step in range(2):
        plain.zero_grad()
        F.cross_entropy(reference(hf.tensor(x[step])), hf.tensor(y[step])).backward()
        plain.step()
    resumed = mlp(seed=5)
    with hf.no_grad():
        for p, q in zip(resumed.parameters(), reference.parameters()):
            p.copy_(q)
    ddp = nn.parallel.DistributedDataParallel(resumed)
    opt = hf.optim.ZeroRedundancyOptimizer(ddp.parameters(), hf.optim.SGD, lr=7.0)
    opt.load_state_dict(plain.state_dict())
    out["zero_loaded_lr"] = opt.param_groups[0]["lr"]
    opt.zero_grad()
    F.cross_entropy(ddp(hf.tensor(shard(x[2], rank))), hf.tensor(shard(y[2], rank))).backward()
    opt.step()
    out["zero_resumed_params"] = params_of(resumed)
    return out


def check_sampler(rank: int) -> dict:
    ds = hf.data.TensorDataset(hf.arange(21))
    sampler = hf.data.DistributedSampler(ds, shuffle=True, seed=3)
    epochs = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        loader = hf.data.DataLoader(ds, batch_size=4, sampler=sampler)
        epochs.append([int(v) for (xb,) in loader for v in xb.tolist()])
    return {"sampler_epochs": epochs}


def write_atomic(path: str, data: dict) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def run_checks(out_dir: str) -> None:
    dist = hf.distributed
    try:
        dist.init_process_group("mpi", timeout=60, world_size=WORLD + 1)
        wrong_size = None
    except ValueError as exc:
        wrong_size = [str(exc), dist.is_initialized()]
    group = dist.init_process_group("mpi", timeout=60, world_size=WORLD,
                                    init_method="env://")
    rank = dist.get_rank()
    result = {"rank": rank, "world_size": dist.get_world_size(), "wrong_size": wrong_size,
              "of_group": [dist.get_rank(group), dist.get_world_size(group)]}
    result.update(check_collectives(dist, rank))
    for check in (check_ddp, check_zero, check_sampler):
        result.update(check(rank))
    write_atomic(os.path.join(out_dir, f"rank{rank}.json"), result)


def run_nccl(out_dir: str) -> None:
    """Collectives and one DDP step on CUDA tensors through NCCL (any number of ranks)."""
    dist = hf.distributed
    dist.init_process_group("nccl", timeout=60)
    rank, world = dist.get_rank(), dist.get_world_size()
    t = hf.tensor(rank_data(rank), device="cuda")
    dist.all_reduce(t, op="mean")
    parts = [hf.empty(3, 4, device="cuda") for _ in range(world)]
    dist.all_gather(parts, hf.tensor(rank_data(rank), device="cuda"))
    b = hf.tensor(rank_data(rank), device="cuda")
    dist.broadcast(b, src=world - 1)
    model = mlp(seed=rank).to("cuda")
    ddp = train_ddp(rank, model)
    result = {"rank": rank, "world_size": world, "mean": t.cpu().tolist(),
              "all_gather": [p.cpu().tolist() for p in parts], "broadcast": b.cpu().tolist(),
              "ddp_params": [p.detach().cpu().numpy().tolist() for p in ddp.parameters()]}
    write_atomic(os.path.join(out_dir, f"rank{rank}.json"), result)


def run_misbehaving(mode: str) -> None:
    dist = hf.distributed
    dist.init_process_group("mpi", timeout=float(os.environ.get("HYBRIDFW_DIST_TIMEOUT", 60)))
    t = hf.ones(4)
    dist.all_reduce(t)  # both ranks are up
    if dist.get_rank() == 1:
        if mode == "stall":
            time.sleep(60)  # never reaches the next collective in time
        elif mode == "fail":
            raise ValueError("rank 1 failed on purpose")
        else:
            os.kill(os.getpid(), signal.SIGKILL)
    dist.all_reduce(t)
    print("rank", dist.get_rank(), "finished", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "checks":
        run_checks(sys.argv[2])
    elif sys.argv[1] == "nccl":
        run_nccl(sys.argv[2])
    else:
        run_misbehaving(sys.argv[1])
