"""Callers' retry policies (models/inputs/callers/clients.py): none, backoff, exponential, fixed, random, immediate, and
giving up after ``clients.max_attempts``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from experiments import api
from tests.support import ROOT

# one client whose calls are mostly rate limited: 2 accepts a second, 20 calls in flight, short calls
LIMITED = {
    "clients.count": 1,
    "clients.in_flight": 20,
    "limits.sync_accept_rate": 2,
    "limits.sync_accept_burst": 1,
    "overhead.submit": "constant(0)",
    "overhead.result": "constant(0)",
    "work": "constant(0.05)",
    "duration_s": 20,
    "warmup_s": 0,
    "drain_s": 30,
}


def run(**sets) -> dict:
    return api.run("loadtest-remote", set={**LIMITED, **sets}, records=True)


@pytest.mark.parametrize("policy", ["backoff", "exponential", "fixed", "random", "immediate"])
def test_every_policy_retries_and_gives_up_after_max_attempts(policy):
    m = run(**{"clients.retry": policy, "clients.max_attempts": 3, "clients.retry_delay_s": 0.2})
    rec = m["records"]
    assert rec["attempts"].max() == 3  # a call is tried at most max_attempts times
    gave_up = rec[(rec["attempts"] == 3) & (rec["kind"] == "rate_limited")]
    assert len(gave_up) > 0  # and one rejected on its last try fails
    assert m["retries"] == int((rec["attempts"] - 1).sum())
    again = run(**{"clients.retry": policy, "clients.max_attempts": 3, "clients.retry_delay_s": 0.2})
    assert again["retries"] == m["retries"] and again["calls_per_s"] == m["calls_per_s"]  # the same seed, the same


def test_without_max_attempts_a_retried_call_never_fails_and_none_never_retries():
    m = run(**{"clients.retry": "fixed", "clients.retry_delay_s": 0.2})
    assert m["retries"] > 0 and not (m["records"]["kind"] == "rate_limited").any()
    none = run(**{"clients.retry": "none"})
    assert none["retries"] == 0 and (none["records"]["attempts"] == 1).all()


def test_a_fixed_delay_paces_a_clients_retries():
    # a call retried every 0.2 s takes 0.2 s per rejected try: its time from issue to start is at least
    # (attempts - 1) × 0.2 s
    rec = run(**{"clients.retry": "fixed", "clients.retry_delay_s": 0.2})["records"]
    retried = rec[rec["attempts"] > 1]
    assert len(retried) > 10
    wait = (retried["started"] - retried["issued"]).to_numpy()
    assert np.all(wait >= (retried["attempts"].to_numpy() - 1) * 0.2 - 1e-9)


@pytest.mark.slow
def test_an_immediate_retry_storm_ends_with_the_budgets_line():
    cmd = [sys.executable, "-m", "experiments.run", "loadtest-remote", "--set", "clients.retry=immediate"]
    cmd += ["--set", "limits.sync_accept_rate=1", "--set", "limits.sync_accept_burst=1"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)  # a guard against a hang
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "run budget" in r.stderr and "retries" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["clients.retry_delay_s=0", "clients.max_attempts=-1", "clients.retry=often"])
def test_bad_retry_values_exit_2_naming_the_key(setting):
    cmd = [sys.executable, "-m", "experiments.run", "loadtest-remote", "--set", setting]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and setting.split("=")[0] in r.stderr, r.stderr
