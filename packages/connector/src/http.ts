/**
 * One HTTP exchange with the backend, and strict reading of its answer with the zod validators
 * generated from spec/: a body outside the spec is a `ResponseValidationError`, an error answer
 * becomes the class of its problem `code`.
 */
import type { Problem } from "@understudy/protocol";
import { Problem as ProblemSchema } from "@understudy/protocol/zod";
import type { z } from "zod";

import type { RetryConfig } from "./config.js";
import { Aborted, ProblemError, ResponseValidationError, problemClassOf } from "./errors.js";

/** What the connector reports about each answer and each wait (tests, logs, progress bars). */
export type ConnectorEvent =
  | {
      readonly type: "response";
      readonly operation: string;
      readonly method: string;
      readonly url: string;
      /** The HTTP status, or `"network_error"` when no answer came. */
      readonly status: number | "network_error";
      /** The problem code of an error answer. */
      readonly code?: string;
    }
  | {
      readonly type: "wait";
      readonly operation: string;
      readonly reason: WaitReason;
      readonly seconds: number;
      readonly attempt: number;
      readonly subject?: string;
    };

/** Why the connector waits before its next attempt. */
export type WaitReason =
  | "pending"
  | "not_started"
  | "busy"
  | "network_error"
  | "provisioning"
  | "rate_limited"
  | "no_device"
  | "closing";

/** One request of an operation: a path relative to the base URL, or a same-origin URL. */
export interface Send {
  readonly method: "GET" | "POST" | "DELETE";
  readonly url: string;
  readonly body?: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

/** An answer: its status, headers and body text, read in full. */
export interface Reply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

/** What every operation needs: the bounds, the clock, the transport and the caller's signal. */
export interface Context {
  readonly baseUrl: URL;
  readonly retry: RetryConfig;
  /** Monotonic seconds. */
  readonly clock: () => number;
  readonly sleep: (seconds: number, signal?: AbortSignal) => Promise<void>;
  readonly exchange: (send: Send, operation: string, signal?: AbortSignal) => Promise<Reply | NetworkError>;
  readonly emit: (event: ConnectorEvent) => Promise<void>;
}

/** A request that got no answer: the connection failed, or the per-request timeout passed. */
export class NetworkError {
  constructor(readonly cause: unknown) {}
}

/** Throws `Aborted` (carrying `commandId`) when `signal` has fired. */
export function checkAborted(signal: AbortSignal | undefined, what: string, commandId?: string): void {
  if (signal?.aborted) {
    throw new Aborted(`${what} was aborted`, commandId, { cause: signal.reason });
  }
}

/** `location` resolved against the base URL, or `fallback` when it points at another origin. */
export function sameOrigin(ctx: Context, location: string | null, fallback: string): string {
  // The API key travels with every request, so a Location on another origin is never followed.
  if (!location) return fallback;
  let target: URL;
  try {
    target = new URL(location, ctx.baseUrl);
  } catch {
    return fallback;
  }
  return target.origin === ctx.baseUrl.origin ? target.toString() : fallback;
}

/** The body of `reply` validated by `schema`. */
export function parse<S extends z.ZodType>(reply: Reply, schema: S, name: string, operation: string): z.output<S> {
  let json: unknown;
  try {
    json = JSON.parse(reply.text);
  } catch {
    throw new ResponseValidationError(`the body is not JSON (expected ${name})`, operation, reply.status);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    // Name the fields and the rules they broke, never the values: a body can carry page text.
    const broken = parsed.error.issues
      .slice(0, 5)
      .map((issue) => `${issue.path.join("/") || "(body)"}: ${issue.code}`)
      .join("; ");
    throw new ResponseValidationError(`the body does not match ${name} (${broken})`, operation, reply.status);
  }
  return parsed.data;
}

const PROBLEM_TYPES = new Set(["application/problem+json", "application/json"]);

/** The error of an error answer: the class of its problem `code`. */
export function problem(reply: Reply, operation: string): ProblemError {
  const mediaType = (reply.headers.get("content-type") ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  if (!PROBLEM_TYPES.has(mediaType)) {
    throw new ResponseValidationError(
      `expected application/problem+json, got ${mediaType || "no content type"}`,
      operation,
      reply.status,
    );
  }
  const body: Problem = parse(reply, ProblemSchema, "Problem", operation);
  if (body.status !== reply.status) {
    throw new ResponseValidationError(`the problem says status ${body.status}`, operation, reply.status);
  }
  const Class = problemClassOf(body.code);
  return new Class(body, retryAfter(reply));
}

/** `Retry-After` in seconds, when the answer carries the integer form the spec uses. */
export function retryAfter(reply: Reply): number | undefined {
  const value = (reply.headers.get("retry-after") ?? "").trim();
  return /^\d+$/.test(value) ? Number(value) : undefined;
}

/** `Retry-After` in seconds, or `fallback` when the answer has none. */
export function waitSeconds(reply: Reply, fallback: number): number {
  return retryAfter(reply) ?? fallback;
}

/** Wait `seconds` for `reason`, telling the event hook first. */
export async function waiting(
  ctx: Context,
  seconds: number,
  event: { operation: string; reason: WaitReason; attempt: number; subject?: string },
  signal: AbortSignal | undefined,
): Promise<void> {
  await ctx.emit({ type: "wait", seconds, ...event });
  // On command operations the subject is the command id: the caller polls it after an abort.
  const commandId = event.operation.endsWith("Command") ? event.subject : undefined;
  try {
    await ctx.sleep(seconds, signal);
  } catch (error) {
    if (!signal?.aborted) throw error;
    throw new Aborted(`${event.operation} was aborted while waiting`, commandId, { cause: signal.reason });
  }
}
