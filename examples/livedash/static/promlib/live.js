import { LostError } from "./connection.js";
import { ClosedError, ConnectionError, InvalidArgumentError, ProtocolError } from "./errors.js";
const defaultMaxBuffered = 10_000;
export function checkLiveOptions(o) {
    const problems = [];
    if (o.since !== undefined && !(Number.isSafeInteger(o.since) && o.since >= 0)) {
        problems.push(`since: ${o.since}, want an integer of 0 or more (the last seq seen)`);
    }
    if (o.slow !== undefined && o.slow !== "close" && o.slow !== "skip") {
        problems.push(`slow: ${JSON.stringify(o.slow)}, want "close" or "skip"`);
    }
    if (o.maxBuffered !== undefined && !(Number.isSafeInteger(o.maxBuffered) && o.maxBuffered > 0)) {
        problems.push(`maxBuffered: ${o.maxBuffered}, want a positive integer`);
    }
    for (const k of ["onGap", "onRecovery"]) {
        if (o[k] !== undefined && typeof o[k] !== "function") {
            problems.push(`${k}: want a function`);
        }
    }
    if (problems.length > 0) {
        throw new InvalidArgumentError(`promlib: subscribeLive options: ${problems.join("; ")}`);
    }
}
export class LiveSubscription {
    host;
    topic;
    done;
    handler;
    slow;
    onGap;
    onRecovery;
    maxBuffered;
    pos;
    started;
    queue = [];
    head = 0;
    running = false;
    accepting;
    suspended = false;
    resuming = false;
    state = "active";
    err;
    resolveDone;
    constructor(host, topic, handler, opts) {
        this.host = host;
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
    get position() {
        return this.pos;
    }
    get buffered() {
        return this.queue.length - this.head;
    }
    get error() {
        return this.err;
    }
    async close() {
        if (this.state !== "active") {
            return this.done;
        }
        this.finish(undefined);
        const cc = this.host.liveConnection();
        if (!cc) {
            return;
        }
        try {
            await cc.call({ op: "UNSUBSCRIBE", topic: this.topic });
        }
        catch (err) {
            if (!(err instanceof LostError) && !(err instanceof ProtocolError && err.code === "not_subscribed")) {
                throw err;
            }
        }
    }
    get wanted() {
        return this.state === "active";
    }
    subscribeFrame() {
        const opts = {};
        if (this.started) {
            opts.since = this.pos;
        }
        if (this.slow !== undefined) {
            opts.slow = this.slow;
        }
        return { op: "SUBSCRIBE", topic: this.topic, opts };
    }
    subscribed(cc, f, ok) {
        if (this.state !== "active") {
            return;
        }
        this.accepting = cc;
        this.suspended = false;
        this.enqueue({ kind: "ok", since: f.opts?.since, seq: ok.seq ?? 0, recovered: ok.recovered ?? false });
    }
    async subscribeOn(cc) {
        const f = this.subscribeFrame();
        await cc.call(f, (ok) => this.subscribed(cc, f, ok));
    }
    push(cc, record, f) {
        if (this.state !== "active" || cc !== this.accepting) {
            return;
        }
        let it;
        if (record !== undefined) {
            it = { kind: "event", record };
        }
        else {
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
    end(err) {
        this.finish(err);
    }
    finish(err) {
        if (this.state === "ended") {
            return;
        }
        this.state = "ended";
        this.err = err instanceof ClosedError ? undefined : err;
        this.queue = [];
        this.head = 0;
        this.accepting = undefined;
        this.host.remove(this);
        this.resolveDone();
    }
    overflow(cc, it) {
        if (this.slow === "skip") {
            let first = this.queue.length;
            while (first > this.head && this.queue[first - 1].kind !== "ok") {
                first--;
            }
            if (first === this.queue.length) {
                return false;
            }
            const start = this.queue[first];
            const from = start.kind === "event" ? start.record.seq : start.kind === "gap" ? start.from : 0;
            const to = it.kind === "event" ? it.record.seq : it.kind === "gap" ? it.to : 0;
            this.queue.length = first;
            this.queue.push({ kind: "gap", from, to, reason: "slow" });
            return true;
        }
        this.suspended = true;
        this.accepting = undefined;
        cc.call({ op: "UNSUBSCRIBE", topic: this.topic }).catch(() => {
        });
        return true;
    }
    enqueue(it) {
        this.queue.push(it);
        this.pump();
    }
    pump() {
        while (!this.running && this.state === "active" && this.head < this.queue.length) {
            const it = this.queue[this.head];
            this.queue[this.head++] = undefined;
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
    handle(it) {
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
                this.callHook("onRecovery", () => this.onRecovery?.({ since: it.since, seq: it.seq, recovered: it.recovered, reset }));
                return undefined;
            }
            case "gap": {
                if (it.to <= this.pos) {
                    return undefined;
                }
                const gap = { from: Math.max(it.from, this.pos + 1), to: it.to, reason: it.reason };
                this.pos = it.to;
                this.callHook("onGap", () => this.onGap?.(gap));
                return undefined;
            }
            case "event": {
                const seq = it.record.seq;
                if (seq <= this.pos) {
                    return undefined;
                }
                let r;
                try {
                    r = this.handler(it.record);
                }
                catch (err) {
                    this.failed(seq, err);
                    this.pos = seq;
                    return undefined;
                }
                if (r === undefined || r === null || typeof r.then !== "function") {
                    this.pos = seq;
                    return undefined;
                }
                return Promise.resolve(r).then(() => {
                    this.advance(seq);
                }, (err) => {
                    this.failed(seq, err);
                    this.advance(seq);
                });
            }
        }
    }
    advance(seq) {
        if (this.state === "active") {
            this.pos = Math.max(this.pos, seq);
        }
    }
    failed(seq, err) {
        const msg = err instanceof Error ? err.message : String(err);
        this.host.report(new Error(`promlib: live handler of topic "${this.topic}" failed on seq ${seq} (it is not delivered again): ${msg}`, { cause: err }));
    }
    callHook(name, f) {
        try {
            f();
        }
        catch (err) {
            this.host.report(new Error(`promlib: ${name} of topic "${this.topic}" threw: ${err instanceof Error ? err.message : String(err)}`, { cause: err }));
        }
    }
    async resume() {
        if (this.resuming) {
            return;
        }
        this.resuming = true;
        try {
            const f = this.subscribeFrame();
            await this.host.call(f, true, (cc, ok) => this.subscribed(cc, f, ok));
        }
        catch (err) {
            if (err instanceof ProtocolError && err.code === "already_subscribed") {
                return;
            }
            if (this.state === "active" && !(err instanceof ClosedError)) {
                this.host.report(err instanceof Error ? err : new Error(String(err)));
                this.finish(err instanceof Error ? err : new Error(String(err)));
            }
        }
        finally {
            this.resuming = false;
        }
    }
}
