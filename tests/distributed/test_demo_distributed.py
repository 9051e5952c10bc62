"""README's distributed command: ``mpiexec -n 2 python -m hybridfw.demo --distributed`` trains
the digits CNN data-parallel to the single-process demo's accuracy (>= 97%)."""
from __future__ import annotations

import re

import pytest

from mpi_launch import launch, requires_mpi

pytestmark = requires_mpi


def test_digits_demo_trains_data_parallel_on_two_ranks():
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    done, _ = launch([], timeout=300, python_args=["-m", "hybridfw.demo", "--distributed",
                                                   "--no-progress", "--zero"])
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("distributed (")]
    assert len(lines) == 1, done.stdout  # rank 0 reports, once
    found = re.search(r"distributed \(2 ranks, ZeRO-1\): trained in [\d.]+ s: test accuracy "
                      r"(\d\.\d{4})", lines[0])
    assert found, lines
    assert float(found.group(1)) >= 0.97
