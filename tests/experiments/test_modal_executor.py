"""``--executor modal`` (experiments/executors.py): the app and Function it builds with the modal client, its driver
against a stand-in for ``Function.starmap`` (no network to Modal here), resume, and bad input without credentials."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from experiments import executors, sweep
from tests.support import ROOT

TINY = ["loadtest-spawn", "--factor", "clients.count=1,2", "--set", "duration_s=3", "--set", "clients.in_flight=20"]
TINY += ["--seeds", "2", "--no-report"]


class StandIn:
    """An app and Function with the modal client's calls the driver makes: ``App.run()`` and ``Function.starmap``
    (outputs in input order; with ``return_exceptions`` a failed input's exception is its output). Inputs are
    run here, by the same run_point a container would call; ``fail`` names inputs to fail as Modal would."""

    def __init__(self, fail: set[tuple[int, int]] = frozenset()) -> None:
        self.fail, self.inputs, self.running = fail, [], False

    def __call__(self) -> tuple[StandIn, StandIn]:
        return self, self

    def run(self):
        outer = self

        class Running:
            def __enter__(self):
                outer.running = True

            def __exit__(self, *exc):
                outer.running = False

        return Running()

    def starmap(self, inputs, order_outputs: bool, return_exceptions: bool):
        assert self.running and order_outputs and return_exceptions
        for point, seed in inputs:
            self.inputs.append((point.index, seed))
            if (point.index, seed) in self.fail:
                yield TimeoutError("the input's timeout passed")
            else:
                yield executors.run_point_on_modal(point, seed)


def rows(folder: Path) -> pd.DataFrame:
    table = pd.read_csv(folder / "results.csv")
    return table.drop(columns="wall_s").sort_values(["point", "seed"]).reset_index(drop=True)


def test_the_sweeps_app_and_function_build_with_the_modal_client():
    import modal

    app, fn = executors.modal_function()
    assert app.name == executors.MODAL_APP and isinstance(fn, modal.Function)
    assert {r.split(">")[0].split("<")[0].split("=")[0] for r in executors.modal_requirements()} == set(
        executors.MODAL_DEPENDENCIES
    )
    (simpy,) = [r for r in executors.modal_requirements() if r.startswith("simpy")]
    assert "<5" in simpy and ">=4.1" in simpy  # the project's own pins


def test_a_sweep_on_modal_gives_the_rows_of_jobs_1_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setattr(executors, "check_modal", lambda: None)
    assert sweep.main([*TINY, "--jobs", "1", "--out", str(tmp_path / "one")]) == 0
    stand_in = StandIn(fail={(1, 1)})
    monkeypatch.setattr(executors, "modal_function", stand_in)
    out = tmp_path / "modal"
    assert sweep.main([*TINY, "--executor", "modal", "--out", str(out)]) == 0
    got, want = rows(out), rows(tmp_path / "one")
    lost = (got["point"] == 1) & (got["seed"] == 1)
    assert got.loc[lost, "error"].item() == "TimeoutError: the input's timeout passed"
    pd.testing.assert_frame_equal(got[~lost], want[~lost.to_numpy()], check_dtype=False)
    assert len(stand_in.inputs) == 4
    # the same command again: nothing is sent (every row is there, the failed one with its error)
    again = StandIn()
    monkeypatch.setattr(executors, "modal_function", again)
    assert sweep.main([*TINY, "--executor", "modal", "--out", str(out)]) == 0
    assert again.inputs == [] and len(rows(out)) == 4


@pytest.mark.slow
def test_modal_without_credentials_exits_2_with_one_line(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("MODAL_")}
    env["HOME"] = str(tmp_path)  # no ~/.modal.toml
    cmd = [sys.executable, "-m", "experiments.sweep", *TINY, "--executor", "modal", "--out", str(tmp_path / "o")]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--executor modal" in lines[0] and "modal token new" in lines[0]
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("text", ["modal", "process", "dask://h:1"])
def test_the_executor_names(text):
    assert executors.executor_arg(text) == text
