"""Ed25519-signed checkpoints: what a signed statement holds, and which heads it may sign.

A `Statement` is one tenant's state at one moment: the Merkle root over every session's
chain head (merkle.py), the retention cuts newly anchored, its number in the tenant's
sequence and the hash of the statement before it. Its canonical JSON is signed; an
`Envelope` (those exact bytes + the signature) is what every witness keeps (witnesses).
A session's signed head may only move forward along its chain (`head_break`):
`guard_heads` is the signer's side of that rule (a head that went back, changed at the
same seq or no longer chains to the one signed before is refused, and the head signed
before is signed again in its place); cross_check.py is the verifier's. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Literal

from wakeline.evidence import merkle
from wakeline.log.chain import canonical_json
from wakeline.evidence.heads import Head
from wakeline.contract.events import Frozen
from wakeline.evidence.signing import Signer

FIRST_PREV = "0" * 64  # what statement 1 names as the hash of its predecessor


class SignedCut(Frozen):
    """One session's last event in a dropped range (a `retention_log` head), as signed."""

    range_from: datetime
    range_to: datetime
    session_id: str
    seq: int
    hash: str


class Statement(Frozen):
    version: Literal[1] = 1
    id: uuid.UUID
    tenant: str
    number: int
    prev: str  # sha256 of the previous statement's bytes; FIRST_PREV for number 1
    created_at: datetime
    key_id: str  # fingerprint of the public key that verifies it
    sessions: int
    root: str  # merkle.root over the heads
    through: datetime | None  # ts of the newest event the heads cover (None: no events)
    cuts: tuple[SignedCut, ...] = ()

    def to_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="json"))


class Envelope(Frozen):
    statement: str  # the exact signed bytes, as text
    signature: str

    def parsed(self) -> Statement:
        return Statement.model_validate_json(self.statement)

    @property
    def digest(self) -> str:
        """What the next statement names as `prev`."""
        return hashlib.sha256(self.statement.encode()).hexdigest()


def sign_statement(signer: Signer, statement: Statement) -> Envelope:
    text = statement.to_bytes()
    return Envelope(statement=text.decode(), signature=signer.sign(text))


def new_statement(signer: Signer, tenant: str, heads: Mapping[str, Head], *, previous: Envelope | None,
                  created_at: datetime, through: datetime | None, cuts: Sequence[SignedCut] = ()) -> Envelope:
    before = previous.parsed() if previous is not None else None
    statement = Statement(id=uuid.uuid4(), tenant=tenant, number=before.number + 1 if before else 1,
                          prev=previous.digest if previous is not None else FIRST_PREV, created_at=created_at,
                          key_id=signer.key_id, sessions=len(heads), root=merkle.root(heads), through=through,
                          cuts=tuple(cuts))
    return sign_statement(signer, statement)


def label(statement: Statement) -> str:
    return f"#{statement.number} {statement.id}"


class Refusal(Frozen):
    """A head the signer would not sign: it is not a continuation of the one it signed before."""

    session_id: str
    signed: Head  # the head the previous statement signed, signed again in its place
    found: Head | None  # what the database reports now (None: the session has no head left)
    why: str


def head_break(session_id: str, before: Head, after: Head | None, *, covered: bool,
               held_at_before: str | None = None, check_chain: bool = False) -> str | None:
    """Why `after` cannot follow `before` as a session's signed head; None when it can.

    `covered`: a signed retention cut names the session at or past `before.seq`, so the
    session may have no head left. With `check_chain`, a head that moved forward must
    still hold `before.hash` at `before.seq` (`held_at_before`: what the store holds there).
    """
    if after is None:
        return None if covered else (f"session {session_id} has no head now, and no signed retention cut "
                                     f"covers seq {before.seq} that was signed")
    if after.seq < before.seq:
        return f"session {session_id} went back from seq {before.seq} to seq {after.seq}: its tail was cut"
    if after.seq == before.seq and after.hash != before.hash:
        return (f"session {session_id} at seq {before.seq} has hash {after.hash[:16]}…, "
                f"{before.hash[:16]}… was signed: rewritten")
    if check_chain and after.seq > before.seq and held_at_before != before.hash:
        held = "nothing" if held_at_before is None else f"hash {held_at_before[:16]}…"
        return (f"session {session_id} moved on to seq {after.seq}, but holds {held} at seq {before.seq} where "
                f"{before.hash[:16]}… was signed: rewritten")
    return None


def guard_heads(signed: Mapping[str, Head], found: Mapping[str, Head], held_at_signed: Mapping[str, str | None],
                cuts: Sequence[SignedCut]) -> tuple[dict[str, Head], tuple[Refusal, ...]]:
    """The heads to sign now, and the ones refused, given the heads signed last time.

    `held_at_signed[s]`: the hash the store holds now at `signed[s].seq`, for each session
    whose head moved forward. `cuts`: every retention cut signed so far or in this round.
    A refused head is replaced by the one signed before, so the rest of the tenant stays
    anchored and verify finds the session's chain against a head it no longer holds.
    """
    covered = {c.session_id: c.seq for c in sorted(cuts, key=lambda c: c.seq)}
    heads = dict(found)
    refused = []
    for session_id, before in sorted(signed.items()):
        after = found.get(session_id)
        why = head_break(session_id, before, after, covered=covered.get(session_id, 0) >= before.seq,
                         held_at_before=held_at_signed.get(session_id), check_chain=True)
        if why is not None:
            refused.append(Refusal(session_id=session_id, signed=before, found=after, why=why))
            heads[session_id] = before
    return heads, tuple(refused)
