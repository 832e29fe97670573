"""The archiver benches run: throughput against the COPY floor, lag under a steady load, and
storage per event come back with the expected keys and sane values (not timings)."""

from __future__ import annotations

from bench import archiver_throughput
from bench.audit_load import storage_per_event
from conftest_pg import require_postgres
from wakeline.runtime.settings import CommonSettings


async def test_archiver_bench_reports_rate_floor_ratio_and_lag(kafka: CommonSettings, monkeypatch) -> None:
    await require_postgres()
    # The rate is taken after the first batch: small batches, so that 900 events make several.
    monkeypatch.setenv("WAKELINE_ARCHIVER_BATCH_SIZE", "100")
    line = await archiver_throughput.run(sessions=6, per_session=150, load_fraction=0.5, load_s=1.0, rounds=3)
    assert line["bench"] == "archiver_throughput" and line["rounds"] == 3
    for figure in ("archiver", "copy", "unnest_insert"):  # each the median of its three rounds
        rates = line[figure]["rounds_events_per_s"]
        assert len(rates) == 3 and line[figure]["events_per_s"] == sorted(rates)[1]
    assert len(line["ratio_archiver_to_copy_per_round"]) == 3
    assert line["archiver"]["events"] == line["copy"]["events"] == 900
    assert line["archiver"]["events_per_s"] > 0 and line["copy"]["events_per_s"] > 0
    assert line["unnest_insert"]["events"] == 900 and line["unnest_insert"]["events_per_s"] > 0
    assert line["ratio_archiver_to_copy"] == round(line["archiver"]["events_per_s"] / line["copy"]["events_per_s"], 3)
    assert line["ratio_archiver_to_copy"] > 0 and line["ratio_archiver_to_unnest_insert"] > 0
    lag = line["lag_under_load"]
    assert lag["events"] > 0 and lag["samples"] > 0 and lag["produced_events_per_s"] > 0
    assert 0 <= lag["lag_events_p50"] <= lag["lag_events_p99"] <= lag["events"] + 5
    assert 0 <= lag["lag_s_p50"] <= lag["lag_s_p99"]


async def test_storage_bench_counts_every_relation_of_the_archive() -> None:
    await require_postgres()
    line = await storage_per_event()
    assert line["bench"] == "storage_per_event"
    assert line["events"] > 0
    parts = line["heap_per_event"]
    assert set(parts) == {"events", "event_keys", "session_keys", "sessions"}
    assert {"events_pkey", "event_keys_pkey", "event_keys_event_id_key", "events_tenant_actor_ts"} <= set(
        line["index_per_event"])
    assert line["bytes_per_event"] > sum(parts.values()) + sum(line["index_per_event"].values()) - 1
