"""One signing round for a tenant: the statement over its chain heads, written to the three witnesses.

The round reads every session's chain head (heads.py) and the retention cuts not yet
anchored, keeps each head to a continuation of the one this key signed before
(signed_checkpoints.guard_heads), signs a statement over their Merkle root and writes it
to Postgres, the topic and the file sink (witnesses). When rounds run is the signer's
(signer.py).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg

from wakeline.evidence import merkle, witnesses
from wakeline.evidence.heads import held_at, newest_event_at, stored_heads
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings
from wakeline.evidence.signed_checkpoints import Envelope, Refusal, SignedCut, guard_heads, new_statement
from wakeline.evidence.signing import Signer


async def _unsigned_cuts(conn: asyncpg.Connection, signed: set[SignedCut], now: datetime,
                         floor: timedelta) -> tuple[list[SignedCut], list[SignedCut]]:
    """(cuts to sign now, cuts refused: younger than the floor). Already signed ones are skipped."""
    rows = await conn.fetch("SELECT range_from, range_to, session_id, seq, hash FROM retention_cuts(NULL)")
    cuts = [SignedCut(**dict(r)) for r in rows]
    fresh = [c for c in cuts if c not in signed]
    return [c for c in fresh if c.range_to <= now - floor], [c for c in fresh if c.range_to > now - floor]


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
        through = await newest_event_at(conn)
        signed_cuts = await witnesses.signed_cuts(conn, public, tenant)
        cuts, refused_cuts = await _unsigned_cuts(conn, signed_cuts, now, floor)
        held = await held_at(conn, signed_heads, heads)
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
