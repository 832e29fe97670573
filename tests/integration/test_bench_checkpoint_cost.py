"""The checkpoint-cost bench runs end to end on a tiny tenant and reports every phase (not timings)."""

from __future__ import annotations

from bench import checkpoint_cost
from conftest_pg import require_postgres
from wakeline.runtime.settings import CommonSettings

PHASES = ("read_heads_ms", "merkle_root_ms", "statement_and_signature_ms", "whole_round_ms",
          "verify_gather_and_cross_check_ms", "inclusion_proof_ms", "lag_query_ms")


async def test_the_checkpoint_bench_signs_cross_checks_and_reports_each_phase(kafka: CommonSettings, tmp_path) -> None:
    await require_postgres()
    # A key, tenant and sink of its own: another test deletes the shared topic's records.
    tenant, cost = await checkpoint_cost.measure(sessions=2, repeats=1, home=tmp_path, compare_scan=True)
    assert tenant["events"] >= 2 * checkpoint_cost.PER_SESSION
    assert cost["heads"] >= 2 and cost["statement_bytes"] > 0
    for phase in (*PHASES, "read_heads_distinct_on_events_ms"):  # the old query, asserted equal
        assert cost[phase]["n"] == 1 and cost[phase]["min"] >= 0, phase
