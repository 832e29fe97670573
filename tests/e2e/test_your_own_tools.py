"""Declared tools answered by the session's own stateless harness, through four separate
processes on real Kafka and Postgres: the stream, the results, re-issue after a drop, the
races, the timeouts, cancel, other tenants, forks, and a brain or gateway killed mid-call."""

from __future__ import annotations

import json
import threading

import httpx

from tests.e2e.harness_http import LOOKUP, RUN_QUERY, answer, create_with_tools, session_stream
from tests.e2e.sessions import session_status, wait_ended, wait_for
from tests.e2e.stored_log import assert_log_whole


def waiting(client: httpx.Client, sid: str, n: int) -> dict | bool:
    s = session_status(client, sid)
    return s if s and s["status"] == "waiting_client" and len(s["pending_client_calls"]) == n else False


def test_a_declared_tool_is_answered_by_the_harness_and_never_by_a_runner(stack, client):
    sid = create_with_tools(client, "harness", ["bash", RUN_QUERY, LOOKUP])
    with session_stream(stack.url, stack.headers, sid) as stream:
        (first,) = stream.calls(1)
        assert first["name"] == "run_query" and first["input"] == {"sql": "SELECT month, revenue FROM ledger"}
        session = wait_for(lambda: waiting(client, sid, 1), 30, "the session to wait for its harness", stack)
        assert session["pending_client_calls"] == [first["tool_call_id"]]
        done = answer(client, sid, first["tool_call_id"], '[{"month": "Jan", "revenue": 8412000}]')
        assert done.status_code == 200 and done.json()["outcome"] == "tool_result", done.text
        pair = stream.calls(2)  # two calls in one reply are pending together
        assert sorted(c["name"] for c in pair) == ["lookup", "run_query"]
        wait_for(lambda: waiting(client, sid, 2), 30, "both calls to be pending", stack)
        for call in pair:
            assert answer(client, sid, call["tool_call_id"], f"answer to {call['name']}").status_code == 200
        kind, body = stream.next()
        assert kind == "session_ended" and body["reason"] == "completed", (kind, body)
    wait_ended(client, stack, sid)  # the stream hears the end from the feed, before the archive has it
    events = assert_log_whole(sid)
    calls = [e for e in events if e.type == "tool_call"]
    results = [e for e in events if e.type == "tool_result"]
    assert len(calls) == 3 and all(c.payload.answered_by == "client" for c in calls)
    assert len(results) == 3 and {r.actor for r in results} == {"user:local"}
    assert all(r.trust == "data" and r.payload.answered_by == "client" for r in results)
    created = events[0].payload.config
    assert [t if isinstance(t, str) else t.model_dump() for t in created.tools] == ["bash", RUN_QUERY, LOOKUP]
    assert "answer to" in [e for e in events if e.type == "model_turn"][-1].payload.text


def test_transcript_console_feed_and_audit_show_client_calls_and_who_answered_them(stack, client, auditor):
    sid = create_with_tools(client, "harness", [RUN_QUERY, LOOKUP])
    with session_stream(stack.url, stack.headers, sid) as stream:
        for call in stream.calls(1):
            answer(client, sid, call["tool_call_id"], "ledger rows")
        for call in stream.calls(2):
            answer(client, sid, call["tool_call_id"], "more rows")
    wait_ended(client, stack, sid)
    markdown = client.get(f"/v1/sessions/{sid}/transcript", params={"format": "markdown"}).text
    assert "run_query" in markdown and "for the harness" in markdown and "user:local" in markdown, markdown[:3000]
    audit = auditor.get("/v1/audit/events", params={"tool": "lookup", "session_id": sid}).json()["data"]
    assert [(e["type"], e["actor"]) for e in audit] == [("tool_call", "agent:scripted:harness"),
                                                       ("tool_result", "user:local")], audit
    assert audit[0]["payload"]["answered_by"] == "client"


def test_a_harness_that_drops_mid_call_gets_the_same_call_again_and_it_is_recorded_once(stack, client):
    sid = create_with_tools(client, "harness", [RUN_QUERY, LOOKUP])
    with session_stream(stack.url, stack.headers, sid) as first_harness:
        (issued,) = first_harness.calls(1)
    # the first harness is gone without answering (as a kill -9 leaves it); a fresh one wakes
    with session_stream(stack.url, stack.headers, sid) as second_harness:
        (again,) = second_harness.calls(1)
        assert again == issued  # the harness cannot tell a re-issue from the first issue
        first = answer(client, sid, again["tool_call_id"], "rows")
        assert first.status_code == 200, first.text
        retry = answer(client, sid, again["tool_call_id"], "rows")  # a retry after a lost response
        assert retry.status_code == 200 and retry.json()["seq"] == first.json()["seq"], retry.text
        other = answer(client, sid, again["tool_call_id"], "other rows")  # a second harness racing
        assert other.status_code == 409 and other.json()["code"] == "tool_call_already_answered", other.text
        for call in second_harness.calls(2):
            assert answer(client, sid, call["tool_call_id"], "ok").status_code == 200
    wait_ended(client, stack, sid)
    # a reconnect after the answers issues none of them again: the stream ends at once
    with session_stream(stack.url, stack.headers, sid) as late:
        kind, body = late.next()
        assert kind == "session_ended", (kind, body)
    results = [e for e in assert_log_whole(sid) if e.type == "tool_result"]
    assert [r.payload.tool_call_id for r in results].count(issued["tool_call_id"]) == 1
    assert next(r for r in results if r.payload.tool_call_id == issued["tool_call_id"]).payload.output == "rows"


def test_two_harnesses_racing_on_one_call_leave_one_recorded_result(stack, client):
    sid = create_with_tools(client, "harness", [RUN_QUERY, LOOKUP])
    with session_stream(stack.url, stack.headers, sid) as first, \
            session_stream(stack.url, stack.headers, sid) as second:
        (call,) = first.calls(1)
        assert second.calls(1) == [call]  # both harnesses are offered the call
        answers = {}

        def post(name: str) -> None:
            with httpx.Client(base_url=stack.url, headers=stack.headers, timeout=30) as own:
                answers[name] = answer(own, sid, call["tool_call_id"], f"rows from {name}")
        racers = [threading.Thread(target=post, args=(name,)) for name in ("first", "second")]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()
        statuses = sorted(r.status_code for r in answers.values())
        assert statuses == [200, 409], {k: (r.status_code, r.text) for k, r in answers.items()}
        winner = next(name for name, r in answers.items() if r.status_code == 200)
        loser = answers["second" if winner == "first" else "first"]
        assert loser.json()["code"] == "tool_call_already_answered"
        client.post(f"/v1/sessions/{sid}/cancel")
    wait_ended(client, stack, sid)
    results = [e for e in assert_log_whole(sid) if e.type == "tool_result"]
    assert [r.payload.output for r in results if r.payload.tool_call_id == call["tool_call_id"]] == \
        [f"rows from {winner}"]


def test_results_for_unknown_and_built_in_calls_are_refused_with_their_codes(stack, client):
    sid = create_with_tools(client, "harness", [RUN_QUERY, LOOKUP])
    with session_stream(stack.url, stack.headers, sid) as stream:
        (call,) = stream.calls(1)
        unknown = answer(client, sid, "toolu_never_made", "x")
        assert unknown.status_code == 404 and unknown.json()["code"] == "unknown_tool_call", unknown.text
        assert answer(client, sid, call["tool_call_id"], "ok").status_code == 200
        client.post(f"/v1/sessions/{sid}/cancel")
    tools3 = client.post("/v1/sessions", json={"message": "go", "config": {"model": "scripted:tools3"}}).json()
    ended = wait_ended(client, stack, tools3["session_id"])
    built_in = client.get(f"/v1/sessions/{ended['session_id']}/events", params={"type": "tool_call"}).json()["data"]
    refused = answer(client, ended["session_id"], built_in[0]["payload"]["tool_call_id"], "x")
    assert refused.status_code == 409 and refused.json()["code"] in ("not_pending", "tool_call_already_answered")


def test_bad_tool_definitions_are_a_422_naming_the_tool_and_the_problem(client):
    cases = [
        ({"name": "q", "input_schema": {"type": "objekt"}}, "'q'"),
        ({"name": "q", "input_schema": {"type": "string"}}, "object"),
        ({"name": "bash", "input_schema": {"type": "object"}}, "built-in"),
        ({"name": "no spaces", "input_schema": {"type": "object"}}, "pattern"),
    ]
    for tool, words in cases:
        response = client.post("/v1/sessions", json={"message": "x", "config": {"tools": [tool]}})
        assert response.status_code == 422, response.text
        assert words in json.dumps(response.json()), (tool, response.json())
    many = [{"name": f"t{i}", "input_schema": {"type": "object"}} for i in range(65)]
    response = client.post("/v1/sessions", json={"message": "x", "config": {"tools": many}})
    assert response.status_code == 422 and "at most 64" in response.text, response.text


def test_model_input_that_fails_the_schema_is_an_error_result_and_the_session_goes_on(stack, client):
    sid = create_with_tools(client, "badinput", [RUN_QUERY])
    with session_stream(stack.url, stack.headers, sid) as stream:
        (call,) = stream.calls(1)  # only the good call reaches the harness
        assert call["input"] == {"sql": "SELECT 1"}
        assert answer(client, sid, call["tool_call_id"], "1").status_code == 200
    wait_ended(client, stack, sid)
    results = [e for e in assert_log_whole(sid) if e.type == "tool_result"]
    refused = results[0].payload
    assert refused.is_error and refused.error_kind == "invalid_input" and "sql" in refused.output
    assert results[0].actor == "system:brain"


def test_cancel_ends_the_wait_and_the_stream(stack, client):
    sid = create_with_tools(client, "harness", [RUN_QUERY, LOOKUP])
    with session_stream(stack.url, stack.headers, sid) as stream:
        (call,) = stream.calls(1)
        assert client.post(f"/v1/sessions/{sid}/cancel").status_code == 200
        kind, body = stream.next()
        assert kind == "session_ended" and body["reason"] == "cancelled", (kind, body)
    late = answer(client, sid, call["tool_call_id"], "too late")
    assert late.status_code == 409, late.text
    assert session_status(client, sid)["pending_client_calls"] == []


def test_a_call_no_harness_answers_times_out_into_an_error_result(stack, client):
    sid = create_with_tools(client, "harness", [RUN_QUERY, LOOKUP], client_tool_timeout_s=1.0,
                            max_turns=2)
    wait_ended(client, stack, sid, timeout=60)
    results = [e for e in assert_log_whole(sid) if e.type == "tool_result"]
    assert results and all(r.payload.is_error and r.payload.error_kind == "no_harness" for r in results)
    assert "no harness answered" in results[0].payload.output


def test_another_tenants_session_is_not_found_on_the_stream_or_the_results(stack, client):
    sid = create_with_tools(client, "harness", [RUN_QUERY, LOOKUP])
    other = {"Authorization": f"Bearer {stack.api_key('intruder', 'service', tenant='other')}"}
    with httpx.Client(base_url=stack.url, headers=other, timeout=30) as stranger:
        assert stranger.get(f"/v1/sessions/{sid}/tool-calls/stream").status_code == 404
        assert answer(stranger, sid, "toolu_x", "x").status_code == 404
    client.post(f"/v1/sessions/{sid}/cancel")


def test_a_fork_after_a_client_result_reuses_it(stack, client):
    sid = create_with_tools(client, "harness", [RUN_QUERY, LOOKUP])
    with session_stream(stack.url, stack.headers, sid) as stream:
        (call,) = stream.calls(1)
        assert answer(client, sid, call["tool_call_id"], "ledger rows").status_code == 200
        stream.calls(2)
        result_seq = wait_for(lambda: next((e["seq"] for e in client.get(
            f"/v1/sessions/{sid}/events", params={"type": "tool_result"}).json()["data"]), None),
            30, "the answer to be archived", stack)
        client.post(f"/v1/sessions/{sid}/cancel")
    fork = client.post(f"/v1/sessions/{sid}/fork", json={"at_seq": result_seq, "message": "summarise"})
    assert fork.status_code == 201, fork.text
    fork_id = fork.json()["session_id"]
    # The fork's history holds the harness's answer (read from the parent, never copied), and
    # nothing the fork offers its harness is the call answered before the fork point.
    with session_stream(stack.url, stack.headers, fork_id) as stream:
        kind, body = stream.next()
        assert kind == "tool_call" and body["tool_call_id"] != call["tool_call_id"], (kind, body)
        assert body["seq"] > result_seq
    client.post(f"/v1/sessions/{fork_id}/cancel")
    transcript = client.get(f"/v1/sessions/{fork_id}/transcript", params={"format": "json"})
    assert transcript.status_code == 200 and "ledger rows" in transcript.text, transcript.text[:2000]
