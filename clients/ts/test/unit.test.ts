// Parts of the client that need no server.
import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidArgumentError, jwtExpiry, PromClient, ProtocolError, errorCodes, isProtocolError } from "@promethean/promlib-client";
import { signJWT } from "./hub.js";

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
