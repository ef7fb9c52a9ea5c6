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
