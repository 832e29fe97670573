// The user's side of declared tools: `tool()` declares one and says how to run it;
// `runHarness` answers one session's calls until it ends; `poolWorker` answers calls of its
// tools from every session of the tenant. Both hold nothing: the gateway says what is
// unanswered on each (re)connection, and a tool that throws becomes an `is_error` result.

import { ToolCallAlreadyAnsweredError, UnknownToolCallError } from "./errors.js";
import { worthReconnecting } from "./streams.js";
import { backoffMs, newIdempotencyKey, sleep } from "./transport.js";

/**
 * A declared tool. In a session's `config.tools` it serializes as `{name, description, input_schema}`.
 * @param {{name: string, description?: string, inputSchema?: object, run: (input: any, call: object) => unknown}} spec
 */
export function tool({ name, description = "", inputSchema = { type: "object" }, run }) {
  if (typeof name !== "string" || !name) throw new TypeError("a tool needs a name");
  if (typeof run !== "function") throw new TypeError(`tool ${name} needs a run(input) function`);
  const declaration = { name, description, input_schema: inputSchema };
  // input_schema too, so the tool itself is a declaration wherever one is expected.
  return Object.freeze({ ...declaration, inputSchema, run, declaration, toJSON: () => declaration });
}

function byName(tools) {
  const list = Array.isArray(tools) ? tools : Object.values(tools);
  return new Map(list.map((t) => [t.name, t]));
}

/** Runs the call's tool; a throw (or no such tool) is the text of an error result. */
export async function runTool(tools, call) {
  const found = tools.get(call.name);
  try {
    if (!found) throw new Error(`this harness has no tool named ${JSON.stringify(call.name)}`);
    const output = await found.run(call.input ?? {}, call);
    return { output: typeof output === "string" ? output : JSON.stringify(output ?? null), isError: false };
  } catch (err) {
    return { output: err instanceof Error ? `${err.name}: ${err.message}` : String(err), isError: true };
  }
}

/**
 * Runs the call and records its result, trying the submit again (same key) for as long as
 * the gateway is out of reach. Another answer recorded first is reported, not thrown.
 */
async function answer(tools, call, { signal, onError, retry }) {
  const { output, isError } = await runTool(tools, call);
  const idempotencyKey = newIdempotencyKey();
  for (let attempt = 1; ; attempt++) {
    try {
      return await call.submit(output, { isError, idempotencyKey, signal });
    } catch (err) {
      if (err instanceof ToolCallAlreadyAnsweredError || err instanceof UnknownToolCallError) {
        onError?.(err, call);
        return undefined;
      }
      if (signal?.aborted || !worthReconnecting(err)) throw err;
      onError?.(err, call);
      await sleep(backoffMs(attempt, retry), signal);
    }
  }
}

/**
 * Answers a session's declared-tool calls until the session ends (resolves with the
 * `session_ended` data) or `signal` aborts (resolves undefined). Wakes the session first.
 * @param {import("./client.js").WakelineClient} client
 */
export async function runHarness(client, sessionId, tools, options = {}) {
  const { wake = true, ...streamOptions } = options;
  const known = byName(tools);
  const stream = wake ? client.sessions.wake(sessionId, streamOptions) : client.sessions.toolCalls(sessionId, streamOptions);
  for await (const call of stream) {
    await answer(known, call, { ...options, retry: client.transport.retry });
  }
  return stream.ended;
}

/**
 * A worker of the tenant's pool: `await poolWorker(client, tools).run()` answers calls of
 * these tools from any session until `stop()`. `concurrency` streams run side by side; the
 * gateway leases each call to one of them at a time.
 */
export function poolWorker(client, tools, options = {}) {
  const known = byName(tools);
  const controller = new AbortController();
  const outer = options.signal;
  outer?.addEventListener("abort", () => controller.abort(outer.reason), { once: true });
  const settings = { ...options, signal: controller.signal, retry: client.transport.retry };

  async function loop() {
    const stream = client.pool.toolCalls({ ...settings, tools: [...known.keys()] });
    for await (const call of stream) {
      await answer(known, call, settings).catch((err) => {
        if (!controller.signal.aborted) throw err;
      });
    }
  }

  return {
    tools: [...known.keys()],
    signal: controller.signal,
    async run() {
      await Promise.all(Array.from({ length: options.concurrency ?? 1 }, loop));
    },
    stop(reason) {
      controller.abort(reason);
    },
  };
}
