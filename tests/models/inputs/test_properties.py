"""Invariants over Hypothesis-generated scenarios: no call lost, no negative wait, causality, no pool over its
limits. The input plane's are read from what a run reports (metrics, ``records=True``, ``series``), not from its
internals (tests/support.py ``check_every_call_is_accounted_for``)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import check_every_call_is_accounted_for, examples, loadtests


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=loadtests, seed=st.integers(0, 2**32))
def test_every_call_is_accounted_for(tree, seed):
    check_every_call_is_accounted_for(tree, seed)
