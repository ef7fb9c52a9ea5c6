export { PromClient } from "./client.js";
export { CloseCode, ClosedError, ConnectionError, InvalidArgumentError, PromlibError, ProtocolError, errorCodes, isProtocolError } from "./errors.js";
export { LiveSubscription } from "./live.js";
export { Subscription } from "./subscription.js";
export { jwtExpiry } from "./token.js";
