#!/usr/bin/env node
// The revenue-analysis harness of docs/your-own-tools.md in JavaScript (@wakeline/client), the
// twin of ledger_harness.py: the session's model asks `run_query` about a small ledger, and
// this process answers. It holds nothing: kill it while a call is pending, start it again with
// the same session id, and the gateway issues that call again; its result is recorded once.
//
//   export WAKELINE_API_KEY=wkl_...   # WAKELINE_GATEWAY_URL defaults to http://127.0.0.1:18080
//   sid=$(node examples/ledger_harness.mjs --create)    # model scripted:ledger, or --model claude-...
//   node examples/ledger_harness.mjs "$sid"             # answers its calls until the session ends
//
// Node has no SQLite of its own here, so the ledger is in memory and `run_query` understands
// one read-only shape: SELECT cols|* FROM t [WHERE col op value [AND ...]] [ORDER BY col [ASC|DESC]] [LIMIT n].

import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

import { ToolCallAlreadyAnsweredError, WakelineClient, runTool, tool } from "../clients/typescript/src/index.js";

const TASK = "Analyze this year's monthly revenue and flag anomalies.";
const TABLES = {
  ledger: [[2025, 10, 8_020_000], [2025, 11, 8_140_000], [2025, 12, 8_105_000], [2026, 1, 8_412_000],
    [2026, 2, 13_950_000], [2026, 3, 8_730_000], [2026, 4, 8_655_000], [2026, 5, 8_910_000], [2026, 6, 9_040_000]]
    .map(([year, month, revenue]) => ({ year, month, revenue })),
  contracts: [
    { id: "C-098", customer: "Umbrella", signed_month: "2026-01", value: 240_000, note: "support renewal" },
    { id: "C-101", customer: "Acme", signed_month: "2026-02", value: 5_200_000, note: "three-year licence, invoiced up front" },
    { id: "C-102", customer: "Initech", signed_month: "2026-02", value: 180_000, note: "support renewal" },
    { id: "C-103", customer: "Globex", signed_month: "2026-03", value: 310_000, note: "support renewal" },
  ],
};
const QUERY = /^\s*SELECT\s+(.+?)\s+FROM\s+(\w+)(?:\s+WHERE\s+(.+?))?(?:\s+ORDER\s+BY\s+(\w+)(?:\s+(ASC|DESC))?)?(?:\s+LIMIT\s+(\d+))?\s*;?\s*$/is;
const CONDITION = /^\s*(\w+)\s*(=|!=|<>|<=|>=|<|>)\s*('(?:[^']|'')*'|-?\d+(?:\.\d+)?)\s*$/;
const COMPARE = { "=": (a, b) => a === b, "!=": (a, b) => a !== b, "<>": (a, b) => a !== b,
  "<": (a, b) => a < b, "<=": (a, b) => a <= b, ">": (a, b) => a > b, ">=": (a, b) => a >= b };

/** The rows a SELECT gives; anything else is refused (read-only, so the same query always gives the same rows). */
export function select(sql) {
  const m = QUERY.exec(sql);
  if (!m) throw new Error("only SELECT cols|* FROM table [WHERE col op value [AND ...]] [ORDER BY col [ASC|DESC]] [LIMIT n]");
  const [, columns, table, where, orderBy, direction, limit] = m;
  let rows = TABLES[table.toLowerCase()];
  if (!rows) throw new Error(`no table ${table}; tables: ${Object.keys(TABLES).join(", ")}`);
  for (const condition of where ? where.split(/\s+AND\s+/i) : []) {
    const c = CONDITION.exec(condition);
    if (!c) throw new Error(`cannot read the condition ${JSON.stringify(condition)}`);
    const value = c[3].startsWith("'") ? c[3].slice(1, -1).replaceAll("''", "'") : Number(c[3]);
    rows = rows.filter((row) => COMPARE[c[2]](row[c[1]], value));
  }
  if (orderBy) {
    const sign = direction?.toUpperCase() === "DESC" ? -1 : 1;
    rows = [...rows].sort((a, b) => sign * (a[orderBy] < b[orderBy] ? -1 : a[orderBy] > b[orderBy] ? 1 : 0));
  }
  if (limit) rows = rows.slice(0, Number(limit));
  const names = columns.trim() === "*" ? null : columns.split(",").map((c) => c.trim());
  return names ? rows.map((row) => Object.fromEntries(names.map((n) => [n, row[n]]))) : rows;
}

export const runQuery = tool({
  name: "run_query",
  description: "Run one read-only SQL query (SELECT only) against the company's books and return the rows as JSON. "
    + "Tables: ledger(year, month, revenue) with one row per month (month 1-12, revenue in USD); "
    + "contracts(id, customer, signed_month 'YYYY-MM', value in USD, note).",
  inputSchema: { type: "object", properties: { sql: { type: "string" } }, required: ["sql"], additionalProperties: false },
  run: ({ sql }) => select(sql),
});

const say = (line) => console.log(line);

/** The seed's loop: wake the session, answer each call it issues, stop when it ends. */
async function serve(client, sessionId, hangOnFirstCall) {
  say(`harness pid ${process.pid}: answering run_query for session ${sessionId}`);
  const tools = new Map([[runQuery.name, runQuery]]);
  const stream = client.sessions.wake(sessionId);
  let lastSeq = 0;
  for await (const call of stream) {
    say(`call ${call.tool_call_id} received (seq ${call.seq}): ${call.name} ${JSON.stringify(call.input)}`);
    if (hangOnFirstCall) {
      say(`  holding ${call.tool_call_id} unanswered until this process is killed (--hang-on-first-call)`);
      await new Promise(() => setInterval(() => {}, 3_600_000));
    }
    const { output, isError } = await runTool(tools, call);
    const recorded = await call.submit(output, { isError }).catch((err) => {
      if (err instanceof ToolCallAlreadyAnsweredError) return undefined; // another harness's answer stands
      throw err;
    });
    const outcome = recorded ? `recorded at seq ${recorded.seq}` : "not recorded (answered otherwise)";
    say(`call ${call.tool_call_id} answered: ${isError ? "error" : "ok"}, ${output.length} bytes, ${outcome}`);
    lastSeq = call.seq;
  }
  const reason = stream.ended?.reason ?? "unknown";
  say(`session ${sessionId} ended: ${reason}`);
  let report = "";
  for await (const event of client.sessions.stream(sessionId, { after: lastSeq, until_end: true })) {
    if (event.type === "model_turn") report = event.payload.text || report;
  }
  say(`report: ${report}`);
  return reason === "completed" ? 0 : 1;
}

async function main() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { create: { type: "boolean" }, model: { type: "string", default: "scripted:ledger" },
      "hang-on-first-call": { type: "boolean" } },
  });
  if (Boolean(values.create) === Boolean(positionals[0])) throw new Error("give either --create or a session id");
  const client = new WakelineClient({ baseUrl: process.env.WAKELINE_GATEWAY_URL ?? "http://127.0.0.1:18080" });
  if (values.create) {
    const created = await client.sessions.create({ message: TASK, config: { model: values.model, tools: [runQuery] } });
    say(created.session_id);
    return 0;
  }
  return serve(client, positionals[0], values["hang-on-first-call"]);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) process.exitCode = await main();
