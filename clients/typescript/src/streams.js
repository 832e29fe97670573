// The gateway's live streams as async iterators that reconnect: a session's events
// (resumed with `Last-Event-ID` after the last one seen) and the declared-tool calls a
// harness answers (the gateway re-issues whatever is still unanswered on each connection).
// A connection that goes quiet for longer than `idleTimeoutMs` (the gateway sends a
// heartbeat comment every 15 s) is taken as lost.

import {
  ServerError, RateLimitedError, ToolCallAlreadyAnsweredError, WakelineConnectionError, WakelineError,
} from "./errors.js";
import { readSse } from "./sse.js";
import { backoffMs, newIdempotencyKey, sleep } from "./transport.js";

const DEFAULT_IDLE_MS = 60_000;

/** Whether a stream failing this way should be opened again (a 4xx other than 429 says no). */
export function worthReconnecting(err) {
  return !(err instanceof WakelineError) || err instanceof WakelineConnectionError
    || err instanceof RateLimitedError || err instanceof ServerError;
}

/**
 * The frames of a GET stream, reconnecting after a failure or a close until `finished()`
 * says the stream is over, the caller's `signal` aborts, or (with `reconnect: false`) once.
 */
export async function* reconnectingFrames(transport, path, options) {
  const { signal, reconnect = true, idleTimeoutMs = DEFAULT_IDLE_MS } = options;
  for (let failures = 0; ;) {
    const connection = new AbortController();
    const stop = () => connection.abort(signal.reason);
    signal?.addEventListener("abort", stop, { once: true });
    let failure;
    try {
      const response = await transport.open("GET", path, {
        query: options.query?.(), headers: options.headers?.(), signal: connection.signal,
      });
      failures = 0;
      yield* idleGuarded(readSse(response.body), connection, idleTimeoutMs);
    } catch (err) {
      failure = err;
    } finally {
      signal?.removeEventListener("abort", stop);
      connection.abort();
    }
    if (signal?.aborted || options.finished?.()) return;
    if (failure !== undefined && (!reconnect || !worthReconnecting(failure))) throw failure;
    if (!reconnect) return;
    failures += 1;
    options.onReconnect?.(failure, failures);
    try {
      await sleep(backoffMs(failures, transport.retry), signal);
    } catch {
      return; // the caller closed the stream while it waited
    }
  }
}

async function* idleGuarded(frames, connection, idleTimeoutMs) {
  let timer;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => connection.abort(new Error(`stream quiet for ${idleTimeoutMs} ms`)), idleTimeoutMs);
  };
  try {
    arm();
    for await (const frame of frames) {
      arm();
      yield frame;
    }
  } finally {
    clearTimeout(timer);
  }
}

/** A session's events as they are recorded; reconnects resume after the last one seen. */
export class EventStream {
  constructor(transport, sessionId, options = {}) {
    this.transport = transport;
    this.sessionId = sessionId;
    this.options = options;
    this.lastEventId = options.lastEventId === undefined ? undefined : String(options.lastEventId);
    this.turningPoint = undefined; // the latest session_ended / deleted / user_message seen
  }

  async *[Symbol.asyncIterator]() {
    const { after, until_end: untilEnd = false, deltas = false } = this.options;
    const path = `/v1/sessions/${encodeURIComponent(this.sessionId)}/stream`;
    const frames = reconnectingFrames(this.transport, path, {
      ...this.options,
      query: () => ({ after: this.lastEventId === undefined ? after : undefined, until_end: untilEnd, deltas }),
      headers: () => (this.lastEventId === undefined ? {} : { "last-event-id": this.lastEventId }),
      finished: () => this.turningPoint === "deleted" || (untilEnd && this.turningPoint === "session_ended"),
    });
    for await (const frame of frames) {
      if (frame.comment !== undefined) continue;
      const data = JSON.parse(frame.data);
      if (frame.event === "delta") {
        yield { type: "delta", ...data };
        continue;
      }
      if (frame.id !== undefined) this.lastEventId = frame.id;
      if (["session_ended", "deleted", "user_message"].includes(data.type)) this.turningPoint = data.type;
      yield data;
    }
  }
}

/** One declared-tool call to answer: `await call.submit(output)`. */
export class ToolCall {
  constructor(stream, data) {
    Object.assign(this, data);
    Object.defineProperty(this, "stream", { value: stream, enumerable: false });
  }

  /** Records the result; `output` that is not a string is sent as JSON. */
  submit(output, options = {}) {
    return this.stream.submitToolResult(this.tool_call_id, output, { ...options, sessionId: this.session_id });
  }
}

/**
 * Declared-tool calls as they wait for an answer: a session's (`sessions.toolCalls`,
 * `sessions.wake`) or a tenant's pool (`pool.toolCalls`). Iterating opens the stream;
 * it ends after the gateway's `session_ended` (then `ended` holds its data).
 */
export class ToolCallStream {
  constructor(transport, path, options = {}) {
    this.transport = transport;
    this.path = path;
    this.options = options;
    this.sessionId = options.sessionId;
    this.ended = undefined;
    this.answered = new Set(); // a reconnect re-issues what the gateway had not yet recorded
  }

  async *[Symbol.asyncIterator]() {
    if (this.options.before) await this.options.before();
    const frames = reconnectingFrames(this.transport, this.path, {
      ...this.options, query: () => this.options.query, finished: () => this.ended !== undefined,
    });
    for await (const frame of frames) {
      if (frame.event === "session_ended") {
        this.ended = JSON.parse(frame.data);
        return;
      }
      if (frame.event !== "tool_call") continue;
      const data = JSON.parse(frame.data);
      if (!this.answered.has(answerKey(data.session_id, data.tool_call_id))) yield new ToolCall(this, data);
    }
  }

  /**
   * POST .../tool-results/{id}: 200 once recorded (or already recorded with this very answer);
   * a different answer already recorded throws ToolCallAlreadyAnsweredError.
   */
  async submitToolResult(toolCallId, output, options = {}) {
    const sessionId = options.sessionId ?? this.sessionId;
    if (sessionId === undefined) throw new TypeError("submitToolResult needs options.sessionId on a pool stream");
    const body = { output: typeof output === "string" ? output : JSON.stringify(output ?? null), is_error: Boolean(options.isError) };
    const path = `/v1/sessions/${encodeURIComponent(sessionId)}/tool-results/${encodeURIComponent(toolCallId)}`;
    try {
      const result = await this.transport.request("POST", path, {
        body, query: { wait: options.wait }, idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
        signal: options.signal,
      });
      this.answered.add(answerKey(sessionId, toolCallId));
      return result;
    } catch (err) {
      if (err instanceof ToolCallAlreadyAnsweredError) this.answered.add(answerKey(sessionId, toolCallId));
      throw err;
    }
  }
}

function answerKey(sessionId, toolCallId) {
  return `${sessionId}\n${toolCallId}`;
}
