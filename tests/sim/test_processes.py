"""Processes and signals (sim/processes.py): a command killed with SIGKILL or SIGTERM leaves no process and its output
reaches its end; a killed worker is one line, exit 1; Ctrl-C is one line, exit 130, in every command, a dask-local
sweep's included. Each command runs as a subprocess in its own process group (a terminal's Ctrl-C goes to the whole
group; after a kill, a process still in the group is one left behind). Linux: /proc."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from experiments import sweep

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")

# a run of 400 app copies on two processes: about 20 s of work, far longer than any of these tests waits
RUN = ["experiments.run", "loadtest-copies", "--set", "clients.count=400", "--set", "function.copies=0", "--jobs", "2"]
START_S = 90  # generous: a command's imports take seconds on a loaded 2-core machine
GONE_S = 15  # what a process may take to go once its parent died or it was told to stop


def _poll(condition: Callable[[], object], timeout: float, step: float = 0.05) -> object:
    """``condition()``'s first true value within ``timeout`` seconds, else its last (false) one."""
    deadline = time.monotonic() + timeout
    while not (value := condition()) and time.monotonic() < deadline:
        time.sleep(step)
    return value


def _stat(pid: int | str) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state, ppid, pgid, ...); None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _group(pgid: int) -> list[int]:
    """The live processes (not zombies) of process group ``pgid``."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (st := _stat(d.name)) and st[0] != "Z" and int(st[2]) == pgid:
            out.append(int(d.name))
    return out


def _children(pid: int) -> list[int]:
    """The children of process ``pid``, whichever of its threads started them."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return sorted(out)


def _mapped(pid: int, name: str) -> bool:
    """A shared library whose path holds ``name`` is mapped in process ``pid``."""
    try:
        return name in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _loaded(pid: int) -> bool:
    """Past loading its modules: numpy's extension is mapped (imported after the package's own first lines)."""
    return _mapped(pid, "_multiarray_umath")


def _stdio(pid: int) -> set[str]:
    """What the stdin, stdout and stderr of process ``pid`` are."""
    try:
        return {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in (0, 1, 2)}
    except OSError:
        return set()


def _start(args: list[str], cwd: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own process group
        cwd=cwd,
    )


def _finish(proc: subprocess.Popen) -> tuple[str, str]:
    """Its stdout and stderr read to their end (each pipe's end: every holder of it gone), and its exit."""
    try:
        return proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("its output never reached its end: a process still holds the pipes")


def _nothing_left(proc: subprocess.Popen) -> None:
    left = _poll(lambda: not _group(proc.pid), GONE_S)
    assert left, f"left behind: {[(p, _stat(p)) for p in _group(proc.pid)]}"


@contextlib.contextmanager
def _session(args: list[str], cwd: Path | None = None):
    proc = _start(args, cwd)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _workers(proc: subprocess.Popen, n: int = 2) -> list[int]:
    kids = _poll(lambda: len(_children(proc.pid)) >= n and _children(proc.pid), START_S)
    assert kids, f"its {n} workers never started: {proc.poll()}"
    return kids


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_run_leaves_no_process_and_its_output_ends(sig):
    with _session(RUN) as proc:
        kids = _workers(proc)
        for kid in kids:  # a worker holds none of the caller's pipes, once started (the fork is a moment before)
            assert _poll(lambda kid=kid: _stdio(kid) == {os.devnull}, START_S), _stdio(kid)
        os.kill(proc.pid, sig)
        _finish(proc)
        assert proc.returncode == -sig
        _nothing_left(proc)


SWEEP = ["experiments.sweep", *RUN[1:], "--factor", "clients.count=300,400", "--no-report", "--out", "s"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (RUN, "a worker process of the run's parts died (killed by SIGKILL)"),
        (SWEEP, "a worker process died (killed, or out of memory); results so far kept in s/results.csv"),
    ],
    ids=["run", "sweep"],
)
def test_a_killed_worker_is_one_line_and_exit_1(args, says, tmp_path):
    with _session(args, cwd=tmp_path) as proc:
        kids = _workers(proc)
        assert _poll(lambda: _stdio(kids[0]) == {os.devnull}, START_S)  # started (not a moment after its fork)
        os.kill(kids[0], signal.SIGKILL)
        _, err = _finish(proc)
        assert proc.returncode == 1, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], err
        _nothing_left(proc)


def test_a_worker_whose_parent_dies_goes_without_pdeathsig():
    # elsewhere than Linux (here: prctl made to fail), a watchdog thread ends the worker once its parent is gone
    script = textwrap.dedent(
        """
        import multiprocessing, os, sys, time
        from sim import processes
        processes._death_signal = lambda: False
        def worker(parent):
            processes.detach_worker(parent)
            time.sleep(60)
        if __name__ == "__main__":
            p = multiprocessing.get_context("fork").Process(target=worker, args=(os.getpid(),))
            p.start()
            print(p.pid, flush=True)
            time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        worker = int(proc.stdout.readline())
        assert _poll(lambda: _stat(worker) and _stat(worker)[1] == str(proc.pid), 10)  # it runs, under its parent
        proc.kill()
        proc.wait()
        assert _poll(lambda: not _stat(worker) or _stat(worker)[0] == "Z", GONE_S), "the worker outlived its parent"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def slow_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep's results table whose time-series point takes long to run again (its report's work)."""
    out = tmp_path_factory.mktemp("slow")
    argv = ["loadtest-spawn", "--set", "duration_s=2", "--seeds", "1", "--jobs", "1", "--no-report", "--out", str(out)]
    assert sweep.main(argv) == 0
    table = pd.read_csv(out / "results.csv")
    table["duration_s"] = 3000  # the report runs the point again for its time series: 4 million calls, in budget
    table.to_csv(out / "results.csv", index=False)
    return out / "results.csv"


# each command at work, and what to wait for before Ctrl-C: its workers (a pool of two), or only its modules loaded
COMMANDS = {
    "run": (RUN, 2),
    "sweep": (SWEEP, 2),
    "whatif": (["experiments.whatif", "capacity", "--rate", "2000", "--jobs", "2"], 2),
    "fit": (["calibration.fit", "--jobs", "2", "--seeds", "2"], 2),
    "compare": (["experiments.compare", *RUN[1:-2], "--out", "c.png"], 0),
    "bench": (["experiments.bench", "--quick"], 0),
    "report": (["experiments.report", "TABLE", "--out", "r"], 0),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COMMANDS))
def test_ctrl_c_is_one_line_and_exit_130(name, tmp_path, request):
    args, workers = COMMANDS[name]
    if name == "report":
        args = [str(request.getfixturevalue("slow_table")) if a == "TABLE" else a for a in args]
    with _session(args, cwd=tmp_path) as proc:
        if workers:
            _workers(proc, workers)
        else:
            assert _poll(lambda: _loaded(proc.pid), START_S), "it never loaded"
            time.sleep(3.0)  # into its work (a Ctrl-C while it loads is one line too)
        assert proc.poll() is None, proc.communicate()
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground process group
        _, err = _finish(proc)
        lines = err.strip().splitlines()
        assert proc.returncode == 130, err
        assert len(lines) == 1 and "interrupted" in lines[0] and "Traceback" not in err, err
        if name == "sweep":
            assert "results so far kept in s/results.csv" in lines[0]
        _nothing_left(proc)


def test_ctrl_c_while_a_command_loads_is_one_line():
    with _session(RUN) as proc:
        # ctypes is mapped: sim/processes.py, the package's first import, is loading (a Ctrl-C before that is the
        # interpreter's own start); numpy not yet: the command's modules still are
        assert _poll(lambda: _mapped(proc.pid, "_ctypes"), START_S, step=0.01), "it never loaded"
        time.sleep(0.01)  # (its handler is set a few lines on)
        loading = not _loaded(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = _finish(proc)
        assert proc.returncode == 130 and err.strip() == "experiments.run: interrupted", err
        if not loading:
            pytest.skip("it had loaded already: the one line came from main_guard, not from the loading handler")


@pytest.mark.slow
def test_a_dask_local_sweeps_ctrl_c_is_one_line(tmp_path):
    pytest.importorskip("distributed")
    args = ["experiments.sweep", *RUN[1:], "--factor", "clients.count=300,400"]
    with _session([*args, "--executor", "dask-local", "--no-report", "--out", "d"], cwd=tmp_path) as proc:
        # its two Dask workers loaded (the resource tracker, a third child, loads no numpy), then at work
        loaded = lambda: sum(map(_loaded, _children(proc.pid))) >= 2  # noqa: E731
        assert _poll(loaded, START_S), "its cluster never started"
        time.sleep(3.0)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = _finish(proc)
        lines = err.strip().splitlines()
        assert proc.returncode == 130, err
        assert len(lines) == 1 and "interrupted; results so far kept in" in lines[0], err
        assert "Traceback" not in err and "leaked" not in err
        _nothing_left(proc)
