"""Bad or huge input ends: exit 2 with one line naming what is wrong (or a run that finishes), under 2 GiB, each in a
fresh process as a user would run it (how fast: python -m experiments.bench)."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from experiments import api
from tests.support import run_module

CASES = [
    ("loadtest-spawn", "duration_s=1e9", "run size"),
    ("loadtest-spawn", "duration_s=inf", "duration_s"),
    ("mmc", "arrivals.rate=inf", "arrivals.rate"),
    ("mmc", "arrivals.rate=1e12", "run size"),
    ("loadtest-copies", "clients.in_flight=100000000", "run size"),
    ("coldstart-torch", "coldstart.starts=1000000000", "run size"),
    ("coldstart-torch", "coldstart.pages_mib=inf", "coldstart.pages_mib"),
    ("sandboxes-v2", "sandboxes.count=100000000", "sandboxes.count"),
    ("sandboxes-v2", "sandboxes.count=3000000", "sandboxes.count"),
    ("sandboxes-v2", "fleet.workers=1", "sandboxes.count"),
    ("sandboxes-v2", "fleet.workers=1000000000", "fleet.workers"),
    ("sandboxes-v2", "client.tick_s=1e-300", "client.tick_s"),
    ("sandboxes-v2", "scheduler.count=1000000000", "scheduler.count"),
    ("loadtest-spawn", "work=constant(0)", "work"),
    ("loadtest-batching", "work=constant(0)", "work"),
    ("loadtest-spawn", "autoscaler.interval_s=1e308", "autoscaler.interval_s"),
    ("loadtest-copies", "function.copies=100000000", "function.copies"),
    ("loadtest-copies", "workspace.max_containers=-1", "workspace.max_containers"),
    ("loadtest-server", "workspace.max_containers=ten", "workspace.max_containers"),
]


@pytest.mark.slow
@pytest.mark.parametrize("preset, setting, key", CASES, ids=[f"{p}:{s}" for p, s, _ in CASES])
def test_bad_or_huge_input_exits_2_with_one_line(preset, setting, key):
    r = run_module("experiments.run", preset, "--set", setting)
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip()
    assert "\n" not in err and "Traceback" not in err and f": {key}" in err, err
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 2 * 1024 * 1024  # KiB: under 2 GiB


@pytest.mark.slow
def test_the_run_size_budget_can_be_raised_and_must_be_a_positive_number():
    r = run_module("experiments.run", "loadtest-spawn", "--set", "duration_s=1e5", env={"SCALESIM_BUDGET": "0.001"})
    assert r.returncode == 2 and "SCALESIM_BUDGET" in r.stderr
    r = run_module("experiments.run", "loadtest-spawn", "--set", "duration_s=5", env={"SCALESIM_BUDGET": "nope"})
    assert r.returncode == 2 and "SCALESIM_BUDGET" in r.stderr
    r = run_module(
        "experiments.run", "loadtest-spawn", "--set", "duration_s=5", "--json", env={"SCALESIM_BUDGET": "0.5"}
    )
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("bad")
    (d / "binary.toml").write_bytes(bytes(range(256)) * 4)
    (d / "latin1.toml").write_bytes(b'name = "caf\xe9"\n')
    (d / "work.txt").write_bytes(b"1\n2\n\xff\n")
    (d / "a_file").write_text("x")
    (d / "spec.toml").write_text(
        'name = "s"\ndescription = "s"\nseeds = 1\nscale = "clients.count"\n'
        '[base]\nscenario = "loadtest-spawn"\nset = { "duration_s" = 2 }\n'
        '[factors]\n"clients.count" = [1, 2]\n[report]\npoint = 5\n'
    )
    names = {
        "binary": "binary.toml",
        "latin1": "latin1.toml",
        "work": "work.txt",
        "a_file": "a_file",
        "spec": "spec.toml",
    }
    return {k: str(d / name) for k, name in names.items()} | {"dir": str(d)}


FILE_CASES = [
    ("experiments.run", ["{binary}"], "binary.toml: not a UTF-8 text file"),
    ("experiments.run", ["{latin1}"], "latin1.toml: not a UTF-8 text file"),
    ("experiments.run", ["loadtest-spawn", "--params", "{binary}"], "not a UTF-8 text file"),
    ("experiments.run", ["loadtest-spawn", "--set", "work=empirical({work})"], "work: empirical("),
    ("experiments.sweep", ["{binary}"], "not a UTF-8 text file"),
    ("experiments.sweep", ["{spec}", "--out", "{dir}/s"], "report.point: expected a table"),
    ("experiments.run", ["x" * 5000], "too long"),
    ("experiments.sweep", ["loadtest-spawn", "--out", "{a_file}"], "is a file, not a folder"),
    ("experiments.compare", ["loadtest-spawn", "--out", "{dir}"], "is a folder, not a file"),
    ("calibration.fit", ["--out", "{dir}"], "is a folder, not a file"),
    ("calibration.fit", ["sandboxes", "--out", "/proc/none/x.toml"], "cannot create"),
    ("experiments.bench", ["--repeat", "-5"], "--repeat"),
    ("experiments.bench", ["--only", "loadtests,nope"], "--only"),
]


@pytest.mark.slow
def test_compare_writes_the_path_it_prints(tmp_path):
    out = tmp_path / "figure-without-suffix"
    r = run_module("experiments.compare", "loadtest-spawn", "--set", "duration_s=2", "--out", str(out))
    assert r.returncode == 0 and r.stdout.strip() == str(out) and out.is_file()


@pytest.mark.slow
@pytest.mark.parametrize("module, args, message", FILE_CASES, ids=[f"{m}:{' '.join(a)[:40]}" for m, a, _ in FILE_CASES])
def test_bad_files_paths_and_options_exit_2_naming_them(files, module, args, message):
    r = run_module(module, *(a.format(**files) for a in args))
    err = r.stderr.strip()
    assert r.returncode == 2 and "\n" not in err and message in err, err


@pytest.mark.slow
def test_a_report_checks_its_point_and_scale_and_reads_a_table_without_errors(tmp_path):
    out = tmp_path / "sw"
    sweep = ["loadtest-spawn", "--set", "duration_s=2", "--factor", "clients.count=1,2", "--seeds", "1"]
    assert run_module("experiments.sweep", *sweep, "--out", str(out), "--no-report").returncode == 0
    results = out / "results.csv"
    cases = [(["--point", "999"], "--point 999"), (["--point", "-1"], "--point -1"), (["--scale", "x"], "--scale x")]
    for args, message in cases:
        r = run_module("experiments.report", str(results), *args)
        assert r.returncode == 2 and message in r.stderr, r.stderr
    import pandas as pd

    pd.read_csv(results).drop(columns=["error"]).to_csv(tmp_path / "noerror.csv", index=False)
    assert run_module("experiments.report", str(tmp_path / "noerror.csv"), "--out", str(tmp_path / "r")).returncode == 0
    # a malformed row in a sweep's table: the resume names the file and line
    with results.open("a") as f:
        f.write('1,"torn,row\n')
    r = run_module("experiments.sweep", *sweep, "--out", str(out), "--no-report")
    assert r.returncode == 2 and "results.csv, line" in r.stderr, r.stderr


@pytest.mark.slow
def test_a_sweep_of_a_hundred_million_seeds_is_refused_at_once_in_little_memory(tmp_path):
    # sized before it starts (points x seeds x cost per run), so it neither starts nor never ends
    out = tmp_path / "many"
    cmd = [sys.executable, "-m", "experiments.sweep", "loadtest-spawn", "--set", "duration_s=1", "--set"]
    cmd += ["clients.count=1", "--seeds", "100000000", "--jobs", "1", "--no-report", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)  # a guard against a hang
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "sweep size" in r.stderr and "100,000,000 seeds" in r.stderr and "SCALESIM_BUDGET" in r.stderr
    assert not (out / "results.csv").exists()
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 2 * 1024 * 1024  # KiB


def test_backoff_past_a_thousand_retries_does_not_overflow():
    # 2 ** attempt overflows a float after about 1,000 retries; the delay's exponent is capped long after the
    # backoff cap binds. One accept token, then every retry of the second call is rate limited, 1 µs apart at most.
    m = api.run(
        "loadtest-remote",
        set={
            "clients.count": 1,
            "clients.in_flight": 2,
            "clients.retry": "backoff",
            "clients.backoff_base_s": 1e-9,
            "clients.backoff_max_s": 1e-6,
            "limits.sync_accept_rate": 0.001,
            "limits.sync_accept_burst": 1,
            "overhead.submit": "constant(0)",
            "overhead.result": "constant(0)",
            "work": "constant(0.001)",  # a call that can come back within the run (a window that measures)
            "duration_s": 0.005,
            "warmup_s": 0,
            "drain_s": 0,
        },
    )
    assert m["retries"] > 2000 and m["rejections_by_kind"] == {"rate_limited": m["retries"]}
