/** A JSON value, as payloads are on the wire. */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

/**
 * A stored event as the server sends it in EVENT frames; `T` is the payload's type, which the
 * client takes on trust (it is the JSON the publisher sent).
 */
export interface EventRecord<T = unknown> {
  id: string;
  seq: number;
  /** Milliseconds since the Unix epoch. */
  ts: number;
  topic: string;
  key?: string;
  partition?: number;
  headers?: Record<string, string>;
  /**
   * The payload: the JSON the publisher sent, or, for an event whose content_type is not JSON
   * (a binary payload), its bytes as a Uint8Array (the client decodes the frame's base64).
   */
  payload: T;
  /** The payload's media type, for a payload that is not JSON (e.g. "application/octet-stream"). */
  content_type?: string;
  caused_by?: string[];
  tags?: string[];
  sid?: string;
}

/** Options of PUBLISH. */
export interface PublishOptions {
  /**
   * The event's id. Without one the client makes one (a UUIDv7), so that a publish cut off by a
   * lost connection is sent again after the reconnect without being stored twice.
   */
  id?: string;
  /** Partition key: events of one key keep their order. */
  key?: string;
  headers?: Record<string, string>;
  tags?: string[];
  /** Ids of the events that caused this one. */
  caused_by?: string[];
  /** Session or stream id. */
  sid?: string;
  /** The event's time in milliseconds since the Unix epoch (the server's clock by default). */
  ts?: number;
  /**
   * The media type of a binary payload (a Uint8Array or ArrayBuffer, sent as base64); default
   * "application/octet-stream". JSON payloads need none.
   */
  content_type?: string;
  /** Aborts the wait for the answer (the frame may have been sent already). */
  signal?: AbortSignal;
}

/** The answer to a publish: the stored event's id and seq. */
export interface PublishResult {
  id: string;
  seq: number;
}

/** Where a new group starts reading a topic (a group that exists keeps its cursor). */
export type StartFrom =
  | "latest"
  | "earliest"
  | { ts: number }
  | { seq: number }
  | { afterId: string };

/** @internal The opts object of a SUBSCRIBE frame. */
export interface SubscribeWireOpts {
  from?: string;
  ts?: number;
  seq?: number;
  afterId?: string;
  ackTimeoutMs?: number;
  maxInFlight?: number;
  maxAttempts?: number;
  keyOrdered?: boolean;
  maxPerKey?: number;
}

/** @internal A frame the client sends. */
export interface ClientFrame {
  op: string;
  corr?: string;
  token?: string;
  topic?: string;
  group?: string;
  id?: string;
  attempt?: number;
  reason?: string;
  extend_ms?: number;
  payload?: unknown;
  opts?: Record<string, unknown>;
}

/** @internal A frame the server sends. */
export interface ServerFrame {
  op: string;
  corr?: string | number;
  id?: string;
  seq?: number;
  code?: string;
  msg?: string;
  topic?: string;
  group?: string;
  event?: EventRecord & { payload_encoding?: string };
  ctx?: { attempt?: number; ack_deadline_ms?: number };
  /** The OK of a live SUBSCRIBE with since: whether the topic still held the event after it. */
  recovered?: boolean;
  /** A GAP frame: the first and last seq a live subscription does not deliver, and why. */
  from?: number;
  to?: number;
  reason?: string;
}
