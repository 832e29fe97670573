"""The three witnesses' copies of a tenant's signed checkpoints, compared: `cross_check`.

Under the public key alone it yields `Evidence`: the problems found (forged, missing
somewhere, a gap in the numbers, heads that do not hash to the signed root, a session whose
signed head went back or changed from one statement to the next) and the genuine
checkpoints verify compares chains with. Pure: reading the witnesses is witnesses' job.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from pydantic import ValidationError

from wakeline.evidence import merkle
from wakeline.evidence.heads import Head
from wakeline.contract.events import Frozen
from wakeline.evidence.signed_checkpoints import FIRST_PREV, Envelope, SignedCut, Statement, head_break, label
from wakeline.evidence.signing import signature_valid

Witness = Literal["postgres", "topic", "sink"]
WITNESSES: tuple[Witness, ...] = ("postgres", "topic", "sink")


class Problem(Frozen):
    checkpoint: str | None  # "#<number> <id>" when known
    reason: str


@dataclass(frozen=True)
class Genuine:
    """A checkpoint whose signature verifies; `heads` when postgres holds them and they hash to its root."""

    envelope: Envelope
    statement: Statement
    heads: dict[str, Head] | None

    @property
    def label(self) -> str:
        return label(self.statement)


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
