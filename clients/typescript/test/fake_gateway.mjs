// A local HTTP server standing in for the gateway in unit tests: each test routes
// "METHOD /path" to a handler and reads back what arrived (method, path, headers, body).

import { createServer } from "node:http";

import { WakelineClient } from "../src/index.js";

/** Starts a server; `routes` maps "METHOD /path" (query left out) to `(req, res, body) => void`. */
export async function fakeGateway(routes) {
  const requests = [];
  const server = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    const path = req.url.split("?")[0];
    requests.push({ method: req.method, path, url: req.url, headers: req.headers, body: body ? JSON.parse(body) : undefined });
    const handler = routes[`${req.method} ${path}`];
    if (!handler) return problem(res, 404, "not_found", `no route ${req.method} ${path}`);
    await handler(req, res, body ? JSON.parse(body) : undefined, requests.length);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    requests,
    /** A client of this server that retries without waiting long. */
    client(options = {}) {
      return new WakelineClient({ baseUrl: url, apiKey: "wkl_test_key", retry: { baseDelayMs: 1, maxDelayMs: 5 }, ...options });
    },
    async close() {
      server.closeAllConnections?.();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

export function json(res, status, body, headers = {}) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

export function problem(res, status, code, detail, headers = {}) {
  res.writeHead(status, { "content-type": "application/problem+json", ...headers });
  res.end(JSON.stringify({ type: `urn:wakeline:problem:${code}`, title: "x", status, detail, code }));
}

/** Starts an SSE answer and returns a writer of frames. */
export function sse(res) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  res.flushHeaders();
  return {
    frame(event, data, id) {
      res.write(`${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    },
    comment(text) {
      res.write(`: ${text}\n\n`);
    },
    end() {
      res.end();
    },
    /** Cuts the connection mid-body, after what was written so far has gone out. */
    drop() {
      res.socket.end();
    },
  };
}

export const done = (sessionId, outcome = "tool_result") => ({ session_id: sessionId, command_id: "c", status: "done", outcome, seq: 9 });
