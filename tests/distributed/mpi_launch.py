"""Launching ``mpiexec -n 2`` from the tests: find the launcher, skip cleanly without MPI."""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_worker.py")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_mpiexec() -> str | None:
    """The mpiexec installed next to this Python (pip's mpich), else the one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("mpiexec")


MPIEXEC = find_mpiexec()
HAVE_MPI = MPIEXEC is not None and importlib.util.find_spec("mpi4py") is not None

requires_mpi = pytest.mark.skipif(not HAVE_MPI, reason="needs mpi4py and mpiexec "
                                  "(pip install mpi4py mpich)")


def launch(args: list, n: int = 2, timeout: float = 120, env: dict | None = None,
           python_args: list | None = None):
    """Run ``mpiexec -n n python dist_worker.py *args`` (or ``python *python_args``); returns
    (CompletedProcess, seconds).

    A launch that outlives ``timeout`` fails the test instead of hanging the suite."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (REPO_ROOT, full_env.get("PYTHONPATH")) if p)
    full_env.setdefault("OMP_NUM_THREADS", "1")
    full_env.setdefault("OPENBLAS_NUM_THREADS", "1")
    full_env.update(env or {})
    start = time.monotonic()
    # its own session, so a launch that hangs is ended with all its ranks, not only mpiexec
    command = [MPIEXEC, "-n", str(n), sys.executable, *(python_args or [WORKER, *args])]
    proc = subprocess.Popen(command,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full_env, cwd=REPO_ROOT, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"{' '.join(command)} did not finish within {timeout} s "
                    f"(a rank hangs):\n{stdout}\n{stderr}")
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return done, time.monotonic() - start
