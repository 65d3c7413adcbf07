"""Runs kept on disk (sim/runcache.py): ``--uncertainty``'s runs read back give the same numbers, and only the same
runs are read back: another scenario, another seed, another budget's factor or another content of a file the scenario
reads runs again, and a run stopped by this machine's memory is not kept."""

from __future__ import annotations

import json
import os
import time

import pytest

from experiments import uncertainty
from models.runs import load_scenario
from sim import guard, runcache
from sim.guard import BUDGET_ENV, OverBudget
from tests.support import models_file

SETS = ["duration_s=5", "clients.count=2"]


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """Runs kept in a folder of the test's own."""
    folder = tmp_path / "runs"
    monkeypatch.setenv(runcache.CACHE_ENV, str(folder))
    return folder


def ranges(params, sets=SETS, seed=0):
    return uncertainty.ranges("loadtest-spawn", sets, [str(params)], 1, 1, seed=seed)


def test_the_same_runs_again_are_read_back_with_the_same_numbers(tmp_path, kept):
    rates = [["limits.start_rate=363"], ["limits.start_rate=150"]]
    params = models_file(tmp_path, rates[0], rates)
    mine, doc = ranges(params)
    assert doc["runs"] > 1 and doc["read"] == 0
    assert len(list(kept.glob("*.json"))) == doc["runs"]
    again, doc2 = ranges(params)
    assert doc2["runs"] == 0 and doc2["read"] == doc["runs"]
    assert json.dumps(again) == json.dumps(mine)  # wall seconds too: the run's own
    assert json.dumps(doc2["ranges"]) == json.dumps(doc["ranges"])
    # another seed, or a key of the user's on top of every model, are other runs
    _, doc3 = ranges(params, seed=1)
    assert doc3["read"] == 0 and doc3["runs"] == doc["runs"]
    _, doc4 = ranges(params, [*SETS, "limits.start_burst=5"])
    assert doc4["read"] == 0


def test_a_run_past_its_budget_of_events_is_kept_as_such_and_one_past_the_memory_is_not(tmp_path, kept, monkeypatch):
    rates = [["limits.start_rate=363"]]
    params = models_file(tmp_path, rates[0], rates)
    monkeypatch.setenv(BUDGET_ENV, "1e-9")  # every run stops past its budget of events: what the run is
    with pytest.raises(OverBudget) as first:
        ranges(params)
    n = len(list(kept.glob("*.json")))
    assert n > 0
    with pytest.raises(OverBudget) as again:  # read back: the same answer, nothing run
        ranges(params)
    assert str(again.value) == str(first.value) and len(list(kept.glob("*.json"))) == n
    monkeypatch.setenv(BUDGET_ENV, "1e9")  # another factor: other runs, which finish (and are kept)
    _, doc = ranges(params)
    assert doc["runs"] > 0 and doc["read"] == 0
    # stopped by what this machine measured (its memory): another machine may finish it, so it is not kept
    monkeypatch.setenv(BUDGET_ENV, "2")
    monkeypatch.setattr(guard, "_resident_bytes", lambda: 2**62)
    before = set(kept.glob("*.json"))
    with pytest.raises(OverBudget, match="memory"):
        ranges(params, [*SETS, "duration_s=300"])
    assert set(kept.glob("*.json")) == before


def test_nothing_is_kept_when_off(tmp_path, kept, monkeypatch):
    monkeypatch.setenv(runcache.CACHE_ENV, "off")
    rates = [["limits.start_rate=363"]]
    _, doc = ranges(models_file(tmp_path, rates[0], rates))
    assert doc["runs"] > 0 and not kept.exists()


def test_a_folder_that_cannot_be_written_is_said_and_the_runs_go_on(tmp_path, monkeypatch, capsys):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(runcache.CACHE_ENV, str(blocked / "runs"))
    monkeypatch.setattr(runcache, "_warned", [])
    rates = [["limits.start_rate=363"]]
    _, doc = ranges(models_file(tmp_path, rates[0], rates))
    assert doc["runs"] > 0
    err = capsys.readouterr().err
    assert err.count(f"warning: {runcache.CACHE_ENV}: runs are not kept") == 1


def test_a_file_the_scenario_reads_is_part_of_the_key(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f,http,3,4\n")
    sc = load_scenario("loadtest-remote", ["load=trace", f"trace.path={trace}"], [])
    before = runcache.key(sc, 0)
    assert runcache.key(sc, 0) == before and runcache.key(sc, 1) != before
    trace.write_text("HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f,http,3,50\n")
    assert runcache.key(sc, 0) != before


def test_the_folder_stays_bounded_least_recently_used_first_and_never_the_commands_own(tmp_path, kept, monkeypatch):
    kept.mkdir()
    old = [kept / f"old-{i}.json" for i in range(6)]
    for i, f in enumerate(old):  # 100 bytes each, made an hour ago, a second apart (old-0 the oldest)
        f.write_text("{}" + " " * 98)
        os.utime(f, (1_000 + i, 1_000 + i))
    # reading one back makes it recently used
    monkeypatch.setattr(runcache, "folder", lambda: kept)
    assert runcache.load("old-0") == {}
    # a bound of 350 bytes keeps the three most recently used (old-0, read back, among them)
    assert runcache.prune(since=time.time(), keep=350) == 3
    assert sorted(f.name for f in kept.iterdir()) == ["old-0.json", "old-4.json", "old-5.json"]
    # the command's own runs (made since it began) stay, whatever the bound
    assert runcache.prune(since=0, keep=0) == 0
    assert runcache.prune(since=2_000, keep=0) == 2 and [f.name for f in kept.iterdir()] == ["old-0.json"]


def test_a_command_prunes_what_it_does_not_use(tmp_path, kept, monkeypatch):
    rates = [["limits.start_rate=363"]]
    params = models_file(tmp_path, rates[0], rates)
    kept.mkdir()
    stale = kept / "another-code.json"
    stale.write_text("{}")
    os.utime(stale, (1_000, 1_000))
    monkeypatch.setattr(runcache, "KEEP_BYTES", 0)
    _, doc = ranges(params)
    assert doc["runs"] > 0 and not stale.exists() and len(list(kept.glob("*.json"))) == doc["runs"]
