"""The HTTP proxy's choice of container (models/inputs/platform/proxy.py): its heap against the plain scan.

The proxy keeps its ready containers in a heap keyed by (requests in progress, ready order) so that a request costs
O(log containers). These tests drive a proxy through random sequences of containers becoming ready and retiring,
requests arriving and finishing, and check every answer against the rule the heap stands for: the first container of
the ready list with the fewest requests in progress (``min`` over the list), 429 if it is at ``max_concurrency``, 503
with none ready. A last test checks that the cost of a request does not grow with the number of containers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from unittest import mock

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from models.inputs.platform import proxy as proxy_module
from models.inputs.platform.autoscaler import AutoscalerParams
from models.inputs.platform.proxy import Proxy
from models.inputs.platform.proxy_params import ServerParams
from models.inputs.records import CallLog
from sim.dists import Constant
from sim.engine import Sim
from sim.rng import Streams
from tests.support import examples


def proxy(
    max_concurrency: int = 0, cpu_per_request_s: float = 0.0, on_done: Callable[[int], None] = lambda call: None
) -> Proxy:
    """A proxy whose autoscaler stays out of the way (its first decision is in a million seconds), unless a request
    finds no container ready (then the pool scales from zero, as in a run)."""
    sp = ServerParams(
        max_concurrency=max_concurrency, cpu_per_request_s=cpu_per_request_s, container_cpu=1.0, proxy_latency_s=0.001
    )
    ap = AutoscalerParams(interval_s=1e6, cold_start=Constant(0.5), scaledown_window_s=2.0)
    return Proxy(Sim(), "server", sp, ap, Streams(0), CallLog(), on_done)


def retire(p: Proxy, i: int) -> None:
    """Retire the ``i``-th idle ready container (mod their number), as ContainerPool.decide does: marked retired,
    left out of the ready list, the others kept in order."""
    idle = [c for c in p.pool.ready if c.running == 0]
    if idle:
        gone = idle[i % len(idle)]
        gone.retired = True
        p.pool.ready = [c for c in p.pool.ready if c is not gone]


def submit_checked(p: Proxy, work: float) -> None:
    """One request, checked against the scan of the ready list."""
    ready = list(p.pool.ready)
    before = [c.running for c in ready]
    expected = min(ready, key=lambda c: c.running) if ready else None  # the first of the least loaded, in order
    call = p.log.new(0, p.sim.now, work)
    answer = p.submit(call)
    if expected is None:
        assert answer == "http_503"
        return
    changed = [i for i, c in enumerate(ready) if c.running != before[i]]
    at = ready.index(expected)
    if p.sp.max_concurrency and before[at] >= p.sp.max_concurrency:
        assert answer == "http_429"
        assert changed == []
    else:
        assert answer is None
        assert changed == [at]
        assert expected.running == before[at] + 1


OPS = st.one_of(
    st.tuples(st.just("ready"), st.integers(1, 3)),  # containers
    st.tuples(st.just("submit"), st.integers(1, 40)),  # requests of 0 to 4 whole seconds of work: many ties
    st.tuples(st.just("advance"), st.integers(1, 8)),  # quarter seconds
    st.tuples(st.just("retire"), st.integers(0, 50)),  # which idle container
)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.sampled_from([0, 0, 2, 5]),
    st.sampled_from([0.0, 0.0, 0.3]),
    st.integers(0, 6),
    st.sampled_from([0, 3, proxy_module.REBUILD_SLACK]),
    st.lists(OPS, min_size=1, max_size=60),
)
def test_choice_is_the_scan(
    max_concurrency: int, cpu_s: float, start: int, slack: int, ops: list[tuple[str, int]]
) -> None:
    with mock.patch.object(proxy_module, "REBUILD_SLACK", slack):  # a small slack: many rebuilds
        drive(proxy(max_concurrency, cpu_s), start, ops)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.sampled_from([0, 0, 2, 5]),
    st.sampled_from([0.0, 0.0, 0.3]),
    st.integers(0, 6),
    st.sampled_from([0, 3, proxy_module.REBUILD_SLACK]),
    st.lists(st.integers(0, 2), min_size=1, max_size=30),
    st.lists(OPS, min_size=1, max_size=60),
)
def test_requests_sent_as_one_finishes_are_the_scans(
    max_concurrency: int, cpu_s: float, start: int, slack: int, follows: list[int], ops: list[tuple[str, int]]
) -> None:
    """As a closed loop's clients do, a caller told that a request finished sends 0, 1 or 2 requests at once (the
    container just freed is offered first: module docstring); each choice is the scan's."""
    finished = 0

    def follow(call: int) -> None:
        nonlocal finished
        if finished < 20:  # (then let them all finish)
            for i in range(follows[finished % len(follows)]):
                submit_checked(p, float((finished + i) % 4))
        finished += 1

    with mock.patch.object(proxy_module, "REBUILD_SLACK", slack):
        p = proxy(max_concurrency, cpu_s, follow)
        drive(p, start, ops)


def drive(p: Proxy, start: int, ops: list[tuple[str, int]]) -> None:
    """``start`` containers ready, then ``ops``, each request checked; then every request finishes."""
    for _ in range(start):
        p.pool._ready(False)
    for op, x in ops:
        if op == "ready":
            for _ in range(x):
                p.pool._ready(False)
        elif op == "submit":
            for i in range(x):
                submit_checked(p, float((x + i) % 5))
        elif op == "advance":
            p.sim.run(p.sim.now + x / 4)
        else:
            retire(p, x)
    p.sim.run(p.sim.now + 100.0)  # every request finishes: no container left with any in progress
    assert p.active == 0
    assert all(c.running == 0 for c in p.pool.ready)
    submit_checked(p, 1.0)


def test_stale_keys_are_rebuilt_away() -> None:
    """Many requests finishing on few containers leave stale keys; the heap stays within twice the containers plus
    a constant, and the choice stays the scan's."""
    p = proxy()
    for _ in range(3):
        p.pool._ready(False)
    for i in range(2000):
        submit_checked(p, float(i % 3))
        if i % 7 == 0:
            p.sim.run(p.sim.now + 0.5)
        assert len(p._keys) <= 2 * len(p.pool.ready) + proxy_module.REBUILD_SLACK + 1


def _serve(containers: int, requests: int) -> int:
    """Lines of Python run to serve ``requests`` on ``containers`` ready ones, a thousand or so in progress: the
    work, counted exactly (wall time would measure the machine's load too)."""
    p = proxy()
    for _ in range(containers):
        p.pool._ready(False)
    log, sim = p.log, p.sim
    lines = 0

    def count(_frame: object, event: str, _arg: object) -> object:
        nonlocal lines
        lines += event == "line"
        return count

    sys.settrace(count)
    try:
        for i in range(requests):
            p.submit(log.new(0, sim.now, 1.0 + (i % 10) / 10))
            if i % 10 == 9:
                sim.run(sim.now + 0.01)
    finally:
        sys.settrace(None)
    return lines


def test_request_cost_does_not_grow_with_containers() -> None:
    """2,000 requests on 2,000 containers run about the lines they run on 20 (a scan of the ready list per request
    would run about 100 times more: 4 million container visits)."""
    few, many = _serve(20, 2_000), _serve(2_000, 2_000)
    assert many < 1.5 * few, (few, many)


def test_each_hop_through_the_proxy_varies_and_comes_from_its_clients_stream():
    # no latency is a point mass: with proxy_sigma the two hops of each request are lognormal around proxy_latency_s,
    # drawn from the request's client's stream; with 0 they are the constant of before
    from models.inputs import loadtest
    from tests.support import columns, preset

    sets = ("duration_s=10", "server.cpu_per_request_s=0", "clients.count=2", "clients.in_flight=50")

    def added(*more: str):
        m = loadtest.run(preset("loadtest-server", *sets, *more), seed=0, records=True)
        a = columns(m["records"])
        ok = a["ok"] & (a["attempts"] == 1)  # not answered 503 first (its backoff is in its latency)
        return a["finished"][ok] - a["issued"][ok] - a["work"][ok], a["client"][ok]

    constant, _ = added("server.proxy_sigma=0")
    assert abs(constant - 0.01).max() < 1e-9  # 5 ms each way, every request
    varied, _ = added()
    assert varied.std() > 0.001 and 0.004 < float(sorted(varied)[len(varied) // 2]) < 0.02  # median near 10 ms
    again, _ = added()
    assert varied.tolist() == again.tolist()  # reproducible from the seed


# --- the client's connection pool: skipped where it cannot bind ---------------------------------------------------
POOLS = st.fixed_dictionaries(
    {
        "clients.count": st.integers(1, 12),
        "clients.in_flight": st.integers(1, 40),
        "clients.retry": st.sampled_from(["none", "backoff"]),
        "clients.reissue": st.sampled_from(["true", "false"]),
        "clients.backoff_base_s": st.sampled_from(["0.05", "0.5"]),
        "server.max_concurrency": st.sampled_from([0, 0, 1, 4, 30]),
        "server.cpu_per_request_s": st.sampled_from(["0", "0.00398", "0.05"]),
        "server.container_cpu": st.sampled_from(["1"]),  # one core, as @app.server(cpu=1)
        "server.proxy_sigma": st.sampled_from(["0", "0.3"]),
        "server.proxy_latency_s": st.sampled_from(["0", "0.005"]),
        "server.target_concurrency": st.sampled_from([1, 5, 1000]),
        "autoscaler.burst_aware": st.sampled_from(["true", "false"]),
        "autoscaler.cold_start": st.sampled_from(["constant(0.5)", "uniform(0.1, 2)"]),
        "work": st.sampled_from(["constant(0.25)", "uniform(0.1, 1)", "exponential(0.3)"]),
        "duration_s": st.sampled_from([0.5, 1.5, 4.0]),
    }
)


@settings(max_examples=examples(60), deadline=None)
@given(POOLS, st.integers(-3, 4), st.integers(0, 1_000_000), st.integers(0, 3))
def test_a_pool_that_cannot_bind_is_skipped_exactly(sets: dict, spare: int, big: int, seed: int) -> None:
    """Closed-loop clients with any ``connection_limit`` (below, at, above ``in_flight``): the run as it is (the
    pool's bookkeeping skipped where the limit is at least ``in_flight``) gives every metric and every record of the
    run with the bookkeeping of every limit, to the bit."""
    from models.inputs import loadtest
    from models.inputs.approaches import base
    from models.inputs.callers import closedloop
    from tests.support import preset

    limit = max(1, sets["clients.in_flight"] + (spare if spare < 4 else big))  # about in_flight, or far above
    sc = preset("loadtest-server", *(f"{k}={v}" for k, v in sets.items()), f"clients.connection_limit={limit}")
    fast = loadtest.run(sc, seed=seed, records=True)

    class Kept(closedloop.ClosedLoop):
        """The bookkeeping of any limit, as a pool that may bind."""

        @staticmethod
        def _pool_binds(limit: int, in_flight: int) -> bool:
            return limit > 0

    with mock.patch.dict(base.LOADS, clients=Kept):
        slow = loadtest.run(sc, seed=seed, records=True)
    assert set(fast) == set(slow)
    for k in fast:
        if k not in ("wall_s", "records"):
            assert fast[k] == slow[k] or (fast[k] != fast[k] and slow[k] != slow[k]), k  # NaN is NaN
    pd.testing.assert_frame_equal(fast["records"], slow["records"], check_exact=True)


def test_a_pool_below_in_flight_binds() -> None:
    """A closed loop's pool of fewer connections than calls in flight holds calls back (so it is kept): 2
    connections for 5 calls give other numbers than 5 connections."""
    from models.inputs import loadtest
    from tests.support import preset

    sets = ("clients.count=2", "clients.in_flight=5", "duration_s=20", "work=constant(1)", "server.cpu_per_request_s=0")
    few = loadtest.run(preset("loadtest-server", *sets, "clients.connection_limit=2"), seed=0)
    enough = loadtest.run(preset("loadtest-server", *sets, "clients.connection_limit=5"), seed=0)
    assert few["calls"] < enough["calls"]
