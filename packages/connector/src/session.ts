/**
 * `Session`: one session's commands with the consumer's approval hook, and a lifecycle that
 * always ends in a delete. States: `open` → `ended` (the backend answered `410`: nothing more is
 * sent) → `closed` (deleted by `close()` / disposal); `open` → `closed` directly.
 */
import type {
  Command,
  CommandResult,
  GetTabsResult,
  HelloResult,
  ScreenshotCommand,
  ScreenshotResult,
  Session as SessionInfo,
  SessionTombstone,
  SnapshotCommand,
  SnapshotResult,
  WaitCondition,
  WaitForResult,
  WriteResult,
} from "@understudy/protocol";
import { isWriteCommand } from "@understudy/protocol";
import { randomUUID } from "node:crypto";

import type { Client, CreateSessionOptions } from "./client.js";
import {
  CommandFailed,
  ProvisioningTimeout,
  ResponseValidationError,
  SessionClosedError,
  SessionNotFound,
  SessionTerminal,
  UnderstudyError,
  UsageError,
  WriteRefused,
} from "./errors.js";
import type { Context } from "./http.js";
import { isTombstone, waitTerminal } from "./sessionFlow.js";

/** A write about to be sent, as the approval hook sees it. */
export interface WriteRequest {
  readonly sessionId: string;
  /** The id the write will carry if approved (correlate it with your audit log). */
  readonly commandId: string;
  /** The catalog command, arguments included (a `fill_secret` names its secret, never plaintext). */
  readonly command: Command;
  /** The dry-run result (what the write resolved to, whether policy allows it) with `previewWrites`. */
  readonly preview?: WriteResult;
}

/** Returns true to send the write, false to refuse it (`WriteRefused`, nothing sent). */
export type ApproveHook = (request: WriteRequest) => boolean | Promise<boolean>;

/** The consumer's governance of one session. */
export interface SessionOptions {
  /** Consulted before each write (not before dry runs); returning false throws `WriteRefused`. */
  readonly approve?: ApproveHook;
  /** Show the approval hook a dry-run preview of each write first (a separate command id). */
  readonly previewWrites?: boolean;
}

/** Per-command options of a `Session`. */
export interface RunOptions {
  /** For a write: resolve the target and check the policy without acting. */
  readonly dryRun?: boolean;
  /** Seconds the command may take, polls and retries included. */
  readonly timeout?: number;
  readonly signal?: AbortSignal;
  /** The command's id (drawn when absent), e.g. the one an approval was given for. */
  readonly commandId?: string;
}

export type SessionState = "open" | "ended" | "closed";

/** One session: create it with `Client.openSession`, and dispose of it (or `close()`) to delete it. */
export class Session implements AsyncDisposable {
  #state: SessionState = "open";
  #info: SessionInfo;
  readonly #client: Client;
  readonly #ctx: Context;
  readonly #options: SessionOptions;

  private constructor(client: Client, ctx: Context, info: SessionInfo, options: SessionOptions) {
    this.#client = client;
    this.#ctx = ctx;
    this.#info = info;
    this.#options = options;
  }

  /**
   * @internal Create the session; one left provisioning by a timeout is deleted again, and so is
   * whatever an aborted or cut-off creation left (`abandon`).
   */
  static async create(
    client: Client,
    ctx: Context,
    options: CreateSessionOptions & SessionOptions,
    create: () => Promise<SessionInfo>,
    abandon: () => Promise<string | undefined> = () => Promise.resolve(undefined),
  ): Promise<Session> {
    if (options.approve !== undefined && typeof options.approve !== "function") {
      throw new UsageError("approve must be a function returning a boolean");
    }
    try {
      return new Session(client, ctx, await create(), options);
    } catch (error) {
      if (error instanceof ProvisioningTimeout) {
        try {
          await client.deleteSession(error.sessionId);
        } catch (cleanup) {
          if (!(cleanup instanceof UnderstudyError)) throw cleanup;
          error.message += `; deleting ${error.sessionId} failed too: ${cleanup.message}`;
        }
      } else {
        try {
          await abandon();
        } catch (cleanup) {
          if (!(cleanup instanceof UnderstudyError) || !(error instanceof Error)) throw cleanup;
          error.message += `; deleting what the interrupted creation left failed as well: ${cleanup.message}`;
        }
      }
      throw error;
    }
  }

  /** The session id. */
  get id(): string {
    return this.#info.sessionId;
  }

  /** The session as created (or as last refreshed). */
  get info(): SessionInfo {
    return this.#info;
  }

  get state(): SessionState {
    return this.#state;
  }

  /**
   * Run one command and return its result.
   *
   * @throws SessionClosedError the session ended or was closed; nothing was sent.
   * @throws WriteRefused the approval hook refused the write; nothing was sent.
   * @throws CommandFailed the durable outcome is `failed` (its `code` says why).
   */
  async execute(command: Command, options: RunOptions = {}): Promise<CommandResult> {
    this.#requireOpen();
    const dryRun = options.dryRun ?? false;
    const commandId = options.commandId ?? randomUUID();
    const approve = this.#options.approve;
    if (isWriteCommand(command.name) && !dryRun && approve !== undefined) {
      let preview: WriteResult | undefined;
      if (this.#options.previewWrites) {
        preview = (await this.#submit(command, randomUUID(), true, options)) as WriteResult;
      }
      const decision = await approve({ sessionId: this.id, commandId, command, ...(preview ? { preview } : {}) });
      // Fail closed: anything but a real boolean is a broken hook, never an approval.
      if (typeof decision !== "boolean") {
        throw new UsageError(`the approval hook must return a boolean, not ${typeof decision}`);
      }
      if (!decision) throw new WriteRefused(command.name, commandId);
    }
    return this.#submit(command, commandId, dryRun, options);
  }

  /** Describe the session's tab, the protocol and the capabilities in force. */
  async hello(options: RunOptions = {}): Promise<HelloResult> {
    return expect(await this.execute({ name: "hello" }, options), "hello");
  }

  /** The session's tabs. */
  async getTabs(options: RunOptions = {}): Promise<GetTabsResult> {
    return expect(await this.execute({ name: "get_tabs" }, options), "get_tabs");
  }

  /** The accessibility tree of the page, with element refs. */
  async snapshot(args: Omit<SnapshotCommand, "name"> = {}, options: RunOptions = {}): Promise<SnapshotResult> {
    return expect(await this.execute({ name: "snapshot", ...args }, options), "snapshot");
  }

  /** A screenshot of the tab. */
  async screenshot(args: Omit<ScreenshotCommand, "name"> = {}, options: RunOptions = {}): Promise<ScreenshotResult> {
    return expect(await this.execute({ name: "screenshot", ...args }, options), "screenshot");
  }

  /** Wait until `condition` holds or `timeoutMs` passes. */
  async waitFor(condition: WaitCondition, timeoutMs?: number, options: RunOptions = {}): Promise<WaitForResult> {
    const command: Command = { name: "wait_for", condition, ...(timeoutMs === undefined ? {} : { timeoutMs }) };
    return expect(await this.execute(command, options), "wait_for");
  }

  /** Navigate the tab to `url` (within the session's allowed origins). */
  async navigate(url: string, options: RunOptions = {}): Promise<WriteResult> {
    return this.#write({ name: "navigate", url }, options);
  }

  /** Click the element `ref` names. */
  async click(ref: string, options: RunOptions = {}): Promise<WriteResult> {
    return this.#write({ name: "click", ref }, options);
  }

  /** Replace the value of an editable element. */
  async fill(ref: string, value: string, options: RunOptions = {}): Promise<WriteResult> {
    return this.#write({ name: "fill", ref, value }, options);
  }

  /** Fill an editable element with a vaulted secret (`vault:<name>`); plaintext never travels. */
  async fillSecret(ref: string, secretRef: string, options: RunOptions = {}): Promise<WriteResult> {
    return this.#write({ name: "fill_secret", ref, secretRef }, options);
  }

  /** Press one key (a DOM `KeyboardEvent.key`). */
  async pressKey(key: string, options: RunOptions = {}): Promise<WriteResult> {
    return this.#write({ name: "press_key", key }, options);
  }

  /** The session as the backend sees it now, or its tombstone once it ended. */
  async refresh(options: { signal?: AbortSignal } = {}): Promise<SessionInfo | SessionTombstone> {
    const current = await this.#client.getSession(this.id, options);
    if (isTombstone(current)) {
      if (this.#state === "open") this.#state = "ended";
    } else {
      this.#info = current;
    }
    return current;
  }

  /**
   * Delete the session; closing twice sends no second delete. With `wait`, poll until it is
   * terminal, so its device capacity and origins are free for the next session.
   */
  async close(options: { wait?: boolean; timeout?: number } = {}): Promise<SessionInfo | SessionTombstone | undefined> {
    if (this.#state === "closed") {
      return options.wait ? waitTerminal(this.#ctx, this.id, { ...timeoutOf(options) }) : undefined;
    }
    this.#state = "closed";
    let result: SessionInfo | SessionTombstone;
    try {
      result = await this.#client.deleteSession(this.id);
    } catch (error) {
      if (error instanceof SessionNotFound) return undefined;
      throw error;
    }
    if (options.wait && !isTombstone(result)) {
      return waitTerminal(this.#ctx, this.id, { ...timeoutOf(options), pollFirst: false });
    }
    return result;
  }

  /** `await using session = await client.openSession(...)` deletes the session at scope exit. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #write(command: Command, options: RunOptions): Promise<WriteResult> {
    return (await this.execute(command, options)) as WriteResult;
  }

  async #submit(command: Command, commandId: string, dryRun: boolean, options: RunOptions): Promise<CommandResult> {
    let outcome;
    try {
      outcome = await this.#client.submitCommand(this.id, command, {
        commandId,
        dryRun,
        ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      });
    } catch (error) {
      if (error instanceof SessionTerminal && this.#state === "open") this.#state = "ended";
      throw error;
    }
    if (outcome.status === "failed") throw new CommandFailed(outcome);
    if (outcome.result === undefined) {
      throw new ResponseValidationError(`${outcome.name} succeeded without a result`, "submitCommand", 200);
    }
    return outcome.result;
  }

  #requireOpen(): void {
    if (this.#state !== "open") {
      throw new SessionClosedError(`session ${this.id} is ${this.#state}; create a new session`);
    }
  }
}

function timeoutOf(options: { timeout?: number }): { timeout?: number } {
  return options.timeout === undefined ? {} : { timeout: options.timeout };
}

type ResultOf<N extends CommandResult["name"]> = Extract<CommandResult, { name: N }>;

function expect<N extends CommandResult["name"]>(result: CommandResult, name: N): ResultOf<N> {
  if (result.name !== name) {
    throw new ResponseValidationError(`${name} returned a ${result.name} result`, "submitCommand", 200);
  }
  return result as ResultOf<N>;
}
