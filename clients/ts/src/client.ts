import { Connection, LostError } from "./connection.js";
import type { ConnectionSink, WebSocketConstructor } from "./connection.js";
import { ClosedError, ConnectionError, InvalidArgumentError, ProtocolError } from "./errors.js";
import type { ClientFrame, EventRecord, PublishOptions, PublishResult, ServerFrame } from "./frames.js";
import { backoffDelay, fromBase64, toBase64, uuidv7 } from "./ids.js";
import { checkLiveOptions, LiveSubscription } from "./live.js";
import type { LiveFrame, LiveHandler, LiveOptions } from "./live.js";
import { Subscription } from "./subscription.js";
import type { Handler, SubscribeOptions } from "./subscription.js";
import { resolveToken } from "./token.js";
import type { ResolvedToken, Token, TokenProvider } from "./token.js";

/** The states of a client's connection. */
export type ConnectionState = "connecting" | "open" | "reconnecting" | "closed";

/** Options of {@link PromClient.connect}. */
export interface ClientOptions {
  /**
   * The token sent with AUTH, or a provider called for one at every (re)connect and again before
   * the token expires (see {@link TokenProvider}). Omit it for a server that accepts anyone.
   */
  token?: string | TokenProvider;
  /**
   * The WebSocket constructor: the global `WebSocket` by default (browsers, Node 22+); in Node 20
   * pass the `ws` package's: `import { WebSocket } from "ws"`.
   */
  WebSocket?: WebSocketConstructor;
  /** Reconnect after a lost connection (default true); false makes the loss final. */
  reconnect?: boolean;
  /** Backoff between reconnect attempts: from minBackoffMs (100) to maxBackoffMs (10000), half random. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** Bounds each connection attempt, AUTH included (default 10000 ms). */
  connectTimeoutMs?: number;
  /**
   * How long before a token's expiry the provider is asked for a new one, which is sent with AUTH
   * on the open connection (default 30000 ms, and at most half the token's remaining life).
   */
  refreshBeforeMs?: number;
  /** Called when the connection's state changes; err says why it was lost. */
  onStateChange?: (state: ConnectionState, err?: Error) => void;
  /**
   * Called with errors no call receives: a refused ACK, a failed token refresh or reconnect, an
   * ERR that answers no frame, a frame the client cannot read. By default they are dropped.
   */
  onError?: (err: Error) => void;
}

/** Options of {@link PromClient.close}. */
export interface CloseOptions {
  /**
   * How long to wait for running handlers (default: each subscription's drainTimeoutMs) and for
   * publishes in flight (default 5000 ms).
   */
  drainTimeoutMs?: number;
}

interface Settings {
  token: string | TokenProvider | undefined;
  WebSocket: WebSocketConstructor;
  reconnect: boolean;
  minBackoffMs: number;
  maxBackoffMs: number;
  connectTimeoutMs: number;
  refreshBeforeMs: number;
  onStateChange: (state: ConnectionState, err?: Error) => void;
  onError: (err: Error) => void;
}

function settings(o: ClientOptions): Settings {
  const Ctor = o.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (Ctor === undefined) {
    throw new InvalidArgumentError(
      'promlib: no WebSocket: this runtime has no global WebSocket; pass one as options.WebSocket (in Node: import { WebSocket } from "ws")',
    );
  }
  const problems: string[] = [];
  const ms = (name: string, v: number | undefined, def: number): number => {
    if (v === undefined) {
      return def;
    }
    if (!(v >= 0) || !Number.isFinite(v)) {
      problems.push(`${name}: ${v}, want 0 or more milliseconds`);
    }
    return v;
  };
  const s: Settings = {
    token: o.token,
    WebSocket: Ctor,
    reconnect: o.reconnect ?? true,
    minBackoffMs: ms("minBackoffMs", o.minBackoffMs, 100),
    maxBackoffMs: ms("maxBackoffMs", o.maxBackoffMs, 10_000),
    connectTimeoutMs: ms("connectTimeoutMs", o.connectTimeoutMs, 10_000),
    refreshBeforeMs: ms("refreshBeforeMs", o.refreshBeforeMs, 30_000),
    onStateChange: o.onStateChange ?? (() => {}),
    onError: o.onError ?? (() => {}),
  };
  if (s.connectTimeoutMs === 0) {
    problems.push("connectTimeoutMs: 0, want a positive number of milliseconds");
  }
  if (o.token !== undefined && typeof o.token !== "string" && typeof o.token !== "function") {
    problems.push("token: want a string or a function that returns one");
  }
  if (problems.length > 0) {
    throw new InvalidArgumentError(`promlib: options: ${problems.join("; ")}`);
  }
  s.maxBackoffMs = Math.max(s.maxBackoffMs, s.minBackoffMs);
  return s;
}

const subKey = (topic: string, group: string) => `${topic}\u0000${group}`;

function checkName(what: string, v: unknown): string {
  if (typeof v !== "string" || v === "") {
    throw new InvalidArgumentError(`promlib: ${what}: ${JSON.stringify(v)}, want a non-empty string`);
  }
  return v;
}

/**
 * A client of promlib's WebSocket gateway (docs/PROTOCOL.md), for browsers and Node. It keeps one
 * connection, reconnects with backoff when it is lost, authenticates again and subscribes again;
 * it refreshes expiring tokens on the open connection. Every call may be made at any time, also
 * while reconnecting: it waits for the connection.
 *
 * ```ts
 * const client = await PromClient.connect("wss://hub.example/ws", { token });
 * await client.publish<Order>("orders.created", { id: 7 });
 * await client.subscribe<Order>("orders.created", "billing", async (ev) => bill(ev.payload));
 * const live = await client.subscribeLive<State>("process.state", (ev) => render(ev.payload));
 * ```
 */
export class PromClient {
  readonly url: string;
  private readonly s: Settings;
  private cur: Connection | undefined;
  private gen = 0;
  private corr = 0;
  private st: ConnectionState = "connecting";
  private closing = false;
  private lostErr: Error | undefined;
  private waiters: (() => void)[] = [];
  /** Calls cut off by a lost connection: sent again before the calls made since. */
  private retries: (() => void)[] = [];
  private readonly subs = new Map<string, Subscription<unknown>>();
  /** Live subscriptions, by topic. */
  private readonly live = new Map<string, LiveSubscription<unknown>>();
  private readonly calls = new Set<Promise<unknown>>();
  private refreshTimer: ReturnType<typeof setTimeout> | undefined;
  private backoffTimer: { timer: ReturnType<typeof setTimeout>; wake: () => void } | undefined;
  private connects = 0;
  private readonly sink: ConnectionSink;

  private constructor(url: string, s: Settings) {
    this.url = url;
    this.s = s;
    this.sink = {
      event: (cc, f) => this.route(cc, f),
      unsolicited: (_cc, err) => this.unsolicited(err),
      malformed: (_cc, err) => this.s.onError(err),
      lost: (cc) => this.lost(cc),
    };
  }

  /**
   * Connects to url (ws:// or wss://) and authenticates. It rejects if this first connection or
   * its AUTH fails; later losses are reconnected in the background unless options.reconnect is
   * false.
   */
  static async connect(url: string, options: ClientOptions = {}): Promise<PromClient> {
    const c = new PromClient(url, settings(options));
    const { cc, expiresAt } = await c.dial();
    c.setConnection(cc, expiresAt);
    return c;
  }

  /** The connection's state. */
  get state(): ConnectionState {
    return this.st;
  }

  /** How many connections the client has opened and authenticated (1 until the first reconnect). */
  get connectionCount(): number {
    return this.connects;
  }

  /**
   * Publishes payload (any JSON value) to topic and resolves with the stored event's id and seq
   * once the server has stored it. Publishes are pipelined: call it many times without waiting,
   * each promise settles with its own answer, and the hub stores them in the order of the calls.
   * A publish cut off by a lost connection is sent again after the reconnect with the same id, so
   * it is stored once, and before the publishes made since, so the order holds. An ArrayBuffer or a view of
   * one (Uint8Array, DataView, ...) is published as bytes (base64 on the wire, with opts.content_type). Refusals reject with a
   * {@link ProtocolError} (e.g. `rate_limited`, `forbidden`, `too_large`).
   */
  async publish<T>(topic: string, payload: T, opts: PublishOptions = {}): Promise<PublishResult> {
    checkName("topic", topic);
    if (this.closing) {
      throw new ClosedError();
    }
    if (payload === undefined) {
      throw new InvalidArgumentError("promlib: payload: undefined, want a JSON value (null for none)");
    }
    const { signal, ...rest } = opts;
    const wire: Record<string, unknown> = { ...rest, id: rest.id ?? uuidv7() };
    const bytes =
      payload instanceof ArrayBuffer
        ? new Uint8Array(payload)
        : ArrayBuffer.isView(payload)
          ? new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength)
          : undefined;
    if (bytes === undefined && rest.content_type !== undefined) {
      throw new InvalidArgumentError("promlib: content_type: for binary payloads only (an ArrayBuffer, a Uint8Array or another view of bytes)");
    }
    // Encoded once, here, so that a payload JSON cannot encode fails at once.
    const f =
      bytes === undefined
        ? JSON.stringify({ op: "PUBLISH", topic, payload, opts: wire })
        : JSON.stringify({
            op: "PUBLISH",
            topic,
            payload: toBase64(bytes),
            payload_encoding: "base64",
            opts: { ...wire, content_type: rest.content_type ?? "application/octet-stream" },
          });
    const p = this.call(f, true, signal);
    this.calls.add(p);
    try {
      const ok = await p;
      return { id: ok.id ?? String(wire.id), seq: ok.seq ?? 0 };
    } finally {
      this.calls.delete(p);
    }
  }

  /**
   * Joins group on topic and calls handler for each event; the handler's promise settles it (see
   * {@link Handler}). `T` is the payload's type. It resolves once the server has accepted the
   * subscription, and rejects with a {@link ProtocolError} if it refuses (e.g. `forbidden`,
   * `already_subscribed`).
   */
  async subscribe<T = unknown>(topic: string, group: string, handler: Handler<T>, opts: SubscribeOptions = {}): Promise<Subscription<T>> {
    checkName("topic", topic);
    checkName("group", group);
    if (typeof handler !== "function") {
      throw new InvalidArgumentError("promlib: handler: want a function");
    }
    if (this.closing) {
      throw new ClosedError();
    }
    const key = subKey(topic, group);
    if (this.subs.has(key)) {
      throw new ProtocolError("already_subscribed", `group "${group}" on topic "${topic}" is already subscribed by this client`);
    }
    const sub = new Subscription<T>(this.host(), topic, group, handler, opts);
    this.subs.set(key, sub as Subscription<unknown>);
    try {
      // A SUBSCRIBE cut off by a lost connection is sent again; if the
      // reconnect has restored it already, the server says so.
      await this.call(sub.subscribeFrame(), true);
    } catch (err) {
      if (!(err instanceof ProtocolError && err.code === "already_subscribed")) {
        if (this.subs.get(key) === sub) {
          this.subs.delete(key);
        }
        throw err;
      }
    }
    return sub;
  }

  /**
   * Subscribes to topic live (a SUBSCRIBE without group, docs/PROTOCOL.md "Live subscriptions")
   * and calls handler for each event, in seq order, one at a time: the topic's events from its
   * head (or after opts.since), nothing stored for this subscriber and nothing to acknowledge. For
   * viewers: a dashboard, a page many people watch.
   *
   * The subscription's {@link LiveSubscription.position} is the last seq it handled (or the `to`
   * of the last gap); on every reconnect the client subscribes again with `since` = position and
   * skips what it had handled already, so that no event is missed or handled twice. Seqs the
   * server will not deliver (deleted by retention or compaction, or dropped with `slow: "skip"`)
   * go to opts.onGap; the server's answer to each resumption goes to opts.onRecovery. It resolves
   * once the server has accepted the subscription (the position is then the OK's seq or
   * opts.since, or past it if events that came with the answer were handled already), and rejects with a {@link ProtocolError} if it refuses (`forbidden`,
   * `rate_limited`, `already_subscribed`, or `bad_frame` from a server without live
   * subscriptions).
   */
  async subscribeLive<T = unknown>(topic: string, handler: LiveHandler<T>, opts: LiveOptions = {}): Promise<LiveSubscription<T>> {
    checkName("topic", topic);
    if (typeof handler !== "function") {
      throw new InvalidArgumentError("promlib: handler: want a function");
    }
    checkLiveOptions(opts);
    if (this.closing) {
      throw new ClosedError();
    }
    if (this.live.has(topic)) {
      throw new ProtocolError("already_subscribed", `topic "${topic}" has a live subscription on this client already`);
    }
    const sub = new LiveSubscription<T>(this.liveHost(), topic, handler, opts);
    this.live.set(topic, sub as LiveSubscription<unknown>);
    const f = sub.subscribeFrame();
    try {
      // A SUBSCRIBE cut off by a lost connection is sent again; if the reconnect has restored it
      // already, the server says so.
      await this.call(f, true, undefined, (cc, ok) => sub.subscribed(cc, f, ok));
    } catch (err) {
      if (!(err instanceof ProtocolError && err.code === "already_subscribed")) {
        sub.end(undefined);
        throw err;
      }
    }
    return sub;
  }

  /**
   * Sends AUTH on the open connection now, with token or else a fresh one from the token
   * provider: the connection and its subscriptions stay. The server refuses a token of another
   * subject (`auth_failed`) and keeps the previous one. A token given here is also the one sent
   * on reconnects, unless the client has a provider.
   */
  async auth(token?: string | Token): Promise<void> {
    const t = token === undefined ? await resolveToken(this.s.token) : await resolveToken(() => token);
    const cc = await this.connection();
    await this.authOn(cc, t);
    if (token !== undefined && typeof this.s.token !== "function") {
      this.s.token = t.token;
    }
  }

  /**
   * Closes the client, draining: subscriptions stop taking events and their running handlers may
   * finish and settle (up to drainTimeoutMs), publishes in flight get their answers, then the
   * connection is closed, which gives every event still in flight back to its group. Calls
   * waiting for a connection reject with {@link ClosedError}. Idempotent.
   */
  async close(opts: CloseOptions = {}): Promise<void> {
    if (this.closing) {
      return;
    }
    this.closing = true;
    const drainMs = opts.drainTimeoutMs ?? 5000;
    const subs = [...this.subs.values()];
    await Promise.allSettled([
      ...subs.map((s) => s.close(opts.drainTimeoutMs === undefined ? {} : { drainTimeoutMs: drainMs })),
      ...[...this.live.values()].map((s) => s.close()),
    ]);
    if (this.calls.size > 0 && this.cur && !this.cur.isDead()) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        Promise.allSettled([...this.calls]),
        new Promise((resolve) => (timer = setTimeout(resolve, drainMs))),
      ]);
      clearTimeout(timer);
    }
    clearTimeout(this.refreshTimer);
    this.backoffTimer?.wake();
    const cc = this.cur;
    this.cur = undefined;
    this.setState("closed");
    this.wake();
    if (cc) {
      cc.close(1000, "client closed");
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([cc.ended, new Promise((resolve) => (timer = setTimeout(resolve, 1000)))]);
      clearTimeout(timer);
    }
  }

  // --- connections ---

  private nextCorr = () => String(++this.corr);

  /** dial opens a connection and authenticates it. */
  private async dial(): Promise<{ cc: Connection; expiresAt: number | undefined }> {
    const deadline = Date.now() + this.s.connectTimeoutMs;
    const token = await resolveToken(this.s.token);
    const cc = await Connection.open(this.s.WebSocket, this.url, ++this.gen, this.s.connectTimeoutMs, this.nextCorr, this.sink);
    try {
      await withTimeout(cc.call({ op: "AUTH", token: token.token }), deadline - Date.now(), `AUTH: no answer within ${this.s.connectTimeoutMs} ms`);
    } catch (err) {
      cc.close(1000, "auth failed");
      throw err;
    }
    return { cc, expiresAt: token.expiresAt };
  }

  /** authOn sends AUTH with t on cc and, on OK, schedules the next refresh. */
  private async authOn(cc: Connection, t: ResolvedToken): Promise<void> {
    await cc.call({ op: "AUTH", token: t.token });
    this.scheduleRefresh(cc, t.expiresAt);
  }

  private setConnection(cc: Connection, expiresAt: number | undefined): void {
    this.cur = cc;
    this.connects++;
    this.scheduleRefresh(cc, expiresAt);
    this.setState("open");
    this.wake();
  }

  /**
   * scheduleRefresh arms the token refresh for a token that expires at expiresAt, when a provider
   * can give a new one.
   */
  private scheduleRefresh(cc: Connection, expiresAt: number | undefined): void {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = undefined;
    if (expiresAt === undefined || typeof this.s.token !== "function" || this.closing) {
      return;
    }
    const left = expiresAt - Date.now();
    const lead = Math.min(this.s.refreshBeforeMs, left / 2);
    this.refreshTimer = setTimeout(() => void this.refresh(cc, expiresAt), Math.max(0, left - lead));
  }

  private async refresh(cc: Connection, expiresAt: number): Promise<void> {
    if (cc !== this.cur || cc.isDead() || this.closing) {
      return;
    }
    try {
      await this.authOn(cc, await resolveToken(this.s.token));
    } catch (err) {
      if (err instanceof LostError || cc !== this.cur) {
        return; // the reconnect authenticates afresh
      }
      this.s.onError(new ConnectionError(`token refresh failed: ${err instanceof Error ? err.message : String(err)}`));
      // Try again while the token lasts; once it expires the server closes the connection and
      // the reconnect asks for a token again.
      const left = expiresAt - Date.now();
      if (left > 0) {
        clearTimeout(this.refreshTimer);
        this.refreshTimer = setTimeout(() => void this.refresh(cc, expiresAt), Math.max(left / 4, 50));
      }
    }
  }

  /** connection waits for an open connection. */
  private async connection(signal?: AbortSignal, retry = false): Promise<Connection> {
    for (;;) {
      signal?.throwIfAborted();
      if (this.cur && !this.cur.isDead()) {
        return this.cur;
      }
      if (this.lostErr) {
        throw this.lostErr;
      }
      if (this.st === "closed") {
        throw new ClosedError();
      }
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => reject(signal?.reason);
        signal?.addEventListener("abort", onAbort, { once: true });
        (retry ? this.retries : this.waiters).push(() => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        });
      });
    }
  }

  /**
   * call sends f and waits for its answer; with retry, a frame cut off by a lost connection is sent
   * again on the next one. onAnswer sees the OK as it is read (see Connection.call).
   */
  private async call(
    f: ClientFrame | string,
    retry: boolean,
    signal?: AbortSignal,
    onAnswer?: (cc: Connection, ok: ServerFrame) => void,
  ): Promise<ServerFrame> {
    for (let again = false; ; again = true) {
      // A frame cut off goes out again before those made while reconnecting, so that the
      // publishes of a sequence are stored in its order.
      const cc = await this.connection(signal, again);
      try {
        const answer = cc.call(f, onAnswer && ((ok) => onAnswer(cc, ok)));
        if (!signal) {
          return await answer;
        }
        return await abortable(answer, signal);
      } catch (err) {
        if (!(err instanceof LostError)) {
          throw err;
        }
        if (this.st === "closed") {
          throw new ClosedError();
        }
        if (!retry || !this.s.reconnect) {
          throw new ConnectionError("the connection was lost before the answer came", err.closeCode, err.reason);
        }
      }
    }
  }

  private wake(): void {
    const w = [...this.retries, ...this.waiters];
    this.retries = [];
    this.waiters = [];
    for (const f of w) {
      f();
    }
  }

  private setState(st: ConnectionState, err?: Error): void {
    if (this.st === st) {
      return;
    }
    this.st = st;
    try {
      if (err === undefined) {
        this.s.onStateChange(st);
      } else {
        this.s.onStateChange(st, err);
      }
    } catch (e) {
      this.s.onError(e instanceof Error ? e : new Error(String(e)));
    }
  }

  private lost(cc: Connection): void {
    for (const s of this.subs.values()) {
      s.connectionLost(cc);
    }
    if (cc !== this.cur) {
      return;
    }
    this.cur = undefined;
    clearTimeout(this.refreshTimer);
    if (this.closing) {
      return;
    }
    const err = new ConnectionError("the connection was lost", cc.closeCode, cc.closeReason);
    if (!this.s.reconnect) {
      this.lostErr = err;
      this.setState("closed", err);
      for (const s of [...this.subs.values()]) {
        s.end(err);
      }
      for (const s of [...this.live.values()]) {
        s.end(err);
      }
      this.wake();
      return;
    }
    this.setState("reconnecting", err);
    void this.reconnect();
  }

  /** reconnect dials until it has a connection with every subscription restored, or the client closes. */
  private async reconnect(): Promise<void> {
    for (let attempt = 1; !this.closing; attempt++) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, backoffDelay(attempt, this.s.minBackoffMs, this.s.maxBackoffMs));
        this.backoffTimer = {
          timer,
          wake: () => {
            clearTimeout(timer);
            resolve();
          },
        };
      });
      this.backoffTimer = undefined;
      if (this.closing) {
        return;
      }
      let cc: Connection | undefined;
      let expiresAt: number | undefined;
      try {
        ({ cc, expiresAt } = await this.dial());
        await this.resubscribe(cc);
      } catch (err) {
        cc?.close(1000, "reconnect failed");
        if (!this.closing) {
          this.s.onError(new ConnectionError(`reconnect attempt ${attempt} failed: ${err instanceof Error ? err.message : String(err)}`));
        }
        continue;
      }
      if (this.closing || cc.isDead()) {
        cc.close();
        if (this.closing) {
          return;
        }
        continue;
      }
      this.setConnection(cc, expiresAt);
      return;
    }
  }

  /**
   * resubscribe subscribes every subscription again on cc (and pauses the paused ones); live
   * subscriptions resume after their position.
   */
  private async resubscribe(cc: Connection): Promise<void> {
    for (const s of [...this.live.values()]) {
      if (!s.wanted) {
        continue;
      }
      try {
        await s.subscribeOn(cc);
      } catch (err) {
        if (err instanceof ProtocolError) {
          if (err.code !== "already_subscribed") {
            s.end(err);
            this.s.onError(err);
          }
          continue;
        }
        throw err;
      }
      if (!s.wanted) {
        await cc.call({ op: "UNSUBSCRIBE", topic: s.topic }).catch(() => {});
      }
    }
    for (const s of [...this.subs.values()]) {
      if (!s.wanted) {
        continue;
      }
      try {
        await cc.call(s.subscribeFrame());
      } catch (err) {
        if (err instanceof ProtocolError) {
          if (err.code !== "already_subscribed") {
            // The server refuses it now (e.g. the token's policy changed): it ends.
            s.end(err);
            this.s.onError(err);
          }
          continue;
        }
        throw err;
      }
      if (!s.wanted) {
        // closed while this SUBSCRIBE was on its way: leave again
        await cc.call({ op: "UNSUBSCRIBE", topic: s.topic, group: s.group }).catch(() => {});
        continue;
      }
      if (s.isPaused) {
        await cc.call({ op: "PAUSE", topic: s.topic, group: s.group }).catch((err: unknown) => {
          if (!(err instanceof ProtocolError)) {
            throw err;
          }
        });
      }
    }
  }

  // --- what the server sends ---

  private route(cc: Connection, f: ServerFrame): void {
    const liveFrame = f.group === undefined || f.group === "";
    if (f.op === "GAP") {
      this.live.get(f.topic ?? "")?.push(cc, undefined, f);
      return;
    }
    const ev = f.event;
    if (ev === undefined || ev === null || typeof ev !== "object" || typeof ev.id !== "string") {
      this.s.onError(new ConnectionError("an EVENT frame without an event from the server"));
      return;
    }
    if (liveFrame) {
      const s = this.live.get(f.topic ?? "");
      if (!s) {
        return; // unsubscribed meanwhile
      }
      if (!Number.isSafeInteger(ev.seq)) {
        this.s.onError(new ConnectionError(`a live EVENT of topic "${f.topic}" without a seq from the server; ignored`));
        return;
      }
      s.push(cc, this.decode(ev), f);
      return;
    }
    const s = this.subs.get(subKey(f.topic ?? "", f.group ?? ""));
    if (!s) {
      return; // unsubscribed meanwhile; the server gives it back
    }
    s.push(cc, this.decode(ev), f.ctx?.attempt ?? 1, f.ctx?.ack_deadline_ms ?? 0);
  }

  /** decode gives a binary payload (payload_encoding base64) to the handler as its bytes. */
  private decode(ev: EventRecord & { payload_encoding?: string }): EventRecord {
    if (ev.payload_encoding !== "base64" || typeof ev.payload !== "string") {
      return ev;
    }
    let bytes: Uint8Array;
    try {
      bytes = fromBase64(ev.payload);
    } catch {
      this.s.onError(new ConnectionError(`event ${ev.id}: a payload marked base64 that is not base64; delivered as sent`));
      return ev;
    }
    const { payload_encoding: _, ...rec } = ev;
    return { ...rec, payload: bytes };
  }

  private unsolicited(err: ProtocolError): void {
    if (err.topic !== undefined) {
      if (err.group === undefined || err.group === "") {
        this.live.get(err.topic)?.end(err);
      } else {
        this.subs.get(subKey(err.topic, err.group))?.end(err);
      }
    }
    this.s.onError(err);
  }

  private liveHost() {
    return {
      liveConnection: () => (this.cur && !this.cur.isDead() ? this.cur : undefined),
      remove: (s: LiveSubscription<unknown>) => {
        if (this.live.get(s.topic) === s) {
          this.live.delete(s.topic);
        }
      },
      report: (err: Error) => this.s.onError(err),
      call: (f: LiveFrame, retry: boolean, onAnswer: (cc: Connection, ok: ServerFrame) => void) => this.call(f, retry, undefined, onAnswer),
    };
  }

  private host() {
    return {
      liveConnection: () => (this.cur && !this.cur.isDead() ? this.cur : undefined),
      remove: (s: Subscription<unknown>) => {
        const key = subKey(s.topic, s.group);
        if (this.subs.get(key) === s) {
          this.subs.delete(key);
        }
      },
      report: (err: Error) => this.s.onError(err),
      call: (f: { op: string; topic: string; group: string }, retry: boolean) => this.call(f, retry),
    };
  }
}

function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

function withTimeout<T>(p: Promise<T>, ms: number, msg: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ConnectionError(msg)), Math.max(ms, 0));
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}
