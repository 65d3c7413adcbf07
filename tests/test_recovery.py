"""The recovery what-if (experiments/recovery.py, models/inputs/recovery.py): a spike's aftermath per retry policy."""

from __future__ import annotations

from experiments import whatif
from experiments.recovery import DEFAULTS, measure


def test_callers_that_drop_recover_at_once_and_lose_work_while_retrying_ones_lose_none_and_take_longer():
    spike = "arrivals.shape=spike(600, 60, 8)"
    none, _ = measure("mmc", [*DEFAULTS, "clients.retry=none", spike], [], 0, 0.2)
    backoff, s = measure("mmc", [*DEFAULTS, "clients.retry=backoff", spike], [], 0, 0.2)
    assert none["recovered"] and backoff["recovered"]
    assert none["work_lost_s"] > 1000 and backoff["work_lost_s"] == 0  # 7 × 7 × 60 ≈ 2,900 extra calls rejected
    assert backoff["recovery_s"] > none["recovery_s"] + 300  # the orbit drains at c·μ − λ = 3 calls/s
    assert backoff["attempts_per_success"] > 2 > none["attempts_per_success"] >= 1
    assert s["orbit"].max() > 1000 and s["orbit"][-1] < 10  # the orbit fills in the spike and drains


def test_bad_recovery_options_exit_2(capsys):
    for argv in (["--spikes", "0.5"], ["--policies", "backoff:x"], ["--policies", "nope"], ["--band", "inf"]):
        assert whatif.main(["recovery", "--seeds", "1", *argv]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
