"""The notebook API (experiments/api.py): the same numbers as the commands, records as DataFrames."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from experiments import api
from experiments import run as run_cmd
from sim.cli import progress_bar, progress_to
from sim.scenario import ScenarioError
from tests.support import one_line, run_module


def test_run_gives_the_commands_numbers(capsys):
    m = api.run("loadtest-copies", set={"duration_s": 10, "clients.count": 2}, seed=3)
    assert (
        run_cmd.main(["loadtest-copies", "--set", "duration_s=10", "--set", "clients.count=2", "--seed", "3", "--json"])
        == 0
    )
    cli = json.loads(capsys.readouterr().out)
    for key in ("calls", "calls_per_s", "first_n_back_s", "errors", "events"):
        assert m[key] == cli[key]


def test_records_are_one_row_per_input_and_agree_with_the_metrics():
    m = api.run("loadtest-spawn", set={"duration_s": 10}, records=True)
    calls = m["records"]
    assert isinstance(calls, pd.DataFrame) and len(calls) == m["inputs"]
    assert (calls["started"].dropna() >= calls.loc[calls["started"].notna(), "issued"]).all()
    issued = calls[calls["ok"] & (calls["issued"] < 10.0) & calls["finished"].notna()]
    assert int(issued["items"].sum()) == m["calls"]
    back = calls[calls["ok"] & (calls["finished"] < 10.0)]
    assert int(back["items"].sum()) == m["calls_back"]


def test_sandbox_and_start_records():
    m = api.run("sandboxes-v2", set={"sandboxes.count": 300, "fleet.workers": 20}, records=True)
    sandboxes = m["records"]
    assert len(sandboxes) == 300 and sandboxes["running"].notna().sum() == m["sandboxes_created"]
    assert (sandboxes["running"] >= sandboxes["placed"]).all() and (sandboxes["placed"] >= sandboxes["requested"]).all()
    starts = api.run("coldstart-torch", set={"coldstart.starts": 20}, records=True)["records"]
    assert len(starts) == 20 and starts["total"].mean() == pytest.approx(
        api.run("coldstart-torch", set={"coldstart.starts": 20})["cold_start_mean_s"]
    )


def test_series_and_bad_input():
    m = api.run("loadtest-spawn", set={"duration_s": 5}, series=True)
    assert {"t", "running", "pending", "containers", "started", "accepted"} <= set(m["series"])
    with pytest.raises(ScenarioError, match=r"clients\.cuont"):
        api.run("loadtest-spawn", set={"clients.cuont": 3})


def test_sweep_and_load_results(tmp_path):
    table = api.sweep(
        "loadtest-copies", set={"duration_s": 5}, factors={"clients.count": [1, 2]}, seeds=2, out=tmp_path
    )
    assert len(table) == 4 and (table["error"] == "").all()
    assert table["clients.count"].tolist() == [1, 1, 2, 2]
    again = api.load_results(tmp_path)
    pd.testing.assert_frame_equal(table.reset_index(drop=True), again)


def test_running_the_library_as_a_command_says_so_in_one_line_and_exits_2():
    r = run_module("experiments.api")
    line = one_line(r.stderr)
    assert r.returncode == 2 and "a library" in line and r.stdout == "", r.stderr
    assert "functions that return data" in line and "api.whatif" in line  # what it is for


def test_a_run_says_what_the_command_says(capsys):
    m = api.run("loadtest-spawn", set={"duration_s": 5, "envelope.duration_s": 1})
    assert m["extrapolated"] and capsys.readouterr().err.startswith("warning: extrapolated: ")
    m = api.run("sandboxes-v2", set={"sandboxes.count": 5000, "fleet.workers": 200, "client.rate": 1000})
    assert m["bottleneck"] == "client" and "client.rate = 1,000/s" in m["caveats"][0]


@pytest.mark.slow
def test_whatif_prints_and_returns_what_the_command_says_on_stderr(capsys):
    sets = {"duration_s": 60, "warmup_s": 10, "envelope.containers": 1}  # an envelope the answer must leave
    answer = api.whatif("capacity", rate=200, p99=2, seeds=1, jobs=1, set=sets)
    warning = "warning: extrapolated (the chosen configuration): containers_peak"
    assert any(line.startswith(warning) for line in answer["messages"])
    assert capsys.readouterr().err.strip().splitlines() == answer["messages"]  # shown as it came, too
    with pytest.raises(ScenarioError, match="warmup_s"):
        api.whatif("capacity", rate=200, p99=2, seeds=1, jobs=1, set={"duration_s": 1})
    assert "warmup_s" in capsys.readouterr().err


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bars_show_on_a_terminal_and_where_the_api_sends_them():
    caller, captured = Terminal(), io.StringIO()
    with progress_to(caller):
        bar = progress_bar(total=3, desc="runs")
        bar.update(3)
        bar.close()
    assert "runs: 100%" in caller.getvalue()
    bar = progress_bar(total=3, desc="runs", file=captured)  # not a terminal: no bar
    bar.update(3)
    bar.close()
    assert captured.getvalue() == ""
