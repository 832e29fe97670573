"""What the archiver refuses at decode: ids, actors, causation ids, tool names and hashes out of bounds."""

from __future__ import annotations

import json

import pytest

from tests.factories import draft, sealed
from tests.unit.session_log import created
from wakeline.log.chain import event_hash
from wakeline.contract.codec import MalformedRecord, encode
from wakeline_archiver.records import Claim, SessionKey, claimed_session, decode_event

EVENT_ID = "3f1c9b2e-8a51-4c1e-9d0f-6b2a7e4c5d10"


def event(**changes):
    tool_call = sealed([created(), draft("tool_call", tool_call_id="c1", name="bash", input={})], "sess-1")[1]
    body = tool_call.model_dump(mode="json") | {"event_id": EVENT_ID} | changes
    body["hash"] = changes.get("hash") or event_hash(body)
    return json.dumps(body).encode()


def test_a_well_formed_event_decodes() -> None:
    assert decode_event(event()).session_id == "sess-1"


@pytest.mark.parametrize("changes, field", [
    ({"session_id": "sess\x00one"}, "session_id"), ({"session_id": "../etc"}, "session_id"),
    ({"tenant": "tenant a"}, "tenant"), ({"actor": "user:al\x00ice"}, "actor"),
    ({"actor": "nobody"}, "actor"), ({"causation_id": "cmd-\x1b[31m"}, "causation_id"),
    ({"causation_id": "c" * 257}, "causation_id"), ({"payload": {"tool_call_id": "c1", "name": "b" * 201,
                                                                  "input": {}}}, "payload.name"),
    ({"hash": "Z" * 64}, "hash"), ({"prev_hash": "0" * 63}, "prev_hash"),
])
def test_fields_out_of_bounds_are_refused_with_their_name(changes, field) -> None:
    with pytest.raises(MalformedRecord, match=f"^{field}: "):
        decode_event(event(**changes))


def test_a_refused_record_still_names_its_session_when_the_ids_are_plain() -> None:
    assert claimed_session(event(actor="x" * 5000)) == Claim(SessionKey("tenant-a", "sess-1"), 2)
    assert claimed_session(event(session_id="sess\x00one")) is None
    assert claimed_session(b"[" * 100_000) is None
    assert claimed_session(b"not json") is None
    assert claimed_session(encode(sealed([created()], "sess-2")[0])).seq == 1
