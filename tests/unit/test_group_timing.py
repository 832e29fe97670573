"""The group timings of brains and runners (issue 37): a live member learns of a rebalance at
its next heartbeat and must join within the rebalance timeout, or the round goes on without it
and a second round follows. So the heartbeat stays under the rebalance timeout whatever the
session timeout an operator sets (a 40 s one gave the brain 6.7 s heartbeats against a 2.5 s
rebalance timeout, and live brains missed rounds)."""

from __future__ import annotations

import pytest

from wakeline_brain.settings import BrainSettings
from wakeline_runner.settings import RunnerSettings


@pytest.mark.parametrize("session_timeout_ms", [6_000, 10_000, 40_000, 300_000])
def test_a_heartbeat_always_comes_within_the_rebalance_timeout(session_timeout_ms: int) -> None:
    for settings in (BrainSettings(session_timeout_ms=session_timeout_ms),
                     RunnerSettings(session_timeout_ms=session_timeout_ms)):
        rebalance = settings.rebalance_timeout_ms or settings.session_timeout_ms
        assert settings.heartbeat_interval_ms <= 1_000 < rebalance
        assert settings.heartbeat_interval_ms <= settings.session_timeout_ms // 3


def test_the_defaults_detect_a_dead_member_at_the_brokers_minimum() -> None:
    # 6 s is the broker's group.min.session.timeout.ms: the fastest the group alone can tell.
    assert BrainSettings().session_timeout_ms == RunnerSettings().session_timeout_ms == 6_000
    assert BrainSettings().rebalance_timeout_ms == RunnerSettings().rebalance_timeout_ms == 2_500
    # Brains find a dead peer sooner by its lease (dead_peers.py); runners have no database.
    assert BrainSettings().peer_lapse_s is not None and BrainSettings().peer_lapse_s < 6
