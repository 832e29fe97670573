"""A session's budget at the gateway: a message to a session its budget stopped is a 409
problem naming `budget_exhausted`, one with a raised budget continues it, `/cost` shows
spend against the budget, and a budget the request gets wrong is a 4xx problem, never a 5xx.

The real gateway app and the real Postgres. Commands go to a `FakeInbox` and the test plays
the brain with the brain's own pure code (`handle_input`, `next_step` over the folded log),
so the events stored are the ones a running brain would write for what the gateway sent.
"""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

from gateway_harness import FakeInbox, Seeder, draft, gateway_settings, running_gateway
from wakeline.agent.inputs import handle_input
from wakeline.agent.steps import next_step
from wakeline.contract.events import Event
from wakeline.log.fold import fold
from wakeline.storage.pg import TenantPool
from wakeline_gateway.deps import get_inbox

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]
PROBLEM = "application/problem+json"
HOUSE = {"input_usd_per_mtok": 2, "output_usd_per_mtok": 8}


@pytest.fixture(scope="module")
async def world():
    settings = gateway_settings(wait_timeout_s=5.0, outcome_recheck_s=0.05, model_prices={"house-model": HOUSE})
    inbox = FakeInbox()
    async with running_gateway(settings) as (app, client):
        app.dependency_overrides[get_inbox] = lambda: inbox
        async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
            yield dict(client=client, inbox=inbox, seeder=Seeder(pool, settings.tenant))


async def stopped_by_its_budget(world) -> list[Event]:
    """A session of the scripted model with an output cap of 100 that its first turn spent 150
    of: recorded as the brain records it, up to its end `budget` before the second turn."""
    seeder: Seeder = world["seeder"]
    drafts = [draft("session_created", f"cmd-{uuid.uuid4()}", config={"model": "scripted:demo",
                                                                       "budget": {"output_tokens": 100}},
                    owner="user:local", price={"input_usd_per_mtok": 0, "output_usd_per_mtok": 0}),
              draft("user_message", "cmd-go", actor="user:local", text="go"), draft("turn_started", turn=1),
              draft("model_turn", text="listing", usage={"input_tokens": 40, "output_tokens": 150},
                    stop_reason="tool_use", tool_call_ids=["tc-1"]),
              draft("tool_call", tool_call_id="tc-1", name="list_files", input={"path": "."}),
              draft("tool_result", "result:tc-1", tool_call_id="tc-1", name="list_files", output="a.txt"),
              draft("turn_ended", turn=1)]
    history = await seeder.session(drafts)
    ended = next_step(fold(history))
    assert isinstance(ended, list) and ended[0].type == "session_ended"
    return await seeder.append(history[0].session_id, ended, history)


async def brain_answers(world, history: list[Event]) -> list[Event]:
    """Plays the brain once: the session's next command, handled by the brain's own code."""
    command = await world["inbox"].next_unanswered(history[0].session_id)
    return await world["seeder"].append(history[0].session_id, handle_input(fold(history), command), history)


async def message(world, history: list[Event], body: dict) -> tuple[httpx.Response, list[Event]]:
    url = f"/v1/sessions/{history[0].session_id}/messages"
    return await asyncio.gather(world["client"].post(url, json=body), brain_answers(world, history))


async def test_a_message_without_a_raise_to_a_session_its_budget_stopped_is_a_409_problem(world) -> None:
    history = await stopped_by_its_budget(world)
    assert history[-1].payload.reason == "budget"  # type: ignore[union-attr]
    answer, log = await message(world, history, {"text": "more"})
    assert answer.status_code == 409 and answer.headers["content-type"].startswith(PROBLEM), answer.text
    problem = answer.json()
    assert problem["code"] == "budget_exhausted" and problem["type"] == "urn:wakeline:problem:budget_exhausted"
    assert "output_tokens 150 of 100" in problem["detail"] and problem["seq"] == log[-1].seq
    assert [ev.type for ev in log[len(history):]] == ["input_rejected"]  # nothing else: the model is not called
    too_little, log = await message(world, log, {"text": "more", "budget": {"output_tokens": 120}})
    assert too_little.status_code == 409 and too_little.json()["code"] == "budget_exhausted", too_little.text
    assert log[-1].payload.budget_change.budget.output_tokens == 120  # type: ignore[union-attr]


async def test_a_raised_budget_continues_the_session_and_cost_shows_spend_against_it(world) -> None:
    history = await stopped_by_its_budget(world)
    client, sid = world["client"], history[0].session_id
    before = (await client.get(f"/v1/sessions/{sid}/cost")).json()
    assert before["budget"] == {"budget": {"output_tokens": 100},
                                "spent": {"input_tokens": 40, "output_tokens": 150, "usd": 0.0},
                                "reached": ["output_tokens"]}
    answer, log = await message(world, history, {"text": "more", "budget": {"output_tokens": 1000}})
    assert answer.status_code in (200, 202) and answer.json()["status"] == "done", answer.text
    assert answer.json()["outcome"] == "budget_changed"
    assert [ev.type for ev in log[len(history):]] == ["budget_changed", "user_message"]
    assert next_step(fold(log))[0].type == "turn_started"  # type: ignore[index]  # the brain goes on
    session = (await client.get(f"/v1/sessions/{sid}")).json()
    assert session["status"] == "idle" and session["ended_reason"] is None
    after = (await client.get(f"/v1/sessions/{sid}/cost")).json()
    assert after["budget"]["budget"] == {"output_tokens": 1000} and after["budget"]["reached"] == []
    transcript = (await client.get(f"/v1/sessions/{sid}/transcript")).json()
    assert any(en["type"] == "budget_changed" and "output_tokens 1000" in en["text"] for en in transcript["entries"])


@pytest.mark.parametrize("budget", [{}, {"usd": -1}, {"usd": 0}, {"usd": "lots"}, {"output_tokens": 10**30},
                                    {"output_tokens": 1.5}, {"tokens": 5}, [], "5 dollars"])
async def test_a_budget_the_request_gets_wrong_is_a_422_problem_never_a_5xx(world, budget) -> None:
    history = await stopped_by_its_budget(world)
    answer = await world["client"].post(f"/v1/sessions/{history[0].session_id}/messages",
                                        json={"text": "more", "budget": budget})
    assert answer.status_code == 422 and answer.headers["content-type"].startswith(PROBLEM), answer.text
    assert any(p["where"].startswith("body.budget") for p in answer.json()["errors"])
    assert world["inbox"].commands_for(history[0].session_id) == []  # refused before Kafka
    created = await world["client"].post("/v1/sessions", json={"config": {"budget": budget}, "wait": False})
    assert created.status_code == 422 and created.headers["content-type"].startswith(PROBLEM), created.text


async def test_a_dollar_cap_on_a_model_with_no_price_is_refused_at_creation_naming_the_setting(world) -> None:
    client, inbox = world["client"], world["inbox"]
    sent = len(inbox.sent)
    refused = await client.post("/v1/sessions", json={"config": {"model": "claude-nobody-prices",
                                                                 "budget": {"usd": 1}}, "wait": False})
    assert refused.status_code == 422 and refused.headers["content-type"].startswith(PROBLEM), refused.text
    assert refused.json()["code"] == "unpriced_model" and "WAKELINE_MODEL_PRICES" in refused.json()["detail"]
    assert len(inbox.sent) == sent
    # a price from the settings is a price; a token cap needs none
    for config in ({"model": "house-model", "budget": {"usd": 1}},
                   {"model": "claude-nobody-prices", "budget": {"output_tokens": 10}}):
        answer = await client.post("/v1/sessions", json={"config": config, "wait": False})
        assert answer.status_code == 202, answer.text
        assert inbox.sent[-1].config.budget is not None  # type: ignore[attr-defined]
