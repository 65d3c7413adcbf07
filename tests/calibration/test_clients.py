"""Where a load test's clients run (calibration/clients.py): each in its own OS process from one common start, the
rows merged into the one calls table; a client process that dies or a Ctrl-C ends the run and every child; the
descriptor check; clients in Modal containers (``--driver modal``). End to end through the real modal client on the
Modal stand-in, whose containers' modal clients are configured to reach it."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from calibration import clients
from calibration.callers import Load
from calibration.standin.server import StandIn, wait_for
from tests.support import ROOT

SMALL = ["--calls", "5", "--duration", "2", "--drain", "10", "--work-min", "0.05", "--work-max", "0.2", "--yes"]


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory):
    """The stand-in; its containers' modal clients are given its URL and token (a client container reaches it)."""
    with StandIn(log=tmp_path_factory.mktemp("standin") / "log.txt") as s:
        yield s


def cal(standin: StandIn, *argv: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "calibration.run", *argv]
    return subprocess.run(cmd, env=standin.env, capture_output=True, text=True, timeout=120)


def lookups(standin: StandIn, app: str) -> list[str]:
    return [line for line in standin.log.read_text().splitlines() if f"FunctionGet {app} " in line]


def children(pid: int) -> list[int]:
    """The live client processes (``python -m calibration.clients``) whose parent is ``pid`` (Linux /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z" and b"calibration.clients" in cmd:
            out.append(int(d.name))
    return sorted(out)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def app_exists(standin: StandIn, name: str) -> bool:
    code = (
        f"import modal, sys\ntry:\n    modal.App.lookup({name!r})\n"
        "except modal.exception.NotFoundError:\n    sys.exit(3)"
    )
    return subprocess.run([sys.executable, "-c", code], env=standin.env, timeout=60).returncode == 0


@pytest.mark.slow
def test_each_client_runs_in_its_own_process_from_one_start_into_one_table(standin, tmp_path: Path) -> None:
    r = cal(standin, "spawn", "--clients", "4", *SMALL, "--client-procs", "4", "--run-id", "t-procs",
            "--out", str(tmp_path / "procs"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    mf = json.loads((tmp_path / "procs" / "spawn" / "manifest.json").read_text())
    shares = mf["clients"]["shares"]
    assert mf["clients"]["driver"] == "processes" and [s["clients"] for s in shares] == [[0], [1], [2], [3]]
    assert len({s["pid"] for s in shares}) == 4  # four OS processes
    assert len(lookups(standin, "scalesim-cal-spawn-t-procs")) == 4  # each its own modal client, one look-up each
    t = pd.read_parquet(tmp_path / "procs" / "spawn" / "calls.parquet")
    assert sorted(t["client"].unique()) == [0, 1, 2, 3] and (t["kind"] == "").all()
    assert t["issued"].between(0.0, 2.0, inclusive="left").all()  # one time axis: every call within the window
    assert t.groupby("client")["issued"].min().max() < 0.5  # every client's load began at the common t0
    r = cal(standin, "spawn", "--clients", "4", *SMALL, "--client-procs", "0", "--run-id", "t-here",
            "--out", str(tmp_path / "here"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    before = pd.read_parquet(tmp_path / "here" / "spawn" / "calls.parquet")  # all clients in one process
    assert json.loads((tmp_path / "here" / "spawn" / "manifest.json").read_text())["clients"]["driver"] == "in-process"
    assert list(t.columns) == list(before.columns) and t.dtypes.equals(before.dtypes)


def _start(standin: StandIn, tmp_path: Path, run_id: str, **kw) -> tuple[subprocess.Popen, list[int]]:
    """A long run with two client processes, once both are ready (looked up their handle)."""
    cmd = [sys.executable, "-m", "calibration.run", "spawn", "--clients", "2", "--calls", "3", "--duration", "60",
           "--drain", "5", "--work-min", "0.05", "--work-max", "0.1", "--client-procs", "2", "--yes",
           "--run-id", run_id, "--out", str(tmp_path)]  # fmt: skip
    p = subprocess.Popen(cmd, env=standin.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    app = f"scalesim-cal-spawn-{run_id}"
    assert wait_for(lambda: len(lookups(standin, app)) == 2 and len(children(p.pid)) == 2, 60), p.pid
    kids = children(p.pid)
    time.sleep(1.0)  # the load is on
    return p, kids


@pytest.mark.slow
def test_a_killed_client_process_fails_the_run_in_one_line_and_ends_the_others(standin, tmp_path: Path) -> None:
    p, kids = _start(standin, tmp_path, "t-kill")
    os.kill(kids[1], signal.SIGKILL)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "client process 1 (clients 1" in lines[0] and "SIGKILL" in lines[0], err
    assert not any(alive(k) for k in kids)
    assert not app_exists(standin, "scalesim-cal-spawn-t-kill")


@pytest.mark.slow
def test_ctrl_c_ends_the_run_and_every_client_process(standin, tmp_path: Path) -> None:
    p, kids = _start(standin, tmp_path, "t-int", start_new_session=True)
    os.killpg(p.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground process group
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert not any(alive(k) for k in kids)
    assert not app_exists(standin, "scalesim-cal-spawn-t-int")


@pytest.mark.slow
def test_clients_in_modal_containers_from_one_start(standin, tmp_path: Path) -> None:
    r = cal(standin, "spawn", "--clients", "2", *SMALL, "--driver", "modal", "--client-lead", "8",
            "--run-id", "t-modal", "--out", str(tmp_path))  # fmt: skip
    assert r.returncode == 0, r.stderr
    mf = json.loads((tmp_path / "spawn" / "manifest.json").read_text())
    shares = mf["clients"]["shares"]
    assert mf["clients"]["driver"] == "modal" and [s["clients"] for s in shares] == [[0], [1]]
    t = pd.read_parquet(tmp_path / "spawn" / "calls.parquet")
    mine = {s["container"] for s in shares}
    assert len(mine) == 2 and all(c.startswith("ta-standin") for c in mine)  # a container each...
    assert not mine & set(t["container"])  # ...not one of the Function's
    assert sorted(t["client"].unique()) == [0, 1] and (t["kind"] == "").all()
    assert t["issued"].between(0.0, 2.0, inclusive="left").all()


def test_a_dry_run_with_clients_on_modal_plans_and_bounds_their_containers(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "calibration.run", "spawn", "--driver", "modal", "--region", "us-east", "--dry-run",
           "--run-id", "t1"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODAL_")} | {"HOME": str(tmp_path)}
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "app scalesim-cal-spawn-t1: work, drive_clients" in r.stdout
    assert "clients in 8 Modal containers (drive_clients, region us-east)" in r.stdout
    # 32 containers × 120 s, and 8 client containers × (60 s lead + 60 + 60 + 120 s margin)
    assert "6,240 container-s" in r.stdout


@pytest.mark.slow
def test_the_descriptor_check_refuses_a_run_past_the_hard_limit_before_deploying(tmp_path: Path) -> None:
    def low() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    env = {k: v for k, v in os.environ.items() if not k.startswith("MODAL_")} | {"HOME": str(tmp_path)}
    env |= {"MODAL_TOKEN_ID": "ak-x", "MODAL_TOKEN_SECRET": "as-x", "SCALESIM_PROXY_KEY": "wk-x",
            "SCALESIM_PROXY_SECRET": "ws-x"}  # fmt: skip
    cmd = [sys.executable, "-m", "calibration.run", "server", "--clients", "2", "--calls", "1000", "--client-procs",
           "1", "--yes", "--out", str(tmp_path / "o")]  # fmt: skip
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, cwd=ROOT, preexec_fn=low)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("calibration.run: --connections:") and "256" in lines[0], r.stderr
    assert "App deployed" not in r.stdout and not (tmp_path / "o").exists()


def test_a_client_process_raises_its_soft_descriptor_limit_to_the_hard_one() -> None:
    def low() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 2048))

    code = "from calibration.clients import raise_nofile; import sys; print(raise_nofile(int(sys.argv[1])))"
    ok = subprocess.run([sys.executable, "-c", code, "1000"], capture_output=True, text=True, preexec_fn=low)
    assert ok.returncode == 0 and ok.stdout.strip() == "2048", ok.stderr
    too_many = subprocess.run([sys.executable, "-c", code, "5000"], capture_output=True, text=True, preexec_fn=low)
    assert too_many.returncode == 1 and "needs 5000 file descriptors" in too_many.stderr


def test_shares_and_jobs() -> None:
    assert clients.shares(8, 3) == [(0, 1, 2), (3, 4, 5), (6, 7)]
    assert clients.shares(2, 8) == [(0,), (1,)]  # never an empty share
    job = clients.Job("http", Load(clients=2), (0, 1), url="http://x", headers={"Modal-Key": "k"},
                      backoff=clients.Backoff())  # fmt: skip
    assert clients.Job.from_dict(job.as_dict()) == job
    assert "Modal-Key" not in repr(job)  # the proxy token is never printed
    assert job.descriptors() == 2 * 1000 + clients.FD_MARGIN


def test_a_client_ready_after_the_common_start_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    import modal

    class Fn:
        hydrate = SimpleNamespace(aio=lambda: asyncio.sleep(0))

    monkeypatch.setattr(modal.Function, "from_name", lambda app, name: Fn())
    job = clients.Job("closed", Load(clients=1), (0,), (("a", "work"),))

    async def past() -> float:
        return time.time() - 5.0

    with pytest.raises(clients.ClientError, match="raise --client-lead"):
        asyncio.run(clients.run_job(job, past))
