"""Tool inputs: explicit limits, unknown fields refused, typed failures; schemas for the model."""

from __future__ import annotations

import pytest

from wakeline.contract.tools import MAX_FILE_BYTES, ReadFileInput, tool_schemas
from wakeline_runner.tools import BashResult, ToolError, ToolFailure, parse_input


def test_tool_schemas_are_anthropic_tool_definitions() -> None:
    schemas = tool_schemas()
    assert [s["name"] for s in schemas] == ["bash", "read_file", "write_file", "list_files"]
    for schema in schemas:
        assert set(schema) == {"name", "description", "input_schema"}
        assert schema["description"]
        assert schema["input_schema"]["type"] == "object"
        assert schema["input_schema"]["additionalProperties"] is False
        assert "title" not in schema["input_schema"]
    assert schemas[0]["input_schema"]["required"] == ["command"]


def test_tool_schemas_can_be_limited_to_a_sessions_tools() -> None:
    assert [s["name"] for s in tool_schemas(("read_file", "nope"))] == ["read_file"]


def test_an_unknown_tool_is_a_typed_failure() -> None:
    with pytest.raises(ToolFailure) as caught:
        parse_input("rm_rf", {})
    assert caught.value.kind == "unknown_tool"


@pytest.mark.parametrize("name,data", [
    ("bash", {}),
    ("bash", {"command": ""}),
    ("bash", {"command": "ls", "sudo": True}),
    ("bash", {"command": 7}),
    ("read_file", {"path": "a", "max_bytes": MAX_FILE_BYTES + 1}),
    ("read_file", {"path": "a", "offset": -1}),
    ("read_file", {"path": "a\x00b"}),
    ("write_file", {"path": "a"}),
    ("write_file", {"path": "a", "content": "x" * (MAX_FILE_BYTES + 1)}),
    ("list_files", {"max_entries": 1001}),
])
def test_bad_input_is_an_invalid_input_failure(name: str, data: dict) -> None:
    with pytest.raises(ToolFailure) as caught:
        parse_input(name, data)
    assert caught.value.kind == "invalid_input"


def test_valid_input_gets_its_defaults() -> None:
    parsed = parse_input("read_file", {"path": "notes.txt"})
    assert parsed == ReadFileInput(path="notes.txt", offset=0, max_bytes=64 * 1024)


def test_text_a_tool_returns_never_carries_nul() -> None:
    # Postgres jsonb cannot store \u0000; the result models replace it.
    result = BashResult(exit_code=0, stdout="a\x00b", stderr="\x00")
    assert "\x00" not in result.stdout + result.stderr
    assert "\\u0000" not in result.model_dump_json()
    assert "\x00" not in ToolError(error_kind="crashed", message="x\x00").message
