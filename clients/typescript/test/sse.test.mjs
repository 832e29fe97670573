import assert from "node:assert/strict";
import { test } from "node:test";

import { SseParser, readSse } from "../src/index.js";

const frames = (items) => items.filter((item) => item.comment === undefined);

test("frames split across chunks at any byte come out whole", () => {
  const text = "id: 3\nevent: tool_call\ndata: {\"a\": 1}\n\n: heartbeat\n\nid: 4\nevent: woke\ndata: {}\n\n";
  for (let cut = 0; cut <= text.length; cut++) {
    const parser = new SseParser();
    const out = frames([...parser.push(text.slice(0, cut)), ...parser.push(text.slice(cut))]);
    assert.deepEqual(out, [
      { event: "tool_call", data: "{\"a\": 1}", id: "3", retry: undefined },
      { event: "woke", data: "{}", id: "4", retry: undefined },
    ], `cut at ${cut}`);
  }
});

test("crlf and lone cr end lines, and a crlf split between chunks is one line end", () => {
  const parser = new SseParser();
  const out = [...parser.push("data: a\r"), ...parser.push("\ndata: b\r\r"), ...parser.push("data: c\n\n")];
  assert.deepEqual(out.map((f) => f.data), ["a\nb", "c"]);
});

test("comments are reported, an event without data is not dispatched, and ids with NUL are ignored", () => {
  const parser = new SseParser();
  const out = parser.push(": heartbeat\n\nevent: lonely\n\nid: 7\u0000\ndata: x\n\n");
  assert.deepEqual(out[0], { comment: "heartbeat" });
  assert.equal(out.length, 2);
  assert.deepEqual(out[1], { event: "message", data: "x", id: undefined, retry: undefined });
});

test("multi-line data joins with newlines; a field without colon and retry are read", () => {
  const parser = new SseParser();
  const [frame] = parser.push("retry: 1500\ndata\ndata:one\ndata:  two\n\n");
  assert.equal(frame.data, "\none\n two");
  assert.equal(frame.retry, 1500);
});

test("readSse decodes UTF-8 split inside a character and drops an unfinished last frame", async () => {
  const bytes = new TextEncoder().encode("data: \u00e9t\u00e9 \u2603\n\ndata: cut off");
  async function* chunks() {
    for (const byte of bytes) yield Uint8Array.of(byte);
  }
  const out = [];
  for await (const frame of readSse(chunks())) out.push(frame);
  assert.deepEqual(out.map((f) => f.data), ["\u00e9t\u00e9 \u2603"]);
});
