/**
 * Reads and the at-most-once write protocol of one runtime.
 *
 * Read: queue → run → `read_result`.
 * Write: `write_prepare` → persist prepared → `write_ready`; `write_grant` → queue → resolve and
 * check (reads only), while started is persisted → one CDP operation, once started is in storage
 * → persist completed_unacked → `result`; `result_ack` → drop (from memory at once; storage
 * follows with the journal's next write, see writeJournal.ts). Each frame leaves only once the
 * move before it is in storage, as the seed's durable sequence orders it, so a worker stop after
 * any frame finds what the restart needs: a preparation to cancel, a started write to declare
 * unknown, a result to replay. After the operation a settle window attributes what the page did in
 * response and the extension stopped (a navigation, a popup) to the write's result; a `wait_for`
 * reports the stops during its wait. A crash after `started` leaves the entry started, which the next hello
 * reports and the backend declares unknown. Authority loss mid-command stops silently: whoever
 * owns the session now decides, and a started entry stays unknown.
 *
 * What each frame does to a write's journal entry is the decision table of `writeProtocol.ts`;
 * this flow makes the checks the table's events name, asks it, and carries the answer out. The
 * flow owns the runtime's write journal and its single-flight queue; the runtime reaches them only
 * through the methods below (frames in, the hello's journal, counts for the panel), and the flow
 * reaches the runtime only through `CommandHost`.
 */
import type { AuthorityCheck } from "../cdp/cdpSession";
import type { StorageArea } from "../chrome/facade";
import type { CommandContext, WriteReport } from "../commands/context";
import { planWrite, runRead } from "../commands/index";
import { CommandError, StaleAuthorityError, toErrorInfo } from "../errors";
import { isWriteCommand, READ_DEADLINE_MS } from "@understudy/protocol";
import type {
  BlockedNavigation,
  Command,
  CommandResult,
  SessionClientFrame,
  SessionClientHello,
  SessionServerHelloAck,
  SessionServerRead,
  SessionServerWriteGrant,
  SessionServerWritePrepare,
  WriteCommandName,
  WriteResult,
} from "@understudy/protocol";
import type { Logger } from "../log";
import { decodeCommand } from "../protocol/decode";
import { CommandQueue } from "./commandQueue";
import { IllegalTransitionError, type JournalEntry, JournalFullError, type StoredOutcome, WriteJournal } from "./writeJournal";
import { decideWrite, type WriteAction, type WriteEvent } from "./writeProtocol";

/** What a write waits for after it acted (see `SessionRuntime.settleWindow`). */
export type SettleKind = "activation" | "document" | "none";

/** What the flow needs from its runtime: the socket, the authority fence, and the tab commands run in. */
export interface CommandHost {
  /** Sends a frame on the session socket; false when it is not open. */
  send(frame: SessionClientFrame): boolean;
  /** The lease epoch the runtime holds now. */
  readonly leaseEpoch: number;
  /** A check that throws once the runtime's authority for `leaseEpoch` is gone. */
  authority(leaseEpoch?: number): AuthorityCheck;
  /** The context a command runs in, fenced by `check`. */
  context(deadlineMs: number, check: AuthorityCheck): CommandContext;
  /** Runs `task` with what the page tried and was stopped attributed to `commandId`. */
  attributing<T>(commandId: string, task: () => Promise<T>): Promise<{ value: T; blocked: BlockedNavigation[] }>;
  /** The settle window after a write acted. */
  settleWindow(deadlineMs: number, kind: SettleKind): Promise<void>;
  now(): number;
}

/** Where reads and writes run; the command implementations, unless a test passes fakes. */
export interface CommandRunners {
  readonly planWrite: typeof planWrite;
  readonly runRead: typeof runRead;
}

const COMMANDS: CommandRunners = { planWrite, runRead };
/** A frame whose deadline does not parse gets this much time. */
const DEFAULT_DEADLINE_MS = READ_DEADLINE_MS;

/**
 * How long a write's settle window is (`SessionRuntime.settleWindow`): input that may make the page
 * react on its own (a handler that navigates or opens a popup) gets the full window; a write that
 * loads a document lets the page run what it scheduled at once (a meta refresh, a script redirect);
 * the others wait only for a navigation already under way.
 */
const SETTLE_OF: Readonly<Record<WriteCommandName, SettleKind>> = {
  click: "activation",
  press_key: "activation",
  select_option: "activation",
  set_checked: "activation",
  // A drop can do what a click does (a handler that navigates or opens a popup).
  drag: "activation",
  navigate: "document",
  go_back: "document",
  go_forward: "document",
  reload: "document",
  hover: "none",
  focus: "none",
  select_text: "none",
  type: "none",
  fill: "none",
  fill_secret: "none",
  scroll: "none",
  switch_tab: "none",
};

function failed(error: unknown): StoredOutcome {
  return { outcome: "failed", error: toErrorInfo(error) };
}

export class CommandFlow {
  private readonly journal: WriteJournal;
  private readonly queue: CommandQueue;
  private blocked = false;

  constructor(
    private readonly host: CommandHost,
    area: StorageArea,
    sessionId: string,
    log: Logger,
    private readonly commands: CommandRunners = COMMANDS,
  ) {
    this.journal = new WriteJournal(area, sessionId);
    this.queue = new CommandQueue((error) => {
      log.warn("command_task_failed", { kind: error instanceof Error ? error.name : "unknown" });
    });
  }

  /** Loads the persisted journal (`items`: a storage read that included its key). */
  load(items?: Readonly<Record<string, unknown>>): Promise<void> {
    return this.journal.load(items);
  }

  /** The journal now: ids and states only (the panel, tests). */
  journalEntries(): SessionClientHello["journal"] {
    return this.journal.list().map((entry) => ({ commandId: entry.commandId, state: entry.state }));
  }

  /**
   * The journal a hello reports. Every entry it reports `prepared` is a promise that the write
   * never acts: the backend settles it `not_started` and its caller may retry it, and once
   * granted the backend never resends a write, so a granted write still queued here would run
   * behind the backend's back if it reached the front of the queue before `hello_ack`'s cancel.
   * The snapshot is taken on the journal's chain, after every move already asked for, and seals
   * each entry it finds `prepared` (writeJournal.ts): a write whose `started` was still being
   * written is reported `started` (the backend answers unknown), and any other granted write is
   * withdrawn from the queue here and, should it reach `execute` anyway, refused there.
   */
  async helloJournal(): Promise<SessionClientHello["journal"]> {
    const entries = await this.journal.helloSnapshot();
    for (const entry of entries) if (entry.state === "prepared") this.queue.cancel(entry.commandId);
    return entries.map((entry) => ({ commandId: entry.commandId, state: entry.state }));
  }

  /** Entries in the journal, for the panel. */
  get journaled(): number {
    return this.journal.list().length;
  }

  /** Commands queued or running, for the panel. */
  get queued(): number {
    return this.queue.size;
  }

  /** Whether the backend said writes are blocked (hello_ack). */
  get writesBlocked(): boolean {
    return this.blocked;
  }

  /** Resolves once every queued command has finished. */
  idle(): Promise<void> {
    return this.queue.idle();
  }

  /** Forgets the journal (the lease ended). */
  clear(): Promise<void> {
    return this.journal.clear();
  }

  read(frame: SessionServerRead): void {
    const decoded = decodeCommand(frame.command);
    if (!decoded.ok || isWriteCommand(decoded.value.name)) {
      const message = decoded.ok ? `${decoded.value.name} is a write; submit it through the write protocol.` : decoded.message;
      this.host.send({ type: "read_result", commandId: frame.commandId, outcome: "failed", error: { code: "invalid_arguments", message } });
      return;
    }
    const command = decoded.value;
    const check = this.host.authority();
    const deadlineMs = this.deadlineOf(frame.deadlineAt);
    this.queue.enqueue(frame.commandId, async () => {
      let result: CommandResult;
      try {
        check();
        const ctx = this.host.context(deadlineMs, check);
        if (command.name === "wait_for") {
          const { value, blocked } = await this.host.attributing(frame.commandId, () => this.commands.runRead(ctx, command));
          result = value.name === "wait_for" && blocked.length > 0 ? { ...value, blockedNavigations: blocked } : value;
        } else {
          result = await this.commands.runRead(ctx, command);
        }
      } catch (error) {
        if (error instanceof StaleAuthorityError) return;
        this.host.send({ type: "read_result", commandId: frame.commandId, outcome: "failed", error: toErrorInfo(error) });
        return;
      }
      this.host.send({ type: "read_result", commandId: frame.commandId, outcome: "succeeded", result });
    });
  }

  async prepare(frame: SessionServerWritePrepare): Promise<void> {
    const refuse = (message: string): void => {
      this.host.send({ type: "error", code: "write_refused", message, commandId: frame.commandId });
    };
    const event: WriteEvent = frame.leaseEpoch !== this.host.leaseEpoch ? "prepare_other_epoch" : this.blocked ? "prepare_blocked" : "prepare";
    const action = decideWrite(this.journal.get(frame.commandId)?.state, event);
    switch (action) {
      case "refuse_epoch":
        refuse(`write_prepare for lease epoch ${frame.leaseEpoch}; this runtime holds epoch ${this.host.leaseEpoch}.`);
        return;
      case "refuse_blocked":
        refuse("Writes are blocked for this session after a browser restart or an unknown outcome; delete the session and create a new one.");
        return;
      case "refuse_granted":
        refuse(ALREADY_GRANTED);
        return;
      case "prepare": {
        let entry: JournalEntry;
        try {
          entry = await this.journal.prepare({ commandId: frame.commandId, name: frame.name, leaseEpoch: frame.leaseEpoch, dryRun: frame.dryRun });
        } catch (error) {
          if (!(error instanceof JournalFullError)) throw error;
          refuse("The extension holds 64 unacknowledged writes; acknowledge their results first.");
          return;
        }
        // Another prepare of the same id may have been granted meanwhile.
        if (entry.state !== "prepared") {
          refuse(ALREADY_GRANTED);
          return;
        }
        this.host.send({ type: "write_ready", commandId: frame.commandId, leaseEpoch: frame.leaseEpoch });
        return;
      }
      case "ready":
        this.host.send({ type: "write_ready", commandId: frame.commandId, leaseEpoch: frame.leaseEpoch });
        return;
      case "refuse_grant":
      case "run":
      case "replay":
      case "drop":
      case "keep":
        unexpected(event, action);
    }
  }

  async grant(frame: SessionServerWriteGrant): Promise<void> {
    const entry = this.journal.get(frame.commandId);
    const current = frame.leaseEpoch === this.host.leaseEpoch && (entry === undefined || entry.leaseEpoch === frame.leaseEpoch);
    const event: WriteEvent = current ? "grant" : "grant_other_epoch";
    const action = decideWrite(entry?.state, event);
    switch (action) {
      case "replay":
        if (entry !== undefined) this.sendResult(entry, true);
        return;
      case "refuse_grant":
        this.host.send({
          type: "error",
          code: "write_refused",
          message: "write_grant without a matching prepared entry of this lease epoch; the write was not executed.",
          commandId: frame.commandId,
        });
        return;
      case "run":
        if (entry !== undefined) await this.run(entry, frame);
        return;
      case "prepare":
      case "ready":
      case "refuse_epoch":
      case "refuse_blocked":
      case "refuse_granted":
      case "drop":
      case "keep":
        unexpected(event, action);
    }
  }

  private async run(entry: JournalEntry, frame: SessionServerWriteGrant): Promise<void> {
    const decoded = decodeCommand(frame.command);
    if (!decoded.ok || decoded.value.name !== entry.name) {
      const message = decoded.ok ? `The grant carries ${decoded.value.name} but ${entry.name} was prepared.` : decoded.message;
      await this.finish(entry, failed(new CommandError("invalid_arguments", message)));
      return;
    }
    const command = decoded.value;
    const check = this.host.authority(frame.leaseEpoch);
    const deadlineMs = this.deadlineOf(frame.deadlineAt);
    // The plaintext of fill_secret lives only in this closure until the task ran.
    const secretValue = frame.secretValue;
    this.queue.enqueue(frame.commandId, () => this.execute(entry, command, frame.dryRun, secretValue, deadlineMs, check));
  }

  private async execute(
    entry: JournalEntry,
    command: Command,
    dryRun: boolean,
    secretValue: string | undefined,
    deadlineMs: number,
    check: () => void,
  ): Promise<void> {
    // A hello reported it prepared meanwhile: it never acts (see `helloJournal`).
    if (this.journal.isSealed(entry.commandId)) return;
    const ctx = this.host.context(deadlineMs, check);
    let plan;
    let started: Promise<JournalEntry> | undefined;
    try {
      check();
      // `started` goes to storage while the plan's reads (resolving the ref, scrolling it into
      // view, the actionability checks) run; the act waits for it below. A dry run never acts,
      // so it never starts. A stop or an authority move while planning can thus leave a started
      // entry for a write that never acted: the backend calls it unknown, never runs it again.
      if (!dryRun) {
        started = this.journal.markStarted(entry.commandId);
        started.catch(() => undefined); // awaited before the act; a failure stops it there
      }
      plan = await this.commands.planWrite(ctx, command, dryRun, secretValue);
    } catch (error) {
      if (error instanceof StaleAuthorityError) return;
      await this.finish(entry, failed(error));
      return;
    }
    if (dryRun) {
      await this.finish(entry, { outcome: "succeeded", result: await this.writeResult(entry.name, ctx, plan.preview) });
      return;
    }
    if (!plan.preview.allowed) {
      const origin = plan.preview.navigatesTo === undefined ? "The target" : (safeOrigin(plan.preview.navigatesTo) ?? "The target");
      await this.finish(entry, failed(new CommandError("origin_not_allowed", `${origin} is not among this session's allowed origins or the device's local policy; navigate only to an allowed origin.`)));
      return;
    }
    // Never act before storage holds `started` (the write's at-most-once guarantee). A hello
    // that reported the entry prepared before `started` was asked for sealed it: the move is
    // refused, and the write says nothing (the backend's cancel drops the entry).
    try {
      await (started ?? this.journal.markStarted(entry.commandId));
    } catch (error) {
      if (error instanceof IllegalTransitionError) return;
      throw error;
    }
    let outcome: StoredOutcome;
    try {
      let report: WriteReport | undefined;
      const { blocked } = await this.host.attributing(entry.commandId, async () => {
        report = (await plan.act()) ?? undefined;
        await this.host.settleWindow(deadlineMs, SETTLE_OF[entry.name]);
      });
      const result = { ...(await this.writeResult(entry.name, ctx)), ...report };
      outcome = { outcome: "succeeded", result: blocked.length > 0 ? { ...result, blockedNavigations: blocked } : result };
    } catch (error) {
      // Authority lost after `started`: say nothing; the entry stays started and becomes unknown.
      if (error instanceof StaleAuthorityError) return;
      outcome = failed(error);
    }
    await this.finish(entry, outcome);
  }

  private async writeResult(name: WriteCommandName, ctx: CommandContext, preview?: WriteResult["preview"]): Promise<WriteResult> {
    let url = "";
    let title = "";
    try {
      ({ url, title } = await ctx.writtenTab());
    } catch (error) {
      if (error instanceof StaleAuthorityError) throw error;
      // The write happened; a tab that closed afterwards does not turn it into a failure.
    }
    return { name, url, title, generation: ctx.refs.generation, ...(preview === undefined ? {} : { preview }) };
  }

  private async finish(entry: JournalEntry, outcome: StoredOutcome): Promise<void> {
    let completed: JournalEntry;
    try {
      completed = await this.journal.complete(entry.commandId, outcome);
    } catch (error) {
      // The backend declared the write unknown and it was dropped meanwhile: the verdict stands.
      if (error instanceof IllegalTransitionError) return;
      throw error;
    }
    this.sendResult(completed, false);
  }

  private sendResult(entry: JournalEntry, replayed: boolean): void {
    const outcome = entry.outcome;
    if (outcome === undefined) return;
    this.host.send({
      type: "result",
      commandId: entry.commandId,
      outcome: outcome.outcome,
      ...(outcome.result === undefined ? {} : { result: outcome.result }),
      ...(outcome.error === undefined ? {} : { error: outcome.error }),
      ...(replayed ? { replayed: true } : {}),
    });
  }

  async acknowledge(commandId: string): Promise<void> {
    await this.dropIf(commandId, "result_ack");
  }

  /** Drops an ungranted preparation, or a queued command that has not started. */
  async cancel(commandId: string): Promise<void> {
    const removed = this.queue.cancel(commandId);
    await this.dropIf(commandId, !removed && this.queue.current === commandId ? "cancel_running" : "cancel");
  }

  /**
   * After hello: drop the preparations the backend cancelled and the writes it declared unknown,
   * and take its word on whether writes are blocked.
   */
  async applyVerdict(frame: Pick<SessionServerHelloAck, "cancel" | "unknown" | "writesBlocked">): Promise<void> {
    const verdicts: [string, WriteEvent][] = [
      ...frame.cancel.map((id): [string, WriteEvent] => [id, "verdict_cancel"]),
      ...frame.unknown.map((id): [string, WriteEvent] => [id, "verdict_unknown"]),
    ];
    const drop = verdicts.filter(([id, event]) => this.decideDrop(id, event)).map(([id]) => id);
    for (const id of frame.cancel) this.queue.cancel(id);
    if (drop.length > 0) await this.journal.drop(drop);
    this.blocked = frame.writesBlocked;
  }

  private async dropIf(commandId: string, event: WriteEvent): Promise<void> {
    if (this.decideDrop(commandId, event)) await this.journal.drop([commandId]);
  }

  /** Whether the table drops the entry on `event` (the events that only keep or drop). */
  private decideDrop(commandId: string, event: WriteEvent): boolean {
    const action = decideWrite(this.journal.get(commandId)?.state, event);
    if (action !== "drop" && action !== "keep") unexpected(event, action);
    return action === "drop";
  }

  /** Sends every completed but unacknowledged result again, marked `replayed`. */
  replayCompleted(): void {
    for (const entry of this.journal.list()) {
      if (entry.state === "completed_unacked") this.sendResult(entry, true);
    }
  }

  /** Parses a frame's deadline, falling back to a bounded default. */
  private deadlineOf(timestamp: string): number {
    const parsed = Date.parse(timestamp);
    return Number.isNaN(parsed) ? this.host.now() + DEFAULT_DEADLINE_MS : parsed;
  }
}

const ALREADY_GRANTED = "This command id was already granted; poll its outcome instead of preparing it again.";

/** The table answered an event with an action its handler does not carry out: a bug. */
function unexpected(event: WriteEvent, action: WriteAction): never {
  throw new Error(`The write table answered ${event} with ${action}.`);
}

function safeOrigin(url: string): string | undefined {
  try {
    const origin = new URL(url).origin;
    return origin === "null" ? undefined : origin;
  } catch {
    return undefined;
  }
}
