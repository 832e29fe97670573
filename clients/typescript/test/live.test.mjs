// The client against the live gateway (tests/e2e/test_typescript_client.py starts it): the
// routes every session has, the stream's resume, idempotent commands and typed errors.

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  AuthenticationError, ConflictError, InvalidRequestError, NotFoundError, WakelineClient,
} from "../src/index.js";
import { GATEWAY_URL, SKIP, ended, freshKey, liveClient } from "./live_env.mjs";

const options = { skip: SKIP, timeout: 120_000 };

async function finishedSession(client) {
  const created = await client.sessions.create({ message: "go", config: { model: "scripted:tools3" } });
  await ended(client, created.session_id);
  return created.session_id;
}

test("me names the key's principal and role", options, async () => {
  const me = await liveClient().me();
  assert.equal(me.role, "user");
  assert.ok(me.actions.includes("session.create"));
});

test("a create retried under one Idempotency-Key is one session", options, async () => {
  const client = liveClient();
  const key = freshKey();
  const first = await client.sessions.create({ message: "go", config: { model: "scripted:tools3" } }, { idempotencyKey: key });
  const again = await client.sessions.create({ message: "go", config: { model: "scripted:tools3" } }, { idempotencyKey: key });
  assert.equal(first.status, "done");
  assert.equal(again.session_id, first.session_id);
  assert.equal(again.command_id, first.command_id);
  const session = await client.sessions.get(first.session_id);
  assert.equal(session.session_id, first.session_id);
  const listed = [];
  for await (const item of client.sessions.iterate({ limit: 2 })) {
    listed.push(item.session_id);
    if (item.session_id === first.session_id || listed.length > 20) break;
  }
  assert.ok(listed.includes(first.session_id));
});

test("the stream runs to session_ended, and resuming after a seq sends only what follows", options, async () => {
  const client = liveClient();
  const { session_id: sessionId } = await client.sessions.create({ message: "go", config: { model: "scripted:tools3" } });
  const seqs = [];
  const stream = client.sessions.stream(sessionId, { until_end: true });
  for await (const event of stream) seqs.push([event.seq, event.type]);
  assert.deepEqual(seqs.map(([seq]) => seq), seqs.map((_, i) => i + 1), "every seq once, in order");
  assert.equal(seqs[0][1], "session_created");
  assert.equal(seqs.at(-1)[1], "session_ended");
  const resumed = [];
  for await (const event of client.sessions.stream(sessionId, { until_end: true, lastEventId: 3 })) resumed.push(event.seq);
  assert.deepEqual(resumed, seqs.slice(3).map(([seq]) => seq));
  const { data } = await client.sessions.events(sessionId, { after: 0, limit: 1000 });
  assert.equal(data.length, seqs.length);
});

test("reads of a finished session: events, transcript, export, replay, cost, tree, verify", options, async () => {
  const client = liveClient();
  const sessionId = await finishedSession(client);
  const events = await client.sessions.events(sessionId, { type: ["tool_call"] });
  assert.equal(events.count, 3);
  assert.ok(events.data.every((e) => e.type === "tool_call"));
  const exported = await client.sessions.exportEvents(sessionId);
  assert.equal(exported.at(-1).type, "session_ended");
  const transcript = await client.sessions.transcript(sessionId);
  assert.equal(typeof transcript, "object");
  assert.match(await client.sessions.transcript(sessionId, { format: "markdown" }), /Counting lines/);
  const replay = await client.sessions.replay(sessionId);
  assert.equal(replay.count, exported.length);
  const cost = await client.sessions.cost(sessionId);
  assert.equal(cost.session_id, sessionId);
  const tree = await client.sessions.tree(sessionId);
  assert.equal(tree.session_id, sessionId);
  assert.equal((await client.sessions.verify(sessionId)).ok, true);
});

test("a message continues the session, once however often it is sent; a stale expected_seq is a ConflictError", options, async () => {
  const client = liveClient();
  const sessionId = await finishedSession(client);
  const stale = await client.sessions.postMessage(sessionId, { text: "more", expected_seq: 1 }).catch((e) => e);
  assert.ok(stale instanceof ConflictError, String(stale));
  assert.equal(stale.status, 409);
  assert.equal(stale.code, "conflict");
  assert.equal(stale.problem.expected_seq, 1);
  const key = freshKey();
  const posted = await client.sessions.postMessage(sessionId, "more", { idempotencyKey: key });
  const again = await client.sessions.postMessage(sessionId, "more", { idempotencyKey: key });
  assert.equal(again.command_id, posted.command_id, "the same key and request are one command");
  await ended(client, sessionId);
  const { data } = await client.sessions.events(sessionId, { type: ["user_message"] });
  assert.equal(data.length, 2, "the retried message was recorded once");
});

test("errors arrive as typed problems", options, async () => {
  const client = liveClient();
  const missing = await client.sessions.get(`nope-${freshKey()}`).catch((e) => e);
  assert.ok(missing instanceof NotFoundError);
  assert.equal(missing.code, "not_found");
  assert.equal(missing.problem.status, 404);
  const invalid = await client.sessions.list({ limit: 0 }).catch((e) => e);
  assert.ok(invalid instanceof InvalidRequestError);
  assert.equal(invalid.problem.errors[0].where, "query.limit");
  const stranger = new WakelineClient({ baseUrl: GATEWAY_URL, apiKey: "wkl_not_a_key" });
  const refused = await stranger.me().catch((e) => e);
  assert.ok(refused instanceof AuthenticationError);
  assert.equal(refused.status, 401);
});
