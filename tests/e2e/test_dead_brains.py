"""A brain killed with kill -9 is found dead by its Postgres lease, not by the group's session
timeout (services/brain/dead_peers.py): its partitions move to the live brain long before the
timeout would have let them, and its sessions carry on there."""

from __future__ import annotations

import re
import time

import pytest

from tests.e2e.sessions import create_session, wait_ended, wait_for
from tests.e2e.stack import require_database, running_stack
from tests.e2e.stored_log import assert_log_whole
from wakeline.runtime.settings import CommonSettings

# Long enough that the group alone could not have moved the partitions within the test's
# wait: only the lease can. (Brains only: no other service reads this setting.)
SESSION_TIMEOUT_S = 40


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    require_database()
    with running_stack(tmp_path_factory.mktemp("e2e"),
                       WAKELINE_SESSION_TIMEOUT_MS=str(SESSION_TIMEOUT_S * 1000)) as stack:
        yield stack


def owns_all(log: str, host: str, partitions: int) -> bool:
    wanted = str(list(range(partitions)))
    lines = re.finditer(rf"brain {re.escape(host)} owns partitions (\[[0-9, ]*\])", log)
    return any(m.group(1) == wanted for m in lines)


def test_a_killed_brains_partitions_move_at_once_not_at_the_session_timeout(stack, client):
    partitions = CommonSettings().partitions
    brain_b = stack.start("brain-b", "brain", WAKELINE_SESSION_TIMEOUT_MS=str(SESSION_TIMEOUT_S * 1000))
    wait_for(lambda: "owns partitions" in brain_b.tail(400), 120, "brain-b to take partitions", stack)
    # Both brains hold partitions now (the first one's ownership was split with brain-b).
    assert not owns_all(brain_b.tail(400), "brain-b", partitions)
    sids = [create_session(client, "slowmodel") for _ in range(6)]
    time.sleep(2)  # their turns under way on both brains
    killed_at = time.monotonic()
    stack.services["brain"].kill9()
    wait_for(lambda: owns_all(brain_b.tail(2000), "brain-b", partitions), SESSION_TIMEOUT_S - 5,
             "brain-b to own every partition before the dead brain's session timeout", stack)
    moved_after = time.monotonic() - killed_at
    log = brain_b.tail(2000)
    assert re.search(r"removed dead brains from \S+ \(their Postgres sessions ended\): \S+-brain NoError", log), log
    for sid in sids:
        assert wait_ended(client, stack, sid, timeout=120)["ended_reason"] == "completed"
        assert_log_whole(sid)
    print(f"partitions all on brain-b {moved_after:.1f} s after the kill (session timeout {SESSION_TIMEOUT_S} s)")
