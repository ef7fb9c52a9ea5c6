// The live dashboard example (examples/livedash, served by the hub at /live/): its copy of the
// client is the build of src, and in headless Chromium the page shows the states published to
// process.state, and those published while its connection was down once it is back: after a
// network cut, and after the hub restarted.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import type { TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import { chromium, type Page } from "playwright-core";
import { WebSocket } from "ws";
import { PromClient } from "@promethean/promlib-client";
import { repoRoot, requireTool, startHub, startProxy } from "./hub.js";

const TOKEN = "livedash-test-token";
const pkg = fileURLToPath(new URL("../../", import.meta.url));
const copy = join(repoRoot, "examples", "livedash", "static", "promlib");

test("the dashboard's copy of the client is the build of src (npm run build:livedash writes it)", async (t) => {
  const out = await mkdtemp(join(tmpdir(), "promlib-ts-livedash-"));
  t.after(() => rm(out, { recursive: true, force: true }));
  await new Promise<void>((resolve, reject) => {
    execFile(process.execPath, [join(pkg, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.livedash.json", "--outDir", out], { cwd: pkg }, (err, stdout, stderr) =>
      err ? reject(new Error(`tsc: ${err.message}\n${stdout}${stderr}`)) : resolve(),
    );
  });
  const want = (await readdir(out)).sort();
  const have = (await readdir(copy)).sort();
  const stale = "examples/livedash/static/promlib is not the build of src: run `npm run build:livedash` in clients/ts";
  assert.deepEqual(have, want, stale);
  for (const f of want) {
    assert.equal(await readFile(join(copy, f), "utf8"), await readFile(join(out, f), "utf8"), `${f}: ${stale}`);
  }
});

interface ProcessState {
  processId: string;
  name: string;
  host: string;
  pid: number;
  cpu_pct: number;
  mem_mb: number;
  last_seen_ts: number;
  status: "alive" | "stale";
}

function state(name: string, pid: number, status: ProcessState["status"], cpu: number): ProcessState {
  return { processId: `test:${name}:${pid}`, name, host: "test", pid, cpu_pct: cpu, mem_mb: 100 + pid, last_seen_ts: Date.now(), status };
}

/** shown returns what the page shows of the process rows whose id starts with prefix. */
function shown(tab: Page, prefix: string): Promise<Record<string, { status: string; cpu: string; seq: number }>> {
  return tab.evaluate((prefix) => {
    const out: Record<string, { status: string; cpu: string; seq: number }> = {};
    for (const tr of Array.from(document.querySelectorAll<HTMLTableRowElement>("#processes tr[data-process]"))) {
      const id = tr.dataset.process ?? "";
      if (id.startsWith(prefix)) {
        out[id] = {
          status: tr.querySelector('td[data-field="status"]')?.textContent ?? "",
          cpu: tr.querySelector('td[data-field="cpu_pct"]')?.textContent ?? "",
          seq: Number(tr.dataset.seq),
        };
      }
    }
    return out;
  }, prefix);
}

/** waitShown waits until the page shows want of the test's processes (status and cpu). */
async function waitShown(tab: Page, want: Record<string, { status: string; cpu: string }>, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const got = await shown(tab, "test:");
    const view = Object.fromEntries(Object.entries(got).map(([k, v]) => [k, { status: v.status, cpu: v.cpu }]));
    try {
      assert.deepEqual(view, want);
      return;
    } catch (err) {
      if (Date.now() > deadline) {
        const body = await tab.evaluate(() => ({ ...document.body.dataset, status: document.getElementById("status")?.textContent }));
        throw new Error(`${what}: ${err instanceof Error ? err.message : String(err)}\npage: ${JSON.stringify(body)}`);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const bodyData = (tab: Page) => tab.evaluate(() => ({ ...document.body.dataset }));

test("the live dashboard in headless Chromium shows process.state as published, and what was published while it was cut off", async (t: TestContext) => {
  const browserPath = requireTool(t, "the dashboard test drives Debian's chromium", "chromium", "chromium-browser");
  if (browserPath === undefined || requireTool(t, "the tests build examples/hub with it", "go") === undefined) {
    return;
  }
  const dir = await mkdtemp(join(tmpdir(), "promlib-ts-livedash-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const db = join(dir, "hub.db");
  // -demo: the hub's own heartbeat -> process.state projector, with three simulated processes.
  const hubArgs = ["-store", `sqlite:${db}`, "-demo"];
  const hub = await startHub(t, hubArgs, { WS_TOKEN: TOKEN });
  // The page is loaded through a proxy, so its WebSocket goes through it too: a link the test cuts.
  const link = await startProxy(t, hub.addr);
  const pub = await PromClient.connect(hub.url, { WebSocket, token: TOKEN, minBackoffMs: 20, maxBackoffMs: 200 });
  t.after(() => pub.close());
  const publish = (s: ProcessState) => pub.publish("process.state", s, { key: s.processId });

  // States before the page opens: it reads them from /latest.
  await publish(state("stt", 1, "alive", 10));
  await publish(state("tts", 2, "alive", 20));
  await publish(state("stt", 1, "alive", 11));

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
  const tab = await browser.newPage({ viewport: { width: 1100, height: 560 } });
  const problems: string[] = [];
  tab.on("pageerror", (e) => problems.push(`page error: ${String(e)}`));
  tab.on("console", (m) => {
    // While the link is down, Chromium logs each failed WebSocket attempt; the page logs nothing else as an error.
    if (m.type() === "error" && !/WebSocket connection to .* failed/.test(m.text())) {
      problems.push(`console error: ${m.text()} (${m.location().url})`);
    }
  });
  await tab.goto(`http://127.0.0.1:${link.port}/live/#token=${TOKEN}`);
  assert.equal(new URL(tab.url()).hash, "", "the token leaves the address bar");

  await waitShown(tab, { "test:stt:1": { status: "alive", cpu: "11.0" }, "test:tts:2": { status: "alive", cpu: "20.0" } }, "the states published before the page opened");
  await tab.waitForFunction(() => document.body.dataset.state === "open" && document.body.dataset.position !== "", undefined, { timeout: 15_000 });
  // And live: a state published now.
  await publish(state("llm", 3, "alive", 30));
  await waitShown(tab, {
    "test:stt:1": { status: "alive", cpu: "11.0" },
    "test:tts:2": { status: "alive", cpu: "20.0" },
    "test:llm:3": { status: "alive", cpu: "30.0" },
  }, "a state published while the page is open");
  // The demo's processes, published by the hub's projector.
  await tab.waitForFunction(() => ["demo:stt:101", "demo:tts:102", "demo:llm:103"].every((id) => document.querySelector(`tr[data-process="${id}"]`)), undefined, { timeout: 20_000 });

  // A network cut: the page is offline while states change.
  link.block();
  link.cut();
  await tab.waitForFunction(() => document.body.dataset.state === "reconnecting", undefined, { timeout: 10_000 });
  await publish(state("tts", 2, "stale", 20));
  await publish(state("gpu", 4, "alive", 40));
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal((await shown(tab, "test:"))["test:gpu:4"], undefined, "nothing comes while the link is down");
  link.unblock();
  await waitShown(tab, {
    "test:stt:1": { status: "alive", cpu: "11.0" },
    "test:tts:2": { status: "stale", cpu: "20.0" },
    "test:llm:3": { status: "alive", cpu: "30.0" },
    "test:gpu:4": { status: "alive", cpu: "40.0" },
  }, "the states published during the cut, after it");
  await tab.waitForFunction(() => document.body.dataset.state === "open", undefined, { timeout: 10_000 });

  // The hub drops the page's connection: it shuts down (1001) and starts again with the same file;
  // states are published before the page can reach it.
  link.block();
  await hub.stop();
  await tab.waitForFunction(() => document.body.dataset.state === "reconnecting", undefined, { timeout: 10_000 });
  await startHub(t, ["-addr", hub.addr, ...hubArgs], { WS_TOKEN: TOKEN });
  await publish(state("stt", 1, "stale", 11));
  await publish(state("llm", 3, "alive", 33));
  link.unblock();
  await waitShown(tab, {
    "test:stt:1": { status: "stale", cpu: "11.0" },
    "test:tts:2": { status: "stale", cpu: "20.0" },
    "test:llm:3": { status: "alive", cpu: "33.0" },
    "test:gpu:4": { status: "alive", cpu: "40.0" },
  }, "the states published while the hub restarted, after it");
  await tab.waitForFunction(() => document.body.dataset.state === "open", undefined, { timeout: 10_000 });

  const data = await bodyData(tab);
  assert.equal(data.gaps, "0", "no gap: every record was delivered");
  assert.ok(Number(data.connections) >= 3, `connections: ${data.connections}`);
  assert.ok(Number(data.recoveries) >= 3, `resumptions: ${data.recoveries} (the first, after /latest, and one per reconnect)`);
  // Each row shows the newest record of its key.
  const rows = await shown(tab, "test:");
  const seqs = Object.values(rows).map((r) => r.seq);
  assert.equal(new Set(seqs).size, seqs.length);

  const dirOut = process.env.TEST_ARTIFACTS;
  if (dirOut) {
    await mkdir(dirOut, { recursive: true });
    await writeFile(join(dirOut, "livedash.png"), await tab.screenshot());
  }
  assert.deepEqual(problems, [], "no errors in the page");
});
