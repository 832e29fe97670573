// Every route in the gateway's OpenAPI document (clients/openapi.json) has a client method:
// each method is called against a recording fetch, and the routes it reached are compared.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { WakelineClient } from "../src/index.js";

const openapi = JSON.parse(readFileSync(new URL("../../openapi.json", import.meta.url), "utf8"));
const METHODS = ["get", "put", "post", "delete", "patch"];

function templates() {
  return Object.entries(openapi.paths).flatMap(([path, item]) => METHODS.filter((m) => item[m])
    .map((m) => ({ key: `${m.toUpperCase()} ${path}`, method: m.toUpperCase(), pattern: new RegExp(`^${path.replace(/\{[^}]+\}/g, "[^/]+")}$`) })));
}

function recordingClient(reached) {
  const fetch = async (url, init) => {
    reached.push({ method: init.method, path: new URL(url).pathname });
    if (init.headers.accept === "text/event-stream") {
      return new Response(JSON.stringify({ status: 404, code: "not_found", detail: "recorded" }),
        { status: 404, headers: { "content-type": "application/problem+json" } });
    }
    return new Response(JSON.stringify({ data: [], next_cursor: null }), { headers: { "content-type": "application/json" } });
  };
  return new WakelineClient({ baseUrl: "http://gateway.test", apiKey: "k", fetch });
}

async function drain(stream) {
  try {
    for await (const item of stream) void item;
  } catch (err) {
    if (err.status !== 404) throw err;
  }
}

async function callEveryMethod(client) {
  const s = client.sessions;
  const calls = [
    () => client.me(), () => client.health(),
    () => s.create({ message: "m" }), () => s.list(), () => s.get("s"), () => s.delete("s", { reason: "r" }),
    () => s.fork("s", { at_seq: 1, message: "m" }), () => s.tree("s"), () => s.cost("s"),
    () => s.postMessage("s", "m"), () => s.requestWake("s"), () => s.cancel("s"), () => s.approve("s", "t"),
    () => s.deny("s", "t", { reason: "r" }), () => s.takeOver("s"), () => s.handBack("s"),
    () => s.submitToolResult("s", "t", { output: "o" }), () => s.events("s"), () => s.transcript("s"),
    () => s.exportEvents("s"), () => s.replay("s"), () => s.verify("s"), () => s.proof("s"),
    () => drain(s.stream("s", { reconnect: false })), () => drain(s.toolCalls("s")),
    () => client.audit.events(), () => client.audit.exportEvents(), () => client.audit.sessions(),
    () => client.audit.cost(), () => client.audit.verify(), () => client.audit.accessLog(),
    () => client.tenant.retention(), () => client.tenant.setRetention({ keep_days: 30 }),
    () => client.tenant.quotas(), () => client.tenant.setQuotas({ commands_per_second: 10 }),
    () => drain(client.pool.toolCalls({ tools: ["a"] })),
  ];
  for (const call of calls) await call();
}

test("every route of the OpenAPI document is reached by a client method, and no other route", async () => {
  const reached = [];
  await callEveryMethod(recordingClient(reached));
  const routes = templates();
  const covered = new Set();
  const unknown = [];
  for (const { method, path } of reached) {
    const route = routes.find((r) => r.method === method && r.pattern.test(path));
    if (route) covered.add(route.key);
    else unknown.push(`${method} ${path.replace(/^\/v1\/sessions\/s\//, "/v1/sessions/{session_id}/")}`);
  }
  const missing = routes.map((r) => r.key).filter((key) => !covered.has(key));
  assert.deepEqual(missing, [], "routes without a client method");
  assert.deepEqual(unknown, [], "calls to routes the OpenAPI lacks");
});
