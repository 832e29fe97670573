// @wakeline/client: the public surface. Types are in index.d.ts (and the generated types.d.ts).

export { WakelineClient } from "./client.js";
export {
  AuthenticationError, BudgetExhaustedError, ConflictError, IdempotencyKeyReusedError, InvalidRequestError,
  NotFoundError, PermissionDeniedError, QuotaExceededError, RateLimitedError, ServerError,
  ToolCallAlreadyAnsweredError, TooLargeError, UnavailableError, UnknownToolCallError, WakelineConnectionError,
  WakelineError, problemError,
} from "./errors.js";
export { poolWorker, runHarness, runTool, tool } from "./harness.js";
export { SseParser, readSse } from "./sse.js";
export { EventStream, ToolCall, ToolCallStream } from "./streams.js";
export { DEFAULT_RETRY, Transport, backoffMs, newIdempotencyKey, parseRetryAfter } from "./transport.js";
