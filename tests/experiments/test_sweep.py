"""experiments.sweep and experiments.report: spec parsing, resume, determinism, errors per point, the report."""

from __future__ import annotations

import csv
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest

from experiments import plots, report, results, spec, sweep
from models.registry import MODELS
from sim.cli import human
from sim.scenario import ScenarioError
from tests.support import assert_axes_hold_their_data, in_chromium

SMALL = ["--set", "duration_s=10", "--factor", "clients.count=1,2", "--seeds", "2", "--no-report"]


def write_spec(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "spec.toml"
    f.write_text(text)
    return f


@pytest.mark.parametrize(
    "text, names",
    [
        ('name = "x"\nseeds = 2\nbogus = 1\n[base]\nscenario = "loadtest-spawn"\n', "bogus"),
        ('name = "x"\nseeds = 0\n[base]\nscenario = "loadtest-spawn"\n', "seeds"),
        ('name = "x"\n[base]\nscenario = "loadtest-spawn"\n[factors]\n"clients.cuont" = [1]\n', "clients.cuont"),
        ('name = "x"\n[base]\nscenario = "loadtest-spawn"\n[factors]\n"clients.count" = 4\n', "clients.count"),
        ('name = "x"\n[base]\nscenario = "no-such-preset"\n', "no-such-preset"),
        ('name = "x"\n[base]\nscenario = "loadtest-spawn"\nset = { "limits.rate" = 3 }\n', "limits.rate"),
        ('name = "x"\n[[variants]]\nname = "a"\nscenario = "loadtest-spawn"\ncolour = 1\n', "colour"),
        ('name = "x"\nseeds = \n', "spec.toml"),
    ],
)
def test_bad_specs_exit_2_naming_the_key(tmp_path, capsys, text, names):
    assert sweep.main([str(write_spec(tmp_path, text)), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert names in err and "\n" not in err


@pytest.mark.parametrize(
    "args, names",
    [
        (["--factor", "clients.count"], "--factor"),
        (["--factor", "nope.key=1,2"], "nope.key"),
        (["--set", "clients.count"], "--set"),
        (["--seeds", "0"], "seeds"),
        (["--jobs", "0"], "--jobs"),
        (["no-such-spec"], "no-such-spec"),
        (["loadtest-spawn", "--quick"], "quick"),
    ],
)
def test_bad_command_lines_exit_2(tmp_path, capsys, args, names):
    code = _exit_code(lambda: sweep.main([*args, "--out", str(tmp_path / "o")]))
    assert code == 2
    assert names in capsys.readouterr().err


def _exit_code(fn) -> int:
    try:
        return fn()
    except SystemExit as e:
        return e.code


def test_spec_expansion_and_command_line():
    s = spec.load_spec(None, ["duration_s=5"], ["clients.count=1,2"], seeds=2)
    assert s.name == "loadtest-scale" and s.seeds == 2
    assert len(s.points) == 5 * 2  # five approaches × two scales
    copies = [p for p in s.points if p.variant == "copies"]
    assert ("function.copies", 0) in copies[0].sets and ("clients.count", 2) in copies[1].sets
    assert s.points[s.report_point].variant == "spawn"
    assert dict(s.points[s.report_point].sets)["clients.count"] == 2  # nearest to the reference 8
    quick = spec.load_spec(None, quick=True)
    assert quick.seeds == 2 and quick.factors["clients.count"] == [1, 4, 16]
    single = spec.load_spec("loadtest-spawn", [], ["clients.count=1,2,3"])
    assert [p.variant for p in single.points] == ["base"] * 3


def test_results_identical_with_one_and_two_jobs(tmp_path):
    tables = []
    for jobs in (1, 2):
        out = tmp_path / f"j{jobs}"
        assert sweep.main(["loadtest-copies", *SMALL, "--jobs", str(jobs), "--out", str(out)]) == 0
        tables.append(pd.read_parquet(out / "results.parquet").drop(columns=["wall_s"]))
    pd.testing.assert_frame_equal(tables[0], tables[1])
    assert len(tables[0]) == 4 and (tables[0]["error"] == "").all()
    # common random numbers: seed 0 at both points draws the same work (the same first call's work sample)
    assert tables[0]["seed"].tolist() == [0, 1, 0, 1]


def test_a_failing_point_records_its_error_and_the_rest_complete(tmp_path):
    out = tmp_path / "o"
    args = ["loadtest-spawn", "--set", "duration_s=5", "--factor", "limits.start_rate=100,-1,1000", "--seeds", "1"]
    assert sweep.main([*args, "--out", str(out), "--jobs", "1", "--no-report"]) == 0
    t = pd.read_parquet(out / "results.parquet")
    assert len(t) == 3
    bad = t[t["limits.start_rate"] == -1]
    assert "limits.start_rate" in bad["error"].iloc[0] and "must be > 0" in bad["error"].iloc[0]
    assert (t[t["limits.start_rate"] != -1]["error"] == "").all()
    assert t[t["limits.start_rate"] != -1]["calls_per_s"].notna().all()


@pytest.mark.slow
def test_a_killed_sweep_resumes_without_losing_or_duplicating(tmp_path):
    out = tmp_path / "o"
    cmd = [
        sys.executable,
        "-m",
        "experiments.sweep",
        "loadtest-copies",
        "--set",
        "duration_s=30",
        "--factor",
        "clients.count=1,2,3,4,5,6",
        "--seeds",
        "3",
        "--jobs",
        "2",
        "--no-report",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    results = out / "results.csv"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # kill once some rows, not all, are written
        if results.exists() and 3 <= sum(1 for _ in results.open()) - 1 < 18:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with results.open("a") as f:
        f.write("7,copies,0,torn")  # a row cut by the kill: no newline
    before = sum(1 for _ in csv.DictReader(results.open()))
    assert 0 < before < 18 + 1
    assert subprocess.run(cmd, capture_output=True, timeout=300).returncode == 0
    t = pd.read_parquet(out / "results.parquet")
    assert len(t) == 18 and not t.duplicated(["point", "seed"]).any()
    assert (t["error"] == "").all()
    # a different sweep into the same folder is refused; --fresh starts over
    other = [*cmd[:-2], "--seeds", "1", "--out", str(out)]
    assert subprocess.run(other, capture_output=True, timeout=60).returncode == 2
    assert subprocess.run([*other, "--fresh"], capture_output=True, timeout=120).returncode == 0
    assert len(pd.read_parquet(out / "results.parquet")) == 6


@pytest.mark.slow
def test_quick_sweep_report_embeds_every_figure_and_each_png_has_data(tmp_path):
    out = tmp_path / "quick"
    assert sweep.main(["--quick", "--out", str(out)]) == 0
    page = (out / "report.html").read_text()
    pngs = sorted(out.glob("*.png"))
    names = {p.stem for p in pngs}
    assert names == {"throughput", "latency", "containers", "cost", "errors", "binding", "timeseries"}
    assert page.count("data:image/png;base64,") == len(pngs)
    assert "<img" in page and 'src="http' not in page  # self-contained
    for p in pngs:
        img = mpimg.imread(p)
        assert img.shape[0] > 200 and img.shape[1] > 200
        assert np.unique(img.reshape(-1, img.shape[-1]), axis=0).shape[0] > 50  # drawn, not blank
    for series in ("remote", "spawn", "copies", "batching", "server"):
        assert series in page
    assert "Where each series leaves the ideal line" in page and "accept_rate" in page
    assert "simpy" in page and "numpy" in page  # versions
    tables = "".join(re.findall(r"<table.*?</table>", page, re.S))
    assert page.count('<div class="wide">') >= 2 and not re.search(r"\de[+-]\d", tables)  # they scroll; no e-notation
    assert report.main([str(tmp_path / "missing.parquet")]) == 2  # (a redraw: tests/models/test_coldstart.py)
    # what the numbers rest on: 16 clients are more than the calibration's 8, flagged; no ranges without --uncertainty
    dom = in_chromium(out / "report.html", tmp_path)
    assert "What the numbers rest on" in dom and "Extrapolated" in dom and "clients.count 16 &gt; 8" in dom
    assert "No ranges: sweep with --uncertainty" in dom and "<pre>" not in dom.split("<details>")[0]
    assert "<th>package</th>" in dom  # the versions: a table
    summary = pd.read_csv(out / "summary.csv")
    summary["unstable"] = summary["unstable"].fillna("")
    for spec_ in MODELS["function"].figures:  # every figure holds its data: nothing clipped
        assert_axes_hold_their_data(plots.draw(summary, "clients.count", spec_))


def test_read_results_rejects_a_table_that_is_not_one(tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("a,b\n1,2\n")
    with pytest.raises(ScenarioError, match="not a results table"):
        results.read_results(f)


@pytest.mark.parametrize(
    "value, text",
    [(21370.0, "21,370"), (1454.5454, "1,455"), (12.345, "12.3"), (0.5831, "0.583"), (3.0, "3"), (4.2e-4, "0.00042")],
)
def test_report_numbers_are_formatted_for_people(value, text):
    assert human(value) == text
    assert human(float("nan")) == ""


@pytest.mark.parametrize(
    "value, unit, text",
    [
        (25165824000, "bytes", "25.2 GB"),
        (4.1372, "$/h", "$4.14/h"),
        (0.2566, "$", "$0.257"),
        (19740.2, "calls/s", "19,740"),
        ({"rate_limited": 5000, "queue_full": 3}, "calls", "rate_limited 5,000, queue_full 3"),
    ],
)
def test_numbers_are_written_as_people_write_them(value, unit, text):
    assert human(value, unit) == text


def test_factor_values_may_hold_commas_inside_parentheses():
    assert spec.split_values("uniform(1, 2),constant(3)") == ["uniform(1, 2)", "constant(3)"]
    sp = spec.load_spec("loadtest-spawn", [], ["work=uniform(1, 2),constant(3)"], 1)
    assert sorted(str(dict(p.sets)["work"]) for p in sp.points) == ["constant(3)", "uniform(1, 2)"]


def test_jobs_are_capped_by_the_runs_and_it_says_so(tmp_path, capsys):
    args = ["loadtest-spawn", "--set", "duration_s=2", "--factor", "clients.count=1,2", "--seeds", "1"]
    assert sweep.main([*args, "--out", str(tmp_path / "s"), "--jobs", "64", "--no-report"]) == 0
    assert "--jobs 64 capped at 2" in capsys.readouterr().err


@pytest.mark.slow
def test_a_killed_sweep_leaves_no_worker_behind(tmp_path):
    # a sweep of long runs on 2 workers; SIGKILL the sweep once its workers run; the workers must go too
    cmd = [sys.executable, "-m", "experiments.sweep", "loadtest-copies", "--factor", "clients.count=8,9,10,11"]
    proc = subprocess.Popen([*cmd, "--out", str(tmp_path / "k"), "--jobs", "2", "--no-report"], stderr=subprocess.PIPE)
    children: list[int] = []
    deadline = time.monotonic() + 30
    while len(children) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
        path = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        children = [int(c) for c in path.read_text().split()] if path.exists() else []
    assert len(children) >= 2, "the sweep's workers never started"
    proc.kill()
    proc.wait()
    time.sleep(2)

    def alive(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return False
        return "State:\tZ" not in state  # a zombie has exited; only its parent's reaping is left

    assert not [c for c in children if alive(c)]


@pytest.mark.parametrize("model", list(MODELS))
def test_log_axes_label_their_ticks_as_plain_numbers(model):
    """Mathtext is off in the plots (labels are a user's text), so a log axis's default labels would print raw."""
    summary = pd.DataFrame({"variant": "base", "x": [1, 2, 4, 8]})
    for fig_spec in (f for f in MODELS[model].figures if f.log and f.kind == "lines"):
        for col in [fig_spec.reference, *(m for m, _ in fig_spec.metrics)]:
            if col:
                summary[f"{col}_mean"], summary[f"{col}_ci95"] = [3, 30, 300, 3000], 0.0
        fig = plots.draw(summary, "x", fig_spec)
        fig.canvas.draw()
        labels = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels() if t.get_text()]
        assert labels and not any("$" in t or "mathdefault" in t for t in labels), (fig_spec.name, labels)
        assert "1,000" in labels, (fig_spec.name, labels)
