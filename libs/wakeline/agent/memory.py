"""The session's memory file at a compaction (issue 11): `compaction_step(state, plan)`. Pure.

When the context nears the window the summary replaces the older conversation, and the
system prompt and the memory file the config names (`SessionConfig.memory_file`) are
re-injected whole. The system prompt goes with every request; the memory file lives in the
sandbox, which only a runner reaches, so the brain reads it the way the model would: a
`read_file` tool call, recorded (actor `system:brain`) and issued to the runners on the
tool-calls topic, whose result comes back on the tool-results topic. The compaction is
recorded once that result is in the log, with the file's content (`CompactionPayload.memory`),
or without it when the read failed (a missing file never stalls the session).

Everything here is a function of the folded state, so a brain killed between the call and
its result wakes, re-issues the pending call with the same id, and on its result records
the compaction once; `replay_check` walks the same steps.
"""

from __future__ import annotations

import json

from wakeline.contract import events as e
from wakeline.log.chain import Draft
from wakeline.log.state import SessionState
from wakeline.agent.context import CHARS_PER_TOKEN

SYSTEM = "system:brain"
# Read whole up to this: a compaction event must stay under the record limit (1 MB by default).
MEMORY_MAX_BYTES = 256 * 1024


def memory_call_id(state: SessionState) -> str:
    """The same id for the same state: a replay of the log derives the id it recorded."""
    return f"memory-{state.session_id}-{state.last_seq + 1}"


def compaction_step(state: SessionState, plan: Draft) -> Draft:
    """What to record for a planned compaction: the read of the memory file while the config
    names one and it has not been read for this compaction, else the compaction itself
    (with the memory file's content, when it was read)."""
    path = state.config.memory_file
    if path is None or state.hands is not None:
        return plan  # with the hands taken over no runner would run the brain's read
    if state.memory_read is None:
        call = e.ToolCallPayload(tool_call_id=memory_call_id(state), name="read_file",
                                 input={"path": path, "max_bytes": MEMORY_MAX_BYTES})
        return Draft(payload=call, actor=SYSTEM, trust="instruction")
    return with_memory(plan, path, memory_content(state.memory_read.output, state.memory_read.is_error))


def reading_memory(state: SessionState) -> bool:
    """The brain's read of the memory file is out: the model call waits for it."""
    return state.memory_call is not None


def memory_content(output: str, is_error: bool) -> str | None:
    """The file's text from a read_file result; None when the read failed."""
    if is_error:
        return None
    try:
        result = json.loads(output)
        content = result["content"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(content, str):
        return None
    if result.get("truncated"):
        content += f"\n[truncated: the file is {result.get('size')} bytes; the first {MEMORY_MAX_BYTES} are shown]"
    return content


def with_memory(plan: Draft, path: str, content: str | None) -> Draft:
    """`plan` with the memory file re-injected (its tokens counted in `tokens_after`)."""
    p = plan.payload
    assert isinstance(p, e.CompactionPayload)
    if content is None:
        return plan
    payload = p.model_copy(update={"memory_file": path, "memory": content,
                                   "tokens_after": p.tokens_after + len(content) // CHARS_PER_TOKEN})
    return Draft(payload=payload, actor=plan.actor, trust=plan.trust, causation_id=plan.causation_id)
