/**
 * The error codes of ERR frames (docs/PROTOCOL.md, "Error codes").
 */
export type ErrorCode =
  | "bad_json"
  | "bad_frame"
  | "unauthorized"
  | "auth_failed"
  | "token_expired"
  | "forbidden"
  | "rate_limited"
  | "too_large"
  | "already_subscribed"
  | "not_subscribed"
  | "unknown_id"
  | "publish_failed"
  | "ack_failed"
  | "internal";

/** Every code of {@link ErrorCode}, for checks and exhaustive switches. */
export const errorCodes: readonly ErrorCode[] = [
  "bad_json",
  "bad_frame",
  "unauthorized",
  "auth_failed",
  "token_expired",
  "forbidden",
  "rate_limited",
  "too_large",
  "already_subscribed",
  "not_subscribed",
  "unknown_id",
  "publish_failed",
  "ack_failed",
  "internal",
];

/**
 * Close codes of the gateway (docs/PROTOCOL.md), as {@link ConnectionError.closeCode} reports them.
 */
export const CloseCode = {
  Normal: 1000,
  GoingAway: 1001,
  InvalidUTF8: 1007,
  WriteTimeout: 1008,
  TooLarge: 1009,
  TokenExpired: 4401,
  TooManyFailedAuth: 4403,
  AuthTimeout: 4408,
  /** A live subscriber that fell behind with slow "close": the client resumes after its position. */
  SlowSubscriber: 4429,
  PingTimeout: 4504,
} as const;

/** The base class of every error this package throws or reports. */
export class PromlibError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * A refusal by the server: the code and message of an ERR frame. `topic` and `group` are set when
 * the server ended a subscription by itself (after a re-AUTH whose token may not hold it).
 */
export class ProtocolError extends PromlibError {
  readonly code: ErrorCode | (string & {});
  readonly topic: string | undefined;
  readonly group: string | undefined;

  constructor(code: string, msg: string, topic?: string, group?: string) {
    super(msg ? `promlib: ${code}: ${msg}` : `promlib: ${code}`);
    this.code = code;
    this.topic = topic;
    this.group = group;
  }
}

/**
 * The connection a call or a delivery depended on ended. `closeCode` and `reason` are the
 * server's when it closed the connection (see {@link CloseCode}); both are undefined when the
 * connection dropped without a close frame.
 */
export class ConnectionError extends PromlibError {
  readonly closeCode: number | undefined;
  readonly reason: string | undefined;

  constructor(message: string, closeCode?: number, reason?: string) {
    const detail = closeCode === undefined ? "" : ` (close ${closeCode}${reason ? ` "${reason}"` : ""})`;
    super(`promlib: ${message}${detail}`);
    this.closeCode = closeCode;
    this.reason = reason;
  }
}

/** The client, or the subscription, was closed by its owner. */
export class ClosedError extends PromlibError {
  constructor(what = "client") {
    super(`promlib: the ${what} is closed`);
  }
}

/** An argument the client refuses before sending anything; the message names it. */
export class InvalidArgumentError extends PromlibError {}

/** Reports whether err is a {@link ProtocolError} with the given code. */
export function isProtocolError(err: unknown, code?: ErrorCode): err is ProtocolError {
  return err instanceof ProtocolError && (code === undefined || err.code === code);
}
