"""Extrapolation flags: a run says where it leaves the envelope its parameters were calibrated on.

The envelope is the parameter file's ``[envelope]`` table (calibration/envelope.py, written by calibration.fit; the
code's defaults are the shipped file's: tests/calibration/test_reference.py); models/inputs/checks/envelope.py compares
a run with it.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from calibration.fit import OUT
from calibration.sandboxes import SANDBOXES_OUT
from experiments import run as run_cmd
from experiments import sweep, whatif
from models.inputs import loadtest
from models.inputs.checks.envelope import MARGIN
from models.runs import load_scenario, run_scenario
from models.sandboxes.scenario import extrapolated
from sim.scenario import read_toml
from tests.support import preset, scenario

REFERENCE = ("loadtest-spawn", "loadtest-remote", "loadtest-copies", "loadtest-batching", "loadtest-server")
SMALL = ("clients.in_flight=10",)  # fewer calls in flight than the reference: inside the envelope, and fast


@pytest.mark.parametrize("name", REFERENCE)
def test_the_reference_presets_are_inside_their_envelope(name):
    assert envelope(loadtest.run(preset(name), seed=0)["extrapolated"]) == []


def envelope(extrapolated: list[str]) -> list[str]:
    """The envelope's entries of a run's ``extrapolated`` (a 60 s reference run may be too short for a steady cost:
    that flag is not the envelope's)."""
    return [x for x in extrapolated if x != loadtest.UNSETTLED]


def test_a_seed_the_fit_did_not_run_is_inside_by_the_margin():
    # spawn's longest backlog at seed 6 is one monitor sample longer than the fit's seeds saw (64.5 s against 64 s)
    m = loadtest.run(preset("loadtest-spawn"), seed=6)
    assert 64 < m["backlog_longest_s"] <= (1 + MARGIN) * 64 and envelope(m["extrapolated"]) == []


@pytest.mark.parametrize(
    "name, sets, entry",
    [
        ("loadtest-spawn", ("duration_s=3600",), "duration_s 3,600 > 60"),
        ("loadtest-spawn", ("clients.count=800", "clients.in_flight=1", "duration_s=5"), "clients.count 800 > 8"),
        ("loadtest-copies", ("function.copies=80",), "function.copies 80 > 8"),
        ("loadtest-copies", ("clients.in_flight=5000", "duration_s=2"), "clients.in_flight 5,000 > 1,000"),
        # work ten times shorter: 8,000 calls in flight ÷ 0.55 s
        (
            "loadtest-copies",
            ("clients.in_flight=1000", "work=uniform(0.1, 1)", "duration_s=5"),
            "ideal_calls_per_s 14,545 > 1,455",
        ),
    ],
)
def test_each_excess_is_named_with_its_value_and_bound(name, sets, entry):
    m = loadtest.run(preset(name, *SMALL, *sets), seed=0)  # the sets after SMALL override it
    assert entry in m["extrapolated"], m["extrapolated"]


def test_a_backlog_longer_than_any_the_fit_saw():
    # a start limit of 5/s for 800 calls: inputs pend for about 160 s, in a run otherwise inside the envelope
    sets = ("limits.start_rate=5", "limits.start_ramp_per_s=0", "clients.in_flight=100")
    m = loadtest.run(preset("loadtest-spawn", *sets), seed=0)
    assert m["backlog_longest_s"] > 150
    assert m["extrapolated"] == [f"a backlog of {m['backlog_longest_s']:.0f} s > the longest the fit saw, 65.5 s"]


def test_the_longest_backlog_is_timed_by_the_monitor(tiny):
    # 1 container of 2 slots, n calls of 2 s at 0, made once: the last pends from 0 to 2 (n = 3) or 4 (n = 5); the
    # monitor samples every 0.5 s
    for n, pending_s in ((2, 0.0), (3, 2.0), (5, 4.0)):
        tiny["clients"] = {"count": 1, "in_flight": n, "reissue": False}
        assert loadtest.run(scenario(tiny))["backlog_longest_s"] == pending_s
    # a closed loop of 2 calls on 1 slot with a 1 s submit leg: the second call pends from 1 to 3, then each next
    # call pends 1 s of every 2 (4 to 5, 6 to 7, ...): the longest stretch, not their sum
    tiny.update(duration_s=10.0, function={"containers": 1, "max_inputs": 1}, overhead={"submit": "constant(1)"})
    tiny["clients"] = {"count": 1, "in_flight": 2}
    assert loadtest.run(scenario(tiny))["backlog_longest_s"] == 2.0


def test_no_envelope_no_check():
    # mmc runs no calibrated parameter (warm containers, no limits, no legs): its preset says so
    sc = preset("mmc", "duration_s=2000", "warmup_s=100")
    assert sc.envelope.runs == "" and loadtest.run(sc)["extrapolated"] == []
    assert (
        "duration_s 2,000 > 60"
        in loadtest.run(preset("mmc", "duration_s=2000", "warmup_s=100", "envelope.runs=x"))["extrapolated"]
    )


def test_a_parameter_file_brings_its_own_envelope():
    # the fit without app copies saw one copy: the copies test is outside its envelope, not the shipped fit's
    left_out = OUT.parent / "leave-out-copies.toml"
    m = run_scenario(load_scenario("loadtest-copies", list(SMALL), [str(left_out)]), seed=0)
    assert m["extrapolated"] == ["function.copies 8 > 1"]


def test_run_prints_one_warning_line_on_stderr(capsys):
    assert run_cmd.main(["loadtest-spawn", "--set", "duration_s=3600", "--set", SMALL[0], "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["extrapolated"][0] == "duration_s 3,600 > 60"
    assert err.startswith("warning: extrapolated: duration_s 3,600 > 60") and err.count("\n") == 1, err
    assert run_cmd.main(["loadtest-spawn", "--set", SMALL[0]]) == 0
    assert capsys.readouterr().err == ""


def test_a_sweep_has_the_column_and_says_how_many_rows_are_outside(tmp_path, capsys):
    args = ["loadtest-spawn", "--set", "duration_s=10", "--set", SMALL[0], "--factor", "clients.count=1,16"]
    assert sweep.main([*args, "--seeds", "1", "--no-report", "--jobs", "1", "--out", str(tmp_path)]) == 0
    table = pd.read_parquet(tmp_path / "results.parquet").set_index("clients.count")
    outside = table["extrapolated"].astype(object).fillna("")  # a row inside: an empty cell
    # (a 10 s window is too short for a steady cost: each row says so too)
    assert outside[16] == f"clients.count 16 > 8;{loadtest.UNSETTLED}" and outside[1] == loadtest.UNSETTLED
    assert table.loc[1, "envelope.runs"] == "the reference load test"
    assert "warning: extrapolated: 2 of 2 rows" in capsys.readouterr().err


def test_the_sandbox_model_checks_the_fit_of_its_v2_create_path():
    # calibration/params/sandboxes.toml: request_s fitted on 100,000 sandboxes and 2,000 workers (the code's
    # defaults are the file's); only the v2 plane reads it
    fitted = read_toml(SANDBOXES_OUT)["envelope"]
    default = preset("sandboxes-v2").envelope
    assert (fitted["runs"], fitted["count"], fitted["workers"]) == (default.runs, default.count, default.workers)
    assert extrapolated(preset("sandboxes-v2")) == [
        "sandboxes.count 1,000,000 > 100,000",
        "fleet.workers 20,000 > 2,000",
    ]
    assert extrapolated(preset("sandboxes-v2", "sandboxes.count=100000", "fleet.workers=2000")) == []
    assert extrapolated(preset("sandboxes-v1")) == [] == extrapolated(preset("sandboxes-k8s"))
    assert run_scenario(preset("sandboxes-v2", "sandboxes.count=1000", "fleet.workers=20"))["extrapolated"] == []
    assert run_scenario(preset("coldstart-torch", "coldstart.starts=10"))["extrapolated"] == []


def test_whatif_flags_each_option_and_warns_for_the_chosen(capsys):
    # 2,000 spawned calls from one client, made once: more in flight than a reference client had; the 3,600 s
    # duration is only the window (the run ends when they are back)
    assert whatif.main(["drain", "--calls", "2000", "--seeds", "1", "--jobs", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["chosen"]["extrapolated"] == ["clients.in_flight 2,000 > 1,000"]
    assert err == "warning: extrapolated (the chosen configuration): clients.in_flight 2,000 > 1,000\n"
