"""Calibration runs' real side, offline: the Modal apps declare what they should, the callers write valid
traces against in-process stand-ins and a real uvicorn server, and calibration.run plans, refuses and cleans up
without credentials or network."""

from __future__ import annotations

import ast
import asyncio
import inspect
import math
import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from modal._utils.async_utils import synchronizer
from modal.exception import ResourceExhaustedError

from calibration import callers, trace
from calibration import run as calrun
from calibration.apps import coldstart, loadtest
from calibration.apps import sandboxes as sbx
from calibration.ways import WAYS
from calibration.ways.base import Option, Way
from models.registry import MODELS
from models.runs import load_scenario
from tests.support import ROOT

# --- the apps' declarations ------------------------------------------------------------------------------------


def functions(app: Any) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # registered_functions is deprecated for 1.7 (modal/app.py)
        return dict(app.registered_functions)


def spec(fn: Any) -> dict[str, Any]:
    """What modal 1.6.4 will send at deploy: the loader's closure (modal/_functions.py ``_from_local``'s ``_load``)
    and the local FunctionInfo (``Function.info()`` answers locally before hydration)."""
    raw = synchronizer._translate_in(fn)
    return {**inspect.getclosurevars(raw._load).nonlocals, "info": raw._function_info}


def test_loadtest_app_declares_the_four_ways() -> None:
    app = loadtest.make_app("scalesim-cal-test", max_containers=7, cpu=1.0, memory_mib=1024)
    fns = functions(app)
    assert app.name == "scalesim-cal-test"
    assert set(fns) == {"work", "work_chunk", "work_batched", "WorkServer"}
    work = spec(fns["work"])
    assert work["max_concurrent_inputs"] == 500  # @modal.concurrent(max_inputs=500): docs/sources.md §1
    assert work["info"].cpu == 1.0 and work["info"].memory_mib == 1024
    assert work["autoscaler_settings"].max_containers == 7
    assert spec(fns["work_chunk"])["max_concurrent_inputs"] == 50
    batched = spec(fns["work_batched"])["info"].batching_info
    assert (batched.max_batch_size, batched.wait_ms) == (32, loadtest.BATCH_WAIT_MS)
    server = spec(fns["WorkServer"])
    assert server["is_server"]
    assert server["autoscaler_settings"].target_concurrency_float == 1000
    inner = server["info"]._inner_server_info
    assert inner.port == 8000 and inner.unauthenticated is False  # proxy auth required (App.server's default)
    assert server["info"].cpu == 1.0
    assert not any(spec(f)["info"].image_info.image_id for f in fns.values())  # nothing built or deployed


def test_loadtest_copies_are_the_same_function_under_other_names() -> None:
    apps = [loadtest.make_app(f"scalesim-cal-copies-t-copy-{i}", ways=("work",)) for i in range(3)]
    assert [a.name for a in apps] == [f"scalesim-cal-copies-t-copy-{i}" for i in range(3)]
    for a in apps:
        fns = functions(a)
        assert set(fns) == {"work"}
        assert synchronizer._translate_in(fns["work"])._raw_f is loadtest.work  # module-level: importable remotely


def test_coldstart_app_snapshot_only_where_asked() -> None:
    app = coldstart.make_app("scalesim-cal-coldstart-t")
    fns = functions(app)
    lazy, snap = spec(fns["LazyProbe.*"]), spec(fns["SnapshotProbe.*"])
    assert lazy["enable_memory_snapshot"] is False and snap["enable_memory_snapshot"] is True
    for s in (lazy, snap):
        assert s["info"].single_use_containers is True  # every call is a new container
        assert s["startup_timeout"] == coldstart.STARTUP_TIMEOUT_S
    only = functions(coldstart.make_app("scalesim-cal-coldstart-u", modes=("lazy",)))
    assert set(only) == {"LazyProbe.*"}


# --- callers against in-process stand-ins ------------------------------------------------------------------------


class Aio:
    """A method with modal's ``.aio`` form."""

    def __init__(self, fn: Any) -> None:
        self.aio = fn


class StandIn:
    """An in-process object with a modal Function's call interface (``remote.aio``, ``spawn.aio`` ->
    ``get.aio``), sleeping each input's work; ``fail`` raises on every ``fail``-th input."""

    def __init__(self, fail: int = 0, message: str = "Input rate limit (200/s) exceeded for function work") -> None:
        self.n, self.fail, self.message = 0, fail, message
        self.remote = Aio(self._run)
        self.spawn = Aio(self._spawn)
        self.hydrate = Aio(lambda: asyncio.sleep(0))

    async def _run(self, x: Any) -> Any:
        self.n += 1
        if self.fail and self.n % self.fail == 0:
            raise ResourceExhaustedError(self.message)
        if isinstance(x, list):
            return await loadtest.work_chunk(x)
        return await loadtest.work(x)

    async def _spawn(self, x: Any) -> Any:
        task = asyncio.ensure_future(self._run(x))
        return type("FC", (), {"get": Aio(lambda: task)})()


LOAD = callers.Load(clients=2, in_flight=4, duration_s=0.3, warmup_s=0.0, drain_s=2.0, work_min=0.005, work_max=0.02)


def write_and_read(tmp_path: Path, kind: str, what: str, table: pd.DataFrame, window: tuple, sets: dict) -> Any:
    preset = {"calls": f"loadtest-{what}", "starts": "coldstart-torch", "sandboxes": "sandboxes-v2"}[kind]
    mf = callers.manifest(kind, what, preset, sets, window, t0=0.0, t1=1.0, apps=["a"], parameters={"x": 1})
    return trace.read(trace.write(tmp_path / what, mf, table))


@pytest.mark.parametrize("style", ["remote", "spawn"])
def test_closed_loop_against_a_stand_in_writes_a_valid_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    monkeypatch.setenv("MODAL_TASK_ID", "ta-standin")
    fn = StandIn()
    call = (callers.spawn_call if style == "spawn" else callers.remote_call)([fn])
    table, _ = asyncio.run(callers.closed_loop(call, LOAD))
    sets = {"clients.count": 2, "clients.in_flight": 4, "duration_s": 0.3, "work": LOAD.work()}
    tr = write_and_read(tmp_path, "calls", style, table, (0.0, 0.3), sets)
    t = tr.table
    assert len(t) > LOAD.clients * LOAD.in_flight  # slots issued again after their first call came back
    assert t["initial"].sum() == LOAD.clients * LOAD.in_flight
    assert (t["kind"] == "").all() and (t["attempts"] == 1).all()
    assert (t["container"] == "ta-standin").all()
    assert (t["issued"] < LOAD.duration_s).all()
    assert (t["issued"] <= t["started"] + 0.01).all() and (t["started"] <= t["ended"]).all()
    assert (t["ended"] <= t["finished"] + 0.01).all()
    assert ((t["ended"] - t["started"]) >= t["work"] - 0.002).all()  # the remote side slept the drawn work
    stats = trace.statistics(t, tr.window)
    assert stats["calls_per_s"] > 0 and stats["containers_seen"] == 1
    assert tr.manifest["scenario"]["preset"] == f"loadtest-{style}" and tr.manifest["source"] == "modal"


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("Input rate limit (200/s) exceeded for function work", "rate_limited"),
        ("Function work reached pending input queue limit (2000)", "queue_full"),
    ],
)
def test_rejections_get_their_kind_and_end_their_slot(tmp_path: Path, message: str, kind: str) -> None:
    fn = StandIn(fail=3, message=message)
    table, _ = asyncio.run(callers.closed_loop(callers.remote_call([fn]), LOAD))
    failed = table[table["kind"] != ""]
    assert len(failed) > 0 and set(failed["kind"]) == {kind}
    assert failed["finished"].notna().all()
    # a single .remote raises and its slot ends (clients.retry = "none"): at most one failure per slot
    assert len(failed) <= LOAD.clients * LOAD.in_flight
    write_and_read(tmp_path, "calls", "remote", table, (0.0, 0.3), {})


def test_error_kinds_map_modal_exceptions_and_http_statuses() -> None:
    assert callers.error_kind(ResourceExhaustedError("Input rate limit (200/s) exceeded")) == "rate_limited"
    assert callers.error_kind(ResourceExhaustedError("reached pending input queue limit (2000)")) == "queue_full"
    assert callers.error_kind(RuntimeError("boom")) == "other"
    assert [callers.http_kind(s) for s in (503, 429, 500)] == ["http_503", "http_429", "other"]


def test_rounds_of_chunks_against_a_stand_in(tmp_path: Path) -> None:
    fn = StandIn()
    table, _ = asyncio.run(callers.rounds(callers.remote_call([fn], chunk=True), LOAD, round_items=10, chunk_items=4))
    assert set(table["items"]) == {4, 2}  # 10 items: chunks of 4, 4, 2
    first = table[table["initial"]]
    assert len(first) == LOAD.clients * 3 and first["items"].sum() == LOAD.clients * 10
    tr = write_and_read(tmp_path, "calls", "batching", table, (0.0, 0.3), {})
    assert trace.statistics(tr.table, tr.window)["calls_per_s"] > 0


def test_calls_in_flight_at_the_deadline_are_cut_off() -> None:
    slow = callers.Load(clients=1, in_flight=3, duration_s=0.05, drain_s=0.1, work_min=5.0, work_max=5.0)
    table, _ = asyncio.run(callers.closed_loop(callers.remote_call([StandIn()]), slow))
    assert len(table) == 3 and table["finished"].isna().all()  # never back: NaN, as the schema says


def test_coldstart_loop_and_sandbox_probe_against_stand_ins(tmp_path: Path) -> None:
    class Probe:
        def __init__(self) -> None:
            self.remote = Aio(self._probe)

        async def _probe(self) -> dict:
            import time

            await asyncio.sleep(0.01)
            return {"ready": time.time(), "container": "ta-x"}

    table, _ = asyncio.run(callers.coldstart_loop(Probe(), starts=5, interval_s=0.01, timeout_s=5))
    assert len(table) == 5 and (table["total"] > 0).all()
    write_and_read(tmp_path, "starts", "coldstart", table, (0.0, 1.0), {"coldstart.mode": "lazy"})

    terminated: list[int] = []

    class Proc:
        wait = Aio(lambda: asyncio.sleep(0.001, result=0))

    class Box:
        def __init__(self, i: int) -> None:
            self.i = i
            self.exec = Aio(self._exec)
            self.terminate = Aio(self._terminate)

        async def _exec(self, *args: str) -> Proc:
            if self.i == 2:
                raise RuntimeError("exec failed")
            return Proc()

        async def _terminate(self) -> None:
            terminated.append(self.i)

    made = iter(range(100))

    async def create(*args: str, **kw: Any) -> Box:
        i = next(made)
        if i == 4:
            raise ResourceExhaustedError("sandbox creation rate limit (5/s)")
        return Box(i)

    fake = type("Sandbox", (), {"create": Aio(create)})
    import time

    rows = asyncio.run(sbx.probe(object(), 6, 3, t0=time.time(), sandbox=fake))
    t = pd.DataFrame(rows)
    assert sorted(terminated) == [0, 1, 2, 3, 5]  # every sandbox created is terminated, failed exec included
    assert t["requested"].notna().all() and t["placed"].isna().sum() == 1 and t["running"].isna().sum() == 2
    assert set(t["error"]) == {"", "RuntimeError", "ResourceExhaustedError"}
    write_and_read(tmp_path, "sandboxes", "sandboxes", t, (0.0, 1.0), {"sandboxes.count": 6})


# --- the server way: the real FastAPI app under uvicorn, driven by the project's aiohttp caller --------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_app_under_uvicorn_driven_by_the_server_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODAL_TASK_ID", "ta-uvicorn")
    port = free_port()
    server, thread = loadtest.serve("127.0.0.1", port)
    try:
        headers = callers.proxy_headers({callers.PROXY_KEY_ENV: "wk-test", callers.PROXY_SECRET_ENV: "ws-test"})
        assert headers == {"Modal-Key": "wk-test", "Modal-Secret": "ws-test"}
        table, _ = asyncio.run(
            callers.server_loop(
                f"http://127.0.0.1:{port}", LOAD, headers, connection_limit=4, backoff=callers.Backoff()
            )
        )
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    sets = {"clients.count": 2, "clients.in_flight": 4, "clients.connection_limit": 4, "work": LOAD.work()}
    tr = write_and_read(tmp_path, "calls", "server", table, (0.0, LOAD.duration_s), sets)
    t = tr.table
    assert len(t) > LOAD.clients * LOAD.in_flight and (t["kind"] == "").all()
    assert (t["container"] == "ta-uvicorn").all() and (t["started"] <= t["ended"]).all()
    assert trace.statistics(t, tr.window)["calls_per_s"] > 0


def test_server_caller_retries_503_and_429_then_gives_the_kind() -> None:
    from aiohttp import web

    answers = iter([503, 429, 200, 503, 503, 503, 503, 503])

    async def handler(request: web.Request) -> web.Response:
        assert request.headers["Modal-Key"] == "k"
        status = next(answers)
        if status == 200:
            return web.json_response({"container": "c", "started": 1.0, "ended": 2.0})
        return web.Response(status=status)

    async def go() -> list:
        import aiohttp

        api = web.Application()
        api.router.add_get("/work", handler)
        runner = web.AppRunner(api)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        tries = {"n": 0}

        def deadline() -> bool:
            tries["n"] += 1
            return tries["n"] > 4

        try:
            async with aiohttp.ClientSession() as s:
                call = callers.http_call(
                    [s],
                    f"http://127.0.0.1:{port}",
                    {"Modal-Key": "k"},
                    backoff=callers.Backoff(0.001, 0.002),
                    deadline=deadline,
                )
                first = await call(0, [0.0])
                with pytest.raises(callers.CallFailed) as e:
                    await call(0, [0.0])
                return [first, e.value]
        finally:
            await runner.cleanup()

    (result, attempts), failed = asyncio.run(go())
    assert result["container"] == "c" and attempts == 3
    assert failed.kind == "http_503" and failed.attempts == 3


# --- calibration.run: dry run, credentials, bad options, the stop-the-apps path ------------------------------------


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODAL_") and not k.startswith("SCALESIM_PROXY")}
    env["HOME"] = str(tmp_path)  # no ~/.modal.toml
    return env


@pytest.mark.slow
def test_dry_run_prints_plan_and_cost_without_credentials(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "calibration.run", "spawn", "--dry-run", "--run-id", "t1", "--out", str(out)]
    r = subprocess.run(cmd, cwd=ROOT, env=clean_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "scalesim-cal-spawn-t1: work" in r.stdout
    assert "1 CPU, 1024 MiB; at most 32" in r.stdout
    assert "8 clients × 1000 calls in flight" in r.stdout
    assert "3,840 container-s" in r.stdout and "= $0.0588" in r.stdout
    assert not out.exists()  # a dry run writes nothing


@pytest.mark.slow
def test_real_run_without_credentials_exits_2_with_one_line(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "calibration.run", "spawn", "--yes", "--out", str(tmp_path / "o")]
    r = subprocess.run(cmd, cwd=ROOT, env=clean_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "modal token new" in lines[0] and "MODAL_TOKEN_ID" in lines[0]
    assert "Traceback" not in r.stderr and not (tmp_path / "o").exists()


def test_a_malformed_modal_config_exits_2_without_echoing_it(tmp_path: Path) -> None:
    (tmp_path / ".modal.toml").write_text("token_secret = as-SECRET [not toml")
    cmd = [sys.executable, "-m", "calibration.run", "spawn", "--dry-run"]
    r = subprocess.run(cmd, cwd=ROOT, env=clean_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert ".modal.toml" in r.stderr and "SECRET" not in r.stderr + r.stdout


def test_dry_run_cost_follows_the_prices() -> None:
    args = calrun.parser().parse_args(["spawn", "--run-id", "x"])
    plan = calrun.make_plan(args)
    per_s = 1.0 * calrun.CPU_PRICE + 1.0 * calrun.MEMORY_PRICE
    assert plan.container_seconds == 32 * 120 and math.isclose(plan.cost(), 3840 * per_s)
    assert math.isclose(plan.cost(0.0, 0.0), 0.0)
    small = calrun.make_plan(calrun.parser().parse_args(["spawn", "--run-id", "x", "--cpu", "0.125"]))
    tiny = calrun.make_plan(calrun.parser().parse_args(["sandboxes", "--run-id", "x", "--cpu", "0.125"]))
    assert small.cpu == tiny.cpu == 0.125  # billed at the 0.125-core minimum (docs/sources.md §6)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--duration", "inf"),
        ("--duration", "1e308"),
        ("--clients", "-1"),
        ("--calls", "100000000"),
        ("--work-max", "nan"),
        ("--cpu-price", "-0.1"),
        ("--memory-mib", "1e308"),
        ("--sandboxes", "99999999999999999999"),
        ("--run-id", "Bad Name"),
        ("--region", "us east\n"),
    ],
)
def test_bad_options_exit_2_naming_the_option(capsys: pytest.CaptureFixture, option: str, value: str) -> None:
    try:
        code = calrun.main(["spawn", option, value, "--dry-run"])
    except SystemExit as e:  # argparse's own errors (sim/cli.py ArgParser: one line, exit 2)
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and option in err[0]


def test_scenario_keys_are_the_simulators() -> None:
    for what in WAYS:
        for extra in (["--batched"], []) if what == "batching" else ([],):
            args = calrun.parser().parse_args([what, "--run-id", "x", *extra])
            plan = calrun.make_plan(args)
            preset, sets = calrun.scenario(args, plan)
            load_scenario(preset, [f"{k}={v!r}".replace("'", '"') for k, v in sets.items()])


@pytest.mark.parametrize("what", list(WAYS))
def test_every_way_of_the_registry_has_a_plan_a_preset_and_a_dry_run(
    what: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    way = WAYS[what]
    assert way.name == what and isinstance(way, Way)
    args = calrun.parser().parse_args([what, "--run-id", "t1", "--out", str(tmp_path)])
    plan = calrun.make_plan(args)
    assert plan.what == what and plan.apps and plan.containers > 0 and plan.cost() > 0
    assert plan.apps[0].name.startswith(f"scalesim-cal-{what}-t1")
    assert calrun.scenario(args, plan)[0] == way.preset and load_scenario(way.preset)
    assert calrun.main([what, "--dry-run", "--run-id", "t1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"calibration.run {what}: run t1\n") and "upper-bound cost" in out and "dry run" in out
    assert not any(tmp_path.iterdir())  # a dry run writes nothing


def test_the_way_names_are_the_registrys() -> None:
    # The command's choices, the fit's reference experiments and their presets come from WAYS; no module of
    # calibration/ outside calibration/ways holds its own list of way names (a literal of two or more of them).
    from calibration import objective, targets

    choices = next(a.choices for a in calrun.parser()._actions if a.dest == "what")
    assert list(choices) == [*WAYS, "plan"]  # every way, and the designed plan (calibration/design.py)
    assert targets.APPROACHES == ("spawn", "copies", "batching", "server")  # the reference table's rows, in order
    assert {t.approach for t in targets.TARGETS} == set(targets.APPROACHES) and set(targets.APPROACHES) <= set(WAYS)
    assert all(objective.reference(a).preset == WAYS[a].preset for a in targets.APPROACHES)
    assert sorted(["trace", *targets.APPROACHES], key=objective.slowest_first) == [
        "trace",
        "server",
        "copies",
        "spawn",
        "batching",
    ]  # the longest runs first; a trace's experiment before them
    ways = set(WAYS) - set(MODELS)  # "coldstart", "sandboxes": models' names too (sources.py, fit.py)
    lists = []
    for path in sorted((ROOT / "calibration").rglob("*.py")):
        if "ways" in path.relative_to(ROOT / "calibration").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict):
                items = node.keys if isinstance(node, ast.Dict) else node.elts
                names = [n.value for n in items if isinstance(n, ast.Constant) and n.value in ways]
                if len(names) > 1:
                    lists.append(f"{path.relative_to(ROOT)}:{node.lineno} {names}")
    assert lists == []


def test_a_way_is_one_class_and_its_registry_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # A new way brings its option, plan and preset; the command, its checks and the dry run take it as they are.
    class Echo(Way):
        name = "echo"
        preset = "loadtest-remote"
        options = (Option("--echoes", int, 3, "echo: how many", (1, 9)),)

        def plan(self, args: Any, name: str, out: Path) -> calrun.Plan:
            n = args.echoes
            return calrun.Plan(self.name, args.run_id, [], 0.125, 256, n, 1.0, n * 1.0, f"{n} echoes", 1.0, 1.0, out)

    monkeypatch.setitem(WAYS, "echo", Echo())
    assert calrun.main(["echo", "--echoes", "4", "--dry-run", "--run-id", "t1"]) == 0
    assert "calls: 4 echoes" in capsys.readouterr().out
    assert calrun.main(["echo", "--echoes", "10", "--dry-run"]) == 2
    assert "--echoes: expected a number in [1, 9]" in capsys.readouterr().err


class FakeDeployer:
    def __init__(self, fail_on: str = "") -> None:
        self.fail_on, self.deployed, self.stopped = fail_on, [], []

    def deploy(self, name: str, app: Any) -> str:
        if name == self.fail_on:
            raise RuntimeError("deploy failed mid-run")
        self.deployed.append(name)
        return name

    def stop(self, name: str, handle: Any) -> None:
        self.stopped.append(name)
        if name.endswith("copy-1"):
            raise RuntimeError("stop failed")  # the others are still stopped


def copies_plan(tmp_path: Path) -> calrun.Plan:
    args = calrun.parser().parse_args(["copies", "--copies", "3", "--run-id", "t", "--out", str(tmp_path)])
    return calrun.make_plan(args)


def test_apps_are_stopped_when_a_deploy_fails_midway(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    plan = copies_plan(tmp_path)
    names = [a.name for a in plan.apps]
    dep = FakeDeployer(fail_on=names[2])
    with pytest.raises(RuntimeError, match="deploy failed"):
        calrun.execute(plan, dep, lambda p, h: pytest.fail("driven after a failed deploy"))
    assert dep.deployed == names[:2] and dep.stopped == names[::-1]  # the failed one too (it may exist)
    assert f"modal app stop {names[1]}" in capsys.readouterr().err


@pytest.mark.parametrize("exc", [KeyboardInterrupt, RuntimeError, TimeoutError])
def test_apps_are_stopped_when_the_run_is_interrupted_or_fails(tmp_path: Path, exc: type) -> None:
    plan = copies_plan(tmp_path)
    dep = FakeDeployer()

    def drive(p: calrun.Plan, handles: list) -> list:
        assert handles == [a.name for a in p.apps]
        raise exc()

    with pytest.raises(exc):
        calrun.execute(plan, dep, drive)
    assert sorted(dep.stopped) == sorted(a.name for a in plan.apps)


def test_a_confirmed_run_goes_through_deploy_drive_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dep = FakeDeployer()
    seen = []

    def drive(p: calrun.Plan, handles: list) -> list:
        seen.append(p.what)
        return [p.out / p.what]

    argv = ["spawn", "--run-id", "t", "--out", str(tmp_path / "o"), "--duration", "1"]
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("n\n"))
    assert calrun.run(argv, deployer=dep, driver=drive, credentials=lambda: True) == 1  # not confirmed
    assert dep.deployed == [] and seen == []
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("y\n"))
    assert calrun.run(argv, deployer=dep, driver=drive, credentials=lambda: True) == 0
    assert dep.deployed == dep.stopped == ["scalesim-cal-spawn-t"] and seen == ["spawn"]

    def interrupted(p: calrun.Plan, handles: list) -> list:
        raise KeyboardInterrupt

    dep2 = FakeDeployer()
    with pytest.raises(KeyboardInterrupt):
        calrun.run([*argv, "--yes"], deployer=dep2, driver=interrupted, credentials=lambda: True)
    assert dep2.stopped == ["scalesim-cal-spawn-t"]


def test_a_run_past_its_wall_clock_limit_fails_and_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def forever(args: Any, plan: Any, handles: Any) -> list:
        await asyncio.sleep(60)
        return []

    monkeypatch.setattr(calrun, "drive_async", forever)
    monkeypatch.setattr(calrun, "MARGIN_S", 0.0)
    args = calrun.parser().parse_args(["spawn", "--run-id", "t", "--duration", "0.05", "--drain", "0"])
    plan = calrun.make_plan(args)
    dep = FakeDeployer()
    with pytest.raises(calrun.RunFailed, match="longer than"):
        calrun.execute(plan, dep, calrun.drive(args))
    assert dep.stopped == ["scalesim-cal-spawn-t"]


@pytest.mark.parametrize("what", ["remote", "spawn", "copies", "batching", "coldstart", "sandboxes"])
def test_the_real_driver_with_modal_lookups_stubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    """calibration.run's own driver end to end, modal's look-ups answered by stand-ins (no network)."""
    import time

    import modal

    class Probe:
        def __init__(self) -> None:
            self.probe = type("M", (), {"remote": Aio(self._probe)})()

        async def _probe(self) -> dict:
            return {"ready": time.time(), "container": "ta-p"}

    Probe.hydrate = Aio(lambda: asyncio.sleep(0))  # type: ignore[attr-defined]
    looked_up: list[tuple[str, str]] = []
    monkeypatch.setattr(modal.Function, "from_name", lambda app, name: looked_up.append((app, name)) or StandIn())
    monkeypatch.setattr(modal.Cls, "from_name", lambda app, name: looked_up.append((app, name)) or Probe)
    proc = type("Proc", (), {"wait": Aio(lambda: asyncio.sleep(0, result=0))})()
    box = type(
        "Box", (), {"exec": Aio(lambda *a: asyncio.sleep(0, result=proc)), "terminate": Aio(lambda: asyncio.sleep(0))}
    )
    fake_sandbox = type("Sandbox", (), {"create": Aio(lambda *a, **k: asyncio.sleep(0, result=box()))})
    real_probe = sbx.probe
    monkeypatch.setattr(sbx, "probe", lambda *a, **k: real_probe(*a, **k, sandbox=fake_sandbox))
    small = ["--clients", "2", "--calls", "3", "--duration", "0.2", "--drain", "2", "--work-min", "0.001"]
    small += ["--work-max", "0.01", "--copies", "2", "--round", "5", "--chunk", "2", "--starts", "3"]
    small += ["--start-interval", "0.01", "--sandboxes", "4", "--concurrency", "2"]
    small += ["--client-procs", "0"]  # the load tests' clients in this process: the stubs are here
    dep = FakeDeployer()
    argv = [what, "--yes", "--run-id", "t", "--out", str(tmp_path), *small]
    assert calrun.run(argv, deployer=dep, credentials=lambda: True) == 0
    assert dep.stopped == dep.deployed[::-1] and dep.deployed
    dirs = sorted(p.name for p in tmp_path.iterdir())
    assert dirs == (["coldstart-lazy", "coldstart-snapshot"] if what == "coldstart" else [what])
    for d in dirs:
        tr = trace.read(tmp_path / d)
        assert len(tr.table) > 0 and tr.manifest["apps"] == dep.deployed
        preset = {"coldstart": "coldstart-torch", "sandboxes": "sandboxes-v2"}.get(what, f"loadtest-{what}")
        assert tr.manifest["scenario"]["preset"] == preset
    if what == "copies":
        assert sorted(a for a, _ in looked_up) == ["scalesim-cal-copies-t-copy-0", "scalesim-cal-copies-t-copy-1"]
