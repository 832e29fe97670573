"""The hash chain: a valid log verifies, and any change anywhere breaks it at that seq."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

import pydantic
import pytest
from hypothesis import given, strategies as st

from wakeline.log.chain import Draft, canonical_json, compute_hash, first_broken_seq
from wakeline.contract.events import (
    ApprovalDeniedPayload, ApprovalGrantedPayload, ApprovalRequestedPayload, Event, SessionConfig, Usage, parse_event,
)

from tests.factories import new_session_id

from .session_log import conversation

N = 15
Path = tuple[Any, ...]


def leaf_paths(data: Any, prefix: Path = ()) -> list[Path]:
    """Every scalar in an event's JSON, except the discriminator, seq and absent (None) values."""
    if isinstance(data, dict):
        return [p for k, v in data.items() if prefix or k not in ("type", "seq")
                for p in leaf_paths(v, prefix + (k,))]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in leaf_paths(v, prefix + (i,))]
    return [] if data is None else [prefix]


def changed(name: Any, value: Any) -> Any:
    """A different value of the same shape: one flipped bit, one second, or the other literal."""
    if name == "ts":
        return (datetime.fromisoformat(value) + timedelta(seconds=1)).isoformat()
    if name == "trust":
        return "data" if value == "instruction" else "instruction"
    if value is None:
        return "forged-cause"
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    return value[:-1] + chr(ord(value[-1]) ^ 1) if value else "x"


def tamper(event: Event, path: Path) -> Event:
    data = event.model_dump(mode="json")
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = changed(path[-1], target[path[-1]])
    return parse_event(data)


def replaced(events: list[Event], k: int, event: Event) -> list[Event]:
    return events[:k - 1] + [event] + events[k:]


@pytest.mark.parametrize("n", [1, 2, 8, N])
def test_built_chain_verifies(n):
    events = conversation(n, new_session_id())
    assert [e.seq for e in events] == list(range(1, n + 1))
    assert first_broken_seq(events) is None


def test_empty_chain_verifies():
    assert first_broken_seq([]) is None


FIELDS: dict[str, Path] = {
    "payload": ("payload",), "actor": ("actor",), "ts": ("ts",), "prev_hash": ("prev_hash",),
    "causation_id": ("causation_id",), "trust": ("trust",), "event_id": ("event_id",),
    "session_id": ("session_id",), "tenant": ("tenant",), "hash": ("hash",),
}


@pytest.mark.parametrize("k", [1, 2, 4, 6, N])
@pytest.mark.parametrize("field", sorted(FIELDS))
def test_changing_one_field_of_event_k_breaks_chain_at_k(k, field):
    events = conversation(N, new_session_id())
    path = FIELDS[field]
    if field == "payload":
        path = leaf_paths(events[k - 1].model_dump(mode="json")["payload"], ("payload",))[0]
    tampered = replaced(events, k, tamper(events[k - 1], path))
    assert tampered[k - 1] != events[k - 1]
    assert first_broken_seq(tampered) == k


@given(data=st.data())
def test_any_single_value_change_anywhere_breaks_chain_at_its_seq(data):
    events = conversation(N, "sess-hypothesis")
    k = data.draw(st.integers(1, N), label="k")
    path = data.draw(st.sampled_from(leaf_paths(events[k - 1].model_dump(mode="json"))), label="path")
    assert first_broken_seq(replaced(events, k, tamper(events[k - 1], path))) == k


def test_rehashing_a_tampered_event_moves_the_break_to_the_next_seq():
    events = conversation(N, new_session_id())
    forged = tamper(events[3], ("payload", "text"))  # seq 4: the model's first reply
    forged = forged.model_copy(update={"hash": compute_hash(forged)})
    assert first_broken_seq(replaced(events, 4, forged)) == 5


@pytest.mark.parametrize("k", range(1, N))  # removing the newest event is a truncation: undetectable by design
def test_removing_an_event_is_detected_at_its_seq(k):
    events = conversation(N, new_session_id())
    assert first_broken_seq(events[:k - 1] + events[k:]) == k


@pytest.mark.parametrize(("i", "j"), [(1, 2), (3, 4), (2, 9), (14, 15)])
def test_swapping_two_events_is_detected_at_the_earlier_seq(i, j):
    events = conversation(N, new_session_id())
    events[i - 1], events[j - 1] = events[j - 1], events[i - 1]
    assert first_broken_seq(events) == i


def test_event_from_another_session_spliced_in_is_detected():
    events, other = conversation(N, new_session_id()), conversation(N, new_session_id())
    assert first_broken_seq(replaced(events, 7, other[6])) == 7


def test_canonical_json_is_compact_sorted_utf8():
    assert canonical_json({"b": [1, {"z": 1, "a": None}], "a": "é"}) == \
        '{"a":"é","b":[1,{"a":null,"z":1}]}'.encode()


@given(st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=5), st.none())))
def test_canonical_json_ignores_key_order(data):
    assert canonical_json(dict(reversed(list(data.items())))) == canonical_json(data)


def test_sealing_replaces_nul_characters_postgres_cannot_store():
    from datetime import datetime, timezone

    from wakeline.log.chain import Draft, first_broken_seq, seal
    from wakeline.contract.events import GENESIS_HASH, UserMessagePayload

    draft = Draft(payload=UserMessagePayload(text="a\x00b"), actor="user:x", trust="instruction")
    event = seal(draft, session_id="s", tenant="t", seq=1, prev_hash=GENESIS_HASH,
                 ts=datetime(2026, 1, 1, tzinfo=timezone.utc), event_id="00000000-0000-0000-0000-000000000001")
    assert event.payload.text == "a\ufffdb"
    assert first_broken_seq([event]) is None


@pytest.mark.parametrize("text, stored", [("\\u0000 is how JSON writes a NUL", "\\u0000 is how JSON writes a NUL"),
                                          ("a\\\x00b", "a\\\ufffdb"), ("plain", "plain")])
def test_sealing_finds_a_nul_by_the_canonical_bytes_and_leaves_its_spelling_alone(text, stored):
    # The seal looks for a NUL in the canonical JSON (`\u0000`); a backslash before "u0000" in
    # the text is a false alarm that must change nothing.
    from datetime import datetime, timezone

    from wakeline.log.chain import seal
    from wakeline.contract.events import GENESIS_HASH, UserMessagePayload

    draft = Draft(payload=UserMessagePayload(text=text), actor="user:x", trust="instruction")
    event = seal(draft, session_id="s", tenant="t", seq=1, prev_hash=GENESIS_HASH,
                 ts=datetime(2026, 1, 1, tzinfo=timezone.utc), event_id="00000000-0000-0000-0000-000000000001")
    assert event.payload.text == stored
    assert first_broken_seq([event]) is None


def test_a_drafts_type_follows_its_payload_class_even_for_payloads_with_equal_fields():
    drafts = [Draft(payload=cls(tool_call_id="tc-1"), actor="user:x", trust="instruction")
              for cls in (ApprovalRequestedPayload, ApprovalGrantedPayload, ApprovalDeniedPayload)]
    assert [d.type for d in drafts] == ["approval_requested", "approval_granted", "approval_denied"]


def test_a_draft_refuses_a_payload_that_belongs_to_no_event():
    for stranger in (Usage(), SessionConfig()):
        with pytest.raises(pydantic.ValidationError):
            Draft(payload=stranger, actor="user:x", trust="instruction")


# JSON as an event's dump holds it: any text (every plane, control characters, quotes,
# backslashes), any int or float, nesting, keys in any order.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30)


@given(JSON_VALUES)
def test_canonical_json_is_byte_for_byte_what_json_dumps_makes(data):
    # Every stored hash was made with json.dumps; the encoder built once must say the same.
    expected = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8",
                                                                                                   "surrogatepass")
    try:
        assert canonical_json(data) == expected
    except UnicodeEncodeError:  # a lone surrogate: neither can encode it, and seal never sees one (it is JSON)
        with pytest.raises(UnicodeEncodeError):
            json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def test_compute_hash_is_the_hash_of_the_whole_json_form_without_its_hash():
    for event in conversation(40, new_session_id()):
        body = event.model_dump(mode="json")
        body.pop("hash")
        expected = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                             ensure_ascii=False).encode()).hexdigest()
        assert compute_hash(event) == expected == event.hash
