"""Container start: a lazy-loaded filesystem versus memory-snapshot restore (docs/sources.md §3).

A start is five named phases: ``placement``, ``runtime_create`` (the gVisor sandbox), ``filesystem`` (lazy: the
program's file reads; snapshot: the restore and the pages file), ``imports_init`` (lazy: the program's init compute;
snapshot: what runs after restore, under CPU pressure from eager page loading, plus re-creating GPU state, the
``snap=False`` step) and ``first_input``.

Lazy loading (a program is its file operations, distinct files, bytes read and init compute): every operation pays
the FUSE indirection ``op_s``; each distinct file costs where its data is: the page cache (a start on the same worker
within ``page_cache_ttl_s``), the worker's disk cache (any earlier start of the program on the worker), or the
network (``network_file_s`` a file, tens of ms, docs/sources.md §3), and its bytes at that place's bandwidth. So the
first container of a program on a worker is colder than the tenth: warmth is per-worker state.

Snapshot restore: ``restore_s`` (``runsc restore``), then the process runs while the pages file loads in the
background; it blocks on the pages it touches (``working_set`` of the pages file, loaded first), at the host's
download bandwidth from the network, or at the disk bandwidth when the pages file is already on the host; the
restore and the blocking loads run slower by a lognormal factor of the host's load (``pages_tail_sigma``: the
tail). Eager loading of the rest costs CPU (``cpu_pressure``: the post-restore work runs that much slower), and
GPU state is re-created after restore (``gpu_setup_s``, the ``snap=False`` step).

Lifecycle (over ``host_types`` kinds of host): a snapshot is made on demand, on the first start on a host type with
no compatible snapshot (that start is a lazy start plus snapshot creation), and invalidated by a redeploy every
``deploy_interval_s``; a restore fails with ``restore_failure_prob`` and falls back to a lazy start, re-creating the
snapshot if ``recreate_on_failure``.

Left out: image build and pull, GPU driver compatibility beyond host types, memory snapshot of network connections.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from models.presets import resolve
from sim.guard import UNGUARDED, Guard
from sim.metrics import RUN, Metric, Metrics, percentile_metrics
from sim.model import Figure, Model, Plausibles, TimeSeries, records_frame
from sim.rng import Streams
from sim.scenario import Described, build, param, section
from sim.shortcuts import Shortcuts
from sim.stats import percentiles

if TYPE_CHECKING:
    import pandas as pd

# the fitted keys' plausible ranges: each alone, the others fitted, keeps every fitted figure within 10% of the
# published one (an assumption: the blog rounds them), as calibration/coldstart.py ``coldstart_bands`` computes them
BANDS = "; plausible: alone, every fitted figure within 10% (calibration/coldstart.py coldstart_bands)"
PHASES = ("placement", "runtime_create", "filesystem", "imports_init", "first_input")
GIB = 1024.0


@dataclass(frozen=True)
class ProgramParams:
    file_ops: int = param(32_302, ge=0, source="docs/sources.md §3: `import torch` makes 32,302 system calls")
    distinct_files: int = param(1_335, ge=0, source="docs/sources.md §3: over 1,335 distinct files")
    read_mib: float = param(400.0, ge=0, source="assumption: bytes read at import (torch's shared libraries)")
    init_s: float = param(1.0, ge=0, source="assumption: CPU time of imports and init, data local")
    pages_mib: float = param(500.0, ge=1, source="assumption: the pages file (docs/sources.md §3: 100 MiB – 10 GiB)")
    working_set: float = param(0.4, gt=0, le=1, source="assumption: share of the pages the process touches at once")
    after_restore_s: float = param(0.05, ge=0, source="assumption: CPU work left after restore (snap=False enter)")
    gpu_setup_s: float = param(0.0, ge=0, source="assumption: re-creating GPU state after restore (0: CPU only)")


@dataclass(frozen=True)
class ColdStartParams:
    mode: Literal["lazy", "snapshot"] = param("lazy", doc="how containers start")
    starts: int = param(400, ge=1, doc="container starts simulated")
    start_interval_s: float = param(30.0, gt=0, doc="time between starts (Poisson)")
    workers: int = param(60, ge=1, le=1_000_000, source="assumption: workers a Function's containers land on")
    host_types: int = param(
        6, ge=1, le=1000, source="docs/sources.md §3: ~6 worker types for CPU functions, 2–3 for GPU"
    )
    deploy_interval_s: float = param(0.0, ge=0, doc="time between redeploys (0: never)")
    restore_failure_prob: float = param(0.01, ge=0, le=1, source="assumption: restores that fail (docs/sources.md §3)")
    recreate_on_failure: bool = param(True, source="docs/sources.md §3: GPU snapshot failures re-create the snapshot")
    placement_s: float = param(0.05, ge=0, source="assumption: the scheduler places the container")
    runtime_create_s: float = param(
        0.35, ge=0, source="docs/sources.md §1 'boot in about one second' (assumption: 0.35 s)"
    )
    first_input_s: float = param(0.05, ge=0, source="assumption: the first input reaches the container")
    op_s: float = param(
        8.07e-05,
        ge=0,
        plausible=(7.21e-05, 8.96e-05),
        source="fitted to the coldstart presets (calibration/fit.py coldstart)" + BANDS,
    )
    network_file_s: float = param(
        0.0005,
        ge=0,
        plausible=(0.00183,),
        source="fitted (at its lower bound): a first read on a worker; docs/sources.md §3 says a network "
        "read takes tens of ms, so most first reads must hit a nearer cache" + BANDS,
    )
    network_gibps: float = param(
        1.7,
        gt=0,
        plausible=(2.33,),
        source="docs/sources.md §3: 512 MiB in ~300 ms from the network; plausible up to the lazy filesystem's "
        "~2.5 GB/s (2.33 GiB/s)",
    )
    disk_gibps: float = param(
        2.5,
        gt=0,
        plausible=(8.5,),
        source="docs/sources.md §3: 512 MiB in ~200 ms from the worker's disk cache; plausible up to 5× the network's "
        "1.7 GiB/s ('3–5× faster than uncached downloads')",
    )
    disk_file_s: float = param(0.0005, ge=0, source="assumption: a file's first read from the worker disk cache")
    page_cache_ttl_s: float = param(300.0, ge=0, source="assumption: how long a worker keeps a program's pages")
    restore_s: float = param(
        0.425,
        ge=0,
        plausible=(0.329, 0.508),
        source="fitted to the coldstart presets (calibration/fit.py coldstart)" + BANDS,
    )
    pages_gibps: float = param(2.0, gt=0, source="docs/sources.md §3: ~2 GiB/s per host expected")
    pages_tail_sigma: float = param(
        0.405,
        ge=0,
        plausible=(0.278, 0.601),
        source="fitted: 'much lower in the tail' (docs/sources.md §3)" + BANDS,
    )
    cpu_pressure: float = param(
        0.5,
        ge=0,
        plausible=(0.0, 0.9),
        source="docs/sources.md §3: stalls up to 900 ms/s (assumption: 0.5 s/s; plausible from none to 0.9 s/s)",
    )
    snapshot_write_gibps: float = param(1.0, gt=0, source="assumption: writing the pages file at snapshot creation")
    program: ProgramParams = section(ProgramParams)


@dataclass(frozen=True)
class ColdStartScenario(Described):
    model: Literal["coldstart"] = param("coldstart")
    coldstart: ColdStartParams = section(ColdStartParams)


# None: the starts are a loop over arrival times, with no clock and no events (so not even the engine's shortcuts),
# and each start is computed as the model says, with no faster path beside it
SHORTCUTS = Shortcuts((), ColdStartScenario)


# what only a snapshot restore reads: a lazy scenario's plausible models leave these keys out (``unread``)
SNAPSHOT_ONLY = frozenset(
    f"coldstart.{k}"
    for k in (
        *("restore_s", "pages_gibps", "pages_tail_sigma", "cpu_pressure", "snapshot_write_gibps"),
        *("restore_failure_prob", "recreate_on_failure", "program.pages_mib", "program.working_set"),
        *("program.after_restore_s", "program.gpu_setup_s"),
    )
)


def unread(sc: ColdStartScenario) -> Callable[[str], bool]:
    """Whether a setting (``key=value``) is one ``sc`` does not read: a snapshot's, in lazy mode."""
    lazy = sc.coldstart.mode == "lazy"
    return lambda setting: lazy and setting.partition("=")[0] in SNAPSHOT_ONLY


def load_program(name: str, mode: str) -> ColdStartParams:
    """The container-start model of a coldstart scenario (a preset name or file), in ``mode``."""
    tree, base = resolve(name)
    sc = build(ColdStartScenario, tree, base_dir=base)
    return dataclasses.replace(sc.coldstart, mode=mode) if mode else sc.coldstart


class Starter:
    """Container starts of one program on one fleet, with their state: worker warmth, snapshots per host type."""

    def __init__(self, cp: ColdStartParams, streams: Streams, name: str = "coldstart") -> None:
        self.cp = cp
        self.rng = streams.get(f"{name}/placement")
        self.noise = streams.get(f"{name}/noise")
        self.host_type = [w % cp.host_types for w in range(cp.workers)]
        self.starts_on = [0] * cp.workers  # earlier starts of the program on each worker
        self.last_on = [-math.inf] * cp.workers
        self.pages_on = [-1] * cp.workers  # version whose pages file is on the worker's disk
        self.snapshot = [-1] * cp.host_types  # version of the live snapshot per host type (-1: none)
        self.version = 0
        self.restore_fallbacks = 0
        self.snapshot_creations = 0
        self.bytes_fetched_mib = 0.0

    def start(self, now: float) -> dict[str, float]:
        """One container start at ``now``: its phases in seconds (and ``total``)."""
        cp = self.cp
        if cp.deploy_interval_s:
            self.version = int(now // cp.deploy_interval_s)
        w = int(self.rng.integers(0, cp.workers))
        h = self.host_type[w]
        phases = {"placement": cp.placement_s, "runtime_create": cp.runtime_create_s, "first_input": cp.first_input_s}
        create = 0.0
        if cp.mode == "snapshot" and self.snapshot[h] == self.version:
            if self.noise.random() < cp.restore_failure_prob:
                self.restore_fallbacks += 1
                phases.update(self._lazy(w, now))
                if cp.recreate_on_failure:
                    create = self._create(w, h)
            else:
                phases.update(self._restore(w))
        else:
            phases.update(self._lazy(w, now))
            if cp.mode == "snapshot":  # no compatible snapshot on this host type: make one on demand
                create = self._create(w, h)
        phases["imports_init"] += create  # the container takes its first input after the snapshot is written
        self.starts_on[w] += 1
        self.last_on[w] = now
        phases["total"] = sum(phases[p] for p in PHASES)
        return phases

    def _lazy(self, w: int, now: float) -> dict[str, float]:
        cp, prog = self.cp, self.cp.program
        if now - self.last_on[w] <= cp.page_cache_ttl_s:  # pages still in the page cache
            files_s, read_s = 0.0, 0.0
        elif self.starts_on[w] > 0:  # on the worker's disk cache
            files_s, read_s = prog.distinct_files * cp.disk_file_s, prog.read_mib / (cp.disk_gibps * GIB)
        else:  # the first start of the program on this worker: every file from the network
            files_s = self._network_files(prog.distinct_files)
            read_s = prog.read_mib / (cp.network_gibps * GIB)
            self.bytes_fetched_mib += prog.read_mib
        return {"filesystem": prog.file_ops * cp.op_s + files_s + read_s, "imports_init": prog.init_s}

    def _network_files(self, n: int) -> float:
        """n sequential network reads of mean ``network_file_s`` (exponential: their sum is a gamma draw)."""
        return float(self.noise.gamma(n, self.cp.network_file_s)) if n else 0.0

    def _restore(self, w: int) -> dict[str, float]:
        cp, prog = self.cp, self.cp.program
        blocking_mib = prog.working_set * prog.pages_mib
        # the host's load varies: restore and page loading run slower by a lognormal factor (the tail)
        slowdown = float(self.noise.lognormal(0.0, cp.pages_tail_sigma)) if cp.pages_tail_sigma else 1.0
        if self.pages_on[w] == self.version:  # the pages file is already on this host's disk
            load_s = blocking_mib / (cp.disk_gibps * GIB) * slowdown
        else:
            load_s = blocking_mib / (cp.pages_gibps * GIB) * slowdown
            self.bytes_fetched_mib += prog.pages_mib
            self.pages_on[w] = self.version
        return {
            "filesystem": cp.restore_s * slowdown + load_s,
            "imports_init": prog.after_restore_s * (1 + cp.cpu_pressure) + prog.gpu_setup_s,
        }

    def _create(self, w: int, h: int) -> float:
        self.snapshot_creations += 1
        self.snapshot[h] = self.version
        self.pages_on[w] = self.version
        return self.cp.program.pages_mib / (self.cp.snapshot_write_gibps * GIB)

    def sampler(self, clock: Callable[[], float]) -> Callable[[], float]:
        """Cold-start durations for the input plane's autoscaler (models/inputs/platform/autoscaler.py)."""
        return lambda: self.start(clock())["total"]


def run(
    sc: ColdStartScenario,
    seed: int = 0,
    series: dict | None = None,
    records: bool = False,
    jobs: int = 1,
    guard: Guard = UNGUARDED,
) -> dict:
    """Simulate ``coldstart.starts`` container starts; return the container-start metrics declared below. With
    ``records``, ``metrics["records"]`` is a DataFrame of one row per start: its time, its phases and total.
    ``jobs`` and ``guard`` are not used (a run of one part, and no clock)."""
    wall0 = time.perf_counter()
    used = SHORTCUTS.used(sc)  # none, but the key is checked (a name no model knows is an error)
    cp = sc.coldstart
    streams = Streams(seed)
    starter = Starter(cp, streams)
    gaps = streams.get("coldstart/arrivals").exponential(cp.start_interval_s, cp.starts)
    times = np.cumsum(gaps) - gaps[0]
    each = [starter.start(float(t)) for t in times]
    total = np.array([r["total"] for r in each])
    if series is not None:
        series.update(t=times.tolist(), total=total.tolist(), **{p: [r[p] for r in each] for p in PHASES})
    metrics = {
        "cold_start_p0_s": float(total.min()),
        **percentiles(total, "cold_start"),
        "cold_start_mean_s": float(total.mean()),
        **{f"phase_{p}_mean_s": float(np.mean([r[p] for r in each])) for p in PHASES},
        "restore_fallbacks": starter.restore_fallbacks,
        "snapshot_creations": starter.snapshot_creations,
        "bytes_fetched": int(starter.bytes_fetched_mib * 2**20),
        "starts": cp.starts,
        "shortcuts_used": sorted(used),
        # its parameter file (calibration/params/coldstart.toml) names the presets it was fitted to, not a range of
        # any key a run could leave: nothing to check
        "extrapolated": [],
        "wall_s": time.perf_counter() - wall0,
    }
    if records:
        metrics["records"] = records_frame(
            {"t": times, **{k: [r[k] for r in each] for k in (*PHASES, "total")}}, "start"
        )
    return metrics


METRICS = (
    Metrics(Metric("cold_start_p0_s", "s", "derived", "the fastest container start"))
    + percentile_metrics("cold_start", "the container start (all its phases)")
    + Metrics(
        Metric("cold_start_mean_s", "s", "derived", "the mean container start"),
        *(Metric(f"phase_{p}_mean_s", "s", "derived", f"the mean of a start's {p} phase") for p in PHASES),
        Metric("restore_fallbacks", "starts", "sum", "snapshot restores that failed and fell back to a lazy start"),
        Metric(
            "snapshot_creations", "snapshots", "sum", "memory snapshots made (first start on a host type, redeploys)"
        ),
        Metric("bytes_fetched", "bytes", "sum", "bytes read over the network (files, pages files)"),
        Metric("starts", "starts", "sum", "container starts simulated (`coldstart.starts`)"),
        RUN["wall_s"],
        RUN["shortcuts_used"],
        RUN["extrapolated"],
    )
)


def findings(summary: pd.DataFrame, scale: str) -> tuple[str, str, list[dict]]:
    """Per series: the fastest and the slowest mean container start, and where."""
    rows = []
    for variant, g in summary.groupby("variant", sort=False):
        best, worst = g.loc[g["cold_start_mean_s_mean"].idxmin()], g.loc[g["cold_start_mean_s_mean"].idxmax()]
        rows.append(
            {
                "series": variant,
                "fastest mean start, s": best["cold_start_mean_s_mean"],
                "at": best[scale],
                "slowest, s": worst["cold_start_mean_s_mean"],
                "at ": worst[scale],
            }
        )
    return "Each series", "The fastest and slowest mean container start of each series.", rows


MODEL = Model(
    name="coldstart",
    plausible=Plausibles(unread=unread),
    schema=ColdStartScenario,
    run=run,
    headline=(
        "cold_start_p0_s",
        "cold_start_p50_s",
        "cold_start_mean_s",
        "cold_start_p99_s",
        "snapshot_creations",
        "restore_fallbacks",
        "bytes_fetched",
    ),
    label=lambda sc: f"mode {sc.coldstart.mode}",
    metrics=lambda sc: METRICS,
    size=lambda sc: float(sc.coldstart.starts),
    unit="starts",
    budget=20e6,  # about a minute or two of wall time on the bench machine
    bottleneck="",
    figures=(
        Figure(
            "coldstart",
            "lines",
            "Container start, seconds",
            (("cold_start_mean_s", "mean"), ("cold_start_p50_s", "p50"), ("cold_start_p99_s", "p99")),
        ),
        Figure(
            "snapshots",
            "lines",
            "Snapshot lifecycle (counts per run)",
            (("snapshot_creations", "snapshot creations"), ("restore_fallbacks", "restore fallbacks")),
        ),
    ),
    timeseries=TimeSeries(
        title="Every container start of one point",
        ylabel="container start, s",
        lines=(("total", "container start"),),
        scatter=True,
        log=True,
    ),
    findings=findings,
)
