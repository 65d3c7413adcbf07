"""experiments.sweep on Dask: a real scheduler and workers as separate processes on 127.0.0.1 give the rows
of ``--jobs 1``; a worker SIGKILLed mid-sweep loses and duplicates no row; ``dask-local``; bad executors exit 2."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from distributed import Client

from experiments import sweep

TINY = [
    "loadtest-spawn",
    "--factor",
    "clients.count=1,2,3",
    "--set",
    "duration_s=3",
    "--set",
    "clients.in_flight=20",
    "--seeds",
    "3",
    "--no-report",
]
# about 0.4 s a run, 12 runs: long enough that a kill lands mid-sweep
SLOW = ["loadtest-copies", "--set", "duration_s=60", "--factor", "clients.count=3,4,5,6", "--seeds", "3", "--no-report"]


class Cluster:
    """A Dask scheduler and workers (one thread each, no nanny: a killed worker stays dead), each its own process
    in its own session on 127.0.0.1; ``close`` kills every one of them."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.procs, self.workers = tmp, [], []
        info = tmp / "scheduler.json"
        self.procs.append(
            self._start("scheduler", "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0")
        )
        deadline = time.monotonic() + 30
        while not (info.exists() and info.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.address = json.loads(info.read_text())["address"]  # tcp://127.0.0.1:PORT

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        log = (self.tmp / f"{name}.log").open("w")
        extra = ["--scheduler-file", str(self.tmp / "scheduler.json"), "--no-dashboard"]
        return subprocess.Popen(
            [sys.executable, *args, *extra], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def add_workers(self, n: int) -> None:
        for _ in range(n):
            i = len(self.workers)
            worker = self._start(
                f"worker{i}", "-m", "distributed.cli.dask_worker", "--nthreads", "1", "--no-nanny", "--name", f"w{i}"
            )
            self.workers.append(worker)
            self.procs.append(worker)
        with Client(self.address, timeout=30, set_as_default=False) as c:
            c.wait_for_workers(len(self.workers), timeout=60)

    @property
    def executor(self) -> str:
        return "dask://" + self.address.removeprefix("tcp://")

    def close(self) -> None:
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        for p in self.procs:
            p.wait(timeout=30)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = None
    try:
        c = Cluster(tmp_path)
        c.add_workers(2)
        yield c
    finally:
        if c is not None:
            c.close()
        for p in c.procs if c is not None else []:
            assert p.poll() is not None  # none left behind


def table(out: Path) -> pd.DataFrame:
    t = pd.read_parquet(out / "results.parquet").drop(columns=["wall_s"])
    return t.sort_values(["point", "seed"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """The ``--jobs 1`` table of TINY."""
    folder = tmp_path_factory.mktemp("tiny")
    assert sweep.main([*TINY, "--jobs", "1", "--out", str(folder)]) == 0
    return table(folder)


@pytest.mark.slow
def test_a_sweep_on_a_dask_cluster_gives_the_rows_of_one_job(cluster, reference, tmp_path, capsys):
    out = tmp_path / "d"
    assert sweep.main([*TINY, "--executor", cluster.executor, "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(table(out), reference)
    assert len(reference) == 9 and (reference["error"] == "").all()
    # run again: every row is there, nothing runs, nothing is appended
    assert sweep.main([*TINY, "--executor", cluster.executor, "--out", str(out)]) == 0
    assert sum(1 for _ in (out / "results.csv").open()) == 1 + 9
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.slow
def test_a_worker_killed_mid_sweep_loses_and_duplicates_no_row(cluster, tmp_path):
    out = tmp_path / "k"
    cmd = [sys.executable, "-m", "experiments.sweep", *SLOW, "--executor", cluster.executor, "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        results = out / "results.csv"
        deadline = time.monotonic() + 60
        rows = 0
        while time.monotonic() < deadline and proc.poll() is None:
            rows = sum(1 for _ in results.open()) - 1 if results.exists() else 0
            if rows >= 2:
                break
            time.sleep(0.02)
        assert 2 <= rows < 12, f"the kill did not land mid-sweep ({rows} rows)"
        with Client(cluster.address, timeout=10, set_as_default=False) as c:
            running = {c.scheduler_info()["workers"][w]["name"]: keys for w, keys in c.processing().items()}
        cluster.workers[0].send_signal(signal.SIGKILL)
        assert running.get("w0"), f"worker w0 ran nothing when killed ({running})"
        _, stderr = proc.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, stderr
    assert cluster.workers[0].wait(timeout=10) == -signal.SIGKILL
    raw = pd.read_csv(out / "results.csv")
    assert len(raw) == 12 and not raw.duplicated(["point", "seed"]).any()
    assert sweep.main([*SLOW, "--jobs", "1", "--out", str(tmp_path / "one")]) == 0
    pd.testing.assert_frame_equal(table(out), table(tmp_path / "one"))


@pytest.mark.slow
def test_dask_local_gives_the_rows_of_one_job(reference, tmp_path):
    out = tmp_path / "l"
    assert sweep.main([*TINY, "--executor", "dask-local", "--jobs", "2", "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(table(out), reference)


@pytest.mark.parametrize(
    "executor, says",
    [
        ("threads", "expected process, serial, dask-local, dask://HOST:PORT or modal"),
        ("dask://nohost", "expected dask://HOST:PORT"),
        ("dask://127.0.0.1:70000", "expected dask://HOST:PORT"),
    ],
)
def test_a_bad_executor_exits_2_with_one_line(tmp_path, capsys, executor, says):
    with pytest.raises(SystemExit) as e:
        sweep.main([*TINY, "--executor", executor, "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and says in err and err.count("\n") == 1, err


@pytest.mark.slow
def test_an_unreachable_address_exits_2_with_one_line_within_seconds(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "experiments.sweep", *TINY, "--executor", f"dask://127.0.0.1:{port}"]
    run = subprocess.run([*cmd, "--out", str(tmp_path / "x")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert f"cannot reach a Dask scheduler at tcp://127.0.0.1:{port}" in run.stderr, run.stderr
    assert run.stderr.count("\n") == 1, run.stderr


@pytest.mark.slow
def test_an_address_that_is_not_a_dask_scheduler_exits_2(tmp_path):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer() -> None:  # an HTTP server, say: its reply is not Dask's protocol
        with contextlib.suppress(OSError):
            conn, _ = server.accept()
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" * 4)
            time.sleep(1)
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    try:
        cmd = [sys.executable, "-m", "experiments.sweep", *TINY, "--executor", f"dask://127.0.0.1:{port}"]
        run = subprocess.run([*cmd, "--out", str(tmp_path / "x")], capture_output=True, text=True, timeout=60)
    finally:
        server.close()
    assert run.returncode == 2
    assert "is not a Dask scheduler" in run.stderr and run.stderr.count("\n") == 1, run.stderr


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["dask-local", "dask://127.0.0.1:8786"])
def test_without_the_cluster_extra_a_dask_executor_exits_2_naming_it(tmp_path, executor):
    # Dask not installed: its import fails, as it does in an environment without the extra
    hide = "import sys; sys.modules['distributed'] = None; from experiments.sweep import main; sys.exit(main())"
    cmd = [sys.executable, "-c", hide, *TINY, "--executor", executor, "--out", str(tmp_path / "x")]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    assert "needs 'distributed', which is not installed: pip install -e '.[cluster]'" in run.stderr, run.stderr
    assert run.stderr.count("\n") == 1, run.stderr
    assert not (tmp_path / "x" / "results.csv").exists()
