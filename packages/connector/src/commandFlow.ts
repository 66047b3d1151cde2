/**
 * The outcome rules of `submitCommand` and `pollCommand`, written once (the Python connector's
 * `_command_flow.py`, row for row):
 *
 * | Answer | What the connector does |
 * |---|---|
 * | `200` | Return the durable outcome (`succeeded` or `failed`) |
 * | `202` (`poll_same_command`) | Poll `Location` after `Retry-After`, until terminal or the timeout |
 * | `409 command_outcome_unknown` | Throw `CommandOutcomeUnknown` at once; never retried |
 * | `409 command_id_conflict` | Throw `CommandIdConflict` |
 * | `504 command_not_started` / `command_timed_out` | Resubmit the same id and body, with backoff |
 * | `429 session_busy` / `rate_limited` | Wait `Retry-After`, resubmit the same id and body |
 * | `503 session_unavailable` | Wait `Retry-After`, resubmit the same id and body |
 * | `410 session_terminal`, `426`, others | Throw the problem |
 * | network error | Repeat the same request (same id: the backend deduplicates), with backoff |
 */
import type { CommandOutcome, CommandPending, CommandRequest } from "@understudy/protocol";
import { CommandOutcome as OutcomeSchema, CommandPending as PendingSchema } from "@understudy/protocol/zod";

import { backoff } from "./config.js";
import {
  BackendUnreachable,
  CommandNotStarted,
  CommandTimedOut,
  OutcomeTimeout,
  RateLimited,
  ResponseValidationError,
  SessionBusy,
  SessionUnavailable,
} from "./errors.js";
import type { Context, Send } from "./http.js";
import { NetworkError, checkAborted, parse, problem, sameOrigin, waitSeconds, waiting } from "./http.js";

/** The submitCommand path of a session. */
export function commandsPath(sessionId: string): string {
  return `/v1/sessions/${encodeURIComponent(sessionId)}/commands`;
}

/** Submit `request` and follow the outcome rules until a durable outcome. */
export function runCommand(
  ctx: Context,
  sessionId: string,
  request: CommandRequest,
  options: { timeout?: number; signal?: AbortSignal },
): Promise<CommandOutcome> {
  const submit: Send = { method: "POST", url: commandsPath(sessionId), body: request };
  return follow(ctx, sessionId, request.command.name, request.commandId, submit, options);
}

/**
 * Poll a command already submitted until a durable outcome. A `504` while polling is thrown:
 * without the original body the command cannot be resubmitted.
 */
export function pollCommand(
  ctx: Context,
  sessionId: string,
  commandId: string,
  options: { timeout?: number; signal?: AbortSignal },
): Promise<CommandOutcome> {
  return follow(ctx, sessionId, undefined, commandId, undefined, options);
}

async function follow(
  ctx: Context,
  sessionId: string,
  name: string | undefined,
  commandId: string,
  submit: Send | undefined,
  options: { timeout?: number; signal?: AbortSignal },
): Promise<CommandOutcome> {
  const { retry } = ctx;
  const { signal } = options;
  const limit = options.timeout ?? retry.commandTimeout;
  const deadline = ctx.clock() + limit;
  const poll: Send = { method: "GET", url: `${commandsPath(sessionId)}/${encodeURIComponent(commandId)}` };
  let current = submit ?? poll;
  let attempt = 0;
  let resubmits = 0;
  let networkFailures = 0;
  for (;;) {
    attempt += 1;
    checkAborted(signal, `command ${commandId}`, commandId);
    const operation = current === submit ? "submitCommand" : "pollCommand";
    const reply = await ctx.exchange(current, operation, signal);
    if (reply instanceof NetworkError) {
      networkFailures += 1;
      const delay = backoff(retry, networkFailures);
      if (networkFailures > retry.networkAttempts || ctx.clock() + delay > deadline) {
        throw new BackendUnreachable(
          `${operation}: ${ctx.baseUrl.origin} could not be reached; the command may have been ` +
            `admitted: poll ${commandId} or resubmit it with the same id`,
          commandId,
          { cause: reply.cause },
        );
      }
      await waiting(ctx, delay, { operation, reason: "network_error", attempt: attempt + 1, subject: commandId }, signal);
      continue;
    }
    networkFailures = 0;
    if (reply.status === 200) {
      const outcome: CommandOutcome = parse(reply, OutcomeSchema, "CommandOutcome", operation);
      checkId(outcome.commandId, commandId, operation, 200);
      return outcome;
    }
    if (reply.status === 202) {
      const pending: CommandPending = parse(reply, PendingSchema, "CommandPending", operation);
      checkId(pending.commandId, commandId, operation, 202);
      const delay = waitSeconds(reply, retry.defaultRetryAfter);
      if (ctx.clock() + delay > deadline) throw new OutcomeTimeout(name ?? pending.name, commandId, limit);
      await waiting(ctx, delay, { operation, reason: "pending", attempt: attempt + 1, subject: commandId }, signal);
      current = { method: "GET", url: sameOrigin(ctx, reply.headers.get("location"), poll.url) };
      continue;
    }
    const error = problem(reply, operation);
    error.commandId ??= commandId;
    if ((error instanceof CommandNotStarted || error instanceof CommandTimedOut) && submit !== undefined) {
      resubmits += 1;
      const delay = backoff(retry, resubmits);
      if (resubmits > retry.resubmitAttempts || ctx.clock() + delay > deadline) throw error;
      await waiting(ctx, delay, { operation, reason: "not_started", attempt: attempt + 1, subject: commandId }, signal);
      current = submit;
      continue;
    }
    const waitsForSlot =
      error instanceof SessionBusy || error instanceof SessionUnavailable || error instanceof RateLimited;
    if (waitsForSlot && submit !== undefined) {
      const delay = error.retryAfter ?? retry.defaultRetryAfter;
      if (ctx.clock() + delay > deadline) throw error;
      await waiting(ctx, delay, { operation, reason: "busy", attempt: attempt + 1, subject: commandId }, signal);
      current = submit;
      continue;
    }
    throw error;
  }
}

function checkId(received: string, expected: string, operation: string, status: number): void {
  if (received.toLowerCase() !== expected.toLowerCase()) {
    throw new ResponseValidationError(`the answer concerns command ${received}, not ${expected}`, operation, status);
  }
}
