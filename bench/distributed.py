"""Data-parallel figures on MPI: all-reduce bus bandwidth, DDP step time, overlap, ZeRO-1 memory.

    python bench/distributed.py            # launches mpiexec -n 1 and -n 2 itself
    python bench/distributed.py --model    # the step-time model of docs/distributed.md

- all-reduce of 4 KB .. 64 MB float32 messages through ``hf.distributed.all_reduce`` (and raw
  mpi4py ``Allreduce`` for comparison): median time and bus bandwidth ``2 (p-1)/p * bytes / t``
  (the nccl-tests convention: what each link carries in a ring all-reduce);
- DDP step of the MLP 784-512-512-10 (SGD, global batch 128 split over the ranks): ms/step at
  1 and 2 ranks; on 2 ranks, the fraction of the gradient all-reduce hidden behind backward:
  ``(t_backward_alone + t_allreduce_alone - t_backward_ddp) / t_allreduce_alone``, each time
  the slowest rank's (medians over steps);
- ZeRO-1 (Adam) optimizer-state bytes per rank, and what ``hf.memory`` saw the first step add.

On a shared machine the figures are noisy: report them as measured.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
GLOBAL_BATCH = 128


def median_ms(fn, repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def bench_all_reduce(dist, MPI) -> list:
    import hybridfw as hf
    p = dist.get_world_size()
    comm = MPI.COMM_WORLD
    rows = []
    for nbytes in SIZES:
        t = hf.ones(nbytes // 4)
        arr = t._data
        repeats = 30 if nbytes <= 1 << 20 else 8

        def ours():
            dist.all_reduce(t)

        def raw():
            comm.Allreduce(MPI.IN_PLACE, arr)

        def synced(fn):
            def run():
                comm.Barrier()
                fn()
            return run
        ms = median_ms(synced(ours), repeats)
        raw_ms = median_ms(synced(raw), repeats)
        rows.append({"bytes": nbytes, "ms": ms, "raw_ms": raw_ms,
                     "busbw_GBps": 2 * (p - 1) / p * nbytes / (ms * 1e-3) / 1e9 if p > 1 else 0})
    return rows


def mlp():
    from hybridfw import nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def deep_mlp():
    """Eight equal 512x512 layers: its gradients become ready evenly through backward (in the
    MLP above the first layer holds 60% of the bytes and is ready last)."""
    from hybridfw import nn
    layers = [nn.Linear(784, 512), nn.ReLU()]
    for _ in range(8):
        layers += [nn.Linear(512, 512), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(512, 10))


def bench_ddp(dist, make=None, bucket_cap_mb: float = 25) -> dict:
    import hybridfw as hf
    from hybridfw.distributed.work import Work
    from hybridfw.nn import functional as F
    p, rank = dist.get_world_size(), dist.get_rank()
    per_rank = GLOBAL_BATCH // p
    rng = np.random.default_rng(rank)
    x = hf.tensor(rng.standard_normal((per_rank, 784)).astype(np.float32))
    y = hf.tensor(rng.integers(0, 10, per_rank))
    make = make or mlp
    hf.manual_seed(0)
    plain = make()
    hf.manual_seed(0)
    ddp = hf.nn.parallel.DistributedDataParallel(make(), bucket_cap_mb=bucket_cap_mb)
    comm_barrier = dist.barrier

    def step_fn(model):
        opt = hf.optim.SGD(model.parameters(), lr=0.01)

        def step():
            comm_barrier()
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        return step

    def backward_fn(model):
        def run():
            model.zero_grad()
            loss = F.cross_entropy(model(x), y)
            comm_barrier()
            t0 = time.perf_counter()
            loss.backward()
            return time.perf_counter() - t0
        return run

    def backward_ms(run, repeats=15):
        """Median over steps of the slowest rank's backward (a synced backward cannot end
        before the slowest rank's)."""
        for _ in range(3):
            run()
        slowest = []
        for _ in range(repeats):
            t = hf.tensor([run()], dtype=hf.float64)
            dist.all_reduce(t, op="max")
            slowest.append(t.item())
        return 1e3 * statistics.median(slowest)

    buckets = ddp.reducer.buckets

    def all_buckets():
        comm_barrier()
        works = [Work("all_reduce", ddp.group.backend.all_reduce(b.flat._data, "sum"),
                      ddp.group) for b in buckets]
        for w in works:
            w.wait()

    out = {"ranks": p, "per_rank_batch": per_rank,
           "step_ms_ddp": median_ms(step_fn(ddp), 15, 3),
           "step_ms_plain": median_ms(step_fn(plain), 15, 3),
           "bucket_bytes": [b.nbytes for b in buckets]}
    if p > 1:
        t_bwd = backward_ms(backward_fn(plain))
        t_ddp = backward_ms(backward_fn(ddp))
        t_comm = median_ms(all_buckets, 15, 3)
        hidden = (t_bwd + t_comm - t_ddp) / t_comm
        out.update(backward_ms_alone=t_bwd, backward_ms_ddp=t_ddp, allreduce_ms_alone=t_comm,
                   hidden_fraction=max(0.0, min(1.0, hidden)), hidden_fraction_raw=hidden)
        small = hf.nn.parallel.DistributedDataParallel(make(), bucket_cap_mb=0.25)
        out["backward_ms_ddp_quarter_mb_buckets"] = backward_ms(backward_fn(small))
        out["quarter_mb_bucket_count"] = len(small.reducer.buckets)
    return out


def bench_zero(dist) -> dict:
    import hybridfw as hf
    from hybridfw.nn import functional as F
    hf.manual_seed(0)
    model = hf.nn.parallel.DistributedDataParallel(mlp())
    opt = hf.optim.ZeroRedundancyOptimizer(model.parameters(), hf.optim.Adam, lr=1e-3)
    x = hf.randn(8, 784)
    F.cross_entropy(model(x), hf.randint(0, 10, (8,))).backward()
    before = hf.memory.allocated()
    opt.step()
    return {"param_bytes": sum(p.nbytes for p in model.parameters()),
            "state_bytes_this_rank": opt.state_bytes(),
            "memory_growth_first_step": hf.memory.allocated() - before}


def worker() -> None:
    import hybridfw as hf
    from mpi4py import MPI
    dist = hf.distributed
    dist.init_process_group("mpi", check_consistency=False)
    result = {"all_reduce": bench_all_reduce(dist, MPI), "ddp": bench_ddp(dist),
              "ddp_deep": bench_ddp(dist, deep_mlp, bucket_cap_mb=2), "zero": bench_zero(dist)}
    gathered = MPI.COMM_WORLD.gather(json.dumps(result), root=0)
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps([json.loads(g) for g in gathered]))


def launch(n: int) -> list:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(x for x in (root, env.get("PYTHONPATH")) if x)
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    done = subprocess.run([mpiexec if os.path.exists(mpiexec) else "mpiexec", "-n", str(n),
                           sys.executable, os.path.abspath(__file__), "--worker"],
                          capture_output=True, text=True, env=env, check=True, timeout=900)
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def report(one: list, two: list) -> None:
    print("all-reduce, 2 ranks (hf.distributed.all_reduce vs raw mpi4py Allreduce)")
    print(f"{'bytes':>10} {'ms':>9} {'raw ms':>9} {'busbw GB/s':>11}")
    for row in two[0]["all_reduce"]:
        print(f"{row['bytes']:>10} {row['ms']:>9.3f} {row['raw_ms']:>9.3f} "
              f"{row['busbw_GBps']:>11.2f}")
    d1, d2 = one[0]["ddp"], two[0]["ddp"]
    print(f"\nDDP step, MLP 784-512-512-10, SGD, global batch {GLOBAL_BATCH}")
    print(f"  1 rank : {d1['step_ms_ddp']:.2f} ms/step (plain model {d1['step_ms_plain']:.2f})")
    print(f"  2 ranks: {d2['step_ms_ddp']:.2f} ms/step (plain model, half batch, no sync "
          f"{d2['step_ms_plain']:.2f}); buckets {d2['bucket_bytes']}")
    print(f"  backward alone {d2['backward_ms_alone']:.2f} ms, all-reduce of all buckets alone "
          f"{d2['allreduce_ms_alone']:.2f} ms, backward with DDP {d2['backward_ms_ddp']:.2f} ms"
          f" -> hidden fraction {d2['hidden_fraction']:.2f} "
          f"(raw {d2['hidden_fraction_raw']:.2f})")
    print(f"  with 0.25 MB buckets ({d2['quarter_mb_bucket_count']}): backward with DDP "
          f"{d2['backward_ms_ddp_quarter_mb_buckets']:.2f} ms")
    d1, d2 = one[0]["ddp_deep"], two[0]["ddp_deep"]
    print(f"\nDDP step, deep MLP 784-8x512-10, 2 MB buckets {d2['bucket_bytes']}")
    print(f"  1 rank : {d1['step_ms_ddp']:.2f} ms/step; 2 ranks: {d2['step_ms_ddp']:.2f} ms/step")
    print(f"  backward alone {d2['backward_ms_alone']:.2f} ms, all-reduce alone "
          f"{d2['allreduce_ms_alone']:.2f} ms, backward with DDP {d2['backward_ms_ddp']:.2f} ms"
          f" -> hidden fraction {d2['hidden_fraction']:.2f} "
          f"(raw {d2['hidden_fraction_raw']:.2f})")
    print("\nZeRO-1 (Adam) optimizer state per rank")
    print(f"  parameters {one[0]['zero']['param_bytes']} bytes; 1 rank: state "
          f"{one[0]['zero']['state_bytes_this_rank']} bytes (first step +"
          f"{one[0]['zero']['memory_growth_first_step']} in hf.memory)")
    for r, res in enumerate(two):
        z = res["zero"]
        print(f"  2 ranks, rank {r}: state {z['state_bytes_this_rank']} bytes (first step "
              f"+{z['memory_growth_first_step']} in hf.memory)")


# ---- the scaling model of docs/distributed.md ----------------------------------------------
#: Inputs measured on the 2-core development VM (bench above, shared with other jobs): ring
#: latency per step from the 4 KB all-reduce (0.015 ms over 2 steps), bus bandwidth at 1 MB.
MEASURED = {"alpha_s": 7.5e-6, "bus_bytes_per_s": 2.07e9}
#: The same model on a typical cluster link (100 Gb/s InfiniBand), for comparison.
CLUSTER = {"alpha_s": 10e-6, "bus_bytes_per_s": 12.5e9}
#: name: (gradient bytes, forward s, backward s, optimizer s) per rank and step. MLP: measured
#: at per-rank batch 64 (fwd 5.9, bwd 6.5, SGD 0.6 ms). ResNet-50-sized: 25.6 M parameters,
#: 4.1 GFLOP forward per image, batch 32 per rank, at the 32 GFLOP/s one core of this VM
#: measured for float32 GEMM (backward = 2x forward); optimizer streaming 3x the parameters.
#: The same at GPU speed (an assumption, not measured here: ~800 images/s float32 training, so
#: 13 + 27 ms at batch 32, 1 ms optimizer) shows where overlap and bucket size start to matter.
MODELS = {"MLP 784-512-512-10": (2_678_824, 5.9e-3, 6.5e-3, 0.6e-3),
          "ResNet-50-sized, CPU core": (102_400_000, 4.1e9 * 32 / 32e9, 2 * 4.1e9 * 32 / 32e9,
                                        0.05),
          "ResNet-50-sized, GPU speed": (102_400_000, 13e-3, 27e-3, 1e-3)}


def ring_all_reduce_s(nbytes: float, p: int, alpha: float, bus: float) -> float:
    """2(p-1) latency steps plus 2(p-1)/p of the message over each link."""
    return 0.0 if p == 1 else 2 * (p - 1) * alpha + 2 * (p - 1) / p * nbytes / bus


def modeled_step_s(grad_bytes, fwd, bwd, opt, p, link, cap=25 << 20, first=1 << 20,
                   overlap=True):
    """Step time with bucketed all-reduce: buckets become ready as backward sweeps the
    gradients (uniformly in bytes); one bucket on the wire at a time; exposed communication
    is what outlasts backward (or all of it without overlap)."""
    sizes, left = [], grad_bytes
    while left > 0:
        size = min(left, first if not sizes else cap)
        sizes.append(size)
        left -= size
    end, ready = 0.0, 0.0
    for size in sizes:
        ready += bwd * size / grad_bytes
        start = max(ready if overlap else bwd, end)
        end = start + ring_all_reduce_s(size, p, link["alpha_s"], link["bus_bytes_per_s"])
    exposed = max(0.0, end - bwd)
    return fwd + bwd + exposed + opt, exposed


def print_model() -> None:
    ranks = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    for name, (nbytes, fwd, bwd, opt) in MODELS.items():
        links = (("measured VM", MEASURED), ("100 Gb/s", CLUSTER))
        if "CPU core" in name:
            links = links[:1]  # compute dwarfs any link
        for link_name, link in links:
            print(f"\n{name}, {nbytes / 2**20:.1f} MiB of gradients, {link_name} link "
                  f"(alpha {link['alpha_s'] * 1e6:.1f} us, "
                  f"{link['bus_bytes_per_s'] / 1e9:.2f} GB/s)")
            print(f"{'ranks':>6} {'step ms':>9} {'exposed ms':>11} {'no overlap':>11} "
                  f"{'1 MB buckets':>13} {'efficiency':>11}")
            base = fwd + bwd + opt
            for p in ranks:
                step, exposed = modeled_step_s(nbytes, fwd, bwd, opt, p, link)
                flat, _ = modeled_step_s(nbytes, fwd, bwd, opt, p, link, overlap=False)
                small, _ = modeled_step_s(nbytes, fwd, bwd, opt, p, link, cap=1 << 20)
                print(f"{p:>6} {1e3 * step:>9.1f} {1e3 * exposed:>11.1f} {1e3 * flat:>11.1f} "
                      f"{1e3 * small:>13.1f} {base / step:>11.2f}")


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker()
    elif "--model" in sys.argv:
        print_model()
    else:
        report(launch(1), launch(2))
