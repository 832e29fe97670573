// `npm pack` makes a tarball that installs into an empty directory, with no registry, and
// imports there: the package needs nothing beyond Node.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { test } from "node:test";

const run = promisify(execFile);
const PACKAGE = fileURLToPath(new URL("..", import.meta.url));
const NPM = process.platform === "win32" ? "npm.cmd" : "npm";

test("the packed tarball installs offline in an empty directory and imports", { timeout: 120_000 }, async () => {
  const work = mkdtempSync(join(tmpdir(), "wakeline-pack-"));
  try {
    const { stdout } = await run(NPM, ["pack", "--json", "--pack-destination", work], { cwd: PACKAGE });
    const [{ filename, files }] = JSON.parse(stdout);
    const packed = files.map((f) => f.path);
    for (const wanted of ["src/index.js", "src/index.d.ts", "src/types.d.ts", "examples/ledger_harness.mjs", "README.md"]) {
      assert.ok(packed.includes(wanted), `${wanted} is packed`);
    }
    assert.ok(!packed.some((p) => p.startsWith("test/") || p.startsWith("node_modules/")), packed.join(", "));
    const app = mkdtempSync(join(work, "app-"));
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    await run(NPM, ["install", "--offline", "--no-audit", "--no-fund", join(work, filename)], { cwd: app });
    assert.ok(existsSync(join(app, "node_modules", "@wakeline", "client", "src", "types.d.ts")));
    writeFileSync(join(app, "check.mjs"), `
      import * as wakeline from "@wakeline/client";
      const names = ["WakelineClient", "WakelineError", "NotFoundError", "ConflictError", "ToolCallAlreadyAnsweredError",
        "runHarness", "poolWorker", "tool", "SseParser"];
      const missing = names.filter((name) => typeof wakeline[name] !== "function");
      if (missing.length) throw new Error("missing exports: " + missing.join(", "));
      const client = new wakeline.WakelineClient({ baseUrl: "http://127.0.0.1:9", apiKey: "k" });
      console.log(typeof client.sessions.wake, typeof client.pool.toolCalls);
    `);
    const checked = await run(process.execPath, ["check.mjs"], { cwd: app });
    assert.equal(checked.stdout.trim(), "function function");
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});

