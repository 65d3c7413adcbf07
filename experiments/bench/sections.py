"""The bench's sections (experiments/bench/__init__.py): each measures one thing and returns its figures."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from experiments.bench.yardsticks import SIMFAAS_HORIZON_S, engine_mmc, heapq_mmc, simfaas_example, simpy_mmc
from models.inputs import loadtest
from models.runs import load_scenario
from sim import compiled
from sim.processes import child_preexec
from sim.runcache import CACHE_ENV

LOADTESTS = ["loadtest-remote", "loadtest-spawn", "loadtest-copies", "loadtest-batching", "loadtest-server"]


SANDBOX_CHILD = """
import json, resource, sys
from models.runs import load_scenario, run_scenario
sc = load_scenario(sys.argv[1], sys.argv[2:], [])
m = run_scenario(sc, seed=0)
print(json.dumps({"sandboxes": m["sandboxes_created"], "makespan_s": m["creation_makespan_s"], "wall_s": m["wall_s"],
                  "events": m["events"], "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


# a measuring child: none of the caller's input, Ctrl-C left to the bench, gone with it (sim/processes.py)
# the children measure runs, not runs read back from disk (sim/runcache.py)
CHILD: dict = {"stdin": subprocess.DEVNULL, "preexec_fn": child_preexec, "env": {**os.environ, CACHE_ENV: "off"}}

LOADTEST_CHILD = """
import json, resource, sys
from models.runs import load_scenario
from models.inputs import loadtest
sc = load_scenario(sys.argv[2], sys.argv[3:], [])
m = loadtest.run(sc, seed=0, jobs=int(sys.argv[1]))
peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(json.dumps({"calls": m["calls_issued"], "wall_s": m["wall_s"], "events": m["events"],
                  "peak_rss_mib": peak / 1024}))
"""


def loadtest_run(clients: int, jobs: int = 1) -> dict:
    """The app-copies load test at ``clients`` clients (a copy each), in a fresh process (no run-size budget), its
    parts on ``jobs`` processes; peak memory is the largest process's."""
    sets = [f"clients.count={clients}", f"function.copies={clients}"]
    cmd = [sys.executable, "-c", LOADTEST_CHILD, str(jobs), "loadtest-copies", *sets]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, **CHILD)
    return {"jobs": jobs, **json.loads(out.stdout)}


def mmc_ratio(servers: int, rate: float, horizon: float, repeat: int) -> dict:
    """The mmc model against the heapq loop on the same workload: customers per wall second, and their ratio."""
    sets = [
        f"duration_s={horizon}",
        "warmup_s=0",
        "drain_s=0",
        f"function.containers={servers}",
        f"arrivals.rate={rate}",
    ]
    sc = load_scenario("mmc", sets, [])
    on_events = load_scenario("mmc", [*sets, "shortcuts=none"], [])
    runs = {
        "model": lambda: loadtest.run(sc, seed=0)["calls_issued"],
        "events": lambda: loadtest.run(on_events, seed=0)["calls_issued"],
        "heapq": lambda: heapq_mmc(rate, servers, sc.work.mean, horizon, 0)[0],
        "simpy": lambda: simpy_mmc(rate, servers, sc.work.mean, horizon, 0)[0],
        "engine": lambda: engine_mmc(rate, servers, sc.work.mean, horizon, 0)[0],
    }
    # interleaved, the best of each: the machine's slow and fast spells fall on every member alike
    walls, served = dict.fromkeys(runs, math.inf), {}
    for _ in range(repeat):
        for name, fn in runs.items():
            t = time.perf_counter()
            served[name] = fn()
            walls[name] = min(walls[name], time.perf_counter() - t)
    rate_of = {name: served[name] / walls[name] for name in runs}
    loop_rate = rate_of["heapq"]
    return {
        "servers": servers,
        "customers": served["model"],
        **{f"{name}_wall_s": round(walls[name], 4) for name in runs},
        "model_customers_per_wall_s": round(rate_of["model"]),
        "heapq_customers_per_wall_s": round(loop_rate),
        "ratio": round(rate_of["model"] / loop_rate, 3),
        "ratio_on_events": round(rate_of["events"] / loop_rate, 3),
        "ratio_simpy_callbacks": round(rate_of["simpy"] / loop_rate, 3),
        "ratio_engine_floor": round(rate_of["engine"] / loop_rate, 3),
    }


SIMFAAS = [  # SimFaaS's README example, scaled per request
    "function.containers=0",
    "function.max_inputs=1",
    "autoscaler.interval_s=0.05",
    "autoscaler.scaledown_window_s=600",
    "arrivals.rate=0.9",
    "work=exponential(1.991)",
    "warmup_s=0",
    "duration_s=200000",
]


def simfaas(repeat: int, quick: bool) -> dict:
    """SimFaaS's README example on this project's model, with the idle decisions skipped and without, and beside
    them SimFaaS itself on the same example (``reference``; None where it is not installed)."""
    horizon = SIMFAAS_HORIZON_S / 10 if quick else SIMFAAS_HORIZON_S
    sets = [*SIMFAAS, f"duration_s={horizon:g}"]
    out: dict = {}
    for skip in (True, False):
        sc = load_scenario("mmc", [*sets, "shortcuts=all" if skip else "shortcuts=all,-idle_decisions"], [])
        wall, m = best_of(repeat if skip else 1, lambda sc=sc: loadtest.run(sc, seed=0))
        out["skipping" if skip else "every_grid_point"] = {
            "wall_s": round(wall, 3),
            "events": m["events"],
            "calls": m["calls_issued"],
            "cold_start_probability": round(m["cold_starts"] / m["inputs"], 5),
            "inputs_running_mean": round(m["inputs_in_flight_mean"], 3),
        }
    wall, ref = best_of(1, lambda: simfaas_example(horizon))
    out["reference"] = ref and {"wall_s": round(wall, 3), **ref}
    return out


def sandbox_run(sets: list[str], preset: str = "sandboxes-v2") -> dict:
    """One sandbox run in a fresh process, so that its peak memory is its own."""
    cmd = [sys.executable, "-c", SANDBOX_CHILD, preset, *sets]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, **CHILD)
    fig = json.loads(out.stdout)
    fig["events_per_wall_s"] = round(fig["events"] / fig["wall_s"])
    return fig


def growth(sizes: list[tuple[int, int]], axis: int) -> dict:
    """Wall seconds of sandboxes-v2 at each (sandboxes, workers), and the exponent of wall ∝ size^k along ``axis``
    (0: sandboxes, 1: workers), a least-squares line through the logs."""
    walls = [sandbox_run([f"sandboxes.count={n}", f"fleet.workers={w}"])["wall_s"] for n, w in sizes]
    xs = [size[axis] for size in sizes]
    k = float(np.polyfit(np.log(xs), np.log(walls), 1)[0])
    return {"sizes": xs, "wall_s": [round(w, 3) for w in walls], "exponent": round(k, 2)}


# the start-ups the bench times: Python alone, the notebook API's import, the main commands' --help
STARTUP = (
    ("-c", "pass"),
    ("-c", "import experiments.api"),
    ("-m", "experiments.run", "--help"),
    ("-m", "experiments.sweep", "--help"),
    ("-m", "experiments.whatif", "--help"),
    ("-m", "experiments.whatif", "plan", "--help"),
    ("-m", "calibration.fit", "--help"),
)


def startup(repeat: int) -> dict[str, float]:
    """Wall seconds of each of ``STARTUP`` in a fresh process (the best of ``repeat``), keyed by its arguments."""
    out = {}
    for argv in STARTUP:
        cmd = [sys.executable, *argv]
        wall, _ = best_of(repeat, lambda cmd=cmd: subprocess.run(cmd, capture_output=True, check=True, **CHILD))
        out[" ".join(argv[1:])] = round(wall, 3)
    return out


def best_of(repeat: int, fn):
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        wall = time.perf_counter() - t0
        if best is None or wall < best[0]:
            best = (wall, out)
    return best


def loadtests(quick: bool, repeat: int) -> dict:
    """Each load-test preset in this process: calls and events per wall second."""
    out = {}
    for preset in LOADTESTS:
        sc = load_scenario(preset, ["duration_s=10"] if quick else [], [])
        wall, m = best_of(repeat, lambda sc=sc: loadtest.run(sc, seed=0))
        out[preset] = {
            "calls": m["calls_issued"],
            "events": m["events"],
            "wall_s": round(wall, 4),
            "calls_per_wall_s": round(m["calls_issued"] / wall),
            "events_per_wall_s": round(m["events"] / wall),
        }
    return out


def sandboxes(quick: bool) -> dict:
    """sandboxes-v2 at a million creations on 20,000 and 100,000 workers and ten million on 500,000, and how its
    wall time grows with sandboxes and with workers."""
    runs = {}
    for workers in (20_000, 100_000):
        sets = [f"fleet.workers={workers}"] + (["sandboxes.count=50000"] if quick else [])
        runs[f"{workers}_workers"] = sandbox_run(sets)
    ten = ["sandboxes.count=100000", "fleet.workers=5000"] if quick else []
    runs["10M_on_500000_workers"] = sandbox_run(ten, "sandboxes-v2-10m")
    shrink = 16 if quick else 1
    growths = {
        "with_sandboxes": growth([(n // shrink, 20_000 // shrink) for n in (125_000, 250_000, 500_000, 1_000_000)], 0),
        "with_workers": growth([(250_000 // shrink, w // shrink) for w in (10_000, 40_000, 160_000, 640_000)], 1),
    }
    return {"sandboxes_v2": runs, "sandboxes_growth": growths}


def scale(quick: bool) -> dict:
    """The app-copies load test grown with clients, and at about ten million calls on one process and on two."""
    sizes = [2, 4, 8, 16] if quick else [50, 100, 200, 400]
    runs = [loadtest_run(n) for n in sizes]
    calls, walls = [r["calls"] for r in runs], [r["wall_s"] for r in runs]
    return {
        "loadtest_growth": {
            "clients": sizes,
            "calls": calls,
            "wall_s": [round(w, 2) for w in walls],
            "exponent": round(float(np.polyfit(np.log(calls), np.log(walls), 1)[0]), 2),
        },
        "loadtest_10M": [loadtest_run(20 if quick else 1000, jobs) for jobs in (1, 2)],
    }


def mmc(quick: bool, repeat: int) -> dict:
    """The M/M/c queue (ρ 0.9) at c = 10 and c = 100, 1.8 million customers each (quick: 18,000), side by side
    with its yardsticks."""
    horizon = 2000.0 if quick else 200_000.0
    return {"mmc": mmc_ratio(10, 9.0, horizon, repeat), "mmc_100": mmc_ratio(100, 90.0, horizon / 10, repeat)}


# What a user waits for, beside its target: (name, the command's arguments, its quick form's, the target wall s)
# the plan a user waits for: 3,000 calls/s of 2 s work, 100 inputs a container, at most 50 containers
PLAN = ["experiments.whatif", "plan", "--rate", "3000", "--p99", "2", "--set", "function.max_inputs=100"]
PLAN += ["--set", "work=constant(2)", "--set", "autoscaler.max_containers=50"]
PLAN_QUICK = ["--rate", "50", "--seeds", "1", "--ways", "remote"]
WAITS = (
    (
        "spawn_uncertainty",
        ["experiments.run", "loadtest-spawn", "--set", "load=arrivals", "--set", "arrivals.rate=1400", "--json"],
        ["--set", "duration_s=3600", "--uncertainty"],
        ["--set", "duration_s=10", "--set", "arrivals.rate=50", "--uncertainty", "--uncertainty-seeds", "1"],
        60.0,
    ),
    (
        "server_800",
        ["experiments.run", "loadtest-server", "--json"],
        ["--set", "clients.count=800"],
        ["--set", "clients.count=8"],
        20.0,
    ),
    ("plan", PLAN, [], PLAN_QUICK, 30.0),
    ("plan_uncertainty", [*PLAN, "--uncertainty"], [], PLAN_QUICK, 60.0),
)


def waits(quick: bool) -> dict:
    """Each of ``WAITS`` as a user runs it, in a fresh process, once (each takes tens of seconds, so one run's
    disturbance is small beside it): wall seconds and its target; an error is reported, not raised."""
    out = {}
    for name, argv, full, short, target in WAITS:
        cmd = [sys.executable, "-m", *argv, *(short if quick else full)]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, **CHILD)
        wall = time.perf_counter() - t0
        error = r.stderr.strip().splitlines()[-1] if r.returncode and r.stderr.strip() else ""
        out[name] = {"wall_s": round(wall, 2), "target_s": None if quick else target, "exit": r.returncode}
        out[name]["error"] = error
    return out


def suite() -> dict:
    """The README's test command (``python -m pytest -n auto``) and its fast lane, timed in this checkout (None
    where the bench runs from an installed copy without the tests)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "tests" / "conftest.py").exists():
        return {"skipped": "no tests/ beside experiments/ (an installed copy, not a checkout)"}
    out = {}
    for lane, extra in (("full", []), ("fast", ["--fast"])):
        cmd = [sys.executable, "-m", "pytest", "-n", "auto", "-q", "-p", "no:cacheprovider", *extra]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=root, capture_output=True, text=True, **CHILD)
        out[lane] = {"wall_s": round(time.perf_counter() - t0, 1), "passed": r.returncode == 0}
    return out


SECTIONS = ("loadtests", "sandboxes", "mmc", "simfaas", "scale", "startup", "waits", "suite")


def bench(quick: bool = False, repeat: int = 3, only: tuple[str, ...] = SECTIONS) -> dict:
    """The sections in ``only`` (quick: short runs, and never the test suite)."""
    figures: dict = {"core": compiled()}  # the modules that ran compiled (sim/build.py; none: the source)
    if "loadtests" in only:
        figures["loadtests"] = loadtests(quick, repeat)
    if "sandboxes" in only:
        figures.update(sandboxes(quick))
    if "mmc" in only:
        figures.update(mmc(quick, repeat))
    if "simfaas" in only:
        figures["simfaas"] = simfaas(repeat, quick)
    if "scale" in only:
        figures.update(scale(quick))
    if "startup" in only:
        figures["startup_s"] = startup(repeat)
    if "waits" in only:
        figures["waits"] = waits(quick)
    if "suite" in only and not quick:
        figures["suite"] = suite()
    return figures
