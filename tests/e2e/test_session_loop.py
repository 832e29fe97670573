"""A session through four separate processes on real Kafka and Postgres."""

from __future__ import annotations

import json

from tests.e2e.sessions import create_session, wait_ended, wait_for
from tests.e2e.stack import sandbox_work
from tests.e2e.stored_log import assert_log_whole


def test_session_with_several_tool_calls_completes_and_is_stored_once_in_order(stack, client):
    sid = create_session(client, "tools3")
    session = wait_ended(client, stack, sid)
    assert session["ended_reason"] == "completed"
    events = assert_log_whole(sid)
    types = [e.type for e in events]
    assert types.count("tool_call") == 3 and types.count("tool_result") == 3
    assert all(not e.payload.is_error for e in events if e.type == "tool_result"), \
        [e.payload for e in events if e.type == "tool_result"]
    assert (sandbox_work(stack, sid) / "a.txt").read_text() == "alpha\nbeta\n"
    bash = next(json.loads(e.payload.output) for e in events if e.type == "tool_result" and e.payload.name == "bash")
    assert bash["exit_code"] == 0 and bash["stdout"].strip() == "2", bash  # the tool reads by absolute path
    final = [e for e in events if e.type == "model_turn"][-1]
    assert final.payload.text.startswith("Done:") and "a.txt" in final.payload.text
    assert session["last_seq"] == events[-1].seq


def test_the_demo_policy_writes_and_runs_a_script_in_its_sandbox(stack, client):
    sid = create_session(client, "demo")
    assert wait_ended(client, stack, sid)["ended_reason"] == "completed"
    events = assert_log_whole(sid)
    run = [json.loads(e.payload.output) for e in events if e.type == "tool_result" and e.payload.name == "bash"]
    assert run and run[0]["exit_code"] == 0 and "the: 5" in run[0]["stdout"], run
    assert "the: 5" in [e for e in events if e.type == "model_turn"][-1].payload.text


def test_events_read_by_position_give_the_lead_up_before_a_seq(stack, client):
    sid = create_session(client, "tools3")
    wait_ended(client, stack, sid)
    calls = client.get(f"/v1/sessions/{sid}/events", params={"type": "tool_call"}).json()["data"]
    target = calls[-1]["seq"]
    lead_up = client.get(f"/v1/sessions/{sid}/events", params={"before": target, "limit": 3}).json()["data"]
    assert [e["seq"] for e in lead_up] == [target - 3, target - 2, target - 1]


def test_continuing_a_finished_session_with_a_stale_expected_seq_is_a_409(stack, client):
    sid = create_session(client, "tools3")
    session = wait_ended(client, stack, sid)
    stale = client.post(f"/v1/sessions/{sid}/messages", json={"text": "more", "expected_seq": 1})
    assert stale.status_code == 409, stale.text
    # the refusal is itself recorded (input_rejected), so the session moved on
    now = wait_for(lambda: (s := client.get(f"/v1/sessions/{sid}").json())["last_seq"] > session["last_seq"] and s,
                   30, "the refusal to be recorded", stack)
    fresh = client.post(f"/v1/sessions/{sid}/messages", json={"text": "more", "expected_seq": now["last_seq"]})
    assert fresh.status_code == 202, fresh.text
    wait_for(lambda: (client.get(f"/v1/sessions/{sid}").json()["last_seq"] > session["last_seq"] + 3),
             60, "the continuation to run", stack)
    wait_ended(client, stack, sid)
    assert_log_whole(sid)


def test_html_transcript_of_hostile_tool_output_contains_nothing_executable(stack, client):
    from html.parser import HTMLParser

    sid = create_session(client, "hostile")
    wait_ended(client, stack, sid)
    response = client.get(f"/v1/sessions/{sid}/transcript", params={"format": "html"})
    assert response.status_code == 200
    page = response.text
    assert "alert(1)" in page  # the output is there, as text

    class Tags(HTMLParser):
        def __init__(self):
            super().__init__()
            self.found = []

        def handle_starttag(self, tag, attrs):
            self.found.append((tag, attrs))

    parser = Tags()
    parser.feed(page)
    tags = {tag for tag, _ in parser.found}
    assert "script" not in tags and "img" not in tags
    for tag, attrs in parser.found:
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name)
            assert "javascript:" not in (value or "").lower(), (tag, name, value)
    assert "default-src 'none'" in response.headers.get("content-security-policy", "")
