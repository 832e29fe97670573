import assert from "node:assert/strict";
import { test } from "node:test";

import { ToolCallAlreadyAnsweredError, poolWorker, runHarness, tool } from "../src/index.js";
import { done, fakeGateway, json, problem, sse } from "./fake_gateway.mjs";

const event = (seq, type) => ({ session_id: "s1", seq, type, payload: {} });

test("a dropped event stream resumes with Last-Event-ID and ends after session_ended when until_end", async () => {
  const gateway = await fakeGateway({
    "GET /v1/sessions/s1/stream": (req, res, body, n) => {
      const out = sse(res);
      if (n === 1) {
        out.frame("user_message", event(1, "user_message"), 1);
        out.frame("delta", { session_id: "s1", turn: 1, call: "c", index: 0, kind: "text", text: "hi" });
        out.frame("model_turn", event(2, "model_turn"), 2);
        out.drop();
      } else {
        out.comment("heartbeat");
        out.frame("session_ended", event(3, "session_ended"), 3);
        out.end();
      }
    },
  });
  try {
    const stream = gateway.client().sessions.stream("s1", { until_end: true, deltas: true, after: 0 });
    const seen = [];
    for await (const item of stream) seen.push(item.type === "delta" ? `delta:${item.text}` : item.seq);
    assert.deepEqual(seen, [1, "delta:hi", 2, 3]);
    assert.equal(stream.lastEventId, "3");
    const [first, second] = gateway.requests;
    assert.equal(first.url, "/v1/sessions/s1/stream?after=0&until_end=true&deltas=true");
    assert.equal(first.headers["last-event-id"], undefined);
    assert.equal(second.headers["last-event-id"], "2");
    assert.equal(second.url, "/v1/sessions/s1/stream?until_end=true&deltas=true");
  } finally {
    await gateway.close();
  }
});

test("a stream that goes quiet past idleTimeoutMs is opened again", async () => {
  const gateway = await fakeGateway({
    "GET /v1/sessions/s1/stream": (req, res, body, n) => {
      const out = sse(res);
      if (n === 2) out.frame("deleted", event(5, "deleted"), 5);
    },
  });
  try {
    const seen = [];
    for await (const item of gateway.client().sessions.stream("s1", { idleTimeoutMs: 100 })) seen.push(item.type);
    assert.deepEqual(seen, ["deleted"]);
    assert.equal(gateway.requests.length, 2);
  } finally {
    await gateway.close();
  }
});

function toolCall(id, name, input, seq) {
  return { session_id: "s1", tool_call_id: id, name, input, seq };
}

test("runHarness wakes, answers each call once across reconnects, turns throws into is_error, ends with the session", async () => {
  const results = {};
  const gateway = await fakeGateway({
    "POST /v1/sessions/s1/wake": (req, res) => json(res, 202, { ...done("s1"), status: "pending" }),
    "GET /v1/sessions/s1/tool-calls/stream": (req, res, body, n) => {
      const out = sse(res);
      out.frame("tool_call", toolCall("t1", "add", { a: 2, b: 3 }, 4), 4);
      out.frame("tool_call", toolCall("t2", "explode", {}, 5), 5);
      if (Object.keys(results).length < 3) return out.drop(); // re-issued below, t1 among them
      out.frame("tool_call", toolCall("t3", "nosuch", {}, 7), 7);
      out.frame("session_ended", { session_id: "s1", seq: 9, reason: "completed" }, 9);
      out.end();
    },
    "POST /v1/sessions/s1/tool-results/t1": answer, "POST /v1/sessions/s1/tool-results/t2": answer,
    "POST /v1/sessions/s1/tool-results/t3": answer,
  });
  function answer(req, res, body) {
    const id = req.url.split("/").pop().split("?")[0];
    results[id] = body;
    if (id === "t2") results.dropped = true;
    json(res, 200, done("s1"));
  }
  try {
    const add = tool({ name: "add", inputSchema: { type: "object" }, run: ({ a, b }) => ({ sum: a + b }) });
    const explode = tool({ name: "explode", run: () => { throw new RangeError("out of range"); } });
    const ended = await runHarness(gateway.client(), "s1", [add, explode]);
    assert.deepEqual(ended, { session_id: "s1", seq: 9, reason: "completed" });
    assert.deepEqual(results.t1, { output: "{\"sum\":5}", is_error: false });
    assert.deepEqual(results.t2, { output: "RangeError: out of range", is_error: true });
    assert.equal(results.t3.is_error, true);
    assert.match(results.t3.output, /no tool named "nosuch"/);
    const paths = gateway.requests.map((r) => `${r.method} ${r.path}`);
    assert.equal(paths[0], "POST /v1/sessions/s1/wake");
    assert.equal(paths.filter((p) => p.endsWith("/wake")).length, 1, "wakes once, not on each reconnect");
    assert.equal(paths.filter((p) => p.endsWith("/t1")).length, 1, "a re-issued call already answered is skipped");
  } finally {
    await gateway.close();
  }
});

test("call.submit retries a 503 with its key; another answer recorded first reaches onError, not the loop", async () => {
  const gateway = await fakeGateway({
    "GET /v1/sessions/s1/tool-calls/stream": (req, res) => {
      const out = sse(res);
      out.frame("tool_call", toolCall("t1", "echo", { x: 1 }, 4), 4);
      out.frame("tool_call", toolCall("t2", "echo", { x: 2 }, 5), 5);
      out.frame("session_ended", { session_id: "s1", seq: 6, reason: "completed" }, 6);
      out.end();
    },
    "POST /v1/sessions/s1/tool-results/t1": (req, res, body, n) => (n === 2 ? problem(res, 503, "unavailable", "x")
      : json(res, 200, done("s1"))),
    "POST /v1/sessions/s1/tool-results/t2": (req, res) => problem(res, 409, "tool_call_already_answered", "other answer"),
  });
  try {
    const errors = [];
    const echo = tool({ name: "echo", run: (input) => JSON.stringify(input) });
    await runHarness(gateway.client(), "s1", [echo], { wake: false, onError: (err) => errors.push(err) });
    const t1 = gateway.requests.filter((r) => r.path.endsWith("/t1"));
    assert.equal(t1.length, 2);
    assert.equal(t1[0].headers["idempotency-key"], t1[1].headers["idempotency-key"]);
    assert.equal(errors.length, 1);
    assert.ok(errors[0] instanceof ToolCallAlreadyAnsweredError);
  } finally {
    await gateway.close();
  }
});

test("for await over wake() with call.submit, and leaving the loop closes the connection", async () => {
  let closed;
  const gateway = await fakeGateway({
    "POST /v1/sessions/s1/wake": (req, res) => json(res, 200, done("s1", "woke")),
    "GET /v1/sessions/s1/tool-calls/stream": (req, res) => {
      closed = new Promise((resolve) => res.on("close", resolve));
      sse(res).frame("tool_call", toolCall("t1", "echo", { q: "?" }, 4), 4);
    },
    "POST /v1/sessions/s1/tool-results/t1": (req, res) => json(res, 200, done("s1")),
  });
  try {
    for await (const call of gateway.client().sessions.wake("s1")) {
      assert.equal(call.name, "echo");
      assert.deepEqual(call.input, { q: "?" });
      const recorded = await call.submit("answer", { isError: false });
      assert.equal(recorded.outcome, "tool_result");
      break;
    }
    await closed;
    assert.deepEqual(gateway.requests.at(-1).body, { output: "answer", is_error: false });
  } finally {
    await gateway.close();
  }
});

test("a 404 on the tool-call stream is thrown, not retried", async () => {
  const gateway = await fakeGateway({});
  try {
    const err = await runHarness(gateway.client(), "gone", [], { wake: false }).catch((e) => e);
    assert.equal(err.status, 404);
    assert.equal(gateway.requests.length, 1);
  } finally {
    await gateway.close();
  }
});

test("a pool worker asks for its tools, answers into each call's own session, and stops", async () => {
  const answered = [];
  let worker;
  const gateway = await fakeGateway({
    "GET /v1/tool-calls/stream": (req, res) => {
      const out = sse(res);
      out.frame("tool_call", { ...toolCall("t1", "upper", { text: "a" }, 3), session_id: "sa", lease_expires_at: "x" }, 3);
      out.frame("tool_call", { ...toolCall("t2", "upper", { text: "b" }, 8), session_id: "sb", lease_expires_at: "x" }, 8);
    },
    "POST /v1/sessions/sa/tool-results/t1": record, "POST /v1/sessions/sb/tool-results/t2": record,
  });
  function record(req, res, body) {
    answered.push([req.url.split("?")[0], body.output]);
    json(res, 200, done("s"));
    if (answered.length === 2) worker.stop();
  }
  try {
    const upper = tool({ name: "upper", run: ({ text }) => text.toUpperCase() });
    const lower = tool({ name: "lower", run: ({ text }) => text.toLowerCase() });
    worker = poolWorker(gateway.client(), [upper, lower]);
    await worker.run();
    assert.equal(gateway.requests[0].url, "/v1/tool-calls/stream?tools=upper%2Clower");
    assert.deepEqual(answered, [["/v1/sessions/sa/tool-results/t1", "A"], ["/v1/sessions/sb/tool-results/t2", "B"]]);
  } finally {
    await gateway.close();
  }
});

test("a tool serializes as its declaration in a session's config", () => {
  const query = tool({ name: "run_query", description: "Ask the ledger", inputSchema: { type: "object" }, run: () => "" });
  assert.deepEqual(JSON.parse(JSON.stringify({ tools: ["bash", query] })),
    { tools: ["bash", { name: "run_query", description: "Ask the ledger", input_schema: { type: "object" } }] });
});
