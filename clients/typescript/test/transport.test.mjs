import assert from "node:assert/strict";
import { createServer } from "node:net";
import { test } from "node:test";

import {
  BudgetExhaustedError, ConflictError, IdempotencyKeyReusedError, NotFoundError, QuotaExceededError,
  RateLimitedError, ToolCallAlreadyAnsweredError, UnavailableError, UnknownToolCallError, WakelineClient,
  WakelineConnectionError, WakelineError, backoffMs, parseRetryAfter,
} from "../src/index.js";
import { done, fakeGateway, json, problem } from "./fake_gateway.mjs";

test("every request carries the API key as a bearer token", async () => {
  const gateway = await fakeGateway({ "GET /v1/me": (req, res) => json(res, 200, { principal: "p" }) });
  try {
    assert.deepEqual(await gateway.client().me(), { principal: "p" });
    assert.equal(gateway.requests[0].headers.authorization, "Bearer wkl_test_key");
  } finally {
    await gateway.close();
  }
});

test("a 503 is retried after its Retry-After, with the same Idempotency-Key", async () => {
  const slept = [];
  const gateway = await fakeGateway({
    "POST /v1/sessions/s1/messages": (req, res, body, n) => (n < 3
      ? problem(res, 503, "unavailable", "kafka down", { "retry-after": "2" })
      : json(res, 202, done("s1", "user_message"))),
  });
  try {
    const client = gateway.client({ sleep: async (ms) => slept.push(ms) });
    const answer = await client.sessions.postMessage("s1", "hello");
    assert.equal(answer.outcome, "user_message");
    assert.deepEqual(slept, [2000, 2000]);
    const keys = gateway.requests.map((r) => r.headers["idempotency-key"]);
    assert.equal(keys.length, 3);
    assert.ok(keys[0]);
    assert.equal(new Set(keys).size, 1, "the retries reuse the command's key");
    assert.deepEqual(gateway.requests[2].body, { text: "hello" });
  } finally {
    await gateway.close();
  }
});

test("429 without Retry-After backs off exponentially, and each command gets its own key", async () => {
  const slept = [];
  let calls = 0;
  const gateway = await fakeGateway({
    "POST /v1/sessions/s1/wake": (req, res) => (++calls % 3 ? problem(res, 429, "too_many", "slow down")
      : json(res, 200, done("s1", "woke"))),
  });
  try {
    const client = new WakelineClient({ baseUrl: gateway.url, retry: { baseDelayMs: 100, maxDelayMs: 250 } });
    client.transport.sleep = async (ms) => slept.push(ms);
    await client.sessions.requestWake("s1");
    await client.sessions.requestWake("s1");
    assert.ok(slept[0] >= 50 && slept[0] <= 100, `first wait ${slept[0]}`);
    assert.ok(slept[1] >= 100 && slept[1] <= 200, `second wait ${slept[1]}`);
    const keys = gateway.requests.map((r) => r.headers["idempotency-key"]);
    assert.equal(keys[0], keys[2]);
    assert.notEqual(keys[2], keys[3], "a new command is a new key");
    assert.equal(keys[3], keys[5]);
  } finally {
    await gateway.close();
  }
});

test("a connection cut before the answer is retried with the same key", async () => {
  const gateway = await fakeGateway({
    "POST /v1/sessions": (req, res, body, n) => (n === 1 ? req.socket.destroy() : json(res, 201, done("new", "session_created"))),
  });
  try {
    const answer = await gateway.client().sessions.create({ message: "go" }, { idempotencyKey: "mine-1" });
    assert.equal(answer.session_id, "new");
    assert.deepEqual(gateway.requests.map((r) => r.headers["idempotency-key"]), ["mine-1", "mine-1"]);
  } finally {
    await gateway.close();
  }
});

test("retries stop after maxAttempts with the last problem as a typed error", async () => {
  const gateway = await fakeGateway({ "GET /v1/sessions/s1": (req, res) => problem(res, 503, "unavailable", "pg down") });
  try {
    const client = gateway.client({ retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1 } });
    const err = await client.sessions.get("s1").catch((e) => e);
    assert.ok(err instanceof UnavailableError);
    assert.equal(err.status, 503);
    assert.equal(err.code, "unavailable");
    assert.equal(gateway.requests.length, 3);
  } finally {
    await gateway.close();
  }
});

test("a quota refusal waits its Retry-After each time, then is a QuotaExceededError naming the quota", async () => {
  const slept = [];
  const gateway = await fakeGateway({
    "POST /v1/sessions": (req, res) => json(res, 429, {
      type: "urn:wakeline:problem:quota_exceeded", title: "Too Many Requests", status: 429, detail: "over its quota",
      code: "quota_exceeded", quota: "sessions_per_minute", limit: 2,
    }, { "content-type": "application/problem+json", "retry-after": "37" }),
  });
  try {
    const client = gateway.client({ retry: { maxAttempts: 3 }, sleep: async (ms) => slept.push(ms) });
    const err = await client.sessions.create({ message: "m" }).catch((e) => e);
    assert.ok(err instanceof QuotaExceededError && err instanceof RateLimitedError, String(err));
    assert.deepEqual([err.status, err.code, err.quota, err.limit, err.retryAfterSeconds],
      [429, "quota_exceeded", "sessions_per_minute", 2, 37]);
    assert.deepEqual(slept, [37_000, 37_000]);
    assert.equal(new Set(gateway.requests.map((r) => r.headers["idempotency-key"])).size, 1);
  } finally {
    await gateway.close();
  }
});

test("a gateway that is not there is a WakelineConnectionError after the retries", async () => {
  const port = await closedPort();
  const client = new WakelineClient({ baseUrl: `http://127.0.0.1:${port}`, retry: { maxAttempts: 2, baseDelayMs: 1 } });
  const err = await client.me().catch((e) => e);
  assert.ok(err instanceof WakelineConnectionError, String(err));
  assert.equal(err.status, 0);
  assert.match(err.message, /2 attempt/);
});

test("problems become typed errors by code first, then by status", async () => {
  const gateway = await fakeGateway({
    "GET /v1/sessions/gone": (req, res) => problem(res, 404, "not_found", "no such session"),
    "POST /v1/sessions/s1/tool-results/t1": (req, res) => problem(res, 409, "tool_call_already_answered", "answered"),
    "POST /v1/sessions/s1/tool-results/t2": (req, res) => problem(res, 404, "unknown_tool_call", "no t2"),
    "POST /v1/sessions/s1/messages": (req, res) => problem(res, 409, "conflict", "stale", {}),
    "POST /v1/sessions/s2/messages": (req, res) => problem(res, 409, "budget_exhausted", "budget spent", {}),
    "POST /v1/sessions/s1/cancel": (req, res) => problem(res, 422, "idempotency_key_reused", "other request"),
    "GET /v1/me": (req, res) => {
      res.writeHead(502, { "content-type": "text/html" });
      res.end("<h1>bad gateway</h1>");
    },
  });
  try {
    const client = gateway.client();
    const missing = await client.sessions.get("gone").catch((e) => e);
    assert.ok(missing instanceof NotFoundError && missing instanceof WakelineError);
    assert.equal(missing.detail, "no such session");
    assert.equal(missing.problem.code, "not_found");
    const answered = await client.sessions.submitToolResult("s1", "t1", { output: "x" }).catch((e) => e);
    assert.ok(answered instanceof ToolCallAlreadyAnsweredError && answered instanceof ConflictError);
    assert.equal(answered.status, 409);
    assert.equal(answered.code, "tool_call_already_answered");
    assert.ok(await client.sessions.submitToolResult("s1", "t2", { output: "x" }).catch((e) => e) instanceof UnknownToolCallError);
    const stale = await client.sessions.postMessage("s1", { text: "x", expected_seq: 3 }).catch((e) => e);
    assert.ok(stale instanceof ConflictError && !(stale instanceof ToolCallAlreadyAnsweredError));
    const spent = await client.sessions.postMessage("s2", "more").catch((e) => e);
    assert.ok(spent instanceof BudgetExhaustedError && spent instanceof ConflictError);
    assert.ok(await client.sessions.cancel("s1").catch((e) => e) instanceof IdempotencyKeyReusedError);
    const html = await client.me().catch((e) => e);
    assert.equal(html.status, 502);
    assert.equal(html.code, "http_502");
    assert.match(html.detail, /bad gateway/);
  } finally {
    await gateway.close();
  }
});

test("queries repeat list values and leave out undefined ones", async () => {
  const gateway = await fakeGateway({ "GET /v1/sessions/s1/events": (req, res) => json(res, 200, { data: [] }) });
  try {
    await gateway.client().sessions.events("s1", { after: 2, type: ["tool_call", "woke"], before: undefined });
    assert.equal(gateway.requests[0].url, "/v1/sessions/s1/events?after=2&type=tool_call&type=woke");
  } finally {
    await gateway.close();
  }
});

test("Retry-After reads seconds and HTTP dates; backoff grows to its cap", () => {
  assert.equal(parseRetryAfter("5"), 5000);
  assert.equal(parseRetryAfter(new Date(Date.UTC(2030, 0, 1, 0, 0, 10)).toUTCString(), Date.UTC(2030, 0, 1)), 10_000);
  assert.equal(parseRetryAfter("soon"), undefined);
  const retry = { baseDelayMs: 100, maxDelayMs: 1000, maxRetryAfterMs: 3000 };
  assert.equal(backoffMs(1, retry, null, () => 1), 100);
  assert.equal(backoffMs(4, retry, null, () => 1), 800);
  assert.equal(backoffMs(9, retry, null, () => 0), 500);
  assert.equal(backoffMs(1, retry, "120"), 3000, "a long Retry-After is cut to maxRetryAfterMs");
});

async function closedPort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}
