/**
 * Reads and the at-most-once write protocol of one runtime.
 *
 * Read: queue → run → `read_result`.
 * Write: `write_prepare` → persist prepared → `write_ready`; `write_grant` → queue → resolve and
 * check (reads only) → persist started → one CDP operation → persist completed_unacked → `result`;
 * `result_ack` → drop. After the operation a settle window attributes what the page did in
 * response and the extension stopped (a navigation, a popup) to the write's result; a `wait_for`
 * reports the stops during its wait. A crash after `started` leaves the entry started, which the next hello
 * reports and the backend declares unknown. Authority loss mid-command stops silently: whoever
 * owns the session now decides, and a started entry stays unknown.
 */
import { planWrite, runRead } from "../commands/index";
import { CommandError, StaleAuthorityError, toErrorInfo } from "../errors";
import type {
  Command,
  CommandResult,
  SessionServerRead,
  SessionServerWriteGrant,
  SessionServerWritePrepare,
  WriteCommandName,
  WriteResult,
} from "@understudy/protocol";
import { decodeCommand } from "../protocol/decode";
import type { RuntimeDeps } from "./runtimeDeps";
import type { SessionRuntime, SettleKind } from "./sessionRuntime";
import { IllegalTransitionError, type JournalEntry, JournalFullError, type StoredOutcome } from "./writeJournal";
import { isWriteCommand } from "@understudy/protocol";

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
  navigate: "document",
  go_back: "document",
  go_forward: "document",
  reload: "document",
  hover: "none",
  focus: "none",
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
  constructor(
    private readonly runtime: SessionRuntime,
    private readonly deps: RuntimeDeps,
  ) {}

  enqueueRead(frame: SessionServerRead): void {
    const decoded = decodeCommand(frame.command);
    if (!decoded.ok || isWriteCommand(decoded.value.name)) {
      const message = decoded.ok ? `${decoded.value.name} is a write; submit it through the write protocol.` : decoded.message;
      this.runtime.send({ type: "read_result", commandId: frame.commandId, outcome: "failed", error: { code: "invalid_arguments", message } });
      return;
    }
    const command = decoded.value;
    const check = this.runtime.authority();
    const deadlineMs = this.runtime.deadlineOf(frame.deadlineAt);
    this.runtime.queue.enqueue(frame.commandId, async () => {
      let result: CommandResult;
      try {
        check();
        const ctx = this.runtime.context(deadlineMs, check);
        if (command.name === "wait_for") {
          const { value, blocked } = await this.runtime.attributing(frame.commandId, () => runRead(ctx, command));
          result = value.name === "wait_for" && blocked.length > 0 ? { ...value, blockedNavigations: blocked } : value;
        } else {
          result = await runRead(ctx, command);
        }
      } catch (error) {
        if (error instanceof StaleAuthorityError) return;
        this.runtime.send({ type: "read_result", commandId: frame.commandId, outcome: "failed", error: toErrorInfo(error) });
        return;
      }
      this.runtime.send({ type: "read_result", commandId: frame.commandId, outcome: "succeeded", result });
    });
  }

  async prepare(frame: SessionServerWritePrepare): Promise<void> {
    const refuse = (message: string): void => {
      this.runtime.send({ type: "error", code: "write_refused", message, commandId: frame.commandId });
    };
    if (frame.leaseEpoch !== this.runtime.leaseEpoch) {
      refuse(`write_prepare for lease epoch ${frame.leaseEpoch}; this runtime holds epoch ${this.runtime.leaseEpoch}.`);
      return;
    }
    if (this.runtime.writesBlocked) {
      refuse("Writes are blocked for this session after a browser restart or an unknown outcome; delete the session and create a new one.");
      return;
    }
    let entry: JournalEntry;
    try {
      entry = await this.runtime.journal.prepare({ commandId: frame.commandId, name: frame.name, leaseEpoch: frame.leaseEpoch, dryRun: frame.dryRun });
    } catch (error) {
      if (!(error instanceof JournalFullError)) throw error;
      refuse("The extension holds 64 unacknowledged writes; acknowledge their results first.");
      return;
    }
    if (entry.state !== "prepared") {
      refuse("This command id was already granted; poll its outcome instead of preparing it again.");
      return;
    }
    this.runtime.send({ type: "write_ready", commandId: frame.commandId, leaseEpoch: frame.leaseEpoch });
  }

  async grant(frame: SessionServerWriteGrant): Promise<void> {
    const entry = this.runtime.journal.get(frame.commandId);
    if (entry?.state === "completed_unacked") {
      this.sendResult(entry, true);
      return;
    }
    if (entry?.state !== "prepared" || entry.leaseEpoch !== frame.leaseEpoch || frame.leaseEpoch !== this.runtime.leaseEpoch) {
      this.runtime.send({
        type: "error",
        code: "write_refused",
        message: "write_grant without a matching prepared entry of this lease epoch; the write was not executed.",
        commandId: frame.commandId,
      });
      return;
    }
    const decoded = decodeCommand(frame.command);
    if (!decoded.ok || decoded.value.name !== entry.name) {
      const message = decoded.ok ? `The grant carries ${decoded.value.name} but ${entry.name} was prepared.` : decoded.message;
      await this.finish(entry, failed(new CommandError("invalid_arguments", message)));
      return;
    }
    const command = decoded.value;
    const check = this.runtime.authority(frame.leaseEpoch);
    const deadlineMs = this.runtime.deadlineOf(frame.deadlineAt);
    // The plaintext of fill_secret lives only in this closure until the task ran.
    const secretValue = frame.secretValue;
    this.runtime.queue.enqueue(frame.commandId, () => this.execute(entry, command, frame.dryRun, secretValue, deadlineMs, check));
  }

  private async execute(
    entry: JournalEntry,
    command: Command,
    dryRun: boolean,
    secretValue: string | undefined,
    deadlineMs: number,
    check: () => void,
  ): Promise<void> {
    const ctx = this.runtime.context(deadlineMs, check);
    let plan;
    try {
      check();
      plan = await planWrite(ctx, command, dryRun, secretValue);
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
    await this.runtime.journal.markStarted(entry.commandId);
    let outcome: StoredOutcome;
    try {
      const { blocked } = await this.runtime.attributing(entry.commandId, async () => {
        await plan.act();
        await this.runtime.settleWindow(deadlineMs, SETTLE_OF[entry.name]);
      });
      const result = await this.writeResult(entry.name, ctx);
      outcome = { outcome: "succeeded", result: blocked.length > 0 ? { ...result, blockedNavigations: blocked } : result };
    } catch (error) {
      // Authority lost after `started`: say nothing; the entry stays started and becomes unknown.
      if (error instanceof StaleAuthorityError) return;
      outcome = failed(error);
    }
    await this.finish(entry, outcome);
  }

  private async writeResult(name: WriteCommandName, ctx: ReturnType<SessionRuntime["context"]>, preview?: WriteResult["preview"]): Promise<WriteResult> {
    let url = "";
    let title = "";
    try {
      ({ url, title } = await ctx.tab());
    } catch (error) {
      if (error instanceof StaleAuthorityError) throw error;
      // The write happened; a tab that closed afterwards does not turn it into a failure.
    }
    return { name, url, title, generation: ctx.refs.generation, ...(preview === undefined ? {} : { preview }) };
  }

  private async finish(entry: JournalEntry, outcome: StoredOutcome): Promise<void> {
    let completed: JournalEntry;
    try {
      completed = await this.runtime.journal.complete(entry.commandId, outcome);
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
    this.runtime.send({
      type: "result",
      commandId: entry.commandId,
      outcome: outcome.outcome,
      ...(outcome.result === undefined ? {} : { result: outcome.result }),
      ...(outcome.error === undefined ? {} : { error: outcome.error }),
      ...(replayed ? { replayed: true } : {}),
    });
  }

  async acknowledge(commandId: string): Promise<void> {
    if (this.runtime.journal.get(commandId)?.state === "completed_unacked") await this.runtime.journal.drop([commandId]);
  }

  /** Drops an ungranted preparation, or a queued command that has not started. */
  async cancel(commandId: string): Promise<void> {
    const removed = this.runtime.queue.cancel(commandId);
    const entry = this.runtime.journal.get(commandId);
    if (entry?.state === "prepared" && (removed || this.runtime.queue.current !== commandId)) await this.runtime.journal.drop([commandId]);
  }

  /** After hello: drop the preparations the backend cancelled and the writes it declared unknown. */
  async applyVerdict(cancel: readonly string[], unknown: readonly string[]): Promise<void> {
    const drop = [
      ...cancel.filter((id) => this.runtime.journal.get(id)?.state === "prepared"),
      ...unknown.filter((id) => this.runtime.journal.get(id)?.state === "started"),
    ];
    for (const id of cancel) this.runtime.queue.cancel(id);
    if (drop.length > 0) await this.runtime.journal.drop(drop);
  }

  /** Sends every completed but unacknowledged result again, marked `replayed`. */
  replayCompleted(): void {
    for (const entry of this.runtime.journal.list()) {
      if (entry.state === "completed_unacked") this.sendResult(entry, true);
    }
  }
}

function safeOrigin(url: string): string | undefined {
  try {
    const origin = new URL(url).origin;
    return origin === "null" ? undefined : origin;
  } catch {
    return undefined;
  }
}
