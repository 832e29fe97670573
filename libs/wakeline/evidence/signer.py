"""The checkpoint signer: `wakeline-signer keygen|once|run|lag [--tenant T ...]` (or
`python -m wakeline.evidence.signer`; without --tenant, every tenant that has events).

It holds the Ed25519 private key (its own key file, `WAKELINE_SIGNER_KEY_FILE`, or the
hex seed in `WAKELINE_SIGNER_KEY` for an environment secret; `signing.Signer` is the seam
for a KMS) and nothing else does. One round for a tenant reads every session's chain head
(seq, hash) and the retention cuts not yet anchored, signs a statement over their Merkle
root (signed_checkpoints.py) and writes it to the three witnesses: Postgres, the topic
`<prefix>.checkpoints` and the file sink (witnesses); the round is signing_round.py. `run`
repeats rounds: a tenant is signed when `WAKELINE_SIGNER_EVERY_S` seconds have passed since
its last checkpoint or `WAKELINE_SIGNER_EVERY_EVENTS` events arrived since. `lag` prints how
much of the log is not yet anchored; `anchoring_lag` (anchoring_lag.py) is the same as a
function for a metrics endpoint. Here: the key, the loop over tenants and the command.

A retention cut is signed only when its range ended at least `WAKELINE_SIGNER_RETENTION_FLOOR_DAYS`
ago: the signer's own copy of the shortest retention any tenant has, held outside the
database, so a month deleted inside it with a forged `retention_log` row is refused (and
stays unanchored, which verify reports) instead of signed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
from aiokafka.errors import KafkaError

from wakeline.runtime import metrics
from wakeline.evidence.anchoring_lag import anchoring_lag, due, observe
from wakeline.storage.pg import TenantPool
from wakeline.evidence.signing import SeedSigner, file_signer, secret_signer
from wakeline.evidence.signing_round import SignerRefused, sign_round
from wakeline.evidence.witnesses import EvidenceSettings


class SignerSettings(EvidenceSettings):
    signer_key_file: Path = Path(".data/signer/signer.key")
    signer_key: str | None = None  # the hex seed from a secret store; overrides the file
    signer_every_s: float = 300.0
    signer_every_events: int = 10_000
    signer_poll_s: float = 5.0
    signer_retention_floor_days: float = 30.0


def load_signer(settings: SignerSettings, *, create: bool = False) -> SeedSigner:
    if settings.signer_key is not None:
        return secret_signer(settings.signer_key)
    return file_signer(settings.signer_key_file, create=create)


async def tenants_of(pool: TenantPool, named: list[str]) -> list[str]:
    """The tenants named, or when none is, every tenant with events (event_tenants(), 0019)."""
    if named:
        return named
    async with pool.system_transaction() as conn:
        return [r["tenant"] for r in await conn.fetch("SELECT event_tenants() AS tenant")]


async def run(settings: SignerSettings, tenants: list[str], *, forever: bool) -> int:
    """Rounds for `tenants` (all of them when empty); returns how many rounds failed.

    A tenant whose round fails (refused, the database or the broker down) is logged and
    retried on the next poll; the others are signed meanwhile.
    """
    signer = load_signer(settings, create=True)
    floor = timedelta(days=settings.signer_retention_floor_days)
    failed = 0
    if forever:
        metrics.serve_metrics(settings, "signer")
    async with TenantPool(settings.postgres_dsn, "wakeline-signer", min_size=1, max_size=2) as pool:
        print(json.dumps({"signer": "started", "key_id": signer.key_id, "tenants": tenants or "all",
                          "every_s": settings.signer_every_s, "every_events": settings.signer_every_events}),
              flush=True)
        while True:
            for tenant in await tenants_of(pool, tenants):
                try:
                    lag = await anchoring_lag(pool, tenant, signer.public_key())
                    observe(lag)
                    if forever and not due(lag, datetime.now(UTC), settings.signer_every_s,
                                           settings.signer_every_events):
                        continue
                    started = time.perf_counter()
                    done = await sign_round(pool, signer, tenant, settings, settings.signer_sink_dir, floor=floor)
                    observe(await anchoring_lag(pool, tenant, signer.public_key()))
                except (SignerRefused, asyncpg.PostgresError, KafkaError, OSError) as exc:
                    failed += 1
                    metrics.SIGNER_ROUNDS.labels("failed").inc()
                    print(json.dumps({"signer": "round failed", "tenant": tenant,
                                      "error": f"{type(exc).__name__}: {exc}"}), file=sys.stderr, flush=True)
                    continue
                metrics.SIGNER_ROUNDS.labels("signed").inc()
                if done.refused_heads:
                    metrics.SIGNER_REFUSED_HEADS.labels(tenant).inc(len(done.refused_heads))
                statement = done.envelope.parsed()
                print(json.dumps({"checkpoint": statement.number, "id": str(statement.id), "tenant": tenant,
                                  "sessions": statement.sessions, "cuts": len(statement.cuts),
                                  "refused_heads": len(done.refused_heads), "root": statement.root,
                                  "took_s": round(time.perf_counter() - started, 3)}), flush=True)
            if not forever:
                return failed
            await asyncio.sleep(settings.signer_poll_s)


async def _lag(settings: SignerSettings, tenants: list[str]) -> None:
    async with TenantPool(settings.postgres_dsn, "wakeline-signer", min_size=1, max_size=2) as pool:
        for tenant in await tenants_of(pool, tenants):
            print((await anchoring_lag(pool, tenant)).model_dump_json(), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wakeline.evidence.signer")
    parser.add_argument("command", choices=["keygen", "once", "run", "lag"],
                        help="keygen: create the key and print the public key and fingerprint; once: one "
                             "checkpoint per tenant; run: checkpoint on schedule, forever; lag: unanchored events")
    parser.add_argument("--tenant", action="append", default=[],
                        help="repeatable; without it, every tenant that has events")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    settings = SignerSettings()
    try:
        if args.command == "keygen":
            signer = load_signer(settings, create=True)
            print(json.dumps({"public_key": signer.public_key().hex(), "fingerprint": signer.key_id}))
            return 0
        if args.command == "lag":
            asyncio.run(_lag(settings, args.tenant))
        elif asyncio.run(run(settings, args.tenant, forever=args.command == "run")):
            return 1  # `once` with a tenant whose round failed (said on stderr)
    except KeyboardInterrupt:
        return 0
    except (OSError, ValueError, asyncpg.PostgresError) as exc:
        print(f"signer: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
