import { ConnectionError, ProtocolError } from "./errors.js";
import type { ClientFrame, ServerFrame } from "./frames.js";

/**
 * The part of the WebSocket API the client uses: the browsers' `WebSocket`, and the `ws`
 * package's `WebSocket` in Node, both fit.
 */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  // The event types differ between implementations; the client reads only
  // data (messages) and code/reason (close).
  /* eslint-disable @typescript-eslint/no-explicit-any */
  onopen: ((ev: any) => void) | null;
  onmessage: ((ev: any) => void) | null;
  onclose: ((ev: any) => void) | null;
  onerror: ((ev: any) => void) | null;
  /* eslint-enable @typescript-eslint/no-explicit-any */
}

/** A WebSocket constructor, such as the browsers' `WebSocket` or the `ws` package's. */
export type WebSocketConstructor = new (url: string) => WebSocketLike;

/** @internal What a frame of a connection that ended gets. */
export class LostError extends ConnectionError {}

interface Pending {
  resolve(f: ServerFrame): void;
  reject(err: Error): void;
  onAnswer: ((ok: ServerFrame) => void) | undefined;
}

const OPEN = 1;

/** @internal Handlers of what a connection receives without a caller waiting for it. */
export interface ConnectionSink {
  /** An EVENT or a GAP frame. */
  event(cc: Connection, f: ServerFrame): void;
  /** An ERR that answers no frame. */
  unsolicited(cc: Connection, err: ProtocolError): void;
  /** The frame could not be read. */
  malformed(cc: Connection, err: Error): void;
  lost(cc: Connection): void;
}

/**
 * @internal Connection is one WebSocket connection: it sends frames with a fresh `corr` each and
 * matches the answers, so that any number of calls can be in flight at once.
 */
export class Connection {
  readonly gen: number;
  private readonly pending = new Map<string, Pending>();
  private readonly decoder = new TextDecoder();
  private dead = false;
  private code: number | undefined;
  private why: string | undefined;
  private readonly endedP: Promise<void>;
  private endResolve!: () => void;

  private constructor(
    private readonly ws: WebSocketLike,
    gen: number,
    private readonly nextCorr: () => string,
    private readonly sink: ConnectionSink,
  ) {
    this.gen = gen;
    this.endedP = new Promise((resolve) => (this.endResolve = resolve));
    ws.onmessage = (ev: { data: unknown }) => this.receive(ev.data);
    ws.onclose = (ev: { code?: number; reason?: string }) => this.end(ev.code, ev.reason);
    ws.onerror = () => {
      // A close event follows; it says what happened.
    };
  }

  /**
   * open dials url and resolves once the socket is open; it rejects if it closes first or when
   * the timeout passes.
   */
  static open(
    Ctor: WebSocketConstructor,
    url: string,
    gen: number,
    timeoutMs: number,
    nextCorr: () => string,
    sink: ConnectionSink,
  ): Promise<Connection> {
    return new Promise((resolve, reject) => {
      let ws: WebSocketLike;
      try {
        ws = new Ctor(url);
      } catch (err) {
        reject(err instanceof Error ? err : new ConnectionError(`dial ${url}: ${String(err)}`));
        return;
      }
      const timer = setTimeout(() => {
        ws.onopen = ws.onclose = ws.onerror = null;
        try {
          ws.close();
        } catch {
          // closing a socket that is still connecting may throw; it is gone either way
        }
        reject(new ConnectionError(`dial ${url}: not open after ${timeoutMs} ms`));
      }, timeoutMs);
      ws.onerror = () => {
        // the close event follows
      };
      ws.onclose = (ev: { code?: number; reason?: string }) => {
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

  /** isDead reports whether the connection has ended (or is ending). */
  isDead(): boolean {
    return this.dead || this.ws.readyState !== OPEN;
  }

  /** ended resolves when the connection has ended. */
  get ended(): Promise<void> {
    return this.endedP;
  }

  /** closeCode and closeReason are the server's close frame, if it sent one. */
  get closeCode(): number | undefined {
    return this.code;
  }
  get closeReason(): string | undefined {
    return this.why;
  }

  /**
   * call sends f with a new corr and resolves with the OK that answers it; an ERR rejects with a
   * {@link ProtocolError}, the end of the connection with a {@link LostError}. onAnswer, if given,
   * sees the OK as it is read, before any frame that follows it on the connection is handled.
   */
  call(f: ClientFrame | string, onAnswer?: (ok: ServerFrame) => void): Promise<ServerFrame> {
    if (this.isDead()) {
      return Promise.reject(this.lostError());
    }
    const corr = this.nextCorr();
    // A string is a frame encoded already (a JSON object): corr goes in front.
    const data = typeof f === "string" ? `{"corr":"${corr}",${f.slice(1)}` : JSON.stringify({ ...f, corr });
    return new Promise((resolve, reject) => {
      this.pending.set(corr, { resolve, reject, onAnswer });
      try {
        this.ws.send(data);
      } catch (err) {
        this.pending.delete(corr);
        reject(err instanceof Error ? err : new ConnectionError(String(err)));
      }
    });
  }

  /** close closes the socket with a normal close. */
  close(code = 1000, reason = ""): void {
    if (this.dead) {
      return;
    }
    try {
      this.ws.close(code, reason);
    } catch {
      this.end(undefined, undefined);
    }
  }

  /** inFlight is the number of calls waiting for their answer. */
  get inFlight(): number {
    return this.pending.size;
  }

  lostError(): LostError {
    return new LostError("the connection was lost", this.code, this.why);
  }

  private receive(data: unknown): void {
    let text: string;
    if (typeof data === "string") {
      text = data;
    } else if (data instanceof ArrayBuffer || ArrayBuffer.isView(data)) {
      text = this.decoder.decode(data);
    } else {
      this.sink.malformed(this, new ConnectionError(`a message of an unexpected type (${typeof data}) from the server`));
      return;
    }
    let f: ServerFrame;
    try {
      f = JSON.parse(text) as ServerFrame;
    } catch (err) {
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
            } catch (err) {
              this.sink.malformed(this, err instanceof Error ? err : new Error(String(err)));
            }
            p.resolve(f);
          } else {
            p.reject(new ProtocolError(f.code ?? "internal", f.msg ?? "", f.topic, f.group));
          }
        } else if (f.op === "ERR") {
          this.sink.unsolicited(this, new ProtocolError(f.code ?? "internal", f.msg ?? "", f.topic, f.group));
        }
        return;
      }
      case "EVENT":
      case "GAP":
        this.sink.event(this, f);
        return;
    }
    // An op this client does not know: a later version of the protocol may add some.
  }

  private end(code: number | undefined, reason: string | undefined): void {
    if (this.dead) {
      return;
    }
    this.dead = true;
    // 1005 (no status) and 1006 (abnormal) are made up locally: no close frame came.
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
