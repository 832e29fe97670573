"""The tools a model may call: one input model and one result model each, plus `ToolError`.

Inputs forbid unknown fields and carry explicit limits; `tool_schemas()` is what the
brain hands the model (Anthropic Messages API tool format). How the tools run lives in
`files.py` and `sandbox.py`; this module only knows their shapes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

ErrorKind = Literal[
    "invalid_input", "unknown_tool", "timeout", "not_found", "path_escape", "too_large",
    "permission_denied", "crashed", "id_conflict", "expired",
]
MAX_FILE_BYTES = 1024 * 1024


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("path contains a NUL byte")
    return value


# Text a tool returns ends up in Postgres jsonb, which cannot store NUL (\u0000).
Text = Annotated[str, AfterValidator(lambda value: value.replace("\x00", "\ufffd"))]

WorkPath = Annotated[str, Field(min_length=1, max_length=4096, description=(
    "Path relative to the session's work directory (or absolute inside it).")), AfterValidator(_no_nul)]


class ToolInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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


class BashInput(ToolInput):
    command: str = Field(min_length=1, max_length=100_000, description="A bash script, run with `bash -c`.")


class BashResult(ToolOutput):
    exit_code: int | None
    signal: int | None = None
    stdout: Text
    stderr: Text
    stdout_truncated: bool = False
    stderr_truncated: bool = False


class ReadFileInput(ToolInput):
    path: WorkPath
    offset: int = Field(default=0, ge=0, description="Byte offset to start reading at.")
    max_bytes: int = Field(default=64 * 1024, ge=1, le=MAX_FILE_BYTES)


class ReadFileResult(ToolOutput):
    path: str
    content: Text
    size: int
    offset: int
    truncated: bool


class WriteFileInput(ToolInput):
    # Whole-file writes only (no append): a write re-run after a crash is then harmless.
    path: WorkPath
    content: str = Field(max_length=MAX_FILE_BYTES)
    create_dirs: bool = True


class WriteFileResult(ToolOutput):
    path: str
    bytes_written: int


class ListFilesInput(ToolInput):
    path: WorkPath = "."
    recursive: bool = False
    max_entries: int = Field(default=200, ge=1, le=1000)


class FileEntry(ToolOutput):
    path: str
    type: Literal["file", "dir", "symlink", "other"]
    size: int


class ListFilesResult(ToolOutput):
    path: str
    entries: list[FileEntry]
    truncated: bool


TOOLS: dict[str, tuple[type[ToolInput], str]] = {
    "bash": (BashInput, "Run a bash script in the session's sandbox (working directory = the session's "
                        "files, no network). Returns exit code, stdout and stderr (each capped). "
                        "Background processes are stopped when the script ends."),
    "read_file": (ReadFileInput, "Read a text file from the session's work directory."),
    "write_file": (WriteFileInput, "Create or overwrite a file in the session's work directory."),
    "list_files": (ListFilesInput, "List files in a directory of the session's work directory."),
}


def parse_input(name: str, data: dict[str, Any]) -> ToolInput:
    """Validates a tool call's input; raises `ToolFailure` (unknown_tool, invalid_input)."""
    if name not in TOOLS:
        raise ToolFailure("unknown_tool", f"no tool named {name!r}; tools: {sorted(TOOLS)}")
    try:
        return TOOLS[name][0].model_validate(data)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in err.errors()[:5])
        raise ToolFailure("invalid_input", problems) from err


def tool_schemas(names: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Tool definitions for the Anthropic Messages API: name, description, input_schema."""
    chosen = TOOLS if names is None else {n: TOOLS[n] for n in names if n in TOOLS}
    return [{"name": name, "description": description, "input_schema": _schema(model)}
            for name, (model, description) in chosen.items()]


def _schema(model: type[ToolInput]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema
