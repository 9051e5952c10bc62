"""The NCCL backend on CUDA tensors: one rank per GPU (skipped without cupy and a device)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.nn import functional as F

import dist_worker as W
from mpi_launch import launch, requires_mpi

pytestmark = [requires_mpi, pytest.mark.gpu]


def gpu_count() -> int:
    try:
        import cupy
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - no cupy, no driver, no device: all mean "skip"
        return 0


@pytest.mark.skipif(gpu_count() == 0, reason="needs cupy with NCCL and a CUDA device")
def test_nccl_collectives_and_ddp_match_numpy_and_single_process(tmp_path):
    ranks = min(2, gpu_count())
    done, _ = launch(["nccl", str(tmp_path)], n=ranks, timeout=300)
    assert done.returncode == 0, done.stderr
    results = [json.load(open(os.path.join(tmp_path, f"rank{r}.json"))) for r in range(ranks)]
    data = np.stack([W.rank_data(r) for r in range(ranks)])
    model = W.mlp(seed=0)
    opt = hf.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = W.batches()
    for step in range(W.STEPS):  # DDP shards each batch over WORLD=2 halves
        opt.zero_grad()
        halves = np.split(np.arange(W.GLOBAL_BATCH), W.WORLD)[:ranks]
        idx = np.concatenate(halves)
        F.cross_entropy(model(hf.tensor(x[step][idx])), hf.tensor(y[step][idx])).backward()
        opt.step()
    for r in results:
        np.testing.assert_allclose(r["mean"], data.mean(0), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(r["all_gather"], data)
        np.testing.assert_array_equal(r["broadcast"], data[-1])
        for got, want in zip(r["ddp_params"], model.parameters()):
            np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-4, atol=1e-5)
