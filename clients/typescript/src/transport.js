// One HTTP request to the gateway, retried: `Authorization: Bearer <key>` on every attempt;
// 429, 503 and network failures are tried again after a backoff (or the `Retry-After` the
// gateway sent); a command's `Idempotency-Key` is the same on each attempt, so a retried
// command is recorded once (services/gateway/idempotency.py). Every other non-2xx is thrown
// as its typed error (errors.js).

import { WakelineConnectionError, responseError } from "./errors.js";

export const DEFAULT_URL = "http://127.0.0.1:18080";
export const RETRY_STATUSES = new Set([429, 503]);
export const DEFAULT_RETRY = Object.freeze({ maxAttempts: 5, baseDelayMs: 250, maxDelayMs: 10_000, maxRetryAfterMs: 60_000 });

// Node 18 has Web Crypto as a global only behind a flag; its module has it everywhere.
const webcrypto = globalThis.crypto ?? (await import("node:crypto")).webcrypto;

/** A fresh key for one command; its retries reuse it. */
export function newIdempotencyKey() {
  return webcrypto.randomUUID();
}

/** How long to wait before attempt `attempt + 1`: `Retry-After` when given, else exponential with jitter. */
export function backoffMs(attempt, retry, retryAfter, random = Math.random) {
  const told = parseRetryAfter(retryAfter);
  if (told !== undefined) return Math.min(told, retry.maxRetryAfterMs);
  const ceiling = Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** (attempt - 1));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/** `Retry-After` in ms: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value, now = Date.now()) {
  if (value === null || value === undefined || value === "") return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(value)) return Math.round(Number(value) * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

function env(name) {
  return globalThis.process?.env?.[name] || undefined;
}

export class Transport {
  /**
   * @param {{baseUrl?: string, apiKey?: string, fetch?: typeof fetch, retry?: Partial<typeof DEFAULT_RETRY>,
   *   timeoutMs?: number, sleep?: (ms: number, signal?: AbortSignal) => Promise<void>}} [options]
   */
  constructor(options = {}) {
    this.baseUrl = (options.baseUrl ?? env("WAKELINE_GATEWAY_URL") ?? DEFAULT_URL).replace(/\/+$/, "");
    this.apiKey = options.apiKey ?? env("WAKELINE_API_KEY");
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.sleep = options.sleep ?? sleep;
  }

  url(path, query) {
    const url = new URL(this.baseUrl + path);
    for (const [name, value] of Object.entries(query ?? {})) {
      for (const item of Array.isArray(value) ? value : [value]) {
        if (item !== undefined && item !== null) url.searchParams.append(name, String(item));
      }
    }
    return url;
  }

  headers(extra, { body, idempotencyKey, accept }) {
    const headers = { accept: accept ?? "application/json, application/problem+json", ...extra };
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    if (idempotencyKey) headers["idempotency-key"] = idempotencyKey;
    return headers;
  }

  /**
   * The decoded body of a successful answer (JSON, or text for other media), retrying as above.
   * @param {string} method
   * @param {string} path
   * @param {{query?: object, body?: unknown, headers?: Record<string, string>, idempotencyKey?: string,
   *   signal?: AbortSignal, timeoutMs?: number, accept?: string, as?: "json" | "text"}} [options]
   */
  async request(method, path, options = {}) {
    const { response, done } = await this.attempts(method, path, options, true);
    try {
      const text = await response.text();
      const media = response.headers.get("content-type") ?? "";
      const asJson = options.as === "json" || (options.as !== "text" && media.includes("json") && !media.includes("ndjson"));
      return asJson && text ? JSON.parse(text) : text;
    } finally {
      done();
    }
  }

  /** The response of a successful request whose body the caller reads (a stream): no timeout past its headers. */
  async open(method, path, options = {}) {
    const { response, done } = await this.attempts(method, path, { accept: "text/event-stream", ...options }, false);
    done();
    return response;
  }

  async attempts(method, path, options, timeBody) {
    const url = this.url(path, options.query);
    const body = options.body === undefined ? undefined : JSON.stringify(options.body);
    const headers = this.headers(options.headers, options);
    for (let attempt = 1; ; attempt++) {
      const call = abortable(options.signal, options.timeoutMs ?? this.timeoutMs);
      let response;
      try {
        response = await this.fetch(url, { method, headers, body, signal: call.signal });
      } catch (err) {
        call.done();
        if (options.signal?.aborted) throw options.signal.reason ?? err;
        if (attempt >= this.retry.maxAttempts) throw unreachable(method, url, err, attempt);
        await this.sleep(backoffMs(attempt, this.retry), options.signal);
        continue;
      }
      if (response.ok) {
        // A stream's body is the caller's to read for as long as it lasts; only its headers were timed.
        if (!timeBody) call.clearTimer();
        return { response, done: timeBody ? call.done : () => {} };
      }
      if (RETRY_STATUSES.has(response.status) && attempt < this.retry.maxAttempts) {
        await response.body?.cancel().catch(() => {});
        call.done();
        await this.sleep(backoffMs(attempt, this.retry, response.headers.get("retry-after")), options.signal);
        continue;
      }
      try {
        throw await responseError(response);
      } finally {
        call.done();
      }
    }
  }
}

function unreachable(method, url, err, attempts) {
  const cause = err?.cause?.code ?? err?.cause?.message ?? err?.message ?? String(err);
  const error = new WakelineConnectionError(`${method} ${url.pathname}: no answer from ${url.origin} after `
    + `${attempts} attempt(s): ${cause}`, { code: "connection_error" });
  error.cause = err;
  return error;
}

/** A signal for one attempt: aborted by the caller's signal or by the timeout. */
function abortable(outer, timeoutMs) {
  const controller = new AbortController();
  const onAbort = () => controller.abort(outer.reason);
  if (outer?.aborted) controller.abort(outer.reason);
  outer?.addEventListener("abort", onAbort, { once: true });
  const timer = timeoutMs > 0
    ? setTimeout(() => controller.abort(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs) : undefined;
  return {
    signal: controller.signal,
    clearTimer() {
      clearTimeout(timer);
    },
    done() {
      clearTimeout(timer);
      outer?.removeEventListener("abort", onAbort);
    },
  };
}

/** Resolves after `ms`, or rejects as soon as `signal` aborts. */
export function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
