"""Canonical JSON and the per-session SHA-256 hash chain.

The hash of an event covers every field but `hash` itself, so a changed byte anywhere
(payload, actor, ts, prev_hash) breaks the chain at that seq. Canonical means: keys
sorted, no insignificant whitespace, UTF-8, and the pydantic JSON rendering of values
(datetimes in ISO-8601 with `Z`), so any host and any replay produce the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Iterable

from pydantic import TypeAdapter, model_validator

from wakeline.contract.events import (
    EVENT_TYPE_OF_PAYLOAD, GENESIS_HASH, Event, Frozen, Payload, Trust, parse_event,
)


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
# The C encoder `json.dumps` builds on every call (`JSONEncoder.iterencode`, one-shot), built
# once: the same function over the same options, so the same bytes, without ~2.5 us of set-up
# per event (6.7 -> 4.3 us for a tool result's body; issue 10). Without the C accelerator, dumps.
_C_ENCODE = (json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, _CANONICAL.default, json.encoder.encode_basestring, _CANONICAL.indent, _CANONICAL.key_separator,
    _CANONICAL.item_separator, _CANONICAL.sort_keys, _CANONICAL.skipkeys, _CANONICAL.allow_nan)
    if json.encoder.c_make_encoder is not None else None)  # type: ignore[attr-defined]


_TS: TypeAdapter[datetime] = TypeAdapter(datetime)  # an event's `ts` as its JSON dump renders it


def canonical_json(data: Any) -> bytes:
    if _C_ENCODE is None or isinstance(data, str):  # a bare string: the one-shot path encodes it alone
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return "".join(_C_ENCODE(data, 0)).encode()


def event_hash(event_without_hash: dict[str, Any]) -> str:
    body = {k: v for k, v in event_without_hash.items() if k != "hash"}
    return hashlib.sha256(canonical_json(body)).hexdigest()


def compute_hash(event: Event) -> str:
    """`event_hash` of the event's JSON form; the same bytes, without dumping `hash` only to drop it."""
    return hashlib.sha256(canonical_json(event.model_dump(mode="json", exclude={"hash"}))).hexdigest()


def first_broken_seq(events: Iterable[Event]) -> int | None:
    """The seq of the first event whose order, link or hash is wrong; None if the chain holds."""
    prev_hash, expected_seq = GENESIS_HASH, 1
    for event in events:
        if event.seq != expected_seq or event.prev_hash != prev_hash or compute_hash(event) != event.hash:
            return expected_seq
        prev_hash, expected_seq = event.hash, expected_seq + 1
    return None


class Draft(Frozen):
    """An event before the brain sequences it: everything but identity, order and hash.

    Its type follows from the payload's class (one class per type), so a payload cannot
    be sealed under a type it does not belong to.
    """

    payload: Payload
    actor: str
    trust: Trust
    causation_id: str | None = None

    @model_validator(mode="after")
    def _one_of_the_event_payloads(self) -> "Draft":
        if type(self.payload) not in EVENT_TYPE_OF_PAYLOAD:
            raise ValueError(f"{type(self.payload).__name__} is not an event payload")
        return self

    @property
    def type(self) -> str:
        return EVENT_TYPE_OF_PAYLOAD[type(self.payload)]


def seal(draft: Draft, *, session_id: str, tenant: str, seq: int, prev_hash: str,
         ts: datetime, event_id: str) -> Event:
    """Turns a draft into the event at `seq`, linked to `prev_hash`. Pure: ids and time come in.

    The hash is taken from the body as JSON (the payload's dump, the time as pydantic renders
    it), and the event validated once, with its hash: the same bytes `compute_hash` reads back
    from the event, without dumping the event again and copying it (issue 35: a step's five
    seals 245 -> ~195 us). They are the same because an event's dump, validated and dumped again, is itself,
    which `verify` has always relied on for every stored event."""
    body = {
        "session_id": session_id, "seq": seq, "event_id": event_id,
        "causation_id": draft.causation_id, "tenant": tenant, "actor": draft.actor,
        "trust": draft.trust, "ts": _TS.dump_python(ts, mode="json"), "prev_hash": prev_hash,
        "type": draft.type, "payload": draft.payload.model_dump(mode="json"),
    }
    canonical = canonical_json(body)
    if b"\\u0000" in canonical:  # a NUL somewhere in the payload (or a false alarm: a backslash before "u0000")
        body["payload"] = _storable(body["payload"])
        canonical = canonical_json(body)
    body["hash"] = hashlib.sha256(canonical).hexdigest()
    return parse_event(body)


def _storable(value: Any) -> Any:
    """Postgres text and jsonb cannot hold U+0000; it becomes U+FFFD before the event exists,
    so the hash covers exactly what is stored."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {k: _storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_storable(v) for v in value]
    return value
