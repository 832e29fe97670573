"""Sorting a batch before anything is stored: events to store, records to set aside. Pure.

A record that is not a storable event is set aside with its reason, and if it names a
session, that session is parked from its seq (its later events would sit above a gap).
An event of a parked session at or after the parked seq is set aside too. Records are
taken in offset order, and a session's records all sit in one partition, so "later"
is well defined.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from wakeline.contract.codec import MalformedRecord
from wakeline.contract.events import Event, EventBase
from wakeline_archiver.quarantine import Parked
from wakeline_archiver.records import RawRecord, SessionKey, claimed_session, decode_event


@dataclass(frozen=True)
class SetAside:
    record: RawRecord
    reason: str


@dataclass
class Triage:
    to_store: list[tuple[RawRecord, Event]] = field(default_factory=list)
    set_aside: list[SetAside] = field(default_factory=list)
    parked: list[Parked] = field(default_factory=list)  # newly parked by this batch


Decoded = tuple[RawRecord, Event | MalformedRecord]


def decode_all(records: Sequence[RawRecord]) -> list[Decoded]:
    decoded: list[Decoded] = []
    for record in records:
        try:
            decoded.append((record, decode_event(record.value)))
        except MalformedRecord as bad:
            decoded.append((record, bad))
    return decoded


def sessions_named(decoded: Sequence[Decoded]) -> set[SessionKey]:
    """Every session the batch's records name, readable or not: what to look up in the quarantine."""
    named = set()
    for record, item in decoded:
        claim = claimed_session(record.value) if isinstance(item, MalformedRecord) else None
        key = session_key(item) if isinstance(item, EventBase) else claim.session if claim else None
        if key is not None:
            named.add(key)
    return named


def session_key(event: Event) -> SessionKey:
    return SessionKey(event.tenant, event.session_id)


HELD = "session parked from "


def held_reason(parked: Parked) -> str:
    start = f"seq {parked.from_seq}" if parked.from_seq is not None else "its first unreadable record"
    return f"{HELD}{start}: {parked.reason}"


def triage(decoded: Sequence[Decoded], parked: Mapping[SessionKey, Parked]) -> Triage:
    result, known = Triage(), dict(parked)
    for record, item in sorted(decoded, key=lambda d: (d[0].topic, d[0].partition, d[0].offset)):
        if isinstance(item, MalformedRecord):
            result.set_aside.append(SetAside(record, item.reason))
            claim = claimed_session(record.value)
            if claim is not None and claim.session not in known:
                known[claim.session] = Parked(claim.session, claim.seq, item.reason, record.topic,
                                              record.partition, record.offset)
                result.parked.append(known[claim.session])
            continue
        holding = known.get(session_key(item))
        if holding is not None and holding.holds(item.seq):
            result.set_aside.append(SetAside(record, held_reason(holding)))
        else:
            result.to_store.append((record, item))
    return result
