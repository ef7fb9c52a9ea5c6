export const errorCodes = [
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
export const CloseCode = {
    Normal: 1000,
    GoingAway: 1001,
    InvalidUTF8: 1007,
    WriteTimeout: 1008,
    TooLarge: 1009,
    TokenExpired: 4401,
    TooManyFailedAuth: 4403,
    AuthTimeout: 4408,
    SlowSubscriber: 4429,
    PingTimeout: 4504,
};
export class PromlibError extends Error {
    constructor(message, options) {
        super(message, options);
        this.name = new.target.name;
    }
}
export class ProtocolError extends PromlibError {
    code;
    topic;
    group;
    constructor(code, msg, topic, group) {
        super(msg ? `promlib: ${code}: ${msg}` : `promlib: ${code}`);
        this.code = code;
        this.topic = topic;
        this.group = group;
    }
}
export class ConnectionError extends PromlibError {
    closeCode;
    reason;
    constructor(message, closeCode, reason) {
        const detail = closeCode === undefined ? "" : ` (close ${closeCode}${reason ? ` "${reason}"` : ""})`;
        super(`promlib: ${message}${detail}`);
        this.closeCode = closeCode;
        this.reason = reason;
    }
}
export class ClosedError extends PromlibError {
    constructor(what = "client") {
        super(`promlib: the ${what} is closed`);
    }
}
export class InvalidArgumentError extends PromlibError {
}
export function isProtocolError(err, code) {
    return err instanceof ProtocolError && (code === undefined || err.code === code);
}
