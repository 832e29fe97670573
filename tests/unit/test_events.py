"""Event models: every type survives JSON, is frozen, and rejects what it does not know."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from wakeline.log.chain import compute_hash, seal
from wakeline.contract.codec import encode
from wakeline.contract.events import (
    EVENT_CLASSES, GENESIS_HASH, MARKER_TYPES, PAYLOAD_CLASSES, Event, is_marker, parse_event,
)

from tests.factories import T0, TENANT, draft, new_session_id

# A representative payload per event type; a new type without a sample fails the coverage test.
SAMPLE_PAYLOADS: dict[str, dict] = {
    "session_created": {"config": {"model": "scripted:x", "require_approval": ["bash"]},
                        "owner": "user:alice", "title": "t", "parent_session_id": "p", "fork_seq": 3},
    "user_message": {"text": "héllo ✓", "queued": True},
    "message_queued": {"command_id": "cmd-9", "text": "later"},
    "turn_started": {"turn": 1},
    "model_turn": {"text": "ok", "reasoning": ["think"], "usage": {"input_tokens": 5, "output_tokens": 2},
                   "stop_reason": "tool_use", "tool_call_ids": ["tc-1"]},
    "tool_call": {"tool_call_id": "tc-1", "name": "bash", "input": {"cmd": "ls", "n": [1, 2.5, None]}},
    "approval_requested": {"tool_call_id": "tc-1", "reason": "bash needs approval"},
    "approval_granted": {"tool_call_id": "tc-1"},
    "approval_denied": {"tool_call_id": "tc-1", "reason": "no"},
    "tool_result": {"tool_call_id": "tc-1", "name": "bash", "output": "x", "is_error": True,
                    "error_kind": "timeout", "duration_ms": 30000},
    "compaction": {"summary": "s", "covered_from_seq": 1, "covered_to_seq": 4,
                   "tokens_before": 900, "tokens_after": 100},
    "turn_ended": {"turn": 1, "stop_reason": "max_tokens"},
    "session_ended": {"reason": "interrupted", "detail": "SIGTERM"},
    "woke": {"host": "brain-2", "reason": "rebalance", "from_seq": 7},
    "takeover": {"by": "human:bob"},
    "handback": {"by": "human:bob"},
    "title_generated": {"title": "Listing files"},
    "file_reference": {"path": "src/a.py", "tool_call_id": "tc-1"},
    "input_rejected": {"command_id": "cmd-4", "reason": "stale expected_seq", "expected_seq": 2},
    "deleted": {"by": "user:alice", "reason": "gdpr"},
    "forked": {"parent_session_id": "sess-p", "fork_seq": 4, "parent_hash": "cd" * 32,
               "config": {"model": "scripted:x"}, "owner": "user:alice", "title": "t"},
    "snapshot": {"state": {"last_seq": 6, "seen_inputs": ["cmd-1"], "messages": [{"role": "user", "seq": 2}]},
                 "state_hash": "ab" * 32, "format": "1.0123456789ab"},
    "model_unavailable": {"error": "OverloadedError: 529", "attempt": 2, "retry_in_s": 4.0},
    "turn_queued": {"turn": 2, "running": 3, "limit": 3},
    "budget_changed": {"budget": {"usd": 2.5, "output_tokens": 9000}, "previous": {"usd": 1.0},
                       "price": {"input_usd_per_mtok": 3, "output_usd_per_mtok": 15}},
}


def sample_event(type_: str) -> Event:
    sample = draft(type_, "cause-1", actor="system:test", trust="data", **SAMPLE_PAYLOADS[type_])
    return seal(sample, session_id=new_session_id(), tenant=TENANT, seq=1, prev_hash=GENESIS_HASH,
                ts=T0, event_id="ev-1")


ALL_TYPES = sorted(EVENT_CLASSES)


def test_samples_cover_every_event_type():
    assert set(SAMPLE_PAYLOADS) == set(PAYLOAD_CLASSES) == set(EVENT_CLASSES)


@pytest.mark.parametrize("type_", ALL_TYPES)
def test_every_event_type_round_trips_through_json_with_its_hash(type_):
    event = sample_event(type_)
    decoded = parse_event(encode(event))
    assert type(decoded) is EVENT_CLASSES[type_]
    assert decoded == event
    assert compute_hash(decoded) == event.hash
    assert decoded.payload == PAYLOAD_CLASSES[type_](**SAMPLE_PAYLOADS[type_])


def _sealed_the_long_way(sample, ts) -> Event:
    """What sealing was before issue 35 cut it to one validation: validate with an empty hash,
    then hash the event's own dump. The seal must give the same event and bytes."""
    body = {"session_id": "sess-1", "seq": 1, "event_id": "ev-1", "causation_id": sample.causation_id,
            "tenant": TENANT, "actor": sample.actor, "trust": sample.trust, "ts": ts, "prev_hash": GENESIS_HASH,
            "hash": "", "type": sample.type, "payload": sample.payload.model_dump(mode="json")}
    unhashed = parse_event(body)
    return unhashed.model_copy(update={"hash": compute_hash(unhashed)})


@pytest.mark.parametrize("type_", ALL_TYPES)
@pytest.mark.parametrize("ts", [T0, datetime(2026, 12, 6, 17, 3, 4, 123456, tzinfo=timezone.utc),
                                datetime(2026, 12, 6, 19, 3, 4, 5, tzinfo=timezone(timedelta(hours=2))),
                                datetime(2026, 12, 6, 17, 3, 4, 999999)])
def test_sealing_gives_the_event_and_hash_the_long_way_gave(type_, ts):
    sample = draft(type_, "cause-1", actor="system:test", trust="data", **SAMPLE_PAYLOADS[type_])
    sealed = seal(sample, session_id="sess-1", tenant=TENANT, seq=1, prev_hash=GENESIS_HASH, ts=ts, event_id="ev-1")
    long_way = _sealed_the_long_way(sample, ts)
    assert sealed == long_way
    assert sealed.hash == long_way.hash == compute_hash(sealed)
    assert encode(sealed) == encode(long_way)


@pytest.mark.parametrize("type_", ALL_TYPES)
def test_event_decodes_from_a_plain_dict(type_):
    event = sample_event(type_)
    assert parse_event(event.model_dump(mode="json")) == event


def test_ts_is_rendered_as_utc_with_z():
    assert b'"ts":"2025-01-01T12:00:00Z"' in encode(sample_event("user_message"))


@pytest.mark.parametrize("type_", ALL_TYPES)
@pytest.mark.parametrize("field", ["actor", "seq", "hash", "payload"])
def test_events_are_frozen(type_, field):
    with pytest.raises(ValidationError, match="frozen"):
        setattr(sample_event(type_), field, "changed")


@pytest.mark.parametrize("type_", ALL_TYPES)
def test_payloads_are_frozen(type_):
    payload = sample_event(type_).payload
    with pytest.raises(ValidationError, match="frozen"):
        setattr(payload, next(iter(type(payload).model_fields)), None)


def test_unknown_type_is_rejected():
    data = sample_event("user_message").model_dump(mode="json") | {"type": "user_shouted"}
    with pytest.raises(ValidationError, match="user_shouted"):
        parse_event(data)


def test_extra_top_level_field_is_rejected():
    data = sample_event("turn_started").model_dump(mode="json") | {"priority": 1}
    with pytest.raises(ValidationError, match="priority"):
        parse_event(data)


def test_extra_payload_field_is_rejected():
    data = sample_event("turn_started").model_dump(mode="json")
    data["payload"]["colour"] = "red"
    with pytest.raises(ValidationError, match="colour"):
        parse_event(data)


def test_payload_of_another_type_is_rejected():
    data = sample_event("user_message").model_dump(mode="json")
    data["payload"] = SAMPLE_PAYLOADS["tool_call"]
    with pytest.raises(ValidationError):
        parse_event(data)


def test_trust_outside_instruction_and_data_is_rejected():
    data = sample_event("user_message").model_dump(mode="json") | {"trust": "trusted"}
    with pytest.raises(ValidationError, match="trust"):
        parse_event(data)


@pytest.mark.parametrize("type_", ALL_TYPES)
def test_is_marker_exactly_for_marker_types(type_):
    assert is_marker(sample_event(type_)) == (type_ in MARKER_TYPES)


def test_marker_types_are_event_types_and_include_the_designed_markers():
    assert MARKER_TYPES <= set(EVENT_CLASSES)
    assert {"turn_started", "turn_ended", "woke", "title_generated", "file_reference"} <= MARKER_TYPES
