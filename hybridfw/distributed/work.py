"""Handles of collectives in flight, and waiting for them with a deadline.

A collective that never completes (a rank crashed, stalled or skipped the call) would block
``MPI_Wait`` forever; :meth:`Work.wait` instead polls the requests until a deadline and then
raises :class:`DistributedTimeoutError` naming the collective, the rank and the timeout.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

__all__ = ["Work", "DistributedTimeoutError"]


class DistributedTimeoutError(RuntimeError):
    """A collective did not complete within the process group's timeout."""


class Work:
    """A collective started with ``async_op=True``: ``wait()`` blocks until it is done (and
    runs its finishing step, e.g. the division of ``op='mean'``); ``is_completed()`` polls.

    ``requests`` are backend requests with ``Test() -> bool`` and ``Wait()`` (MPI's);
    ``finish`` runs once after they complete.
    """

    __slots__ = ("name", "requests", "finish", "group", "done")

    def __init__(self, name: str, requests: Sequence, group, finish: Callable | None = None):
        self.name = name
        self.requests = list(requests)
        self.group = group
        self.finish = finish
        self.done = False

    def is_completed(self) -> bool:
        """True once every request has completed (drives the backend's progress)."""
        if self.done:
            return True
        if all(r.Test() for r in self.requests):
            self._complete()
        return self.done

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the collective completes; ``timeout`` (seconds) defaults to the process
        group's. Raises :class:`DistributedTimeoutError` when it runs out."""
        if not self.done:
            limit = self.group.timeout if timeout is None else float(timeout)
            _wait_requests(self.requests, limit, self.name, self.group)
            self._complete()
        return True

    def _complete(self) -> None:
        self.done = True
        self.requests = []
        if self.finish is not None:
            finish, self.finish = self.finish, None
            finish()

    def __repr__(self) -> str:
        return f"<Work {self.name} {'done' if self.done else 'in flight'}>"


#: Poll without sleeping this long first, yielding the core between polls: sleeping even 10 us
#: costs ~0.1 ms of timer slack per wait, more than a small all-reduce takes (measured 0.28 ms
#: vs 0.01 ms for 4 KB), while pure spinning starves the peer rank when ranks share cores.
SPIN_SECONDS = 0.02


def _wait_requests(requests, limit: float, name: str, group) -> None:
    if limit == float("inf"):
        for r in requests:
            r.Wait()
        return
    now = time.monotonic()
    deadline, spin_until = now + limit, now + SPIN_SECONDS
    delay = 1e-4
    pending = [r for r in requests if not r.Test()]
    while pending:
        now = time.monotonic()
        if now >= deadline:
            raise DistributedTimeoutError(
                f"hf.distributed.{name}: rank {group.rank} of {group.world_size} waited "
                f"{limit:g} s and the collective did not complete: another rank failed, is "
                f"stalled or did not call {name} (the timeout is set by "
                f"init_process_group(timeout=...) or HYBRIDFW_DIST_TIMEOUT)")
        if now > spin_until:  # a long wait: stop burning the core, back off to 1 ms polls
            time.sleep(delay)
            delay = min(2 * delay, 1e-3)
        else:
            os.sched_yield()
        pending = [r for r in pending if not r.Test()]
