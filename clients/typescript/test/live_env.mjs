// What the live tests need: a running gateway and keys for it, passed in the environment by
// tests/e2e/test_typescript_client.py. Without them the live tests are skipped (node only;
// the pytest that runs them under `make test` fails instead when node is missing in CI).

import { randomUUID } from "node:crypto";

import { WakelineClient } from "../src/index.js";

export const GATEWAY_URL = process.env.WAKELINE_TEST_GATEWAY_URL;
export const SKIP = GATEWAY_URL ? false : "no live gateway: tests/e2e/test_typescript_client.py sets WAKELINE_TEST_GATEWAY_URL";

export function liveClient(key = process.env.WAKELINE_TEST_API_KEY) {
  return new WakelineClient({ baseUrl: GATEWAY_URL, apiKey: key, retry: { maxAttempts: 8, baseDelayMs: 100, maxDelayMs: 2000 } });
}

export const serviceClient = () => liveClient(process.env.WAKELINE_TEST_SERVICE_KEY);

export const freshKey = () => `ts-${randomUUID()}`;

/** Polls `probe` every 200 ms until it returns something truthy, for at most `timeoutMs`. */
export async function waitFor(probe, what, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

export async function ended(client, sessionId, timeoutMs) {
  return waitFor(async () => {
    const session = await client.sessions.get(sessionId);
    return session.status === "ended" ? session : undefined;
  }, `session ${sessionId} to end`, timeoutMs);
}
