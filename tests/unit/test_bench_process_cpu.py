"""The whole-machine CPU census: Postgres processes sorted by role from their titles, and the
time of a backend that ended inside a window found in the postmaster's reaped time, and the
backends of the bench's own connections set apart."""

from __future__ import annotations

import os
import subprocess

from bench.process_cpu import Census, Reading, postgres_role, used_s


def test_postgres_processes_are_sorted_by_role_from_their_title() -> None:
    assert postgres_role("postgres: walwriter", "wakeline") == "postgres_background"
    assert postgres_role("postgres: autovacuum worker wakeline", "wakeline") == "postgres_background"
    assert postgres_role("postgres: wakeline_service wakeline 127.0.0.1(5000) idle", "wakeline") \
        == "postgres_backends"
    assert postgres_role("postgres: wakeline_service wakeline_test 127.0.0.1(5000) idle", "wakeline") \
        == "postgres_other_db"


def test_a_backend_that_ended_in_the_window_counts_only_its_time_inside_it() -> None:
    before = Reading({"broker": 10.0}, 100.0, {1: ("postgres_backends", 2.0), 2: ("postgres_backends", 5.0)}, 50.0)
    # backend 2 ended at 6.5 s (1.5 s inside the window): the postmaster reaped it, 6.5 s in all;
    # backend 3 started and used 0.25 s
    after = Reading({"broker": 12.0}, 106.0, {1: ("postgres_backends", 3.0), 3: ("postgres_backends", 0.25)}, 56.5)
    used = used_s(before, after)
    assert used["broker"] == 2.0 and used["machine"] == 6.0
    assert used["postgres_backends"] == 1.25 and used["postgres_ended"] == 1.5


def test_a_backend_the_bench_names_is_its_own_and_the_others_keep_their_roles() -> None:
    # This process stands in for the postmaster: its children are the "backends".
    named, other = (subprocess.Popen(["sleep", "30"]) for _ in range(2))
    try:
        census = Census({}, None, os.getpid(), "wakeline", bench_backends=frozenset({named.pid}))
        roles = {pid: role for pid, (role, _) in census.read().postgres_pids.items()}
        assert roles[named.pid] == "postgres_bench"
        assert roles[other.pid] == "postgres_other_db"  # "sleep 30": not a client of `wakeline`
    finally:
        for proc in (named, other):
            proc.kill()
            proc.wait()
