import { LostError } from "./connection.js";
import { ClosedError, ConnectionError, InvalidArgumentError, ProtocolError } from "./errors.js";
const defaultDrainMs = 5000;
export function wireOptions(o) {
    const w = {};
    const problems = [];
    const count = (name, v) => {
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
    }
    else if (f === "earliest") {
        w.from = "earliest";
    }
    else if (typeof f === "object" && f !== null && "ts" in f) {
        w.from = "ts";
        const ts = count("from.ts", f.ts);
        if (ts !== undefined) {
            w.ts = ts;
        }
    }
    else if (typeof f === "object" && f !== null && "seq" in f) {
        w.from = "seq";
        const seq = count("from.seq", f.seq);
        if (seq !== undefined) {
            w.seq = seq;
        }
    }
    else if (typeof f === "object" && f !== null && "afterId" in f && typeof f.afterId === "string" && f.afterId !== "") {
        w.from = "afterId";
        w.afterId = f.afterId;
    }
    else {
        problems.push(`from: ${JSON.stringify(f)}, want "latest", "earliest", {ts}, {seq} or {afterId}`);
    }
    const set = (k) => {
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
    }
    else if (o.keyOrdered) {
        w.keyOrdered = true;
    }
    const perKey = count("maxPerKey", o.maxPerKey);
    if (perKey !== undefined) {
        if (o.keyOrdered === true) {
            w.maxPerKey = perKey;
        }
        else {
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
export class Subscription {
    host;
    topic;
    group;
    done;
    handler;
    wire;
    concurrency;
    drainMs;
    queue = [];
    running = new Map();
    paused = false;
    state = "active";
    err;
    resolveDone;
    idle;
    constructor(host, topic, group, handler, opts) {
        this.host = host;
        this.topic = topic;
        this.group = group;
        this.handler = handler;
        this.wire = wireOptions(opts);
        this.concurrency = opts.concurrency ?? 1;
        this.drainMs = opts.drainTimeoutMs ?? defaultDrainMs;
        this.done = new Promise((resolve) => (this.resolveDone = resolve));
    }
    get error() {
        return this.err;
    }
    get isPaused() {
        return this.paused;
    }
    get active() {
        return this.running.size;
    }
    pause() {
        return this.setPaused(true);
    }
    resume() {
        return this.setPaused(false);
    }
    async close(opts = {}) {
        if (this.state !== "active") {
            return this.done;
        }
        this.state = "closing";
        this.queue.length = 0;
        const cc = this.host.liveConnection();
        if (cc && this.running.size > 0) {
            cc.call({ op: "PAUSE", topic: this.topic, group: this.group }).catch(() => {
            });
        }
        await this.drain(opts.drainTimeoutMs ?? this.drainMs);
        this.host.remove(this);
        const now = this.host.liveConnection();
        if (now) {
            try {
                await now.call({ op: "UNSUBSCRIBE", topic: this.topic, group: this.group });
            }
            catch (err) {
                if (!(err instanceof LostError) && !(err instanceof ProtocolError && err.code === "not_subscribed")) {
                    this.finish(undefined);
                    throw err;
                }
            }
        }
        this.finish(undefined);
    }
    subscribeFrame() {
        return { op: "SUBSCRIBE", topic: this.topic, group: this.group, opts: { ...this.wire } };
    }
    get wanted() {
        return this.state === "active";
    }
    push(cc, record, attempt, ackDeadlineMs) {
        if (this.state !== "active") {
            return;
        }
        this.queue.push({ cc, record, attempt, deadline: Date.now() + ackDeadlineMs });
        this.pump();
    }
    connectionLost(cc) {
        for (const [d, ac] of this.running) {
            if (d.cc === cc) {
                ac.abort(new ConnectionError("the connection the event came on was lost; it will be delivered again"));
            }
        }
    }
    end(err) {
        if (this.state === "ended") {
            return;
        }
        this.state = "closing";
        this.queue.length = 0;
        this.host.remove(this);
        void this.drain(this.drainMs).then(() => this.finish(err));
    }
    finish(err) {
        if (this.state === "ended") {
            return;
        }
        this.state = "ended";
        this.err = err instanceof ClosedError ? undefined : err;
        this.resolveDone();
    }
    async drain(ms) {
        if (this.running.size === 0) {
            return;
        }
        const idle = new Promise((resolve) => (this.idle = resolve));
        let timer;
        const timeout = new Promise((resolve) => (timer = setTimeout(() => resolve("timeout"), ms)));
        const r = await Promise.race([idle, timeout]);
        clearTimeout(timer);
        if (r === "timeout") {
            for (const ac of this.running.values()) {
                ac.abort(new ClosedError("subscription"));
            }
        }
    }
    async setPaused(p) {
        if (this.state !== "active") {
            throw new ClosedError("subscription");
        }
        this.paused = p;
        try {
            await this.host.call({ op: p ? "PAUSE" : "RESUME", topic: this.topic, group: this.group }, false);
        }
        catch (err) {
            if (!(err instanceof ConnectionError)) {
                throw err;
            }
        }
    }
    pump() {
        while (this.running.size < this.concurrency && this.queue.length > 0) {
            const d = this.queue.shift();
            if (d.cc.isDead()) {
                continue;
            }
            this.run(d);
        }
    }
    run(d) {
        const ac = new AbortController();
        this.running.set(d, ac);
        const ctx = {
            topic: this.topic,
            group: this.group,
            attempt: d.attempt,
            get deadline() {
                return d.deadline;
            },
            signal: ac.signal,
            extend: (ms) => this.extend(d, ms),
        };
        let p;
        try {
            p = Promise.resolve(this.handler(d.record, ctx));
        }
        catch (err) {
            p = Promise.reject(err);
        }
        p.then(() => this.settle(d, "ACK", undefined), (err) => this.settle(d, "NACK", reasonOf(err)))
            .catch((err) => this.host.report(err instanceof Error ? err : new Error(String(err))))
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
    async settle(d, op, reason) {
        if (d.cc.isDead()) {
            return;
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
        }
        catch (err) {
            if (err instanceof LostError) {
                return;
            }
            throw err;
        }
    }
    async extend(d, ms) {
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
function reasonOf(err) {
    if (err instanceof Error) {
        return err.message || err.name;
    }
    return String(err);
}
