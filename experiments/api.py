"""A small Python API for notebooks and scripts: the commands' work as functions that return data.

    from experiments import api
    m = api.run("loadtest-spawn", set={"clients.count": 16}, seed=0)         # metrics, as `experiments.run --json`
    calls = api.run("loadtest-spawn", records=True)["records"]               # one row per input, a DataFrame
    table = api.sweep("loadtest-copies", factors={"clients.count": [1, 2, 4]}, seeds=2)   # one row per run
    plan = api.whatif("plan", rate=3000, p99=2, set={"function.max_inputs": 100})  # as `whatif plan --json`

A scenario is a preset name or a TOML file; ``set`` overrides its keys (as ``--set``), ``params`` overlays parameter
files (as ``--params``). Bad input raises ``sim.scenario.ScenarioError`` naming the key.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from experiments import results
from experiments import whatif as whatif_cmd
from experiments.spec import load_spec
from experiments.sweep import SWEEP_FILES, run_sweep
from models.runs import load_scenario, run_scenario
from sim.files import check_out
from sim.scenario import ScenarioError


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
    """One run's metrics (the model's declared ``Metrics``, sim/metrics.py). ``records``: also ``["records"]``, a
    DataFrame of per-call, per-sandbox or per-start records; ``series``: also ``["series"]``, the time series the report
    draws; ``jobs``: processes for the run's independent parts (app copies; the same numbers whatever it is)."""
    sc = scenario(name, set, params)
    out: dict = {}
    metrics = run_scenario(sc, seed=seed, series=out if series else None, records=records, jobs=jobs)
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
    parameter, the seed and the metrics. Results go to ``out`` (resumable, as the command's) or a temporary folder."""
    factor_args = [f"{k}={','.join(_toml(v) for v in values)}" for k, values in (factors or {}).items()]
    s = load_spec(spec, _sets(set), factor_args, seeds, quick)
    if out is not None:
        return run_sweep(s, check_out(Path(out), folder=True, inside=SWEEP_FILES), jobs)
    with tempfile.TemporaryDirectory() as tmp:
        return run_sweep(s, Path(tmp), jobs)


def load_results(path: str | Path) -> pd.DataFrame:
    """A sweep's results table: a results.parquet / results.csv file, or the folder that holds one."""
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
    experiments/whatif's ``QUESTIONS``); each option is the command's, without its dashes (``rate=3000``, ``p99=2``,
    ``seeds=2``, ``uncertainty=True``, ``out="plan/"``). Bad input raises ScenarioError with the command's line."""
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
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = whatif_cmd.main(argv)
        except SystemExit as e:  # argparse: an unknown option or choice
            code = e.code
    if code != 0:
        raise ScenarioError(err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {code}")
    return json.loads(out.getvalue())


if __name__ == "__main__":  # a library, not a command: say so, do not exit 0 having done nothing
    import sys

    print(
        "experiments.api: a library for notebooks and scripts (from experiments import api; api.run(...)), not a "
        "command; the commands are python -m experiments.run, sweep, whatif, report, compare, faults, bench",
        file=sys.stderr,
    )
    sys.exit(2)
