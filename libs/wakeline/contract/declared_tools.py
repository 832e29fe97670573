"""Tools a session declares for its own harness: `{name, description, input_schema}`.

A declared tool is run by the user's code, not by our runners: the brain records the
model's call in the log and waits for a result posted back (docs/your-own-tools.md). The
definition is bound in `session_created` with the rest of the config, so it is hashed with
it, immutable for the session and inherited by forks. Here live the definition's shape,
its bounds and the JSON Schema checks (a maintained validator, `jsonschema`, Draft 2020-12):
the schema itself when the session is created, and the model's input when it calls.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_DECLARED_TOOLS = 64
MAX_DECLARED_BYTES = 64 * 1024
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"


class ToolDefinition(BaseModel):
    """One declared tool, exactly as the model is shown it (the Messages API tool shape)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=TOOL_NAME_PATTERN, description="Unique in the session; no built-in name.")
    description: str = Field(default="", max_length=16_384)
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object"},
        description="A JSON Schema (Draft 2020-12) of the tool's input; its type must be object.")

    @model_validator(mode="after")
    def _schema_is_a_schema(self) -> "ToolDefinition":
        problem = schema_problem(self.input_schema)
        if problem is not None:
            raise ValueError(f"tool {self.name!r}: input_schema {problem}")
        return self

    def api_shape(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why `schema` cannot describe a tool's input, or None. The model's input is always an
    object, so the schema must say so (the Messages API refuses any other).

    Asked wherever a definition is parsed: the create's command, its `session_created` as it is
    sealed, and every later read of that event (a wake, the archiver, the gateway). Checking a
    schema against the 2020-12 metaschema took about 8% of the brain's CPU in a flood of creates
    declaring one small tool (`python -m bench.create_cost`), so the answer is kept per schema,
    by its canonical JSON: a session's schemas never change, and its brain reads them again."""
    try:
        canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):  # not JSON (built in Python): checked as it is, uncached
        return _checked(schema)
    with _ANSWERS_LOCK:
        if canonical in _ANSWERS:
            _ANSWERS.move_to_end(canonical)
            return _ANSWERS[canonical]
    answer = _checked(schema)
    with _ANSWERS_LOCK:
        _ANSWERS[canonical] = answer
        if len(_ANSWERS) > _KEPT:
            _ANSWERS.popitem(last=False)
    return answer


# The newest answers, by canonical schema; a schema is at most MAX_DECLARED_BYTES, so at most ~16 MB.
# Locked: a process may parse on more than one thread (the archiver's consumer runs on a thread of
# its own), and a look-up racing an eviction must not fail a parse.
_KEPT = 256
_ANSWERS: OrderedDict[str, str | None] = OrderedDict()
_ANSWERS_LOCK = threading.Lock()


def _checked(schema: dict[str, Any]) -> str | None:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as err:
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        return f"is not a valid JSON Schema (2020-12) at {where}: {err.message}"[:1000]
    if schema.get("type") != "object":
        return "must have \"type\": \"object\" (a tool's input is a JSON object)"
    return None


def input_problems(definition: ToolDefinition, tool_input: Any) -> str | None:
    """Why the model's input does not fit the tool's schema (every problem, bounded), or None."""
    validator = Draft202012Validator(definition.input_schema)
    errors: list[ValidationError] = sorted(validator.iter_errors(tool_input), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    return "; ".join(f"{'/'.join(str(p) for p in err.absolute_path) or 'input'}: {err.message}"
                     for err in errors[:10])


def declared_size(definitions: list[dict[str, Any]]) -> int:
    """Bytes of the definitions as canonical JSON (keys sorted, compact, UTF-8): the form hashed."""
    return len(json.dumps(definitions, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
