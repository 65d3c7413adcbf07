"""calibration.run through the real modal client against the Modal stand-in (calibration/standin): deploy, drive,
trace, stop, over a real socket, nothing patched."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from calibration.standin.server import StandIn

SMALL = ["--clients", "2", "--calls", "10", "--duration", "3", "--drain", "10", "--work-min", "0.1",
         "--work-max", "0.4", "--yes"]  # fmt: skip


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory):
    with StandIn(log=tmp_path_factory.mktemp("standin") / "log.txt") as s:
        yield s


def cal(standin: StandIn, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "calibration.run", *argv],
        env=env or standin.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def app_exists(standin: StandIn, name: str) -> bool:
    code = (
        f"import modal, sys\ntry:\n    modal.App.lookup({name!r})\n"
        "except modal.exception.NotFoundError:\n    sys.exit(3)"
    )
    return subprocess.run([sys.executable, "-c", code], env=standin.env, timeout=60).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("what", ["spawn", "copies", "batching", "server"])
def test_a_run_deploys_drives_traces_and_stops_through_the_real_client(standin, tmp_path: Path, what: str) -> None:
    proxy_token = {"SCALESIM_PROXY_KEY": "wk-test", "SCALESIM_PROXY_SECRET": "ws-test"}  # the proxy wants one
    extra = ["--connections", "10"] if what == "server" else []
    r = cal(
        standin, what, *SMALL, *extra, "--run-id", f"t-{what}", "--out", str(tmp_path), env=standin.env | proxy_token
    )
    assert r.returncode == 0, r.stderr
    calls = pd.read_parquet(tmp_path / what / "calls.parquet")
    assert (calls["kind"] != "unfinished").all() and calls["finished"].notna().all()  # every call came back
    done = calls[calls["kind"] == ""]
    assert len(done) >= 20  # 2 clients × 10 in flight, each call back at least once
    assert done["container"].str.startswith("ta-standin").all()  # ran in the stand-in's containers
    assert (done["finished"] >= done["issued"]).all()
    name = f"scalesim-cal-{what}-t-{what}"
    assert not app_exists(standin, name if what != "copies" else f"{name}-copy-0")
    lookups = [line for line in standin.log.read_text().splitlines() if f"FunctionGet {name}" in line]
    procs = len(json.loads((tmp_path / what / "manifest.json").read_text())["clients"]["shares"])
    # each handle looked up once per client process (each its own modal client), not once per call in flight
    assert lookups and max(Counter(lookups).values()) <= procs


@pytest.mark.slow
def test_a_bad_token_is_one_line_exit_2_and_leaves_no_app(standin, tmp_path: Path) -> None:
    env = {**standin.env, "MODAL_TOKEN_SECRET": "as-wrong"}
    r = cal(standin, "spawn", *SMALL, "--run-id", "t-badtoken", "--out", str(tmp_path), env=env)
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()
    assert len(last) == 1 and "credentials" in last[0], r.stderr
    assert "Traceback" not in r.stderr and "could not stop" not in r.stderr
    assert not app_exists(standin, "scalesim-cal-spawn-t-badtoken")


@pytest.mark.slow
def test_a_sweep_on_modal_gives_the_rows_of_jobs_1(standin, tmp_path: Path) -> None:
    """``--executor modal`` ships presets with the code (``add_local_python_source``'s default ``ignore`` keeps only
    ``.py`` files: every row was "unknown preset"), runs an ephemeral app's ``starmap`` and writes the same rows."""
    spec = tmp_path / "tiny.toml"  # four rows of a preset (the default spec's quick version has 30: no more found)
    spec.write_text(
        'name = "tiny"\ndescription = "Two small load tests"\nseeds = 2\nscale = "clients.count"\n'
        '[base]\nscenario = "loadtest-spawn"\n[factors]\n"clients.count" = [2, 4]\n'
    )
    argv = [str(spec), "--no-report"]
    tables = []
    for name, how in (("modal", ["--executor", "modal"]), ("local", ["--jobs", "1"])):
        out = tmp_path / name
        cmd = [sys.executable, "-m", "experiments.sweep", *argv, *how, "--out", str(out)]
        r = subprocess.run(cmd, env=standin.env, capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr
        t = pd.read_csv(out / "results.csv").drop(columns=["wall_s"]).sort_values(["point", "seed"])
        tables.append(t.reset_index(drop=True))
    assert len(tables[0]) == 4 and tables[0]["error"].isna().all()
    pd.testing.assert_frame_equal(tables[0], tables[1])


@pytest.mark.slow
def test_oauth_credentials_need_all_three(tmp_path: Path) -> None:
    code = "from calibration.run import has_credentials; import sys; sys.exit(0 if has_credentials() else 3)"
    base = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "MODAL_CONFIG_PATH": str(tmp_path / "none.toml")}
    two = {**base, "MODAL_OAUTH_REFRESH_TOKEN": "r", "MODAL_OAUTH_CLIENT_ID": "c"}
    three = {**two, "MODAL_OAUTH_CLIENT_SECRET": "s"}
    codes = [subprocess.run([sys.executable, "-c", code], env=e, timeout=60).returncode for e in (two, three)]
    assert codes == [3, 0]


@pytest.mark.slow
@pytest.mark.parametrize(
    "content, says",
    [(b"[limits]\nstart_rate = -1\n", "limits.start_rate"), (b"[nope]\n", "unknown section"),
     (b"[sandboxes]\ncreate_s = -0.5\n", "sandboxes.create_s"),
     (b"\xff\xfe", "not TOML"), (None, "not a regular file"),
     (b"[autoscaler]\ninterval_s = 0\n", "autoscaler.interval_s must be a finite number > 0"),
     (b"[limits]\nstart_rate = 0\n", "limits.start_rate must be a finite number > 0"),
     (b"[autoscaler]\ncold_start_s = 1e300\n", "autoscaler.cold_start_s must be at most 3600")],
)  # fmt: skip
def test_a_bad_parameter_file_is_one_line_exit_2(tmp_path: Path, content: bytes | None, says: str) -> None:
    path = tmp_path / "p.toml"
    if content is None:
        import os

        os.mkfifo(path)  # a named pipe: read as a file it would block forever
    else:
        path.write_bytes(content)
    cmd = [sys.executable, "-m", "calibration.standin", "--params", str(path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and says in r.stderr, r.stderr


@pytest.mark.slow
def test_coldstart_runs_both_start_modes_and_its_fit_sees_the_platform_cold_start(standin, tmp_path: Path) -> None:
    """The probe's module reaches the container through the image's ENV (``Image.env``); every start is a new
    single-use container; each start takes at least the stand-in's cold start (its platform part) plus the import;
    ``calibration.fit`` on the trace gives a median within that."""
    from calibration.standin.platform import Params

    cold = Params.load().cold_start_s
    argv = ["coldstart", "--imports", "numpy", "--starts", "3", "--start-interval", "0.3", "--startup-timeout", "30"]
    r = cal(standin, *argv, "--yes", "--run-id", "t-coldstart", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    for mode in ("lazy", "snapshot"):
        starts = pd.read_parquet(tmp_path / f"coldstart-{mode}" / "starts.parquet")
        assert len(starts) == 3 and starts["total"].notna().all(), starts
        assert (starts["total"] >= cold).all() and (starts["total"] < cold + 5).all(), starts
    assert not app_exists(standin, "scalesim-cal-coldstart-t-coldstart")
    out = tmp_path / "fit.toml"
    cmd = [sys.executable, "-m", "calibration.fit", str(tmp_path / "coldstart-lazy"), "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    median = float(out.read_text().split("lognormal(")[1].split(",")[0])
    assert cold <= median < cold + 5


def _sandbox_pids(log: str) -> tuple[set[int], set[int]]:
    """The pids the stand-in logged as started (a sandbox's command) and as reaped (commands and execs)."""
    import re

    started = {int(p) for p in re.findall(r"sandbox \S+ started pid (\d+)", log)}
    return started, {int(p) for p in re.findall(r"sandbox \S+ reaped pid (\d+)", log)}


def _running(pid: int) -> bool:
    """``pid`` is alive and not a zombie (a pid reused by another program since does not count: /proc's cmdline)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return "\nState:\tZ" not in status and cmdline.startswith((b"sleep\0", b"sh\0"))


@pytest.mark.slow
def test_sandboxes_run_end_to_end_each_a_real_process_all_reaped(standin, tmp_path: Path) -> None:
    """The sandboxes way through the real client (V2: SandboxCreateV2, then exec over the task command router): each
    sandbox a real process, placed after the stand-in's create_s; all reaped after the probe's terminates and
    App.stop."""
    from calibration.standin.platform import Params

    params = Params.load(standin.params)
    before = len(standin.log.read_text())
    argv = ["sandboxes", "--sandboxes", "20", "--concurrency", "10", "--sandbox-timeout", "60", "--yes"]
    r = cal(standin, *argv, "--run-id", "t-sandboxes", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    t = pd.read_parquet(tmp_path / "sandboxes" / "sandboxes.parquet")
    assert len(t) == 20 and t[["requested", "placed", "running"]].notna().all().all()  # NaN: a failed step
    assert "error" not in t or (t["error"].fillna("") == "").all()
    assert (t["requested"] <= t["placed"]).all() and (t["placed"] <= t["running"]).all()
    assert (t["placed"] - t["requested"] >= params.create_s).all()
    assert (t["running"] - t["requested"] >= params.create_s + params.start_s).all()
    assert not app_exists(standin, "scalesim-cal-sandboxes-t-sandboxes")
    log = standin.log.read_text()[before:]
    assert "unimplemented" not in log, log
    started, reaped = _sandbox_pids(log)
    assert len(started) == 20 and started <= reaped and len(reaped) == 40  # 20 commands, 20 execs
    assert not [pid for pid in reaped if _running(pid)]


PROTOCOL = """
import modal
app = modal.App.lookup("scalesim-standin-sandbox-protocol", create_if_missing=True)
sb = modal.Sandbox.create("sleep", "infinity", app=app, timeout=60)
short = modal.Sandbox.create("sleep", "infinity", app=app, timeout=1)
p = sb.exec("sh", "-c", "echo out; echo err >&2; exit 3")
print(repr(p.stdout.read()), repr(p.stderr.read()), p.wait())
print(sb.exec("no-such-program").wait())
try:
    short.wait(raise_on_termination=False)
except modal.exception.SandboxTimeoutError:
    print("timeout", short.returncode)
sb.exec("sleep", "600")
app.stop()
sb.wait(raise_on_termination=False)
print("stopped", sb.returncode)
"""


@pytest.mark.slow
def test_sandbox_exec_output_exit_codes_timeout_and_app_stop_v1(standin) -> None:
    """The V1 path (``MODAL_SANDBOX_V2=0``: SandboxCreate, SandboxGetTaskId, TaskGetCommandRouterAccess): an exec's
    stdout and stderr to EOF and its exit code, 127 for a program not found, a sandbox past its timeout (124), and
    App.stop terminating a sandbox with an exec running (137), every process reaped."""
    before = len(standin.log.read_text())
    env = standin.env | {"MODAL_SANDBOX_V2": "0"}
    r = subprocess.run([sys.executable, "-c", PROTOCOL], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["'out\\n' 'err\\n' 3", "127", "timeout 124", "stopped 137"], r.stdout
    log = standin.log.read_text()[before:]
    assert "unimplemented" not in log, log
    started, reaped = _sandbox_pids(log)
    assert len(started) == 2 and started <= reaped and len(reaped) == 4  # 2 commands, 2 execs (one not found)
    assert not [pid for pid in reaped if _running(pid)]


@pytest.mark.slow
def test_the_plan_runs_its_design_through_the_client_resumes_and_fits_as_distinct_experiments(
    standin, tmp_path: Path
) -> None:
    """``calibration.run plan``: every designed run deploys, drives, traces and stops; a second invocation keeps
    them all (nothing deployed); the fit of the four traces simulates four experiments (each spawn trace named by
    its run: named by its folder alone, the four were one) and recovers the stand-in's start limit within its
    interval (at this size the round trip and the decision interval are not pinned: docs/how-to/calibrate.md)."""
    from calibration.design import DESIGN

    small = ["--clients", "2", "--calls", "40", "--duration", "2", "--drain", "5", "--work-min", "0.1",
             "--work-max", "0.2"]  # fmt: skip
    argv = ["plan", *small, "--yes", "--run-id", "t-plan", "--out", str(tmp_path)]
    r = cal(standin, *argv)
    assert r.returncode == 0, r.stderr
    for run in DESIGN:
        calls = pd.read_parquet(tmp_path / run.name / "spawn" / "calls.parquet")
        assert (calls["kind"] == "").sum() >= 2 and calls["finished"].notna().all(), run.name
        assert not app_exists(standin, f"scalesim-cal-spawn-t-plan-{run.name}")
    again = cal(standin, *argv)
    assert again.returncode == 0 and again.stdout.count("done (its trace") == len(DESIGN), again.stdout
    assert "App deployed" not in again.stdout
    from calibration import recovery
    from calibration.standin.platform import Params

    f = recovery.fit_traces([tmp_path / r.name / "spawn" for r in DESIGN], 2, 60, 9, 1)
    assert {t.approach for t in f.targets} == {f"{r.name}/spawn" for r in DESIGN}  # four experiments, not one
    truth, found = Params.load(), {p.free.name: (v, p) for v, p in zip(f.values, f.profiles, strict=True)}
    rate, profile = found["start_rate"]
    low, high = recovery.resolved(profile)
    assert profile.pinned and low <= truth.start_rate <= high, (rate, low, high)  # parameter recovery
    assert truth.cold_start_s <= found["cold_start_median_s"][0] < truth.cold_start_s + 1  # the floor + a start


BROKEN_APP = """
import sys

import modal

app = modal.App("t-broken")
# the container's interpreter cannot start: it dies before it can say why (as one that cannot import modal does)
image = modal.Image.debian_slim().env({"PYTHONHOME": "/nonexistent"})


@app.function(image=image, serialized=True)
def f(x):
    return x


if __name__ == "__main__":
    app.deploy()
    try:
        modal.Function.from_name("t-broken", "f").remote(1)
    except Exception as e:
        print(f"{type(e).__name__}: {e}")
        sys.exit(0)
    sys.exit(5)
"""


def test_a_container_that_dies_before_it_is_ready_fails_its_inputs_and_says_why(standin, tmp_path: Path) -> None:
    """Not a silent restart loop: the caller's input fails with the container's exit and the tail of its stderr,
    and the stand-in's log says it in one line a container."""
    app = tmp_path / "broken.py"
    app.write_text(BROKEN_APP)
    r = subprocess.run([sys.executable, str(app)], env=standin.env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "before it was ready" in r.stdout and "exited with code" in r.stdout, r.stdout
    lines = [x for x in standin.log.read_text().splitlines() if "of f failed to start" in x]
    assert lines and all("before it was ready" in x for x in lines)


def test_the_project_hides_only_its_own_source_from_a_container() -> None:
    from calibration.standin.container import hidden

    interpreter = ("/src/proj/.venv",)
    assert hidden("/src/proj", "/src/proj", interpreter) and hidden("/src/proj/calibration", "/src/proj", interpreter)
    assert not hidden("/src/proj/.venv/lib/python3.11/site-packages", "/src/proj", interpreter)  # a venv inside
    assert not hidden("/src/proj2/lib", "/src/proj", interpreter)  # beside it, a name that starts the same
    assert not hidden("/usr/lib/python3.11", "/src/proj", interpreter) and not hidden("/src/proj", "", interpreter)


@pytest.mark.slow
def test_a_port_out_of_range_or_in_use_is_one_line_exit_2_and_no_folder_is_left(tmp_path: Path) -> None:
    import os
    import socket

    work = tmp_path / "tmp"  # the stand-in's work folder goes under TMPDIR: this test's own
    work.mkdir()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        for argv, says in (
            (["--port", "-1"], "--port: a TCP port"),
            (["--proxy-port", "70000"], "--proxy-port: a TCP port"),
            (["--port", str(port)], f"--port {port}: cannot listen"),
            (["--proxy-port", str(port)], f"--proxy-port {port}: cannot listen"),
        ):
            cmd = [sys.executable, "-m", "calibration.standin", *argv]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env={**os.environ, "TMPDIR": str(work)})
            assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and says in r.stderr, r.stderr
    assert not list(work.iterdir())  # its work folder goes with it


@pytest.mark.slow
def test_an_unreachable_modal_is_one_line_exit_2_at_once_and_nothing_is_stopped(tmp_path: Path) -> None:
    import os

    unreachable = {"MODAL_SERVER_URL": "http://127.0.0.1:1", "MODAL_TOKEN_ID": "ak-x", "MODAL_TOKEN_SECRET": "as-x"}
    env = {**os.environ, **unreachable}
    cmd = [sys.executable, "-m", "calibration.run", "spawn", *SMALL, "--out", str(tmp_path)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)  # a guard against a hang
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()
    assert len(last) == 1 and "cannot connect" in last[0] and "could not stop" not in r.stderr, r.stderr
