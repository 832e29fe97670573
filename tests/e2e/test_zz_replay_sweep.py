"""Replay against new code over everything the e2e suite ran: after every other test (the
e2e conftest moves it last), every session created since this run's first e2e test started is
run through today's brain decisions and fold (`wakeline.agent.replay_command --all --since`),
so a change that would break a session the services really recorded fails here with the
session and the seq it breaks at. Reads Postgres only; run alone, it first runs sessions of
its own on a stack (a forked one among them), so it always checks something.
"""

from __future__ import annotations

import subprocess
import sys

from tests.e2e.sessions import create_session, wait_ended
from tests.e2e.stored_log import pg_rows


def test_every_session_the_e2e_suite_ran_replays_cleanly_against_todays_code(e2e_start, request):
    made = pg_rows("SELECT count(*) AS n FROM sessions WHERE created_at >= $1", e2e_start)[0]["n"]
    if made == 0:  # no other e2e test ran in this run
        run_sessions_of_its_own(request.getfixturevalue("client"), request.getfixturevalue("stack"))
        made = pg_rows("SELECT count(*) AS n FROM sessions WHERE created_at >= $1", e2e_start)[0]["n"]
    judged = subprocess.run([sys.executable, "-m", "wakeline.agent.replay_command", "--all", "--since",
                             e2e_start.isoformat(), "--tenant", "default"],
                            capture_output=True, text=True, timeout=600)
    lines = judged.stdout.splitlines()
    diverged = [line for line in lines if "replays cleanly" not in line]
    assert judged.returncode == 0 and not diverged, "\n".join(diverged) or judged.stderr
    # every session was read (one line each), or said why not (a prefix retention dropped)
    not_checked = [line for line in judged.stderr.splitlines() if "not checked" in line]
    assert len(lines) + len(not_checked) == made, judged.stdout + judged.stderr


def run_sessions_of_its_own(client, stack) -> None:
    sid = create_session(client, "tools3")
    assert wait_ended(client, stack, sid)["ended_reason"] == "completed"
    forked = client.post(f"/v1/sessions/{sid}/fork", json={"at_seq": 3, "message": "again"})
    assert forked.status_code == 201, forked.text
    assert wait_ended(client, stack, forked.json()["session_id"])["ended_reason"] == "completed"
