// The public API's types. Shapes on the wire come from types.d.ts, generated from the
// gateway's OpenAPI document; what is written here is the client's own surface.

import type * as api from "./types.js";
import type { Operations, OperationKey } from "./types.js";

export type * from "./types.js";

type Query<K extends OperationKey> = Operations[K]["query"];
type Body<K extends OperationKey> = Operations[K]["body"];
type Answer<K extends OperationKey> = Promise<Operations[K]["response"]>;

/** Every event of a session's log (the gateway's discriminated union, on `type`). */
export type Event = api.EventsPublic["data"][number];
export type Session = api.SessionPublic;
export type CommandResult = api.CommandPublic;

export interface RetryPolicy {
  /** Attempts in all, the first included (default 5). */
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** A `Retry-After` longer than this is cut to it. */
  maxRetryAfterMs: number;
}

export interface ClientOptions {
  /** Default: $WAKELINE_GATEWAY_URL, else http://127.0.0.1:18080. */
  baseUrl?: string;
  /** Sent as `Authorization: Bearer <key>`. Default: $WAKELINE_API_KEY. */
  apiKey?: string;
  fetch?: typeof fetch;
  /** Per attempt; for a stream, until its headers arrive. Default 60 000. */
  timeoutMs?: number;
  retry?: Partial<RetryPolicy>;
}

export interface RequestOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
  headers?: Record<string, string>;
}

export interface CommandOptions extends RequestOptions {
  /** Made fresh per call when absent; the call's retries reuse it. */
  idempotencyKey?: string;
  /** Wait (bounded) for the command's outcome; false answers 202 at once. */
  wait?: boolean;
}

export interface StreamOptions {
  signal?: AbortSignal;
  /** Open the stream again after a drop (default true). */
  reconnect?: boolean;
  /** A connection silent this long (no frame, no heartbeat) counts as lost. Default 60 000. */
  idleTimeoutMs?: number;
  onReconnect?: (error: unknown, attempt: number) => void;
}

export interface EventStreamOptions extends StreamOptions {
  after?: number;
  /** Resume an earlier stream: events after this seq (sent as `Last-Event-ID`). */
  lastEventId?: number | string;
  until_end?: boolean;
  /** Also yield the model's text as it streams, as `{type: "delta", ...}`. */
  deltas?: boolean;
}

export interface Delta {
  type: "delta";
  session_id: string;
  tenant: string;
  turn: number;
  call: string;
  index: number;
  kind: string;
  text: string;
}

export class WakelineClient {
  constructor(options?: ClientOptions);
  readonly transport: Transport;
  readonly sessions: Sessions;
  readonly audit: Audit;
  readonly tenant: Tenant;
  readonly pool: Pool;
  me(options?: RequestOptions): Answer<"GET /v1/me">;
  health(options?: RequestOptions): Answer<"GET /healthz">;
}

export interface Sessions {
  create(body?: Body<"POST /v1/sessions">, options?: Omit<CommandOptions, "wait">): Answer<"POST /v1/sessions">;
  list(query?: Query<"GET /v1/sessions">, options?: RequestOptions): Answer<"GET /v1/sessions">;
  iterate(query?: Query<"GET /v1/sessions">, options?: RequestOptions): AsyncGenerator<api.SessionListedPublic>;
  get(sessionId: string, options?: RequestOptions): Answer<"GET /v1/sessions/{session_id}">;
  delete(sessionId: string, options?: CommandOptions & { reason?: string }): Answer<"DELETE /v1/sessions/{session_id}">;
  fork(sessionId: string, body: Body<"POST /v1/sessions/{session_id}/fork">,
    options?: Omit<CommandOptions, "wait">): Answer<"POST /v1/sessions/{session_id}/fork">;
  tree(sessionId: string, query?: Query<"GET /v1/sessions/{session_id}/tree">,
    options?: RequestOptions): Answer<"GET /v1/sessions/{session_id}/tree">;
  cost(sessionId: string, options?: RequestOptions): Answer<"GET /v1/sessions/{session_id}/cost">;
  postMessage(sessionId: string, body: string | Body<"POST /v1/sessions/{session_id}/messages">,
    options?: CommandOptions): Answer<"POST /v1/sessions/{session_id}/messages">;
  requestWake(sessionId: string, options?: CommandOptions): Answer<"POST /v1/sessions/{session_id}/wake">;
  cancel(sessionId: string, options?: CommandOptions): Answer<"POST /v1/sessions/{session_id}/cancel">;
  approve(sessionId: string, toolCallId: string,
    options?: CommandOptions): Answer<"POST /v1/sessions/{session_id}/approvals/{tool_call_id}">;
  deny(sessionId: string, toolCallId: string, body?: Body<"POST /v1/sessions/{session_id}/denials/{tool_call_id}">,
    options?: CommandOptions): Answer<"POST /v1/sessions/{session_id}/denials/{tool_call_id}">;
  takeOver(sessionId: string, options?: CommandOptions): Answer<"POST /v1/sessions/{session_id}/takeover">;
  handBack(sessionId: string, options?: CommandOptions): Answer<"POST /v1/sessions/{session_id}/handback">;
  submitToolResult(sessionId: string, toolCallId: string,
    body: Body<"POST /v1/sessions/{session_id}/tool-results/{tool_call_id}">,
    options?: CommandOptions): Answer<"POST /v1/sessions/{session_id}/tool-results/{tool_call_id}">;
  events(sessionId: string, query?: Query<"GET /v1/sessions/{session_id}/events">,
    options?: RequestOptions): Answer<"GET /v1/sessions/{session_id}/events">;
  transcript(sessionId: string, query?: Query<"GET /v1/sessions/{session_id}/transcript">,
    options?: RequestOptions): Promise<unknown>;
  exportEvents(sessionId: string, query?: Query<"GET /v1/sessions/{session_id}/export">,
    options?: RequestOptions): Promise<Event[]>;
  replay(sessionId: string, query?: Query<"GET /v1/sessions/{session_id}/replay">,
    options?: RequestOptions): Answer<"GET /v1/sessions/{session_id}/replay">;
  verify(sessionId: string, options?: RequestOptions): Answer<"GET /v1/sessions/{session_id}/verify">;
  proof(sessionId: string, options?: RequestOptions): Answer<"GET /v1/sessions/{session_id}/proof">;
  stream(sessionId: string, options?: EventStreamOptions): EventStream;
  toolCalls(sessionId: string, options?: StreamOptions): ToolCallStream;
  wake(sessionId: string, options?: StreamOptions): ToolCallStream;
}

export interface Audit {
  events(query?: Query<"GET /v1/audit/events">, options?: RequestOptions): Answer<"GET /v1/audit/events">;
  exportEvents(query?: Query<"GET /v1/audit/events/export">, options?: RequestOptions): Promise<string>;
  sessions(query?: Query<"GET /v1/audit/sessions">, options?: RequestOptions): Answer<"GET /v1/audit/sessions">;
  cost(query?: Query<"GET /v1/audit/cost">, options?: RequestOptions): Answer<"GET /v1/audit/cost">;
  verify(options?: RequestOptions): Answer<"GET /v1/audit/verify">;
  accessLog(query?: Query<"GET /v1/audit/access-log">, options?: RequestOptions): Answer<"GET /v1/audit/access-log">;
}

export interface Tenant {
  retention(options?: RequestOptions): Answer<"GET /v1/tenant/retention">;
  setRetention(body: Body<"PUT /v1/tenant/retention">, options?: RequestOptions): Answer<"PUT /v1/tenant/retention">;
  quotas(options?: RequestOptions): Answer<"GET /v1/quotas">;
  setQuotas(body: Body<"PUT /v1/quotas">, options?: RequestOptions): Answer<"PUT /v1/quotas">;
}

export interface Pool {
  toolCalls(options: StreamOptions & { tools: string[]; lease_s?: number }): ToolCallStream;
}

export class EventStream implements AsyncIterable<Event | Delta> {
  readonly sessionId: string;
  /** The seq of the last event seen, as the `Last-Event-ID` a reconnect sends. */
  lastEventId: string | undefined;
  [Symbol.asyncIterator](): AsyncGenerator<Event | Delta>;
}

export interface SubmitOptions extends CommandOptions {
  isError?: boolean;
  /** Which session the call is of: needed only on a pool stream, and only when not using `call.submit`. */
  sessionId?: string;
}

/** A declared-tool call waiting for its result. */
export class ToolCall {
  readonly session_id: string;
  readonly tool_call_id: string;
  readonly name: string;
  readonly input: Record<string, unknown>;
  readonly seq: number;
  /** Pool calls only: when this worker's lease on the call runs out. */
  readonly lease_expires_at?: string;
  readonly stream: ToolCallStream;
  /** Records the result (output that is not a string is sent as JSON). */
  submit(output: unknown, options?: Omit<SubmitOptions, "sessionId">): Promise<CommandResult>;
}

export interface SessionEndedFrame {
  session_id: string;
  seq: number;
  reason: string;
}

export class ToolCallStream implements AsyncIterable<ToolCall> {
  readonly sessionId: string | undefined;
  /** The `session_ended` frame's data, once the stream has ended with it. */
  ended: SessionEndedFrame | undefined;
  [Symbol.asyncIterator](): AsyncGenerator<ToolCall>;
  submitToolResult(toolCallId: string, output: unknown, options?: SubmitOptions): Promise<CommandResult>;
}

/** A built-in tool's name, run by the gateway's runners in the session's sandbox. */
export type BuiltinTool = "bash" | "read_file" | "write_file" | "list_files";

/** A declared tool as a session's config carries it. */
export interface ToolDeclaration {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
}

export interface Tool<Input = any> extends ToolDeclaration {
  readonly inputSchema: Record<string, unknown>;
  readonly run: (input: Input, call: ToolCall) => unknown;
  readonly declaration: ToolDeclaration;
  toJSON(): ToolDeclaration;
}

export function tool<Input = any>(spec: {
  name: string;
  description?: string;
  inputSchema?: Record<string, unknown>;
  run: (input: Input, call: ToolCall) => unknown;
}): Tool<Input>;

export function runTool(tools: Map<string, Tool>, call: ToolCall): Promise<{ output: string; isError: boolean }>;

export interface HarnessOptions extends StreamOptions {
  /** POST .../wake before the first connection (default true). */
  wake?: boolean;
  /** Told of results the gateway refused (answered already, unknown call) and of submit retries. */
  onError?: (error: unknown, call: ToolCall) => void;
}

/** Answers the session's calls until it ends (the `session_ended` data) or `signal` aborts (undefined). */
export function runHarness(client: WakelineClient, sessionId: string, tools: Tool[] | Record<string, Tool>,
  options?: HarnessOptions): Promise<SessionEndedFrame | undefined>;

export interface PoolWorker {
  readonly tools: string[];
  readonly signal: AbortSignal;
  run(): Promise<void>;
  stop(reason?: unknown): void;
}

export function poolWorker(client: WakelineClient, tools: Tool[] | Record<string, Tool>,
  options?: Omit<HarnessOptions, "wake"> & { concurrency?: number; lease_s?: number }): PoolWorker;

export interface Problem {
  type?: string;
  title?: string;
  status: number;
  detail: string;
  code: string;
  [key: string]: unknown;
}

export class WakelineError extends Error {
  constructor(message: string, fields?: { status?: number; code?: string; problem?: Problem; headers?: Headers });
  /** The HTTP status; 0 when no answer came. */
  readonly status: number;
  /** The problem's machine-readable `code` (`http_<status>` when the body had none). */
  readonly code: string;
  readonly problem: Problem | undefined;
  readonly headers: Headers | undefined;
  readonly detail: string;
}
export class AuthenticationError extends WakelineError {}
export class PermissionDeniedError extends WakelineError {}
export class NotFoundError extends WakelineError {}
export class UnknownToolCallError extends NotFoundError {}
export class ConflictError extends WakelineError {}
export class ToolCallAlreadyAnsweredError extends ConflictError {}
export class BudgetExhaustedError extends ConflictError {}
export class TooLargeError extends WakelineError {}
export class InvalidRequestError extends WakelineError {}
export class IdempotencyKeyReusedError extends InvalidRequestError {}
export class RateLimitedError extends WakelineError {
  /** The `Retry-After` the gateway sent, in whole seconds; undefined when it sent none. */
  readonly retryAfterSeconds: number | undefined;
}
/** 429 `quota_exceeded`: the tenant is over a rate quota; nothing was sent. */
export class QuotaExceededError extends RateLimitedError {
  /** The quota that is full: `commands_per_second` or `sessions_per_minute`. */
  readonly quota: string | undefined;
  /** That quota's value for the tenant. */
  readonly limit: number | undefined;
}
export class ServerError extends WakelineError {}
export class UnavailableError extends ServerError {}
export class WakelineConnectionError extends WakelineError {}
export function problemError(status: number, body: unknown, headers?: Headers): WakelineError;

export interface SseFrame {
  event: string;
  data: string;
  id: string | undefined;
  retry: number | undefined;
}
export class SseParser {
  lastEventId: string;
  push(text: string): Array<SseFrame | { comment: string }>;
}
export function readSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseFrame | { comment: string }>;

export interface TransportRequest extends RequestOptions {
  query?: Record<string, unknown>;
  body?: unknown;
  idempotencyKey?: string;
  accept?: string;
  /** How to read a successful body; by default JSON when its content type says so, else text. */
  as?: "json" | "text";
}
export class Transport {
  constructor(options?: ClientOptions & { sleep?: (ms: number, signal?: AbortSignal) => Promise<void> });
  readonly baseUrl: string;
  readonly retry: RetryPolicy;
  request(method: string, path: string, options?: TransportRequest): Promise<any>;
  open(method: string, path: string, options?: TransportRequest): Promise<Response>;
}
export const DEFAULT_RETRY: Readonly<RetryPolicy>;
export function backoffMs(attempt: number, retry: RetryPolicy, retryAfter?: string | null, random?: () => number): number;
export function parseRetryAfter(value: string | null | undefined, now?: number): number | undefined;
export function newIdempotencyKey(): string;
