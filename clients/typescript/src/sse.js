// Server-sent events, parsed as the WHATWG spec says: lines end in \n, \r\n or \r; `data`
// lines join with \n; a blank line dispatches; `:` lines are comments (the gateway's
// heartbeats); an `id` with a NUL is ignored. The gateway's framing is services/gateway/sse.py.

/** An incremental parser: `push` text as it arrives, get the frames it completed. */
export class SseParser {
  constructor() {
    this.buffer = "";
    this.pendingCR = false;
    this.lastEventId = "";
    this.reset();
  }

  reset() {
    this.event = "";
    this.data = [];
    this.hasData = false;
    this.id = undefined;
    this.retry = undefined;
  }

  /**
   * @param {string} text
   * @returns {Array<{event: string, data: string, id: string | undefined, retry: number | undefined}
   *   | {comment: string}>}
   */
  push(text) {
    if (this.pendingCR && text.startsWith("\n")) text = text.slice(1); // the \n of a \r\n split across chunks
    this.pendingCR = false;
    this.buffer += text;
    const out = [];
    let match;
    const lineEnd = /\r\n|\r|\n/g;
    let start = 0;
    while ((match = lineEnd.exec(this.buffer)) !== null) {
      if (match[0] === "\r" && match.index === this.buffer.length - 1) {
        this.pendingCR = true; // maybe the first half of \r\n: the line still ends here
      }
      this.line(this.buffer.slice(start, match.index), out);
      start = match.index + match[0].length;
    }
    this.buffer = this.buffer.slice(start);
    return out;
  }

  line(line, out) {
    if (line === "") {
      if (this.hasData) {
        out.push({ event: this.event || "message", data: this.data.join("\n"), id: this.id, retry: this.retry });
      }
      this.reset();
      return;
    }
    if (line.startsWith(":")) {
      out.push({ comment: line.slice(1).trimStart() });
      return;
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") {
      this.data.push(value);
      this.hasData = true;
    } else if (field === "event") {
      this.event = value;
    } else if (field === "id" && !value.includes("\0")) {
      this.id = value;
      this.lastEventId = value;
    } else if (field === "retry" && /^\d+$/.test(value)) {
      this.retry = Number(value);
    }
  }
}

/**
 * The frames of a response body, comments included, as they arrive. A frame left
 * unfinished when the body ends is dropped, as the spec says.
 * @param {ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>} body
 */
export async function* readSse(body) {
  const parser = new SseParser();
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    yield* parser.push(decoder.decode(chunk, { stream: true }));
  }
  yield* parser.push(decoder.decode());
}
