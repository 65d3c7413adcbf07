"""Your Function from its code: a scenario TOML of one Modal Function, read from its app's source.

``python -m experiments.scenario from-app APP.py [--function NAME] [--model function|coldstart] [--out FILE]``.

The source is read, never run or imported (experiments/appsource.py). Each key the scenario gets from a decorator
says so in a comment, with the file's line and the decorator as written (and the constants it was resolved
through); each key the source cannot state (the work's duration, the demand, how callers call it) is written at its
default with a comment ``TO SET``. What the source states that is not a key of the scenario (a GPU, the Function's
``timeout``, a region) and every value it cannot resolve (a call, an environment variable) is reported on stderr,
one line each, and left at its default, never guessed. The file loads with the project's own loader
(``python -m experiments.run FILE``): it is built through it before it is written.

Decorators to keys (modal 1.6.4: modal/app.py ``App.function``/``App.cls``/``App.server``,
modal/_partial_function.py): ``min_containers``, ``max_containers``, ``buffer_containers``, ``scaledown_window`` →
``autoscaler.*``; ``retries`` (an int, or ``modal.Retries(...)``) → ``function.retries`` and its delays;
``@modal.concurrent(max_inputs, target_inputs)`` → ``function.*``; ``@modal.batched(max_batch_size, wait_ms)`` →
``approach = "batching"``, ``batching.chunk_items``, ``batching.wait_s``; ``@app.server(target_concurrency,
max_concurrency, scaleup_window)`` → ``approach = "server"``, ``server.*``; ``cpu`` and ``memory`` (MiB) → ``billing``
(a (request, limit) pair: the request). A web endpoint (``@modal.fastapi_endpoint``, ``asgi_app``, ``wsgi_app``,
``web_server``) stays a Function on the input path (``approach = "remote"``, its ``@modal.concurrent``): its
requests are the Function's inputs; the web gateway in front of it is not modelled (noted). ``gpu`` sets no price
(docs/sources.md §6 gives none per class): ``billing.gpu_per_s`` is left to set.

Memory snapshots. A load test's containers start in ``autoscaler.cold_start`` time, or by a container-start model
named in ``autoscaler.program``; how a snapshot start goes depends on the program's pages and imports, which no
decorator states. So ``enable_memory_snapshot`` and ``@modal.enter(snap=True)`` set no load-test key (noted);
``--model coldstart`` writes the container-start scenario of the same Function instead: ``coldstart.mode``
(``snapshot`` with ``enable_memory_snapshot=True``, else ``lazy``), ``coldstart.host_types`` (3 with a GPU, 6
without: docs/sources.md §3) and the program's keys to set; a load test then names that file in
``autoscaler.program``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.appsource import APP_SERVER, AppFunction, Arg, Factory, Unknown, read_app
from sim.cli import ArgParser, main_guard, one_line, out_path
from sim.errors import ScenarioError
from sim.files import check_out, loads_toml, write_text
from sim.scenario import flatten, schema_keys, to_dict

PROG = "experiments.scenario"
MIB_PER_GIB = 1024


@dataclass(frozen=True)
class Key:
    """One key of the scenario written: its value and the comment saying where it comes from."""

    key: str
    value: Any
    origin: str
    stated: bool = True  # stated by the app's source (else a default to set, or the scenario's own name)
    off: str = ""  # why it is written as a comment, not as a key (a key the run would refuse without another)


def origin(where: str, f: Factory, arg: Arg | None = None) -> str:
    """``app.py:12 @modal.concurrent(max_inputs=N); N = 20 (line 3)``: the decorator and how the argument was
    resolved."""
    text = f"{where}:{f.line} {f.text}"
    if arg is not None and arg.text.startswith("**"):
        text += f" ({arg.text})"
    if arg is not None and arg.via:
        text += "; " + "; ".join(reversed(arg.via))
    return text


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _whole(v: Any) -> int | None:
    """A whole number of at least 1 (``target_concurrency`` is a float to modal; the key counts requests)."""
    n = _number(v)
    return int(n) if n is not None and n >= 1 and n == int(n) else None


def _request(v: Any) -> Any:
    """cpu=(request, limit), memory=(request, limit): the request (modal/app.py)."""
    return v[0] if isinstance(v, tuple) and len(v) == 2 else v


# a Modal argument → (scenario key, conversion of a resolved value: None when it cannot be the key's value, the
# value None meaning modal's default)
AUTOSCALER: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "min_containers": ("autoscaler.min_containers", lambda v: 0 if v is None else _count(v)),
    "max_containers": ("autoscaler.max_containers", lambda v: 0 if v is None else _count(v)),  # 0 = no cap
    "buffer_containers": ("autoscaler.buffer_containers", lambda v: 0 if v is None else _count(v)),
    "scaledown_window": ("autoscaler.scaledown_window_s", lambda v: 60.0 if v is None else _number(v)),
    "cpu": ("billing.cpu", lambda v: _number(_request(v))),
    "memory": ("billing.memory_gib", lambda v: None if _number(_request(v)) is None else _request(v) / MIB_PER_GIB),
}
SERVER = {
    "target_concurrency": ("server.target_concurrency", _whole),
    "max_concurrency": ("server.max_concurrency", lambda v: 0 if v is None else _count(v)),
    "scaleup_window": ("server.scaleup_window_s", _number),
}
CONCURRENT = {"max_inputs": ("function.max_inputs", _count), "target_inputs": ("function.target_inputs", _count)}
BATCHED = {
    "max_batch_size": ("batching.chunk_items", _count),
    "wait_ms": ("batching.wait_s", lambda v: None if _number(v) is None else v / 1000),
}
RETRIES = {  # modal.Retries(...) (modal/retries.py)
    "max_retries": ("function.retries", _count),
    "backoff_coefficient": ("function.retry_backoff", _number),
    "initial_delay": ("function.retry_initial_delay_s", _number),
    "max_delay": ("function.retry_max_delay_s", _number),
}
RETRIES_OFF = "a load test fails an input only by a crash (faults.crash_containers): set one to use them"
NOT_KEYS = {  # stated, read, and not a key of a load test: why
    "timeout": "a load test does not fail an input for running long (the Function's timeout is not modelled)",
    "startup_timeout": "a container's start is not cut short in a load test",
    "gpu": "no price per GPU class here (docs/sources.md §6): set billing.gpu_per_s from modal.com/pricing",
    "enable_memory_snapshot": "a snapshot start is the container-start model's: --model coldstart writes it, and a "
    "load test names that file in autoscaler.program",
    "single_use_containers": "a container that takes one input and stops is not modelled by the load test",
    "max_inputs": "App.function(max_inputs=1) is modal's deprecated single_use_containers, not @modal.concurrent",
}


class Mapper:
    """The keys of one Function's scenario, and the notes for stderr."""

    def __init__(self, fn: AppFunction, where: str) -> None:
        self.fn, self.where = fn, where
        self.keys: dict[str, Key] = {}
        self.notes: list[str] = [f"{where}:{fn.line} {i}: not a decorator this reads (ignored)" for i in fn.ignored]

    def note(self, f: Factory, text: str) -> None:
        self.notes.append(f"{self.where}:{f.line} {text}")

    def put(self, key: str, value: Any, why: str, stated: bool = True, off: str = "") -> None:
        self.keys[key] = Key(key, value, why, stated, off)

    def default(self, key: str, value: Any, why: str) -> None:
        self.put(key, value, f"default, TO SET: {why}", stated=False)

    def args(self, f: Factory, table: dict[str, tuple[str, Callable[[Any], Any]]]) -> None:
        for name, (key, convert) in table.items():
            if name not in f.args:
                continue
            arg = f.args[name]
            if isinstance(arg.value, Unknown):
                self.note(f, f"{name}: {arg.value.why}: not read; {key} left at its default")
                self.default(key, defaults()[key], f"{self.where}:{f.line} {arg.text} is not fixed by the source")
                continue
            value = convert(arg.value)
            if value is None and arg.value is None:  # None: modal's own default, which this key does not know
                continue
            if value is None:
                self.note(f, f"{arg.text}: not a value {key} takes; left at its default")
                self.default(key, defaults()[key], f"{self.where}:{f.line} {arg.text} is not a value it takes")
            else:
                modal_default = ": None, modal's default" if arg.value is None else ""
                self.put(key, value, origin(self.where, f, arg) + modal_default)
        for text in f.unresolved:
            self.note(f, f"{text}: not resolved, so what it passes is not read")

    def loadtest(self) -> None:
        fn = self.fn
        for f in fn.of(fn.kind):
            self.args(f, AUTOSCALER)
            if fn.kind == APP_SERVER:
                self.put("approach", "server", origin(self.where, f) + ": a web server behind Modal's proxy")
                self.args(f, SERVER)
            self.retries(f)
            for name, why in NOT_KEYS.items():
                if name in f.args and f.args[name].value not in (None, False):
                    self.note(f, f"{f.args[name].text}: {why}")
            other = sorted(
                name
                for name, arg in f.args.items()
                if name not in {*AUTOSCALER, *SERVER, *NOT_KEYS, "retries"} and arg.value is not None
            )
            if other:
                self.note(f, f"not scenario keys (not read): {', '.join(other)}")
        for f in fn.of("concurrent"):
            self.args(f, CONCURRENT)
        for f in fn.of("batched"):
            self.put("approach", "batching", origin(self.where, f) + ": Modal groups single calls into lists")
            self.args(f, BATCHED)
        for f in fn.of("web"):
            self.note(f, "a web endpoint: its requests are run as the Function's inputs (the input path of "
                      "approach remote); the web gateway in front of it is not modelled")  # fmt: skip
        for f in fn.of("enter"):
            if f.args.get("snap") and f.args["snap"].value is True:
                self.note(f, "snap=True: " + NOT_KEYS["enable_memory_snapshot"])
        if "approach" not in self.keys:
            why = "how your callers call it is not in the app: remote (.remote), spawn (.spawn), batching (callers "
            self.default("approach", "remote", why + "send lists); app copies: function.copies")
        if fn.kind != APP_SERVER and not fn.of("concurrent"):
            why = f"{self.where}:{fn.line} no @modal.concurrent: one input (a batch) per container, modal's default"
            self.put("function.max_inputs", 1, why)
        if any(f.args.get("gpu") and f.args["gpu"].value is not None for f in fn.of(fn.kind)):
            self.default("billing.gpu_per_s", 0.0, "the app asks for a GPU: $ per second of its class")
        self.default("work", "uniform(1, 10)", "your Function's own time per input (a distribution)")
        self.default("load", "arrivals", "open-loop calls (arrivals), closed-loop clients (clients.*) or a trace")
        self.default("arrivals.rate", 1.0, "your calls per second (arrivals.shape for its shape over time)")
        self.default("duration_s", 60.0, "simulated seconds of the run")

    def retries(self, f: Factory) -> None:
        arg = f.args.get("retries")
        if arg is None or arg.value is None:
            return
        if isinstance(arg.value, Factory) and arg.value.kind == "retries":
            self.args(arg.value, RETRIES)
        elif _count(arg.value) is None:
            why = arg.value.why if isinstance(arg.value, Unknown) else "not an int or modal.Retries"
            self.note(f, f"{arg.text}: {why}: function.retries left at its default")
        else:
            self.put("function.retries", arg.value, origin(self.where, f, arg))
            self.put("function.retry_backoff", 1.0, origin(self.where, f, arg) + ": an int retries with backoff 1.0")
        for k in [k for k in self.keys if k.startswith("function.retr")]:
            self.keys[k] = dataclasses.replace(self.keys[k], off=RETRIES_OFF)
        if any(k.startswith("function.retr") for k in self.keys):
            self.note(f, f"{arg.text}: written as comments: {RETRIES_OFF}")

    def coldstart(self) -> None:
        fn = self.fn
        app = fn.of(fn.kind)
        snap = next((f for f in app if f.args.get("enable_memory_snapshot", Arg(False, "")).value is True), None)
        gpu = next((f for f in app if f.args.get("gpu", Arg(None, "")).value is not None), None)
        self.put("model", "coldstart", "--model coldstart: the Function's container start", stated=False)
        if snap is not None:
            self.put("coldstart.mode", "snapshot", origin(self.where, snap, snap.args["enable_memory_snapshot"]))
        else:
            self.put("coldstart.mode", "lazy", f"{self.where}:{fn.line} no enable_memory_snapshot: a standard start")
        if gpu is not None:
            why = origin(self.where, gpu, gpu.args["gpu"]) + ": 2-3 worker types for GPU functions (docs/sources.md §3)"
            self.put("coldstart.host_types", 3, why)
        else:
            why = f"{self.where}:{fn.line} no gpu: ~6 worker types for CPU functions (docs/sources.md §3)"
            self.put("coldstart.host_types", 6, why)
        program = {
            "file_ops": (32302, "file operations of its imports (import torch: 32,302)"),
            "distinct_files": (1335, "distinct files they open (import torch: 1,335)"),
            "read_mib": (400.0, "MiB read at start (libraries, weights)"),
            "init_s": (1.0, "CPU seconds of imports and set-up, data local"),
            "pages_mib": (500.0, "the process's memory at the snapshot, MiB"),
            "working_set": (0.4, "share of those pages touched at once"),
            "after_restore_s": (0.05, "the work of @modal.enter(snap=False) after a restore"),
            "gpu_setup_s": (0.0, "re-creating GPU state after a restore"),
        }
        for key, (value, what) in program.items():
            self.default(f"coldstart.program.{key}", value, what)
        for f in [*app, *fn.of("concurrent"), *fn.of("batched")]:
            named = [n for n in f.args if n in {*AUTOSCALER, *CONCURRENT, *BATCHED}]
            if named:
                self.note(f, f"{', '.join(named)}: the load test's, not the container start's (without --model)")


@functools.cache
def defaults() -> dict[str, Any]:
    """A load test's keys at their defaults, by dotted name."""
    from models.runs import build_scenario  # (the models load here, not for --help)

    return flatten(to_dict(build_scenario({})))


def render(keys: list[Key], header: str) -> str:
    """The scenario as TOML, each key with its comment, top-level keys first, then one table per section."""
    sections: dict[str, list[Key]] = {}
    for k in keys:
        sections.setdefault(k.key.rpartition(".")[0], []).append(k)
    lines = [f"# {header}"]
    for section, items in sorted(sections.items(), key=lambda s: (s[0] != "", s[0])):
        lines += ["", f"[{section}]"] if section else []
        for k in items:
            line = f"{k.key.rpartition('.')[2]} = {toml_value(k.value)}  # {one_line(k.origin)}"
            lines.append(f"# {line}; {k.off}" if k.off else line)
    return "\n".join(lines) + "\n"


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))  # a TOML basic string: JSON's escapes are TOML's


def pick(functions: list[AppFunction], name: str | None, where: str) -> AppFunction:
    """The Function named ``name``, or the app's only one; bad input naming the choices otherwise."""
    names = ", ".join(f.name for f in functions)
    if not functions:
        raise ScenarioError(f"{where}: no Modal Function found (no @app.function, @app.cls or @app.server)")
    if name is None:
        if len(functions) > 1:
            raise ScenarioError(f"{where}: {len(functions)} Modal Functions ({names}): choose one with --function")
        return functions[0]
    found = [f for f in functions if f.name == name]
    if not found:
        raise ScenarioError(f"--function {name}: not a Modal Function of {where} (it has: {names})")
    if len(found) > 1:
        lines = ", ".join(str(f.line) for f in found)
        raise ScenarioError(f"--function {name}: defined more than once in {where} (lines {lines})")
    return found[0]


@dataclass(frozen=True)
class FromApp:
    """One Function's scenario: its keys, its TOML text (built through the loader) and the notes for stderr."""

    keys: list[Key]
    text: str
    notes: list[str]

    def stated(self) -> dict[str, Any]:
        """The keys the app's source states, by dotted name."""
        return {k.key: k.value for k in self.keys if k.stated and not k.off}


def from_app(path: str, function: str | None = None, model: str = "function") -> FromApp:
    """The scenario of one Function of the app at ``path`` (``function``: its name, needed if the app has several;
    ``model``: ``function``, a load test, or ``coldstart``, its container start); ScenarioError for bad input."""
    where = Path(path).name
    fn = pick(read_app(path), function, path)
    m = Mapper(fn, where)
    m.coldstart() if model == "coldstart" else m.loadtest()
    stated = f"{where}:{fn.line} {fn.name}"
    keys = [
        Key("name", fn.name, f"{stated}: the Function's name", False),
        Key("description", f"{fn.name} of {where}, read from its source", f"written by {PROG}", False),
        Key("source", f"{path} (python -m {PROG} from-app)", "the app's source, never run", False),
        *m.keys.values(),
    ]
    text = render(keys, f"{where}'s Function {fn.name}, read from its source by python -m {PROG} from-app")
    tree = loads_toml(text, "the scenario written")
    from models.runs import build_scenario  # (the models load here, not for --help)

    try:
        known = schema_keys(type(build_scenario(tree)))
    except ScenarioError as e:  # a stated value out of the key's range: say where it came from
        key = str(e).partition(":")[0]
        k = next((k for k in keys if k.key == key), None)
        raise ScenarioError(f"{e} (from {k.origin})" if k else str(e)) from None
    assert set(flatten(tree)) <= known, set(flatten(tree)) - known  # every key written is one of the schema's
    return FromApp(keys, text, m.notes)


def parser() -> ArgParser:
    p = ArgParser(prog=f"python -m {PROG}", description=__doc__.splitlines()[0])
    p.add_argument("command", choices=("from-app",), help="from-app: a scenario from a Modal app's source")
    p.add_argument("app", help="the app's Python file (read, never run)")
    p.add_argument("--function", metavar="NAME", help="the Function or class to read (needed if the app has several)")
    p.add_argument(
        "--model",
        choices=("function", "coldstart"),
        default="function",
        help="function: a load test of it (default); coldstart: its container start",
    )
    p.add_argument("--out", type=out_path, metavar="FILE", help="the TOML file to write (default: stdout)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)

    def go() -> int:
        if args.out is not None:
            check_out(args.out)
        read = from_app(args.app, args.function, args.model)
        for line in read.notes:
            print(f"{PROG}: {one_line(line)}", file=sys.stderr)
        if args.out is None:
            sys.stdout.write(read.text)
        else:
            write_text(args.out, read.text)
            print(args.out)
        return 0

    return main_guard(PROG, go)


if __name__ == "__main__":
    sys.exit(main())
