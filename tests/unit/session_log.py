"""The unit tests' recorded session: its creation, whole turns, and a log of any length.

Drafts, speakers and sealing come from `tests.factories`; this module only says what a
typical session holds. What a log should fold to is asserted in the tests. `Record`
stands for a consumed Kafka record of such a log, as the archiver receives it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.factories import SPEAKERS, draft, sealed
from wakeline.log.chain import Draft
from wakeline.contract.events import Event


def created() -> Draft:
    return draft("session_created", "cmd-create", config={"require_approval": ["bash"]}, owner=SPEAKERS.user)


def exchange(turn: int) -> list[Draft]:
    """One turn: the user asks, the model calls a tool, reads its result and answers."""
    call_id = f"tc-{turn}"
    return [
        draft("user_message", f"cmd-{turn}", text=f"question {turn}"),
        draft("turn_started", turn=turn),
        draft("model_turn", text="Let me look.", usage={"input_tokens": 100, "output_tokens": 10},
              stop_reason="tool_use", tool_call_ids=[call_id]),
        draft("tool_call", name="bash", tool_call_id=call_id, input={"cmd": "ls"}),
        draft("tool_result", f"result:{call_id}", tool_call_id=call_id, name="bash", output="a.txt\n"),
        draft("model_turn", text=f"answer {turn}", usage={"input_tokens": 150, "output_tokens": 5}),
        draft("turn_ended", turn=turn),
    ]


def conversation(n: int, session_id: str) -> list[Event]:
    """A valid chain of `n` events: `session_created`, then whole turns, cut at `n`."""
    drafts = [created()]
    turn = 0
    while len(drafts) < n:
        turn += 1
        drafts += exchange(turn)
    return sealed(drafts[:n], session_id)


@dataclass
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
