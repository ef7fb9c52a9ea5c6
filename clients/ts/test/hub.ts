// Test helpers: the real hub (examples/hub), built once per test process and started per test on
// a free port; a TCP proxy whose connections a test can cut; HS256 JWTs.
import { execFile, spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, connect, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { existsSync } from "node:fs";
import type { TestContext } from "node:test";

/** The repository's root: this file runs as build/test/hub.js under clients/ts. */
export const repoRoot = fileURLToPath(new URL("../../../../", import.meta.url));

/** inCI reports whether tests run under CI, where a missing tool fails the test instead of skipping it. */
export const inCI = process.env.CI === "true";

/** lookPath finds an executable on PATH, or undefined. */
export function lookPath(...names: string[]): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    for (const name of names) {
      const p = join(dir, name);
      if (dir !== "" && existsSync(p)) {
        return p;
      }
    }
  }
  return undefined;
}

/**
 * requireTool returns the path of a tool the test needs; without it, the test fails under CI and is
 * skipped (with the reason) elsewhere, in which case it returns undefined.
 */
export function requireTool(t: TestContext, why: string, ...names: string[]): string | undefined {
  const p = lookPath(...names);
  if (p !== undefined) {
    return p;
  }
  const msg = `${names.join(" or ")} is not on PATH; ${why}`;
  if (inCI) {
    throw new Error(`${msg} (CI=true: the test cannot be skipped)`);
  }
  t.skip(msg);
  return undefined;
}

let built: Promise<string> | undefined;

/** hubBinary builds examples/hub once per process (or uses $PROMLIB_HUB) and returns its path. */
export function hubBinary(): Promise<string> {
  const given = process.env.PROMLIB_HUB;
  if (given) {
    return Promise.resolve(given);
  }
  built ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), "promlib-ts-hub-"));
    process.on("exit", () => {
      void rm(dir, { recursive: true, force: true });
    });
    const out = join(dir, "hub");
    await new Promise<void>((resolve, reject) => {
      execFile("go", ["build", "-o", out, "./examples/hub"], { cwd: repoRoot }, (err, _stdout, stderr) =>
        err ? reject(new Error(`go build ./examples/hub: ${err.message}\n${stderr}`)) : resolve(),
      );
    });
    return out;
  })();
  return built;
}

export interface Hub {
  /** host:port it listens on. */
  addr: string;
  /** ws://addr/ws */
  url: string;
  /** Everything the hub wrote to stderr so far. */
  log(): string;
  /** stop shuts the hub down (SIGTERM: it closes every connection with 1001) and waits for it to exit. */
  stop(): Promise<void>;
  /** metric sums the samples of a metric of /metrics whose labels include labels ("" for none). */
  metric(name: string, labels?: string): Promise<number>;
}

/**
 * startHub starts the hub on a free loopback port (or the -addr of args: a hub started again on the
 * port of one stopped) with args and env (no WS_TOKEN or JWT_* is inherited), and stops it when the
 * test ends.
 */
export async function startHub(t: TestContext, args: string[] = [], env: Record<string, string> = {}): Promise<Hub> {
  const bin = await hubBinary();
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !/^(WS_TOKEN|JWT_|MONGO_|PG_SCHEMA|HUB_ADDR)/.test(k)) {
      base[k] = v;
    }
  }
  // Events in memory unless the test names a store: the hub's default is a SQLite file in the
  // working directory, which tests must not leave behind.
  const store = args.includes("-store") ? [] : ["-store", "memory"];
  const addrArg = args.includes("-addr") ? [] : ["-addr", "127.0.0.1:0"];
  const child = spawn(bin, [...addrArg, "-log", "info", ...store, ...args], {
    env: { ...base, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    }
  };
  t.after(stop);
  let log = "";
  const addr = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the hub did not start within 20s:\n${log}`)), 20_000);
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => {
      log += chunk;
      const m = /"hub listening" addr=(\S+)/.exec(log);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the hub exited with ${code} before it listened:\n${log}`));
    });
  });
  const metric = async (name: string, labels = "") => {
    const res = await fetch(`http://${addr}/metrics`);
    const text = await res.text();
    let sum = 0;
    for (const line of text.split("\n")) {
      const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$/.exec(line);
      if (m && m[1] === name && (m[2] ?? "").includes(labels)) {
        sum += Number(m[3]);
      }
    }
    return sum;
  };
  return { addr, url: `ws://${addr}/ws`, log: () => log, stop, metric };
}

export interface Proxy {
  port: number;
  url: string;
  /** Connections accepted so far. */
  accepted: number;
  /** cut destroys every open connection, both sides, without a close handshake. */
  cut(): void;
  /** holdReplies stops forwarding what the server sends on the open connections. */
  holdReplies(): void;
  /** holdRequests stops forwarding what the client sends on the open connections. */
  holdRequests(): void;
  /** releaseReplies forwards what the server sends again, what it held first. */
  releaseReplies(): void;
  /** block closes every new connection at once, until unblock: the network is down. */
  block(): void;
  unblock(): void;
}

/**
 * startProxy forwards a loopback port to target (host:port) until the test ends. With delayMs,
 * everything it forwards, either way, arrives that much later (in order): a link with latency,
 * whose round trip takes twice delayMs however fast the machine is. holdReplies and holdRequests
 * act on links without delay only.
 */
export async function startProxy(t: TestContext, target: string, opts: { delayMs?: number } = {}): Promise<Proxy> {
  const [host, port] = [target.slice(0, target.lastIndexOf(":")), Number(target.slice(target.lastIndexOf(":") + 1))];
  const open = new Set<Socket>();
  const links = new Set<{ up: Socket; down: Socket }>();
  let blocked = false;
  const p: Proxy = {
    port: 0,
    url: "",
    accepted: 0,
    cut() {
      for (const s of open) {
        s.destroy();
      }
      open.clear();
      links.clear();
    },
    holdReplies() {
      for (const { up, down } of links) {
        up.unpipe(down);
        up.pause();
      }
    },
    holdRequests() {
      for (const { up, down } of links) {
        down.unpipe(up);
        down.pause();
      }
    },
    releaseReplies() {
      for (const { up, down } of links) {
        up.pipe(down);
      }
    },
    block() {
      blocked = true;
    },
    unblock() {
      blocked = false;
    },
  };
  const server: Server = createServer((down) => {
    if (blocked) {
      down.destroy();
      return;
    }
    p.accepted++;
    const up = connect(port, host);
    open.add(down);
    open.add(up);
    const link = { up, down };
    links.add(link);
    const drop = () => {
      down.destroy();
      up.destroy();
      open.delete(down);
      open.delete(up);
      links.delete(link);
    };
    down.on("error", drop).on("close", drop);
    up.on("error", drop);
    const delay = opts.delayMs ?? 0;
    if (delay <= 0) {
      // The server's side closing ends the client's after what it sent (its close frame too).
      up.on("close", () => {
        if (up.readableEnded) {
          down.end();
        } else {
          drop();
        }
      });
      down.pipe(up);
      up.pipe(down);
      return;
    }
    up.on("close", drop);
    // Timers of one delay fire in the order they were set: the bytes keep theirs.
    const later = (from: Socket, to: Socket) => {
      from.on("data", (chunk: Buffer) => setTimeout(() => to.write(chunk), delay));
      from.on("end", () => setTimeout(() => to.end(), delay));
    };
    later(down, up);
    later(up, down);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const addr = server.address();
  if (addr === null || typeof addr === "string") {
    throw new Error("proxy: no port");
  }
  p.port = addr.port;
  p.url = `ws://127.0.0.1:${addr.port}/ws`;
  t.after(() => {
    p.cut();
    server.close();
  });
  return p;
}

/** signJWT signs claims with HS256. */
export function signJWT(secret: string, claims: Record<string, unknown>): string {
  const enc = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const head = `${enc({ alg: "HS256", typ: "JWT" })}.${enc(claims)}`;
  return `${head}.${createHmac("sha256", secret).update(head).digest("base64url")}`;
}

/** Deferred is a promise with its resolve and reject at hand. */
export class Deferred<T = void> {
  readonly promise: Promise<T>;
  resolve!: (v: T) => void;
  reject!: (e: unknown) => void;
  constructor() {
    this.promise = new Promise<T>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }
}

/** within rejects if p does not settle within ms, naming what was awaited. */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
