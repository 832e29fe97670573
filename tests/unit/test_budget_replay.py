"""A budget through the replay check and the brain's own loop: the same log gives the same
decisions (`golden/recorded_budget.jsonl`, recorded by `make_budget_golden.py`), a brain that
decided otherwise diverges where it would, and the actor binds the price its settings give."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.unit.actor_partition import FakeModel, Partition, run_until_idle
from wakeline.agent import inputs, steps
from wakeline.agent.replay_check import first_divergence
from wakeline.contract import commands as c
from wakeline.contract import events as e
from wakeline.contract.events import parse_event
from wakeline.contract.budget import Budget, Spent
from wakeline.contract.prices import PriceTable
from wakeline.contract.tools import tool_schemas
from wakeline.log.fold import fold

LOG = Path(__file__).parent / "golden" / "recorded_budget.jsonl"


def golden(path: Path) -> list[e.Event]:
    return [parse_event(line) for line in path.read_bytes().splitlines() if line.strip()]


def seq_of(log: list[e.Event], type_: str, **payload: object) -> int:
    return next(ev.seq for ev in log if ev.type == type_
                and all(getattr(ev.payload, k) == v for k, v in payload.items()))


def test_the_recorded_budget_session_folds_to_its_budget_and_spend_and_replays_cleanly() -> None:
    log = golden(LOG)
    state = fold(log)
    assert state.budget == Budget(output_tokens=1000, usd=0.05) and state.ended_reason == "completed"
    assert state.spend.spent() == Spent(input_tokens=20_000, output_tokens=229, usd=0.039435)
    refused = [ev.payload for ev in log if isinstance(ev, e.InputRejected)]
    assert [r.code for r in refused] == ["budget_exhausted", "budget_exhausted"]
    assert refused[0].budget_change is None and refused[1].budget_change is not None  # what it asked for
    assert refused[1].budget_change.budget == Budget(output_tokens=210, usd=0.05)
    assert first_divergence(log, tool_schemas()) is None


def test_a_brain_that_ignored_the_budget_diverges_where_it_stopped_the_session(monkeypatch) -> None:
    log = golden(LOG)
    monkeypatch.setattr(steps, "budget_end", lambda state: None)
    found = first_divergence(log, tool_schemas())
    assert found is not None and found.seq == seq_of(log, "session_ended", reason="budget")
    assert found.recorded.startswith("session_ended") and "would record turn_started" in found.now


def test_a_brain_that_took_a_message_without_a_raise_diverges_at_its_refusal(monkeypatch) -> None:
    log = golden(LOG)
    monkeypatch.setattr(inputs, "budget_refusal", lambda state, change: None)
    found = first_divergence(log, tool_schemas())
    assert found is not None and found.seq == seq_of(log, "input_rejected")
    assert "would record user_message" in found.now


def test_a_log_that_let_a_message_through_a_spent_budget_diverges_there() -> None:
    log = golden(LOG)
    at = seq_of(log, "budget_changed")
    # the raise taken out, the message kept: today's brain refuses it
    forged = [ev for ev in log if ev.seq < at] + [ev for ev in log if ev.seq == at + 1]
    found = first_divergence(forged, tool_schemas())
    assert found is not None and found.seq == at + 1 and "budget_exhausted" in found.now


def test_the_actor_binds_the_price_its_settings_give_when_a_session_gets_a_budget() -> None:
    async def run() -> list[e.Event]:
        part = Partition()
        await part.writer.start()
        try:
            actor = part.actor("s-priced", FakeModel())
            actor.deps.prices = PriceTable.with_overrides({"house-model": {"input_usd_per_mtok": 7,
                                                                           "output_usd_per_mtok": 9}})
            part.deliver(actor, c.CreateSession(command_id="create", session_id="s-priced", tenant="t",
                                                actor="user:ann", config={"model": "house-model",
                                                                          "budget": {"usd": 1}}))
            await run_until_idle(actor)
        finally:
            await part.writer.close()
        return part.events("s-priced")

    created = asyncio.run(run())[0]
    assert isinstance(created, e.SessionCreated) and created.payload.price is not None
    assert (created.payload.price.input_usd_per_mtok, created.payload.price.output_usd_per_mtok) == (7, 9)
