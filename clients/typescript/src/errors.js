// The gateway's errors as typed exceptions. Every error it answers is an RFC 9457 problem
// with a machine-readable `code` (services/gateway/problem.py); `problemError` picks the
// most specific class for it, by code first and status second. What retries is transport.js.

/** An error the gateway answered, or a request that never got an answer (`status` 0). */
export class WakelineError extends Error {
  /**
   * @param {string} message
   * @param {{status?: number, code?: string, problem?: object, headers?: Headers}} [fields]
   */
  constructor(message, { status = 0, code = "error", problem = undefined, headers = undefined } = {}) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.problem = problem;
    this.headers = headers;
  }

  /** The problem's `detail`, in words. */
  get detail() {
    return this.problem?.detail ?? this.message;
  }
}

export class AuthenticationError extends WakelineError {}
export class PermissionDeniedError extends WakelineError {}
export class NotFoundError extends WakelineError {}
export class UnknownToolCallError extends NotFoundError {}
export class ConflictError extends WakelineError {}
export class ToolCallAlreadyAnsweredError extends ConflictError {}
/** 409 `budget_exhausted`: the session's budget is spent; send the message with a raised `budget`. */
export class BudgetExhaustedError extends ConflictError {}
export class TooLargeError extends WakelineError {}
export class InvalidRequestError extends WakelineError {}
export class IdempotencyKeyReusedError extends InvalidRequestError {}
export class RateLimitedError extends WakelineError {
  /** The `Retry-After` the gateway sent, in seconds; undefined when it sent none. */
  get retryAfterSeconds() {
    const value = this.headers?.get?.("retry-after");
    return value && /^\s*\d+\s*$/.test(value) ? Number(value) : undefined;
  }
}
/**
 * 429 `quota_exceeded`: the tenant is over a rate quota and nothing was sent; thrown once the
 * retries (after each `Retry-After`) are spent. `quota` names it, `limit` is its value.
 */
export class QuotaExceededError extends RateLimitedError {
  get quota() {
    return this.problem?.quota;
  }

  get limit() {
    return this.problem?.limit;
  }
}
export class ServerError extends WakelineError {}
export class UnavailableError extends ServerError {}
/** No answer at all: the gateway was unreachable, or the connection broke, on every attempt. */
export class WakelineConnectionError extends WakelineError {}

const BY_CODE = {
  tool_call_already_answered: ToolCallAlreadyAnsweredError,
  unknown_tool_call: UnknownToolCallError,
  idempotency_key_reused: IdempotencyKeyReusedError,
  quota_exceeded: QuotaExceededError,
  budget_exhausted: BudgetExhaustedError,
};
const BY_STATUS = {
  401: AuthenticationError, 403: PermissionDeniedError, 404: NotFoundError, 409: ConflictError,
  413: TooLargeError, 422: InvalidRequestError, 429: RateLimitedError, 503: UnavailableError,
};

/** The error for a problem body (or whatever a non-2xx response carried instead). */
export function problemError(status, body, headers) {
  const problem = body && typeof body === "object" ? body : undefined;
  const code = typeof problem?.code === "string" ? problem.code : `http_${status}`;
  const detail = problem?.detail ?? (typeof body === "string" && body ? body.slice(0, 500) : `HTTP ${status}`);
  const Kind = BY_CODE[code] ?? BY_STATUS[status] ?? (status >= 500 ? ServerError : WakelineError);
  return new Kind(`${status} ${code}: ${detail}`, { status, code, problem, headers });
}

/** The error a Response stands for; reads its body. */
export async function responseError(response) {
  const text = await response.text().catch(() => "");
  let body = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: a proxy's page, say; its text becomes the detail
  }
  return problemError(response.status, body, response.headers);
}
