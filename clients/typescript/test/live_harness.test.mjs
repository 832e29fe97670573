// Declared tools answered by this client against the live gateway: the session's harness
// stream, result idempotency, the tenant's pool, and the ledger example. The session's model
// is tests/e2e/policies/tsledger.json: two run_query calls, then a report of the last answer.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { test } from "node:test";

import { ToolCallAlreadyAnsweredError, UnknownToolCallError, poolWorker, runHarness } from "../src/index.js";
import { runQuery } from "../examples/ledger_harness.mjs";
import { GATEWAY_URL, SKIP, ended, liveClient, serviceClient, waitFor } from "./live_env.mjs";

const options = { skip: SKIP, timeout: 120_000 };
const LEDGER = { model: "scripted:tsledger", tools: [runQuery], client_tool_timeout_s: 600 };

async function ledgerSession(client) {
  const created = await client.sessions.create({ message: "Analyze last quarter's revenue.", config: LEDGER });
  return created.session_id;
}

test("runHarness answers every call until the session ends; meanwhile the session waits for the client", options, async () => {
  const client = liveClient();
  const sessionId = await ledgerSession(client);
  const seen = [];
  const watched = { ...runQuery, run: async (input, call) => {
    // The session as the archive has it, which may lag the stream by a moment.
    const session = await waitFor(async () => {
      const read = await client.sessions.get(sessionId);
      return read.pending_client_calls?.includes(call.tool_call_id) ? read : undefined;
    }, `${call.tool_call_id} pending in the session`, 15_000);
    seen.push([session.status, session.pending_client_calls, call.tool_call_id]);
    return runQuery.run(input, call);
  } };
  const end = await runHarness(client, sessionId, [watched]);
  assert.equal(end.reason, "completed");
  assert.equal(seen.length, 2);
  for (const [status, pending, id] of seen) {
    assert.equal(status, "waiting_client");
    assert.deepEqual(pending, [id]);
  }
  await ended(client, sessionId); // the archive has caught up with the log the stream read
  const { data } = await client.sessions.events(sessionId, { type: ["tool_result"] });
  assert.deepEqual(data.map((e) => e.payload.is_error), [false, false]);
  assert.match(data[1].payload.output, /Acme/);
});

test("an unanswered call is issued again; the same answer twice is recorded once; another answer is refused", options, async () => {
  const client = liveClient();
  const sessionId = await ledgerSession(client);
  let first;
  for await (const call of client.sessions.toolCalls(sessionId)) {
    first = call;
    break; // the harness dies before answering
  }
  let again;
  const stream = client.sessions.wake(sessionId);
  for await (const call of stream) {
    again = call;
    break;
  }
  assert.equal(again.tool_call_id, first.tool_call_id);
  assert.deepEqual(again.input, first.input);
  const output = JSON.stringify(runQuery.run(again.input));
  const recorded = await again.submit(output);
  assert.equal(recorded.status, "done");
  assert.equal(recorded.outcome, "tool_result");
  const repeated = await stream.submitToolResult(again.tool_call_id, output);
  assert.equal(repeated.status, "done");
  assert.equal(repeated.seq, recorded.seq);
  const other = await stream.submitToolResult(again.tool_call_id, "something else").catch((e) => e);
  assert.ok(other instanceof ToolCallAlreadyAnsweredError, String(other));
  assert.equal(other.status, 409);
  const unknown = await stream.submitToolResult("no-such-call", "x").catch((e) => e);
  assert.ok(unknown instanceof UnknownToolCallError, String(unknown));
  assert.equal((await runHarness(client, sessionId, [runQuery], { wake: false })).reason, "completed");
  await ended(client, sessionId);
  const { data } = await client.sessions.events(sessionId, { type: ["tool_result"] });
  assert.equal(data.length, 2, "one result per call");
});

test("a pool worker with a service key answers calls of the tenant's sessions", options, async () => {
  const client = liveClient();
  const sessionIds = [await ledgerSession(client), await ledgerSession(client)];
  const worker = poolWorker(serviceClient(), [runQuery], { concurrency: 2 });
  const running = worker.run();
  try {
    for (const sessionId of sessionIds) assert.equal((await ended(client, sessionId, 90_000)).ended_reason, "completed");
  } finally {
    worker.stop();
    await running;
  }
  const { data } = await client.sessions.events(sessionIds[0], { type: ["tool_result"] });
  assert.ok(data.every((e) => e.actor.startsWith("service:")), "answered by the service");
});

test("the ledger example creates a session and answers it to the end", options, async () => {
  const example = fileURLToPath(new URL("../examples/ledger_harness.mjs", import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, [example], {
    env: { ...process.env, WAKELINE_GATEWAY_URL: GATEWAY_URL, WAKELINE_API_KEY: process.env.WAKELINE_TEST_API_KEY,
      WAKELINE_MODEL: "scripted:tsledger" },
    timeout: 90_000,
  });
  assert.match(stdout, /ended \(completed\): Report: the February outlier is explained by .*Acme/s);
});
