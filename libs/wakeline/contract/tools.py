"""The tools a model is offered: names, input models with their limits, and their schemas.

Both sides of a tool call need these: the brain describes the tools to the model
(`tool_schemas()`, Anthropic Messages API tool format) and the runner validates what the
model asked for against the same input models. How a tool runs, what it returns and how
it fails live with the runner (`wakeline_runner.tools`, `files`, `sandbox`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

MAX_FILE_BYTES = 1024 * 1024


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("path contains a NUL byte")
    return value


WorkPath = Annotated[str, Field(min_length=1, max_length=4096, description=(
    "Path relative to the session's work directory (or absolute inside it).")), AfterValidator(_no_nul)]


class ToolInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BashInput(ToolInput):
    command: str = Field(min_length=1, max_length=100_000, description="A bash script, run with `bash -c`.")


class ReadFileInput(ToolInput):
    path: WorkPath
    offset: int = Field(default=0, ge=0, description="Byte offset to start reading at.")
    max_bytes: int = Field(default=64 * 1024, ge=1, le=MAX_FILE_BYTES)


class WriteFileInput(ToolInput):
    # Whole-file writes only (no append): a write re-run after a crash is then harmless.
    path: WorkPath
    content: str = Field(max_length=MAX_FILE_BYTES)
    create_dirs: bool = True


class ListFilesInput(ToolInput):
    path: WorkPath = "."
    recursive: bool = False
    max_entries: int = Field(default=200, ge=1, le=1000)


TOOLS: dict[str, tuple[type[ToolInput], str]] = {
    "bash": (BashInput, "Run a bash script in the session's sandbox (working directory = the session's "
                        "files, no network). Returns exit code, stdout and stderr (each capped). "
                        "Background processes are stopped when the script ends."),
    "read_file": (ReadFileInput, "Read a text file from the session's work directory."),
    "write_file": (WriteFileInput, "Create or overwrite a file in the session's work directory."),
    "list_files": (ListFilesInput, "List files in a directory of the session's work directory."),
}


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
