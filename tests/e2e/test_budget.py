"""A session's budget through the four services as processes, on the real broker and database:
the scripted model's tiny output budget ends the session `budget` at its next model call, a
message without a raise is refused, and a raised budget continues it to completion."""

from __future__ import annotations

from tests.e2e.sessions import create_session, wait_ended, wait_for
from tests.e2e.stored_log import assert_log_whole
from wakeline.contract.budget import Budget
from wakeline.contract.events import SessionEnded


def test_a_tiny_budget_ends_the_session_at_its_next_model_call_and_a_raised_one_finishes_it(stack, client):
    sid = create_session(client, "tools3", budget={"output_tokens": 1})
    session = wait_ended(client, stack, sid)
    assert session["ended_reason"] == "budget", session
    events = assert_log_whole(sid)
    types = [e.type for e in events]
    # the first turn's model call spent the budget: its tool ran, then the session ended instead of the next call
    assert types.count("model_turn") == 1 and types.count("tool_result") == 1, types
    assert types[-2:] == ["turn_ended", "session_ended"], types
    end = events[-1]
    assert isinstance(end, SessionEnded) and end.payload.budget == Budget(output_tokens=1)
    assert end.payload.spent is not None and end.payload.spent.output_tokens >= 1 and end.payload.spent.usd == 0.0
    cost = client.get(f"/v1/sessions/{sid}/cost").json()
    assert cost["budget"]["reached"] == ["output_tokens"] and cost["usd"] == 0.0  # the scripted model is free

    refused = client.post(f"/v1/sessions/{sid}/messages", json={"text": "go on"})
    assert refused.status_code == 409 and refused.json()["code"] == "budget_exhausted", refused.text
    assert refused.headers["content-type"].startswith("application/problem+json")
    raised = client.post(f"/v1/sessions/{sid}/messages", json={"text": "go on", "budget": {"output_tokens": 100_000}})
    assert raised.status_code in (200, 202) and raised.json()["outcome"] == "budget_changed", raised.text

    done = wait_for(lambda: (s := client.get(f"/v1/sessions/{sid}").json())["ended_reason"] == "completed" and s,
                    90, "the raised session to complete", stack)
    events = assert_log_whole(sid)
    assert done["last_seq"] == events[-1].seq
    after = [e.type for e in events if e.seq > end.seq]
    assert after[:3] == ["input_rejected", "budget_changed", "user_message"], after
    assert [e for e in events if e.type == "model_turn"][-1].payload.text.startswith("Done:")
    cost = client.get(f"/v1/sessions/{sid}/cost").json()
    assert cost["budget"]["budget"] == {"output_tokens": 100_000} and cost["budget"]["reached"] == []
    check = client.get(f"/v1/sessions/{sid}/replay", params={"check": "true"}).json()["check"]
    assert check["clean"], check
