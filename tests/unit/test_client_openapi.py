"""The Python client against the gateway's OpenAPI document (clients/openapi.json).

The snapshot must be the gateway's current document (`python clients/openapi_snapshot.py`
rewrites it); the client's models must be what the generator makes of it, and its sync
half what unasync makes of the async half; every operation must be in the client's table
with the same query parameters, body and answer schemas, and be called by both clients.
"""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from clients.openapi_snapshot import SNAPSHOT, current_openapi, render
from clients.python.codegen import models as models_codegen
from clients.python.codegen import unasync
from wakeline_client import models, operations
from wakeline_client.tool_calls import ToolResult
from wakeline_client.tools import tool

PACKAGE = Path(operations.__file__).parent
HOW = "regenerate: python clients/openapi_snapshot.py && python clients/python/codegen/models.py"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return json.loads(SNAPSHOT.read_text(encoding="utf-8"))


def test_the_snapshot_is_the_gateways_current_openapi_document() -> None:
    assert SNAPSHOT.read_text(encoding="utf-8") == render(current_openapi()), HOW


def test_the_committed_models_are_what_the_generator_makes_of_the_snapshot(document) -> None:
    assert (PACKAGE / "models.py").read_text(encoding="utf-8") == models_codegen.generate(document), HOW


def test_the_sync_client_is_what_unasync_makes_of_the_async_one() -> None:
    committed = {p.name: p.read_text(encoding="utf-8") for p in (PACKAGE / "_sync").glob("*.py")}
    assert committed == unasync.generated(), "regenerate: python clients/python/codegen/unasync.py"


def _ref(schema: dict[str, Any] | None) -> str | None:
    """The schema's component name, through an optional `anyOf: [ref, null]`."""
    if not schema:
        return None
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[1]
    refs = [s for s in schema.get("anyOf", ()) if "$ref" in s]
    return _ref(refs[0]) if refs else None


def _answer(operation: dict[str, Any]) -> str | None:
    for status, response in sorted(operation["responses"].items()):
        if status.startswith("2"):
            return _ref(response.get("content", {}).get("application/json", {}).get("schema"))
    return None


def drift(document: dict[str, Any]) -> list[str]:
    """Each difference between the document's operations and the client's table."""
    problems, table = [], {(op.method, op.path): (name, op) for name, op in operations.ALL.items()}
    seen = set()
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            key = (method.upper(), path)
            seen.add(key)
            if key not in table:
                problems.append(f"{method.upper()} {path}: no operation in the client")
                continue
            name, op = table[key]
            parameters = operation.get("parameters", [])
            query = {p["name"] for p in parameters if p["in"] == "query"}
            command = any(p["in"] == "header" and p["name"].lower() == "idempotency-key" for p in parameters)
            body = _ref(operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema"))
            wanted = {"query": query, "command": command, "body": body, "response": _answer(operation)}
            have = {"query": set(op.query), "command": op.command, "body": op.body and op.body.__name__,
                    "response": op.response and op.response.__name__}
            problems += [f"{name}: {k} is {have[k]!r}, the document says {wanted[k]!r}"
                         for k in wanted if wanted[k] != have[k]]
    problems += [f"{name}: {op.method} {op.path} is not in the document"
                 for key, (name, op) in table.items() if key not in seen]
    return problems


def test_every_operation_of_the_document_is_in_the_client_as_the_document_says(document) -> None:
    assert drift(document) == []


def test_the_drift_check_sees_a_new_route_a_new_parameter_and_a_changed_answer(document) -> None:
    changed = copy.deepcopy(document)
    changed["paths"]["/v1/new"] = {"get": {"responses": {}}}
    get_session = changed["paths"]["/v1/sessions/{session_id}"]["get"]
    get_session["parameters"].append({"name": "fresh", "in": "query"})
    get_session["responses"]["200"]["content"]["application/json"]["schema"]["$ref"] = "#/x/CostPublic"
    found = drift(changed)
    assert any("/v1/new: no operation" in p for p in found)
    assert any(p.startswith("GET_SESSION: query") for p in found)
    assert any(p.startswith("GET_SESSION: response") for p in found)


def _used_operations(directory: Path) -> set[str]:
    used = set()
    for module in directory.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ops":
                used.add(node.attr)
    return used


@pytest.mark.parametrize("half", ["_async", "_sync"])
def test_every_operation_is_called_by_the_client(half) -> None:
    assert set(operations.ALL) - _used_operations(PACKAGE / half) == set()


def test_every_model_has_the_fields_and_required_fields_of_its_schema(document) -> None:
    for name, schema in document["components"]["schemas"].items():
        model = getattr(models, name)
        fields = model.model_fields
        assert set(fields) == set(schema.get("properties", {})), name
        assert {f for f, info in fields.items() if info.is_required()} == set(schema.get("required", ())), name


def test_the_harness_shapes_are_the_documents(document) -> None:
    schemas = document["components"]["schemas"]
    result = schemas["ToolResultCreate"]
    assert set(ToolResult.model_fields) == set(result["properties"])
    assert {f for f, i in ToolResult.model_fields.items() if i.is_required()} == set(result["required"])

    @tool
    def lookup(order_id: str) -> str:
        """Finds an order."""
        return order_id

    assert set(lookup.definition) == set(schemas["ToolDefinition"]["properties"])
    assert models.SessionConfig(tools=["bash", lookup.definition]).tools[1].name == "lookup"
