"""Going back: forks of real sessions through the four services as processes.

A fork's history is its parent's events 1..N, read from the parent; its own log starts at
N + 1 with a `forked` event linked to the parent's hash at N. Every test ends on the
fork's log being whole from there, and on what the fork did with the inherited history.
"""

from __future__ import annotations

import io
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stdout
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.e2e.sessions import create_session, wait_ended, wait_for
from tests.e2e.stored_log import assert_log_whole, stored_events
from wakeline.log.chain import compute_hash
from wakeline_gateway import cli
from wakeline_client import Wakeline


def fork(client: httpx.Client, parent: str, at: int, message: str = "try it another way") -> str:
    response = client.post(f"/v1/sessions/{parent}/fork", json={"at_seq": at, "message": message})
    assert response.status_code == 201, response.text
    answer = response.json()
    assert answer["outcome"] == "forked" and answer["seq"] == at + 1
    assert (answer["session"]["parent_session_id"], answer["session"]["fork_seq"]) == (parent, at)
    return answer["session_id"]


def assert_fork_whole(fork_id: str, parent: str, at: int) -> list:
    """The fork's own rows: dense from at + 1, a `forked` first, linked to the parent's hash at `at`."""
    own = stored_events(fork_id)
    assert [e.seq for e in own] == list(range(at + 1, at + 1 + len(own)))
    first = own[0]
    parent_at = next(e for e in stored_events(parent) if e.seq == at)
    assert first.type == "forked" and first.payload.parent_session_id == parent and first.payload.fork_seq == at
    assert first.prev_hash == first.payload.parent_hash == parent_at.hash
    prev = first.prev_hash
    for event in own:
        assert event.prev_hash == prev and compute_hash(event) == event.hash
        prev = event.hash
    return own


def seq_of(events: list, type_: str, nth: int = 0) -> int:
    return [e.seq for e in events if e.type == type_][nth]


@pytest.fixture(scope="module")
def module_start(stack):
    return datetime.now(UTC) - timedelta(seconds=1)


@pytest.fixture
def finished(stack, client, module_start):
    """A finished tools3 session: three tool calls over three turns."""
    sid = create_session(client, "tools3")
    wait_ended(client, stack, sid)
    return sid, assert_log_whole(sid)


def test_fork_after_a_result_reuses_it_and_never_runs_the_parents_calls_again(stack, client, finished):
    parent, events = finished
    at = seq_of(events, "tool_result", 1)  # after the second call's result
    fork_id = fork(client, parent, at)
    assert wait_ended(client, stack, fork_id)["ended_reason"] == "completed"
    own = assert_fork_whole(fork_id, parent, at)
    parents_calls = {e.payload.tool_call_id for e in events if e.type == "tool_call"}
    fork_calls = {e.payload.tool_call_id for e in own if e.type == "tool_call"}
    assert fork_calls and not fork_calls & parents_calls  # its own new calls only
    results = [e for e in own if e.type == "tool_result"]
    assert sorted(r.payload.tool_call_id for r in results) == sorted(fork_calls)  # each run once
    # The fork's first model call saw the inherited conversation, recorded results included.
    replay = client.get(f"/v1/sessions/{fork_id}/replay").json()["data"]
    state = next(s["state"] for s in replay if s["seq"] == at + 2)
    assert len(state["messages"]) == 6 and state["parent_session_id"] == parent


def test_fork_before_a_tool_call_is_taken_and_inside_one_is_refused_naming_the_last_whole_step(
        stack, client, finished):
    parent, events = finished
    asked = seq_of(events, "model_turn")  # the model asks for the first call here
    refused = client.post(f"/v1/sessions/{parent}/fork", json={"at_seq": asked, "message": "x"})
    assert refused.status_code == 409
    body = refused.json()
    assert body["code"] == "fork_inside_tool_call" and body["whole_step_seq"] == asked - 1
    beyond = client.post(f"/v1/sessions/{parent}/fork", json={"at_seq": 10_000, "message": "x"})
    assert beyond.status_code == 422 and beyond.json()["code"] == "unknown_seq"
    fork_id = fork(client, parent, body["whole_step_seq"])
    assert wait_ended(client, stack, fork_id)["ended_reason"] == "completed"
    assert_fork_whole(fork_id, parent, body["whole_step_seq"])


def test_fork_after_a_compaction_starts_from_the_summary(stack, client):
    parent = create_session(client, "tools3", message="remember this: " + "lorem ipsum " * 400,
                            context_window=1024)
    wait_ended(client, stack, parent)
    events = assert_log_whole(parent)
    at = seq_of(events, "compaction")
    fork_id = fork(client, parent, at)
    assert wait_ended(client, stack, fork_id)["ended_reason"] == "completed"
    assert_fork_whole(fork_id, parent, at)
    first = client.get(f"/v1/sessions/{fork_id}/replay").json()["data"]
    state = next(s["state"] for s in first if s["seq"] == at + 1)
    assert state["messages"][0]["blocks"][0]["text"].startswith("[Summary of earlier conversation]")


def test_forks_of_forks_three_levels_deep_form_the_tree_and_verify(stack, client, finished):
    parent, events = finished
    at1 = seq_of(events, "turn_ended")
    f1 = fork(client, parent, at1, "level one")
    wait_ended(client, stack, f1)
    at2 = seq_of(stored_events(f1), "turn_ended")
    f2 = fork(client, f1, at2, "level two")
    wait_ended(client, stack, f2)
    at3 = seq_of(stored_events(f2), "turn_ended")
    f3 = fork(client, f2, at3, "level three")
    wait_ended(client, stack, f3)
    assert_fork_whole(f3, f2, at3)

    tree = client.get(f"/v1/sessions/{parent}/tree").json()
    assert tree["session_id"] == parent and tree["owner"] == "user:local"
    one = tree["forks"][0]
    two = one["forks"][0]
    three = two["forks"][0]
    assert [(n["session_id"], n["fork_seq"], n["status"]) for n in (one, two, three)] == [
        (f1, at1, "ended"), (f2, at2, "ended"), (f3, at3, "ended")]
    assert three["steps"][0]["kind"] == "forked" and three["steps"][0]["seq"] == at3 + 1
    assert any(s["kind"] == "tool_call" and s["detail"]["outcome"] == "ok" for s in tree["steps"])

    report = client.get(f"/v1/sessions/{f3}/verify").json()
    assert report["ok"] and report["prefix"]["parent_session_id"] == f2
    assert report["prefix"]["parent"]["prefix"]["parent"]["prefix"]["parent_session_id"] == parent
    assert report["prefix"]["parent"]["prefix"]["parent"]["prefix"]["ok"]

    out = io.StringIO()
    with Wakeline(stack.url, client.headers["Authorization"].split()[1]) as gateway, redirect_stdout(out):
        assert cli.main(["tree", parent], client=gateway) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(parent) and any(f3 in line and f"at seq {at3}" in line for line in lines)


def test_concurrent_forks_of_one_parent_each_get_their_own_log(stack, client, finished):
    parent, events = finished
    at = seq_of(events, "turn_ended")

    def one(i: int) -> str:
        with httpx.Client(base_url=stack.url, timeout=60, headers=stack.headers) as c:
            return fork(c, parent, at, f"fork {i}")

    with ThreadPoolExecutor(5) as pool:
        forks = list(pool.map(one, range(5)))
    assert len(set(forks)) == 5
    for fork_id in forks:
        assert wait_ended(client, stack, fork_id)["ended_reason"] == "completed"
        own = assert_fork_whole(fork_id, parent, at)
        assert own[1].payload.text.startswith("fork ")
    assert len(client.get(f"/v1/sessions/{parent}/tree").json()["forks"]) == 5


def test_fork_then_kill_9_the_brain_resumes_the_fork_from_its_prefix(stack, client):
    parent = create_session(client, "slowmodel")
    wait_ended(client, stack, parent)
    events = assert_log_whole(parent)
    at = seq_of(events, "turn_ended")
    fork_id = fork(client, parent, at)
    wait_for(lambda: any(e.type == "turn_started" for e in stored_events(fork_id)), 30, "the fork's turn", stack)
    stack.services["brain"].kill9()
    stack.start("brain", "brain", WAKELINE_HOST="brain-fork-2")
    assert wait_ended(client, stack, fork_id, timeout=120)["ended_reason"] == "completed"
    own = assert_fork_whole(fork_id, parent, at)
    assert any(e.type == "woke" and e.payload.host == "brain-fork-2" for e in own)
    assert sum(e.type == "session_ended" for e in own) == 1


def test_fork_then_delete_the_parent_the_fork_goes_on_and_its_prefix_stays_readable(stack, client, finished):
    parent, events = finished
    at = seq_of(events, "turn_ended")
    fork_id = fork(client, parent, at)
    wait_ended(client, stack, fork_id)
    assert client.delete(f"/v1/sessions/{parent}").status_code == 200
    assert client.post(f"/v1/sessions/{parent}/fork", json={"at_seq": at, "message": "x"}).status_code == 404
    sent = client.post(f"/v1/sessions/{fork_id}/messages", json={"text": "and once more"})
    assert sent.status_code == 202 and sent.json()["outcome"] == "user_message", sent.text

    def ended_again() -> bool:
        types = [e.type for e in stored_events(fork_id)]
        return "user_message" in types[types.index("session_ended"):] and types[-1] == "session_ended"
    wait_for(ended_again, 60, "the fork to take the message and end again", stack)
    assert_fork_whole(fork_id, parent, at)
    transcript = client.get(f"/v1/sessions/{fork_id}/transcript").json()["entries"]
    inherited = [e for e in transcript if e["inherited_from"] == parent]
    assert inherited and max(e["seq"] for e in inherited) <= at
    assert [e["text"] for e in transcript if e["type"] == "user_message"][-1] == "and once more"
    assert client.get(f"/v1/sessions/{fork_id}/verify").json()["ok"]


def test_only_the_owner_or_an_admin_may_fork(stack, client, finished):
    parent, events = finished
    at = seq_of(events, "turn_ended")
    for principal, role, status in (("someone-else", "user", 404), ("fork-auditor", "auditor", 403)):
        headers = {"Authorization": f"Bearer {stack.api_key(principal, role)}"}
        answer = httpx.post(f"{stack.url}/v1/sessions/{parent}/fork", json={"at_seq": at, "message": "x"},
                            headers=headers, timeout=30)
        assert answer.status_code == status, answer.text
    admin = {"Authorization": f"Bearer {stack.api_key('fork-admin', 'admin')}"}
    with httpx.Client(base_url=stack.url, timeout=30, headers=admin) as as_admin:
        fork_id = fork(as_admin, parent, at)
        assert as_admin.get(f"/v1/sessions/{fork_id}").json()["owner"] == "user:fork-admin"


def test_cost_totals_equal_the_sum_of_the_turns_usage(stack, client, finished, auditor):
    parent, events = finished
    cost = client.get(f"/v1/sessions/{parent}/cost").json()
    turns = [e.payload.usage for e in events if e.type == "model_turn"]
    assert cost["tokens"] == {"input_tokens": sum(u.input_tokens for u in turns),
                              "output_tokens": sum(u.output_tokens for u in turns)}
    assert (cost["model_calls"], cost["tool_calls"], cost["turns"]) == (4, 3, 4)
    assert cost["models"][0]["model"] == "scripted:tools3" and cost["tool_wall_s"] > 0
    since = events[0].ts.isoformat()
    tenant = auditor.get("/v1/audit/cost", params={"since": since}).json()
    mine = [r for r in tenant["data"] if r["actor"] == "user:local" and r["model"] == "scripted:tools3"]
    assert sum(r["tokens"]["input_tokens"] for r in mine) >= cost["tokens"]["input_tokens"]
    assert client.get("/v1/audit/cost").status_code == 403


def test_audit_rows_of_a_fork_name_its_parent(stack, client, finished, auditor):
    parent, events = finished
    at = seq_of(events, "turn_ended")
    fork_id = fork(client, parent, at)
    wait_ended(client, stack, fork_id)
    rows = auditor.get("/v1/audit/sessions", params={"session_id": fork_id}).json()["data"]
    assert [(r["session_id"], r["parent_session_id"], r["fork_seq"]) for r in rows] == [(fork_id, parent, at)]
    forked = auditor.get("/v1/audit/events", params={"session_id": fork_id, "type": "forked"}).json()["data"]
    assert forked[0]["payload"]["parent_session_id"] == parent and forked[0]["seq"] == at + 1


def test_every_session_this_module_ran_replays_cleanly_against_todays_code(stack, client, finished, module_start):
    parent, events = finished
    fork_id = fork(client, parent, seq_of(events, "turn_ended"))
    wait_ended(client, stack, fork_id)
    judged = subprocess.run([sys.executable, "-m", "wakeline.agent.replay_command", "--all", "--since",
                             module_start.isoformat(), "--tenant", "default"],
                            capture_output=True, text=True, timeout=300)
    assert judged.returncode == 0, judged.stdout + judged.stderr
    lines = judged.stdout.splitlines()
    assert len(lines) >= 3 and all("replays cleanly" in line for line in lines), judged.stdout
    out = io.StringIO()
    with Wakeline(stack.url, client.headers["Authorization"].split()[1]) as gateway, redirect_stdout(out):
        assert cli.main(["replay", fork_id, "--check"], client=gateway) == 0
    assert out.getvalue().startswith(f"{fork_id}: replays cleanly")
