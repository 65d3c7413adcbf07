"""A sweep keeps its data: full rows whatever the scenario, one writer per --out, a resume that checks each row it
keeps, a report of a table it cannot plot, and faults (a full disk, an unreadable table, a name too long) in one
line."""

from __future__ import annotations

import csv
import errno
import io
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from experiments import api, report, results, sweep
from models.registry import MODELS
from models.runs import load_scenario

SMALL = ["loadtest-spawn", "--set", "duration_s=2", "--factor", "clients.count=1,2", "--seeds", "2"]
RUN = [*SMALL, "--jobs", "1", "--no-report"]


def rows_of(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text())))


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def small_table(tmp_path_factory) -> Path:
    """A finished sweep of SMALL (2 points x 2 seeds): its folder, copied by each test that changes it."""
    out = tmp_path_factory.mktemp("small") / "sweep"
    assert sweep.main([*RUN, "--out", str(out)]) == 0
    return out


@pytest.fixture
def table_copy(small_table, tmp_path) -> Path:
    out = tmp_path / "sweep"
    shutil.copytree(small_table, out)
    return out


# --- 1. every parameter and metric, whatever the scenario ---------------------------------------------------------


def test_a_sweep_whose_warm_up_outlasts_any_probe_writes_full_rows(tmp_path, capsys):
    sc = load_scenario("mmc")
    assert sc.warmup_s > 1  # a probe run of duration_s = 1 could not even build it
    declared = MODELS[sc.model].metrics(sc).columns()
    args = ["mmc", "--factor", "arrivals.rate=5,9", "--seeds", "1", "--jobs", "1", "--no-report"]
    assert sweep.main([*args, "--out", str(tmp_path / "cli")]) == 0
    assert "2 rows (0 with errors)" in capsys.readouterr().out
    from_cli = results.read_results(tmp_path / "cli" / "results.csv")
    from_api = api.sweep("mmc", factors={"arrivals.rate": [5, 9]}, seeds=1, out=tmp_path / "api")
    for table in (from_cli, from_api):
        assert len(table) == 2 and (table["error"] == "").all()
        assert set(declared) <= set(table.columns) and {"arrivals.rate", "warmup_s"} <= set(table.columns)
        assert table["calls_per_s"].tolist() == pytest.approx([5, 9], rel=0.05)
        assert table["added_latency_p50_s"].notna().all()


def test_points_that_do_not_build_keep_their_parameters(tmp_path):
    out = tmp_path / "bad"
    args = ["loadtest-spawn", "--set", "duration_s=2", "--factor", "limits.start_rate=-1,-2", "--seeds", "1"]
    assert sweep.main([*args, "--jobs", "1", "--no-report", "--out", str(out)]) == 0
    t = pd.read_csv(out / "results.csv")
    assert sorted(t["limits.start_rate"]) == [-2, -1] and (t["clients.count"] == 8).all()
    assert t["error"].str.contains("limits.start_rate: must be > 0").all()
    assert not t["error"].str.contains("unexpected").any()


def test_a_column_the_table_did_not_expect_widens_it(tmp_path, capsys):
    path = tmp_path / "results.csv"
    header = ["point", "variant", "seed", "a", "wall_s", "error"]
    with results.Appender(path, header) as table:
        table.write({"point": 0, "variant": "v", "seed": 0, "a": 1, "wall_s": 0.5, "error": ""})
        table.write({"point": 1, "variant": "v", "seed": 0, "a": 2, "b": 'x, "y"', "wall_s": 0.5, "error": ""})
        table.write({"point": 2, "variant": "v", "seed": 0, "b": 3, "wall_s": 0.5, "error": ""})
    assert "widened by the columns b (point 1, seed 0 has them)" in capsys.readouterr().err
    rows = rows_of(path)
    assert rows[0] == [*header, "b"]
    assert rows[1:] == [
        ["0", "v", "0", "1", "0.5", "", ""],
        ["1", "v", "0", "2", "0.5", "", 'x, "y"'],
        ["2", "v", "0", "", "0.5", "", "3"],
    ]
    # a resume keeps the widened column (after this sweep's own)
    points = {i: results.PointRows(1, {"variant": "v"}, frozenset()) for i in range(3)}
    new_header, done = results.resume(path, header, points)
    assert new_header == [*header, "b"] and done == {(0, 0), (1, 0), (2, 0)}


# --- 2. one writer per --out -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_sweeps_on_one_out_cannot_both_write(tmp_path):
    out = tmp_path / "shared"
    cmd = [sys.executable, "-m", "experiments.sweep", "loadtest-spawn", "--set", "duration_s=1", "--set"]
    cmd += ["clients.count=1", "--seeds", "5000", "--jobs", "1", "--no-report", "--out", str(out)]  # minutes, in budget
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        table = out / "results.csv"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (table.exists() and table.read_text().count("\n") > 3):
            time.sleep(0.1)
        assert table.read_text().count("\n") > 3, "the first sweep never wrote"
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=60)  # a guard against a hang
        line = one_line(second.stderr)
        assert second.returncode == 2
        assert f"--out {out}: another sweep is writing there (pid {first.pid}: " in line
        assert "experiments.sweep loadtest-spawn" in line
        assert first.poll() is None  # the first goes on
    finally:
        first.kill()
        first.wait()
    with results.lock(out):  # a dead holder's lock is free
        pass
    rows = rows_of(out / "results.csv")
    assert rows.count(rows[0]) == 1
    keys = [(r[0], r[2]) for r in rows[1:] if len(r) == len(rows[0])]
    assert len(keys) == len(set(keys))


def test_the_lock_is_the_same_lock_for_its_holder(tmp_path):
    with results.lock(tmp_path), results.lock(tmp_path):
        assert f"pid {os.getpid()}: " in (tmp_path / results.LOCK_FILE).read_text()
    with results.lock(tmp_path):
        pass


# --- 3. resume checks each row -------------------------------------------------------------------------------------


def _corrupt(out: Path, how: str) -> None:
    path = out / "results.csv"
    rows = rows_of(path)
    header, body = rows[0], rows[1:]
    col = {c: i for i, c in enumerate(header)}
    if how == "duplicated rows":
        body = [*body, body[0], body[1]]
    elif how == "a point the sweep does not have":
        extra = list(body[0])
        extra[col["point"]] = "99"
        body = [*body, extra]
    elif how == "a garbage metric":
        body[1][col["calls_per_s"]] = "garbage"
    elif how == "a second header":
        body = [*body[:2], header, *body[2:]]
    elif how == "parameters not the point's":
        body[2][col["clients.count"]] = "7"
    buf = io.StringIO()
    csv.writer(buf).writerows([header, *body])
    path.write_text(buf.getvalue())


@pytest.mark.parametrize(
    "how, said, again",
    [
        ("duplicated rows", "rows of a (point, seed) already kept: 2 (e.g. line 6: point", 0),
        (
            "a point the sweep does not have",
            "rows for a point or seed this sweep does not have: 1 (e.g. line 6: point 99",
            0,
        ),
        ("a garbage metric", "rows with a metric that is not a number: 1 (e.g. line 3: point", 1),
        ("a second header", "repeated header lines: 1 (e.g. line 4: the header again)", 0),
        (
            "parameters not the point's",
            "rows whose parameters are not their point's in this sweep: 1 (e.g. line 4: ",
            1,
        ),
    ],
)
def test_resume_drops_bad_rows_says_so_and_reruns_them(table_copy, capsys, how, said, again):
    before = pd.read_csv(table_copy / "results.csv")
    _corrupt(table_copy, how)
    if how == "a second header":  # the parquet of such a table holds point as text: it must not matter
        pd.read_csv(table_copy / "results.csv", dtype=str).to_parquet(table_copy / "results.parquet")
    assert sweep.main([*RUN, "--out", str(table_copy)]) == 0
    err = capsys.readouterr().err
    assert f"resuming: {4 - again} of 4 runs kept from {table_copy / 'results.csv'}" in err
    assert f"resuming: dropped {said}" in err
    assert ("of their runs done again" in err) == bool(again)
    rows = rows_of(table_copy / "results.csv")  # rewritten clean
    assert len(rows) == 5 and rows.count(rows[0]) == 1 and "garbage" not in str(rows)
    assert sorted((r[0], r[2]) for r in rows[1:]) == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]
    after = pd.read_parquet(table_copy / "results.parquet")
    assert after["point"].dtype == "int64" and after["calls_per_s"].dtype == "float64"
    assert not after.duplicated(["point", "seed"]).any()
    key = ["point", "seed", "clients.count", "calls_per_s", "added_latency_p99_s", "events"]
    pd.testing.assert_frame_equal(after[key], before.sort_values(["point", "seed"])[key].reset_index(drop=True))


def test_a_table_that_is_not_csv_is_refused_naming_the_line(table_copy, capsys):
    with (table_copy / "results.csv").open("a") as f:
        f.write('1,"torn,row\n')
    assert sweep.main([*RUN, "--out", str(table_copy)]) == 2
    assert "results.csv, line 6: a row that cannot be read" in one_line(capsys.readouterr().err)


# --- 4. a report of a table it cannot plot ---------------------------------------------------------------------


def _table_variant(src: Path, dst: Path, how: str) -> Path:
    t = pd.read_csv(src / "results.csv", keep_default_na=False, dtype=str)
    metrics = [c for c in MODELS["function"].metrics(load_scenario("loadtest-spawn")).columns() if c in t]
    f = dst / f"{how.replace(' ', '-')}.csv"
    if how == "NaNs":
        t[metrics] = "nan"
    elif how == "only key columns":
        t = t[["point", "variant", "seed"]]
    elif how == "every row an error":
        t[metrics] = ""
        t["error"] = "RuntimeError: boom"
        t["model"] = ""  # (a point that did not build names no model)
    elif how == "no rows":
        t = t.iloc[0:0]
    t.to_csv(f, index=False)
    return f


@pytest.mark.parametrize("how", ["NaNs", "only key columns", "every row an error", "no rows"])
def test_a_report_with_nothing_to_plot_says_so(small_table, tmp_path, capsys, how):
    f = _table_variant(small_table, tmp_path, how)
    assert report.main([str(f), "--out", str(tmp_path / "report")]) == 0
    err = capsys.readouterr().err
    assert "nothing to plot" in one_line(err)
    page = (tmp_path / "report" / "report.html").read_text()
    assert "Nothing to plot for throughput" in page and "<img" not in page
    assert (tmp_path / "report" / "summary.csv").exists()


@pytest.mark.slow
def test_a_report_with_something_to_plot_has_its_figures(small_table, tmp_path, capsys):
    assert report.main([str(small_table / "results.csv"), "--out", str(tmp_path / "report")]) == 0
    assert "nothing to plot" not in capsys.readouterr().err
    page = (tmp_path / "report" / "report.html").read_text()
    assert "Nothing to plot" not in page and page.count("<img") >= 6


@pytest.mark.parametrize(
    "text, extra, says",
    [
        ("point,variant,seed,calls_per_s,error\n0,a,0,abc,\n", [], "column calls_per_s, row 1: 'abc' is not a number"),
        ("point,variant,seed,calls_per_s,calls_per_s\n0,a,0,1,2\n", [], "column calls_per_s appears twice"),
        (
            "point,variant,seed,calls_per_s\n0,a,0,1\npoint,variant,seed,calls_per_s\n1,a,0,2\n",
            [],
            "column point, row 2: 'point' is not a whole number",
        ),
        ("point,variant,seed,model,calls_per_s\n0,a,0,nope,1\n", [], "column model, row 1: 'nope' is not a model"),
        (
            "point,variant,seed,clients.count,calls_per_s\n0,a,0,x,1\n",
            ["--scale", "clients.count"],
            "--scale clients.count: column of",
        ),
    ],
)
def test_a_report_of_a_table_with_bad_columns_is_one_line_naming_them(tmp_path, capsys, text, extra, says):
    f = tmp_path / "results.csv"
    f.write_text(text)
    assert report.main([str(f), "--out", str(tmp_path / "r"), *extra]) == 2
    line = one_line(capsys.readouterr().err)
    assert str(f) in line and says in line


# --- 5. faults ---------------------------------------------------------------------------------------------------


def test_a_full_disk_is_one_line_and_the_resume_completes(tmp_path, capsys, monkeypatch):
    out = tmp_path / "full"
    real = results.Appender._write_all
    written = []

    def disk_fills(self, data: bytes) -> None:
        if len(written) >= 3:  # the header and two rows fit; the third row is cut in the middle
            real(self, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(data)
        real(self, data)

    monkeypatch.setattr(results.Appender, "_write_all", disk_fills)
    assert sweep.main([*RUN, "--out", str(out)]) == 1
    line = one_line(capsys.readouterr().err)
    assert f"{out / 'results.csv'}: cannot write a row: No space left on device" in line and "kept" in line
    text = (out / "results.csv").read_text()
    assert text.endswith("\n") and len(rows_of(out / "results.csv")) == 3  # the torn row is cut at once
    monkeypatch.setattr(results.Appender, "_write_all", real)
    with (out / "results.csv").open("a") as f:  # had the cut failed too: a torn last row, repaired on resume
        f.write("0,base,1,loadtest-sp")
    assert sweep.main([*RUN, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "resuming: 2 of 4 runs kept" in err and "cut a torn last row" in err
    t = pd.read_parquet(out / "results.parquet")
    assert len(t) == 4 and not t.duplicated(["point", "seed"]).any() and (t["error"] == "").all()


def test_a_full_disk_while_a_sweep_rewrites_its_files_leaves_them_whole(table_copy, capsys, monkeypatch):
    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def files() -> dict[str, bytes]:
        return {f.name: f.read_bytes() for f in table_copy.iterdir() if f.name != results.LOCK_FILE}

    before = files()
    monkeypatch.setattr(os, "fsync", disk_full)
    assert sweep.main([*RUN, "--out", str(table_copy)]) == 1
    assert "spec.json: cannot write: No space left on device" in one_line(capsys.readouterr().err)
    assert files() == before  # no .tmp left either


def test_an_unreadable_table_on_resume_is_one_line(table_copy, capsys, monkeypatch):
    path = table_copy / "results.csv"
    path.chmod(0)
    if os.geteuid() == 0:  # root reads it anyway: the kernel's refusal, where the table is opened
        real = os.open

        def refuse(p, flags, *a, **k):
            if Path(p) == path:
                raise PermissionError(errno.EACCES, "Permission denied", str(p))
            return real(p, flags, *a, **k)

        monkeypatch.setattr(os, "open", refuse)
    try:
        assert sweep.main([*RUN, "--out", str(table_copy)]) == 2
    finally:
        path.chmod(0o644)
    line = one_line(capsys.readouterr().err)
    assert str(path) in line and "Permission denied" in line


def test_an_out_folder_name_too_long_is_one_line(tmp_path, capsys):
    out = tmp_path / ("a" * 300)
    assert sweep.main([*RUN, "--out", str(out)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "--out" in line and "a" * 50 in line
