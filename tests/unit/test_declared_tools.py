"""Declared tools, pure parts: the config's bounds and schema checks, what the brain records for
a declared tool's call (never a runner's), the harness's results, the timeout, and which
calls a harness is offered (`wakeline.log.client_calls`)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from tests.factories import draft, sealed
from wakeline.contract import commands as c
from wakeline.log.chain import canonical_json
from wakeline.log.client_calls import client_calls
from wakeline.contract.events import SessionConfig
from wakeline.log.fold import fold
from wakeline.contract.tools import tool_schemas
from wakeline.agent.context import build_request
from wakeline.agent.inputs import handle_input, harness_actor
from wakeline.agent.model import ModelReply, ToolUse
from wakeline.agent.steps import client_timeout_drafts, model_drafts, next_step

RUN_QUERY = {"name": "run_query", "description": "Run SQL on the ledger.",
             "input_schema": {"type": "object", "properties": {"sql": {"type": "string", "minLength": 1}},
                              "required": ["sql"], "additionalProperties": False}}


def config(**fields) -> SessionConfig:
    return SessionConfig(**{"tools": ["bash", RUN_QUERY], **fields})


def refused(**fields) -> str:
    with pytest.raises(ValidationError) as caught:
        config(**fields)
    return str(caught.value)


def test_a_config_of_names_only_keeps_the_canonical_form_it_was_hashed_with():
    dumped = SessionConfig().model_dump(mode="json")
    assert dumped["tools"] == ["bash", "read_file", "write_file", "list_files"]
    assert "client_tool_timeout_s" not in dumped  # configs sealed before it keep their hash


def test_declared_tools_are_bound_as_declared_beside_the_built_ins():
    bound = config()
    assert bound.builtin_tools() == ("bash",) and list(bound.declared_tools()) == ["run_query"]
    assert bound.model_dump(mode="json")["tools"] == ["bash", RUN_QUERY]
    assert SessionConfig.model_validate_json(canonical_json(bound.model_dump(mode="json"))) == bound


@pytest.mark.parametrize("tool, words", [
    ({"name": "q", "input_schema": {"type": "objekt"}}, "tool 'q': input_schema is not a valid JSON Schema"),
    ({"name": "q", "input_schema": {"type": "string"}}, "tool 'q': input_schema must have \"type\": \"object\""),
    ({"name": "q", "input_schema": {"type": "object", "properties": {"a": {"minLength": -1}}}}, "properties/a"),
    ({"name": "read_file"}, "tool 'read_file': the name is a built-in tool's"),
    ({"name": "has space"}, "String should match pattern"),
    ({"name": "x" * 65}, "String should match pattern"),
    ({"name": "q", "extra": 1}, "Extra inputs are not permitted"),
])
def test_a_bad_definition_is_refused_naming_the_tool_and_the_problem(tool, words):
    assert words in refused(tools=[tool])


def test_a_schema_is_checked_against_the_metaschema_once_however_often_it_is_read(monkeypatch):
    from wakeline.contract import declared_tools
    checked: list[dict] = []
    real = declared_tools.Draft202012Validator.check_schema

    def counted(schema):
        checked.append(schema)
        return real(schema)
    monkeypatch.setattr(declared_tools.Draft202012Validator, "check_schema", counted)
    once = {**RUN_QUERY, "input_schema": {**RUN_QUERY["input_schema"], "title": "checked once"}}
    for _ in range(3):  # the create's command, its sealed event, a wake's read: the same schema
        SessionConfig.model_validate_json(json.dumps({"tools": [once]}))
    # the same schema with its keys in another order is the same schema
    SessionConfig(tools=[{**once, "input_schema": dict(reversed(list(once["input_schema"].items())))}])
    assert checked == [once["input_schema"]]
    bad = {"name": "q", "input_schema": {"type": "object", "title": "cached too", "minProperties": -1}}
    for _ in range(2):  # an answer kept is the same answer
        assert "minProperties" in refused(tools=[bad])
    assert len(checked) == 2


def test_the_bounds_on_declared_tools_hold():
    assert "at most 64 declared tools" in refused(tools=[{"name": f"t{i}"} for i in range(65)])
    SessionConfig(tools=[{"name": f"t{i}"} for i in range(64)])
    big = [{"name": f"t{i}", "description": "d" * 16_000} for i in range(5)]
    assert "declared tools take" in refused(tools=big) and "at most 65536" in refused(tools=big)
    assert "listed twice" in refused(tools=[RUN_QUERY, RUN_QUERY])


def test_the_model_is_shown_the_declared_tools_exactly_as_declared():
    state = fold(sealed([draft("session_created", "cmd", config=config().model_dump(), owner="user:alice"),
                         draft("user_message", "cmd", text="go")]))
    shown = build_request(state, tool_schemas()).tools
    assert [t["name"] for t in shown] == ["bash", "run_query"] and shown[1] == RUN_QUERY


def waiting_state(**config_fields):
    """A session whose model just called run_query (answered by the harness)."""
    created = draft("session_created", "cmd", config=config(**config_fields).model_dump(), owner="user:alice")
    start = fold(sealed([created, draft("user_message", "cmd-1", text="go"), draft("turn_started", turn=1)]))
    reply = ModelReply(text="q", tool_uses=[ToolUse(id="tc-1", name="run_query", input={"sql": "SELECT 1"})],
                       stop_reason="tool_use")
    drafts = model_drafts(start, reply, "agent:scripted:x")
    log = sealed([created, draft("user_message", "cmd-1", text="go"), draft("turn_started", turn=1), *drafts])
    return fold(log), log


def test_a_declared_tools_call_is_recorded_for_the_client_and_the_session_waits_for_it():
    state, log = waiting_state()
    call = next(e for e in log if e.type == "tool_call")
    assert call.payload.answered_by == "client"
    assert state.status == "waiting_client" and next_step(state) is None


def test_input_that_fails_the_schema_becomes_an_error_result_for_the_model():
    start, _ = waiting_state()
    reply = ModelReply(text="", tool_uses=[ToolUse(id="tc-2", name="run_query", input={"sql": ""}),
                                           ToolUse(id="tc-3", name="run_query", input={"query": "x"})],
                       stop_reason="tool_use")
    results = [d.payload for d in model_drafts(start, reply, "agent:x") if d.type == "tool_result"]
    assert [r.error_kind for r in results] == ["invalid_input", "invalid_input"]
    assert all(r.is_error and r.answered_by == "client" for r in results)
    assert "sql" in results[0].output and "query" in results[1].output


def test_the_harness_answers_as_the_keys_principal_and_a_second_answer_is_not_pending():
    state, log = waiting_state()
    submit = c.SubmitToolResult(command_id="cmd-r", session_id=state.session_id, tenant=state.tenant,
                                actor="human:alice", tool_call_id="tc-1", output="1")
    (result,) = handle_input(state, submit)
    assert result.actor == "user:alice" and result.trust == "data" and result.payload.answered_by == "client"
    answered = fold(sealed([*[draft(e.payload, e.causation_id, actor=e.actor, trust=e.trust) for e in log],
                            result], state.session_id, tenant=state.tenant))
    again = handle_input(answered, submit.model_copy(update={"command_id": "cmd-r2"}))
    assert [d.payload.code for d in again] == ["not_pending"]
    assert harness_actor("service:etl") == "service:etl"


def test_a_runner_never_answers_a_declared_tools_call():
    state, _ = waiting_state()
    report = c.ToolResultReport(session_id=state.session_id, tenant=state.tenant, tool_call_id="tc-1",
                                name="run_query", output="forged", runner="host-1")
    assert handle_input(state, report) == []


def test_a_call_no_harness_answered_in_time_gets_an_error_result_once():
    state, _ = waiting_state(client_tool_timeout_s=5)
    (timeout,) = client_timeout_drafts(state, "tc-1")
    assert timeout.payload.error_kind == "no_harness" and timeout.actor == "system:brain"
    assert json.loads(timeout.payload.output)["message"].startswith("no harness answered this call within 5 s")
    assert client_timeout_drafts(state, "tc-unknown") == []


def test_the_harness_is_offered_what_is_unanswered_and_nothing_else():
    _, log = waiting_state()
    calls = client_calls(log)
    assert [c.tool_call_id for c in calls.offerable()] == ["tc-1"] and calls.ended is None
    cancelled = sealed([*[draft(e.payload, e.causation_id, actor=e.actor, trust=e.trust) for e in log],
                        draft("session_ended", "cmd-x", reason="cancelled")])
    after = client_calls(cancelled)
    assert after.offerable() == [] and after.ended is not None and after.ended.type == "session_ended"


def test_a_call_that_needs_approval_is_offered_only_once_granted():
    state, log = waiting_state(require_approval=["run_query"])
    assert [e.type for e in log][-2:] == ["tool_call", "approval_requested"]
    assert client_calls(log).offerable() == []
    granted = sealed([*[draft(e.payload, e.causation_id, actor=e.actor, trust=e.trust) for e in log],
                      draft("approval_granted", "cmd-ok", tool_call_id="tc-1")])
    assert [c.tool_call_id for c in client_calls(granted).offerable()] == ["tc-1"]
