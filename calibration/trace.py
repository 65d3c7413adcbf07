"""Traces: what a calibration run recorded, one schema for real Modal runs and for the simulator's records.

A trace is a directory holding ``manifest.json`` and one Parquet table:

- ``calls.parquet`` (``kind = "calls"``, a load test), one row per call (an input: a batched chunk is one row):
  ``client`` (int), ``issued`` (first attempt), ``started`` (began on a container; NaN: unknown or never),
  ``finished`` (back at the caller, success or final failure; NaN: never back), ``work`` (the call's own work, s),
  ``items`` (calls carried, 1 unless batched), ``kind`` (``""``: success, else the error kind: one of
  models/inputs/summary.py ``ERROR_KINDS``, ``"other"``, or ``"unfinished"``: never back before the drain ended,
  ``finished`` NaN), ``attempts`` (tries), ``initial`` (in flight at the
  start), and optionally ``container`` (the container that ran it: ``MODAL_TASK_ID``; ``""`` unknown) and ``ended``
  (its work ended on the container). Times are seconds from the run's start, on the caller's clock; the remote side's
  times are aligned to it by the manifest's ``clock_offset_s``.
- ``sandboxes.parquet`` (``kind = "sandboxes"``): ``requested``, ``placed`` (the create call returned), ``running``
  (able to run user code), NaN where it did not happen.
- ``starts.parquet`` (``kind = "starts"``): ``t`` (when the start began), ``total`` (seconds to ready).

The manifest says what ran: ``kind``, ``what`` (remote, spawn, copies, batching, server, coldstart, sandboxes),
``source`` (``modal`` or ``scalesim``), ``scenario`` (``preset`` and ``set``: the simulator's scenario of the same
experiment, which is what a fit simulates), ``window`` ([start, end) of the measurement), ``modal_version``,
``region``, ``started_at``/``ended_at`` (UTC), ``apps`` (the app names deployed), ``parameters`` (the command's own),
and for a load test ``clients``: where its clients ran (``driver``: processes, in-process or modal; ``shares``: each
process's or container's clients and its pid or container; calibration/clients.py).

``statistics`` computes every figure a fit compares from a table of calls: the same function reads a real trace and
the simulator's records, so real and simulated figures are comparable by construction.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from models.inputs.summary import ERROR_KINDS, Window, summarize
from sim import files
from sim.scenario import ScenarioError

if TYPE_CHECKING:
    import pandas as pd

MANIFEST = "manifest.json"
UNFINISHED = "unfinished"  # a call that never came back before the run ended (the caller cancelled it)
TABLES = {"calls": "calls.parquet", "sandboxes": "sandboxes.parquet", "starts": "starts.parquet"}
KINDS = ("", *ERROR_KINDS, "other", UNFINISHED)
# column -> (dtype family, required)
COLUMNS: dict[str, dict[str, tuple[str, bool]]] = {
    "calls": {
        "client": ("int", True),
        "issued": ("float", True),
        "started": ("float", True),
        "finished": ("float", True),
        "work": ("float", True),
        "items": ("int", True),
        "kind": ("str", True),
        "attempts": ("int", True),
        "initial": ("bool", True),
        "container": ("str", False),
        "ended": ("float", False),
    },
    "sandboxes": {"requested": ("float", True), "placed": ("float", True), "running": ("float", True)},
    "starts": {"t": ("float", True), "total": ("float", True)},
}
MANIFEST_KEYS = ("kind", "what", "source", "scenario", "window")
QUARTERS = 4  # calls back per second in each quarter of the window: the rate over time


@dataclass(frozen=True)
class Trace:
    path: Path
    manifest: dict[str, Any]
    table: pd.DataFrame

    @property
    def kind(self) -> str:
        return self.manifest["kind"]

    @property
    def window(self) -> Window:
        start, end = self.manifest["window"]
        return Window(float(start), float(end))

    @property
    def name(self) -> str:
        return self.path.name


def write(path: Path, manifest: dict[str, Any], table: pd.DataFrame) -> Path:
    """Write a trace directory (checked as ``read`` checks it): the manifest and the kind's Parquet table."""
    path.mkdir(parents=True, exist_ok=True)
    table = _conform(path, manifest, table)
    table.to_parquet(path / TABLES[manifest["kind"]], index=False)
    (path / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n")
    return path


def read(path: Path) -> Trace:
    """A trace directory, checked: a malformed one raises ScenarioError naming the file and the key or column."""
    path = Path(path)
    mf = path / MANIFEST
    if not files.is_folder(path):
        raise ScenarioError(f"{path}: not a trace directory (a folder with {MANIFEST} and a Parquet table)")
    if not mf.exists():
        raise ScenarioError(f"{mf}: missing")
    manifest = files.read_json(mf, "a trace's manifest")  # a regular file within its cap, never a pipe
    if not isinstance(manifest, dict):
        raise ScenarioError(f"{mf}: must be a JSON object")
    for key in MANIFEST_KEYS:
        if key not in manifest:
            raise ScenarioError(f"{mf}: key {key!r} missing")
    kind = manifest["kind"]
    if kind not in TABLES:
        raise ScenarioError(f"{mf}: kind must be one of {', '.join(TABLES)}, got {kind!r}")
    window = manifest["window"]
    if (
        not isinstance(window, list)
        or len(window) != 2
        or not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in window)
        or not window[0] < window[1]
    ):
        raise ScenarioError(f"{mf}: window must be [start, end] with finite start < end, got {window!r}")
    scenario = manifest["scenario"]
    if not isinstance(scenario, dict) or not isinstance(scenario.get("preset"), str):
        raise ScenarioError(f"{mf}: scenario must be {{preset: NAME, set: {{KEY: VALUE}}}}")
    if not isinstance(scenario.get("set", {}), dict):
        raise ScenarioError(f"{mf}: scenario.set must be a table of KEY: VALUE")
    tf = path / TABLES[kind]
    if not tf.exists():
        raise ScenarioError(f"{tf}: missing")
    import pandas as pd  # (here, not at the top: the commands' --help need not load it)

    data = io.BytesIO(files.read_bytes(tf, "a trace's Parquet table", files.TRACE_CAP))
    try:
        # on this thread: Arrow's pools of threads, once started, may abort the process as it exits
        # (apache/arrow#34314: "terminate called without an active exception", seen once in CI on calibration.fit)
        table = pd.read_parquet(data, use_threads=False, pre_buffer=False)
    except Exception as e:  # pyarrow raises several kinds on a file that is not Parquet
        raise ScenarioError(f"{tf}: not a Parquet table ({type(e).__name__})") from None
    table = _conform(tf, manifest, table)
    check_values(tf, mf, manifest, table)  # before any fit: times and works that cannot be right
    return Trace(path, manifest, table)


def _conform(where: Path, manifest: dict, table: pd.DataFrame) -> pd.DataFrame:
    """The table with the schema's columns and types; a missing or ill-typed column raises naming it."""
    import pandas as pd

    out = {}
    for col, (family, required) in COLUMNS[manifest["kind"]].items():
        if col not in table.columns:
            if required:
                raise ScenarioError(f"{where}: column {col!r} missing")
            continue
        v = table[col]
        try:
            if family == "float":
                x = pd.to_numeric(v, errors="raise").astype(float).to_numpy()
                if np.isinf(x).any():
                    raise ValueError("holds inf")
            elif family == "int":
                x = v.to_numpy()
                if not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.bool_)):
                    raise ValueError(f"must be integers, got {x.dtype}")
                x = x.astype(np.int64)
                if (x < (0 if col == "client" else 1)).any():
                    raise ValueError("holds a value below its minimum")
            elif family == "bool":
                x = v.to_numpy()
                if x.dtype != bool:
                    raise ValueError(f"must be true/false, got {x.dtype}")
            else:
                x = v.to_numpy(dtype=object)
                if not all(isinstance(s, str) for s in x):
                    raise ValueError("must be strings")
                if col == "kind" and not set(x) <= set(KINDS):
                    bad = sorted(set(x) - set(KINDS))[:3]
                    raise ValueError(f"unknown kinds {bad} (kinds: '' for success, {', '.join(KINDS[1:])})")
        except (ValueError, TypeError) as e:
            raise ScenarioError(f"{where}: column {col!r}: {e}") from None
        out[col] = x
    return pd.DataFrame(out)


def check_values(where: Path, mf: Path, manifest: dict, table: pd.DataFrame) -> None:
    """A trace's values that cannot be right, refused before any fit (ScenarioError: one line naming the file, the
    column and the first such row, counting from 0). The window must begin at or after the run's start (0); times
    on the caller's clock (``issued``, ``finished``; a sandbox's, a start's ``t``) are finite where given and >= 0,
    and in order: a call is back after it was issued and, when back successfully, no sooner than its own work
    (``finished - issued >= work``, within 0.1% + 1 µs of clock rounding); a sandbox is placed after it was requested
    and running after it was placed; times on the remote side's clock (``started``, ``ended``) are >= 0 where given,
    and a work ends after it started; ``work`` and a start's ``total`` are >= 0; and a trace of calls issues at least
    one call in its window. NaN is allowed only where the schema says so (never back, never placed, unknown)."""
    start, end = manifest["window"]
    if start < 0:
        raise ScenarioError(
            f"{mf}: window [{start:g}, {end:g}) begins before the run (times are seconds from its start, >= 0)"
        )
    col = {c: table[c].to_numpy() for c in table.columns}

    def refuse(name: str, bad: np.ndarray, what: str) -> None:
        if bad.any():
            row = int(np.argmax(bad))
            raise ScenarioError(f"{where}: column {name!r}, row {row} (from 0): {float(col[name][row]):.9g} {what}")

    kind = manifest["kind"]
    if len(table) == 0:
        raise ScenarioError(f"{where}: holds no rows (a run that recorded nothing is not a trace to fit)")
    with np.errstate(invalid="ignore"):  # NaN compares False: allowed where the schema allows it
        if kind == "calls":
            issued, finished, work = col["issued"], col["finished"], col["work"]
            refuse("issued", ~(issued >= 0), "is not a time >= 0 (every call has a first attempt)")
            refuse("finished", finished < issued, "is before the call was issued")
            refuse("work", ~(work >= 0), "is not a work >= 0 in seconds")
            for name in ("started", "ended"):
                if name in col:
                    refuse(name, col[name] < 0, "is a time before the run's start")
            if "ended" in col:
                refuse("ended", col["ended"] < col["started"], "is before the call's work started")
            back = (col["kind"] == "") & (finished >= issued)
            refuse("finished", back & (finished - issued < work * (1 - 1e-3) - 1e-6), "is sooner than its own work")
            if not ((issued >= start) & (issued < end)).any():
                raise ScenarioError(
                    f"{mf}: window [{start:g}, {end:g}) holds no call issued in it ({where} issues from "
                    f"{issued.min():.6g} to {issued.max():.6g} s)"
                )
        elif kind == "starts":
            refuse("t", ~(col["t"] >= 0), "is not a time >= 0")
            refuse("total", col["total"] < 0, "is not a start's seconds to ready >= 0")
        else:
            requested, placed, running = col["requested"], col["placed"], col["running"]
            refuse("requested", requested < 0, "is a time before the run's start")
            refuse("placed", np.isnan(requested) & ~np.isnan(placed), "is given for a sandbox never requested")
            refuse("placed", placed < requested, "is before the sandbox was requested")
            refuse("running", np.isnan(placed) & ~np.isnan(running), "is given for a sandbox never placed")
            refuse("running", running < placed, "is before the sandbox was placed")


def columns(table: pd.DataFrame) -> dict[str, np.ndarray]:
    """A calls table as the column arrays ``summarize`` takes (``ok``: no error kind)."""
    a = {c: table[c].to_numpy() for c in table.columns}
    a["ok"] = a["kind"] == ""
    return a


def statistics(table: pd.DataFrame, window: Window) -> dict[str, float | None]:
    """Every figure a fit compares, from a table of calls (a real trace or the simulator's records): the call metrics
    of ``summarize`` (calls/s, added-latency percentiles, first N back, errors), the calls back per second in each
    quarter of the window (the rate over time), the error share by kind, and the containers seen (when the table
    names them)."""
    a = columns(table)
    m = summarize(a, window)
    stats: dict[str, float | None] = {
        k: m[k]
        for k in (
            "calls_per_s",
            "added_latency_p50_s",
            "added_latency_p90_s",
            "added_latency_p99_s",
            "first_n_back_s",
            "errors_total",
            "calls_issued",
        )
    }
    finished, ok, items = a["finished"], a["ok"], a["items"]
    edges = np.linspace(window.start, window.end, QUARTERS + 1)
    back = ok & ~np.isnan(finished)
    counts, _ = np.histogram(finished[back], bins=edges, weights=items[back])
    for q, n in enumerate(counts, 1):
        stats[f"calls_back_per_s_q{q}"] = float(n / (edges[1] - edges[0]))
    issued = max(1, int(items.sum()))
    for kind in KINDS[1:]:
        stats[f"error_share_{kind}"] = float(items[a["kind"] == kind].sum()) / issued
    if "container" in a:
        named = a["container"][a["container"] != ""]
        stats["containers_seen"] = float(len(set(named))) if len(named) else None
    return stats


def of_run(metrics: dict, sc: Any, preset: str, sets: dict[str, Any], what: str) -> tuple[dict, pd.DataFrame]:
    """The manifest and table of a simulated load test (``run(..., records=True)``): the simulator's own trace."""
    records = metrics["records"].reset_index(drop=True)
    table = records.drop(columns=["ok"])
    manifest = {
        "kind": "calls",
        "what": what,
        "source": "scalesim",
        "scenario": {"preset": preset, "set": sets},
        "window": [sc.warmup_s, sc.duration_s],
        "seed": metrics.get("seed"),
    }
    return manifest, table
