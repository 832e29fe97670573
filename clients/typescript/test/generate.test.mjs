import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { OPENAPI, TYPES, render, typeOf } from "../scripts/generate.mjs";

test("src/types.d.ts is what scripts/generate.mjs makes of clients/openapi.json (run `npm run generate`)", () => {
  const expected = render(JSON.parse(readFileSync(OPENAPI, "utf8")));
  assert.equal(readFileSync(TYPES, "utf8"), expected);
});

test("JSON Schema constructs map to TypeScript types", () => {
  assert.equal(typeOf({ anyOf: [{ type: "string" }, { type: "null" }] }, ""), "string | null");
  assert.equal(typeOf({ type: "array", items: { anyOf: [{ type: "integer" }, { $ref: "#/x/Y" }] } }, ""), "(number | Y)[]");
  assert.equal(typeOf({ enum: ["a", "b"] }, ""), "\"a\" | \"b\"");
  assert.equal(typeOf({ const: "tool_call" }, ""), "\"tool_call\"");
  assert.equal(typeOf({ type: "array", prefixItems: [{ type: "string" }, { type: "boolean" }] }, ""), "[string, boolean]");
  assert.equal(typeOf({ type: "object", additionalProperties: { type: "integer" } }, ""), "{\n  [key: string]: number;\n}");
  assert.equal(typeOf({ type: "object", properties: { "a-b": { type: "string" } }, required: ["a-b"] }, ""),
    "{\n  \"a-b\": string;\n}");
  assert.equal(typeOf({}, ""), "unknown");
});
