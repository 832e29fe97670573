// `WakelineClient`: every route of the gateway as a method, grouped as the API is
// (sessions, audit, tenant, the tool-call pool). Bodies and queries use the API's own field
// names (src/types.d.ts); what only the client knows (idempotency key, signal, timeout)
// goes in a last `options` argument. Each command gets a fresh Idempotency-Key, reused by
// its retries (transport.js).

import { EventStream, ToolCallStream } from "./streams.js";
import { Transport, newIdempotencyKey } from "./transport.js";

const id = encodeURIComponent;

export class WakelineClient {
  /**
   * @param {{baseUrl?: string, apiKey?: string, fetch?: typeof fetch, timeoutMs?: number,
   *   retry?: {maxAttempts?: number, baseDelayMs?: number, maxDelayMs?: number, maxRetryAfterMs?: number}}} [options]
   *   `baseUrl` defaults to $WAKELINE_GATEWAY_URL, `apiKey` to $WAKELINE_API_KEY.
   */
  constructor(options = {}) {
    this.transport = options.transport ?? new Transport(options);
    this.sessions = new Sessions(this.transport);
    this.audit = new Audit(this.transport);
    this.tenant = new Tenant(this.transport);
    this.pool = new Pool(this.transport);
  }

  /** GET /v1/me: the key's principal, role, tenant and the actions it may take. */
  me(options = {}) {
    return this.transport.request("GET", "/v1/me", options);
  }

  /** GET /healthz. */
  health(options = {}) {
    return this.transport.request("GET", "/healthz", options);
  }
}

/** A command: POST (or DELETE) with an Idempotency-Key made once for it. */
function command(transport, method, path, body, options = {}) {
  const { wait, idempotencyKey, query, ...rest } = options;
  return transport.request(method, path, {
    ...rest, body, query: { ...query, wait }, idempotencyKey: idempotencyKey ?? newIdempotencyKey(),
  });
}

class Sessions {
  constructor(transport) {
    this.transport = transport;
  }

  /** POST /v1/sessions. With the same `idempotencyKey` a retried create names the same session. */
  create(body = {}, options = {}) {
    return command(this.transport, "POST", "/v1/sessions", body, options);
  }

  /** GET /v1/sessions: one page, newest first. */
  list(query = {}, options = {}) {
    return this.transport.request("GET", "/v1/sessions", { ...options, query });
  }

  /** Every session the query matches, page after page. */
  async *iterate(query = {}, options = {}) {
    let cursor = query.cursor;
    do {
      const page = await this.list({ ...query, cursor }, options);
      yield* page.data;
      cursor = page.next_cursor;
    } while (cursor);
  }

  get(sessionId, options = {}) {
    return this.transport.request("GET", `/v1/sessions/${id(sessionId)}`, options);
  }

  /** DELETE /v1/sessions/{id}: marks it deleted (its events stay for audit). */
  delete(sessionId, { reason, ...options } = {}) {
    return command(this.transport, "DELETE", `/v1/sessions/${id(sessionId)}`, undefined,
      { ...options, query: { reason } });
  }

  /** POST .../fork: a new session whose history is this one's up to `at_seq`, then `message`. */
  fork(sessionId, body, options = {}) {
    return command(this.transport, "POST", `/v1/sessions/${id(sessionId)}/fork`, body, options);
  }

  tree(sessionId, query = {}, options = {}) {
    return this.transport.request("GET", `/v1/sessions/${id(sessionId)}/tree`, { ...options, query });
  }

  cost(sessionId, options = {}) {
    return this.transport.request("GET", `/v1/sessions/${id(sessionId)}/cost`, options);
  }

  /** POST .../messages: `{text, expected_seq?, budget?}`; a raised `budget` continues a session ended `budget`. */
  postMessage(sessionId, body, options = {}) {
    const message = typeof body === "string" ? { text: body } : body;
    return command(this.transport, "POST", `/v1/sessions/${id(sessionId)}/messages`, message, options);
  }

  /** POST .../wake: the command alone. `wake()` also streams the calls to answer. */
  requestWake(sessionId, options = {}) {
    return command(this.transport, "POST", `/v1/sessions/${id(sessionId)}/wake`, undefined, options);
  }

  cancel(sessionId, options = {}) {
    return command(this.transport, "POST", `/v1/sessions/${id(sessionId)}/cancel`, undefined, options);
  }

  approve(sessionId, toolCallId, options = {}) {
    return command(this.transport, "POST", `/v1/sessions/${id(sessionId)}/approvals/${id(toolCallId)}`,
      undefined, options);
  }

  deny(sessionId, toolCallId, body = undefined, options = {}) {
    return command(this.transport, "POST", `/v1/sessions/${id(sessionId)}/denials/${id(toolCallId)}`,
      body, options);
  }

  /** POST .../takeover: the caller holds the hands; tool calls wait for its results. */
  takeOver(sessionId, options = {}) {
    return command(this.transport, "POST", `/v1/sessions/${id(sessionId)}/takeover`, undefined, options);
  }

  handBack(sessionId, options = {}) {
    return command(this.transport, "POST", `/v1/sessions/${id(sessionId)}/handback`, undefined, options);
  }

  /** POST .../tool-results/{tool_call_id}: `{output, is_error}`. */
  submitToolResult(sessionId, toolCallId, body, options = {}) {
    return command(this.transport, "POST", `/v1/sessions/${id(sessionId)}/tool-results/${id(toolCallId)}`,
      body, options);
  }

  events(sessionId, query = {}, options = {}) {
    return this.transport.request("GET", `/v1/sessions/${id(sessionId)}/events`, { ...options, query });
  }

  /** GET .../transcript: JSON by default; `format: "markdown" | "html"` gives text. */
  transcript(sessionId, query = {}, options = {}) {
    return this.transport.request("GET", `/v1/sessions/${id(sessionId)}/transcript`, {
      ...options, query, accept: query.format && query.format !== "json" ? "text/*" : undefined,
    });
  }

  /** GET .../export: every event of the session (with `inherited: true`, a fork's prefix first). */
  async exportEvents(sessionId, query = {}, options = {}) {
    const text = await this.transport.request("GET", `/v1/sessions/${id(sessionId)}/export`, {
      ...options, query, accept: "application/x-ndjson", as: "text",
    });
    return text.split("\n").filter(Boolean).map((line) => JSON.parse(line));
  }

  replay(sessionId, query = {}, options = {}) {
    return this.transport.request("GET", `/v1/sessions/${id(sessionId)}/replay`, { ...options, query });
  }

  verify(sessionId, options = {}) {
    return this.transport.request("GET", `/v1/sessions/${id(sessionId)}/verify`, options);
  }

  proof(sessionId, options = {}) {
    return this.transport.request("GET", `/v1/sessions/${id(sessionId)}/proof`, options);
  }

  /**
   * GET .../stream: the session's events, live; `for await (const event of ...)`. Reconnects
   * with `Last-Event-ID` (unless `reconnect: false`); `lastEventId` resumes an earlier stream.
   */
  stream(sessionId, options = {}) {
    return new EventStream(this.transport, sessionId, options);
  }

  /** GET .../tool-calls/stream: the declared-tool calls waiting for this session's harness. */
  toolCalls(sessionId, options = {}) {
    return new ToolCallStream(this.transport, `/v1/sessions/${id(sessionId)}/tool-calls/stream`,
      { ...options, sessionId });
  }

  /** `requestWake`, then `toolCalls`: `for await (const call of client.sessions.wake(id)) await call.submit(...)`. */
  wake(sessionId, options = {}) {
    const stream = this.toolCalls(sessionId, options);
    stream.options.before = () => this.requestWake(sessionId, { wait: false, signal: options.signal });
    return stream;
  }
}

class Audit {
  constructor(transport) {
    this.transport = transport;
  }

  events(query = {}, options = {}) {
    return this.transport.request("GET", "/v1/audit/events", { ...options, query });
  }

  /** GET /v1/audit/events/export: JSONL (default) or CSV text. */
  exportEvents(query = {}, options = {}) {
    return this.transport.request("GET", "/v1/audit/events/export", { ...options, query, accept: "*/*", as: "text" });
  }

  sessions(query = {}, options = {}) {
    return this.transport.request("GET", "/v1/audit/sessions", { ...options, query });
  }

  cost(query = {}, options = {}) {
    return this.transport.request("GET", "/v1/audit/cost", { ...options, query });
  }

  verify(options = {}) {
    return this.transport.request("GET", "/v1/audit/verify", options);
  }

  accessLog(query = {}, options = {}) {
    return this.transport.request("GET", "/v1/audit/access-log", { ...options, query });
  }
}

class Tenant {
  constructor(transport) {
    this.transport = transport;
  }

  retention(options = {}) {
    return this.transport.request("GET", "/v1/tenant/retention", options);
  }

  /** PUT /v1/tenant/retention (admin): `{keep_days}`. */
  setRetention(body, options = {}) {
    return this.transport.request("PUT", "/v1/tenant/retention", { ...options, body });
  }

  /** GET /v1/quotas: the tenant's own quotas, the defaults, what applies, and the changes. */
  quotas(options = {}) {
    return this.transport.request("GET", "/v1/quotas", options);
  }

  /** PUT /v1/quotas (admin): every quota; one left out or null goes back to the default. */
  setQuotas(body, options = {}) {
    return this.transport.request("PUT", "/v1/quotas", { ...options, body });
  }
}

class Pool {
  constructor(transport) {
    this.transport = transport;
  }

  /**
   * GET /v1/tool-calls/stream?tools=a,b (a service key): calls of these tools from every
   * session of the tenant, each leased to one worker at a time.
   */
  toolCalls({ tools, lease_s: leaseS, max_in_flight: maxInFlight, until_empty: untilEmpty, ...options }) {
    return new ToolCallStream(this.transport, "/v1/tool-calls/stream",
      { ...options, query: { tools: tools.join(","), lease_s: leaseS, max_in_flight: maxInFlight, until_empty: untilEmpty } });
  }
}
