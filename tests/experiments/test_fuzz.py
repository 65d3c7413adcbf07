"""A fuzz suite: Hypothesis draws scenarios as a hostile user types them.

Each example is a preset and one to three ``--set`` overrides of any key of its model's schema, with values drawn
from valid, boundary and invalid ranges: non-finite and huge numbers, negatives, zero, wrong types and odd strings
(malformed distributions among them). The command must exit 0 or exit 2 with one line on stderr, no traceback, no
hang (tests/support.py ``bounded``). Runs are kept small by the run-size budget (``SCALESIM_BUDGET`` = FUZZ_BUDGET:
about 50,000 calls, 20,000 sandboxes or 20,000 starts), which is part of what is tested. ``FUZZ_EXAMPLES`` examples
run in the normal suite; set the environment variable ``SCALESIM_FUZZ_EXAMPLES`` to run more.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from calibration import fit as fit_cmd
from experiments import compare as compare_cmd
from experiments import report as report_cmd
from experiments import run as run_cmd
from experiments import spec, sweep
from models.registry import MODELS
from models.runs import load_scenario
from models.sandboxes import faults as sandbox_faults
from sim.cli import one_line
from sim.scenario import ScenarioError, flatten, schema_keys, to_dict
from tests.support import assert_0_or_2, examples

FUZZ_EXAMPLES = int(os.environ.get("SCALESIM_FUZZ_EXAMPLES", examples(150)))

PRESETS = [
    "loadtest-remote",
    "loadtest-spawn",
    "loadtest-copies",
    "loadtest-batching",
    "loadtest-server",
    "mmc",
    "sandboxes-v2",
    "sandboxes-v1",
    "sandboxes-k8s",
    "coldstart-torch",
]
# small versions of the presets, set before the fuzzed keys (which may undo them: the budget then decides)
SMALL = {
    "function": ["duration_s=3", "clients.count=2", "clients.in_flight=50"],
    "sandboxes": ["sandboxes.count=500", "fleet.workers=50"],
    "coldstart": ["coldstart.starts=50"],
}
KEYS = {p: sorted(schema_keys(MODELS[load_scenario(p).model].schema)) for p in PRESETS}
DEFAULTS = {p: flatten(to_dict(load_scenario(p))) for p in PRESETS}  # a key's preset value, to scale
SCALES = (0, 0.001, 0.1, 0.5, 2, 10, 1000, 1e6, -1)

numbers = st.one_of(
    st.integers(-3, 3),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 0.0, -0.0, 1e-300, 1e308, -1e308, 1e12, 1e13, 2**63, 0.5, 1e-9]),
)
texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "",
            "true",
            "[1, 2]",
            "{a = 1}",
            "constant(",
            "constant(0)",
            "constant(-1)",
            "constant(inf)",
            "uniform(1)",
            "uniform(2, 1)",
            "uniform(0, 1e308)",
            "exponential(0)",
            "lognormal(1, 50)",
            "lognormal(0, 0)",
            "empirical(/dev/null)",
            "empirical(/etc/hostname)",
            "nope(1)",
            "modal-v2",
            "spawn",
            "startable",
            "\x00",
            "é" * 5,
        ]
    ),
)
values = st.one_of(numbers.map(str), texts, st.booleans().map(lambda b: "true" if b else "false"))


def value_for(preset: str, key: str) -> st.SearchStrategy[str]:
    """Anything (``values``), or, as often, the preset's own value scaled up, down, to zero or negative."""
    default = DEFAULTS[preset].get(key)
    if isinstance(default, bool) or not isinstance(default, int | float):
        return values
    near = st.sampled_from(SCALES).map(lambda f: str(type(default)(default * f)) if f != 0 else "0")
    return st.one_of(values, near)


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    preset = draw(st.sampled_from(PRESETS))
    model = load_scenario(preset).model
    keys = draw(st.lists(st.sampled_from([*KEYS[preset], "no.such_key"]), min_size=1, max_size=3))
    sets = [*SMALL[model], *(f"{k}={draw(value_for(preset, k))}" for k in keys)]
    return [preset, *(x for s in sets for x in ("--set", s)), "--json"]


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(argv=command_lines())
def test_any_command_line_exits_0_or_2_with_one_line(argv, env_budget):
    assert_0_or_2(run_cmd.main, argv)


factor_texts = st.one_of(
    st.text(max_size=30),
    st.builds(
        lambda k, vs: f"{k}={','.join(vs)}",
        st.sampled_from([*KEYS["loadtest-spawn"], "no.such", ""]),
        st.lists(st.one_of(values, st.just("uniform(1, 2)")), max_size=4),
    ),
)


@settings(max_examples=max(100, FUZZ_EXAMPLES // 2), deadline=None, derandomize=True)
@given(
    factors=st.lists(factor_texts, max_size=3),
    sets=st.lists(st.builds(lambda k, v: f"{k}={v}", st.sampled_from(KEYS["loadtest-spawn"]), values), max_size=2),
    seeds=st.one_of(st.none(), st.integers(-5, 10**12)),
)
def test_a_sweep_from_any_factors_is_a_spec_or_one_named_error(factors, sets, seeds):
    # the sweep command's parsing and expansion (experiments/spec.py), without running: a spec, or ScenarioError
    try:
        sp = spec.load_spec("loadtest-spawn", sets, factors, seeds)
    except ScenarioError as e:
        assert one_line(str(e)).isprintable()  # what the command prints: one line
        return
    assert sp.points and sp.seeds >= 1


# --- the sandbox model's faults section: every key, and faults that are on -------------------------------------
# The general property above draws these keys among the schema's, but at its default count most are never drawn, and
# one key alone rarely turns a fault on with a start. Here each example names a fault and sets some of its own keys
# (often all: the fault happens), now and then another fault's key or a key of the recovery figures, on any of the
# three planes (a fault of another plane is an error naming the key).
FAULT_KEYS = sorted(k for k in KEYS["sandboxes-v2"] if k.startswith("faults."))
FAULTS = sorted(sandbox_faults.FAULTS)
fault_values = st.one_of(
    values,
    st.sampled_from(["0", "0.2", "1", "3", "10", "49", "50", "51", "1e-9", "1e6", "1e12", "-1", "inf", "nan"]),
    st.sampled_from(["lost", "restart", "Lost", ""]),
)


@st.composite
def fault_lines(draw: st.DrawFn) -> list[str]:
    preset = draw(st.sampled_from(["sandboxes-v2", "sandboxes-v1", "sandboxes-k8s"]))
    fault = draw(st.sampled_from(FAULTS))
    own = [k for k in FAULT_KEYS if k.startswith(f"faults.{fault}_")]
    keys = draw(st.lists(st.sampled_from(own), min_size=1, max_size=len(own), unique=True))
    keys += draw(st.lists(st.sampled_from(FAULT_KEYS), max_size=1))
    sets = [*SMALL["sandboxes"], *(f"{k}={draw(fault_values)}" for k in keys)]
    return [preset, *(x for s in sets for x in ("--set", s)), "--json"]


@settings(max_examples=max(30, FUZZ_EXAMPLES // 3), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(argv=fault_lines())
def test_any_fault_of_a_sandbox_run_exits_0_or_2_with_one_line(argv, env_budget):
    assert_0_or_2(run_cmd.main, argv)


def test_the_fault_property_can_draw_every_fault_key():
    assert FAULTS == ["etcd_election", "postgres_failover", "scheduler_down", "stream_stall", "worker_death"]
    assert {k for f in FAULTS for k in FAULT_KEYS if k.startswith(f"faults.{f}_")} | {
        "faults.rate_bin_s",
        "faults.recovery_band",
    } == set(FAULT_KEYS)


@pytest.mark.parametrize("key", FAULT_KEYS)
@pytest.mark.parametrize("bad", ["-1", "nan", "inf", "x"])
def test_a_bad_value_of_any_fault_key_exits_2_naming_it(key, bad, env_budget):
    if bad == "inf" and key.endswith("_at_s"):
        bad = "1e400"  # (a start may lie after the run; inf is refused as any non-finite number is)
    assert_one_line_naming(key, "sandboxes-v2", [SMALL["sandboxes"][0], f"{key}={bad}"])


def assert_one_line_naming(key: str, preset: str, sets: list[str]) -> None:
    """``experiments.run preset --set ...`` exits 2 with one line on stderr that names ``key``."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = run_cmd.main([preset, *(x for s in sets for x in ("--set", s)), "--json"])
    lines = err.getvalue().strip().splitlines()
    assert rc == 2 and len(lines) == 1 and key in lines[0], (key, sets, lines)


# --- the load test's faults, the Function's retries and the callers' timeouts --------------------------------------
# As for the sandboxes: each example turns a crash or a slow-down on (or sets the Function's retries or the callers'
# timeout) with values from anywhere, on the Function path or off it (an error naming the key).
RETRY_KEYS = ("clients.retry", "clients.max_attempts", "clients.retry_delay_s", "clients.backoff_base_s",
              "clients.backoff_max_s", "clients.timeout_s")  # fmt: skip
INPUT_FAULT_KEYS = sorted(
    k for k in KEYS["loadtest-spawn"] if k.startswith(("faults.", "function.retr")) or k in RETRY_KEYS
)
INPUT_FAULT_ON = [
    ["faults.crash_at_s=1", "faults.crash_containers=2"],
    ["faults.slow_at_s=1", "faults.slow_s=1", "faults.slow_factor=3"],
    ["faults.crash_containers=1", "function.retries=2"],
    ["clients.timeout_s=2", "clients.retry=backoff"],
]


@st.composite
def input_fault_lines(draw: st.DrawFn) -> list[str]:
    preset = draw(st.sampled_from(["loadtest-spawn", "loadtest-remote", "mmc", "loadtest-server"]))
    sets = [*SMALL["function"], *draw(st.sampled_from(INPUT_FAULT_ON))]
    keys = draw(st.lists(st.sampled_from(INPUT_FAULT_KEYS), min_size=1, max_size=3, unique=True))
    sets += [f"{k}={draw(fault_values)}" for k in keys]
    return [preset, *(x for s in sets for x in ("--set", s)), "--json"]


@settings(max_examples=max(30, FUZZ_EXAMPLES // 3), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(argv=input_fault_lines())
def test_any_fault_of_a_load_test_exits_0_or_2_with_one_line(argv, env_budget):
    assert_0_or_2(run_cmd.main, argv)


def test_the_load_test_fault_keys_are_the_schemas():
    assert {k.split(".")[1].split("_")[0] for k in INPUT_FAULT_KEYS if k.startswith("faults.")} == {"crash", "slow"}
    assert len(INPUT_FAULT_KEYS) == 5 + 4 + len(RETRY_KEYS)


@pytest.mark.parametrize("key", INPUT_FAULT_KEYS)
@pytest.mark.parametrize("bad", ["-1", "nan", "1e400", "x"])
def test_a_bad_value_of_any_load_test_fault_key_exits_2_naming_it(key, bad, env_budget):
    on = ["faults.crash_containers=1"] if key.startswith("function.retr") else []
    assert_one_line_naming(key, "loadtest-spawn", [*SMALL["function"], *on, f"{key}={bad}"])


# --- the other commands: report, compare, calibration.fit ------------------------------------------------------
OTHER_EXAMPLES = max(10, FUZZ_EXAMPLES // 5)
# no explain phase: its line tracing slows a run past the time budget
OTHER = settings(
    max_examples=OTHER_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    phases=tuple(p for p in Phase if p is not Phase.explain),
)
odd_paths = st.sampled_from(["", ".", "/", "/proc/nope/x", "/dev/null", "no/such/dir/x", "x" * 1001, "\x00", "é"])
options = st.one_of(numbers.map(str), texts)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory) -> Iterator[Path]:
    """A folder holding a small sweep's results, files of odd content and a place for outputs; the working
    directory while the commands run (an --out of "" or "." writes there, not into the checkout)."""
    root = tmp_path_factory.mktemp("fuzz")
    old = os.getcwd()
    os.chdir(root)
    argv = ["loadtest-spawn", "--factor", "clients.count=1,2", "--set", "duration_s=3", "--set", "clients.in_flight=20"]
    assert sweep.main([*argv, "--seeds", "1", "--jobs", "1", "--out", str(root / "sweep"), "--no-report"]) == 0
    (root / "binary.csv").write_bytes(bytes(range(256)) * 4)
    (root / "file").write_text("a file where a folder is wanted")
    yield root
    os.chdir(old)


def mostly(valid: st.SearchStrategy, odd: st.SearchStrategy) -> st.SearchStrategy:
    """Three times in four a valid choice, else an odd one: enough command lines get past the first check."""
    return st.integers(0, 3).flatmap(lambda i: odd if i == 0 else valid)


def pick_path(root: Path, *valid: str) -> st.SearchStrategy[str]:
    named = st.sampled_from(["sweep/results.csv", "sweep", "binary.csv", "file", "no/such/x", *valid])
    odd = st.one_of(named.map(lambda n: str(root / n)), odd_paths)
    return mostly(st.sampled_from(valid).map(lambda n: str(root / n)), odd) if valid else odd


@st.composite
def report_lines(draw: st.DrawFn, root: Path) -> list[str]:
    argv = [draw(pick_path(root, "sweep/results.csv", "sweep/results.parquet"))]
    if draw(st.integers(0, 4)) == 0:  # a table of any text
        table = root / f"drawn-{draw(st.integers(0, 3))}.csv"
        table.write_text(draw(st.text(max_size=200)), errors="surrogatepass")
        argv = [str(table)]
    if draw(st.booleans()):
        argv += ["--point", draw(mostly(st.sampled_from(["0", "1"]), options))]
    if draw(st.booleans()):
        argv += ["--scale", draw(mostly(st.sampled_from(["clients.count", "calls_per_s", "seed"]), options))]
    return [*argv, "--out", draw(pick_path(root, "report", "report2"))]


@OTHER
@given(data=st.data())
def test_any_report_command_line_exits_0_or_2_with_one_line(data, sandbox):
    assert_0_or_2(report_cmd.main, data.draw(report_lines(sandbox)))


@st.composite
def compare_lines(draw: st.DrawFn, root: Path) -> list[str]:
    model = draw(st.sampled_from(sorted(SMALL)))
    ours = [p for p in PRESETS if load_scenario(p).model == model]
    names = draw(st.lists(mostly(st.sampled_from(ours), st.one_of(texts, pick_path(root))), min_size=1, max_size=3))
    sets = draw(mostly(st.just(SMALL[model]), st.lists(st.sampled_from([s for v in SMALL.values() for s in v]))))
    argv = [*names, *(x for s_ in sets for x in ("--set", s_))]
    if draw(st.booleans()):
        argv += ["--seed", draw(mostly(st.integers(0, 2**63 - 1).map(str), options))]
    if draw(st.booleans()):
        argv += ["--title", draw(st.text(max_size=20))]
    return [*argv, "--out", draw(pick_path(root, "compare.png", "c.svg"))]


@OTHER
@given(data=st.data())
def test_any_compare_command_line_exits_0_or_2_with_one_line(data, sandbox, env_budget):
    assert_0_or_2(compare_cmd.main, data.draw(compare_lines(sandbox)))


@st.composite
def fit_lines(draw: st.DrawFn, root: Path) -> list[str]:
    # always --quick, 1 seed and one candidate when valid: a full fit is minutes by design, not a hang
    argv = [draw(mostly(st.sampled_from(["loadtest", "loadtest", "coldstart", "sandboxes"]), texts)), "--quick"]
    argv += ["--seeds", draw(mostly(st.just("1"), st.one_of(st.integers(-2, 0).map(str), texts)))]
    # one candidate (a loaded machine took all five past the time budget)
    argv += ["--candidate", draw(mostly(st.sampled_from(["baseline", "overhead", "ramp-start"]), texts))]
    for flag, choice in (
        ("--jobs", st.one_of(st.integers(1, 2**40).map(str), options)),
        ("--leave-out", mostly(st.sampled_from(["spawn", "copies"]), texts)),
        ("--set", st.builds(lambda k, v: f"{k}={v}", st.sampled_from(KEYS["loadtest-spawn"]), values)),
        ("--profile-points", options),
    ):
        if draw(st.integers(0, 3)) == 0:
            argv += [flag, draw(choice)]
    return [*argv, "--out", draw(pick_path(root, "params.toml"))]


@OTHER
@given(data=st.data())
def test_any_calibration_fit_command_line_exits_0_or_2_with_one_line(data, sandbox, env_budget):
    assert_0_or_2(fit_cmd.main, data.draw(fit_lines(sandbox)))
