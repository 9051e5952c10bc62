"""Random number generators, one per device, all seeded by :func:`manual_seed`.

Every random op (eager or static) draws from ``generator(device)``, so seeding once makes a whole
run -- initialisation, dropout, shuffling -- reproducible.

Example::

    >>> import hybridfw as hf
    >>> hf.manual_seed(0); a = hf.rand(3)
    >>> hf.manual_seed(0); b = hf.rand(3)
    >>> bool((a == b).all())
    True
"""
from __future__ import annotations

import numpy as np

from .backend import Device, cpu

__all__ = ["manual_seed", "seed", "seed_cuda", "generator", "get_rng_state", "set_rng_state",
           "initial_seed"]

_seed = [0]
_generators: dict = {}


_cuda_seeds: dict = {}  # CUDA device index (None: every one) -> seed of seed_cuda


def _as_seed(seed, name: str) -> int:
    if isinstance(seed, (bool, np.bool_)) or isinstance(seed, str):
        raise TypeError(f"{name}: seed must be an int, got {seed!r}")
    try:
        value = int(seed)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: seed must be an int, got {seed!r}") from None
    return value % (1 << 64)  # (numpy's generators take no negative seed)


def manual_seed(seed: int) -> None:
    """Seed every device's generator (existing and future ones). As PyTorch, anything ``int()``
    takes (a float, a 0-d integer tensor) is a seed; a negative one wraps to 64 bits."""
    _seed[0] = _as_seed(seed, "manual_seed")
    _cuda_seeds.clear()
    _generators.clear()


def seed_cuda(seed: int, index: int | None = None) -> None:
    """Seed the generator of CUDA device ``index`` (None: of every CUDA device, existing and
    future ones), leaving the CPU's as it is: ``hf.cuda.manual_seed`` / ``manual_seed_all``.
    The seeds last until the next :func:`manual_seed`."""
    value = _as_seed(seed, "manual_seed_all" if index is None else "manual_seed")
    if index is None:
        _cuda_seeds.clear()
    _cuda_seeds[index] = value
    for dev in [d for d in _generators if d is not cpu and index in (None, d.index)]:
        del _generators[dev]


def seed() -> int:
    """Seed every generator from the operating system's entropy; returns the seed (PyTorch's
    ``torch.seed``)."""
    value = int(np.random.SeedSequence().entropy) % (1 << 64)
    manual_seed(value)
    return value


def initial_seed() -> int:
    """The seed the generators were last seeded with."""
    return _seed[0]


def generator(dev: Device = cpu):
    """The generator of ``dev`` (numpy ``Generator`` on CPU, cupy's on CUDA)."""
    gen = _generators.get(dev)
    if gen is None:
        xp = dev.xp
        # Each CUDA device gets its own stream of numbers derived from the one seed.
        if dev is cpu:
            seed = _seed[0]
        else:
            seed = [_cuda_seeds.get(dev.index, _cuda_seeds.get(None, _seed[0])), 1 + dev.index]
        gen = _generators[dev] = xp.random.default_rng(seed)
    return gen


def get_rng_state(dev: Device = cpu) -> dict:
    """A snapshot of ``dev``'s generator (checkpointing replays it to redraw the same numbers)."""
    return generator(dev).bit_generator.state


def set_rng_state(state: dict, dev: Device = cpu) -> None:
    generator(dev).bit_generator.state = state
