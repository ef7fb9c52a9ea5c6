// The client against the real hub (examples/hub), over the wire.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { TestContext } from "node:test";
import { WebSocket } from "ws";
import {
  ClosedError,
  ConnectionError,
  InvalidArgumentError,
  PromClient,
  ProtocolError,
  type ClientOptions,
  type ConnectionState,
  type DeliveryContext,
  type EventRecord,
} from "@promethean/promlib-client";
import { Deferred, requireTool, signJWT, startHub, startProxy, within } from "./hub.js";

const TOKEN = "static-token-for-tests";
const SECRET = "an HS256 secret of at least 32 bytes, for tests only";

interface Order {
  n: number;
  note: string;
}

/** connect connects a client that is closed when the test ends. */
async function connect(t: TestContext, url: string, opts: ClientOptions = {}): Promise<PromClient> {
  const c = await PromClient.connect(url, { WebSocket, token: TOKEN, minBackoffMs: 20, maxBackoffMs: 200, ...opts });
  t.after(() => c.close({ drainTimeoutMs: 500 }));
  return c;
}

/** needGo fails (CI) or skips the test without the Go toolchain, which builds the hub. */
function needGo(t: TestContext): boolean {
  return requireTool(t, "the tests build examples/hub with it", "go") !== undefined;
}

/** collector is a handler that records events and resolves when `want` of them came. */
function collector<T>(want: number) {
  const got: { ev: EventRecord<T>; ctx: DeliveryContext }[] = [];
  const all = new Deferred<void>();
  return {
    got,
    all: all.promise,
    handler: (ev: EventRecord<T>, ctx: DeliveryContext) => {
      got.push({ ev, ctx });
      if (got.length === want) {
        all.resolve();
      }
    },
  };
}

/**
 * firstAfterResubscribe subscribes group again (through a new client), publishes a marker with the
 * same key and returns the id of the first event the group gets: the marker when every earlier
 * event of that key was settled.
 */
async function firstAfterResubscribe(t: TestContext, url: string, topic: string, group: string, key: string): Promise<string> {
  const c = await connect(t, url);
  const first = new Deferred<string>();
  const sub = await c.subscribe(topic, group, (ev) => first.resolve(ev.id));
  const marker = await c.publish(topic, { marker: true }, { key });
  const id = await within(first.promise, 10_000, "the group's first event after subscribing again");
  await sub.close();
  assert.ok(marker.id, "marker published");
  return id;
}

describe("against the hub", { concurrency: true }, () => {
  test("publish pipelines many frames; subscribe gets them typed, in order per key, and acks them", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, [], { WS_TOKEN: TOKEN });
    const c = await connect(t, hub.url);
    const topic = "orders.created";
    const n = 300;
    const col = collector<Order>(n);
    const sub = await c.subscribe<Order>(topic, "billing", col.handler, { from: "earliest", maxInFlight: 50 });
    // All in flight at once: each promise gets its own answer.
    const results = await Promise.all(
      Array.from({ length: n }, (_, i) => c.publish<Order>(topic, { n: i, note: `order ${i}` }, { key: "k", headers: { h: String(i) } })),
    );
    assert.equal(new Set(results.map((r) => r.id)).size, n, "distinct ids");
    for (let i = 1; i < n; i++) {
      assert.ok(results[i]!.seq > results[i - 1]!.seq, `seq grows with the frames' order (${i})`);
    }
    await within(col.all, 15_000, `${n} events`);
    assert.deepEqual(
      col.got.map((g) => g.ev.payload.n),
      Array.from({ length: n }, (_, i) => i),
      "one key keeps its order",
    );
    const first = col.got[0]!;
    assert.equal(first.ev.id, results[0]!.id);
    assert.equal(first.ev.topic, topic);
    assert.equal(first.ev.key, "k");
    assert.deepEqual(first.ev.headers, { h: "0" });
    assert.equal(first.ctx.attempt, 1);
    assert.ok(first.ctx.deadline > Date.now() - 60_000);
    await sub.close();
    // Every event was acked: the group's next event is the marker.
    const next = await firstAfterResubscribe(t, hub.url, topic, "billing", "k");
    assert.ok(!results.some((r) => r.id === next), "no acked event came again");
  });

  test("keyOrdered: a key's events come one at a time and in order, a failed one first again", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, [], { WS_TOKEN: TOKEN });
    const c = await connect(t, hub.url);
    const topic = "orders.keyed";
    const want: Record<string, number[]> = { a: [], b: [], c: [] };
    for (let i = 0; i < 5; i++) {
      for (const key of Object.keys(want)) {
        await c.publish<Order>(topic, { n: i, note: key }, { key });
        want[key]!.push(i);
      }
    }
    await assert.rejects(c.subscribe(topic, "g", () => {}, { maxPerKey: 2 }), (e: unknown) => e instanceof InvalidArgumentError && /maxPerKey/.test(e.message));
    // maxPerKey is the group's setting: above this subscription's maxInFlight it is capped, not
    // refused; another value for a group that has one is refused, naming it.
    const capped = await c.subscribe(topic, "capped", () => {}, { keyOrdered: true, maxInFlight: 2, maxPerKey: 3 });
    await capped.close();
    await assert.rejects(
      c.subscribe(topic, "capped", () => {}, { keyOrdered: true, maxPerKey: 2 }),
      (e: unknown) => e instanceof ProtocolError && e.code === "bad_frame" && /maxPerKey/.test(e.message),
    );
    const got: Record<string, number[]> = { a: [], b: [], c: [] };
    const running: Record<string, number> = {};
    let overlaps = 0;
    let failed = 0;
    const all = new Deferred<void>();
    await c.subscribe<Order>(topic, "g", async (ev) => {
      const key = ev.key!;
      running[key] = (running[key] ?? 0) + 1;
      if (running[key]! > 1) overlaps++;
      await new Promise((resolve) => setImmediate(resolve)); // let the others run
      running[key]!--;
      if (key === "a" && ev.payload.n === 0 && failed === 0) {
        failed++;
        throw new Error("not yet");
      }
      got[key]!.push(ev.payload.n);
      if (Object.values(got).every((g) => g.length === 5)) all.resolve();
    }, { from: "earliest", keyOrdered: true, maxPerKey: 2, maxInFlight: 6, concurrency: 4 });
    await within(all.promise, 15_000, "15 keyed events");
    assert.deepEqual(got, want, "each key in order, a's first event before the rest of a");
    assert.equal(overlaps, 0, "never two events of one key in handlers at once");
    assert.equal(failed, 1);
  });

  test("binary payloads go out as base64 and come back as bytes with their content type", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, [], { WS_TOKEN: TOKEN });
    const c = await connect(t, hub.url);
    const col = collector<Uint8Array | { json: boolean }>(4);
    await c.subscribe<Uint8Array | { json: boolean }>("blobs", "g", col.handler, { from: "earliest" });
    const all = Uint8Array.from({ length: 256 }, (_, i) => i);
    await c.publish("blobs", all, { key: "k" });
    await c.publish("blobs", Uint8Array.of(0x89, 0x50, 0x4e, 0x47).buffer, { key: "k", content_type: "image/png" });
    await c.publish("blobs", new Uint8Array(0), { key: "k" });
    await c.publish("blobs", { json: true }, { key: "k" });
    await within(col.all, 10_000, "the four events");
    const [a, b, empty, json] = col.got.map((g) => g.ev);
    assert.ok(a!.payload instanceof Uint8Array);
    assert.deepEqual([...(a!.payload as Uint8Array)], [...all]);
    assert.equal(a!.content_type, "application/octet-stream");
    assert.ok(!("payload_encoding" in a!), "the marker is consumed");
    assert.deepEqual([...(b!.payload as Uint8Array)], [0x89, 0x50, 0x4e, 0x47]);
    assert.equal(b!.content_type, "image/png");
    assert.deepEqual([...(empty!.payload as Uint8Array)], []);
    assert.deepEqual(json!.payload, { json: true });
    assert.equal(json!.content_type, undefined);
    await assert.rejects(c.publish("blobs", { json: true }, { content_type: "image/png" }), InvalidArgumentError);
    // The hub refuses a JSON content type for bytes, by name.
    await assert.rejects(c.publish("blobs", all, { content_type: "application/json" }), (e: unknown) => e instanceof ProtocolError && e.code === "bad_frame");
  });

  test("a rejected handler NACKs with its reason and the event comes again with the next attempt", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, [], { WS_TOKEN: TOKEN });
    const c = await connect(t, hub.url);
    const attempts: number[] = [];
    const again = new Deferred<void>();
    const sub = await c.subscribe<Order>("jobs", "workers", (_ev, ctx) => {
      attempts.push(ctx.attempt);
      if (ctx.attempt === 1) {
        throw new Error("not yet");
      }
      again.resolve();
    });
    const { id } = await c.publish<Order>("jobs", { n: 1, note: "" }, { key: "k" });
    await within(again.promise, 10_000, "the redelivery after NACK");
    assert.deepEqual(attempts, [1, 2]);
    await sub.close();
    assert.notEqual(await firstAfterResubscribe(t, hub.url, "jobs", "workers", "k"), id, "attempt 2 was acked");
  });

  test("extend sends MODACK for the delivery's attempt; once settled, unknown_id", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, [], { WS_TOKEN: TOKEN });
    const c = await connect(t, hub.url);
    const seen = new Deferred<DeliveryContext>();
    const extended = new Deferred<number[]>();
    await c.subscribe("leases", "g", async (_ev, ctx) => {
      const before = ctx.deadline;
      await ctx.extend(120_000);
      extended.resolve([before, ctx.deadline]);
      seen.resolve(ctx);
    }, { ackTimeoutMs: 5_000 });
    await c.publish("leases", 1);
    const [before, after] = await within(extended.promise, 10_000, "MODACK's answer");
    assert.ok(after! > before! + 100_000, `deadline moved from ${before} to ${after}`);
    const ctx = await seen.promise;
    // The handler has returned, so the event was acked: its lease is gone.
    await within(
      (async () => {
        for (;;) {
          try {
            await ctx.extend(1000);
          } catch (err) {
            return err;
          }
        }
      })().then((err) => {
        assert.ok(err instanceof ProtocolError, String(err));
        assert.equal(err.code, "unknown_id");
      }),
      10_000,
      "MODACK after ACK to be refused",
    );
    await assert.rejects(ctx.extend(0), InvalidArgumentError);
  });

  test("an ACK after the lease ended is refused (ack_failed) and reported; the redelivery's ACK settles it", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, [], { WS_TOKEN: TOKEN });
    // 60 ms each way: a round trip takes 120 ms of the 200 ms lease however fast the machine is,
    // and two of them, which a handler that waits without extending its lease needs, take more.
    const link = await startProxy(t, hub.addr, { delayMs: 60 });
    const reported: Error[] = [];
    const refused = new Deferred<Error>(); // attempt 1's ACK
    const c = await connect(t, link.url, {
      onError: (e) => {
        reported.push(e);
        if (/attempt 1\b/.test(e.message)) {
          refused.resolve(e);
        }
      },
    });
    const redelivery = new Deferred<number>(); // the attempt that holds the event
    const sub = await c.subscribe("late", "g", async (_ev, ctx) => {
      if (ctx.attempt === 1) {
        await redelivery.promise; // until the lease has ended and the event came again
        return;
      }
      // The redelivery waits a round trip for attempt 1's ACK to be refused, and its own ACK
      // takes half of another: longer than its 200 ms lease. A handler that waits extends its
      // lease first.
      try {
        await ctx.extend(60_000);
      } catch {
        return; // its lease ran out before the MODACK came (a stalled machine): the next attempt holds the event
      }
      redelivery.resolve(ctx.attempt);
      await refused.promise; // attempt 1's ACK goes first
    }, { ackTimeoutMs: 200, maxAttempts: 20, concurrency: 2 });
    const { id } = await c.publish("late", 1, { key: "k" });
    const err = await within(refused.promise, 10_000, "the late ACK to be refused");
    assert.ok(err instanceof ProtocolError, String(err));
    assert.equal(err.code, "ack_failed");
    assert.match(err.message, /attempt 1\b/);
    const attempt = await redelivery.promise;
    assert.ok(attempt >= 2, `attempt ${attempt} is a redelivery`);
    await sub.close();
    assert.notEqual(await firstAfterResubscribe(t, hub.url, "late", "g", "k"), id, `attempt ${attempt}'s ACK settled it`);
    for (const e of reported) {
      // Only ACKs of attempts whose lease had ended are refused.
      assert.ok(e instanceof ProtocolError && e.code === "ack_failed", String(e));
    }
  });

  test("events in flight when the connection drops come again after the reconnect, which re-subscribes", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, [], { WS_TOKEN: TOKEN });
    const proxy = await startProxy(t, hub.addr);
    const states: ConnectionState[] = [];
    const c = await connect(t, proxy.url, { onStateChange: (s) => states.push(s) });
    const first = new Deferred<{ id: string; signal: AbortSignal }>();
    const second = new Deferred<{ id: string; attempt: number }>();
    const pub = await connect(t, hub.url);
    const sub = await c.subscribe("work", "w", async (ev, ctx) => {
      if (ctx.attempt === 1) {
        first.resolve({ id: ev.id, signal: ctx.signal });
        // Never settles by itself: it ends with its connection.
        await new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason)));
        return;
      }
      second.resolve({ id: ev.id, attempt: ctx.attempt });
    }, { concurrency: 2 });
    const { id } = await pub.publish("work", { job: 1 }, { key: "k" });
    const got = await within(first.promise, 10_000, "the first delivery");
    assert.equal(got.id, id);
    proxy.cut();
    const again = await within(second.promise, 10_000, "the redelivery on the new connection");
    assert.deepEqual(again, { id, attempt: 2 });
    assert.ok(got.signal.aborted, "the first delivery's signal is aborted");
    assert.ok(got.signal.reason instanceof ConnectionError);
    assert.equal(c.connectionCount, 2);
    assert.equal(proxy.accepted, 2);
    assert.deepEqual(states, ["open", "reconnecting", "open"]);
    assert.equal(sub.error, undefined);
    await sub.close();
    assert.notEqual(await firstAfterResubscribe(t, hub.url, "work", "w", "k"), id, "the redelivery was acked");
  });

  test("publishes cut off by a dropped connection are sent again and stored once", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, [], { WS_TOKEN: TOKEN });
    const proxy = await startProxy(t, hub.addr);
    const reconnecting = new Deferred<void>();
    const c = await connect(t, proxy.url, { onStateChange: (s) => s === "reconnecting" && reconnecting.resolve() });
    const n = 200;
    const later = 10;
    // The hub stores the first half, but no answer reaches the client; the second half never
    // reaches the hub. Each one must be sent again after the reconnect, and the hub keeps one
    // event per id.
    proxy.holdReplies();
    const watcher = await connect(t, hub.url);
    const stored = collector(n / 2);
    await watcher.subscribe("ledger", "watch", stored.handler, { from: "earliest" });
    const pending = Array.from({ length: n / 2 }, (_, i) => c.publish("ledger", { i }, { key: "k" }));
    await within(stored.all, 15_000, "the hub to store the first half");
    proxy.holdRequests();
    pending.push(...Array.from({ length: n / 2 }, (_, i) => c.publish("ledger", { i: n / 2 + i }, { key: "k" })));
    proxy.cut();
    // Publishes made while reconnecting go out after those cut off.
    await within(reconnecting.promise, 10_000, "the client to notice the cut");
    pending.push(...Array.from({ length: later }, (_, i) => c.publish("ledger", { i: n + i }, { key: "k" })));
    const results = await within(Promise.all(pending), 15_000, "every publish to resolve");
    assert.equal(new Set(results.map((r) => r.id)).size, n + later);
    assert.equal(c.connectionCount, 2, "reconnected once");

    const reader = await connect(t, hub.url);
    const ids: string[] = [];
    const order: number[] = [];
    const marker = new Deferred<void>();
    let markerID = "";
    await reader.subscribe<{ i?: number }>("ledger", "audit", (ev) => {
      if (ev.id === markerID) {
        marker.resolve();
        return;
      }
      ids.push(ev.id);
      order.push(ev.payload.i ?? -1);
    }, { from: "earliest", maxInFlight: 100 });
    markerID = (await reader.publish("ledger", { end: true }, { key: "k" })).id;
    await within(marker.promise, 15_000, "the marker after the ledger");
    assert.equal(ids.length, n + later, "each publish stored once");
    assert.deepEqual(ids, results.map((r) => r.id));
    assert.deepEqual(order, Array.from({ length: n + later }, (_, i) => i), "stored in the order of the calls");
  });

  test("token refresh: the provider is asked before expiry and AUTH keeps the connection", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, ["-jwt-leeway", "0s"], { JWT_SECRET: SECRET });
    const scope = "publish:** subscribe:**";
    const token = (sub: string, lifeMs: number) => signJWT(SECRET, { sub, scope, exp: Math.ceil((Date.now() + lifeMs) / 1000) });

    // Control: a token that is not refreshed ends the connection with 4401.
    const expired = new Deferred<Error | undefined>();
    const fixed = await connect(t, hub.url, {
      token: token("bob", 1500),
      reconnect: false,
      onStateChange: (s, err) => s === "closed" && expired.resolve(err),
    });
    assert.equal(fixed.state, "open");

    let calls = 0;
    let firstExp = 0;
    const pastFirst = new Deferred<void>();
    const states: ConnectionState[] = [];
    const c = await connect(t, hub.url, {
      token: () => {
        calls++;
        const tok = token("alice", 2000);
        const exp = JSON.parse(Buffer.from(tok.split(".")[1]!, "base64url").toString()).exp * 1000;
        firstExp ||= exp;
        if (Date.now() > firstExp + 300) {
          pastFirst.resolve();
        }
        return tok;
      },
      onStateChange: (s) => states.push(s),
    });
    const events = collector<{ n: number }>(1);
    await c.subscribe("ticks", "g", events.handler);

    const err = await within(expired.promise, 10_000, "the unrefreshed connection to end");
    assert.ok(err instanceof ConnectionError, String(err));
    assert.equal(err.closeCode, 4401);
    assert.equal(fixed.state, "closed");
    await assert.rejects(fixed.publish("ticks", { n: 0 }), ConnectionError);

    await within(pastFirst.promise, 10_000, "a refresh after the first token's expiry");
    await c.publish("ticks", { n: 1 });
    await within(events.all, 10_000, "an event after the first token expired");
    assert.equal(c.connectionCount, 1, "the same connection throughout");
    assert.deepEqual(states, ["open"]);
    assert.ok(calls >= 3, `provider called ${calls} times`);

    // A narrower token ends the subscriptions it does not allow; the server says which.
    const other = await c.subscribe("other.topic", "g", () => {});
    await c.auth(signJWT(SECRET, { sub: "alice", scope: "publish:** subscribe:ticks", exp: Math.ceil(Date.now() / 1000) + 600 }));
    await within(other.done, 10_000, "the server to end the subscription");
    assert.ok(other.error instanceof ProtocolError, String(other.error));
    assert.equal(other.error.code, "forbidden");
    assert.equal(other.error.topic, "other.topic");

    // A token of another subject is refused, and the connection keeps the old one.
    await assert.rejects(c.auth(token("mallory", 60_000)), (e: unknown) => e instanceof ProtocolError && e.code === "auth_failed");
    await c.publish("ticks", { n: 2 });
    assert.equal(c.connectionCount, 1);
  });

  test("refusals are typed errors with the protocol's codes", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, ["-publish-rate", "0.1"], { JWT_SECRET: SECRET });
    const tok = signJWT(SECRET, { sub: "carol", scope: "publish:orders.* subscribe:orders.*", exp: Math.ceil(Date.now() / 1000) + 600 });
    const c = await connect(t, hub.url, { token: tok });

    // -publish-rate 0.1: a burst of one; the others are refused, not queued.
    const settled = await Promise.allSettled(Array.from({ length: 5 }, (_, i) => c.publish("orders.a", { i })));
    assert.equal(settled[0]!.status, "fulfilled");
    for (const r of settled.slice(1)) {
      assert.equal(r.status, "rejected");
      const e = (r as PromiseRejectedResult).reason as unknown;
      assert.ok(e instanceof ProtocolError, String(e));
      assert.equal(e.code, "rate_limited");
      assert.match(e.message, /rate/);
    }

    await assert.rejects(c.subscribe("billing.x", "g", () => {}), (e: unknown) => e instanceof ProtocolError && e.code === "forbidden");
    await c.subscribe("orders.a", "g", () => {});
    await assert.rejects(c.subscribe("orders.a", "g", () => {}), (e: unknown) => e instanceof ProtocolError && e.code === "already_subscribed");

    await assert.rejects(PromClient.connect(hub.url, { WebSocket, token: "not a jwt" }), (e: unknown) => e instanceof ProtocolError && e.code === "auth_failed");
    await assert.rejects(c.publish("orders.a", undefined), InvalidArgumentError);
    await assert.rejects(c.subscribe("orders.a", "h", () => {}, { maxInFlight: -1 }), /maxInFlight/);
    await assert.rejects(PromClient.connect(hub.url, { WebSocket, connectTimeoutMs: -1 }), /connectTimeoutMs/);
  });

  test("pause stops deliveries until resume; close drains running handlers and their acks", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, [], { WS_TOKEN: TOKEN });
    const c = await connect(t, hub.url);
    const pub = await connect(t, hub.url);

    const paused: string[] = [];
    const resumed = new Deferred<void>();
    const sub = await c.subscribe("feed", "paused", (ev) => {
      paused.push(ev.id);
      resumed.resolve();
    });
    const witness = collector(1);
    await c.subscribe("feed", "witness", witness.handler);
    await sub.pause();
    assert.ok(sub.isPaused);
    await pub.publish("feed", "x", { key: "k" });
    await within(witness.all, 10_000, "the other group's delivery");
    assert.deepEqual(paused, [], "no event while paused");
    await sub.resume();
    await within(resumed.promise, 10_000, "the delivery after RESUME");

    // close() waits for the running handler and its ACK.
    const release = new Deferred<void>();
    const started = new Deferred<string>();
    const slow = await c.subscribe("slow", "g", async (ev) => {
      started.resolve(ev.id);
      await release.promise;
    });
    const { id } = await pub.publish("slow", 1, { key: "k" });
    assert.equal(await within(started.promise, 10_000, "the slow handler"), id);
    let closed = false;
    const closing = slow.close().then(() => (closed = true));
    await Promise.resolve();
    assert.equal(closed, false, "close waits for the running handler");
    assert.equal(slow.active, 1);
    release.resolve();
    await within(closing, 10_000, "close after the handler returned");
    assert.notEqual(await firstAfterResubscribe(t, hub.url, "slow", "g", "k"), id, "the drained handler's event was acked");

    // A closed client refuses new calls.
    await c.close();
    await assert.rejects(c.publish("feed", 1), ClosedError);
    assert.equal(c.state, "closed");
  });

  test("a handler that outlives the drain timeout is aborted and its event goes back to the group", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, [], { WS_TOKEN: TOKEN });
    const c = await connect(t, hub.url);
    const started = new Deferred<AbortSignal>();
    const stuck = await c.subscribe("stuck", "g", (_ev, ctx) => {
      started.resolve(ctx.signal);
      return new Promise<void>(() => {}); // never settles
    });
    const { id } = await c.publish("stuck", 1, { key: "k" });
    const signal = await within(started.promise, 10_000, "the handler to start");
    await within(stuck.close({ drainTimeoutMs: 100 }), 10_000, "close after its drain timeout");
    assert.ok(signal.aborted);
    assert.ok(signal.reason instanceof ClosedError);
    // UNSUBSCRIBE gave it back: the group's next subscriber gets it, as attempt 2.
    const again = new Deferred<[string, number]>();
    await c.subscribe("stuck", "g", (ev, ctx) => again.resolve([ev.id, ctx.attempt]));
    assert.deepEqual(await within(again.promise, 10_000, "the event again"), [id, 2]);
  });

  test("close lets publishes in flight finish", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, [], { WS_TOKEN: TOKEN });
    const c = await connect(t, hub.url);
    const pending = Array.from({ length: 100 }, (_, i) => c.publish("drain", { i }));
    await c.close();
    const results = await Promise.allSettled(pending);
    assert.deepEqual(
      results.filter((r) => r.status === "rejected").map((r) => String((r as PromiseRejectedResult).reason)),
      [],
    );
  });
});
