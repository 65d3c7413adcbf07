"""``python -m experiments.scenario from-app``: the shipped calibration apps give back the presets they stand for,
key by key; apps written like Modal's docs' (tests/experiments/apps/, read and never run) give the keys their
decorators state; what the source does not fix is reported, not guessed; bad input is one line, exit 2."""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path

import pytest

from calibration.ways import WAYS
from experiments import scenario
from experiments.scenario import from_app
from models.runs import load_scenario
from sim.scenario import flatten, to_dict
from tests.support import one_line, run_module

ROOT = Path(__file__).resolve().parents[2]
APPS = Path(__file__).resolve().parent / "apps"
LOADTEST = str(ROOT / "calibration/apps/loadtest.py")
COLDSTART = str(ROOT / "calibration/apps/coldstart.py")
NAMES = {"name", "description", "source"}  # the scenario's own words, not the Function's


def batched_way() -> dict:
    """The keys calibration's batching way sets on its preset when it deploys ``work_batched`` (``--batched``)."""
    args = argparse.Namespace(round=1000, chunk=32, chunk_max_inputs=50, batched=True)
    return WAYS["batching"].own_sets(args)


# (app, Function, --model, the preset it stands for, the keys calibration sets on that preset for this Function)
ROUND_TRIPS = [
    (LOADTEST, "work", "function", "loadtest-remote", {}),
    (LOADTEST, "work_chunk", "function", "loadtest-batching", {}),
    (LOADTEST, "work_batched", "function", "loadtest-batching", batched_way()),
    (LOADTEST, "WorkServer", "function", "loadtest-server", {}),
    (COLDSTART, "LazyProbe", "coldstart", "coldstart-torch", {"coldstart.mode": "lazy"}),
    (COLDSTART, "SnapshotProbe", "coldstart", "coldstart-torch", {"coldstart.mode": "snapshot"}),
]
# keys the app states that its preset leaves at the default, because the preset's run never reads them
UNUSED_BY_PRESET = {
    ("work_batched", "batching.wait_s"): "the preset's clients send whole rounds: no chunk waits to fill (open-loop "
    "arrivals only)",
}


def as_run(tree_or_name: str, sets: dict) -> dict:
    """A scenario (preset or file) with ``sets``, as the loader builds it, flattened."""
    return flatten(to_dict(load_scenario(tree_or_name, [f"{k}={v}" for k, v in sets.items()])))


@pytest.mark.parametrize("app, function, model, preset, sets", ROUND_TRIPS, ids=[r[1] for r in ROUND_TRIPS])
def test_a_calibration_app_gives_back_its_preset_key_by_key(app, function, model, preset, sets, tmp_path):
    read = from_app(app, function, model)
    out = tmp_path / "read.toml"
    out.write_text(read.text)
    written = as_run(str(out), {})  # the file loads with the project's own loader
    want = as_run(preset, sets)
    stated = {k: v for k, v in read.stated().items() if k not in NAMES}
    assert stated, "the app states keys"
    for key, value in stated.items():
        assert written[key] == value, key  # the file holds what was read
        if (function, key) in UNUSED_BY_PRESET:
            assert want[key] != value  # (if the preset stated it, the exception would go)
            continue
        assert want[key] == value, f"{function}: {key} = {value!r} read, {want[key]!r} in {preset}"


def test_the_round_trip_covers_what_each_calibration_app_declares():
    read = {r[1]: from_app(r[0], r[1], r[2]).stated() for r in ROUND_TRIPS}
    assert read["work"]["function.max_inputs"] == 500
    assert read["work_chunk"]["function.max_inputs"] == 50
    assert read["work_batched"]["approach"] == "batching" and read["work_batched"]["batching.chunk_items"] == 32
    assert read["WorkServer"]["approach"] == "server" and read["WorkServer"]["server.target_concurrency"] == 1000
    assert read["SnapshotProbe"]["coldstart.mode"] == "snapshot" and read["LazyProbe"]["coldstart.mode"] == "lazy"
    for keys in read.values():
        assert {"work", "load", "arrivals.rate", "duration_s"}.isdisjoint(keys)  # never stated by an app
    text = from_app(LOADTEST, "work").text  # make_app passes its defaults on through **size: the comment says how
    assert "(**size: cpu=1.0); cpu = CPU (make_app's default, line " in text and "CPU = 1.0 (line " in text


def test_every_key_says_where_it_came_from_or_that_it_is_to_be_set():
    for app in sorted(APPS.glob("*.py")):
        for fn in ("api", "Server") if app.stem == "web_app" else (None,):
            text = from_app(str(app), fn).text
            tomllib.loads(text)
            for line in text.splitlines():
                if re.match(r"#? ?\w+ = ", line):
                    comment = line.split("  # ", 1)[1]
                    assert re.match(rf"({app.name}:\d+ |default, TO SET: |written by |the app's source)", comment), line


def test_an_llm_tool_call_function():
    read = from_app(str(APPS / "llm_tools_app.py"))
    assert read.stated() == {
        "autoscaler.max_containers": 200,
        "billing.cpu": 2.0,
        "billing.memory_gib": 4.0,  # memory=4096 MiB
        "function.max_inputs": 20,
        "function.target_inputs": 16,  # PER_CONTAINER - 4
    }
    assert "MAX_CONTAINERS = 200 (line 9)" in read.text  # how the constant was resolved
    assert "# retries = 3" in read.text  # written, as a comment: retries need a crash to act on (the loader's rule)
    assert any("timeout=600" in n and "not modelled" in n for n in read.notes)
    defaults = {k.key for k in read.keys if not k.stated}
    assert {"approach", "work", "load", "arrivals.rate", "duration_s"} <= defaults


def test_a_snapshot_class_on_a_gpu():
    read = from_app(str(APPS / "snapshot_cls_app.py"))
    assert read.stated() == {
        "autoscaler.min_containers": 1,
        "autoscaler.scaledown_window_s": 300.0,  # 5 * 60
        "function.max_inputs": 4,  # @modal.concurrent on the class
    }
    assert "\n[billing]\ngpu_per_s = 0.0  # default, TO SET" in read.text  # a GPU has no price here: to set
    assert any("enable_memory_snapshot=True" in n and "--model coldstart" in n for n in read.notes)
    assert any("snap=True" in n for n in read.notes)
    start = from_app(str(APPS / "snapshot_cls_app.py"), model="coldstart").stated()
    assert start == {"coldstart.mode": "snapshot", "coldstart.host_types": 3}  # GPU functions: 2-3 worker types


def test_dynamic_batching_with_modal_imported_by_name():
    read = from_app(str(APPS / "batched_app.py"))
    assert read.stated() == {
        "approach": "batching",
        "batching.chunk_items": 64,
        "batching.wait_s": 0.25,  # wait_ms=250
        "autoscaler.buffer_containers": 2,
        "function.max_inputs": 1,  # one batch per container
    }
    assert "# retry_backoff = 1.5" in read.text and "# retry_initial_delay_s = 0.5" in read.text


def test_a_web_endpoint_and_a_server():
    api = from_app(str(APPS / "web_app.py"), "api")
    assert api.stated() == {"autoscaler.max_containers": 10, "function.max_inputs": 100}
    assert any("web endpoint" in n for n in api.notes)
    server = from_app(str(APPS / "web_app.py"), "Server").stated()
    assert server == {
        "approach": "server",
        "server.target_concurrency": 50,
        "server.max_concurrency": 80,
        "server.scaleup_window_s": 30.0,
        "autoscaler.min_containers": 1,
        "billing.cpu": 0.5,
    }


def test_values_the_source_does_not_fix_are_reported_not_guessed():
    read = from_app(str(APPS / "dynamic_app.py"))
    assert read.stated() == {"autoscaler.scaledown_window_s": 120.0}
    notes = "\n".join(read.notes)
    assert "an environment variable" in notes and "MAX_CONTAINERS" in notes
    assert "**tier()" in notes  # the sizes it passes are not read
    assert "LIMIT is assigned more than once" in notes
    assert "max_containers = 0  # default, TO SET: dynamic_app.py:18" in read.text


BAD = [
    (["missing.py"], "no such file"),
    (["{binary}"], "not a UTF-8 text file"),
    (["{nul}"], "binary file"),
    (["{syntax}"], "not Python"),
    (["{empty}"], "no Modal Function found"),
    ([COLDSTART], "choose one with --function"),
    ([COLDSTART, "--function", "Nope"], "it has: LazyProbe, SnapshotProbe"),
]


@pytest.mark.parametrize("argv, words", BAD, ids=[w for _, w in BAD])
def test_bad_input_is_one_line_and_exit_2(argv, words, tmp_path, capsys):
    files = {"binary": b"\x89PNG\r\n\x1a\n\xff\xfe", "nul": b"import modal\x00\n", "syntax": b"def f(:\n", "empty": b""}
    for name, data in files.items():
        (tmp_path / f"{name}.py").write_bytes(data)
    argv = [a.format(**{n: tmp_path / f"{n}.py" for n in files}) for a in argv]
    assert scenario.main(["from-app", *argv]) == 2
    err = one_line(capsys.readouterr().err)
    assert err.startswith("experiments.scenario: ") and words in err, err


def test_a_function_defined_twice_is_ambiguous(tmp_path, capsys):
    app = tmp_path / "twice.py"
    app.write_text("import modal\napp = modal.App()\n@app.function()\ndef f(): ...\n@app.function()\ndef f(): ...\n")
    assert scenario.main(["from-app", str(app), "--function", "f"]) == 2
    assert "defined more than once" in one_line(capsys.readouterr().err)


@pytest.mark.slow
def test_the_command_writes_a_file_the_run_accepts(tmp_path):
    out = tmp_path / "llm.toml"
    r = run_module("experiments.scenario", "from-app", str(APPS / "llm_tools_app.py"), "--out", str(out))
    assert r.returncode == 0 and r.stdout.strip() == str(out), r.stderr
    assert "timeout=600" in r.stderr
    r = run_module("experiments.run", str(out), "--set", "duration_s=5")
    assert r.returncode == 0, r.stderr
    r = run_module("experiments.scenario", "from-app", "nope.py")
    assert r.returncode == 2 and one_line(r.stderr) == "experiments.scenario: nope.py: no such file"
