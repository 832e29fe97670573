"""Commands and runner records: each parses, and a malformed one is refused with a reason."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import ValidationError

from wakeline.contract.codec import MalformedRecord, decode, encode
from wakeline.contract.commands import (
    Command, CreateSession, ToolCallRequest, ToolResultReport, parse_command,
)

EXTRA_FIELDS = {
    "create_session": {"message": "hi", "title": "t", "fork_of": {"session_id": "sess-p", "seq": 4},
                       "config": {"model": "scripted:x", "max_turns": 3}},
    "post_message": {"text": "hello"},
    "approve_tool_call": {"tool_call_id": "tc-1"},
    "deny_tool_call": {"tool_call_id": "tc-1", "reason": "no"},
    "cancel_session": {},
    "wake_session": {},
    "delete_session": {"reason": "gdpr"},
    "take_over": {},
    "hand_back": {},
    "submit_tool_result": {"tool_call_id": "tc-1", "output": "done", "is_error": True},
}
COMMAND_CLASSES = {cls.model_fields["type"].default: cls for cls in get_args(get_args(Command)[0])}


def command(type_: str, **overrides) -> dict:
    return {"type": type_, "command_id": "cmd-1", "session_id": "sess-1", "actor": "user:alice",
            **EXTRA_FIELDS[type_], **overrides}


def test_samples_cover_every_command_type():
    assert set(EXTRA_FIELDS) == set(COMMAND_CLASSES)


@pytest.mark.parametrize("type_", sorted(EXTRA_FIELDS))
def test_each_command_type_parses_from_dict_and_json(type_):
    parsed = parse_command(command(type_))
    assert type(parsed) is COMMAND_CLASSES[type_]
    assert parse_command(encode(parsed)) == parsed


def test_command_defaults_are_filled_in():
    parsed = parse_command({"type": "wake_session", "command_id": "c", "session_id": "s"})
    assert (parsed.tenant, parsed.actor, parsed.expected_seq) == ("default", "user:anonymous", None)


def test_create_session_binds_the_given_config():
    parsed = parse_command(command("create_session"))
    assert isinstance(parsed, CreateSession)
    assert (parsed.config.max_turns, parsed.fork_of.seq) == (3, 4)


@pytest.mark.parametrize(("data", "field"), [
    (command("post_message", text=""), "text"),
    ({k: v for k, v in command("post_message").items() if k != "text"}, "text"),
    (command("approve_tool_call", tool_call_id=""), "tool_call_id"),
    (command("post_message", actor="alice"), "actor"),
    (command("post_message", expected_seq=-1), "expected_seq"),
    (command("post_message", session_id=""), "session_id"),
    (command("create_session", config={"max_turns": 0}), "max_turns"),
    (command("create_session", fork_of={"session_id": "p", "seq": 0}), "seq"),
    (command("post_message", urgent=True), "urgent"),
])
def test_malformed_command_is_refused_naming_the_field(data, field):
    with pytest.raises(ValidationError, match=field):
        parse_command(data)


@pytest.mark.parametrize(("value", "reason"), [
    (b"{not json", "Invalid JSON"),
    (b"\xff\xfe", "Invalid JSON"),
    (b"[1, 2]", "object"),
    (b'{"type": "explode", "command_id": "c", "session_id": "s"}', "explode"),
    (b'{"type": "post_message", "command_id": "c", "session_id": "s"}', "post_message.text: Field required"),
    (b'{"type": "post_message", "command_id": "c", "session_id": "s", "text": null}', "text"),
    (None, "tombstone"),
])
def test_decode_raises_malformed_record_with_a_reason(value, reason):
    with pytest.raises(MalformedRecord) as caught:
        decode(value, parse_command)
    assert reason in caught.value.reason and str(caught.value) == caught.value.reason


def test_runner_records_round_trip_through_the_codec():
    request = ToolCallRequest(session_id="s", tenant="t", tool_call_id="tc-1", name="bash",
                              input={"cmd": "ls"}, causation_seq=5)
    report = ToolResultReport(session_id="s", tenant="t", tool_call_id="tc-1", name="bash",
                              output="a.txt", runner="runner:host-1", duration_ms=12)
    assert decode(encode(request), ToolCallRequest.model_validate_json) == request
    assert decode(encode(report), ToolResultReport.model_validate_json) == report


def test_runner_record_missing_a_field_is_malformed():
    with pytest.raises(MalformedRecord, match="runner"):
        decode(b'{"session_id": "s", "tenant": "t", "tool_call_id": "x", "name": "n", "output": ""}',
               ToolResultReport.model_validate_json)
