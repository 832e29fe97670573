#!/usr/bin/env node
// The revenue-analysis harness: the session's model asks `run_query` about a small ledger;
// this process answers. It holds nothing: kill it, start it again with the same session id,
// and the gateway hands it whatever is still unanswered.
//
//   WAKELINE_API_KEY=wkl_... node examples/ledger_harness.mjs [session_id]
//
// Without a session id it creates one (model: $WAKELINE_MODEL, else the gateway's default).
// The gateway is $WAKELINE_GATEWAY_URL (default http://127.0.0.1:18080).

import { pathToFileURL } from "node:url";

import { WakelineClient, runHarness, tool } from "@wakeline/client";

const TABLES = {
  ledger: [
    { year: 2026, quarter: 1, month: "Jan", revenue: 8_412_000 },
    { year: 2026, quarter: 1, month: "Feb", revenue: 13_950_000 },
    { year: 2026, quarter: 1, month: "Mar", revenue: 8_730_000 },
    { year: 2025, quarter: 4, month: "Dec", revenue: 8_105_000 },
  ],
  contracts: [
    { id: "C-101", customer: "Acme", signed_month: "Feb 2026", value: 5_200_000 },
    { id: "C-102", customer: "Globex", signed_month: "Mar 2026", value: 310_000 },
  ],
};

/** SELECT columns FROM table WHERE every `where` field equals: the whole query language. */
function select({ table, where = {}, columns }) {
  const rows = TABLES[table];
  if (!rows) throw new Error(`no table ${table}; tables: ${Object.keys(TABLES).join(", ")}`);
  const matching = rows.filter((row) => Object.entries(where).every(([field, value]) => row[field] === value));
  return columns ? matching.map((row) => Object.fromEntries(columns.map((c) => [c, row[c]]))) : matching;
}

export const runQuery = tool({
  name: "run_query",
  description: "Rows of the ledger or contracts table whose fields equal the given values.",
  inputSchema: {
    type: "object",
    properties: {
      table: { enum: Object.keys(TABLES) },
      where: { type: "object", description: "field -> value; rows must match all of them" },
      columns: { type: "array", items: { type: "string" } },
    },
    required: ["table"],
  },
  run: select,
});

async function main() {
  const client = new WakelineClient();
  let sessionId = process.argv[2] ?? process.env.WAKELINE_SESSION_ID;
  if (!sessionId) {
    const model = process.env.WAKELINE_MODEL;
    const created = await client.sessions.create({
      message: "Analyze last quarter's revenue and flag anomalies.",
      config: { tools: [runQuery], ...(model ? { model } : {}) },
    });
    sessionId = created.session_id;
  }
  console.log(`answering run_query for session ${sessionId}`);
  const ended = await runHarness(client, sessionId, [runQuery], {
    onReconnect: (err) => console.error(`reconnecting: ${err?.message ?? "stream closed"}`),
  });
  let report = "";
  for await (const event of client.sessions.stream(sessionId, { until_end: true })) {
    if (event.type === "model_turn") report = event.payload.text;
  }
  console.log(`session ${sessionId} ended (${ended.reason}): ${report}`);
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) await main();
