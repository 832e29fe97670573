"""A broker restart in the middle of a load of sessions is weather: every session completes,
nothing is lost or doubled, and no process is restarted by hand."""

from __future__ import annotations

import os
import subprocess
import time
import uuid

from tests.e2e.sessions import wait_ended, wait_for
from tests.e2e.stored_log import assert_log_whole
from tests.e2e.stack import ROOT
from tests.e2e.inbox_records import SETTINGS, assert_partition_serves, create, produce
from wakeline.codec import encode
from wakeline.topics import partition_for, record_key


def restart_broker() -> None:
    subprocess.run(["bash", str(ROOT / "deploy" / "kafka" / "kafka.sh"), "restart"], check=True, timeout=240,
                   env=dict(os.environ), capture_output=True)


def test_a_broker_restart_under_load_loses_nothing_and_every_partition_serves_after(stack, auditor):
    sids = [str(uuid.uuid4()) for _ in range(18)]
    for sid in sids:
        produce([(record_key(sid), encode(create(sid, policy="tools3")))], partition_for(sid, SETTINGS.partitions))
    wait_for(lambda: auditor.get(f"/v1/sessions/{sids[0]}").status_code == 200, 60, "the load to start", stack)
    began = time.monotonic()
    restart_broker()
    print(f"broker restarted in {time.monotonic() - began:.1f} s")
    for sid in sids:
        assert wait_ended(auditor, stack, sid, timeout=240)["ended_reason"] == "completed"
        events = assert_log_whole(sid)
        assert [e.type for e in events].count("session_created") == 1
    for partition in range(SETTINGS.partitions):
        assert_partition_serves(stack, auditor, partition, count=1)
