"""A broker restart in the middle of a load of sessions is weather: every session completes,
nothing is lost or doubled, and no process is restarted by hand.

The stack here runs on a broker of its own (`tests.private_broker`), with an archiver group
of its own (its stored offsets are that broker's): restarting the shared broker would
change it under every test that runs after this one. It archives into a database of its
own as well (`own_database`): that broker has the suite's topic names, and a dead letter
stored from its offsets would occupy the suite's dead-letter position.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from tests.e2e.sessions import wait_ended, wait_for
from tests.e2e.stack import own_database, require_database, running_stack
from tests.e2e.stored_log import assert_log_whole
from tests.e2e.inbox_records import SETTINGS, assert_partition_serves, create, produce
from tests.private_broker import held_partitions, private_broker_in_environ
from wakeline.contract.codec import encode
from wakeline.contract.topics import ARCHIVER_GROUP, partition_for, record_key


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with private_broker_in_environ(tmp_path_factory.mktemp("broker")) as broker, own_database("wakeline_weather"):
        yield broker


@pytest.fixture(scope="module")
def stack(broker, tmp_path_factory):
    require_database()
    with running_stack(tmp_path_factory.mktemp("e2e"),
                       WAKELINE_ARCHIVER_GROUP=f"{ARCHIVER_GROUP}-weather-{uuid.uuid4().hex[:12]}") as stack:
        yield stack


@pytest.mark.timeout(900)  # ~30 s with its broker's start when it passes; each session may take 240 s
def test_a_broker_restart_under_load_loses_nothing_and_every_partition_serves_after(broker, stack, auditor):
    sids = [str(uuid.uuid4()) for _ in range(18)]
    for sid in sids:
        produce([(record_key(sid), encode(create(sid, policy="tools3")))], partition_for(sid, SETTINGS.partitions))
    wait_for(lambda: auditor.get(f"/v1/sessions/{sids[0]}").status_code == 200, 60, "the load to start", stack)
    began = time.monotonic()
    restarted_at = time.time()
    broker.command("restart")
    print(f"broker restarted in {time.monotonic() - began:.1f} s")
    in_flight = []
    try:
        for sid in sids:
            assert wait_ended(auditor, stack, sid, timeout=240)["ended_reason"] == "completed"
            events = assert_log_whole(sid)
            assert [e.type for e in events].count("session_created") == 1
            # Created before the restart began and ended by an event drafted after it (`ts` is
            # stamped when drafted, on this machine's clock): running when the broker went.
            if events[0].ts.timestamp() < restarted_at < events[-1].ts.timestamp():
                in_flight.append(sid)
        print(f"{len(in_flight)} of {len(sids)} sessions in flight at the restart")
        # A restart after every session had ended would prove nothing about the load it names.
        assert in_flight, "no session was running when the broker restarted"
        for partition in range(SETTINGS.partitions):
            assert_partition_serves(stack, auditor, partition, count=1)
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{asyncio.run(held_partitions(broker.bootstrap, SETTINGS.partitions))}")
