"""Random number generators, one per device, all seeded by :func:`manual_seed`, and
:class:`Generator` objects of one's own.

Every random op (eager or static) draws from ``generator(device)``, so seeding once makes a whole
run -- initialisation, dropout, shuffling -- reproducible. An op given ``generator=`` (an
``hf.Generator``, eager code only) draws from that one instead: ``generator(device)`` returns
it while the op runs (:func:`drawing_from`).

Example::

    >>> import hybridfw as hf
    >>> hf.manual_seed(0); a = hf.rand(3)
    >>> hf.manual_seed(0); b = hf.rand(3)
    >>> bool((a == b).all())
    True
"""
from __future__ import annotations

import contextlib
import contextvars
import copy

import numpy as np

from .backend import Device, cpu
from .backend import device as as_device

__all__ = ["manual_seed", "seed", "seed_cuda", "generator", "get_rng_state", "set_rng_state",
           "initial_seed", "Generator", "drawing_from", "numpy_generator"]

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
    """The generator of ``dev`` (numpy ``Generator`` on CPU, cupy's on CUDA): the
    :class:`Generator` an op was given (see :func:`drawing_from`), else the global one."""
    own = _drawing_from.get()
    if own is not None and own.device is dev:
        return own._rng
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


_DEFAULT_SEED = 67280421310721  # PyTorch's default seed of a new generator
_drawing_from: contextvars.ContextVar = contextvars.ContextVar("hybridfw_generator",
                                                               default=None)


class Generator:
    """A random number generator of one's own, as ``torch.Generator``: random functions given
    ``generator=`` draw from it, not from the global generators :func:`manual_seed` seeds, so
    its numbers depend only on its own seed. (They are not PyTorch's numbers, and
    :meth:`get_state` is the numpy bit generator's state, a dict.)

    Example::

        >>> import hybridfw as hf
        >>> g = hf.Generator().manual_seed(7)
        >>> a = hf.rand(3, generator=g)
        >>> g.manual_seed(7)
        <hybridfw.Generator on cpu>
        >>> bool((hf.rand(3, generator=g) == a).all())
        True
    """

    def __init__(self, device="cpu"):
        self.device = as_device(device)
        self.manual_seed(_DEFAULT_SEED)

    def manual_seed(self, seed: int) -> Generator:
        """Seed it (anything ``int()`` takes; negative seeds wrap to 64 bits); returns it."""
        self._initial_seed = _as_seed(seed, "Generator.manual_seed")
        self._rng = self.device.xp.random.default_rng(self._initial_seed)
        return self

    def seed(self) -> int:
        """Seed it from the operating system's entropy; returns the seed."""
        value = int(np.random.SeedSequence().entropy) % (1 << 64)
        self.manual_seed(value)
        return value

    def initial_seed(self) -> int:
        """The seed it was last seeded with."""
        return self._initial_seed

    def get_state(self) -> dict:
        """A copy of its state, for :meth:`set_state` to return to."""
        return copy.deepcopy(self._rng.bit_generator.state)

    def set_state(self, new_state: dict) -> Generator:
        """Return to a state :meth:`get_state` gave; returns it."""
        if not isinstance(new_state, dict):
            raise TypeError(f"Generator.set_state: expected a state from get_state() (a dict), "
                            f"got {type(new_state).__name__}")
        try:
            self._rng.bit_generator.state = copy.deepcopy(new_state)
        except (TypeError, ValueError, KeyError) as err:
            raise ValueError(f"Generator.set_state: not a state of this generator: {err}") \
                from None
        return self

    def __repr__(self) -> str:
        return f"<hybridfw.Generator on {self.device}>"


def _check_generator(gen, name: str) -> Generator:
    if not isinstance(gen, Generator):
        raise TypeError(f"{name}: generator must be an hf.Generator, got "
                        f"{type(gen).__name__}")
    return gen


@contextlib.contextmanager
def drawing_from(gen: Generator | None, dev: Device, name: str):
    """Random ops on ``dev`` run in this block draw from ``gen`` (None: the global generator).
    Only for ops that run at once (eager): a static program draws when it runs."""
    if gen is None:
        yield
        return
    if _check_generator(gen, name).device is not dev:
        raise ValueError(f"{name}: generator is on {gen.device}, but the result is on {dev}")
    token = _drawing_from.set(gen)
    try:
        yield
    finally:
        _drawing_from.reset(token)


def numpy_generator(gen, name: str):
    """The numpy generator behind ``gen`` for host-side draws (data shuffling): an
    ``hf.Generator``'s own (on the CPU), a numpy ``Generator`` as it is, or (None) the global
    CPU one."""
    if gen is None:
        return generator(cpu)
    if isinstance(gen, np.random.Generator):
        return gen
    if not isinstance(gen, Generator):
        raise TypeError(f"{name}: generator must be an hf.Generator or a numpy Generator, got "
                        f"{type(gen).__name__}")
    if gen.device is not cpu:
        raise ValueError(f"{name}: generator must be on the CPU, got one on {gen.device}")
    return gen._rng
