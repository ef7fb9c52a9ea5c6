// Parts of the client that need no server.
import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidArgumentError, jwtExpiry, PromClient, ProtocolError, errorCodes, isProtocolError } from "@promethean/promlib-client";
import { Deferred, signJWT } from "./hub.js";

test("jwtExpiry reads exp from a JWT and nothing from other tokens", () => {
  const exp = 2_000_000_000;
  assert.equal(jwtExpiry(signJWT("k".repeat(32), { sub: "a", exp })), exp * 1000);
  assert.equal(jwtExpiry(signJWT("k".repeat(32), { sub: "a" })), undefined);
  assert.equal(jwtExpiry(signJWT("k".repeat(32), { sub: "a", exp: "soon" })), undefined);
  assert.equal(jwtExpiry("static-token"), undefined);
  assert.equal(jwtExpiry("a.!!!.c"), undefined);
  assert.equal(jwtExpiry("a..c"), undefined);
});

test("ProtocolError carries its code", () => {
  const e = new ProtocolError("rate_limited", "slow down");
  assert.equal(e.message, "promlib: rate_limited: slow down");
  assert.equal(e.name, "ProtocolError");
  assert.ok(isProtocolError(e, "rate_limited"));
  assert.ok(!isProtocolError(e, "forbidden"));
  assert.ok(!isProtocolError(new Error("x")));
  assert.equal(errorCodes.length, 14);
});

test("without a WebSocket the client says how to give one", async () => {
  const g = globalThis as { WebSocket?: unknown };
  const saved = g.WebSocket;
  delete g.WebSocket;
  try {
    await assert.rejects(PromClient.connect("ws://127.0.0.1:1/ws"), (e: unknown) => e instanceof InvalidArgumentError && /options\.WebSocket/.test(e.message));
  } finally {
    if (saved !== undefined) g.WebSocket = saved;
  }
});

test("a server that is not there fails the first connect", async () => {
  const { WebSocket } = await import("ws");
  await assert.rejects(PromClient.connect("ws://127.0.0.1:1/ws", { WebSocket, connectTimeoutMs: 2000 }), /closed before it opened/);
});

test("hostile frames from a server are reported, never thrown, and the connection goes on", async (t) => {
  const { WebSocket, WebSocketServer } = await import("ws");
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  t.after(() => wss.close());
  await new Promise((resolve) => wss.once("listening", resolve));
  const port = (wss.address() as { port: number }).port;
  wss.on("connection", (sock) => {
    sock.on("message", (data) => {
      const f = JSON.parse(String(data)) as { op: string; corr: string; topic?: string; group?: string };
      if (f.op === "AUTH") {
        sock.send(JSON.stringify({ op: "OK", corr: f.corr }));
        return;
      }
      if (f.op === "SUBSCRIBE") {
        sock.send(JSON.stringify({ op: "OK", corr: f.corr }));
        return;
      }
      // Before the answer: garbage of every kind.
      sock.send("not json {");
      sock.send("[1,2]");
      sock.send(JSON.stringify({ op: "EVENT", topic: "t", group: "g" })); // no event
      sock.send(JSON.stringify({ op: "EVENT", topic: "t", group: "g", event: { id: "e1", payload: "%%%", payload_encoding: "base64" }, ctx: { attempt: 1, ack_deadline_ms: 1000 } }));
      sock.send(JSON.stringify({ op: "OK", corr: "no-such-corr" }));
      sock.send(JSON.stringify({ op: "SOMETHING_NEW", x: 1 }));
      sock.send(Buffer.from([0xff, 0xfe]), { binary: true });
      sock.send(JSON.stringify({ op: "ERR", code: "internal", msg: "spontaneous" }));
      sock.send(JSON.stringify({ op: "ERR", code: "rate_limited", msg: "slow down", corr: f.corr }));
    });
  });
  const errors: Error[] = [];
  const c = await PromClient.connect(`ws://127.0.0.1:${port}`, { WebSocket, onError: (e) => errors.push(e) });
  t.after(() => c.close({ drainTimeoutMs: 100 }));
  const seen: unknown[] = [];
  await c.subscribe("t", "g", (ev) => {
    seen.push(ev.payload);
  });
  await assert.rejects(c.publish("t", 1), (e: unknown) => e instanceof ProtocolError && e.code === "rate_limited" && e.message.includes("slow down"));
  assert.equal(c.state, "open");
  assert.equal(c.connectionCount, 1);
  const msgs = errors.map((e) => e.message);
  assert.ok(msgs.some((m) => /not JSON/.test(m)), msgs.join("\n"));
  assert.ok(msgs.some((m) => /without op/.test(m)), msgs.join("\n"));
  assert.ok(msgs.some((m) => /EVENT frame without an event/.test(m)), msgs.join("\n"));
  assert.ok(msgs.some((m) => /marked base64 that is not base64/.test(m)), msgs.join("\n"));
  assert.ok(msgs.some((m) => /spontaneous/.test(m)), msgs.join("\n"));
  assert.equal(errors.length, 6, msgs.join("\n")); // and the binary frame: not JSON
  // The event with bad base64 is delivered as sent, marker and all.
  assert.deepEqual(seen, ["%%%"]);
});

test("live: frames after the OK are the subscription's; a resumption's answer takes its place after the events still queued", async (t) => {
  const { WebSocket, WebSocketServer } = await import("ws");
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  t.after(() => wss.close());
  await new Promise((resolve) => wss.once("listening", resolve));
  const port = (wss.address() as { port: number }).port;
  const subscribes: unknown[] = [];
  const resubscribed = new Deferred();
  let conns = 0;
  wss.on("connection", (sock) => {
    const n = ++conns;
    sock.on("message", (data) => {
      const f = JSON.parse(String(data)) as { op: string; corr: string; topic?: string; opts?: unknown };
      if (f.op !== "SUBSCRIBE") {
        sock.send(JSON.stringify({ op: "OK", corr: f.corr }));
        return;
      }
      subscribes.push(f.opts);
      const ev = (seq: number) => JSON.stringify({ op: "EVENT", topic: "t", event: { id: `e${n}.${seq}`, seq, ts: 1, topic: "t", payload: seq } });
      if (n === 1) {
        // The OK and the events at once: nothing may be lost to the order in which they are handled.
        sock.send(JSON.stringify({ op: "OK", corr: f.corr, seq: 10 }));
        for (const seq of [11, 12, 13]) sock.send(ev(seq));
        setTimeout(() => sock.close(1001, "going away"), 50);
        return;
      }
      // Another log: the position is beyond it.
      sock.send(JSON.stringify({ op: "OK", corr: f.corr, seq: 0, recovered: false }));
      sock.send(ev(1));
      sock.send(JSON.stringify({ op: "GAP", topic: "t", reason: "deleted" })); // no range: reported
      sock.send(ev(2));
      sock.send(JSON.stringify({ op: "GAP", topic: "t", from: 3, to: 4, reason: "deleted" }));
      sock.send(ev(1)); // again: at or below the position, skipped
      resubscribed.resolve();
    });
  });
  const errors: Error[] = [];
  const c = await PromClient.connect(`ws://127.0.0.1:${port}`, { WebSocket, minBackoffMs: 10, maxBackoffMs: 20, onError: (e) => errors.push(e) });
  t.after(() => c.close());
  const log: unknown[] = [];
  const sub = await c.subscribeLive<number>("t", async (ev) => {
    if (ev.seq === 11) await resubscribed.promise; // held until the reconnect's SUBSCRIBE was answered
    log.push(ev.seq);
  }, {
    onGap: (g) => log.push(g),
    onRecovery: (r) => log.push(r),
  });
  const deadline = Date.now() + 10_000;
  while (sub.position !== 4 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  assert.deepEqual(subscribes, [{}, { since: 10 }], "the reconnect resumes after the position: 11 was not handled yet");
  assert.deepEqual(log, [
    11, 12, 13, // received before the connection was lost: handled
    { since: 10, seq: 0, recovered: false, reset: true },
    1, 2,
    { from: 3, to: 4, reason: "deleted" },
  ]);
  assert.equal(sub.position, 4);
  assert.ok(errors.some((e) => /GAP frame of topic "t" without a valid from and to/.test(e.message)), errors.map(String).join("\n"));
});
