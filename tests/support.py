"""What the tests share: the repository's root, scenarios from presets or plain dicts, a run's records as arrays, a
command run as a user runs it, queueing theory's formulas and confidence intervals, the load test's property
strategy and invariants, and the lane's example counts. Test modules import this module, never each other.

``scenario(tree)`` builds a scenario with the switchable mechanisms off (calibration/candidates.py ``OFF``: no
per-call overhead, a plain start bucket, one container per decision sized to the inputs in the system, no server CPU)
beneath whatever the tree sets: the exact traces and invariants check the machinery, and each mechanism is switched on
explicitly where it is tested (tests/models/test_mechanisms.py). ``preset`` keeps the code's defaults (the fitted
model).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from scipy import stats

from calibration.candidates import OFF
from models.inputs import loadtest
from models.inputs.loadtest import Scenario
from models.inputs.platform.monitor import REJECTION_LIMITS
from models.inputs.summary import ERROR_KINDS
from models.runs import load_scenario
from sim import engine
from sim.engine import Sim
from sim.scenario import build, merge, parse_value, set_dotted

ROOT = Path(__file__).resolve().parent.parent
HANG_S = 60  # a guard against a hang, not a speed limit (speed is measured by python -m experiments.bench)
MEMORY_BOUND = 2 * 1024**3  # what a command may take beyond what its process has: 2 GiB
FUZZ_BUDGET = "0.001"  # the run-size budget (SCALESIM_BUDGET) of the fuzz suites' in-process examples
LANE = "SCALESIM_LANE"  # "fast": the fast lane (``pytest --fast``, tests/conftest.py); unset: every lane


def fast_lane() -> bool:
    return os.environ.get(LANE) == "fast"


def examples(n: int) -> int:
    """A property's Hypothesis examples: ``n`` in the full lane (CI), a tenth (at least 3) in the fast lane; times
    ``SCALESIM_EXAMPLES`` (default 1) where set, for a deeper run of the differential tests than CI's."""
    n = round(n * float(os.environ.get(EXAMPLES_ENV, "1")))
    return max(3, n // 10) if fast_lane() else max(1, n)


EXAMPLES_ENV = "SCALESIM_EXAMPLES"


MECHANISMS_OFF: dict = {}
for _key, _value in OFF.items():
    set_dotted(MECHANISMS_OFF, _key, parse_value(_value))


def mechanisms_off(tree: dict) -> dict:
    """``tree`` over MECHANISMS_OFF: every mechanism the tree does not set is off."""
    return merge(MECHANISMS_OFF, tree)


def scenario(tree: dict) -> Scenario:
    """The scenario of ``tree`` with every mechanism it does not set switched off."""
    return build(Scenario, mechanisms_off(tree))


def preset(name: str, *sets: str) -> Scenario:
    return load_scenario(name, list(sets), [])


def columns(records: pd.DataFrame) -> dict[str, np.ndarray]:
    """A load test's records (``run(..., records=True)["records"]``) as one numpy array per column, the form
    ``models.inputs.summary.summarize`` takes."""
    return {c: records[c].to_numpy() for c in records.columns}


def run_module(module: str, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` in a fresh process, as a user runs it (``timeout``: a guard against a hang, not a
    speed limit: speed is the bench's)."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def one_line(text: str) -> str:
    """``text`` (a command's stderr) as its one line: no second line, no traceback."""
    text = text.strip()
    assert "\n" not in text and "Traceback" not in text, text
    return text


def erlang_c_wait(lam: float, mu: float, c: int) -> float:
    """Mean wait in queue of M/M/c: C(c, a) / (cμ − λ), a = λ/μ."""
    a = lam / mu
    rho = a / c
    top = a**c / math.factorial(c) / (1 - rho)
    p_wait = top / (sum(a**k / math.factorial(k) for k in range(c)) + top)
    return p_wait / (c * mu - lam)


def ci95(x: list[float]) -> tuple[float, float]:
    """Mean and half-width of the 95% t-interval."""
    a = np.asarray(x)
    return float(a.mean()), float(stats.t.ppf(0.975, len(a) - 1) * a.std(ddof=1) / math.sqrt(len(a)))


# load tests drawn by Hypothesis: every approach, small pools and limits, mechanisms off unless a test sets them
dists = st.sampled_from(["constant(1)", "uniform(0.5, 3)", "exponential(1)", "lognormal(1, 0.5)"])
loadtests = st.fixed_dictionaries(
    {
        "approach": st.sampled_from(["remote", "spawn", "batching", "server"]),
        "work": dists,
        "duration_s": st.floats(1, 20),
        "drain_s": st.sampled_from([0.0, 5.0, 300.0]),
        "function": st.fixed_dictionaries(
            {"max_inputs": st.integers(1, 20), "copies": st.integers(1, 3), "containers": st.sampled_from([0, 0, 2])}
        ),
        "limits": st.fixed_dictionaries(
            {
                "sync_accept_rate": st.floats(1, 100),
                "sync_accept_burst": st.floats(1, 50),
                "sync_pending_cap": st.integers(0, 50),
                "sync_in_system_cap": st.integers(0, 100),
                "start_rate": st.floats(0.5, 100),
                "start_burst": st.floats(1, 20),
            }
        ),
        "autoscaler": st.fixed_dictionaries(
            {
                "interval_s": st.floats(0.1, 5),
                "scaleup_step": st.integers(1, 4),
                "cold_start": dists,
                "scaledown_window_s": st.floats(2, 30),
                "max_containers": st.integers(0, 5),
            }
        ),
        "server": st.fixed_dictionaries({"max_concurrency": st.integers(0, 10)}),
        "clients": st.fixed_dictionaries(
            {
                "count": st.integers(1, 4),
                "in_flight": st.integers(1, 30),
                "retry": st.sampled_from(["none", "backoff"]),
                "connection_limit": st.integers(0, 10),
            }
        ),
        "batching": st.fixed_dictionaries(
            {
                "round_items": st.integers(1, 40),
                "chunk_items": st.integers(1, 10),
                "item_failure_prob": st.sampled_from([0.0, 0.1]),
            }
        ),
    }
)


def most_at_once(start: np.ndarray, end: np.ndarray) -> int:
    """The most intervals [start, end) open at one time (an end at t closes before a start at t opens)."""
    times = np.concatenate([start, end])
    steps = np.concatenate([np.ones(len(start), np.int64), -np.ones(len(end), np.int64)])
    order = np.lexsort((steps, times))  # by time, ends (-1) first
    return int(np.cumsum(steps[order]).max(initial=0))


def check_every_call_is_accounted_for(tree: dict, seed: int) -> None:
    """The load test's invariants, read from what a run of ``tree`` reports (metrics, ``records=True``, ``series``):
    no call lost, causality, no pool over its limits, nothing running without room on a container."""
    series: dict = {}
    m = loadtest.run(scenario(tree), seed=seed, series=series, records=True)
    a = columns(m["records"])
    items, ok = a["items"], a["ok"]
    out = np.isnan(a["finished"])

    # completed + failed + never back = issued, by the metrics and by the records
    assert m["calls_issued"] == int(items.sum())
    assert m["calls_completed"] == int(items[ok & ~out].sum())
    assert m["errors_total"] == int(items[~ok & ~out].sum())
    assert m["calls_in_flight"] == int(items[out].sum())
    assert m["calls_completed"] + m["errors_total"] + m["calls_in_flight"] == m["calls_issued"]
    assert m["calls"] <= m["calls_completed"] and m["errors"] <= m["errors_total"]
    assert sum(m["errors_by_kind"].values()) == m["errors"] and set(m["errors_by_kind"]) <= set(ERROR_KINDS)
    # the run stops before its drain is over only once nothing is in flight
    if m["sim_time_s"] < tree["duration_s"] + tree["drain_s"]:
        assert m["calls_in_flight"] == 0
    # every rejected attempt was either retried (an attempt more) or ended its call with that kind
    rejected_finally = int(np.isin(a["kind"][~out], list(REJECTION_LIMITS)).sum())
    assert sum(m["rejections_by_kind"].values()) == m["retries"] + rejected_finally
    if tree["clients"]["retry"] == "backoff":  # rejections are retried forever: only a failed item ends a call
        assert set(a["kind"][~out & ~ok]) <= {"item_failed"}
    else:
        assert m["retries"] == 0

    # causality: issued ≤ started ≤ finished, and no negative wait or added latency
    started = ~np.isnan(a["started"])
    assert np.all(a["started"][started] >= a["issued"][started] - 1e-9)
    assert np.all(a["finished"][started & ~out] >= a["started"][started & ~out] - 1e-9)
    back_ok = ok & ~out
    assert np.all(a["finished"][back_ok] - a["issued"][back_ok] - a["work"][back_ok] >= -1e-9)
    assert m["wait_mean_s"] is None or m["wait_mean_s"] >= 0

    # no pool outgrows its limits, and nothing runs without room on a container
    server = tree["approach"] == "server"
    pools = 1 if server else tree["function"]["copies"]  # one Function per app copy; one proxy pool
    fixed = 0 if server else tree["function"]["containers"]  # the server's pool always autoscales
    cap = tree["autoscaler"]["max_containers"]
    if fixed:
        assert m["containers_peak"] == pools * fixed  # an always-warm pool neither grows nor shrinks
    elif cap:
        assert m["containers_peak"] <= pools * cap
    assert min(series["pending"], default=0) >= 0
    assert max(series["containers"], default=0) <= m["containers_peak"]
    per_container = tree["server"]["max_concurrency"] if server else tree["function"]["max_inputs"]
    if per_container:
        running_end = np.where(out, np.inf, a["finished"])
        assert most_at_once(a["started"][started], running_end[started]) <= m["containers_peak"] * per_container
        assert all(r <= c * per_container for r, c in zip(series["running"], series["containers"], strict=True))


class Hang(Exception):
    pass


def _alarm(_sig: int, _frame: object) -> None:
    raise Hang


def vm_size() -> int:
    """This process's address space now (bytes), from /proc (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def bounded(seconds: int = HANG_S) -> Iterator[None]:
    """At most ``seconds`` of wall time (SIGALRM raises Hang) and MEMORY_BOUND more address space (MemoryError)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = vm_size() + MEMORY_BOUND
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    old = signal.signal(signal.SIGALRM, _alarm)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def assert_0_or_2(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """``main(argv)`` within the bounds: exit 0, or exit 2 with one printable line and no traceback."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with bounded(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as e:  # argparse
                rc = e.code
    except Hang:
        pytest.fail(f"no answer within {HANG_S} s: {argv}")
    except MemoryError:
        pytest.fail(f"over {MEMORY_BOUND / 1024**3:g} GiB: {argv}")
    text = err.getvalue().strip()
    if currently_in_test_context():  # (a hypothesis example: its statistics count the exits)
        event(f"exit {rc}")
    assert rc in (0, 2), f"exit {rc} for {argv}: {text[-600:]}"
    if rc == 2:
        lines = [ln for ln in text.splitlines() if "capped at" not in ln and not ln.startswith("warning:")]
        assert len(lines) == 1 and lines[0].isprintable() and "Traceback" not in text, f"{argv}: {text[-600:]}"
    return rc


# --- differential tests of the shortcuts (tests/models/*/test_*shortcuts.py) ---------------------------------------
IGNORED = ("wall_s", "events", "shortcuts_used", "scenario", "seed")  # what a shortcut may change


def diff_settings(default: int, properties: int) -> settings:
    """Hypothesis settings of a differential test file: ``default`` examples in all (``SCALESIM_DIFF_EXAMPLES``
    if set, freshly drawn), an equal share for each of its ``properties``."""
    total = int(os.environ.get("SCALESIM_DIFF_EXAMPLES", default))
    return settings(
        max_examples=max(1, total // properties),
        deadline=None,
        derandomize=os.environ.get("SCALESIM_DIFF_EXAMPLES") is None,  # CI: the same examples every run
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )


def dists(lo: float, hi: float, zero: bool = False) -> st.SearchStrategy[str]:
    """A distribution string with its mean within about [lo, hi]."""
    x = st.floats(lo, hi, allow_nan=False)
    options = [
        x.map(lambda v: f"constant({v!r})"),
        st.tuples(x, x).map(lambda ab: f"uniform({min(ab)!r}, {max(ab)!r})"),
        x.map(lambda v: f"exponential({v!r})"),
        st.tuples(x, st.floats(0.05, 1.5)).map(lambda ms: f"lognormal({ms[0]!r}, {ms[1]!r})"),
    ]
    if zero:
        options.append(st.just("constant(0)"))
    return st.one_of(options)


def same(a: object, b: object, rel: float) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b if rel == 0 else math.isclose(a, b, rel_tol=rel, abs_tol=rel)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rel) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y, rel) for x, y in zip(a, b, strict=True))
    return a == b


# --- pages checked in a real browser (Debian's chromium; the tests skip, saying why, without it) ----------------------
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
HEADLESS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def png_pixels(path: Path) -> np.ndarray:
    """A PNG's pixels, RGB in 0..255."""
    import matplotlib.image

    return np.asarray(matplotlib.image.imread(str(path)))[..., :3] * 255.0


def in_chromium(page: Path, folder: Path, size: str = "1200,2000") -> str:
    """``page`` opened in headless Chromium: its DOM as the browser built it, after a screenshot (``folder``/shot.png)
    that must not be blank; the test skips, saying why, without Chromium."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (.ci/run installs Debian's chromium)")
    shot = folder / "shot.png"
    args = [CHROMIUM, *HEADLESS, f"--user-data-dir={folder / 'profile'}", f"--window-size={size}"]
    subprocess.run([*args, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, check=True)
    dom = subprocess.run([*args, "--dump-dom", page.as_uri()], capture_output=True, timeout=120, check=True, text=True)
    assert png_pixels(shot).std() > 10  # drawn, not blank
    return dom.stdout


def assert_axes_hold_their_data(fig: object) -> None:
    """Every axis of a matplotlib figure holds everything plotted on it: nothing clipped off the top or bottom
    (experiments/plots.py ``data_ylim``)."""
    from experiments.plots import data_ylim

    for ax in fig.axes:
        span = data_ylim(ax)
        if span is not None:
            low, high = sorted(ax.get_ylim())
            assert low <= span[0] and span[1] <= high, (ax.get_title(), span, (low, high))


# --- the engine's random schedules (tests/sim/test_engine.py; tests/sim/test_compiled.py runs some compiled and not)
SWITCHES = [(calendar, lines) for calendar in (True, False) for lines in (True, False)]


def schedule_run(
    seed: int,
    calendar: bool,
    lines: bool,
    near: int,
    per_s: float,
    grid: float,
    burst: int,
    inline: int = 64,
    widths: tuple[int, int] = (128, 2048),
) -> list:
    """A random schedule driven from callbacks, whose arguments are strings and ints: call_at and call_in at times on
    a grid of ``grid`` seconds (ties are common), pushes into two delay lines, SimPy timeouts of a process, handles
    cancelled before or after they ran, and a stop; the calendar engages once ``near`` entries wait. Returns every
    execution as (time, tag), and the run's events count."""
    # (the caller restores them)
    engine.NEAR, engine.BUCKETS_PER_S, engine.INLINE = near, per_s, inline
    engine.BUCKET_FEWEST, engine.BUCKET_MOST = widths
    rng = random.Random(seed)
    sim, seen = Sim(calendar=calendar, delay_lines=lines), []
    shared, other = sim.line(3 * grid), sim.line(0.5)
    handles = []

    def fire(tag: str) -> None:
        seen.append((sim.now, tag))
        if len(seen) > 4000:
            return
        for k in range(rng.choice([0, 1, 1, 2, 3])):
            # a tag, or an int (a row, as the load tests pass; or past 64 bits), which the calendar keeps raw
            ints = rng.randint(0, 10**6), rng.randint(-(2**70), 2**70)
            child, what = rng.choice((f"{tag}.{k}", f"{tag}.{k}", *ints)), rng.random()
            if what < 0.2:
                sim.call_in(grid * rng.randint(0, 40), fire, child)
            elif what < 0.35:
                sim.call_at(sim.now + rng.choice([0.0, grid, 1 / 256, 7.25, 2.0**60]), fire, child)
            elif what < 0.5:
                (shared if rng.random() < 0.7 else other).push(fire, child)
            elif what < 0.75:
                handles.append(sim.schedule(sim.now + grid * rng.randint(0, 30), fire, child))
            elif what < 0.85:
                handles.append(shared.schedule(fire, child))
            elif handles:
                handles.pop(rng.randrange(len(handles))).cancel()  # due yet or not, or already run

    def process():
        while len(seen) < 6000:  # (bounded: a schedule that lost its stop ends, and differs)
            yield sim.env.timeout(grid * rng.randint(0, 8))
            seen.append((sim.now, "process"))

    for i in range(burst):
        sim.call_at(grid * rng.randint(0, 20), fire, str(i))
    sim.env.process(process())
    stop_at = grid * rng.randint(50, 400)
    sim.call_at(stop_at, lambda _: sim.stop())
    sim.run(until=1e9)  # stopped at stop_at
    first = sim.now
    sim.run(until=stop_at + grid * rng.randint(1, 200))  # and run on
    return [*seen, ("events", sim.events), ("stopped", first), ("end", sim.now)]


def models_file(tmp_path: Path, kept: list[str], models: list[list[str]]) -> Path:
    """A parameter file (fit.toml: the start rate 363) and its plausible models beside it (the kept one ``kept``, the
    others ``models``): the envelope of --uncertainty in a test's folder."""
    params = tmp_path / "fit.toml"
    params.write_text("[limits]\nstart_rate = 363\n")
    doc = {"kept": {"candidate": "x", "loss": 1.0, "settings": kept}, "models": [{"settings": m} for m in models]}
    (tmp_path / "fit.plausible.json").write_text(json.dumps(doc))
    return params
