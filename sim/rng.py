"""Named random streams from one seed.

One ``numpy.random.SeedSequence`` per run; each mechanism (arrivals, work, cold start, ...) draws from its
own stream, keyed by the stream's name rather than by creation order. A stream's numbers therefore depend
only on (seed, name): the same point gives the same numbers in any process, and two sweep points that differ
in one parameter still share their work and arrival draws (common random numbers).
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from sim.dists import Dist


class Streams:
    """The random streams of one run, created on first use by name."""

    def __init__(self, seed: int, prefix: str = "") -> None:
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.seed = seed
        self.prefix = prefix  # before every stream's name: the streams of one independent part of a run
        self._streams: dict[str, np.random.Generator] = {}

    def get(self, name: str) -> np.random.Generator:
        """The generator of stream ``name`` (the same object on every call)."""
        gen = self._streams.get(name)
        if gen is None:
            # crc32 is stable across processes and machines, unlike hash().
            key = zlib.crc32((self.prefix + name).encode())
            gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence(self.seed, spawn_key=(key,))))
            self._streams[name] = gen
        return gen


# the most draws a client's sampler holds at once: a run may have a million clients, each with several streams
PER_CLIENT_BATCH = 512


class PerClient(dict):
    """Client i's own stream ``NAME/client-i`` (a sampler of ``dist`` if given, else the generator), made on first
    use. Streams are named after the model's entities (a client, a Function copy), never after a batching or
    partitioning choice, so client i draws the same numbers whatever the number of clients, copies or parts (common
    random numbers along every sweep axis; tests/models/inputs/test_shortcuts.py)."""

    def __init__(self, streams: Streams, name: str, dist: Dist | None = None) -> None:
        super().__init__()
        self._streams, self._name, self._dist = streams, name, dist

    def __missing__(self, client: int) -> Any:
        rng = self._streams.get(f"{self._name}/client-{client}")
        made = rng if self._dist is None else self._dist.sampler(rng, first=16, most=PER_CLIENT_BATCH)
        self[client] = made
        return made
