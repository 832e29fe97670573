"""Generates wakeline_client/models.py from clients/openapi.json: one pydantic model per schema.

`python clients/python/codegen/models.py` rewrites the module; tests/unit/test_client_openapi.py
fails when the committed module differs from what this makes. Only what the document uses is
handled: $ref, anyOf, a discriminated oneOf (the events), enum and const (as Literal), arrays,
maps, scalars and date-times. Bounds are left to the server, which checks them anyway.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

CLIENTS = Path(__file__).resolve().parents[2]
OPENAPI = CLIENTS / "openapi.json"
TARGET = CLIENTS / "python" / "wakeline_client" / "models.py"
SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}
FORMATS = {"date-time": "datetime", "date": "date"}

HEADER = '''# ruff: noqa: E501 (generated: descriptions and enums stay on one line)
"""The gateway's schemas as pydantic models. GENERATED from clients/openapi.json by
clients/python/codegen/models.py: do not edit; regenerate.

Every model keeps fields the server adds later (`extra="allow"`), so a newer gateway does not
break an older client. `Event` is any event of a session's log, told apart by `type`.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field


class Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
'''


class Generator:
    def __init__(self, schemas: dict[str, Any]):
        self.schemas = schemas
        self.unions: dict[tuple[str, ...], str] = {}  # discriminated members -> alias name

    def annotation(self, schema: dict[str, Any]) -> str:
        if "$ref" in schema:
            return schema["$ref"].rsplit("/", 1)[1]
        if "oneOf" in schema and "discriminator" in schema:
            members = tuple(self.annotation(s) for s in schema["oneOf"])
            return self.unions.setdefault(members, "Event" if not self.unions else f"Union{len(self.unions)}")
        if "anyOf" in schema or "oneOf" in schema:
            parts = [self.annotation(s) for s in schema.get("anyOf", schema.get("oneOf"))]
            return " | ".join(dict.fromkeys(parts))
        if "const" in schema:
            return f"Literal[{schema['const']!r}]"
        if "enum" in schema:
            return f"Literal[{', '.join(repr(v) for v in schema['enum'])}]"
        kind = schema.get("type")
        if kind == "array":
            return f"list[{self.annotation(schema.get('items', {}))}]"
        if kind == "object":
            extra = schema.get("additionalProperties")
            return f"dict[str, {self.annotation(extra) if isinstance(extra, dict) and extra else 'Any'}]"
        if kind == "string" and schema.get("format") in FORMATS:
            return FORMATS[schema["format"]]
        return SCALARS.get(kind, "Any") if isinstance(kind, str) else "Any"

    def field(self, name: str, schema: dict[str, Any], required: bool) -> str:
        annotation = self.annotation(schema)
        if required:
            return f"    {name}: {annotation}"
        if "default" not in schema:
            optional = annotation if "None" in annotation else f"{annotation} | None"
            return f"    {name}: {optional} = None"
        default = schema["default"]
        if isinstance(default, (list, dict)):
            return f"    {name}: {annotation} = Field(default_factory=lambda: {default!r})"
        return f"    {name}: {annotation} = {default!r}"

    def model(self, name: str) -> str:
        schema = self.schemas[name]
        lines = [f"class {name}(Model):"]
        if schema.get("description"):
            lines.append(f"    {json.dumps(schema['description'], ensure_ascii=False)}")
            lines.append("")
        required = set(schema.get("required", ()))
        fields = [self.field(f, s, f in required) for f, s in schema.get("properties", {}).items()]
        return "\n".join(lines + (fields or ["    pass"]))

    def module(self) -> str:
        models = [self.model(name) for name in sorted(self.schemas)]
        aliases = [f"{alias} = Annotated[Union[{', '.join(members)}], Field(discriminator=\"type\")]"
                   for members, alias in self.unions.items()]
        rebuild = ["for _model in list(globals().values()):",
                   "    if isinstance(_model, type) and issubclass(_model, Model) and _model is not Model:",
                   "        _model.model_rebuild()"]
        return "\n\n\n".join([HEADER.rstrip("\n"), *models, "\n".join(aliases), "\n".join(rebuild)]) + "\n"


def generate(document: dict[str, Any]) -> str:
    return Generator(document["components"]["schemas"]).module()


def main() -> int:
    TARGET.write_text(generate(json.loads(OPENAPI.read_text(encoding="utf-8"))), encoding="utf-8")
    print(f"wrote {TARGET}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
