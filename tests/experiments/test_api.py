"""The notebook API (experiments/api.py): the same numbers as the commands, records as DataFrames."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from experiments import api
from experiments import run as run_cmd
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
    assert r.returncode == 2 and "a library" in one_line(r.stderr) and r.stdout == "", r.stderr
