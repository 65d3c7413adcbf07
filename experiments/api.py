"""A small Python API for notebooks and scripts: the commands' work as functions that return data.

    from experiments import api
    m = api.run("loadtest-spawn", set={"clients.count": 16}, seed=0)         # metrics, as `experiments.run --json`
    calls = api.run("loadtest-spawn", records=True)["records"]               # one row per input, a DataFrame
    table = api.sweep("loadtest-copies", factors={"clients.count": [1, 2, 4]}, seeds=2)   # one row per run
    plan = api.whatif("plan", rate=3000, p99=2, set={"function.max_inputs": 100})  # as `whatif plan --json`

A scenario is a preset name or a TOML file; ``set`` overrides its keys (as ``--set``), ``params`` overlays parameter
files (as ``--params``). Bad input raises ``sim.scenario.ScenarioError`` naming the key.

Nothing is swallowed: what a command says on stderr (an extrapolation warning, a page written) is printed on the
caller's stderr as it comes, as the command prints it, and ``whatif`` also returns those lines (``"messages"``); a
long call shows its progress (sim/cli.py ``progress_bar``: tqdm.auto, a widget in a notebook, a bar on a terminal).
Importing this module loads none of the heavy parts (pandas, scipy, the models): each call imports what it uses.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.errors import ScenarioError

if TYPE_CHECKING:
    import pandas as pd


def _sets(set: dict[str, Any] | None) -> list[str]:
    return [f"{k}={_toml(v)}" for k, v in (set or {}).items()]


def _toml(v: Any) -> str:
    """A value as --set text: strings as themselves (distributions, names), the rest as TOML literals."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) if not isinstance(x, str) else f'"{x}"' for x in v) + "]"
    return str(v)


def scenario(name: str, set: dict[str, Any] | None = None, params: list[str] = ()) -> Any:
    """The validated scenario (a frozen dataclass) of a preset or file with overrides."""
    from models.runs import load_scenario

    return load_scenario(name, _sets(set), list(params))


def run(
    name: str,
    set: dict[str, Any] | None = None,
    seed: int = 0,
    params: list[str] = (),
    records: bool = False,
    series: bool = False,
    jobs: int = 1,
) -> dict:
    """One run's metrics (the model's declared ``Metrics``, sim/metrics.py), and ``["caveats"]`` when its answer rests
    on an assumption its numbers do not show, as ``experiments.run --json``. ``records``: also ``["records"]``, a
    DataFrame of per-call, per-sandbox or per-start records; ``series``: also ``["series"]``, the time series the report
    draws; ``jobs``: processes for the run's independent parts (app copies; the same numbers whatever it is). A run
    that leaves its calibrated envelope prints the command's warning on stderr; one over 5 s shows its progress."""
    from models.registry import MODELS
    from models.runs import run_scenario, warn_extrapolated
    from sim.cli import RunProgress

    sc = scenario(name, set, params)
    out: dict = {}
    progress = RunProgress()
    try:
        metrics = run_scenario(
            sc, seed=seed, series=out if series else None, records=records, jobs=jobs, progress=progress
        )
    finally:
        progress.close()
    warn_extrapolated(metrics["extrapolated"])
    caveats = MODELS[sc.model].caveats(sc, metrics)
    if caveats:
        metrics["caveats"] = caveats
    if series:
        metrics["series"] = out
    return metrics


def sweep(
    spec: str | None = None,
    set: dict[str, Any] | None = None,
    factors: dict[str, list] | None = None,
    seeds: int | None = None,
    out: str | Path | None = None,
    jobs: int = 1,
    quick: bool = False,
) -> pd.DataFrame:
    """A sweep (a spec name or file, or a scenario swept over ``factors``); one row per (point, seed) with every
    parameter, the seed and the metrics. Results go to ``out`` (resumable, as the command's) or a temporary folder.
    Its runs' progress shows as the command's."""
    import tempfile

    from experiments.spec import load_spec
    from experiments.sweep import SWEEP_FILES, run_sweep
    from sim.files import check_out

    factor_args = [f"{k}={','.join(_toml(v) for v in values)}" for k, values in (factors or {}).items()]
    s = load_spec(spec, _sets(set), factor_args, seeds, quick)
    if out is not None:
        return run_sweep(s, check_out(Path(out), folder=True, inside=SWEEP_FILES), jobs)
    with tempfile.TemporaryDirectory() as tmp:
        return run_sweep(s, Path(tmp), jobs)


def load_results(path: str | Path) -> pd.DataFrame:
    """A sweep's results table: a results.parquet / results.csv file, or the folder that holds one."""
    from experiments import results

    path = Path(path)
    if path.is_dir():
        path = path / "results.parquet" if (path / "results.parquet").exists() else path / "results.csv"
    return results.read_results(path)


def whatif(
    question: str,
    scenario: str | None = None,
    set: dict[str, Any] | None = None,
    params: list[str] = (),
    **options: Any,
) -> dict:
    """A what-if's answer as ``experiments.whatif QUESTION --json`` gives it (``question``: a name in
    experiments/whatif's ``QUESTIONS``), with ``"messages"``: the lines the command wrote on stderr (warnings such as
    an extrapolation, the page it wrote), which are also printed on the caller's stderr as they come. Each option is
    the command's, without its dashes (``rate=3000``, ``p99=2``, ``seeds=2``, ``uncertainty=True``, ``out="plan/"``).
    Its searches' progress shows as a bar (a widget in a notebook). Bad input raises ScenarioError with the command's
    line; Ctrl-C, KeyboardInterrupt; any other failure, RuntimeError."""
    from experiments import whatif as command
    from sim.cli import BAD_INPUT, progress_to
    from sim.processes import INTERRUPTED

    argv = [question, "--json", *(["--scenario", scenario] if scenario else [])]
    for s in _sets(set):
        argv += ["--set", s]
    for p in params:
        argv += ["--params", str(p)]
    for k, v in options.items():
        flag = "--" + k.replace("_", "-")
        if v is True:
            argv.append(flag)
        elif v not in (False, None):
            argv += [flag, ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)]
    caller = sys.stderr
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(_Tee(err, caller)), progress_to(caller):
        try:
            code = command.main(argv)
        except SystemExit as e:  # argparse: an unknown option or choice
            code = e.code
    messages = err.getvalue().strip().splitlines()
    if code != 0:
        line = messages[-1] if messages else f"exit {code}"
        raise {BAD_INPUT: ScenarioError, INTERRUPTED: KeyboardInterrupt}.get(code, RuntimeError)(line)
    return {**json.loads(out.getvalue()), "messages": messages}


class _Tee(io.TextIOBase):
    """A stream that writes to each of ``streams``: a command's stderr kept and shown."""

    def __init__(self, *streams: Any) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


if __name__ == "__main__":  # a library, not a command: say so, do not exit 0 having done nothing
    print(
        "experiments.api: a library for notebooks and scripts, the commands' work as functions that return data "
        "(from experiments import api; api.run, api.sweep, api.whatif, api.load_results; help(api)), not a command; "
        "the commands are python -m experiments.run, sweep, whatif, report, compare, faults, bench",
        file=sys.stderr,
    )
    sys.exit(2)
