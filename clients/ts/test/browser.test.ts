// The built client in headless Chromium (Debian's chromium, driven by playwright-core over CDP):
// a page served here loads dist/index.js as an ES module and talks to the hub with the browser's
// own WebSocket, while a Node client talks to the same hub.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { extname, join, normalize } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { WebSocket } from "ws";
import { PromClient } from "@promethean/promlib-client";
import { Deferred, requireTool, startHub, within } from "./hub.js";

const TOKEN = "browser-test-token";
const dist = fileURLToPath(new URL("../../dist/", import.meta.url));

const page = `<!doctype html>
<meta charset="utf-8">
<title>loading</title>
<script type="module">
  import * as promlib from "/dist/index.js";
  window.promlib = promlib;
  document.title = "ready";
</script>`;

const types: Record<string, string> = { ".js": "text/javascript", ".map": "application/json", ".ts": "text/plain" };

test("the built client works in headless Chromium against the hub", async (t) => {
  const browserPath = requireTool(t, "the browser test drives Debian's chromium", "chromium", "chromium-browser");
  if (browserPath === undefined || requireTool(t, "the tests build examples/hub with it", "go") === undefined) {
    return;
  }
  const hub = await startHub(t, ["-origins", "127.0.0.1:*"], { WS_TOKEN: TOKEN });

  // The page and the built client, nothing else.
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    if (path === "/") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(page);
      return;
    }
    const rel = normalize(path.slice("/dist/".length));
    if (!path.startsWith("/dist/") || rel.startsWith("..")) {
      res.writeHead(404).end();
      return;
    }
    readFile(join(dist, rel)).then(
      (body) => res.writeHead(200, { "content-type": types[extname(rel)] ?? "application/octet-stream" }).end(body),
      () => res.writeHead(404).end(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => server.close());
  const addr = server.address();
  assert.ok(addr !== null && typeof addr === "object");

  // Headless, with nothing of its own to fetch: this test talks to loopback only.
  const browser = await chromium.launch({
    executablePath: browserPath,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-default-apps",
      "--disable-domain-reliability",
    ],
  });
  t.after(() => browser.close());
  const tab = await browser.newPage();
  const consoleLines: string[] = [];
  tab.on("console", (m) => consoleLines.push(m.text()));
  tab.on("pageerror", (e) => consoleLines.push(String(e)));
  await tab.goto(`http://127.0.0.1:${addr.port}/`);
  await tab.waitForFunction(() => document.title === "ready", undefined, { timeout: 15_000 });

  // Node's side: gets what the page publishes.
  const node = await PromClient.connect(hub.url, { WebSocket, token: TOKEN });
  t.after(() => node.close());
  const fromPage: unknown[] = [];
  const gotAll = new Deferred<void>();
  await node.subscribe<{ n: number }>("browser.out", "node", (ev) => {
    fromPage.push(ev.payload);
    if (fromPage.length === 3) gotAll.resolve();
  });

  // The page: connects with its own WebSocket, subscribes (NACKing each first attempt), publishes
  // three frames at once, and reports a server refusal as a typed error.
  const result = await tab.evaluate(
    async ({ url, token }) => {
      const { PromClient, ProtocolError } = (window as unknown as { promlib: typeof import("@promethean/promlib-client") }).promlib;
      const client = await PromClient.connect(url, { token });
      const w = window as unknown as { client: unknown; received: unknown[] };
      w.client = client;
      w.received = [];
      await client.subscribe<{ hello: string }>("browser.in", "page", (ev, ctx) => {
        if (ctx.attempt === 1) {
          throw new Error("first attempt refused");
        }
        w.received.push({ payload: ev.payload, attempt: ctx.attempt });
      });
      const published = await Promise.all([1, 2, 3].map((n) => client.publish("browser.out", { n })));
      let refused = "";
      try {
        await client.publish("not a topic!", 1);
      } catch (e) {
        refused = e instanceof ProtocolError ? e.code : `not a ProtocolError: ${String(e)}`;
      }
      const blob = await client.publish("browser.bytes", new TextEncoder().encode("héllo"), { content_type: "text/plain" });
      return { ids: published.map((p) => p.id), refused, ws: typeof WebSocket, blob: blob.id };
    },
    { url: hub.url, token: TOKEN },
  );
  assert.equal(result.ids.length, 3);
  assert.equal(result.refused, "bad_frame");
  assert.equal(result.ws, "function");

  await within(gotAll.promise, 10_000, "the page's three events in Node");
  const bytes = new Deferred<{ payload: unknown; type: string | undefined }>();
  await node.subscribe<Uint8Array>("browser.bytes", "node", (ev) => bytes.resolve({ payload: ev.payload, type: ev.content_type }), { from: "earliest" });
  const blob = await within(bytes.promise, 10_000, "the page's bytes in Node");
  assert.ok(blob.payload instanceof Uint8Array);
  assert.equal(Buffer.from(blob.payload).toString("utf8"), "héllo");
  assert.equal(blob.type, "text/plain");
  assert.deepEqual(
    (fromPage as { n: number }[]).map((p) => p.n).sort(),
    [1, 2, 3],
  );

  await node.publish("browser.in", { hello: "from node" });
  await tab.waitForFunction(() => (window as unknown as { received: unknown[] }).received.length === 1, undefined, { timeout: 10_000 });
  const received = await tab.evaluate(() => (window as unknown as { received: unknown[] }).received);
  assert.deepEqual(received, [{ payload: { hello: "from node" }, attempt: 2 }]);

  await tab.evaluate(() => (window as unknown as { client: { close(): Promise<void> } }).client.close());
  assert.deepEqual(
    consoleLines.filter((l) => /error/i.test(l)),
    [],
    "no errors in the page",
  );
});
