"""The recovery what-if (experiments/recovery.py, models/inputs/recovery.py): a spike's aftermath per retry policy."""

from __future__ import annotations

from experiments import whatif
from experiments.recovery import DEFAULTS, measure, policy_sets


def test_callers_that_drop_recover_at_once_and_lose_work_while_retrying_ones_lose_none_and_take_longer():
    spike = "arrivals.shape=spike(600, 60, 8)"
    none, _ = measure("mmc", [*DEFAULTS, "clients.retry=none", spike], [], 0, 0.2)
    backoff, s = measure("mmc", [*DEFAULTS, "clients.retry=backoff", spike], [], 0, 0.2)
    assert none["recovered"] and backoff["recovered"]
    assert none["work_lost_s"] > 1000 and backoff["work_lost_s"] == 0  # 7 × 7 × 60 ≈ 2,900 extra calls rejected
    assert backoff["recovery_s"] > none["recovery_s"] + 300  # the orbit drains at c·μ − λ = 3 calls/s
    assert backoff["attempts_per_success"] > 2 > none["attempts_per_success"] >= 1
    assert s["orbit"].max() > 1000 and s["orbit"][-1] < 10  # the orbit fills in the spike and drains


def test_timeouts_with_retries_make_a_spike_a_lasting_outage_that_neither_alone_does():
    # metastability (Bronson et al., HotOS'21): work of exactly 1 s on ten warm containers at 70% load, a pending cap
    # of 50 (5 s of queue). A ×2 spike fills the queue; a caller that gives up after 4 s abandons an input the
    # Function still runs, and one that retries (5 attempts) sends another. Both: every input served is one already
    # abandoned, and the retries keep the queue full after the spike (served 0). Either alone: back within the run.
    base = [*DEFAULTS, "work=constant(1)"]
    spike = "arrivals.shape=spike(600, 60, 2)"
    for seed in (0, 1):
        calm, _ = measure(
            "mmc", [*base, *policy_sets("backoff:5@4"), "arrivals.shape=spike(600, 60, 1.01)"], [], seed, 0.2
        )
        assert calm["recovered"] and calm["pre_trigger_calls_per_s"] > 6.5  # the same callers without a spike: fine
        stuck, s = measure("mmc", [*base, *policy_sets("backoff:5@4"), spike], [], seed, 0.2)
        assert not stuck["recovered"] and stuck["recovery_s"] is None
        assert s["served_per_s"][-3:].max() < 0.5 and s["backlog"][-3:].min() > 40
        assert stuck["attempts_per_success"] > 10
        for alone in ("none@4", "backoff:5"):
            back, _ = measure("mmc", [*base, *policy_sets(alone), spike], [], seed, 0.2)
            assert back["recovered"] and back["recovery_s"] < 300, (alone, seed, back)


def test_bad_recovery_options_exit_2(capsys):
    for argv in (
        ["--spikes", "0.5"],
        ["--policies", "backoff:x"],
        ["--policies", "nope"],
        ["--band", "inf"],
        ["--policies", "backoff@0"],
        ["--policies", "backoff@x"],
    ):
        assert whatif.main(["recovery", "--seeds", "1", *argv]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
