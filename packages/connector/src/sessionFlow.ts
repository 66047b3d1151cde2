/**
 * The policies of the session and device operations (the Python connector's `_session_flow.py`).
 *
 * An unattended creation carries one `Idempotency-Key`, drawn once per logical call, and is
 * repeated with the same key and body after a network error or `503 no_device_available`; a `202`
 * (or a replay still provisioning) is followed by polling `Location` after `Retry-After` until
 * the session leaves `allocating` / `provisioning` (a `429 rate_limited` on such a poll waits and
 * polls again). An attended creation has no key, so a network error is not repeated: it could
 * create a second session.
 */
import type { DeviceList, Session, SessionTombstone, UnattendedSessionRequest } from "@understudy/protocol";
import {
  DeviceList as DeviceListSchema,
  Session as SessionSchema,
  SessionTombstone as TombstoneSchema,
} from "@understudy/protocol/zod";

import { backoff } from "./config.js";
import {
  BackendUnreachable,
  CloseTimeout,
  NoDeviceAvailable,
  ProvisioningTimeout,
  RateLimited,
  SessionNotFound,
  SessionTerminal,
} from "./errors.js";
import type { Context, Reply, Send } from "./http.js";
import { NetworkError, checkAborted, parse, problem, sameOrigin, waitSeconds, waiting } from "./http.js";

const PROVISIONING = new Set(["allocating", "provisioning"]);
// The extension acknowledges a close in about 100 ms: poll soon and often at first, then back off.
const CLOSE_POLL_INITIAL_S = 0.025;
const CLOSE_POLL_MAX_S = 0.5;

/** The path of one session. */
export function sessionPath(sessionId: string): string {
  return `/v1/sessions/${encodeURIComponent(sessionId)}`;
}

/** Create a session (attended when `body` is undefined) and wait while it provisions. */
/**
 * What an unfinished creation left on the backend, for the cleanup of an interrupted open:
 * `sessionId` is the session a reply named; `unanswered` says a `POST` went out and no reply to it
 * came back (aborted or cut off), so the backend may hold a session nobody has heard of.
 */
export interface CreateProgress {
  sessionId?: string;
  unanswered: boolean;
}

export async function createSession(
  ctx: Context,
  body: UnattendedSessionRequest | undefined,
  idempotencyKey: string | undefined,
  options: { timeout?: number; signal?: AbortSignal; progress?: CreateProgress },
): Promise<Session> {
  const progress = options.progress ?? { unanswered: false };
  const { retry } = ctx;
  const { signal } = options;
  const limit = options.timeout ?? retry.createTimeout;
  const deadline = ctx.clock() + limit;
  const headers: Record<string, string> = idempotencyKey === undefined ? {} : { "Idempotency-Key": idempotencyKey };
  const post: Send = { method: "POST", url: "/v1/sessions", body, headers };
  let current = post;
  let created: string | undefined;
  let attempt = 0;
  let failures = 0;
  for (;;) {
    attempt += 1;
    checkAborted(signal, "createSession");
    const operation = current === post ? "createSession" : "getSession";
    if (current === post && created === undefined) progress.unanswered = true;
    const reply = await ctx.exchange(current, operation, signal);
    if (current === post && !(reply instanceof NetworkError)) progress.unanswered = false;
    if (reply instanceof NetworkError) {
      failures += 1;
      const delay = backoff(retry, failures);
      const repeatable = current !== post || idempotencyKey !== undefined;
      if (!repeatable || failures > retry.networkAttempts || ctx.clock() + delay > deadline) {
        const why = !repeatable
          ? " (an attended creation has no idempotency key, so it is not repeated)"
          : created === undefined
            ? ""
            : `; session ${created} may still be provisioning: delete it`;
        throw new BackendUnreachable(`${operation}: ${ctx.baseUrl.origin} could not be reached${why}`, undefined, {
          cause: reply.cause,
        });
      }
      await waiting(ctx, delay, { operation, reason: "network_error", attempt: attempt + 1, ...subject(created) }, signal);
      continue;
    }
    failures = 0;
    if (reply.status === 200 || reply.status === 201 || reply.status === 202) {
      const session: Session = parse(reply, SessionSchema, "Session", operation);
      created = progress.sessionId = session.sessionId;
      if (reply.status !== 202 && !PROVISIONING.has(session.status)) return session;
      const delay = waitSeconds(reply, retry.defaultRetryAfter);
      if (ctx.clock() + delay > deadline) throw new ProvisioningTimeout(session.sessionId, limit);
      await waiting(ctx, delay, { operation, reason: "provisioning", attempt: attempt + 1, subject: created }, signal);
      current = { method: "GET", url: sameOrigin(ctx, reply.headers.get("location"), sessionPath(created)) };
      continue;
    }
    if (reply.status === 410 && current !== post) {
      throw terminalError(parse(reply, TombstoneSchema, "SessionTombstone", operation));
    }
    const error = problem(reply, operation);
    if (error instanceof RateLimited && created !== undefined && current !== post) {
      // The session exists and keeps provisioning: wait, then poll again. Throwing would leave the
      // caller without the id of a session it must delete.
      const delay = error.retryAfter ?? retry.defaultRetryAfter;
      if (ctx.clock() + delay > deadline) throw new ProvisioningTimeout(created, limit);
      await waiting(ctx, delay, { operation, reason: "rate_limited", attempt: attempt + 1, subject: created }, signal);
      continue;
    }
    if (error instanceof NoDeviceAvailable && current === post) {
      const delay = error.retryAfter ?? retry.defaultRetryAfter;
      if (ctx.clock() + delay > deadline) throw error;
      await waiting(ctx, delay, { operation, reason: "no_device", attempt: attempt + 1 }, signal);
      continue;
    }
    throw error;
  }
}

function subject(id: string | undefined): { subject?: string } {
  return id === undefined ? {} : { subject: id };
}

/** The live session, or its tombstone once it ended (`410`). */
export async function getSession(
  ctx: Context,
  sessionId: string,
  signal?: AbortSignal,
): Promise<Session | SessionTombstone> {
  const reply = await repeatable(ctx, { method: "GET", url: sessionPath(sessionId) }, "getSession", signal);
  if (reply.status === 200) return parse(reply, SessionSchema, "Session", "getSession");
  if (reply.status === 410) return parse(reply, TombstoneSchema, "SessionTombstone", "getSession");
  throw problem(reply, "getSession");
}

/** Start or confirm cleanup: the `closing` session (`202`) or its tombstone (`200`). */
export async function deleteSession(
  ctx: Context,
  sessionId: string,
  signal?: AbortSignal,
): Promise<Session | SessionTombstone> {
  // Deleting again is safe (202 while closing, 200 once terminal), so a network error repeats.
  const reply = await repeatable(ctx, { method: "DELETE", url: sessionPath(sessionId) }, "deleteSession", signal);
  if (reply.status === 202) return parse(reply, SessionSchema, "Session", "deleteSession");
  if (reply.status === 200) return parse(reply, TombstoneSchema, "SessionTombstone", "deleteSession");
  throw problem(reply, "deleteSession");
}

/**
 * Delete what a creation that did not return (aborted, cut off) may have left. A session a reply
 * named is deleted. When the `POST` went out and no reply came back, the request is repeated once
 * with the same `Idempotency-Key`, which names that session (or creates one, if the first never
 * arrived), and that session is deleted. An attended request has no key, so it is not repeated.
 * Returns the id deleted, if any.
 */
export async function abandonCreate(
  ctx: Context,
  progress: CreateProgress,
  body: UnattendedSessionRequest | undefined,
  idempotencyKey: string | undefined,
  signal?: AbortSignal,
): Promise<string | undefined> {
  let sessionId = progress.sessionId;
  if (sessionId === undefined && progress.unanswered && idempotencyKey !== undefined) {
    const replay: Send = { method: "POST", url: "/v1/sessions", body, headers: { "Idempotency-Key": idempotencyKey } };
    const reply = await ctx.exchange(replay, "createSession", signal);
    if (!(reply instanceof NetworkError) && [200, 201, 202].includes(reply.status)) {
      sessionId = parse(reply, SessionSchema, "Session", "createSession").sessionId;
    }
  }
  if (sessionId === undefined) return undefined;
  try {
    await deleteSession(ctx, sessionId, signal);
  } catch (error) {
    if (error instanceof SessionNotFound) return undefined;
    throw error;
  }
  return sessionId;
}

/** This tenant's devices with health and capacity. */
export async function listDevices(ctx: Context, signal?: AbortSignal): Promise<DeviceList> {
  const reply = await repeatable(ctx, { method: "GET", url: "/v1/devices" }, "listDevices", signal);
  if (reply.status === 200) return parse(reply, DeviceListSchema, "DeviceList", "listDevices");
  throw problem(reply, "listDevices");
}

/**
 * Poll the session until it is terminal: its tombstone, or undefined once it is gone (`404`).
 * Throws `CloseTimeout` when it is still not terminal after `timeout` seconds.
 */
export async function waitTerminal(
  ctx: Context,
  sessionId: string,
  options: { timeout?: number; signal?: AbortSignal; pollFirst?: boolean },
): Promise<SessionTombstone | undefined> {
  const limit = options.timeout ?? ctx.retry.closeTimeout;
  const deadline = ctx.clock() + limit;
  let delay = CLOSE_POLL_INITIAL_S;
  let attempt = 1;
  const wait = (): Promise<void> =>
    waiting(ctx, delay, { operation: "getSession", reason: "closing", attempt, subject: sessionId }, options.signal);
  if (options.pollFirst === false) await wait();
  for (;;) {
    let current: Session | SessionTombstone | undefined;
    try {
      current = await getSession(ctx, sessionId, options.signal);
    } catch (error) {
      if (error instanceof SessionNotFound) return undefined;
      if (!(error instanceof RateLimited)) throw error;
      delay = Math.max(delay, error.retryAfter ?? ctx.retry.defaultRetryAfter);
    }
    if (current !== undefined && isTombstone(current)) return current;
    if (ctx.clock() + delay > deadline) {
      throw new CloseTimeout(sessionId, limit, current === undefined ? "closing" : current.status);
    }
    attempt += 1;
    await wait();
    delay = Math.min(delay * 2, CLOSE_POLL_MAX_S);
  }
}

/** Whether `value` is a tombstone (an ended session) rather than a live session. */
export function isTombstone(value: Session | SessionTombstone): value is SessionTombstone {
  return "endedAt" in value;
}

/** `SessionTerminal` for a session whose tombstone the backend returned. */
export function terminalError(tombstone: SessionTombstone): SessionTerminal {
  const error = new SessionTerminal({
    type: "https://understudy.dev/problems/session_terminal",
    title: "Session terminal",
    status: 410,
    code: "session_terminal",
    detail: `the session is ${tombstone.status} (${tombstone.reason})`,
  });
  error.tombstone = tombstone;
  return error;
}

async function repeatable(ctx: Context, send: Send, operation: string, signal?: AbortSignal): Promise<Reply> {
  let failures = 0;
  for (;;) {
    checkAborted(signal, operation);
    const reply = await ctx.exchange(send, operation, signal);
    if (!(reply instanceof NetworkError)) return reply;
    failures += 1;
    if (failures > ctx.retry.networkAttempts) {
      throw new BackendUnreachable(`${operation}: ${ctx.baseUrl.origin} could not be reached`, undefined, {
        cause: reply.cause,
      });
    }
    await waiting(ctx, backoff(ctx.retry, failures), { operation, reason: "network_error", attempt: failures + 1 }, signal);
  }
}
