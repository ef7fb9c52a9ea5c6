import { ConnectionError, ProtocolError } from "./errors.js";
export class LostError extends ConnectionError {
}
const OPEN = 1;
export class Connection {
    ws;
    nextCorr;
    sink;
    gen;
    pending = new Map();
    decoder = new TextDecoder();
    dead = false;
    code;
    why;
    endedP;
    endResolve;
    constructor(ws, gen, nextCorr, sink) {
        this.ws = ws;
        this.nextCorr = nextCorr;
        this.sink = sink;
        this.gen = gen;
        this.endedP = new Promise((resolve) => (this.endResolve = resolve));
        ws.onmessage = (ev) => this.receive(ev.data);
        ws.onclose = (ev) => this.end(ev.code, ev.reason);
        ws.onerror = () => {
        };
    }
    static open(Ctor, url, gen, timeoutMs, nextCorr, sink) {
        return new Promise((resolve, reject) => {
            let ws;
            try {
                ws = new Ctor(url);
            }
            catch (err) {
                reject(err instanceof Error ? err : new ConnectionError(`dial ${url}: ${String(err)}`));
                return;
            }
            const timer = setTimeout(() => {
                ws.onopen = ws.onclose = ws.onerror = null;
                try {
                    ws.close();
                }
                catch {
                }
                reject(new ConnectionError(`dial ${url}: not open after ${timeoutMs} ms`));
            }, timeoutMs);
            ws.onerror = () => {
            };
            ws.onclose = (ev) => {
                clearTimeout(timer);
                reject(new ConnectionError(`dial ${url}: the connection closed before it opened`, ev.code, ev.reason));
            };
            ws.onopen = () => {
                clearTimeout(timer);
                ws.onopen = null;
                resolve(new Connection(ws, gen, nextCorr, sink));
            };
        });
    }
    isDead() {
        return this.dead || this.ws.readyState !== OPEN;
    }
    get ended() {
        return this.endedP;
    }
    get closeCode() {
        return this.code;
    }
    get closeReason() {
        return this.why;
    }
    call(f, onAnswer) {
        if (this.isDead()) {
            return Promise.reject(this.lostError());
        }
        const corr = this.nextCorr();
        const data = typeof f === "string" ? `{"corr":"${corr}",${f.slice(1)}` : JSON.stringify({ ...f, corr });
        return new Promise((resolve, reject) => {
            this.pending.set(corr, { resolve, reject, onAnswer });
            try {
                this.ws.send(data);
            }
            catch (err) {
                this.pending.delete(corr);
                reject(err instanceof Error ? err : new ConnectionError(String(err)));
            }
        });
    }
    close(code = 1000, reason = "") {
        if (this.dead) {
            return;
        }
        try {
            this.ws.close(code, reason);
        }
        catch {
            this.end(undefined, undefined);
        }
    }
    get inFlight() {
        return this.pending.size;
    }
    lostError() {
        return new LostError("the connection was lost", this.code, this.why);
    }
    receive(data) {
        let text;
        if (typeof data === "string") {
            text = data;
        }
        else if (data instanceof ArrayBuffer || ArrayBuffer.isView(data)) {
            text = this.decoder.decode(data);
        }
        else {
            this.sink.malformed(this, new ConnectionError(`a message of an unexpected type (${typeof data}) from the server`));
            return;
        }
        let f;
        try {
            f = JSON.parse(text);
        }
        catch (err) {
            this.sink.malformed(this, new ConnectionError(`a frame that is not JSON from the server: ${String(err)}`));
            return;
        }
        if (f === null || typeof f !== "object" || typeof f.op !== "string") {
            this.sink.malformed(this, new ConnectionError("a frame without op from the server"));
            return;
        }
        switch (f.op) {
            case "OK":
            case "ERR": {
                const p = f.corr === undefined ? undefined : this.pending.get(String(f.corr));
                if (p) {
                    this.pending.delete(String(f.corr));
                    if (f.op === "OK") {
                        try {
                            p.onAnswer?.(f);
                        }
                        catch (err) {
                            this.sink.malformed(this, err instanceof Error ? err : new Error(String(err)));
                        }
                        p.resolve(f);
                    }
                    else {
                        p.reject(new ProtocolError(f.code ?? "internal", f.msg ?? "", f.topic, f.group));
                    }
                }
                else if (f.op === "ERR") {
                    this.sink.unsolicited(this, new ProtocolError(f.code ?? "internal", f.msg ?? "", f.topic, f.group));
                }
                return;
            }
            case "EVENT":
            case "GAP":
                this.sink.event(this, f);
                return;
        }
    }
    end(code, reason) {
        if (this.dead) {
            return;
        }
        this.dead = true;
        if (code !== undefined && code !== 1005 && code !== 1006) {
            this.code = code;
            this.why = reason;
        }
        this.ws.onmessage = this.ws.onclose = this.ws.onerror = null;
        const err = this.lostError();
        const pending = [...this.pending.values()];
        this.pending.clear();
        for (const p of pending) {
            p.reject(err);
        }
        this.endResolve();
        this.sink.lost(this);
    }
}
