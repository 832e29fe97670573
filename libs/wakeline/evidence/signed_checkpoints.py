"""Ed25519-signed checkpoints: what a signed statement holds, and what the witnesses' copies prove.

A `Statement` is one tenant's state at one moment: the Merkle root over every session's
chain head (merkle.py), the retention cuts newly anchored, its number in the tenant's
sequence and the hash of the statement before it. Its canonical JSON is signed; an
`Envelope` (those exact bytes + the signature) is what every witness keeps: a row in
`signed_checkpoints` (with the heads), a record in `<prefix>.checkpoints`, a line in the
file sink. `cross_check` compares the three copies under the public key alone and yields
`Evidence`: the problems found (forged, missing somewhere, a gap in the numbers, heads
that do not hash to the signed root, a session whose signed head went back or changed
from one statement to the next) and the genuine checkpoints verify compares chains with.
`guard_heads` is the signer's side of that last rule: a head that went back, changed at
the same seq or no longer chains to the one signed before is refused, and the head signed
before is signed again in its place. Pure: reading the witnesses is witnesses.py's job.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from datetime import datetime
from typing import Literal

from pydantic import ValidationError

from wakeline.evidence import merkle
from wakeline.log.chain import canonical_json
from wakeline.evidence.checkpoints import Head
from wakeline.contract.events import Frozen
from wakeline.evidence.signing import Signer, signature_valid

Witness = Literal["postgres", "topic", "sink"]
WITNESSES: tuple[Witness, ...] = ("postgres", "topic", "sink")
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


class Problem(Frozen):
    checkpoint: str | None  # "#<number> <id>" when known
    reason: str


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


@dataclass(frozen=True)
class Genuine:
    """A checkpoint whose signature verifies; `heads` when postgres holds them and they hash to its root."""

    envelope: Envelope
    statement: Statement
    heads: dict[str, Head] | None

    @property
    def label(self) -> str:
        return label(self.statement)


def label(statement: Statement) -> str:
    return f"#{statement.number} {statement.id}"


@dataclass(frozen=True)
class Evidence:
    tenant: str
    problems: tuple[Problem, ...]
    genuine: tuple[Genuine, ...]  # by number
    counts: dict[str, int] = field(default_factory=dict)  # witness -> records read (only the witnesses read)

    @cached_property
    def _signed_heads(self) -> dict[str, dict[Head, Genuine]]:
        found: dict[str, dict[Head, Genuine]] = {}
        for cp in self.genuine:  # by number: the newest statement signing a head wins
            for session_id, head in (cp.heads or {}).items():
                found.setdefault(session_id, {})[head] = cp
        return found

    def signed_heads(self, session_id: str) -> list[tuple[Head, Genuine]]:
        """Every distinct head any genuine checkpoint signed for the session, by seq, each
        with the newest checkpoint that signed it: a chain must still hold all of them."""
        return sorted(self._signed_heads.get(session_id, {}).items(), key=lambda f: (f[0].seq, f[1].statement.number))

    def newest_with(self, session_id: str) -> Genuine | None:
        """The newest genuine checkpoint whose heads (checked against its root) name the session."""
        for cp in reversed(self.genuine):
            if cp.heads is not None and session_id in cp.heads:
                return cp
        return None

    def newest(self) -> Genuine | None:
        return self.genuine[-1] if self.genuine else None

    def cut_signed(self, cut: SignedCut) -> bool:
        return any(cut in g.statement.cuts for g in self.genuine)


def _genuine(public: bytes, tenant: str, witness: Witness, envelope: Envelope) -> Statement | Problem:
    try:
        statement = envelope.parsed()
    except ValidationError:
        return Problem(checkpoint=None, reason=f"a record in the {witness} is not a signed statement")
    if not signature_valid(public, envelope.statement.encode(), envelope.signature):
        return Problem(checkpoint=label(statement), reason=f"checkpoint {label(statement)} in the {witness}: "
                                                           "its signature does not verify (forged or altered)")
    if statement.tenant != tenant:
        return Problem(checkpoint=label(statement), reason=f"checkpoint {label(statement)} in the {witness} "
                                                           f"is signed for tenant {statement.tenant!r}")
    return statement


def cross_check(public: bytes, tenant: str, postgres: Sequence[tuple[Envelope, Mapping[str, Head]]],
                topic: Sequence[Envelope], sink: Sequence[Envelope],
                unreadable: Sequence[Problem] = (), read: Sequence[Witness] = WITNESSES) -> Evidence:
    """The three witnesses' copies of a tenant's checkpoints, compared under `public` alone.

    Reported: a record whose signature fails (in which witness); a genuine checkpoint one
    witness lacks; a number missing from all three while a later one is there (its
    successor names it); a genuine checkpoint whose successor names another hash; heads
    in postgres that do not hash to the signed root. `read`: the witnesses that were read
    (the gateway reads postgres alone); one not read is never said to lack anything.
    """
    problems = list(unreadable)
    copies: dict[Witness, Sequence[Envelope]] = {"postgres": [e for e, _ in postgres], "topic": topic, "sink": sink}
    found: dict[uuid.UUID, tuple[Envelope, Statement]] = {}
    present: dict[uuid.UUID, set[Witness]] = {}
    for witness in WITNESSES:
        for envelope in copies[witness]:
            result = _genuine(public, tenant, witness, envelope)
            if isinstance(result, Problem):
                problems.append(result)
                continue
            found.setdefault(result.id, (envelope, result))
            present.setdefault(result.id, set()).add(witness)
    heads_of = {}
    for envelope, heads in postgres:
        known = found.get(_id_of(envelope) or uuid.UUID(int=0))
        if known is None or known[0] != envelope:  # forged: reported above
            continue
        statement = known[1]
        parsed = {s: Head.model_validate(h) for s, h in heads.items()}
        if merkle.root(parsed) != statement.root:
            problems.append(Problem(checkpoint=label(statement), reason=(
                f"checkpoint {label(statement)}: the heads postgres holds do not hash to its signed root")))
        else:
            heads_of[statement.id] = parsed
    ordered = sorted(found.values(), key=lambda f: f[1].number)
    for envelope, statement in ordered:
        missing = [w for w in read if w not in present[statement.id]]
        if missing:
            problems.append(Problem(checkpoint=label(statement), reason=(
                f"checkpoint {label(statement)} is missing from the {' and the '.join(missing)} "
                f"(present in the {' and the '.join(w for w in WITNESSES if w in present[statement.id])})")))
    problems.extend(_chain_problems(ordered))
    genuine = tuple(Genuine(e, s, heads_of.get(s.id)) for e, s in ordered)
    problems.extend(_head_problems(genuine))
    return Evidence(tenant=tenant, problems=tuple(problems), genuine=genuine,
                    counts={w: len(copies[w]) for w in read})


def _id_of(envelope: Envelope) -> uuid.UUID | None:
    try:
        return envelope.parsed().id
    except ValidationError:
        return None


def _chain_problems(ordered: Sequence[tuple[Envelope, Statement]]) -> list[Problem]:
    problems = []
    expected, prev = 1, FIRST_PREV
    for envelope, statement in ordered:
        if statement.number < expected:
            problems.append(Problem(checkpoint=label(statement), reason=(
                f"checkpoint {label(statement)}: a second genuine statement numbered {statement.number}")))
            continue
        if statement.number > expected:
            gap = f"{expected}" if statement.number == expected + 1 else f"{expected}..{statement.number - 1}"
            problems.append(Problem(checkpoint=label(statement), reason=(
                f"checkpoint #{gap} missing from every witness: checkpoint {label(statement)} follows it")))
        elif statement.prev != prev:
            problems.append(Problem(checkpoint=label(statement), reason=(
                f"checkpoint {label(statement)} does not name the hash of checkpoint #{expected - 1}")))
        expected, prev = statement.number + 1, envelope.digest
    return problems


def _head_problems(genuine: Sequence[Genuine]) -> list[Problem]:
    """Each session's signed head, from one genuine statement (with checked heads) to the
    next: never back, never another hash at the same seq, never gone without a signed cut.

    A signer that signed whatever heads the database reported would sign a rewrite or a
    cut tail as if it were history; two of its genuine statements then disagree here.
    """
    problems = []
    before: Genuine | None = None
    cuts: list[SignedCut] = []
    for cp in genuine:
        cuts.extend(cp.statement.cuts)
        if cp.heads is None:
            continue
        if before is not None and before.heads is not None:
            covered = {c.session_id: c.seq for c in sorted(cuts, key=lambda c: c.seq)}
            for session_id, head in sorted(before.heads.items()):
                why = head_break(session_id, head, cp.heads.get(session_id),
                                 covered=covered.get(session_id, 0) >= head.seq)
                if why is not None:
                    problems.append(Problem(checkpoint=cp.label, reason=(
                        f"checkpoint {cp.label} contradicts checkpoint {before.label}: {why}")))
        before = cp
    return problems
