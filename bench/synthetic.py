"""Sealed sessions made up for benchmarks: valid chains, realistic shapes, fresh ids."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

from wakeline.contract import events as e
from wakeline.log.chain import Draft, seal
from wakeline.contract.events import GENESIS_HASH


def session_events(n: int, tenant: str = "default", start: datetime | None = None) -> list[e.Event]:
    """n events: created, then user message / model turn / tool call / tool result rounds."""
    sid, out = str(uuid.uuid4()), []
    start = start or datetime.now(timezone.utc)
    prev = GENESIS_HASH
    for seq in range(1, n + 1):
        draft = _draft(seq)
        event = seal(draft, session_id=sid, tenant=tenant, seq=seq, prev_hash=prev,
                     ts=start + timedelta(milliseconds=seq), event_id=str(uuid.uuid4()))
        out.append(event)
        prev = event.hash
    return out


def _draft(seq: int) -> Draft:
    if seq == 1:
        payload = e.SessionCreatedPayload(config=e.SessionConfig(model="scripted:noop", max_turns=10_000),
                                          owner="user:bench")
        return Draft(payload=payload, actor="user:bench", trust="instruction")
    kind = seq % 4
    call_id = f"toolu_{seq // 4}"
    if kind == 2:
        return Draft(payload=e.UserMessagePayload(text=f"step {seq}: do the next thing"),
                     actor="user:bench", trust="instruction", causation_id=str(uuid.uuid4()))
    if kind == 3:
        return Draft(payload=e.ModelTurnPayload(text="Looking at the files." * 4),
                     actor="agent:scripted:noop", trust="instruction")
    if kind == 0:
        return Draft(payload=e.ToolCallPayload(tool_call_id=call_id, name="list_files",
                                                                  input={"path": "."}),
                     actor="agent:scripted:noop", trust="instruction")
    return Draft(payload=e.ToolResultPayload(tool_call_id=call_id, name="list_files",
                                                                  output="a.txt\nb.txt\ncount.py\n" * 5),
                 actor="runner:bench", trust="data")
