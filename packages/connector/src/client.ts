/**
 * `Client`: the operations of spec/openapi.yaml on `fetch`, with the outcome rules built in
 * (`commandFlow.ts`, `sessionFlow.ts`). No retry rule lives in this module.
 */
import { randomUUID } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";

import type {
  Command,
  CommandOutcome,
  CommandRequest,
  DeviceList,
  Session as SessionInfo,
  SessionTombstone,
  UnattendedSessionRequest,
} from "@understudy/protocol";
import { UnattendedSessionRequest as UnattendedSchema, Command as CommandSchema } from "@understudy/protocol/zod";

import { pollCommand, runCommand } from "./commandFlow.js";
import { DEFAULT_RETRY, type RetryConfig } from "./config.js";
import { Aborted, UsageError } from "./errors.js";
import { type ConnectorEvent, type Context, NetworkError, type Reply, type Send } from "./http.js";
import { Session, type SessionOptions } from "./session.js";
import {
  type CreateProgress,
  abandonCreate,
  createSession,
  deleteSession,
  getSession,
  listDevices,
} from "./sessionFlow.js";

/** The connector's version, sent as its `User-Agent`. */
export const VERSION = "0.1.0";
/** Milliseconds per HTTP request; above the backend's 20 s synchronous command wait. */
export const DEFAULT_HTTP_TIMEOUT_MS = 30_000;

/** How a `Client` reaches the backend, and the hooks tests and consumers plug in. */
export interface ClientOptions {
  /** The service origin, e.g. `http://127.0.0.1:8787`. */
  readonly baseUrl: string;
  /** A consumer API key (`usk_...`); sent only in the `Authorization` header. */
  readonly apiKey: string;
  /** Bounds of the built-in retry rules (defaults: `DEFAULT_RETRY`). */
  readonly retry?: Partial<RetryConfig>;
  /** Milliseconds per HTTP request. */
  readonly httpTimeoutMs?: number;
  /** The `fetch` to use (tests pass a scripted one). */
  readonly fetch?: typeof fetch;
  /** How to wait between attempts, in seconds (tests pass a fake). */
  readonly sleep?: (seconds: number, signal?: AbortSignal) => Promise<void>;
  /** A monotonic clock in seconds (tests pass a fake). */
  readonly clock?: () => number;
  /**
   * Called after every answer and before every wait; awaited, so a test (or a progress display)
   * sees each step before the connector takes the next one. Its errors propagate.
   */
  readonly onEvent?: (event: ConnectorEvent) => void | Promise<void>;
}

/** What `createSession` and `openSession` take. */
export interface CreateSessionOptions {
  /** `unattended` (an extension-owned tab, the default) or `attended` (a person attaches a tab). */
  readonly mode?: "unattended" | "attended";
  /** Unattended only: the exact origins navigation may reach. */
  readonly allowedOrigins?: readonly string[];
  /** Unattended only: names the browser state the session expects. */
  readonly profileStateKey?: string;
  /** Unattended only: an explicit device; never falls back to another. */
  readonly deviceId?: string;
  /** Reused on every retry of this creation; drawn once per call when absent. */
  readonly idempotencyKey?: string;
  /** Seconds the creation may take, provisioning included. */
  readonly timeout?: number;
  readonly signal?: AbortSignal;
}

/** What `submitCommand` takes besides the command. */
export interface SubmitOptions {
  /** For a write: resolve the target and check the policy without acting. */
  readonly dryRun?: boolean;
  /** Reused on every retry; drawn once per call when absent. */
  readonly commandId?: string;
  /** Seconds the command may take, polls and retries included. */
  readonly timeout?: number;
  readonly signal?: AbortSignal;
}

async function defaultSleep(seconds: number, signal?: AbortSignal): Promise<void> {
  try {
    await delay(seconds * 1000, undefined, signal === undefined ? undefined : { signal });
  } catch (error) {
    if (signal?.aborted) throw new Aborted("the wait was aborted", undefined, { cause: signal.reason });
    throw error;
  }
}

/** A client of the Understudy API. One instance may serve many sessions at once. */
export class Client {
  readonly #ctx: Context;
  readonly #headers: Record<string, string>;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;

  constructor(options: ClientOptions) {
    if (!options.apiKey) throw new UsageError("an API key is required (a consumer key, usk_...)");
    let baseUrl: URL;
    try {
      baseUrl = new URL(options.baseUrl);
    } catch {
      throw new UsageError(`baseUrl must be an absolute URL, not ${JSON.stringify(options.baseUrl)}`);
    }
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#timeoutMs = options.httpTimeoutMs ?? DEFAULT_HTTP_TIMEOUT_MS;
    this.#headers = {
      Authorization: `Bearer ${options.apiKey}`,
      Accept: "application/json, application/problem+json",
      "User-Agent": `understudy-connector-ts/${VERSION}`,
    };
    const onEvent = options.onEvent;
    this.#ctx = {
      baseUrl,
      retry: { ...DEFAULT_RETRY, ...options.retry },
      clock: options.clock ?? (() => performance.now() / 1000),
      sleep: options.sleep ?? defaultSleep,
      exchange: (send, operation, signal) => this.#exchange(send, operation, signal),
      emit: async (event) => {
        if (onEvent !== undefined) await onEvent(event);
      },
    };
  }

  /** Never the API key. */
  toString(): string {
    return `Client(${this.#ctx.baseUrl.origin})`;
  }

  /**
   * Create a session and wait until it is connected (unattended) or awaiting attach. Prefer
   * `openSession` / `withSession`, which also delete it.
   *
   * @throws ProvisioningTimeout still provisioning after `timeout`; the session exists.
   * @throws ProblemError a documented refusal (`CapacityExhausted`, `OriginConflict`, ...).
   */
  async createSession(options: CreateSessionOptions = {}): Promise<SessionInfo> {
    const [body, key] = sessionRequest(options);
    return createSession(this.#ctx, body, options.idempotencyKey ?? key, options);
  }

  /** The live session, or its tombstone once it ended. */
  getSession(sessionId: string, options: { signal?: AbortSignal } = {}): Promise<SessionInfo | SessionTombstone> {
    return getSession(this.#ctx, sessionId, options.signal);
  }

  /** Start or confirm cleanup; safe to repeat. */
  deleteSession(sessionId: string, options: { signal?: AbortSignal } = {}): Promise<SessionInfo | SessionTombstone> {
    return deleteSession(this.#ctx, sessionId, options.signal);
  }

  /**
   * Run one command under the outcome rules and return its durable outcome. The command id is
   * drawn once (unless given) and reused on every retry. A `failed` outcome is returned, not
   * thrown; `Session` methods throw `CommandFailed` instead.
   *
   * @throws CommandOutcomeUnknown a side effect may have happened; never retried.
   * @throws OutcomeTimeout still pending after `timeout`; poll the command id.
   */
  async submitCommand(sessionId: string, command: Command, options: SubmitOptions = {}): Promise<CommandOutcome> {
    const checked = CommandSchema.safeParse(command);
    if (!checked.success) {
      const fields = checked.error.issues.map((issue) => `${issue.path.join(".") || "(command)"}: ${issue.message}`);
      throw new UsageError(`invalid command: ${fields.join("; ")}`);
    }
    const request: CommandRequest = {
      commandId: options.commandId ?? randomUUID(),
      dryRun: options.dryRun ?? false,
      command,
    };
    return runCommand(this.#ctx, sessionId, request, options);
  }

  /** Poll a submitted command until its durable outcome; polling never re-runs anything. */
  pollCommand(
    sessionId: string,
    commandId: string,
    options: { timeout?: number; signal?: AbortSignal } = {},
  ): Promise<CommandOutcome> {
    return pollCommand(this.#ctx, sessionId, commandId, options);
  }

  /** This tenant's devices with health and capacity. */
  listDevices(options: { signal?: AbortSignal } = {}): Promise<DeviceList> {
    return listDevices(this.#ctx, options.signal);
  }

  /**
   * Create a session and return its `Session` helper. Dispose of it to delete the session:
   * `await using session = await client.openSession({...})` where `await using` is available
   * (TypeScript 5.2+ with `Symbol.asyncDispose`), else `try { ... } finally { await session.close() }`,
   * or use `withSession`. A session left provisioning by a timeout, or by an open that was aborted
   * or cut off, is deleted before the error.
   */
  async openSession(options: CreateSessionOptions & SessionOptions = {}): Promise<Session> {
    const [body, key] = sessionRequest(options);
    const idempotencyKey = options.idempotencyKey ?? key;
    const progress: CreateProgress = { unanswered: false };
    return Session.create(
      this,
      this.#ctx,
      options,
      () => createSession(this.#ctx, body, idempotencyKey, { ...options, progress }),
      // Not under the caller's signal: an aborted open still removes what it left.
      () => abandonCreate(this.#ctx, progress, body, idempotencyKey),
    );
  }

  /** Open a session, run `body` with it, and always delete the session afterwards. */
  async withSession<T>(
    options: CreateSessionOptions & SessionOptions,
    body: (session: Session) => Promise<T>,
  ): Promise<T> {
    const session = await this.openSession(options);
    try {
      return await body(session);
    } finally {
      await session.close();
    }
  }

  async #exchange(send: Send, operation: string, signal?: AbortSignal): Promise<Reply | NetworkError> {
    const url = new URL(send.url, this.#ctx.baseUrl);
    const headers: Record<string, string> = { ...this.#headers, ...send.headers };
    let body: string | undefined;
    if (send.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(send.body);
    }
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const combined = signal === undefined ? timeout : AbortSignal.any([signal, timeout]);
    let reply: Reply | NetworkError;
    try {
      const response = await this.#fetch(url, {
        method: send.method,
        headers,
        ...(body === undefined ? {} : { body }),
        redirect: "manual",
        signal: combined,
      });
      reply = { status: response.status, headers: response.headers, text: await response.text() };
    } catch (error) {
      if (signal?.aborted) {
        const id = (send.body as { commandId?: string } | undefined)?.commandId;
        throw new Aborted(`${operation} was aborted`, id, { cause: signal.reason });
      }
      reply = new NetworkError(error);
    }
    await this.#ctx.emit(
      reply instanceof NetworkError
        ? { type: "response", operation, method: send.method, url: url.toString(), status: "network_error" }
        : { type: "response", operation, method: send.method, url: url.toString(), status: reply.status, ...problemCode(reply) },
    );
    return reply;
  }
}

function problemCode(reply: Reply): { code?: string } {
  // A tolerant peek for the event only; the policy parses the body strictly.
  if (reply.status < 400) return {};
  try {
    const body = JSON.parse(reply.text) as { code?: unknown };
    return typeof body.code === "string" ? { code: body.code } : {};
  } catch {
    return {};
  }
}

/** The creation body and a fresh idempotency key; `[undefined, undefined]` for an attended session. */
export function sessionRequest(
  options: CreateSessionOptions,
): [UnattendedSessionRequest | undefined, string | undefined] {
  const mode = options.mode ?? "unattended";
  if (mode === "attended") {
    if (options.allowedOrigins?.length || options.profileStateKey || options.deviceId) {
      throw new UsageError(
        "an attended session takes no allowedOrigins, profileStateKey or deviceId: " +
          "a person attaches one tab from the extension's panel",
      );
    }
    return [undefined, undefined];
  }
  if (mode !== "unattended") throw new UsageError(`mode must be "unattended" or "attended", not ${JSON.stringify(mode)}`);
  if (!options.allowedOrigins?.length || !options.profileStateKey) {
    throw new UsageError("an unattended session needs allowedOrigins and profileStateKey");
  }
  const candidate = {
    mode: "unattended",
    allowedOrigins: [...options.allowedOrigins],
    profileStateKey: options.profileStateKey,
    ...(options.deviceId === undefined ? {} : { deviceId: options.deviceId }),
  };
  const parsed = UnattendedSchema.safeParse(candidate);
  if (!parsed.success) {
    const fields = parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`);
    throw new UsageError(`invalid session request: ${fields.join("; ")}`);
  }
  return [parsed.data, randomUUID()];
}
