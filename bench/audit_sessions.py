"""Made-up sessions for the audit benchmark: a year of agent work, deterministic, chained.

One session is `PER_SESSION` events in the brain's shapes (session_created, then turns of
user_message → turn_started → model_turn → tool_call* → tool_result* … → turn_ended) with
users, `agent:scripted:demo`, `runner:host-N` and `system:brain` as actors. Users follow
a Zipf law (user:alice most active), so one actor has hundreds of events a week and most
have a few. Hashes are computed here from the payloads' JSON renderings, not through
`wakeline.log.chain.seal` (four times slower); `audit_load` checks a sample of them with
`wakeline.log.chain`. Event ids are time-ordered, as the brain mints them. Rows only, no I/O.
"""

from __future__ import annotations

import hashlib
import json
import random
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from wakeline.contract import events as e
from wakeline.contract.events import GENESIS_HASH
from wakeline.contract.ids import time_ordered_id

PER_SESSION = 50
USERS = ("user:alice", *(f"user:person-{n:03d}" for n in range(2, 501)))
# Zipf, s = 1: alice starts ~15% of sessions, the median user about 0.06%.
USER_WEIGHTS = tuple(1 / rank for rank in range(1, len(USERS) + 1))
AGENT, BRAIN, RUNNERS = "agent:scripted:demo", "system:brain", tuple(f"runner:host-{n}" for n in range(1, 5))
YEAR_START, YEAR_SECONDS = datetime(2026, 1, 1, tzinfo=timezone.utc), 355 * 86400
TOOLS = {"bash": {"command": "pytest -q tests/unit"}, "read_file": {"path": "src/app/models.py"},
         "write_file": {"path": "src/app/models.py", "content": "class Order:\n    pass\n"},
         "list_files": {"path": "."}}
_CONFIG = e.SessionConfig(model="scripted:demo").model_dump(mode="json")
_TURN = e.ModelTurnPayload().model_dump(mode="json")
_RESULT = e.ToolResultPayload(tool_call_id="", name="", output="").model_dump(mode="json")


def session_id(index: int) -> str:
    return _uuid(_rng(index))


def session_rows(tenant: str, index: int) -> list[tuple[Any, ...]]:
    """Session `index`'s rows in `wakeline.storage.event_rows.EVENT_COLUMNS` order, payload as JSON text."""
    rng = _rng(index)
    session_id = _uuid(rng)
    user = rng.choices(USERS, USER_WEIGHTS)[0]
    ts = YEAR_START + timedelta(seconds=rng.uniform(0, YEAR_SECONDS))
    rows, prev_hash = [], GENESIS_HASH
    for seq, (kind, actor, trust, payload, gap_s, causation) in enumerate(_drafts(rng, user), start=1):
        ts += timedelta(seconds=gap_s)
        body = {"session_id": session_id, "seq": seq, "event_id": _event_id(rng, ts),
                "causation_id": causation, "tenant": tenant, "actor": actor, "trust": trust,
                "ts": _json_ts(ts), "prev_hash": prev_hash, "type": kind, "payload": payload}
        digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                           ensure_ascii=False).encode()).hexdigest()
        tool = payload.get("name") if kind in ("tool_call", "tool_result") else None
        rows.append((tenant, session_id, seq, body["event_id"], causation, kind, actor, trust, ts,
                     bytes.fromhex(prev_hash), bytes.fromhex(digest), json.dumps(payload), tool,
                     payload.get("is_error")))
        prev_hash = digest
    return rows


def _drafts(rng: random.Random, user: str) -> list[tuple]:
    """(type, actor, trust, payload, seconds since the previous event, causation_id), PER_SESSION of them."""
    out = [("session_created", user, "instruction", {"config": _CONFIG, "owner": user, "title": None,
            "parent_session_id": None, "fork_seq": None}, 0.0, None)]
    turn = 0
    while len(out) < PER_SESSION:
        turn += 1
        command_id = _uuid(rng)
        out.append(("user_message", user, "instruction", {"text": f"Turn {turn}: fix the next failing test.",
                    "queued": False}, rng.expovariate(1 / 600), command_id))
        out.append(("turn_started", BRAIN, "instruction", {"turn": turn}, 0.01, None))
        for step in range(rng.randint(0, 3)):
            out += _tool_step(rng, f"toolu_{turn}_{step}")
        out.append(("model_turn", AGENT, "instruction", {**_TURN, "text": "Done: the test passes now.",
                    "usage": {"input_tokens": 2400, "output_tokens": 60}}, rng.uniform(1, 8), None))
        out.append(("turn_ended", BRAIN, "instruction", {"turn": turn, "stop_reason": "end_turn"}, 0.01, None))
    return out[:PER_SESSION]


def _tool_step(rng: random.Random, call_prefix: str) -> list[tuple]:
    """A model turn asking for one or two tools, the calls, and the runners' results."""
    calls = [(f"{call_prefix}_{n}", rng.choice(tuple(TOOLS))) for n in range(rng.randint(1, 2))]
    out = [("model_turn", AGENT, "instruction", {**_TURN, "text": "Checking the code.",
            "usage": {"input_tokens": 1800, "output_tokens": 120}, "stop_reason": "tool_use",
            "tool_call_ids": [c for c, _ in calls]}, rng.uniform(1, 8), None)]
    out += [("tool_call", AGENT, "instruction", {"tool_call_id": call_id, "name": name, "input": TOOLS[name]},
             0.001, None) for call_id, name in calls]
    for call_id, name in calls:
        failed = rng.random() < 0.05
        out.append(("tool_result", rng.choice(RUNNERS), "data", {**_RESULT, "tool_call_id": call_id, "name": name,
                    "output": "1 failed" if failed else "ok\n" * 8, "is_error": failed,
                    "error_kind": "exit_status" if failed else None, "duration_ms": rng.randint(5, 4000)},
                    rng.uniform(0.01, 4), None))
    return out


def _rng(index: int) -> random.Random:
    return random.Random(f"audit-bench:{index}")


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _event_id(rng: random.Random, ts: datetime) -> str:
    """As the brain mints one (`wakeline.contract.ids.time_ordered_id`) at the event's time."""
    return time_ordered_id(int(ts.timestamp() * 1000), rng.getrandbits(80))


def _json_ts(ts: datetime) -> str:
    """As pydantic renders a UTC datetime in JSON mode (what the chain hashes)."""
    return ts.isoformat().replace("+00:00", "Z")
