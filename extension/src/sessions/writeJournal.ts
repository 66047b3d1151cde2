/**
 * The write journal of one session, persisted in chrome.storage.session (it survives service-
 * worker eviction, not a browser restart). States follow the seed's durable sequence:
 *
 *   (absent) --write_prepare--> prepared --grant, before the CDP action--> started
 *   started --action finished--> completed_unacked --result_ack--> (dropped)
 *   prepared --grant refused before any action (bad ref, dry run)--> completed_unacked
 *
 * An entry never stores a command's arguments, so neither text nor a secret reaches storage.
 */
import type { StorageArea } from "../chrome/facade";
import { WRITE_JOURNAL_MAX_ENTRIES } from "../constants";
import type { CommandResult, ErrorInfo, WriteCommandName } from "@understudy/protocol";
import { SerialChain } from "./serialChain";

export type JournalState = "prepared" | "started" | "completed_unacked";

export interface StoredOutcome {
  readonly outcome: "succeeded" | "failed";
  readonly result?: CommandResult;
  readonly error?: ErrorInfo;
}

export interface JournalEntry {
  readonly commandId: string;
  readonly name: WriteCommandName;
  readonly leaseEpoch: number;
  readonly dryRun: boolean;
  readonly state: JournalState;
  readonly outcome?: StoredOutcome;
}

const TRANSITIONS: Readonly<Record<JournalState, readonly JournalState[]>> = {
  prepared: ["started", "completed_unacked"],
  started: ["completed_unacked"],
  completed_unacked: [],
};

/** A journal move the state machine does not allow; a bug or a misbehaving backend. */
export class IllegalTransitionError extends Error {
  override readonly name = "IllegalTransitionError";
}

/** The journal is full (64 unacknowledged writes); the backend must acknowledge results first. */
export class JournalFullError extends Error {
  override readonly name = "JournalFullError";
}

export function journalKey(sessionId: string): string {
  return `journal:${sessionId}`;
}

export class WriteJournal {
  private entries: JournalEntry[] = [];
  private readonly chain = new SerialChain();

  constructor(
    private readonly area: StorageArea,
    private readonly sessionId: string,
  ) {}

  /**
   * Loads the persisted entries (after a service-worker restart). `items` is what a storage read
   * that included this journal's key returned, so one read can serve several stores.
   */
  async load(items?: Readonly<Record<string, unknown>>): Promise<void> {
    await this.chain.run(async () => {
      const stored = (items ?? (await this.area.get([journalKey(this.sessionId)])))[journalKey(this.sessionId)];
      this.entries = Array.isArray(stored) ? (stored as JournalEntry[]) : [];
    });
  }

  list(): readonly JournalEntry[] {
    return this.entries;
  }

  get(commandId: string): JournalEntry | undefined {
    return this.entries.find((entry) => entry.commandId === commandId);
  }

  /** Persists `prepared`. Idempotent for a repeated prepare of the same command. */
  prepare(entry: Omit<JournalEntry, "state" | "outcome">): Promise<JournalEntry> {
    return this.mutate((entries) => {
      const existing = entries.find((e) => e.commandId === entry.commandId);
      if (existing !== undefined) return { entries, entry: existing };
      if (entries.length >= WRITE_JOURNAL_MAX_ENTRIES) {
        throw new JournalFullError(`The write journal holds ${WRITE_JOURNAL_MAX_ENTRIES} unacknowledged writes.`);
      }
      const prepared: JournalEntry = { ...entry, state: "prepared" };
      return { entries: [...entries, prepared], entry: prepared };
    });
  }

  /** Persists `started`: from here on a crash makes the outcome unknown. */
  markStarted(commandId: string): Promise<JournalEntry> {
    return this.transition(commandId, "started");
  }

  /** Persists `completed_unacked` with the outcome, before the result is sent. */
  complete(commandId: string, outcome: StoredOutcome): Promise<JournalEntry> {
    return this.transition(commandId, "completed_unacked", outcome);
  }

  /** Drops entries (acknowledged results, cancelled preparations, writes declared unknown). */
  async drop(commandIds: readonly string[]): Promise<void> {
    const ids = new Set(commandIds);
    await this.mutate((entries) => {
      const kept = entries.filter((e) => !ids.has(e.commandId));
      return { entries: kept.length === entries.length ? entries : kept, entry: undefined };
    });
  }

  /** Removes the whole journal (the lease ended). */
  async clear(): Promise<void> {
    await this.chain.run(async () => {
      this.entries = [];
      await this.area.remove([journalKey(this.sessionId)]);
    });
  }

  private transition(commandId: string, to: JournalState, outcome?: StoredOutcome): Promise<JournalEntry> {
    return this.mutate((entries) => {
      const index = entries.findIndex((e) => e.commandId === commandId);
      const current = entries[index];
      if (current === undefined) throw new IllegalTransitionError(`No journal entry to move to ${to}.`);
      if (!TRANSITIONS[current.state].includes(to)) {
        throw new IllegalTransitionError(`Journal entry cannot move from ${current.state} to ${to}.`);
      }
      const next: JournalEntry = outcome === undefined ? { ...current, state: to } : { ...current, state: to, outcome };
      const copy = [...entries];
      copy[index] = next;
      return { entries: copy, entry: next };
    });
  }

  /**
   * Applies `change` to the entries. A change that returns the same array (a repeated prepare, a
   * drop of absent ids) writes nothing: once loaded, memory holds only what storage holds, so
   * storage already has it.
   */
  private mutate<T>(change: (entries: JournalEntry[]) => { entries: JournalEntry[]; entry: T }): Promise<T> {
    return this.chain.run(async () => {
      const { entries, entry } = change(this.entries);
      if (entries === this.entries) return entry;
      // Persist first; memory follows only once storage holds the new state.
      await this.area.set({ [journalKey(this.sessionId)]: entries });
      this.entries = entries;
      return entry;
    });
  }
}
