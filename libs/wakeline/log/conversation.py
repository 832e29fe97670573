"""The conversation the model sees, as the fold builds it: `Message`s of Messages-API blocks.

Pure helpers over the fold's growing list of messages, changed in place (only the last
message's blocks are ever copied, never the conversation): a model turn's blocks as state
blocks, a tool use put into the model's last message, a tool result into the user's, and
what a compaction leaves (its summary, then the memory file whole). Which event does what
to the session is fold.py's.
"""

from __future__ import annotations

from typing import Any

from wakeline.contract.events import CompactionPayload, ModelTurnPayload
from wakeline.log.state import (
    Block, Message, OtherBlock, RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock,
)


def memory_block(path: str, content: str) -> str:
    """The memory file as the model sees it after a compaction's summary: whole, labelled
    with its path, and wrapped as data like tool output (the file is the agent's own notes,
    written by tools, so it is no more an instruction than their output is)."""
    return f'<memory_file path="{path}" trust="data">\n{content}\n</memory_file>'


def turn_blocks(turn: ModelTurnPayload) -> tuple[Block, ...]:
    """A model turn's message content. A turn recorded with its blocks is sent back exactly
    as it came (thinking and its signature first); one recorded before blocks existed, as its text."""
    return _blocks(turn.blocks) if turn.blocks else ((TextBlock(turn.text),) if turn.text else ())


def compacted(messages: list[Message], compaction: CompactionPayload, seq: int) -> list[Message]:
    """The conversation after a compaction: its summary (and the memory file re-read for it)
    as the opening user message, then what the compaction did not cover."""
    opening: tuple[Block, ...] = (TextBlock(f"[Summary of earlier conversation]\n{compaction.summary}"),)
    if compaction.memory_file is not None and compaction.memory is not None:
        opening += (TextBlock(memory_block(compaction.memory_file, compaction.memory)),)
    return [Message("user", opening, seq)] + [m for m in messages if m.seq > compaction.covered_to_seq]


def add_tool_use(messages: list[Message], block: ToolUseBlock, seq: int) -> None:
    """Into the model's last message, else a message of its own. Copies only the last
    message's blocks (one turn's), never the conversation."""
    if messages and messages[-1].role == "assistant":
        last = messages[-1]
        if any(isinstance(b, ToolUseBlock) and b.id == block.id for b in last.blocks):
            return  # the model turn's own blocks already hold it, where the model put it
        messages[-1] = Message(last.role, last.blocks + (block,), last.seq)
    else:
        messages.append(Message("assistant", (block,), seq))


def add_tool_result(messages: list[Message], block: ToolResultBlock, seq: int) -> None:
    """Into the user message of results right after the model's turn, else a message of its own."""
    last = messages[-1] if messages else None
    if last is not None and last.role == "user" and all(isinstance(b, ToolResultBlock) for b in last.blocks):
        messages[-1] = Message(last.role, last.blocks + (block,), last.seq)
    else:
        messages.append(Message("user", (block,), seq))


def _blocks(raw: tuple[dict[str, Any], ...]) -> tuple[Block, ...]:
    """A model turn's blocks as state blocks; one of a kind the brain does not act on is
    kept whole (`OtherBlock`), to go back as it came, and so is a text block that carries
    more than its text (`citations`): rebuilt as `{type, text}` it would lose them."""
    out: list[Block] = []
    for b in raw:
        kind = b.get("type")
        if kind == "text" and not set(b) - {"type", "text"}:
            out.append(TextBlock(b.get("text", "")))
        elif kind == "thinking":
            out.append(ThinkingBlock(b.get("thinking", ""), b.get("signature", "")))
        elif kind == "redacted_thinking":
            out.append(RedactedThinkingBlock(b.get("data", "")))
        elif kind == "tool_use":
            out.append(ToolUseBlock(b["id"], b["name"], b.get("input", {})))
        else:
            out.append(OtherBlock(dict(b)))
    return tuple(out)
