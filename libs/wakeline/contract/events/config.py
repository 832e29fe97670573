"""`SessionConfig`: what `session_created` (or `forked`) binds for a session's lifetime.

The system prompt, the tools (built-in names and the tools a session declares for its own
harness, `declared_tools.py`), the model and its limits (turns, tokens, the first budget).
Checked when a session is created; never changed after.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from wakeline.contract.budget import Budget
from wakeline.contract.declared_tools import MAX_DECLARED_BYTES, MAX_DECLARED_TOOLS, ToolDefinition, declared_size
from wakeline.contract.events.frozen import Frozen


def _tool_kind(value: Any) -> str:
    return "builtin" if isinstance(value, str) else "declared"


# A built-in tool by name (run by our runners), or a tool the session declares for its own
# harness. Tagged, so a bad definition is reported as one, not also as "not a string".
ToolEntry = Annotated[Union[Annotated[str, Tag("builtin")], Annotated[ToolDefinition, Tag("declared")]],
                      Discriminator(_tool_kind)]
BUILTIN_TOOL_NAMES = frozenset({"bash", "read_file", "write_file", "list_files"})  # wakeline.contract.tools.TOOLS


class SessionConfig(Frozen):
    """Bound once by `session_created`; immutable for the session's lifetime."""

    system_prompt: str = "You are a careful agent. Use the tools to do the task, then report."
    tools: tuple[ToolEntry, ...] = ("bash", "read_file", "write_file", "list_files")
    model: str = "scripted:default"
    max_turns: int = Field(default=20, ge=1, le=10_000)
    # Bounded so a request can never carry a number no model or column can take.
    max_tokens: int = Field(default=4096, ge=1, le=1_000_000)
    context_window: int = Field(default=200_000, ge=1024, le=100_000_000)
    tool_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    require_approval: tuple[str, ...] = ()
    # Extended thinking (Claude): the model may think this many tokens before it answers;
    # None is off. Left out of the dump when None so configs sealed before it keep their
    # canonical JSON (and hash). The API wants 1024 <= budget < max_tokens.
    thinking_budget: int | None = Field(default=None, ge=1024, le=1_000_000, exclude_if=lambda v: v is None)
    # The session's memory file (issue 11): a file in the sandbox's work dir, relative to it,
    # that each compaction re-reads and re-injects whole after its summary. None: no memory
    # file; left out of the dump then, so configs sealed before it keep their hash.
    memory_file: str | None = Field(default=None, min_length=1, max_length=255, exclude_if=lambda v: v is None)
    # How long a declared tool's call waits for the harness before the model gets an error
    # result saying no harness answered; None (left out of the dump): as long as the session lives.
    client_tool_timeout_s: float | None = Field(default=None, gt=0, le=30 * 86400, exclude_if=lambda v: v is None)
    # What the session's model calls may spend (issue 34): reaching a cap ends the session
    # `budget` before its next model call; its owner continues it with a message carrying a
    # raised budget. The budget in force is the log's (`budget_changed`), this is the first.
    # None (left out of the dump, so configs sealed before it keep their hash): no cap.
    budget: Budget | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="after")
    def _budget_below_max_tokens(self) -> "SessionConfig":
        if self.thinking_budget is not None and self.thinking_budget >= self.max_tokens:
            raise ValueError(f"thinking_budget ({self.thinking_budget}) must be below max_tokens ({self.max_tokens})")
        return self

    @model_validator(mode="after")
    def _declared_tools_bounded(self) -> "SessionConfig":
        declared = self.declared_tools()
        if len(declared) > MAX_DECLARED_TOOLS:
            raise ValueError(f"at most {MAX_DECLARED_TOOLS} declared tools, got {len(declared)}")
        seen: set[str] = set()
        for tool in declared.values():
            if tool.name in BUILTIN_TOOL_NAMES:
                raise ValueError(f"tool {tool.name!r}: the name is a built-in tool's; declare it under another name")
        for name in self.tool_names():
            if name in seen:
                raise ValueError(f"tool {name!r} is listed twice")
            seen.add(name)
        size = declared_size([t.api_shape() for t in declared.values()])
        if size > MAX_DECLARED_BYTES:
            raise ValueError(f"declared tools take {size} bytes as JSON; at most {MAX_DECLARED_BYTES}")
        return self

    def builtin_tools(self) -> tuple[str, ...]:
        """The built-in tools' names, in the order listed: these calls go to the runners."""
        return tuple(t for t in self.tools if isinstance(t, str))

    def declared_tools(self) -> dict[str, ToolDefinition]:
        """The tools the session's own harness answers, by name, in the order declared."""
        return {t.name: t for t in self.tools if isinstance(t, ToolDefinition)}

    def tool_names(self) -> tuple[str, ...]:
        return tuple(t if isinstance(t, str) else t.name for t in self.tools)

    @field_validator("memory_file")
    @classmethod
    def _memory_file_inside_work_dir(cls, value: str | None) -> str | None:
        """A relative path that stays in the work dir: the runner confines it anyway, but a
        config that names a file it can never read is refused when the session is created."""
        if value is None:
            return None
        if value.startswith("/") or "\\" in value or "\0" in value:
            raise ValueError("memory_file must be a relative path inside the work dir (no leading /, no \\, no NUL)")
        parts = value.split("/")
        if any(part in ("", ".", "..") for part in parts):
            raise ValueError("memory_file must name a file inside the work dir: no '..', '.' or empty path parts")
        return value
