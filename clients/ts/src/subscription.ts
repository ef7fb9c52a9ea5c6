import type { Connection } from "./connection.js";
import { LostError } from "./connection.js";
import { ClosedError, ConnectionError, InvalidArgumentError, ProtocolError } from "./errors.js";
import type { EventRecord, StartFrom, SubscribeWireOpts } from "./frames.js";

/** What a handler gets with each event besides the event itself. */
export interface DeliveryContext {
  readonly topic: string;
  readonly group: string;
  /** 1 for the first delivery, growing with each redelivery. */
  readonly attempt: number;
  /** When the lease ends, in ms since the Unix epoch by the local clock, unless extended. */
  readonly deadline: number;
  /**
   * Aborted when the delivery can no longer be settled: its connection was lost (the event goes
   * back to the group and comes again), or the subscription's drain timeout passed.
   */
  readonly signal: AbortSignal;
  /** Extends the lease to now + ms (MODACK); rejects with `unknown_id` if it already ended. */
  extend(ms: number): Promise<void>;
}

/**
 * Handles one event. Its promise settles the event: resolved, the client ACKs it; rejected (or
 * thrown), the client NACKs it with the error's message as the reason, and the server delivers it
 * again after a backoff (or dead-letters it after maxAttempts).
 */
export type Handler<T> = (event: EventRecord<T>, ctx: DeliveryContext) => void | Promise<void>;

/** Options of {@link PromClient.subscribe}. */
export interface SubscribeOptions {
  /** Where a new group starts (default "latest"); a group that exists keeps its cursor. */
  from?: StartFrom;
  /** The lease of each delivery before it is redelivered (server default when unset). */
  ackTimeoutMs?: number;
  /**
   * Most events the server sends before they are settled (server default, and at most the
   * server's limit, when unset). Events wait in the server, never dropped.
   */
  maxInFlight?: number;
  /** Deliveries before an event is dead-lettered (server default when unset). */
  maxAttempts?: number;
  /**
   * Key order: the server sends an event of a key once the one before it is settled, so a key's
   * events come one at a time and in order (also with concurrency above 1), keys in parallel.
   */
  keyOrdered?: boolean;
  /**
   * Most events of one key the server holds at once (only with keyOrdered; at most maxInFlight;
   * server default a tenth of maxInFlight).
   */
  maxPerKey?: number;
  /**
   * How many handlers run at once (default 1, which keeps the order in which the server sends
   * events). Events received beyond it wait in the client, their leases running.
   */
  concurrency?: number;
  /** How long close() waits for running handlers (default 5000 ms). */
  drainTimeoutMs?: number;
}

/** @internal What a subscription needs from its client. */
export interface SubscriptionHost {
  /** liveConnection is the current connection, if there is one and it is open. */
  liveConnection(): Connection | undefined;
  remove(sub: Subscription<unknown>): void;
  report(err: Error): void;
  call(f: { op: string; topic: string; group: string }, retry: boolean): Promise<unknown>;
}

interface Delivery {
  cc: Connection;
  record: EventRecord;
  attempt: number;
  deadline: number;
}

const defaultDrainMs = 5000;

/** @internal wireOptions checks o and returns SUBSCRIBE's opts. */
export function wireOptions(o: SubscribeOptions): SubscribeWireOpts {
  const w: SubscribeWireOpts = {};
  const problems: string[] = [];
  const count = (name: string, v: number | undefined): number | undefined => {
    if (v === undefined) {
      return undefined;
    }
    if (!Number.isSafeInteger(v) || v <= 0) {
      problems.push(`${name}: ${v}, want a positive integer`);
      return undefined;
    }
    return v;
  };
  const f = o.from;
  if (f === undefined || f === "latest") {
    // the server's default
  } else if (f === "earliest") {
    w.from = "earliest";
  } else if (typeof f === "object" && f !== null && "ts" in f) {
    w.from = "ts";
    const ts = count("from.ts", f.ts);
    if (ts !== undefined) {
      w.ts = ts;
    }
  } else if (typeof f === "object" && f !== null && "seq" in f) {
    w.from = "seq";
    const seq = count("from.seq", f.seq);
    if (seq !== undefined) {
      w.seq = seq;
    }
  } else if (typeof f === "object" && f !== null && "afterId" in f && typeof f.afterId === "string" && f.afterId !== "") {
    w.from = "afterId";
    w.afterId = f.afterId;
  } else {
    problems.push(`from: ${JSON.stringify(f)}, want "latest", "earliest", {ts}, {seq} or {afterId}`);
  }
  const set = <K extends "ackTimeoutMs" | "maxInFlight" | "maxAttempts">(k: K) => {
    const v = count(k, o[k]);
    if (v !== undefined) {
      w[k] = v;
    }
  };
  set("ackTimeoutMs");
  set("maxInFlight");
  set("maxAttempts");
  count("concurrency", o.concurrency);
  if (o.keyOrdered !== undefined && typeof o.keyOrdered !== "boolean") {
    problems.push(`keyOrdered: ${JSON.stringify(o.keyOrdered)}, want a boolean`);
  } else if (o.keyOrdered) {
    w.keyOrdered = true;
  }
  const perKey = count("maxPerKey", o.maxPerKey);
  if (perKey !== undefined) {
    if (o.keyOrdered === true) {
      w.maxPerKey = perKey;
    } else {
      problems.push("maxPerKey: only with keyOrdered: true");
    }
  }
  if (o.drainTimeoutMs !== undefined && !(o.drainTimeoutMs >= 0)) {
    problems.push(`drainTimeoutMs: ${o.drainTimeoutMs}, want 0 or more`);
  }
  if (problems.length > 0) {
    throw new InvalidArgumentError(`promlib: subscribe options: ${problems.join("; ")}`);
  }
  return w;
}

/**
 * A subscription of a consumer group to a topic. The client keeps it across reconnects: it
 * subscribes again (and pauses again, if paused) on every new connection.
 */
export class Subscription<T = unknown> {
  readonly topic: string;
  readonly group: string;
  /** Resolves when the subscription has ended: closed, or ended by the server (see {@link error}). */
  readonly done: Promise<void>;

  private readonly handler: Handler<T>;
  private readonly wire: SubscribeWireOpts;
  private readonly concurrency: number;
  private readonly drainMs: number;
  private readonly queue: Delivery[] = [];
  private readonly running = new Map<Delivery, AbortController>();
  private paused = false;
  private state: "active" | "closing" | "ended" = "active";
  private err: Error | undefined;
  private resolveDone!: () => void;
  private idle: (() => void) | undefined;

  /** @internal */
  constructor(
    private readonly host: SubscriptionHost,
    topic: string,
    group: string,
    handler: Handler<T>,
    opts: SubscribeOptions,
  ) {
    this.topic = topic;
    this.group = group;
    this.handler = handler;
    this.wire = wireOptions(opts);
    this.concurrency = opts.concurrency ?? 1;
    this.drainMs = opts.drainTimeoutMs ?? defaultDrainMs;
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
  }

  /** Why the server ended the subscription; undefined while it runs or after close(). */
  get error(): Error | undefined {
    return this.err;
  }

  /** Whether PAUSE is in force (it is sent again after a reconnect). */
  get isPaused(): boolean {
    return this.paused;
  }

  /** Handlers running now. */
  get active(): number {
    return this.running.size;
  }

  /**
   * Asks the server to send no more events until resume(); events already received are still
   * handled. The state survives reconnects.
   */
  pause(): Promise<void> {
    return this.setPaused(true);
  }

  /** Restarts delivery after pause(). */
  resume(): Promise<void> {
    return this.setPaused(false);
  }

  /**
   * Leaves the group, draining: no more events are taken (a PAUSE stops them at the server),
   * events received but not started are left to the server, running handlers may finish and
   * settle their events for up to drainTimeoutMs (the subscription's, unless given here; then
   * their signal is aborted), then
   * UNSUBSCRIBE gives whatever is still in flight back to the group at once.
   */
  async close(opts: { drainTimeoutMs?: number } = {}): Promise<void> {
    if (this.state !== "active") {
      return this.done;
    }
    this.state = "closing";
    this.queue.length = 0;
    const cc = this.host.liveConnection();
    if (cc && this.running.size > 0) {
      cc.call({ op: "PAUSE", topic: this.topic, group: this.group }).catch(() => {
        // the UNSUBSCRIBE below settles it either way
      });
    }
    await this.drain(opts.drainTimeoutMs ?? this.drainMs);
    this.host.remove(this as Subscription<unknown>);
    const now = this.host.liveConnection();
    if (now) {
      try {
        await now.call({ op: "UNSUBSCRIBE", topic: this.topic, group: this.group });
      } catch (err) {
        // not_subscribed: the server ended it already; a lost connection gave its events back.
        if (!(err instanceof LostError) && !(err instanceof ProtocolError && err.code === "not_subscribed")) {
          this.finish(undefined);
          throw err;
        }
      }
    }
    this.finish(undefined);
  }

  /** @internal the SUBSCRIBE frame. */
  subscribeFrame(): { op: string; topic: string; group: string; opts: Record<string, unknown> } {
    return { op: "SUBSCRIBE", topic: this.topic, group: this.group, opts: { ...this.wire } };
  }

  /** @internal whether a reconnect subscribes it again. */
  get wanted(): boolean {
    return this.state === "active";
  }

  /** @internal push takes an EVENT frame's delivery. */
  push(cc: Connection, record: EventRecord, attempt: number, ackDeadlineMs: number): void {
    if (this.state !== "active") {
      return; // left to the server: UNSUBSCRIBE gives it back
    }
    this.queue.push({ cc, record, attempt, deadline: Date.now() + ackDeadlineMs });
    this.pump();
  }

  /** @internal connectionLost aborts the handlers of deliveries that came on cc. */
  connectionLost(cc: Connection): void {
    for (const [d, ac] of this.running) {
      if (d.cc === cc) {
        ac.abort(new ConnectionError("the connection the event came on was lost; it will be delivered again"));
      }
    }
  }

  /** @internal end ends the subscription with err (the server ended it, or the client closed). */
  end(err: Error | undefined): void {
    if (this.state === "ended") {
      return;
    }
    this.state = "closing";
    this.queue.length = 0;
    this.host.remove(this as Subscription<unknown>);
    void this.drain(this.drainMs).then(() => this.finish(err));
  }

  private finish(err: Error | undefined): void {
    if (this.state === "ended") {
      return;
    }
    this.state = "ended";
    this.err = err instanceof ClosedError ? undefined : err;
    this.resolveDone();
  }

  private async drain(ms: number): Promise<void> {
    if (this.running.size === 0) {
      return;
    }
    const idle = new Promise<void>((resolve) => (this.idle = resolve));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), ms)));
    const r = await Promise.race([idle, timeout]);
    clearTimeout(timer);
    if (r === "timeout") {
      for (const ac of this.running.values()) {
        ac.abort(new ClosedError("subscription"));
      }
    }
  }

  private async setPaused(p: boolean): Promise<void> {
    if (this.state !== "active") {
      throw new ClosedError("subscription");
    }
    this.paused = p;
    try {
      await this.host.call({ op: p ? "PAUSE" : "RESUME", topic: this.topic, group: this.group }, false);
    } catch (err) {
      // Lost: the reconnect applies the state.
      if (!(err instanceof ConnectionError)) {
        throw err;
      }
    }
  }

  private pump(): void {
    while (this.running.size < this.concurrency && this.queue.length > 0) {
      const d = this.queue.shift()!;
      if (d.cc.isDead()) {
        continue; // the server gave it back when its connection ended
      }
      this.run(d);
    }
  }

  private run(d: Delivery): void {
    const ac = new AbortController();
    this.running.set(d, ac);
    const ctx: DeliveryContext = {
      topic: this.topic,
      group: this.group,
      attempt: d.attempt,
      get deadline() {
        return d.deadline;
      },
      signal: ac.signal,
      extend: (ms: number) => this.extend(d, ms),
    };
    let p: Promise<void>;
    try {
      p = Promise.resolve(this.handler(d.record as EventRecord<T>, ctx));
    } catch (err) {
      p = Promise.reject(err);
    }
    p.then(
      () => this.settle(d, "ACK", undefined),
      (err: unknown) => this.settle(d, "NACK", reasonOf(err)),
    )
      .catch((err: unknown) => this.host.report(err instanceof Error ? err : new Error(String(err))))
      .finally(() => {
        this.running.delete(d);
        if (this.running.size === 0 && this.idle) {
          const idle = this.idle;
          this.idle = undefined;
          idle();
        }
        this.pump();
      });
  }

  private async settle(d: Delivery, op: "ACK" | "NACK", reason: string | undefined): Promise<void> {
    if (d.cc.isDead()) {
      return; // the event went back to the group with its connection
    }
    try {
      await d.cc.call({
        op,
        topic: this.topic,
        group: this.group,
        id: d.record.id,
        attempt: d.attempt,
        ...(reason === undefined ? {} : { reason }),
      });
    } catch (err) {
      if (err instanceof LostError) {
        return;
      }
      throw err; // ack_failed: the lease had ended; the event comes again
    }
  }

  private async extend(d: Delivery, ms: number): Promise<void> {
    if (!(ms > 0) || !Number.isFinite(ms)) {
      throw new InvalidArgumentError(`promlib: extend: ${ms} ms, want a positive number`);
    }
    const whole = Math.ceil(ms);
    if (d.cc.isDead()) {
      throw d.cc.lostError();
    }
    await d.cc.call({ op: "MODACK", topic: this.topic, group: this.group, id: d.record.id, attempt: d.attempt, extend_ms: whole });
    d.deadline = Date.now() + whole;
  }
}

function reasonOf(err: unknown): string {
  if (err instanceof Error) {
    return err.message || err.name;
  }
  return String(err);
}
