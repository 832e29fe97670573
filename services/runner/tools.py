"""What the runner's tools return: one result model each, plus `ToolError` and `ToolFailure`.

The inputs (names, models, limits, the schemas the model is offered) live in
`wakeline.contract.tools`, shared with the brain; `parse_input` validates a call against them.
How the tools run lives in `files.py` and `sandbox.py`; this module only knows shapes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from wakeline.contract.tools import TOOLS, ToolInput

ErrorKind = Literal[
    "invalid_input", "unknown_tool", "timeout", "not_found", "path_escape", "too_large",
    "permission_denied", "crashed", "id_conflict", "expired",
]

# Text a tool returns ends up in Postgres jsonb, which cannot store NUL (\u0000).
Text = Annotated[str, AfterValidator(lambda value: value.replace("\x00", "\ufffd"))]


class ToolOutput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolFailure(Exception):
    """Raised inside a tool; the executor turns it into a `ToolError` result."""

    def __init__(self, kind: ErrorKind, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.kind, self.message, self.details = kind, message, details


class ToolError(ToolOutput):
    error_kind: ErrorKind
    message: Text
    details: dict[str, Any] | None = None


class BashResult(ToolOutput):
    exit_code: int | None
    signal: int | None = None
    stdout: Text
    stderr: Text
    stdout_truncated: bool = False
    stderr_truncated: bool = False


class ReadFileResult(ToolOutput):
    path: str
    content: Text
    size: int
    offset: int
    truncated: bool


class WriteFileResult(ToolOutput):
    path: str
    bytes_written: int


class FileEntry(ToolOutput):
    path: str
    type: Literal["file", "dir", "symlink", "other"]
    size: int


class ListFilesResult(ToolOutput):
    path: str
    entries: list[FileEntry]
    truncated: bool


def parse_input(name: str, data: dict[str, Any]) -> ToolInput:
    """Validates a tool call's input; raises `ToolFailure` (unknown_tool, invalid_input)."""
    if name not in TOOLS:
        raise ToolFailure("unknown_tool", f"no tool named {name!r}; tools: {sorted(TOOLS)}")
    try:
        return TOOLS[name][0].model_validate(data)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in err.errors()[:5])
        raise ToolFailure("invalid_input", problems) from err
