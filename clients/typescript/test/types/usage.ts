// Compiled by `tsc -p tsconfig.json` (tests/e2e/test_typescript_client.py installs it): the
// public API as a TypeScript user writes it. Never run.

import {
  QuotaExceededError, ToolCallAlreadyAnsweredError, WakelineClient, WakelineError, poolWorker, runHarness, tool,
  type Event, type SessionPublic,
} from "@wakeline/client";

export async function usage(): Promise<void> {
  const client = new WakelineClient({ baseUrl: "http://127.0.0.1:18080", apiKey: "wkl_x", retry: { maxAttempts: 3 } });
  const runQuery = tool<{ table: string }>({
    name: "run_query",
    description: "Rows of a ledger table",
    inputSchema: { type: "object", properties: { table: { type: "string" } }, required: ["table"] },
    run: ({ table }) => [{ table }],
  });
  const created = await client.sessions.create({ message: "go", config: { tools: ["bash", runQuery], model: "scripted:x" } },
    { idempotencyKey: "k1" });
  const session: SessionPublic | null | undefined = created.session;
  const id: string = created.session_id;
  const page = await client.sessions.list({ limit: 10, status: "waiting_client" });
  page.data.forEach((s) => s.pending_client_calls?.join(","));
  for await (const item of client.sessions.stream(id, { until_end: true })) {
    if (item.type === "tool_call") {
      const call: Event = item;
      void call.payload.tool_call_id;
    }
  }
  for await (const call of client.sessions.wake(id)) {
    await call.submit({ rows: 1 }, { isError: false });
  }
  const stream = client.sessions.toolCalls(id);
  await stream.submitToolResult("t1", "out", { isError: true });
  const ended = await runHarness(client, id, [runQuery], { onError: (err) => console.log(err) });
  void ended?.reason;
  const worker = poolWorker(client, [runQuery], { concurrency: 2 });
  setTimeout(() => worker.stop(), 1000);
  await worker.run();
  try {
    await client.sessions.submitToolResult(id, "t1", { output: "x", is_error: false });
  } catch (err) {
    if (err instanceof ToolCallAlreadyAnsweredError) void err.problem?.detail;
    if (err instanceof WakelineError) void [err.status, err.code];
  }
  void session;
  const events = await client.sessions.events(id, { after: 0, type: ["tool_call"] });
  void events.data[0]?.seq;
  await client.sessions.postMessage(id, { text: "more", expected_seq: 3 }, { wait: false });
  await client.tenant.setRetention({ keep_days: 30 });
  try {
    const quotas = await client.tenant.setQuotas({ commands_per_second: 50, sessions_per_minute: null });
    const perSecond: number | null | undefined = quotas.effective.commands_per_second;
    void perSecond;
  } catch (err) {
    if (err instanceof QuotaExceededError) void [err.quota, err.limit, err.retryAfterSeconds];
  }
  // @ts-expect-error a message needs its text
  await client.sessions.postMessage(id, { expected_seq: 3 });
}
