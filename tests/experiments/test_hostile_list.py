"""A hostile list, kept: every command's flags and the scenario keys added lately, each given values a user (or a
script gone wrong) sends: not numbers, NaN, ±inf, 1e308, 1e-308, 0, negatives, full-width digits, empty, huge, NUL,
a TOML table where a number goes. Each case must end within 10 s, under 2 GiB, with exit 0, or exit 2 and one
printable line naming what is wrong: never a traceback, a hang or exit 1 (tests/experiments/test_fuzz_hostile.py
``assert_0_or_2``). A valid value runs a small scenario (``SMALL``), so a case that is accepted is quick too.

The whole list runs with ``SCALESIM_HOSTILE=all``; by default a fixed sample of ``SAMPLE`` cases (the fast lane)."""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import pytest

from calibration import fit as fit_cmd
from calibration import run as calibration_run
from experiments import compare as compare_cmd
from experiments import faults as faults_cmd
from experiments import run as run_cmd
from experiments import sweep as sweep_cmd
from experiments import whatif as whatif_cmd
from tests.support import assert_0_or_2

SAMPLE = 60
VALUES = ["x", "nan", "inf", "-inf", "1e308", "1e-308", "0", "-1", "１", "", "1e400", "9" * 400, "a\x00b", "{a = 1}"]
# the scenario keys added since the last list, and the ones they interact with, on the presets that read them
KEYS = {
    "loadtest-spawn": [
        "clients.on_rate_limit",
        "clients.retry_after_s",
        "clients.max_throttle_wait_s",
        "autoscaler.gather_s",
        "autoscaler.scaleup_step",
        "autoscaler.size_to",
        "autoscaler.burst_aware",
        "clients.timeout_s",
        "faults.crash_at_s",
        "faults.slow_at_s",
        "limits.start_rate",
        "limits.start_burst",
        "limits.async_accept_burst",
    ],
    "loadtest-remote": ["limits.sync_accept_burst", "clients.retry", "clients.retry_delay_s"],
    "sandboxes-v2": ["faults.scheduler_down_at_s", "faults.stream_stall_s"],
}
SMALL = {
    "loadtest-spawn": ["duration_s=5", "clients.count=1", "clients.in_flight=20"],
    "loadtest-remote": ["duration_s=5", "clients.count=1", "clients.in_flight=20"],
    "sandboxes-v2": ["sandboxes.count=200"],
}
FLAGS: dict[str, tuple[Callable[[list[str]], int], list[str], list[str]]] = {
    # command: (its main, the argv every case starts from, its flags)
    "whatif plan": (
        whatif_cmd.main,
        ["plan", "--rate", "50", "--seeds", "1", "--set", "duration_s=60", "--ways", "remote"],
        ["--rate", "--p99", "--p50", "--headroom", "--chunk", "--shape", "--seeds", "--ways"],
    ),
    "whatif capacity": (
        whatif_cmd.main,
        ["capacity", "--rate", "20", "--seeds", "1", "--set", "duration_s=60"],
        ["--rate", "--p99", "--knob", "--seeds"],
    ),
    "whatif autoscaler": (
        whatif_cmd.main,
        ["autoscaler", "--seeds", "1", "--set", "duration_s=600"],
        ["--rate", "--buffers", "--windows", "--shape"],
    ),
    "whatif drain": (whatif_cmd.main, ["drain", "--calls", "100", "--seeds", "1"], ["--calls", "--via"]),
    "whatif recovery": (
        whatif_cmd.main,
        ["recovery", "--seeds", "1", "--spikes", "2", "--policies", "none"],
        ["--spikes", "--spike-at", "--spike-s", "--band", "--policies", "--seeds"],
    ),
    "faults": (
        faults_cmd.main,
        ["--counts", "200", "--length", "1", "--dead", "2"],
        ["--counts", "--length", "--dead", "--seed", "--out"],
    ),
    "run": (run_cmd.main, ["mmc", "--set", "duration_s=2000"], ["--seed", "--uncertainty-seeds", "--jobs"]),
    "sweep": (sweep_cmd.main, ["--quick", "--no-report"], ["--jobs", "--seeds", "--out"]),
    "fit": (
        fit_cmd.main,
        ["--quick", "--seeds", "1", "--candidate", "baseline"],
        ["--seeds", "--max-evals", "--profile-points", "--range"],
    ),
    "calibration.run": (
        calibration_run.main,
        ["spawn", "--dry-run"],
        ["--clients", "--calls", "--duration", "--drain", "--work-min", "--work-max", "--max-inputs", "--run-id"],
    ),
    "compare": (compare_cmd.main, ["mmc", "--set", "duration_s=2000", "--out", "c.png"], ["--seed", "--title"]),
}


def cases() -> list[tuple[str, Callable[[list[str]], int], list[str]]]:
    out = []
    for preset, keys in KEYS.items():
        small = [x for s in SMALL[preset] for x in ("--set", s)]
        for key in keys:
            for v in VALUES:
                out.append((f"run {preset} {key}={v[:12]!r}", run_cmd.main, [preset, *small, "--set", f"{key}={v}"]))
    for name, (main, base, flags) in FLAGS.items():
        for flag in flags:
            for v in VALUES:
                out.append((f"{name} {flag} {v[:12]!r}", main, [*base, f"{flag}={v}"]))
    return out


CASES = cases()
WHOLE = os.environ.get("SCALESIM_HOSTILE") == "all"
CHOSEN = CASES if WHOLE else random.Random("hostile-list").sample(CASES, SAMPLE)


def test_the_list_is_as_long_as_promised():
    assert len(CASES) >= 300


@pytest.mark.usefixtures("env_budget")
@pytest.mark.parametrize("name, main, argv", CHOSEN, ids=[c[0] for c in CHOSEN])
def test_a_hostile_input_is_an_answer_or_one_line_exit_2(name, main, argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # whatever a case writes lands here
    assert_0_or_2(main, argv)
