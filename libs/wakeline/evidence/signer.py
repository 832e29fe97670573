"""The checkpoint signer: `wakeline-signer keygen|once|run|lag [--tenant T ...]` (or
`python -m wakeline.evidence.signer`; without --tenant, every tenant that has events).

It holds the Ed25519 private key (its own key file, `WAKELINE_SIGNER_KEY_FILE`, or the
hex seed in `WAKELINE_SIGNER_KEY` for an environment secret; `signing.Signer` is the seam
for a KMS) and nothing else does. One round for a tenant reads every session's chain head
(seq, hash) and the retention cuts not yet anchored, signs a statement over their Merkle
root (signed_checkpoints.py) and writes it to the three witnesses: Postgres, the topic
`<prefix>.checkpoints` and the file sink (witnesses.py). `run` repeats rounds: a tenant is
signed when `WAKELINE_SIGNER_EVERY_S` seconds have passed since its last checkpoint or
`WAKELINE_SIGNER_EVERY_EVENTS` events arrived since. `lag` prints how much of the log is
not yet anchored; `anchoring_lag` is the same as a function for a metrics endpoint.

A retention cut is signed only when its range ended at least `WAKELINE_SIGNER_RETENTION_FLOOR_DAYS`
ago: the signer's own copy of the shortest retention any tenant has, held outside the
database, so a month deleted inside it with a forged `retention_log` row is refused (and
stays unanchored, which verify reports) instead of signed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
from aiokafka.errors import KafkaError

from wakeline.evidence import merkle, witnesses
from wakeline.runtime import metrics
from wakeline.evidence.checkpoints import Head, stored_heads
from wakeline.contract.events import Frozen
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings
from wakeline.evidence.signed_checkpoints import Envelope, Refusal, SignedCut, guard_heads, new_statement
from wakeline.evidence.signing import SeedSigner, Signer, file_signer, secret_signer
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


async def _through(conn: asyncpg.Connection) -> datetime | None:
    value: datetime | None = await conn.fetchval("SELECT max(ts) FROM events")
    return value


async def _unsigned_cuts(conn: asyncpg.Connection, signed: set[SignedCut], now: datetime,
                         floor: timedelta) -> tuple[list[SignedCut], list[SignedCut]]:
    """(cuts to sign now, cuts refused: younger than the floor). Already signed ones are skipped."""
    rows = await conn.fetch("SELECT range_from, range_to, session_id, seq, hash FROM retention_cuts(NULL)")
    cuts = [SignedCut(**dict(r)) for r in rows]
    fresh = [c for c in cuts if c not in signed]
    return [c for c in fresh if c.range_to <= now - floor], [c for c in fresh if c.range_to > now - floor]


# What the store holds now at each (session, seq) given: the events row where it still is,
# else event_keys' tombstone (retention dropped the row, not its registered hash). One
# statement for every session whose head moved, each a primary-key probe of event_keys and
# one of the event's own partition (by its ts).
_HELD_AT = """
SELECT s.session_id, encode(coalesce(e.hash, k.hash), 'hex') AS hash
  FROM unnest($1::text[], $2::bigint[]) AS s(session_id, seq)
  LEFT JOIN event_keys k ON k.session_id = s.session_id AND k.seq = s.seq
  LEFT JOIN LATERAL (SELECT hash FROM events
                      WHERE session_id = s.session_id AND seq = s.seq AND ts = k.ts) AS e ON true
"""


async def _held_at(conn: asyncpg.Connection, signed: dict[str, Head],
                   found: dict[str, Head]) -> dict[str, str | None]:
    moved = sorted((s, h.seq) for s, h in signed.items() if s in found and found[s].seq > h.seq)
    if not moved:
        return {}
    rows = await conn.fetch(_HELD_AT, [s for s, _ in moved], [q for _, q in moved])
    return {r["session_id"]: r["hash"] for r in rows}


class SignerRefused(Exception):
    """A round that cannot be signed at all (not one head: the whole tenant)."""


@dataclass(frozen=True)
class Round:
    envelope: Envelope
    refused_heads: tuple[Refusal, ...]  # each signed again at the head signed before
    refused_cuts: tuple[SignedCut, ...]  # inside the signer's retention floor: left unsigned


async def sign_round(pool: TenantPool, signer: Signer, tenant: str, settings: CommonSettings, sink: Path, *,
                     floor: timedelta = timedelta(days=30), now: datetime | None = None) -> Round:
    """One checkpoint of `tenant`: signed, then written to postgres, the topic and the sink.

    A session's head is signed only as a continuation of the head this key signed for it
    last (signed_checkpoints.guard_heads): one that went back (a cut tail), changed at the
    same seq, or moved on without still holding the signed hash at the signed seq (a chain
    rewritten consistently) is refused, logged, and the old head signed again instead.
    Signing what the database reports would anchor a rewrite as if it were history.
    """
    now = now or datetime.now(UTC)
    public = signer.public_key()
    async with pool.transaction(tenant) as conn:
        # The newest statement this key signed, not merely the newest row: a row forged into
        # postgres must not become the predecessor (then the number it took is refused by
        # the unique (tenant, number) and the round fails loudly, instead of chaining on it).
        found = await witnesses.newest_signed(conn, public, tenant)
        previous, signed_heads = found if found is not None else (None, {})
        if previous is not None and merkle.root(signed_heads) != previous.parsed().root:
            label = f"#{previous.parsed().number} {previous.parsed().id}"
            raise SignerRefused(f"tenant {tenant}: the heads postgres holds for checkpoint {label} do not hash to "
                                "its signed root, so what was signed last is unknown; not signing on top of it "
                                "(verify names that checkpoint)")
        heads = await stored_heads(conn)
        through = await _through(conn)
        signed_cuts = await witnesses.signed_cuts(conn, public, tenant)
        cuts, refused_cuts = await _unsigned_cuts(conn, signed_cuts, now, floor)
        held = await _held_at(conn, signed_heads, heads)
        heads, refused = guard_heads(signed_heads, heads, held, [*signed_cuts, *cuts])
        for cut in refused_cuts:
            print(json.dumps({"refused_cut": cut.model_dump(mode="json"), "tenant": tenant,
                              "why": f"its range ended less than {floor} ago (the signer's retention floor)"}),
                  file=sys.stderr, flush=True)
        for refusal in refused:
            print(json.dumps({"refused_head": refusal.model_dump(mode="json"), "tenant": tenant,
                              "why": refusal.why}), file=sys.stderr, flush=True)
        envelope = new_statement(signer, tenant, heads, previous=previous, created_at=now, through=through,
                                 cuts=cuts)
        await witnesses.insert(conn, envelope, heads)
    await witnesses.publish(settings, envelope)
    witnesses.append_sink(sink, tenant, envelope)
    return Round(envelope=envelope, refused_heads=refused, refused_cuts=tuple(refused_cuts))


class Lag(Frozen):
    tenant: str
    newest_event_at: datetime | None
    newest_checkpoint: int | None  # its number
    checkpoint_at: datetime | None
    anchored_through: datetime | None  # newest event ts the newest checkpoint covers
    unanchored_events: int  # events stored after that
    lag_s: float | None  # newest event ts - anchored_through (0 when all anchored; None: nothing anchored yet)


async def anchoring_lag(pool: TenantPool, tenant: str, public: bytes | None = None) -> Lag:
    """How much of `tenant`'s log no signed checkpoint covers yet (read from postgres).

    With `public`, measured from the newest statement it verifies (what the signer does:
    a forged newer row claiming a late `through` must not make the log look anchored);
    without, from the newest row. Counted by event time (`ts > through`): an event archived
    late with a time before `through` is not counted, though the heads signed did not
    hold it (docs/evidence.md, "Known limits"); the next round signs it.
    """
    async with pool.transaction(tenant) as conn:
        if public is None:
            newest = await witnesses.newest_postgres(conn)
        else:
            found = await witnesses.newest_genuine(conn, public, tenant)
            newest = found[1] if found is not None else None
        statement = newest.parsed() if newest else None
        through = statement.through if statement else None
        # Counted before the newest time is read: each statement of this (read committed)
        # transaction sees its own snapshot, so read the other way round an event committed
        # in between was counted as unanchored while the lag still said 0.
        if through is None:
            unanchored = await conn.fetchval("SELECT count(*) FROM events")
        else:
            unanchored = await conn.fetchval("SELECT count(*) FROM events WHERE ts > $1", through)
        newest_event = await _through(conn)
    if newest_event is None:
        lag: float | None = 0.0
    elif through is None:
        lag = None
    else:
        lag = max((newest_event - through).total_seconds(), 0.0)
    return Lag(tenant=tenant, newest_event_at=newest_event, newest_checkpoint=statement.number if statement else None,
               checkpoint_at=statement.created_at if statement else None, anchored_through=through,
               unanchored_events=unanchored, lag_s=lag)


def due(lag: Lag, now: datetime, every_s: float, every_events: int) -> bool:
    """A tenant needs a checkpoint: unanchored events, and enough time or enough of them."""
    if lag.unanchored_events == 0:
        return False
    if lag.checkpoint_at is None or lag.unanchored_events >= every_events:
        return True
    return (now - lag.checkpoint_at).total_seconds() >= every_s


def observe(lag: Lag) -> None:
    """The tenant's lag as the gauges an operator alerts on (docs/operations.md)."""
    metrics.SIGNER_UNANCHORED.labels(lag.tenant).set(lag.unanchored_events)
    metrics.SIGNER_LAG.labels(lag.tenant).set(math.inf if lag.lag_s is None else lag.lag_s)


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
