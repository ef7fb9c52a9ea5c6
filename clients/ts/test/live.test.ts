// Live subscriptions (docs/PROTOCOL.md, "Live subscriptions") against the real hub: delivery in
// order, resumption after dropped connections and a restarted hub with publishes racing, the
// hub's slow-subscriber policies, records pruned while a subscriber was away, and the client's
// own buffer bound.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import type { TestContext } from "node:test";
import { WebSocket } from "ws";
import {
  ConnectionError,
  InvalidArgumentError,
  PromClient,
  ProtocolError,
  type ClientOptions,
  type EventRecord,
  type Gap,
  type LiveRecovery,
  type LiveSubscription,
} from "@promethean/promlib-client";
import { Deferred, repoRoot, requireTool, startHub, startProxy, within } from "./hub.js";

const TOKEN = "static-token-for-live-tests";

async function connect(t: TestContext, url: string, opts: ClientOptions = {}): Promise<PromClient> {
  const c = await PromClient.connect(url, { WebSocket, token: TOKEN, minBackoffMs: 20, maxBackoffMs: 200, ...opts });
  t.after(() => c.close({ drainTimeoutMs: 500 }));
  return c;
}

function needGo(t: TestContext): boolean {
  return requireTool(t, "the tests build examples/hub with it", "go") !== undefined;
}

/** until polls cond every 5 ms until it holds, failing after ms with what and detail(). */
async function until(cond: () => boolean, ms: number, what: string, detail: () => string = () => ""): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${what} ${detail()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const range = (from: number, to: number) => Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);

/** A live subscription's calls, events and gaps in the order they came. */
class LiveLog<T = unknown> {
  readonly items: ({ seq: number; payload: T } | Gap)[] = [];
  readonly recoveries: LiveRecovery[] = [];
  readonly ids = new Map<number, string>();
  handler = (ev: EventRecord<T>) => {
    this.items.push({ seq: ev.seq, payload: ev.payload });
    this.ids.set(ev.seq, ev.id);
  };
  onGap = (g: Gap) => {
    this.items.push(g);
  };
  onRecovery = (r: LiveRecovery) => {
    this.recoveries.push(r);
  };
  get seqs(): number[] {
    return this.items.flatMap((it) => ("seq" in it ? [it.seq] : []));
  }
  get gaps(): Gap[] {
    return this.items.filter((it): it is Gap => !("seq" in it));
  }
  /** covers asserts that the events and gaps cover from..to, each seq once, in order. */
  covers(from: number, to: number): void {
    let next = from;
    for (const it of this.items) {
      if ("seq" in it) {
        assert.equal(it.seq, next, `event ${it.seq} where seq ${next} was due`);
        next++;
      } else {
        assert.equal(it.from, next, `gap ${it.from}..${it.to} (${it.reason}) where seq ${next} was due`);
        assert.ok(it.to >= it.from);
        next = it.to + 1;
      }
    }
    assert.equal(next, to + 1, `covered up to ${next - 1}, want ${to}`);
  }
  summary = () => {
    const seqs = this.seqs;
    return `(handled ${seqs.length}, last ${seqs.at(-1)}, gaps ${JSON.stringify(this.gaps)})`;
  };
}

async function tempDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "promlib-ts-live-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** prune deletes the records of topic with a ts before beforeMs from the hub's SQLite file. */
function prune(db: string, topic: string, beforeMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    execFile("go", ["run", "./clients/ts/test/testdata/prune", db, topic, String(beforeMs)], { cwd: repoRoot }, (err, stdout, stderr) =>
      err ? reject(new Error(`prune: ${err.message}\n${stderr}`)) : resolve(Number(stdout.trim())),
    );
  });
}

describe("live subscriptions against the hub", { concurrency: true }, () => {
  test("events come from the head, in seq order, one handler at a time; since; close; refusals", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, [], { WS_TOKEN: TOKEN });
    const errors: Error[] = [];
    const c = await connect(t, hub.url, { onError: (e) => errors.push(e) });
    for (let i = 0; i < 3; i++) {
      await c.publish("news", { n: i });
    }
    const got: { seq: number; n: number }[] = [];
    let running = 0;
    let overlaps = 0;
    const sub = await c.subscribeLive<{ n: number }>("news", async (ev) => {
      running++;
      overlaps += running > 1 ? 1 : 0;
      await new Promise((resolve) => setTimeout(resolve, ev.seq % 2 === 0 ? 3 : 0));
      got.push({ seq: ev.seq, n: ev.payload.n });
      running--;
    });
    assert.equal(sub.position, 3, "it starts at the head");
    assert.equal(sub.topic, "news");
    await assert.rejects(c.subscribeLive("news", () => {}), (e: unknown) => e instanceof ProtocolError && e.code === "already_subscribed");
    // A group of the same topic beside it gets what it gets.
    const group: number[] = [];
    await c.subscribe<{ n: number }>("news", "g", (ev) => {
      group.push(ev.seq);
    }, { from: "earliest" });

    await Promise.all(range(3, 7).map((n) => c.publish("news", { n })));
    await until(() => sub.position === 8, 10_000, "position 8", () => JSON.stringify(got));
    assert.deepEqual(got, range(4, 8).map((seq) => ({ seq, n: seq - 1 })), "seqs 4..8 in order, typed");
    assert.equal(overlaps, 0, "one handler at a time");
    await until(() => group.length === 8, 10_000, "the group's 8 events");

    // Closed: nothing more comes; the server dropped it, so subscribing again works.
    await sub.close();
    await within(sub.done, 1000, "done after close");
    assert.equal(sub.error, undefined);
    await c.publish("news", { n: 8 });
    const again = new LiveLog<{ n: number }>();
    const sub2 = await c.subscribeLive("news", again.handler, { since: 2, onRecovery: again.onRecovery, onGap: again.onGap });
    assert.ok(sub2.position >= 2, "it starts after since (what was recovered may be handled already)");
    await until(() => sub2.position === 9, 10_000, "position 9 after since 2", again.summary);
    assert.deepEqual(again.seqs, range(3, 9), "since 2: what the topic holds after 2, then live");
    assert.deepEqual(again.recoveries, [{ since: 2, seq: 2, recovered: true, reset: false }]);
    assert.equal(got.length, 5, "the closed subscription got nothing more");

    // since 0: everything the topic holds.
    const all = new LiveLog();
    const sub3 = await c.subscribeLive("news.other", all.handler, { since: 0, onRecovery: all.onRecovery });
    await c.publish("news.other", 1);
    await until(() => sub3.position === 1, 10_000, "position 1");
    assert.deepEqual(all.recoveries, [{ since: 0, seq: 0, recovered: true, reset: false }]);

    // A handler that throws is reported; the position moves past its event, which is not delivered again.
    const boom: number[] = [];
    const sub4 = await c.subscribeLive("boom", (ev) => {
      boom.push(ev.seq);
      if (ev.seq === 1) throw new Error("cannot render");
    });
    await c.publish("boom", 1);
    await c.publish("boom", 2);
    await until(() => sub4.position === 2, 10_000, "position 2");
    assert.deepEqual(boom, [1, 2]);
    assert.ok(errors.some((e) => /live handler of topic "boom" failed on seq 1.*cannot render/.test(e.message)), errors.map(String).join("\n"));

    // Refusals.
    for (const opts of [{ since: -1 }, { since: 1.5 }, { slow: "wait" }, { maxBuffered: 0 }, { onGap: 3 }]) {
      await assert.rejects(c.subscribeLive("x", () => {}, opts as never), InvalidArgumentError, JSON.stringify(opts));
    }
    await assert.rejects(c.subscribeLive("bad topic!", () => {}), (e: unknown) => e instanceof ProtocolError && e.code === "bad_frame");
    // A refused SUBSCRIBE leaves nothing behind: the topic may be subscribed again.
    await assert.rejects(c.subscribeLive("bad topic!", () => {}), (e: unknown) => e instanceof ProtocolError && e.code === "bad_frame");
    assert.equal(errors.filter((e) => !/boom/.test(e.message)).length, 0, errors.map(String).join("\n"));
  });

  test("resumes after dropped connections and a restarted hub while publishes race: every seq once, in order, no gap", async (t) => {
    if (!needGo(t)) return;
    const db = join(await tempDir(t), "hub.db");
    const hub = await startHub(t, ["-store", `sqlite:${db}`], { WS_TOKEN: TOKEN });
    const proxy = await startProxy(t, hub.addr);
    const codes: (number | undefined)[] = [];
    const c = await connect(t, proxy.url, {
      onStateChange: (s, err) => {
        if (s === "reconnecting") codes.push(err instanceof ConnectionError ? err.closeCode : undefined);
      },
    });
    const pub = await connect(t, hub.url);
    const log = new LiveLog<{ i: number }>();
    const sub = await c.subscribeLive("feed", log.handler, { onGap: log.onGap, onRecovery: log.onRecovery });
    assert.equal(sub.position, 0);

    const n = 3000;
    const batch = 50;
    let last = 0;
    const publishing = (async () => {
      for (let i = 0; i < n; i += batch) {
        const res = await Promise.all(range(i, i + batch - 1).map((k) => pub.publish("feed", { i: k })));
        last = Math.max(last, ...res.map((r) => r.seq));
      }
    })();
    const at = (pos: number) => until(() => sub.position >= pos, 30_000, `position ${pos}`, log.summary);
    await at(300);
    proxy.cut(); // the network drops the subscriber's connection
    await at(900);
    proxy.cut();
    await at(1500);
    // The hub shuts down (closing its connections with 1001) and starts again on its port, with the
    // same file: the publisher's cut-off publishes go out again, the subscriber resumes.
    await hub.stop();
    await startHub(t, ["-addr", hub.addr, "-store", `sqlite:${db}`], { WS_TOKEN: TOKEN });
    await at(2200);
    proxy.cut();
    await within(publishing, 60_000, "every publish");
    await at(last);
    const stored = new Map<number, number[]>();
    for (const it of log.items) {
      if ("seq" in it) stored.set(it.payload.i, [...(stored.get(it.payload.i) ?? []), it.seq]);
    }
    // The publisher's publishes cut off by the restart are sent again with their ids, which the hub
    // stores once: that is the publish tests' subject; here it is only told if it did not hold.
    const twice = [...stored].filter(([, seqs]) => seqs.length > 1).map(([i, seqs]) => [i, seqs.map((seq) => `${seq}:${log.ids.get(seq)}`)]);
    if (last !== n || twice.length > 0) {
      t.diagnostic(`${last} records for ${n} publishes; stored more than once (payload i, seq:id): ${JSON.stringify(twice)}`);
    }
    log.covers(1, last);
    assert.deepEqual(log.gaps, [], "no gap");
    assert.deepEqual(log.seqs, range(1, last), "every seq once, in order");
    assert.equal(sub.position, last);
    assert.ok(c.connectionCount >= 5, `connections: ${c.connectionCount}`);
    assert.ok(codes.includes(1001), `the hub's shutdown closed it with 1001 (close codes: ${codes})`);
    assert.ok(log.recoveries.length >= 4, `resumptions: ${log.recoveries.length}`);
    for (const r of log.recoveries) {
      assert.equal(r.recovered, true, JSON.stringify(r));
      assert.equal(r.seq, r.since);
    }
  });

  /**
   * fallBehind stalls what the hub sends on the subscriber's link and publishes 1 MiB rounds to
   * topic until the hub counts a slow subscriber of policy, then forwards again and publishes a
   * few more; it returns the last seq.
   */
  async function fallBehind(hub: Awaited<ReturnType<typeof startHub>>, proxy: Awaited<ReturnType<typeof startProxy>>, pub: PromClient, topic: string, policy: string): Promise<number> {
    const payload = "x".repeat(16 << 10);
    const before = await hub.metric("promlib_ws_live_slow_total", `reason="${policy}"`);
    proxy.holdReplies();
    let last = 0;
    for (let round = 0; ; round++) {
      const res = await Promise.all(range(1, 64).map(() => pub.publish(topic, payload)));
      last = Math.max(last, ...res.map((r) => r.seq));
      if ((await hub.metric("promlib_ws_live_slow_total", `reason="${policy}"`)) > before) {
        break;
      }
      assert.ok(round < 120, "the hub never found the stalled subscriber slow");
    }
    proxy.releaseReplies();
    for (let i = 0; i < 5; i++) {
      last = (await pub.publish(topic, "after")).seq;
    }
    return last;
  }

  test("slow close: the hub closes a stalled subscriber with 4429 and the client resumes with nothing lost", async (t) => {
    if (!needGo(t)) return;
    // The write timeout well above the time the test holds the link.
    const hub = await startHub(t, ["-ws-write-timeout", "120s"], { WS_TOKEN: TOKEN });
    const proxy = await startProxy(t, hub.addr);
    const codes: (number | undefined)[] = [];
    const c = await connect(t, proxy.url, {
      onStateChange: (s, err) => {
        if (s === "reconnecting") codes.push(err instanceof ConnectionError ? err.closeCode : undefined);
      },
    });
    const pub = await connect(t, hub.url);
    const log = new LiveLog();
    const sub = await c.subscribeLive("slow.close", log.handler, { onGap: log.onGap, onRecovery: log.onRecovery });
    const last = await fallBehind(hub, proxy, pub, "slow.close", "close");
    await until(() => sub.position === last, 60_000, `position ${last}`, log.summary);
    log.covers(1, last);
    assert.deepEqual(log.gaps, []);
    assert.ok(c.connectionCount >= 2, "it reconnected");
    assert.deepEqual(codes.slice(0, 1), [4429], "closed with 4429 (live subscriber too slow)");
    assert.ok(log.recoveries.length >= 1 && log.recoveries.every((r) => r.recovered), JSON.stringify(log.recoveries));
  });

  test("slow skip: the hub drops what a stalled subscriber had queued for a GAP slow, and it goes on", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, ["-ws-write-timeout", "120s"], { WS_TOKEN: TOKEN });
    const proxy = await startProxy(t, hub.addr);
    const c = await connect(t, proxy.url);
    const pub = await connect(t, hub.url);
    const log = new LiveLog();
    const sub = await c.subscribeLive("slow.skip", log.handler, { slow: "skip", onGap: log.onGap, onRecovery: log.onRecovery });
    const last = await fallBehind(hub, proxy, pub, "slow.skip", "skip");
    await until(() => sub.position === last, 60_000, `position ${last}`, log.summary);
    log.covers(1, last);
    assert.ok(log.gaps.length >= 1, "a gap");
    for (const g of log.gaps) {
      assert.equal(g.reason, "slow");
    }
    assert.deepEqual(log.seqs.slice(-5), range(last - 4, last), "the newest events after the gap");
    assert.equal(c.connectionCount, 1, "the same connection throughout");
  });

  test("recovered false: records pruned while the subscriber was away are a GAP deleted; a hub without them starts it again", async (t) => {
    if (!needGo(t)) return; // Go builds the hub, and runs test/testdata/prune on its file
    const db = join(await tempDir(t), "hub.db");
    const hub = await startHub(t, ["-store", `sqlite:${db}`], { WS_TOKEN: TOKEN });
    const proxy = await startProxy(t, hub.addr);
    const reconnecting = new Deferred();
    const c = await connect(t, proxy.url, { onStateChange: (s) => s === "reconnecting" && reconnecting.resolve() });
    const pub = await connect(t, hub.url);
    const log = new LiveLog();
    const sub = await c.subscribeLive("ret", log.handler, { onGap: log.onGap, onRecovery: log.onRecovery });
    for (let i = 0; i < 5; i++) {
      await pub.publish("ret", i, { ts: 1000 + i });
    }
    await until(() => sub.position === 5, 10_000, "position 5", log.summary);

    // Away: seqs 6..15 are published, then retention deletes every record before ts 2005 (1..10).
    proxy.block();
    proxy.cut();
    await within(reconnecting.promise, 10_000, "the client to notice");
    for (let i = 0; i < 10; i++) {
      await pub.publish("ret", 5 + i, { ts: 2000 + i });
    }
    assert.equal(await prune(db, "ret", 2005), 10);
    proxy.unblock();
    await until(() => sub.position === 15, 20_000, "position 15", log.summary);
    assert.deepEqual(log.items, [
      ...range(1, 5).map((seq) => ({ seq, payload: seq - 1 })),
      { from: 6, to: 10, reason: "deleted" },
      ...range(11, 15).map((seq) => ({ seq, payload: seq - 1 })),
    ]);
    assert.deepEqual(log.recoveries, [{ since: 5, seq: 10, recovered: false, reset: false }]);

    // A hub with an empty store (another log): the position is beyond its topic, which starts
    // again at its head.
    await hub.stop();
    await startHub(t, ["-addr", hub.addr, "-store", "memory"], { WS_TOKEN: TOKEN });
    await until(() => log.recoveries.length === 2, 20_000, "the resumption on the new hub");
    assert.deepEqual(log.recoveries[1], { since: 15, seq: 0, recovered: false, reset: true });
    assert.equal(sub.position, 0);
    await pub.publish("ret", "new");
    await until(() => sub.position === 1, 10_000, "position 1 of the new log", log.summary);
    assert.deepEqual(log.items.at(-1), { seq: 1, payload: "new" });
    assert.equal(log.gaps.length, 1);
  });

  test("the client's own bound: a handler that falls behind maxBuffered resumes after its position (close) or skips (skip)", async (t) => {
    if (!needGo(t)) return;
    const hub = await startHub(t, [], { WS_TOKEN: TOKEN });
    const c = await connect(t, hub.url);
    const pub = await connect(t, hub.url);
    const subs: { sub: LiveSubscription; log: LiveLog; release: Deferred }[] = [];
    for (const slow of ["close", "skip"] as const) {
      const log = new LiveLog();
      const release = new Deferred();
      const sub = await c.subscribeLive(`buffer.${slow}`, async (ev) => {
        if (ev.seq === 1) await release.promise;
        log.handler(ev);
      }, { slow, maxBuffered: 20, onGap: log.onGap, onRecovery: log.onRecovery });
      subs.push({ sub, log, release });
    }
    for (const slow of ["close", "skip"]) {
      await Promise.all(range(1, 200).map((i) => pub.publish(`buffer.${slow}`, i)));
    }
    // The first handler holds; everything else has come by the time a marker topic's event has.
    const marker = new Deferred();
    await c.subscribeLive("buffer.marker", () => marker.resolve());
    await pub.publish("buffer.marker", 1);
    await within(marker.promise, 10_000, "the marker");
    for (const s of subs) {
      assert.ok(s.sub.buffered <= 21, `buffered ${s.sub.buffered}`);
      s.release.resolve();
    }
    const [close, skip] = subs;
    await until(() => close!.sub.position === 200 && skip!.sub.position === 200, 20_000, "position 200", () => close!.log.summary() + skip!.log.summary());
    close!.log.covers(1, 200);
    assert.deepEqual(close!.log.gaps, [], "close: nothing lost");
    assert.ok(close!.log.recoveries.length >= 1, "close: it subscribed again after its position");
    skip!.log.covers(1, 200);
    assert.ok(skip!.log.gaps.length >= 1 && skip!.log.gaps.every((g) => g.reason === "slow"), JSON.stringify(skip!.log.gaps));
    assert.equal(c.connectionCount, 1);
  });
});
