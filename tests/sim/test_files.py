"""Every file a command reads goes through one checked path (sim/files.py): a named pipe, a device, a folder, a file
over its kind's cap or TOML nested thousands of levels deep is one line naming the file and exit 2, within seconds and
never a hang; every output path is checked before any work starts (sim/files.py check_out); a plot's title is
text, never mathtext."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from calibration import fit
from experiments import compare, report, run, sweep, whatif
from sim import files
from sim.scenario import ScenarioError

DEEP = "x = " + "[" * 5000 + "]" * 5000 + "\n"  # tomllib recurses once a level: past the stack
BIG = 300 * files.MB  # over every cap (a sparse file: no disk used)
MANIFEST = {
    "kind": "calls",
    "what": "spawn",
    "source": "modal",
    "scenario": {"preset": "loadtest-spawn"},
    "window": [0, 1],
}


def special(path: Path, kind: str) -> Path:
    """``path`` made into a file of ``kind``: fifo, zero (a link to /dev/zero), folder, big (over every cap), deep."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        os.symlink("/dev/zero", path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "big":
        with open(path, "wb") as f:
            f.truncate(BIG)
    elif kind == "deep":
        path.write_text("[" * 5000 + "]" * 5000 if path.suffix == ".json" else DEEP)
    return path


def trace_dir(tmp: Path, kind: str, part: str) -> Path:
    """A trace directory whose manifest (``part`` manifest) or calls table (``part`` table) is of ``kind``."""
    d = tmp / "trace"
    d.mkdir()
    if part == "manifest":
        special(d / "manifest.json", kind)
    else:
        (d / "manifest.json").write_text(json.dumps(MANIFEST))
        special(d / "calls.parquet", kind)
    return d


ALL = ("fifo", "zero", "folder", "big", "deep")
AUTOSCALED = ["loadtest-remote", "--set", "function.containers=0"]

# reader -> (the file's name, the command: main and its arguments for the file, the kinds that apply)
READERS: dict[str, tuple[str, Callable[[Path, Path], tuple[Callable, list[str]]], tuple[str, ...]]] = {
    "scenario": ("s.toml", lambda f, t: (run.main, [str(f)]), ALL),
    "params": (
        "p.toml",
        lambda f, t: (run.main, ["mmc", "--params", str(f)]),
        ALL,
    ),
    "spec": (
        "spec.toml",
        lambda f, t: (sweep.main, [str(f), "--out", str(t / "out")]),
        ALL,
    ),
    "sweep-params": (
        "p.toml",
        lambda f, t: (sweep.main, ["mmc", "--params", str(f), "--out", str(t / "out")]),
        ALL,
    ),
    "results-csv": (
        "results.csv",
        lambda f, t: (report.main, [str(f), "--out", str(t / "report")]),
        ("fifo", "zero", "folder", "big"),
    ),
    "results-parquet": (
        "results.parquet",
        lambda f, t: (report.main, [str(f), "--out", str(t / "report")]),
        ("fifo", "zero", "folder", "big"),
    ),
    "empirical": (
        "values.txt",
        lambda f, t: (run.main, ["mmc", "--set", f"work=empirical({f})"]),
        ("fifo", "zero", "folder", "big"),
    ),
    "trace.path": (
        "azure.csv",
        lambda f, t: (run.main, ["loadtest-remote", "--set", "load=trace", "--set", f"trace.path={f}"]),
        ("fifo", "zero", "folder", "big"),
    ),
    "program": (
        "program.toml",
        lambda f, t: (
            run.main,
            ["loadtest-remote", "--set", "function.containers=0", "--set", f"autoscaler.program={f}"],
        ),
        ALL,
    ),
    "whatif": (
        "w.toml",
        lambda f, t: (whatif.main, ["capacity", "--scenario", str(f)]),
        ALL,
    ),
    "reference": ("ref.toml", lambda f, t: (fit.main, [str(f), "--quick"]), ALL),
}
TRACE_PARTS = {"manifest": ("fifo", "zero", "folder", "big", "deep"), "table": ("fifo", "zero", "folder", "big")}
CASES = [(r, k) for r, (_, _, kinds) in READERS.items() for k in kinds]


class Hung(Exception):
    pass


@pytest.fixture
def within_seconds():
    """Fail (rather than hang the suite) a call that blocks for more than 5 s, e.g. on a named pipe."""

    def ring(*_):
        raise Hung("blocked for 5 s")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(5)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def one_line_exit_2(capsys, main: Callable, argv: list[str], *names: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for name in names:
        assert name in err, err
    return err


WHAT = {"fifo": "named pipe", "zero": "device", "folder": "folder", "big": "over", "deep": "nested"}


@pytest.mark.parametrize("reader, kind", CASES, ids=[f"{r}-{k}" for r, k in CASES])
def test_a_special_file_is_one_line_exit_2(tmp_path, capsys, within_seconds, reader, kind):
    name, command, _ = READERS[reader]
    f = special(tmp_path / name, kind)
    main, argv = command(f, tmp_path)
    err = one_line_exit_2(capsys, main, argv, name)
    if reader != "reference" or kind != "folder":  # a folder SOURCE is a trace directory (one without a manifest)
        assert WHAT[kind] in err, err
    if kind == "big":
        assert " MB" in err, err


@pytest.mark.parametrize("reader", READERS)
def test_a_name_too_long_to_look_up_is_one_line_exit_2(tmp_path, capsys, within_seconds, reader):
    name, command, _ = READERS[reader]
    main, argv = command(tmp_path / ("a" * 300 + Path(name).suffix), tmp_path)
    one_line_exit_2(capsys, main, argv, "a" * 100)


@pytest.mark.parametrize("part, kind", [(p, k) for p, kinds in TRACE_PARTS.items() for k in kinds])
def test_a_special_file_in_a_trace_directory_is_one_line_exit_2(tmp_path, capsys, within_seconds, part, kind):
    d = trace_dir(tmp_path, kind, part)
    name = "manifest.json" if part == "manifest" else "calls.parquet"
    err = one_line_exit_2(capsys, fit.main, [str(d), "--quick"], name)
    assert WHAT[kind] in err, err


@pytest.mark.parametrize(
    "argv",
    [
        ["experiments.run", "mmc", "--set", "function.containers=" + "[" * 5000 + "]" * 5000],
        ["experiments.run", "mmc", "--set", "function.containers=" + "{a=" * 5000 + "1" + "}" * 5000],
        ["experiments.sweep", "mmc", "--set", "function.containers=" + "[" * 5000],
        ["experiments.sweep", "mmc", "--factor", "function.containers=" + "[" * 5000],
    ],
    ids=["run-array", "run-table", "sweep-set", "sweep-factor"],
)
def test_deep_toml_in_set_is_one_line_exit_2(capsys, argv):
    main = {"experiments.run": run.main, "experiments.sweep": sweep.main}[argv[0]]
    one_line_exit_2(capsys, main, argv[1:], "function.containers", "nested")


def test_deep_dotted_keys_are_capped_after_parsing(tmp_path, capsys):
    f = tmp_path / "dotted.toml"
    f.write_text("a" + ".a" * 5000 + " = 1\n")  # tomllib nests dotted keys without recursing; what reads them would
    one_line_exit_2(capsys, run.main, [str(f)], "dotted.toml", "nested")


def test_a_read_is_bounded_even_when_the_size_lies():
    with pytest.raises(ScenarioError, match="over 10 bytes"):  # /proc files say 0 bytes
        files.read_bytes("/proc/self/status", "a status", 10)
    assert files.read_text("/proc/self/status", "a status", 1_000_000).startswith("Name:")


def test_a_tomls_strings_and_comments_do_not_count_as_nesting():
    text = 'a = "[[[[" # {{{{\nb = """\n[[[[\n"""\nc = \'{{{{\'\n[t]\nd = [[1], [2]]\n'
    assert files.toml_depth(text) == 2
    assert files.loads_toml(text, "t")["t"]["d"] == [[1], [2]]


# --- the real command line: a fresh process per reader, with a timeout ----------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=60)  # hang guard


@pytest.mark.slow
@pytest.mark.parametrize(
    "reader",
    ["scenario", "params", "spec", "results-csv", "empirical", "trace"],
)
def test_a_named_pipe_ends_the_real_command_in_seconds(tmp_path, reader):
    if reader == "trace":
        f = trace_dir(tmp_path, "fifo", "table") / "calls.parquet"
        args = ["calibration.fit", str(f.parent), "--quick"]
    else:
        name, command, _ = READERS[reader]
        f = special(tmp_path / name, "fifo")
        main, argv = command(f, tmp_path)
        args = [main.__module__, *argv]
    r = cli(*args)
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip()
    assert "\n" not in err and "named pipe" in err and f.name in err, err


@pytest.mark.slow
def test_deep_toml_ends_the_real_command_in_seconds(tmp_path):
    f = special(tmp_path / "deep.toml", "deep")
    for args in (["experiments.run", str(f)], ["experiments.run", "mmc", "--set", "x=" + "[" * 5000]):
        r = cli(*args)
        assert r.returncode == 2 and "\n" not in r.stderr.strip() and "nested" in r.stderr, r.stderr


# --- writing ----------------------------------------------------------------------------------------------------


def writers(tmp: Path) -> list[tuple[Callable, list[str], str]]:
    """(main, arguments, what the line says) for outputs no command may write to."""
    long = tmp / ("x" * 300 + ".png")
    folder = tmp / "a-folder"
    folder.mkdir()
    a_file = tmp / "a-file"
    a_file.write_text("")
    pipe = special(tmp / "pipe.png", "fifo")
    piped = tmp / "piped"
    special(piped / "results.csv", "fifo")
    figures = tmp / "figures"
    special(figures / "throughput.png", "fifo")  # a report's figure, named by its model
    return [
        (compare.main, ["mmc", "--out", "/proc/x.png"], "/proc"),
        (compare.main, ["mmc", "--out", str(long)], "characters"),
        (compare.main, ["mmc", "--out", str(folder)], "folder"),
        (compare.main, ["mmc", "--out", str(pipe)], "named pipe"),
        (fit.main, ["coldstart", "--quick", "--out", "/proc/x.toml"], "/proc"),
        (fit.main, ["coldstart", "--quick", "--out", str(folder)], "folder"),
        (sweep.main, ["mmc", "--out", str(tmp / ("y" * 300))], "characters"),
        (sweep.main, ["mmc", "--out", str(a_file)], "not a folder"),
        (sweep.main, ["mmc", "--out", str(piped)], "results.csv"),
        (sweep.main, ["mmc", "--out", "/proc/x"], "/proc"),
        (report.main, [str(tmp / "r.csv"), "--out", str(a_file)], "not a folder"),
        (report.main, [str(tmp / "r.csv"), "--out", "/proc/x"], "/proc"),
        (report.main, [str(tmp / "r.csv"), "--out", str(figures)], "throughput.png: a named pipe"),
        (whatif.main, ["autoscaler", "--out", str(figures)], "throughput.png: a named pipe"),
        (whatif.main, ["drain", "--out", "/proc/x"], "/proc"),
        (whatif.main, ["drain", "--out", str(tmp / ("z" * 300))], "characters"),
    ]


def test_an_output_that_cannot_be_written_is_one_line_exit_2_before_any_work(tmp_path, capsys, within_seconds):
    for main, argv, said in writers(tmp_path):
        one_line_exit_2(capsys, main, argv, "--out", said)
    assert list((tmp_path / "a-folder").iterdir()) == []  # nothing was written there (the probe is removed)


def test_a_compare_title_is_text_not_mathtext(tmp_path, capsys):
    out = tmp_path / "c.png"
    argv = ["mmc", "--set", "duration_s=20", "--set", "warmup_s=0", "--title", r"$\frac{1}{$", "--out", str(out)]
    assert compare.main(argv) == 0, capsys.readouterr().err
    assert out.stat().st_size > 1000


def test_a_results_table_reads_through_the_checked_path(tmp_path):
    from experiments.results import read_results

    table = pd.DataFrame({"point": [1, 0], "variant": ["a", "a"], "seed": [0, 0], "x": [1.0, 2.0]})
    table.to_csv(tmp_path / "r.csv", index=False)
    table.to_parquet(tmp_path / "r.parquet", index=False)
    for name in ("r.csv", "r.parquet"):
        assert list(read_results(tmp_path / name)["point"]) == [0, 1]
