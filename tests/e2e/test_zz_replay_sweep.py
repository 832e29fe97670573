"""Replay against new code over everything the e2e suite ran: after the other e2e modules
(this one sorts last), every session created since this run's first e2e test started is
run through today's brain decisions and fold (`wakeline_brain.replay_check --all --since`),
so a change that would break a session the services really recorded fails here with the
session and the seq it breaks at. Reads Postgres only; it starts no stack of its own.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.stored_log import pg_rows


def test_every_session_the_e2e_suite_ran_replays_cleanly_against_todays_code(e2e_start):
    made = pg_rows("SELECT count(*) AS n FROM sessions WHERE created_at >= $1", e2e_start)[0]["n"]
    if made == 0:
        pytest.skip("no e2e module ran before this one in this run: no session to check")
    judged = subprocess.run([sys.executable, "-m", "wakeline_brain.replay_check", "--all", "--since",
                             e2e_start.isoformat(), "--tenant", "default"],
                            capture_output=True, text=True, timeout=600)
    lines = judged.stdout.splitlines()
    diverged = [line for line in lines if "replays cleanly" not in line]
    assert judged.returncode == 0 and not diverged, "\n".join(diverged) or judged.stderr
    # every session was read (one line each), or said why not (a prefix retention dropped)
    not_checked = [line for line in judged.stderr.splitlines() if "not checked" in line]
    assert len(lines) + len(not_checked) == made, judged.stdout + judged.stderr
