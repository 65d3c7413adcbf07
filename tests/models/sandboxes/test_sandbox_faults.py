"""Control-plane faults of the sandbox model (models/sandboxes/faults.py): each fault delays creation by about its
length on the plane it hits, v2's scheduler fleet absorbs one scheduler's death while a single scheduler stops,
worker deaths lose exactly the sandboxes on the dead workers, bad fault values are one line and exit 2, and a fault
that is off (or after the run's end) changes no figure.

The delay is read off the records: the k-th sandbox to become running, with the fault and without it, and the
largest such shift over k. A fault of length L that stops creation shifts the sandboxes due just after its start
past its end: the shift is at least about L and at most L plus what the mechanism adds (a client deadline, the start
path of a second or so)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from models.runs import run_scenario
from models.sandboxes import summary
from models.sandboxes.creation import SHORTCUTS
from models.sandboxes.fleet import Fleet
from tests.support import preset

V1 = ("sandboxes-v1", "sandboxes.count=20000", "fleet.workers=2000")
K8S = ("sandboxes-k8s", "sandboxes.count=4000", "fleet.workers=2000")
V2 = ("sandboxes-v2", "sandboxes.count=40000", "fleet.workers=2000")


def run(name: str, *sets: str, seed: int = 0) -> dict:
    return run_scenario(preset(name, *sets), seed=seed, records=True)


def running(m: dict) -> np.ndarray:
    r = m["records"]["running"].to_numpy()
    return np.sort(r[~np.isnan(r)])


def largest_shift(base: dict, faulted: dict) -> float:
    a, b = running(base), running(faulted)
    n = min(len(a), len(b))
    return float((b[:n] - a[:n]).max())


def middle(m: dict) -> float:
    return float(m["creation_makespan_s"]) / 2


@pytest.mark.parametrize(
    ("plane", "fault", "slack"),
    [
        (V1, "postgres_failover", 2.0),  # the start path after the database is back
        (K8S, "etcd_election", 2.0),  # the kubelet's pickup and the start path
        ((*V2, "scheduler.count=1"), "scheduler_down", 1.0 + 2.0),  # the client's deadline (1 s), the start path
    ],
)
def test_each_fault_delays_creation_by_about_its_length(plane, fault, slack):
    base = run(*plane)
    at, length = round(middle(base) / 2, 3), 3.0
    faulted = run(*plane, f"faults.{fault}_at_s={at}", f"faults.{fault}_s={length}")
    shift = largest_shift(base, faulted)
    assert 0.9 * length <= shift <= length + slack, (fault, shift)
    assert faulted["sandboxes_created"] == base["sandboxes_created"]
    assert faulted["fault_recovered"] == 1
    # nothing the fault stopped ran within it, beyond what had already passed the stopped step before it began
    assert faulted["creation_rate_during_fault_per_s"] < 0.5 * faulted["creation_rate_before_fault_per_s"]


def placed_within(m: dict, a: float, e: float) -> int:
    p = m["records"]["placed"].to_numpy()
    return int(((p >= a) & (p < e)).sum())


def test_a_v2_scheduler_fleet_absorbs_one_death_while_a_single_scheduler_stops():
    a, length = 0.6, 1.5
    fault = (f"faults.scheduler_down_at_s={a}", f"faults.scheduler_down_s={length}")
    # 32 schedulers (the preset): 1/32 of the creates time out and are retried, the rest go through
    base = run(*V2)
    many = run(*V2, *fault)
    expected = placed_within(base, a, a + length)
    assert placed_within(many, a, a + length) >= 0.8 * expected
    assert many["retries"] <= 2 * many["sandboxes_created"] / 32 + 100
    assert largest_shift(base, many) <= 1.0 + 1.0  # at most the deadline of the few retried, and the start path
    # one scheduler: after the creates already past it, no create call returns until it is back
    one = run(*V2, "scheduler.count=1", *fault)
    assert placed_within(one, a + 0.1, a + length) == 0
    assert one["retries"] > 0


@pytest.mark.slow
def test_a_stream_stall_costs_rejections_only_where_workers_fill():
    full = ("sandboxes-v2", "sandboxes.count=20480", "fleet.workers=160")  # 160 × 128 slots: the burst fills them
    stall = ("faults.stream_stall_at_s=0.2", "faults.stream_stall_s=5")
    base, stalled = run(*full), run(*full, *stall)
    assert stalled["rejections"] > base["rejections"] + 100  # placements on stale state, rejected by full workers
    assert stalled["retries"] >= stalled["rejections"]
    assert stalled["sandboxes_created"] == 20480
    # a fleet mostly empty (the preset's 4% fill): stale state finds free slots anyway
    sparse = run(*V2, *stall)
    assert sparse["rejections"] == 0


@pytest.mark.parametrize("policy", ["lost", "restart"])
def test_worker_death_loses_exactly_the_sandboxes_on_the_dead_workers(monkeypatch, policy):
    at, n = 3.0, 300
    accepts: list[tuple[float, int]] = []
    original = Fleet.try_accept

    def recording(self, worker):
        ok = original(self, worker)
        if ok:
            accepts.append((self.sim.env._now, worker))
        return ok

    monkeypatch.setattr(Fleet, "try_accept", recording)
    run(*V1)  # the no-fault run: every event before the death is the same as with it
    expected = sum(1 for t, w in accepts if t < at and w < n)
    monkeypatch.setattr(Fleet, "try_accept", original)
    m = run(
        *V1,
        f"faults.worker_death_at_s={at}",
        f"faults.worker_death_workers={n}",
        f"faults.worker_death_policy={policy}",
    )
    assert expected > 0
    if policy == "lost":
        assert m["sandboxes_lost"] == expected
        assert m["sandboxes_created"] + m["sandboxes_lost"] == 20000
    else:
        assert m["sandboxes_restarted"] == expected
        assert m["sandboxes_lost"] == 0
        assert m["sandboxes_created"] == 20000


def cli(*sets: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "experiments.run", "sandboxes-v2"]
    for s in sets:
        args += ["--set", s]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("setting", "names"),
    [
        ("faults.scheduler_down_s=-1", "faults.scheduler_down_s"),
        ("faults.scheduler_down_s=inf", "faults.scheduler_down_s"),
        ("faults.stream_stall_at_s=-5", "faults.stream_stall_at_s"),
        ("faults.postgres_failover_s=3", "faults.postgres_failover_s"),  # a v1 fault on v2
        ("faults.etcd_election_s=3", "faults.etcd_election_s"),  # a kubernetes fault on v2
        ("faults.scheduler_down_at_s=3", "faults.scheduler_down_at_s"),  # a start with the fault off
        ("faults.worker_death_workers=30000", "faults.worker_death_workers"),  # more than the fleet
        ("faults.worker_death_policy=maybe", "faults.worker_death_policy"),
    ],
)
def test_bad_fault_values_are_one_line_and_exit_2(setting, names):
    p = cli(setting)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and names in lines[0], p.stderr


def test_the_same_seed_gives_the_same_numbers_under_a_fault():
    sets = ("faults.scheduler_down_at_s=0.6", "faults.scheduler_down_s=1", "faults.worker_death_workers=50")
    a, b = run(*V2, *sets, seed=3), run(*V2, *sets, seed=3)
    a.pop("wall_s"), b.pop("wall_s")
    assert a.pop("records").equals(b.pop("records"))
    assert a == b


def test_a_fault_left_at_its_defaults_changes_nothing():
    base = run(*V1)
    same = run(*V1, "faults.postgres_failover_s=0", "faults.worker_death_workers=0", "faults.rate_bin_s=1")
    base.pop("wall_s"), same.pop("wall_s")
    assert base.pop("records").equals(same.pop("records"))
    assert base == same
    assert "sandboxes_lost" not in base  # the fault figures are reported only with a fault on


def test_a_fault_after_the_run_changes_no_figure_of_the_run():
    base = run(*V2)
    late = run(*V2, "faults.stream_stall_at_s=1000", "faults.stream_stall_s=1")
    assert late["records"].equals(base["records"])
    for k in summary.SUMMARY.names():
        assert late[k] == base[k], k
    assert late["sandboxes_delayed"] == 0 and late["sandboxes_lost"] == 0


def test_the_model_shortcuts_do_not_apply_with_a_fault():
    plain = SHORTCUTS.used(preset(*V2))
    assert {"same_instant_placements", "accept_at_placement"} <= plain
    for sets in (
        ("faults.stream_stall_s=1",),
        ("faults.scheduler_down_s=1",),
        ("faults.worker_death_workers=1",),
        ("faults.rate_bin_s=2",),
    ):
        used = SHORTCUTS.used(preset(*V2, *sets))
        assert not used & {"same_instant_placements", "accept_at_placement"}, sets
        assert {"calendar", "delay_lines"} <= used  # the engine's keep the order of events whatever the model does


@pytest.mark.slow
def test_a_scheduler_outage_that_would_retry_without_end_is_refused_before_it_runs():
    p = cli(
        "scheduler.count=1",
        "faults.scheduler_down_s=3000",
        "faults.scheduler_down_detect_s=0.01",
    )
    assert p.returncode == 2
    assert "create retries in the scheduler outage" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_a_dead_scheduler_loses_its_whole_queue_even_when_the_queue_outlasts_the_outage():
    # one scheduler (8,000 creates/s) behind a client of 20,000/s: about 2.5 s of creates wait in it; it dies for
    # 0.3 s. Every create in it at the death is lost with it (the client retries at its deadline), not only those
    # whose turn came within the outage; none is placed before its deadline has passed.
    one = (*V2, "scheduler.count=1")
    a, length, deadline = 2.0, 0.3, 3.0
    base = run(*one)
    req, placed = base["records"]["requested"].to_numpy(), base["records"]["placed"].to_numpy()
    in_queue = int(((req < a - 0.001) & (placed >= a + 0.01)).sum())  # in the scheduler at a (3 hops + RPC: 5 ms)
    assert in_queue > 10_000
    m = run(
        *one,
        f"faults.scheduler_down_at_s={a}",
        f"faults.scheduler_down_s={length}",
        f"faults.scheduler_down_detect_s={deadline}",
    )
    assert m["retries"] >= in_queue
    r = m["records"]
    req, placed = r["requested"].to_numpy(), r["placed"].to_numpy()
    after = (req < a - 0.001) & (placed >= a + 0.01)
    assert after.sum() >= in_queue
    assert ((placed - req)[after] >= deadline).all()
    assert m["sandboxes_created"] == base["sandboxes_created"]


def test_the_rate_during_a_fault_is_taken_over_the_part_of_it_the_burst_still_ran():
    # a stream stall on a mostly empty fleet costs nothing (no rejection); it outlasts the burst, so the rate during
    # it is the rate of what ran before the burst's end, not what ran divided by the whole stall
    base = run(*V2)
    at = round(middle(base), 3)
    m = run(*V2, f"faults.stream_stall_at_s={at}", "faults.stream_stall_s=30")
    assert m["rejections"] == 0 and m["creation_makespan_s"] == base["creation_makespan_s"]
    assert m["creation_rate_during_fault_per_s"] == pytest.approx(m["creation_rate_before_fault_per_s"], rel=0.25)


def test_the_tti_of_the_sandboxes_in_flight_during_a_fault_is_reported():
    # a Postgres failover holds every create on its way by its length: their TTI grows by about it
    base = run(*V1)
    at, length = round(middle(base), 3), 3.0
    m = run(*V1, f"faults.postgres_failover_at_s={at}", f"faults.postgres_failover_s={length}")
    req, ran = m["records"]["requested"].to_numpy(), m["records"]["running"].to_numpy()
    inflight = (req < at + length) & (ran >= at)
    tti = (ran - req)[inflight]
    assert m["tti_fault_p50_s"] == pytest.approx(float(np.percentile(tti, 50)))
    assert m["tti_fault_p99_s"] == pytest.approx(float(np.percentile(tti, 99)))
    assert m["tti_fault_p50_s"] > base["tti_p50_s"] + 0.5 * length


def test_servers_cut_drops_the_service_booked_past_a_crash():
    from models.sandboxes.fleet import Servers
    from sim.engine import Sim

    sim = Sim()
    s = Servers(sim, 2)
    ends = [s.done_at(1.0) for _ in range(6)]  # two servers busy until 3 s
    assert ends == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    s.cut(1.5)
    assert s.busy_by_now(10.0) == pytest.approx(3.0)  # 1.5 s on each server, the rest dropped
    assert s.busy == pytest.approx(3.0)
    sim.run(until=2.0)
    assert s.done_at(1.0) == 3.0  # a request after the crash waits for nothing booked before it


def test_the_fault_table_times_each_variant_from_its_own_run_without_the_fault():
    from experiments import faults as table

    out = table.rows([20000], 1.0, 50, 0, planes=("modal-v2",))
    one = next(r for r in out if "scheduler.count=1" in r["fault"])
    plain = run("sandboxes-v2", "sandboxes.count=20000", "scheduler.count=1")
    assert one["makespan s (no fault)"] == plain["creation_makespan_s"]
    assert one["fault at s"] == round(plain["creation_makespan_s"] / 2, 2)
    p50, p99 = one["tti p50 / p99 s in flight"]
    assert p50 is not None and p99 >= p50
    assert "/" in table.table(out).splitlines()[2]
