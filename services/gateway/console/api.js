// The gateway's /v1 API as the console uses it. The key lives in sessionStorage (this tab
// only) and goes out as an Authorization header, never in a URL.
const KEY = "wakeline.key";

export const key = {
  get: () => sessionStorage.getItem(KEY),
  set: (value) => sessionStorage.setItem(KEY, value),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, body) {
    super((body && (body.detail || body.title)) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

function headers(extra = {}) {
  return { Authorization: `Bearer ${key.get()}`, ...extra };
}

export async function call(method, path, body) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  const text = await response.text();
  let parsed = null;
  try { parsed = text ? JSON.parse(text) : null; } catch { parsed = { detail: text }; }
  if (!response.ok) throw new ApiError(response.status, parsed);
  return { status: response.status, body: parsed };
}

export const get = (path) => call("GET", path).then((r) => r.body);

// A download that needs the key: fetched, then handed to the browser as a blob.
export async function download(path, filename) {
  const response = await fetch(path, { headers: headers() });
  if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
  const url = URL.createObjectURL(await response.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// Reads the SSE stream with fetch (the browser's own SSE client cannot send a header). Calls
// onEvents with the events of each chunk read, in seq order (a history of a thousand events
// comes in a few chunks, so the page lays out a few times, not once per event): after a
// drop it resumes from the last seq seen, so nothing is repeated and nothing skipped.
// With `deltas`, the model's text as it streams goes to onDelta (delta frames carry no id:
// they are not positions in the log), in order with the events around it.
// Returns a function that stops it.
export function follow(sessionId, afterSeq, { onEvents, onDelta, onState, deltas = false }) {
  let last = afterSeq;
  let stopped = false;
  let controller = null;
  let retry = 500;

  async function once() {
    controller = new AbortController();
    const response = await fetch(`/v1/sessions/${encodeURIComponent(sessionId)}/stream?after=${last}${deltas ? "&deltas=true" : ""}`,
      { headers: headers({ Accept: "text/event-stream" }), signal: controller.signal });
    if (response.status === 404) return "gone";
    if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
    onState("live");
    retry = 500;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return "closed";
      buffer += value;
      let batch = [];
      const flush = () => { if (batch.length) onEvents(batch); batch = []; };
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const fields = {};
        for (const line of frame.split("\n")) {
          if (line.startsWith(":")) continue; // heartbeat
          const colon = line.indexOf(":");
          if (colon > 0) fields[line.slice(0, colon)] = line.slice(colon + 1).replace(/^ /, "");
        }
        if (fields.data === undefined) continue;
        if (fields.event === "delta") {
          flush(); // what committed before this delta is drawn before it
          if (onDelta) onDelta(JSON.parse(fields.data));
          continue;
        }
        if (fields.id === undefined) continue;
        const event = JSON.parse(fields.data);
        if (event.seq <= last) continue; // already shown
        last = event.seq;
        batch.push(event);
        if (event.type === "deleted") { flush(); return "gone"; }
      }
      flush();
    }
  }

  (async () => {
    while (!stopped) {
      let outcome;
      try {
        outcome = await once();
      } catch (err) {
        if (stopped) return;
        outcome = err instanceof ApiError && err.status < 500 ? "refused" : "dropped";
      }
      if (stopped) return;
      if (outcome === "gone" || outcome === "refused") { onState(outcome); return; }
      onState(`reconnecting after seq ${last}`);
      await new Promise((resolve) => setTimeout(resolve, retry));
      retry = Math.min(retry * 2, 5000);
    }
  })();

  return () => { stopped = true; if (controller) controller.abort(); };
}
