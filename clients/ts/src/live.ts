import type { Connection } from "./connection.js";
import { LostError } from "./connection.js";
import { ClosedError, ConnectionError, InvalidArgumentError, ProtocolError } from "./errors.js";
import type { EventRecord, ServerFrame } from "./frames.js";

/**
 * What the server does when a live subscription falls behind the queue it keeps for it
 * (docs/PROTOCOL.md, "Live subscriptions"): `"close"` (the default) closes the connection with
 * 4429 and the client resumes from its position after the reconnect, losing nothing; `"skip"`
 * drops what was queued and says so with a gap of reason `"slow"`.
 */
export type SlowPolicy = "close" | "skip";

/**
 * Why a live subscription does not deliver some seqs: `"deleted"` (retention or compaction removed
 * them from the log before they were sent) or `"slow"` (the subscription fell behind with
 * `slow: "skip"`). Later versions of the protocol may add reasons.
 */
export type GapReason = "deleted" | "slow" | (string & {});

/** A range of seqs, from `from` to `to` inclusive, that a live subscription does not deliver. */
export interface Gap {
  readonly from: number;
  readonly to: number;
  readonly reason: GapReason;
}

/**
 * The server's answer to a live SUBSCRIBE that resumed after a position (the `since` of the
 * options, or the subscription's position after a reconnect).
 */
export interface LiveRecovery {
  /** The position the subscription asked to resume after. */
  readonly since: number;
  /** The OK's seq: events after it are delivered. */
  readonly seq: number;
  /**
   * true when the topic still held the event after `since` (nothing was missed). false when it
   * did not: either retention or compaction deleted it (a gap of reason `"deleted"`, from
   * `since + 1` to `seq`, comes next), or `since` is beyond every seq the topic has had (another
   * store, a recreated topic): then `seq < since` and the position is set back to `seq`, without a
   * gap ({@link LiveRecovery.reset}).
   */
  readonly recovered: boolean;
  /** The position was set back to `seq` (below `since`): what the subscription knew is of another log. */
  readonly reset: boolean;
}

/**
 * Handles one event of a live subscription. Events come one at a time, in seq order: a handler
 * that returns a promise gets the next event once it settles. There is nothing to settle: a handler
 * that throws or rejects is reported to the client's onError, and the position moves past its
 * event all the same (it is not delivered again).
 */
export type LiveHandler<T> = (event: EventRecord<T>) => void | Promise<void>;

/** Options of {@link PromClient.subscribeLive}. */
export interface LiveOptions {
  /**
   * The last seq already seen: the subscription starts with what the topic still holds after it
   * (0: everything it holds) instead of at its head.
   */
  since?: number | undefined;
  /** What the server does when the subscription falls behind (default `"close"`). */
  slow?: SlowPolicy | undefined;
  /**
   * Called for each range of seqs the subscription does not deliver, in order with the handler's
   * calls; the position moves past it either way.
   */
  onGap?: ((gap: Gap) => void) | undefined;
  /**
   * Called with the server's answer to each SUBSCRIBE that resumed after a position (the first
   * one, with `since`, and every one after a reconnect), in order with the handler's calls.
   */
  onRecovery?: ((r: LiveRecovery) => void) | undefined;
  /**
   * Most events the client keeps that the handler has not taken yet (default 10000). Beyond it,
   * with `slow: "close"` the client leaves the topic (UNSUBSCRIBE) and, once the handler has
   * caught up, subscribes again after its position, so that nothing is lost; with `slow: "skip"`
   * the events kept are dropped for a gap of reason `"slow"`, as the server does.
   */
  maxBuffered?: number | undefined;
}

/** @internal What a live subscription needs from its client. */
export interface LiveHost {
  liveConnection(): Connection | undefined;
  remove(sub: LiveSubscription<unknown>): void;
  report(err: Error): void;
  /** call sends f and waits for its answer (on every connection with retry); onAnswer sees the OK as it is read. */
  call(f: LiveFrame, retry: boolean, onAnswer: (cc: Connection, ok: ServerFrame) => void): Promise<ServerFrame>;
}

/** @internal A frame of a live subscription. */
export interface LiveFrame {
  op: "SUBSCRIBE" | "UNSUBSCRIBE";
  topic: string;
  opts?: { since?: number; slow?: SlowPolicy };
}

type Item =
  | { kind: "event"; record: EventRecord }
  | { kind: "gap"; from: number; to: number; reason: string }
  | { kind: "ok"; since: number | undefined; seq: number; recovered: boolean };

const defaultMaxBuffered = 10_000;

/** @internal checkLiveOptions checks o. */
export function checkLiveOptions(o: LiveOptions): void {
  const problems: string[] = [];
  if (o.since !== undefined && !(Number.isSafeInteger(o.since) && o.since >= 0)) {
    problems.push(`since: ${o.since}, want an integer of 0 or more (the last seq seen)`);
  }
  if (o.slow !== undefined && o.slow !== "close" && o.slow !== "skip") {
    problems.push(`slow: ${JSON.stringify(o.slow)}, want "close" or "skip"`);
  }
  if (o.maxBuffered !== undefined && !(Number.isSafeInteger(o.maxBuffered) && o.maxBuffered > 0)) {
    problems.push(`maxBuffered: ${o.maxBuffered}, want a positive integer`);
  }
  for (const k of ["onGap", "onRecovery"] as const) {
    if (o[k] !== undefined && typeof o[k] !== "function") {
      problems.push(`${k}: want a function`);
    }
  }
  if (problems.length > 0) {
    throw new InvalidArgumentError(`promlib: subscribeLive options: ${problems.join("; ")}`);
  }
}

/**
 * A live subscription of a topic (a SUBSCRIBE without group, docs/PROTOCOL.md "Live
 * subscriptions"): the topic's events in seq order, nothing stored per subscriber, nothing to
 * acknowledge. The client keeps it across reconnects: on each new connection it subscribes again
 * with `since` = {@link LiveSubscription.position}, and skips what it had handled already, so that
 * no event is missed or handled twice. Every seq after the start is either handled or told to
 * onGap.
 */
export class LiveSubscription<T = unknown> {
  readonly topic: string;
  /** Resolves when the subscription has ended: closed, or ended by the server (see {@link error}). */
  readonly done: Promise<void>;

  private readonly handler: LiveHandler<T>;
  private readonly slow: SlowPolicy | undefined;
  private readonly onGap: ((gap: Gap) => void) | undefined;
  private readonly onRecovery: ((r: LiveRecovery) => void) | undefined;
  private readonly maxBuffered: number;
  private pos: number;
  private started: boolean;
  /** Items not handled yet, in the order they were read: queue[head:]. */
  private queue: Item[] = [];
  private head = 0;
  private running = false;
  /** The connection whose frames are taken: the one that answered the last SUBSCRIBE. */
  private accepting: Connection | undefined;
  /** Left the topic because the handler fell behind (slow "close"): subscribe again once caught up. */
  private suspended = false;
  private resuming = false;
  private state: "active" | "ended" = "active";
  private err: Error | undefined;
  private resolveDone!: () => void;

  /** @internal */
  constructor(
    private readonly host: LiveHost,
    topic: string,
    handler: LiveHandler<T>,
    opts: LiveOptions,
  ) {
    this.topic = topic;
    this.handler = handler;
    this.slow = opts.slow;
    this.onGap = opts.onGap;
    this.onRecovery = opts.onRecovery;
    this.maxBuffered = opts.maxBuffered ?? defaultMaxBuffered;
    this.started = opts.since !== undefined;
    this.pos = opts.since ?? 0;
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
  }

  /**
   * The last seq the subscription has handled: that of the last event whose handler returned (or
   * settled), or the `to` of the last gap, if later; before any, where it started (the OK's seq,
   * or `since`). The client resubscribes after it on every reconnect; pass it as `since` to resume
   * in another client or after a page reload.
   */
  get position(): number {
    return this.pos;
  }

  /** Events and gaps received and not handled yet. */
  get buffered(): number {
    return this.queue.length - this.head;
  }

  /** Why the subscription ended (the server refused it after a reconnect, or the connection was lost for good); undefined while it runs or after close(). */
  get error(): Error | undefined {
    return this.err;
  }

  /**
   * Ends the subscription: events not handled yet are dropped (a running handler may finish), and
   * the server is told (UNSUBSCRIBE without group). Idempotent.
   */
  async close(): Promise<void> {
    if (this.state !== "active") {
      return this.done;
    }
    this.finish(undefined);
    const cc = this.host.liveConnection();
    if (!cc) {
      return; // no connection: nothing to tell
    }
    try {
      await cc.call({ op: "UNSUBSCRIBE", topic: this.topic });
    } catch (err) {
      // not_subscribed: the server ended it already; a lost connection ended it too.
      if (!(err instanceof LostError) && !(err instanceof ProtocolError && err.code === "not_subscribed")) {
        throw err;
      }
    }
  }

  /** @internal whether a reconnect subscribes it again. */
  get wanted(): boolean {
    return this.state === "active";
  }

  /** @internal the SUBSCRIBE frame, after the position once there is one. */
  subscribeFrame(): LiveFrame {
    const opts: { since?: number; slow?: SlowPolicy } = {};
    if (this.started) {
      opts.since = this.pos;
    }
    if (this.slow !== undefined) {
      opts.slow = this.slow;
    }
    return { op: "SUBSCRIBE", topic: this.topic, opts };
  }

  /**
   * @internal subscribed takes the OK of SUBSCRIBE f as it is read from cc, before any frame that
   * follows it: from now on the frames of cc are this subscription's.
   */
  subscribed(cc: Connection, f: LiveFrame, ok: ServerFrame): void {
    if (this.state !== "active") {
      return;
    }
    this.accepting = cc;
    this.suspended = false;
    this.enqueue({ kind: "ok", since: f.opts?.since, seq: ok.seq ?? 0, recovered: ok.recovered ?? false });
  }

  /** @internal subscribeOn subscribes on cc (a new connection): the reconnect's SUBSCRIBE. */
  async subscribeOn(cc: Connection): Promise<void> {
    const f = this.subscribeFrame();
    await cc.call(f, (ok) => this.subscribed(cc, f, ok));
  }

  /** @internal push takes an EVENT (record) or GAP frame that came on cc. */
  push(cc: Connection, record: EventRecord | undefined, f: ServerFrame): void {
    if (this.state !== "active" || cc !== this.accepting) {
      return; // before the OK of a SUBSCRIBE sent again, or after an UNSUBSCRIBE
    }
    let it: Item;
    if (record !== undefined) {
      it = { kind: "event", record };
    } else {
      if (typeof f.from !== "number" || typeof f.to !== "number" || f.to < f.from) {
        this.host.report(new ConnectionError(`a GAP frame of topic "${this.topic}" without a valid from and to; ignored`));
        return;
      }
      it = { kind: "gap", from: f.from, to: f.to, reason: f.reason ?? "" };
    }
    if (this.buffered >= this.maxBuffered && this.overflow(cc, it)) {
      return;
    }
    this.enqueue(it);
  }

  /** @internal end ends the subscription with err (the server refused or ended it, or the connection was lost for good). */
  end(err: Error | undefined): void {
    this.finish(err);
  }

  private finish(err: Error | undefined): void {
    if (this.state === "ended") {
      return;
    }
    this.state = "ended";
    this.err = err instanceof ClosedError ? undefined : err;
    this.queue = [];
    this.head = 0;
    this.accepting = undefined;
    this.host.remove(this as LiveSubscription<unknown>);
    this.resolveDone();
  }

  /**
   * overflow handles an item that finds the buffer full; it reports whether it took the item.
   * With slow "skip", the events kept since the last OK (and this one) become one gap "slow". With
   * "close", the client leaves the topic and drops what comes until the handler has caught up,
   * then subscribes again after its position: the server sends what was dropped again.
   */
  private overflow(cc: Connection, it: Item): boolean {
    if (this.slow === "skip") {
      let first = this.queue.length;
      while (first > this.head && this.queue[first - 1]!.kind !== "ok") {
        first--;
      }
      if (first === this.queue.length) {
        return false; // nothing of this subscription's current run to drop: keep it
      }
      const start = this.queue[first]!;
      const from = start.kind === "event" ? start.record.seq : start.kind === "gap" ? start.from : 0;
      const to = it.kind === "event" ? it.record.seq : it.kind === "gap" ? it.to : 0;
      this.queue.length = first;
      this.queue.push({ kind: "gap", from, to, reason: "slow" });
      return true;
    }
    this.suspended = true;
    this.accepting = undefined;
    cc.call({ op: "UNSUBSCRIBE", topic: this.topic }).catch(() => {
      // lost: the reconnect subscribes after the position; not_subscribed: gone already
    });
    return true;
  }

  private enqueue(it: Item): void {
    this.queue.push(it);
    this.pump();
  }

  /** pump handles the queued items in order, one handler at a time. */
  private pump(): void {
    while (!this.running && this.state === "active" && this.head < this.queue.length) {
      const it = this.queue[this.head]!;
      this.queue[this.head++] = undefined as unknown as Item;
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.head);
        this.head = 0;
      }
      const p = this.handle(it);
      if (p !== undefined) {
        this.running = true;
        void p.then(() => {
          this.running = false;
          this.pump();
        });
      }
    }
    if (this.head === this.queue.length && this.head > 0) {
      this.queue = [];
      this.head = 0;
    }
    if (!this.running && this.suspended && this.state === "active" && this.buffered === 0) {
      void this.resume();
    }
  }

  /** handle handles one item; a promise when the handler returned one (the position moves once it settles). */
  private handle(it: Item): Promise<void> | undefined {
    switch (it.kind) {
      case "ok": {
        if (it.since === undefined) {
          if (!this.started) {
            this.started = true;
            this.pos = Math.max(this.pos, it.seq);
          }
          return undefined;
        }
        const reset = it.seq < it.since;
        if (reset) {
          this.pos = it.seq;
        }
        this.callHook("onRecovery", () => this.onRecovery?.({ since: it.since!, seq: it.seq, recovered: it.recovered, reset }));
        return undefined;
      }
      case "gap": {
        if (it.to <= this.pos) {
          return undefined;
        }
        const gap: Gap = { from: Math.max(it.from, this.pos + 1), to: it.to, reason: it.reason };
        this.pos = it.to;
        this.callHook("onGap", () => this.onGap?.(gap));
        return undefined;
      }
      case "event": {
        const seq = it.record.seq;
        if (seq <= this.pos) {
          return undefined; // sent again after a reconnect: handled already
        }
        let r: void | Promise<void>;
        try {
          r = this.handler(it.record as EventRecord<T>);
        } catch (err) {
          this.failed(seq, err);
          this.pos = seq;
          return undefined;
        }
        if (r === undefined || r === null || typeof (r as Promise<void>).then !== "function") {
          this.pos = seq;
          return undefined;
        }
        return Promise.resolve(r).then(
          () => {
            this.advance(seq);
          },
          (err: unknown) => {
            this.failed(seq, err);
            this.advance(seq);
          },
        );
      }
    }
  }

  /** advance moves the position to seq after an asynchronous handler, unless a reset came meanwhile. */
  private advance(seq: number): void {
    if (this.state === "active") {
      this.pos = Math.max(this.pos, seq);
    }
  }

  private failed(seq: number, err: unknown): void {
    const msg = err instanceof Error ? err.message : String(err);
    this.host.report(new Error(`promlib: live handler of topic "${this.topic}" failed on seq ${seq} (it is not delivered again): ${msg}`, { cause: err }));
  }

  private callHook(name: string, f: () => void): void {
    try {
      f();
    } catch (err) {
      this.host.report(new Error(`promlib: ${name} of topic "${this.topic}" threw: ${err instanceof Error ? err.message : String(err)}`, { cause: err }));
    }
  }

  /** resume subscribes again after the position once a suspended subscription has caught up. */
  private async resume(): Promise<void> {
    if (this.resuming) {
      return;
    }
    this.resuming = true;
    try {
      const f = this.subscribeFrame();
      await this.host.call(f, true, (cc, ok) => this.subscribed(cc, f, ok));
    } catch (err) {
      if (err instanceof ProtocolError && err.code === "already_subscribed") {
        return; // a reconnect subscribed it again first
      }
      if (this.state === "active" && !(err instanceof ClosedError)) {
        this.host.report(err instanceof Error ? err : new Error(String(err)));
        this.finish(err instanceof Error ? err : new Error(String(err)));
      }
    } finally {
      this.resuming = false;
    }
  }
}
