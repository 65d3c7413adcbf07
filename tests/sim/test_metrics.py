"""Declared metrics (sim/metrics.py): a run reports exactly the metrics its model declares, the parts of a run
combine by the declared rules, a results table's columns come from the declaration (no probe run), and the metrics
reference page is the declaration's (tests/docs/test_docs.py)."""

from __future__ import annotations

import dataclasses
import html
import math

import pytest

from experiments import api, report
from experiments.results import columns, read_results
from experiments.spec import load_spec
from experiments.sweep import run_point
from models.inputs import loadtest, parts
from models.inputs.approaches import base
from models.presets import PRESETS, resolve
from models.registry import MODELS
from models.runs import load_scenario, run_scenario
from sim.guard import UNGUARDED
from sim.metrics import Metric, Metrics
from sim.scenario import ScenarioError
from tests.support import scenario

PRESET_NAMES = sorted(p.stem for p in PRESETS.glob("*.toml"))
SMALL = {"sandboxes": ["sandboxes.count=500"], "coldstart": ["coldstart.starts=50"], "function": []}


def small(name: str):
    """A preset made small enough for a test (sandboxes and starts; the load tests as they are)."""
    model = load_scenario(name).model
    return load_scenario(name, SMALL[model])


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_a_run_reports_exactly_its_declared_metrics_in_their_order(name):
    sc = small(name)
    model = MODELS[sc.model]
    declared = model.metrics(sc)
    raw = model.run(sc, seed=0)
    assert set(raw) == set(declared.names())  # every declared metric is reported, every reported one declared
    declared.check(raw)  # and each is of its declared kind (counts over their declared keys, ...)
    m = run_scenario(sc, seed=0)
    assert list(m) == declared.names()
    # a results row holds exactly the declared columns, which the table's header has, before wall_s and error
    metric_columns = declared.columns()
    assert list(declared.flatten(m)) == metric_columns
    header = columns([resolve(name, SMALL[sc.model])])
    assert header[-2 - len(metric_columns) :] == [*metric_columns, "wall_s", "error"]


def test_an_undeclared_or_missing_metric_fails_the_run(monkeypatch):
    model = MODELS["coldstart"]
    sc = small("coldstart-torch")

    def reporting(change):
        monkeypatch.setitem(
            MODELS, "coldstart", dataclasses.replace(model, run=lambda *a, **k: change(model.run(*a, **k)))
        )

    reporting(lambda m: {**m, "new_counter": 3})
    with pytest.raises(RuntimeError, match=r"undeclared \['new_counter'\]"):
        run_scenario(sc)
    reporting(lambda m: {k: v for k, v in m.items() if k != "starts"})
    with pytest.raises(RuntimeError, match=r"declared but not reported \['starts'\]"):
        run_scenario(sc)
    reporting(lambda m: {**m, "starts": "many"})
    with pytest.raises(RuntimeError, match="metric starts: a number, got str"):
        run_scenario(sc)


def test_counts_are_checked_against_their_declared_keys():
    util = Metric("utilization", "share", "derived", "busy", kind="counts", keys=("a", "b"))
    errors = Metric("errors_by_kind", "calls", "sum", "failed", kind="counts", keys=("x",), other=True)
    Metrics(util, errors).check({"utilization": {"a": 0.5, "b": 1.0}, "errors_by_kind": {"x": 1, "zz": 2}})
    with pytest.raises(RuntimeError, match="keys"):
        Metrics(util).check({"utilization": {"a": 0.5, "c": 1.0}})
    assert Metrics(util, errors).columns() == ["utilization.a", "utilization.b", "errors.x", "errors.other"]
    assert Metrics(errors).flatten({"errors_by_kind": {"zz": 2, "yy": 1}}) == {"errors.x": 0, "errors.other": 3}


COPIES = {
    "approach": "remote",
    "work": "uniform(1, 10)",
    "duration_s": 20.0,
    "function": {"max_inputs": 50, "copies": 6, "containers": 1},
    "clients": {"count": 4, "in_flight": 60, "retry": "backoff"},
    "limits": {"enabled": True, "sync_accept_burst": 20, "sync_accept_rate": 5.0},
}


def test_the_parts_of_a_run_combine_by_their_declared_rules(monkeypatch):
    """Each part's own metrics, folded by the declared rules, are the run's (float sums to rounding): for every
    metric not ``derived``. The run's metrics are those of ``loadtest.run``."""
    monkeypatch.setattr(base, "PART_CALLS", 1)  # a part per copy
    sc = scenario(COPIES)
    n = parts.APPROACHES["remote"].parts(sc)
    assert n == 5
    used = loadtest.SHORTCUTS.used(sc)
    phases = parts._phases(sc, 0, range(n), n, False, False, used, UNGUARDED, lambda i: None)
    ends = next(phases)
    end = parts.run_end(sc, ends)
    outcomes = phases.send((end, not any(out for out, _, _ in ends)))
    each = [loadtest.outcome_metrics(sc, o, end) for o in outcomes]
    total = outcomes[0]
    for o in outcomes[1:]:
        total.absorb(o)
    whole = loadtest.outcome_metrics(sc, total, end)
    ran = loadtest.run(sc, seed=0)
    assert {k: v for k, v in ran.items() if k not in ("wall_s", "shortcuts_used")} == whole
    assert sum(m["rejections_by_kind"].get("rate_limited", 0) for m in each) > 0  # the limits did reject
    # the outcome combines its counts by their rules (so the fold below agrees with it by construction): the rules
    # themselves, against what the run must give: six copies of one warm container each, all along the run
    assert whole["containers_peak"] == 6 and whole["container_seconds"] == pytest.approx(6 * whole["sim_time_s"])
    combined = [m for m in loadtest.METRICS if m.combine != "derived" and m.name in whole]
    assert {m.name for m in combined} >= {"calls", "errors_by_kind", "containers_peak", "events", "sim_time_s"}
    for m in combined:
        value = each[0][m.name]
        for more in each[1:]:
            value = m.combined(value, more[m.name])
        if m.kind == "counts":
            assert {k: v for k, v in value.items() if v} == {k: v for k, v in whole[m.name].items() if v}, m.name
        else:
            assert value == pytest.approx(whole[m.name], rel=1e-12), m.name


def test_a_list_of_names_is_one_column_and_parts_take_their_union(monkeypatch, tmp_path):
    used = Metric("paths_seen", "names", "union", "a list of names a run reports", kind="names")
    assert used.combined(["fifo", "calendar"], ["calendar", "parts"]) == ["calendar", "fifo", "parts"]
    assert Metrics(used).flatten({"paths_seen": ["calendar", "fifo"]}) == {"paths_seen": "calendar;fifo"}
    with pytest.raises(RuntimeError, match="a list of names"):
        Metrics(used).check({"paths_seen": "fifo"})
    # declared once, a model's new metric reaches the run's output and a sweep's results table
    model = MODELS["coldstart"]
    declared = model.metrics(small("coldstart-torch")) + Metrics(used)
    real = model.run
    patched = dataclasses.replace(
        model, metrics=lambda sc: declared, run=lambda *a, **k: {**real(*a, **k), "paths_seen": ["x", "y"]}
    )
    monkeypatch.setitem(MODELS, "coldstart", patched)
    assert run_scenario(small("coldstart-torch"))["paths_seen"] == ["x", "y"]
    spec = load_spec("coldstart-torch", ["coldstart.starts=20"], ["coldstart.mode=lazy,snapshot"], 1, False)
    assert "paths_seen" in columns(p.tree() for p in spec.points)
    assert run_point(spec.points[0], 0)["paths_seen"] == "x;y"


def test_a_sweep_with_a_warm_up_keeps_every_metric(tmp_path):
    """Issue 26: the probe (duration_s = 1) failed for warmup_s >= 1 and the sweep dropped every metric."""
    assert load_scenario("mmc").warmup_s >= 1
    table = api.sweep("mmc", factors={"arrivals.rate": [5, 9]}, out=tmp_path / "mmc")
    assert (table["error"] == "").all()
    declared = MODELS["function"].metrics(load_scenario("mmc")).columns()
    assert set(declared) <= set(table.columns)
    assert table["calls_per_s"].tolist() == pytest.approx([5, 9], rel=0.05)
    assert read_results(tmp_path / "mmc" / "results.csv")["wait_mean_s"].notna().all()


def test_a_sweep_over_control_planes_keeps_each_planes_own_metrics(tmp_path):
    """The columns come from every point's scenario (the probe ran each base scenario only: a plane set by a factor
    lost its own metrics, and the row its numbers)."""
    factors = {"control_plane": ["modal-v2", "modal-v1", "kubernetes"]}
    table = api.sweep("sandboxes-v2", set={"sandboxes.count": 200}, factors=factors, out=tmp_path / "planes")
    assert (table["error"] == "").all()
    by_plane = table.set_index("control_plane")
    assert by_plane.loc["modal-v1", "utilization.postgres"] > 0 and by_plane.loc["kubernetes", "etcd_writes"] > 0
    assert by_plane.loc["modal-v2", "stream_lag_max_s"] > 0 and math.isnan(by_plane.loc["modal-v2", "resamples"])


def test_a_table_written_with_other_columns_is_not_appended_to(tmp_path):
    out = tmp_path / "mmc"
    api.sweep("mmc", factors={"arrivals.rate": [5]}, out=out)
    results = out / "results.csv"
    lines = results.read_text().splitlines()
    results.write_text("\n".join([lines[0].replace(",wait_mean_s,", ",wait_s,"), *lines[1:]]) + "\n")
    with pytest.raises(ScenarioError, match=r"written with other columns .*wait_mean_s differ"):
        api.sweep("mmc", factors={"arrivals.rate": [5]}, out=out)  # (the same sweep: its spec.json agrees)


def test_the_report_explains_its_headline_metrics_from_the_declaration(tmp_path):
    api.sweep("mmc", factors={"arrivals.rate": [5]}, out=tmp_path / "mmc")
    page = report.make_report(read_results(tmp_path / "mmc" / "results.csv"), tmp_path / "report").read_text()
    declared = MODELS["function"].metrics(load_scenario("mmc"))
    for name in MODELS["function"].headline:
        assert f"<td>{name}</td><td>{declared[name].unit}</td><td>{html.escape(declared[name].doc)}</td>" in page


def test_a_metric_declaration_refuses_what_it_cannot_mean():
    with pytest.raises(ValueError, match="combine 'avg'"):
        Metric("x", "s", "avg", "?")
    with pytest.raises(ValueError, match="kind counts"):
        Metric("x", "s", "sum", "?", keys=("a",))
    with pytest.raises(ValueError, match="declared twice"):
        Metrics(Metric("x", "s", "sum", "?"), Metric("x", "s", "max", "?"))
    with pytest.raises(ValueError, match="derived"):
        Metric("x", "s", "derived", "?").combined(1.0, 2.0)
    assert math.isclose(Metric("x", "s", "sum", "?").combined(0.1, 0.2), 0.30000000000000004)


def test_an_open_loops_headline_is_what_comes_back_in_the_window_and_its_ideal_is_the_windows_rate():
    # the demand steps from 50 to 100 calls/s at 100 s, when the window begins: the window's ideal is 100
    sets = ["load=arrivals", "arrivals.rate=100", "duration_s=200", "warmup_s=100", "arrivals.shape=steps(100, 0.5, 1)"]
    m = run_scenario(load_scenario("loadtest-spawn", sets, []))
    assert m["ideal_calls_per_s"] == pytest.approx(100.0, rel=1e-12)
    assert m["calls_per_s"] == m["calls_back_per_s"]
    # offered far past spawn's start limit, what comes back is what the limit starts, not what was issued and
    # drained after the window
    sets = ["load=arrivals", "arrivals.rate=1400", "duration_s=60", "warmup_s=20", "drain_s=5"]
    sc = load_scenario("loadtest-spawn", sets, [])
    m = run_scenario(sc)
    admits = sc.limits.start_rate + sc.limits.start_burst / (sc.duration_s - sc.warmup_s)
    assert m["calls_per_s"] == m["calls_back_per_s"] <= admits
    # a closed loop keeps the reference test's rule: the calls issued in the window and back, whenever
    m = run_scenario(load_scenario("loadtest-spawn", ["clients.count=2", "duration_s=20"], []))
    assert m["calls_per_s"] == m["calls"] / 20
