"""Fitting to traces (calibration/trace.py, calibration/sources.py): one schema for real and simulated runs, checked
reading, the statistics the simulator's own metrics agree with, and parameter recovery from simulated traces."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calibration import sources, trace
from calibration.candidates import CPU_1, HALF_RTT, SERVER_CPU, Candidate, Free, switches
from calibration.fit import fit_all
from calibration.fit import main as fit_main
from models.inputs import loadtest
from models.runs import load_scenario
from sim.stats import LogHistogram

SMALL = {"clients.count": 2, "clients.in_flight": 200, "duration_s": 30, "warmup_s": 0}


def simulated_trace(path: Path, sets: list[str], seed: int, what: str = "spawn", load: dict | None = None) -> Path:
    """The simulator's trace of a small load test (``run(..., records=True)``): ``load`` (default SMALL) is the
    experiment, recorded in the manifest; ``sets`` the parameters that made it (the fit does not see them)."""
    load = load or SMALL
    sc = load_scenario(f"loadtest-{what}", [*sets, *(f"{k}={v}" for k, v in load.items())], [])
    m = loadtest.run(sc, seed=seed, records=True)
    manifest, table = trace.of_run(m, sc, f"loadtest-{what}", load, what)
    return trace.write(path, manifest, table)


def test_a_simulated_trace_reads_back_and_its_statistics_are_the_runs_metrics(tmp_path):
    sc = load_scenario("loadtest-spawn", [f"{k}={v}" for k, v in SMALL.items()], [])
    m = loadtest.run(sc, seed=3, records=True)
    manifest, table = trace.of_run(m, sc, "loadtest-spawn", SMALL, "spawn")
    tr = trace.read(trace.write(tmp_path / "t", manifest, table))
    assert tr.kind == "calls" and len(tr.table) == m["inputs"] and tr.manifest["source"] == "scalesim"
    stats = trace.statistics(tr.table, tr.window)
    for k in ("calls_per_s", "first_n_back_s", "errors_total", "calls_issued"):
        assert stats[k] == m[k], k
    for k in ("added_latency_p50_s", "added_latency_p99_s"):  # the run's from its histogram, the trace's likewise
        assert stats[k] == pytest.approx(m[k], rel=2 * LogHistogram.ALPHA), k
    quarters = sum(stats[f"calls_back_per_s_q{q}"] for q in range(1, 5))
    assert quarters * 30 / 4 == pytest.approx(m["calls_back"], rel=1e-12)


def write_bad(path: Path, manifest: dict | str | bytes, table: pd.DataFrame | bytes | None) -> Path:
    path.mkdir()
    if isinstance(manifest, bytes):
        (path / trace.MANIFEST).write_bytes(manifest)
    else:
        (path / trace.MANIFEST).write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    if isinstance(table, bytes):
        (path / "calls.parquet").write_bytes(table)
    elif table is not None:
        table.to_parquet(path / "calls.parquet")
    return path


GOOD = {"kind": "calls", "what": "spawn", "source": "modal", "scenario": {"preset": "loadtest-spawn"}, "window": [0, 1]}
ROW = {
    "client": [0],
    "issued": [0.0],
    "started": [0.1],
    "finished": [1.0],
    "work": [0.5],
    "items": [1],
    "kind": [""],
    "attempts": [1],
    "initial": [True],
}


@pytest.mark.parametrize(
    "manifest, table, names",
    [
        (GOOD, pd.DataFrame({k: v for k, v in ROW.items() if k != "finished"}), ("calls.parquet", "'finished'")),
        (GOOD, pd.DataFrame({**ROW, "issued": ["soon"]}), ("calls.parquet", "'issued'")),
        (GOOD, pd.DataFrame({**ROW, "kind": ["timeout!"]}), ("calls.parquet", "'kind'")),
        (GOOD, pd.DataFrame({**ROW, "items": [0]}), ("calls.parquet", "'items'")),
        (GOOD, bytes(range(256)), ("calls.parquet", "not a Parquet")),
        (GOOD, None, ("calls.parquet", "missing")),
        (b"\xff\xfe\x00", pd.DataFrame(ROW), ("manifest.json", "not JSON")),
        ({**GOOD, "window": [1, float("inf")]}, pd.DataFrame(ROW), ("manifest.json", "window")),
        ({k: v for k, v in GOOD.items() if k != "scenario"}, pd.DataFrame(ROW), ("manifest.json", "'scenario'")),
        ({**GOOD, "kind": "pages"}, pd.DataFrame(ROW), ("manifest.json", "kind")),
    ],
    ids=[
        "missing-column",
        "text-times",
        "unknown-kind",
        "zero-items",
        "binary",
        "no-table",
        "binary-manifest",
        "inf",
        "no-scenario",
        "bad-kind",
    ],
)
def test_a_malformed_trace_exits_2_naming_the_file_and_column(tmp_path, capsys, manifest, table, names):
    path = write_bad(tmp_path / "t", manifest, table)
    assert fit_main([str(path), "--quick", "--seeds", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    for name in names:
        assert name in err, err


def test_sources_are_one_model_at_a_time_and_unknown_ones_exit_2(tmp_path, capsys):
    path = simulated_trace(tmp_path / "t", [], seed=0)
    assert fit_main([str(path), "coldstart", "--quick"]) == 2
    assert fit_main(["nosuch"]) == 2
    assert fit_main([str(path), "--leave-out", "spawn"]) == 2  # a reference table's approaches; here only a trace
    err = capsys.readouterr().err.splitlines()
    assert "one model at a time" in err[0] and "nosuch: not a source" in err[1] and "--leave-out" in err[2]


@pytest.mark.slow
def test_parameters_are_recovered_from_a_simulated_trace_and_the_unidentifiable_one_is_flagged(tmp_path):
    # Known parameters; two traces from seed 7 (their noise), fitted with common random numbers on seeds 0 and 1. The
    # spawn trace sees the start limit (it binds: 400 calls in flight want 73 starts/s); a lightly loaded .remote
    # trace (20 calls in flight, warm containers after the first seconds) sees the round trip's legs, its added
    # latency being little else. The server's CPU per request never acts in either, so the fit must flag it.
    cand = Candidate(
        "recovery",
        "start limit, round trip and an inert parameter",
        switches(**CPU_1),
        (Free("start_rate", "limits.start_rate", 10.0, 1000.0, 100.0), HALF_RTT, replace(SERVER_CPU, grid=())),
    )
    truth = {"start_rate": 40.0, "overhead_leg_s": 0.3, "cpu_per_request_s": 0.004}
    sets = cand.settings(tuple(truth.values()))
    light = {**SMALL, "clients.count": 1, "clients.in_flight": 20}
    paths = [simulated_trace(tmp_path / "spawn", sets, 7)]
    paths.append(simulated_trace(tmp_path / "remote", sets, 7, "remote", light))
    srcs = tuple(sources.load(str(p)) for p in paths)
    (fit,), _ = fit_all([cand], [0, 1], 1, False, None, 60, 7, traces=srcs, reference=None)
    got = dict(zip(truth, fit.values, strict=True))
    pinned = {p.free.name: p.pinned for p in fit.profiles}
    assert pinned == {"start_rate": True, "overhead_leg_s": True, "cpu_per_request_s": False}, fit.profiles
    for name in ("start_rate", "overhead_leg_s"):
        assert got[name] == pytest.approx(truth[name], rel=0.10), (name, got)


def test_a_trace_of_starts_gives_the_cold_start_distribution(tmp_path):
    rng = np.random.default_rng(0)
    total = rng.lognormal(np.log(2.0), 0.4, 2000)
    t = trace.write(
        tmp_path / "starts",
        {**GOOD, "kind": "starts", "what": "coldstart", "scenario": {"preset": "coldstart-torch"}},
        pd.DataFrame({"t": np.arange(2000.0), "total": total}),
    )
    out = tmp_path / "cold.toml"
    assert fit_main([str(t), "--out", str(out)]) == 0
    sc = load_scenario("loadtest-spawn", [], [str(out)])
    assert sc.autoscaler.cold_start.median == pytest.approx(2.0, rel=0.05)


def test_a_fitted_parameter_file_is_accepted_by_a_sweep(tmp_path):
    from experiments import sweep

    params = tmp_path / "p.toml"
    params.write_text("[limits]\nstart_rate = 123.0\n")
    out = tmp_path / "sw"
    argv = ["loadtest-spawn", "--params", str(params), "--set", "duration_s=2", "--set", "clients.in_flight=10"]
    assert sweep.main([*argv, "--seeds", "1", "--jobs", "1", "--out", str(out), "--no-report"]) == 0
    assert (pd.read_csv(out / "results.csv")["limits.start_rate"] == 123.0).all()


# --- traces that cannot be right are refused before fitting; a fit never writes a file run would reject ------------
CALLS_MF = {
    **GOOD,
    "scenario": {"preset": "loadtest-spawn", "set": {"duration_s": 2, "clients.count": 1}},
    "window": [0, 2],
}
THREE = {
    "client": [0, 0, 0],
    "issued": [0.0, 0.5, 1.0],
    "started": [0.1, 0.6, 1.1],
    "finished": [1.0, 1.5, 2.0],
    "work": [0.5, 0.5, 0.5],
    "items": [1, 1, 1],
    "kind": ["", "", ""],
    "attempts": [1, 1, 1],
    "initial": [True, False, False],
    "ended": [0.6, 1.1, 1.6],
}


def changed(column: str, value: float, row: int = 1) -> pd.DataFrame:
    cols = {k: list(v) for k, v in THREE.items()}
    cols[column][row] = value
    return pd.DataFrame(cols)


@pytest.mark.parametrize(
    "manifest, table, names",
    [
        (CALLS_MF, changed("issued", float("nan")), ("calls.parquet", "'issued'", "row 1", "nan")),
        (CALLS_MF, changed("issued", -1.0), ("calls.parquet", "'issued'", "row 1", "-1")),
        (CALLS_MF, changed("finished", 0.25), ("calls.parquet", "'finished'", "row 1", "before the call was issued")),
        (CALLS_MF, changed("work", -0.5), ("calls.parquet", "'work'", "row 1")),
        (CALLS_MF, changed("work", 1.2), ("calls.parquet", "'finished'", "row 1", "sooner than its own work")),
        (CALLS_MF, changed("started", -3.0), ("calls.parquet", "'started'", "row 1")),
        (CALLS_MF, changed("ended", 0.5), ("calls.parquet", "'ended'", "row 1", "before the call's work started")),
        ({**CALLS_MF, "window": [-10, -5]}, pd.DataFrame(THREE), ("manifest.json", "window", "before the run")),
        ({**CALLS_MF, "window": [5, 6]}, pd.DataFrame(THREE), ("manifest.json", "holds no call issued in it")),
        ({**CALLS_MF, "window": [0, 1.5]}, pd.DataFrame(THREE), ("manifest.json", "not its experiment's")),
    ],
    ids=[
        "nan-issued",
        "negative-issued",
        "finished-before-issued",
        "negative-work",
        "back-before-its-work",
        "negative-started",
        "ended-before-started",
        "window-before-the-run",
        "window-without-calls",
        "window-not-the-experiments",
    ],
)
def test_a_trace_that_cannot_be_right_exits_2_naming_the_file_column_and_row(tmp_path, capsys, manifest, table, names):
    path = write_bad(tmp_path / "t", manifest, table)
    assert fit_main([str(path), "--quick", "--seeds", "1", "--jobs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for name in names:
        assert name in err, err


def starts_trace(path: Path, total: list[float]) -> Path:
    mf = {**GOOD, "kind": "starts", "what": "coldstart", "scenario": {"preset": "coldstart-torch"}}
    return trace.write(path, mf, pd.DataFrame({"t": np.arange(float(len(total))), "total": total}))


def test_starts_that_all_took_the_same_time_give_a_constant_that_run_loads(tmp_path):
    out = tmp_path / "cold.toml"
    assert fit_main([str(starts_trace(tmp_path / "starts", [3.0] * 50)), "--out", str(out)]) == 0
    assert 'cold_start = "constant(3)"' in out.read_text()  # not lognormal(3, 0), which run rejects
    assert load_scenario("loadtest-spawn", [], [str(out)]).autoscaler.cold_start.mean == 3.0


@pytest.mark.parametrize(
    "total",
    [[1e-300, 1e300] * 25, [1e308] * 50, list(np.geomspace(1e-100, 1e100, 50))],
    ids=["a-sigma-that-overflows", "huge-and-alike", "a-hundred-decades"],
)
def test_starts_whose_fit_run_would_refuse_exit_2_and_write_nothing(tmp_path, capsys, total):
    out = tmp_path / "cold.toml"
    assert fit_main([str(starts_trace(tmp_path / "starts", total)), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "starts.parquet" in err and "'total'" in err, err
    assert not out.exists()


def test_a_start_or_a_sandbox_out_of_order_exits_2_naming_the_column(tmp_path, capsys):
    t = starts_trace(tmp_path / "starts", [2.0, 3.0])
    pd.DataFrame({"t": [0.0, -1.0], "total": [2.0, 3.0]}).to_parquet(t / "starts.parquet")
    assert fit_main([str(t)]) == 2
    mf = {**GOOD, "kind": "sandboxes", "what": "sandboxes", "scenario": {"preset": "sandboxes-v2"}}
    rows = {"requested": [0.0, 1.0], "placed": [0.5, 0.5], "running": [1.0, 2.0]}
    s = trace.write(tmp_path / "sb", mf, pd.DataFrame(rows))
    assert fit_main([str(s), "--seeds", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "'t', row 1" in err[0] and "'placed', row 1" in err[1] and "before the sandbox was requested" in err[1]


def test_a_parameter_file_run_would_reject_is_never_written(tmp_path):
    from calibration.report import write_settings
    from sim.scenario import ScenarioError

    out = tmp_path / "p.toml"
    with pytest.raises(ScenarioError, match=r"p\.toml: not written.*cold_start"):
        write_settings(out, ["autoscaler.cold_start=lognormal(3, 0)"], ["a zero-spread fit"], "loadtest-spawn")
    assert not out.exists() and list(tmp_path.iterdir()) == []  # nor the file it was checked as
    write_settings(out, ["autoscaler.cold_start=constant(3)"], ["a constant"], "loadtest-spawn")
    assert load_scenario("loadtest-spawn", [], [str(out)]).autoscaler.cold_start.mean == 3.0


def test_calls_that_never_came_back_are_unfinished_and_no_trace_of_them_is_fitted(tmp_path, capsys):
    """A call cancelled when the drain ended is of kind ``unfinished``, never a success; a run whose calls did not
    come back is not a measurement (calibration/ways/loadtest.py ``unmeasured``), and the fit refuses its trace."""
    from calibration.callers import _row, calls_table
    from calibration.ways.loadtest import UNFINISHED_SHARE, unmeasured

    rows = [_row(0, float(i), [1.0], True) for i in range(200)]
    for r in rows[:150]:
        r["finished"] = r["issued"] + 1.0
    table = calls_table(rows)
    assert (table["kind"] == trace.UNFINISHED).sum() == 50 and (table["kind"] == "").sum() == 150
    assert "50 of 200 calls never came back" in unmeasured(table, drained=True)
    assert unmeasured(table, drained=False) is None  # a drain shorter than the work: cut off, and said so
    few = table.copy()
    few.loc[few["kind"] == trace.UNFINISHED, "kind"] = ""
    few.loc[: int(UNFINISHED_SHARE * 200) - 1, "kind"] = trace.UNFINISHED
    assert unmeasured(few, drained=True) is None
    none_back = calls_table([_row(0, 0.0, [1.0], True), _row(1, 0.0, [1.0], True)])
    assert "none of the 2 calls came back" in unmeasured(none_back, drained=True)
    failed = table.assign(kind="other", finished=table["issued"] + 1.0)
    assert "none of the 200 calls succeeded (other 200" in unmeasured(failed, drained=True)
    manifest = {"kind": "calls", "what": "spawn", "source": "modal", "window": [0, 60],
                "scenario": {"preset": "loadtest-spawn", "set": {}}}  # fmt: skip
    path = trace.write(tmp_path / "t", manifest, none_back.drop(columns=["container", "ended"]))
    assert fit_main([str(path), "--quick", "--seeds", "1"]) == 2
    assert "no call came back" in capsys.readouterr().err
    path = trace.write(tmp_path / "f", manifest, failed.drop(columns=["container", "ended"]))
    assert fit_main([str(path), "--quick", "--seeds", "1"]) == 2
    assert "no call succeeded" in capsys.readouterr().err
