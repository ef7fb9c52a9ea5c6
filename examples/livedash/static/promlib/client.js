import { Connection, LostError } from "./connection.js";
import { ClosedError, ConnectionError, InvalidArgumentError, ProtocolError } from "./errors.js";
import { backoffDelay, fromBase64, toBase64, uuidv7 } from "./ids.js";
import { checkLiveOptions, LiveSubscription } from "./live.js";
import { Subscription } from "./subscription.js";
import { resolveToken } from "./token.js";
function settings(o) {
    const Ctor = o.WebSocket ?? globalThis.WebSocket;
    if (Ctor === undefined) {
        throw new InvalidArgumentError('promlib: no WebSocket: this runtime has no global WebSocket; pass one as options.WebSocket (in Node: import { WebSocket } from "ws")');
    }
    const problems = [];
    const ms = (name, v, def) => {
        if (v === undefined) {
            return def;
        }
        if (!(v >= 0) || !Number.isFinite(v)) {
            problems.push(`${name}: ${v}, want 0 or more milliseconds`);
        }
        return v;
    };
    const s = {
        token: o.token,
        WebSocket: Ctor,
        reconnect: o.reconnect ?? true,
        minBackoffMs: ms("minBackoffMs", o.minBackoffMs, 100),
        maxBackoffMs: ms("maxBackoffMs", o.maxBackoffMs, 10_000),
        connectTimeoutMs: ms("connectTimeoutMs", o.connectTimeoutMs, 10_000),
        refreshBeforeMs: ms("refreshBeforeMs", o.refreshBeforeMs, 30_000),
        onStateChange: o.onStateChange ?? (() => { }),
        onError: o.onError ?? (() => { }),
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
const subKey = (topic, group) => `${topic}\u0000${group}`;
function checkName(what, v) {
    if (typeof v !== "string" || v === "") {
        throw new InvalidArgumentError(`promlib: ${what}: ${JSON.stringify(v)}, want a non-empty string`);
    }
    return v;
}
export class PromClient {
    url;
    s;
    cur;
    gen = 0;
    corr = 0;
    st = "connecting";
    closing = false;
    lostErr;
    waiters = [];
    retries = [];
    subs = new Map();
    live = new Map();
    calls = new Set();
    refreshTimer;
    backoffTimer;
    connects = 0;
    sink;
    constructor(url, s) {
        this.url = url;
        this.s = s;
        this.sink = {
            event: (cc, f) => this.route(cc, f),
            unsolicited: (_cc, err) => this.unsolicited(err),
            malformed: (_cc, err) => this.s.onError(err),
            lost: (cc) => this.lost(cc),
        };
    }
    static async connect(url, options = {}) {
        const c = new PromClient(url, settings(options));
        const { cc, expiresAt } = await c.dial();
        c.setConnection(cc, expiresAt);
        return c;
    }
    get state() {
        return this.st;
    }
    get connectionCount() {
        return this.connects;
    }
    async publish(topic, payload, opts = {}) {
        checkName("topic", topic);
        if (this.closing) {
            throw new ClosedError();
        }
        if (payload === undefined) {
            throw new InvalidArgumentError("promlib: payload: undefined, want a JSON value (null for none)");
        }
        const { signal, ...rest } = opts;
        const wire = { ...rest, id: rest.id ?? uuidv7() };
        const bytes = payload instanceof ArrayBuffer
            ? new Uint8Array(payload)
            : ArrayBuffer.isView(payload)
                ? new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength)
                : undefined;
        if (bytes === undefined && rest.content_type !== undefined) {
            throw new InvalidArgumentError("promlib: content_type: for binary payloads only (an ArrayBuffer, a Uint8Array or another view of bytes)");
        }
        const f = bytes === undefined
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
        }
        finally {
            this.calls.delete(p);
        }
    }
    async subscribe(topic, group, handler, opts = {}) {
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
        const sub = new Subscription(this.host(), topic, group, handler, opts);
        this.subs.set(key, sub);
        try {
            await this.call(sub.subscribeFrame(), true);
        }
        catch (err) {
            if (!(err instanceof ProtocolError && err.code === "already_subscribed")) {
                if (this.subs.get(key) === sub) {
                    this.subs.delete(key);
                }
                throw err;
            }
        }
        return sub;
    }
    async subscribeLive(topic, handler, opts = {}) {
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
        const sub = new LiveSubscription(this.liveHost(), topic, handler, opts);
        this.live.set(topic, sub);
        const f = sub.subscribeFrame();
        try {
            await this.call(f, true, undefined, (cc, ok) => sub.subscribed(cc, f, ok));
        }
        catch (err) {
            if (!(err instanceof ProtocolError && err.code === "already_subscribed")) {
                sub.end(undefined);
                throw err;
            }
        }
        return sub;
    }
    async auth(token) {
        const t = token === undefined ? await resolveToken(this.s.token) : await resolveToken(() => token);
        const cc = await this.connection();
        await this.authOn(cc, t);
        if (token !== undefined && typeof this.s.token !== "function") {
            this.s.token = t.token;
        }
    }
    async close(opts = {}) {
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
            let timer;
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
            let timer;
            await Promise.race([cc.ended, new Promise((resolve) => (timer = setTimeout(resolve, 1000)))]);
            clearTimeout(timer);
        }
    }
    nextCorr = () => String(++this.corr);
    async dial() {
        const deadline = Date.now() + this.s.connectTimeoutMs;
        const token = await resolveToken(this.s.token);
        const cc = await Connection.open(this.s.WebSocket, this.url, ++this.gen, this.s.connectTimeoutMs, this.nextCorr, this.sink);
        try {
            await withTimeout(cc.call({ op: "AUTH", token: token.token }), deadline - Date.now(), `AUTH: no answer within ${this.s.connectTimeoutMs} ms`);
        }
        catch (err) {
            cc.close(1000, "auth failed");
            throw err;
        }
        return { cc, expiresAt: token.expiresAt };
    }
    async authOn(cc, t) {
        await cc.call({ op: "AUTH", token: t.token });
        this.scheduleRefresh(cc, t.expiresAt);
    }
    setConnection(cc, expiresAt) {
        this.cur = cc;
        this.connects++;
        this.scheduleRefresh(cc, expiresAt);
        this.setState("open");
        this.wake();
    }
    scheduleRefresh(cc, expiresAt) {
        clearTimeout(this.refreshTimer);
        this.refreshTimer = undefined;
        if (expiresAt === undefined || typeof this.s.token !== "function" || this.closing) {
            return;
        }
        const left = expiresAt - Date.now();
        const lead = Math.min(this.s.refreshBeforeMs, left / 2);
        this.refreshTimer = setTimeout(() => void this.refresh(cc, expiresAt), Math.max(0, left - lead));
    }
    async refresh(cc, expiresAt) {
        if (cc !== this.cur || cc.isDead() || this.closing) {
            return;
        }
        try {
            await this.authOn(cc, await resolveToken(this.s.token));
        }
        catch (err) {
            if (err instanceof LostError || cc !== this.cur) {
                return;
            }
            this.s.onError(new ConnectionError(`token refresh failed: ${err instanceof Error ? err.message : String(err)}`));
            const left = expiresAt - Date.now();
            if (left > 0) {
                clearTimeout(this.refreshTimer);
                this.refreshTimer = setTimeout(() => void this.refresh(cc, expiresAt), Math.max(left / 4, 50));
            }
        }
    }
    async connection(signal, retry = false) {
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
            await new Promise((resolve, reject) => {
                const onAbort = () => reject(signal?.reason);
                signal?.addEventListener("abort", onAbort, { once: true });
                (retry ? this.retries : this.waiters).push(() => {
                    signal?.removeEventListener("abort", onAbort);
                    resolve();
                });
            });
        }
    }
    async call(f, retry, signal, onAnswer) {
        for (let again = false;; again = true) {
            const cc = await this.connection(signal, again);
            try {
                const answer = cc.call(f, onAnswer && ((ok) => onAnswer(cc, ok)));
                if (!signal) {
                    return await answer;
                }
                return await abortable(answer, signal);
            }
            catch (err) {
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
    wake() {
        const w = [...this.retries, ...this.waiters];
        this.retries = [];
        this.waiters = [];
        for (const f of w) {
            f();
        }
    }
    setState(st, err) {
        if (this.st === st) {
            return;
        }
        this.st = st;
        try {
            if (err === undefined) {
                this.s.onStateChange(st);
            }
            else {
                this.s.onStateChange(st, err);
            }
        }
        catch (e) {
            this.s.onError(e instanceof Error ? e : new Error(String(e)));
        }
    }
    lost(cc) {
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
    async reconnect() {
        for (let attempt = 1; !this.closing; attempt++) {
            await new Promise((resolve) => {
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
            let cc;
            let expiresAt;
            try {
                ({ cc, expiresAt } = await this.dial());
                await this.resubscribe(cc);
            }
            catch (err) {
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
    async resubscribe(cc) {
        for (const s of [...this.live.values()]) {
            if (!s.wanted) {
                continue;
            }
            try {
                await s.subscribeOn(cc);
            }
            catch (err) {
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
                await cc.call({ op: "UNSUBSCRIBE", topic: s.topic }).catch(() => { });
            }
        }
        for (const s of [...this.subs.values()]) {
            if (!s.wanted) {
                continue;
            }
            try {
                await cc.call(s.subscribeFrame());
            }
            catch (err) {
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
                await cc.call({ op: "UNSUBSCRIBE", topic: s.topic, group: s.group }).catch(() => { });
                continue;
            }
            if (s.isPaused) {
                await cc.call({ op: "PAUSE", topic: s.topic, group: s.group }).catch((err) => {
                    if (!(err instanceof ProtocolError)) {
                        throw err;
                    }
                });
            }
        }
    }
    route(cc, f) {
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
                return;
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
            return;
        }
        s.push(cc, this.decode(ev), f.ctx?.attempt ?? 1, f.ctx?.ack_deadline_ms ?? 0);
    }
    decode(ev) {
        if (ev.payload_encoding !== "base64" || typeof ev.payload !== "string") {
            return ev;
        }
        let bytes;
        try {
            bytes = fromBase64(ev.payload);
        }
        catch {
            this.s.onError(new ConnectionError(`event ${ev.id}: a payload marked base64 that is not base64; delivered as sent`));
            return ev;
        }
        const { payload_encoding: _, ...rec } = ev;
        return { ...rec, payload: bytes };
    }
    unsolicited(err) {
        if (err.topic !== undefined) {
            if (err.group === undefined || err.group === "") {
                this.live.get(err.topic)?.end(err);
            }
            else {
                this.subs.get(subKey(err.topic, err.group))?.end(err);
            }
        }
        this.s.onError(err);
    }
    liveHost() {
        return {
            liveConnection: () => (this.cur && !this.cur.isDead() ? this.cur : undefined),
            remove: (s) => {
                if (this.live.get(s.topic) === s) {
                    this.live.delete(s.topic);
                }
            },
            report: (err) => this.s.onError(err),
            call: (f, retry, onAnswer) => this.call(f, retry, undefined, onAnswer),
        };
    }
    host() {
        return {
            liveConnection: () => (this.cur && !this.cur.isDead() ? this.cur : undefined),
            remove: (s) => {
                const key = subKey(s.topic, s.group);
                if (this.subs.get(key) === s) {
                    this.subs.delete(key);
                }
            },
            report: (err) => this.s.onError(err),
            call: (f, retry) => this.call(f, retry),
        };
    }
}
function abortable(p, signal) {
    if (signal.aborted) {
        return Promise.reject(signal.reason);
    }
    return new Promise((resolve, reject) => {
        const onAbort = () => reject(signal.reason);
        signal.addEventListener("abort", onAbort, { once: true });
        p.then((v) => {
            signal.removeEventListener("abort", onAbort);
            resolve(v);
        }, (e) => {
            signal.removeEventListener("abort", onAbort);
            reject(e);
        });
    });
}
function withTimeout(p, ms, msg) {
    let timer;
    const t = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new ConnectionError(msg)), Math.max(ms, 0));
    });
    return Promise.race([p, t]).finally(() => clearTimeout(timer));
}
