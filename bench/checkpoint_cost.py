"""What a signed checkpoint costs at 1M events in one tenant (issue 16).

`python -m bench.checkpoint_cost [--sessions 20000] [--repeats 3] [--compare-scan]`: loads
the tenant `bench-checkpoints-<key id>` once (sessions × 50 events, made by bench/audit_sessions like the audit
benchmark's, written as the service role through TenantPool, resumable), then measures one
signer round the way `wakeline.evidence.signer` runs it, phase by phase: reading every session's
head (session_keys and a probe of event_keys per session, migration 0020), the Merkle root, the Ed25519 signature,
the postgres insert (heads included), the topic record, the sink line; then what verify
pays before any chain (reading the three witnesses and cross-checking them, the root
recomputed from the stored heads), one inclusion proof, and the lag query; with
`--compare-scan`, also the DISTINCT ON over the tenant's events that the skip scan replaced
(same heads asserted), for the before/after at the same size and load. One JSON line per
figure. Needs the stack of `make up`; it publishes as the admin tool principal. Its signer key
and sink live in `.data/bench-checkpoints/<database>-<prefix>/`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.audit_sessions import PER_SESSION, session_id, session_rows
from bench.harness import ROOT, summary
from wakeline.evidence import merkle, witnesses
from wakeline.evidence.heads import STORED_HEADS_BY_SCAN, stored_heads
from wakeline.storage.event_statements import INSERT_ROWS
from wakeline.storage.pg import TenantPool
from wakeline.evidence.proofs import build_proof
from wakeline.runtime.settings import CommonSettings
from wakeline.evidence.signed_checkpoints import new_statement
from wakeline.evidence.anchoring_lag import anchoring_lag
from wakeline.evidence.signing_round import sign_round
from wakeline.evidence.signing import file_signer
from wakeline.contract.topics import PREFIX

TENANT_PREFIX = "bench-checkpoints"
SESSIONS = 20_000  # × PER_SESSION (50) = 1M events
BATCH = 200


async def ensure_loaded(pool: TenantPool, tenant: str, sessions: int, offset: int) -> dict[str, Any]:
    """Sessions `offset` .. `offset + sessions` of audit_sessions: session ids are unique across
    tenants, so each bench tenant takes its own range (the audit bench's is 0 .. 20k)."""
    async with pool.transaction(tenant) as conn:
        present = await conn.fetchval("SELECT count(*) FROM events")
        for month in range(1, 13):
            await conn.execute("SELECT ensure_events_partition($1)", datetime(2026, month, 1, tzinfo=UTC))
    if present >= sessions * PER_SESSION:
        return {"loaded": False, "events": present}
    started = time.perf_counter()
    for first in range(offset, offset + sessions, BATCH):
        async with pool.transaction(tenant) as conn:
            if await conn.fetchval("SELECT 1 FROM event_keys WHERE session_id = $1", session_id(first)):
                continue
        rows = await asyncio.to_thread(lambda: [r for i in range(first, min(first + BATCH, offset + sessions))
                                                for r in session_rows(tenant, i)])
        async with pool.transaction(tenant) as conn:
            await conn.execute(INSERT_ROWS, *[list(c) for c in zip(*rows)])
    async with pool.transaction(tenant) as conn:
        events = await conn.fetchval("SELECT count(*) FROM events")
    return {"loaded": True, "events": events, "load_s": round(time.perf_counter() - started, 1)}


def _timed(phases: dict[str, list[float]], name: str, started: float) -> float:
    now = time.perf_counter()
    phases.setdefault(name, []).append(round((now - started) * 1000, 2))
    return now


async def measure(sessions: int, repeats: int, home: Path | None = None,
                  compare_scan: bool = False) -> list[dict[str, Any]]:
    settings = CommonSettings()
    await witnesses.ensure_topic(settings)
    # The tenant's statements chain across runs, so the key and the sink persist with the
    # database and topic prefix they belong to: a fresh key or sink would make the next
    # run's cross-check (rightly) report the earlier statements as forged or missing.
    home = home or ROOT / ".data" / "bench-checkpoints" / f"{settings.database}-{PREFIX}"
    signer = file_signer(home / "signer.key", create=True)
    sink = home / "sink"
    # One tenant per key: statements another key signed (an earlier .data) would be forged to this one.
    tenant = f"{TENANT_PREFIX}-{signer.key_id[7:19]}"
    out: list[dict[str, Any]] = []
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
        offset = (int(signer.key_id[7:15], 16) % 1_000_000 + 1) * 1_000_000
        loaded = await ensure_loaded(pool, tenant, sessions, offset)
        out.append({"bench": "checkpoint_tenant", "tenant": tenant, "sessions": sessions, **loaded})
        phases: dict[str, list[float]] = {}
        heads_bytes = 0
        for _ in range(repeats):
            t = time.perf_counter()
            async with pool.transaction(tenant) as conn:
                heads = await stored_heads(conn)
            t = _timed(phases, "read_heads_ms", t)
            if compare_scan:
                async with pool.transaction(tenant) as conn:
                    assert await stored_heads(conn, query=STORED_HEADS_BY_SCAN) == heads
                t = _timed(phases, "read_heads_distinct_on_events_ms", t)
            merkle.root(heads)
            t = _timed(phases, "merkle_root_ms", t)
            envelope = new_statement(signer, tenant, heads, previous=None, created_at=datetime.now(UTC),
                                     through=None)
            t = _timed(phases, "statement_and_signature_ms", t)
            heads_bytes = len(json.dumps({s: h.model_dump(mode="json") for s, h in heads.items()}))
            t = time.perf_counter()
            await sign_round(pool, signer, tenant, settings, sink, floor=timedelta(days=30))
            t = _timed(phases, "whole_round_ms", t)
            evidence = await witnesses.gather(pool, settings, sink, tenant, signer.public_key())
            assert not evidence.problems, evidence.problems
            t = _timed(phases, "verify_gather_and_cross_check_ms", t)
            build_proof(evidence, next(iter(heads)))
            t = _timed(phases, "inclusion_proof_ms", t)
            await anchoring_lag(pool, tenant)
            _timed(phases, "lag_query_ms", t)
        out.append({"bench": "checkpoint_cost", "tenant": tenant, "heads": len(heads), "heads_json_bytes": heads_bytes,
                    "statement_bytes": len(envelope.statement), "repeats": repeats,
                    **{name: summary(values) for name, values in phases.items()},
                    "note": "whole_round_ms = read heads + cuts + root + sign + postgres insert + topic + sink; "
                            "verify's gather grows with the number of checkpoints kept (all are read)"})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.checkpoint_cost")
    parser.add_argument("--sessions", type=int, default=SESSIONS, help=f"× {PER_SESSION} events (default 1M)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compare-scan", action="store_true",
                        help="also time the DISTINCT ON over events the skip scan replaced")
    args = parser.parse_args()
    for line in asyncio.run(measure(args.sessions, args.repeats, compare_scan=args.compare_scan)):
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
