/**
 * The write journal of one session, persisted in chrome.storage.session (it survives service-
 * worker eviction, not a browser restart). States follow the seed's durable sequence:
 *
 *   (absent) --write_prepare--> prepared --grant, before the CDP action--> started
 *   started --action finished--> completed_unacked --result_ack--> (dropped)
 *   prepared --grant refused before any action (bad ref, dry run)--> completed_unacked
 *
 * An entry never stores a command's arguments, so neither text nor a secret reaches storage.
 *
 * Every move towards running a write is in storage before the caller goes on, as the seed's
 * durable sequence orders it: `prepared` before `write_ready`, `started` before the first input,
 * `completed_unacked` before the result. Memory follows storage (a move is taken in memory only
 * once its write landed; a write that fails leaves memory as storage holds it and the caller
 * gets the error), so every frame built from memory says what a restarted worker would find: a
 * repeated prepare's `write_ready`, a replayed result, the hello's journal. A stop after a frame
 * left therefore finds its move in storage: a preparation the backend may have granted is still
 * there to be cancelled (`not_started`), a result it may not have received is still there to be
 * replayed. Each write puts the whole journal in one `set`, through one chain, so storage never
 * holds a later state of an entry without the earlier ones.
 *
 * A drop is not waited for: memory forgets the entry at once and storage follows with the
 * journal's next write, or `JOURNAL_DROP_FLUSH_MS` later when none comes, so an acknowledgement
 * costs no storage write of its own on a busy session. A drop lost to a worker stop (or a failed
 * write) only keeps an entry longer: the next write carries it, and the next hello reports it,
 * the backend answers a replayed result with another `result_ack`, a preparation with `cancel`,
 * a started entry with `unknown` again (see `_write_protocol.py`).
 *
 * The hello's journal is a promise about each entry (`helloSnapshot`): the backend settles an
 * entry reported `prepared` as `not_started` and tells its caller a retry is safe, so such an
 * entry is sealed when the snapshot is taken and never moves again (only a drop, the backend's
 * cancel, removes it). The snapshot runs on the journal's chain, after every move already asked
 * for: a `started` still being written lands first and is reported `started` (the backend then
 * answers unknown), and a `started` asked for after the snapshot finds the entry sealed and is
 * refused, so the write never acts.
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

/** How long a drop waits for another journal write to carry it before it is written alone. */
export const JOURNAL_DROP_FLUSH_MS = 250;

export function journalKey(sessionId: string): string {
  return `journal:${sessionId}`;
}

export class WriteJournal {
  private entries: JournalEntry[] = [];
  private readonly chain = new SerialChain();
  /** Memory dropped entries that storage still holds (see the module comment). */
  private dirty = false;
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  /** Entries a hello reported `prepared`: they never move again (see the module comment). */
  private readonly sealed = new Set<string>();

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

  /**
   * The entries as a hello reports them, once every move asked for before has landed (or
   * failed); each entry then `prepared` is sealed in the same step: it never moves to `started`
   * or `completed_unacked` from here on (see the module comment).
   */
  helloSnapshot(): Promise<readonly JournalEntry[]> {
    return this.chain.run(() => {
      for (const entry of this.entries) if (entry.state === "prepared") this.sealed.add(entry.commandId);
      return Promise.resolve(this.entries);
    });
  }

  /** Whether a hello reported this entry `prepared`, so it must never act. */
  isSealed(commandId: string): boolean {
    return this.sealed.has(commandId);
  }

  /** Persists `prepared`, before `write_ready`. Idempotent for a repeated prepare of the same command. */
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

  /** Persists `started`, before the first input: from here on a crash makes the outcome unknown. */
  markStarted(commandId: string): Promise<JournalEntry> {
    return this.transition(commandId, "started");
  }

  /** Persists `completed_unacked` with the outcome, before the result is sent. */
  complete(commandId: string, outcome: StoredOutcome): Promise<JournalEntry> {
    return this.transition(commandId, "completed_unacked", outcome);
  }

  /**
   * Drops entries (acknowledged results, cancelled preparations, writes declared unknown) from
   * memory; storage follows later (see the module comment). Resolves once memory dropped them.
   */
  drop(commandIds: readonly string[]): Promise<void> {
    const ids = new Set(commandIds);
    return this.chain.run(() => {
      const kept = this.entries.filter((e) => !ids.has(e.commandId));
      for (const id of ids) this.sealed.delete(id);
      if (kept.length === this.entries.length) return Promise.resolve();
      this.entries = kept;
      this.dirty = true;
      this.flushTimer ??= setTimeout(() => {
        this.flushTimer = undefined;
        this.flush().catch(() => undefined); // kept dirty: the next write or flush carries it
      }, JOURNAL_DROP_FLUSH_MS);
      return Promise.resolve();
    });
  }

  /** Writes drops that storage does not hold yet. */
  flush(): Promise<void> {
    return this.chain.run(async () => {
      if (this.dirty) await this.write(this.entries);
    });
  }

  /** Removes the whole journal (the lease ended). */
  async clear(): Promise<void> {
    this.cancelFlush();
    await this.chain.run(async () => {
      this.entries = [];
      this.sealed.clear();
      this.dirty = false;
      await this.area.remove([journalKey(this.sessionId)]);
    });
  }

  private cancelFlush(): void {
    if (this.flushTimer !== undefined) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
  }

  /** Puts `entries` in storage, carrying any pending drop. */
  private async write(entries: JournalEntry[]): Promise<void> {
    await this.area.set({ [journalKey(this.sessionId)]: entries });
    this.dirty = false;
    this.cancelFlush();
  }

  private transition(commandId: string, to: JournalState, outcome?: StoredOutcome): Promise<JournalEntry> {
    return this.mutate((entries) => {
      const index = entries.findIndex((e) => e.commandId === commandId);
      const current = entries[index];
      if (current === undefined) throw new IllegalTransitionError(`No journal entry to move to ${to}.`);
      if (this.sealed.has(commandId)) {
        throw new IllegalTransitionError(`A hello reported this entry prepared; it cannot move to ${to}.`);
      }
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
   * Applies `change` to the entries. A change that returns the same array (a repeated prepare)
   * writes nothing: once loaded, memory holds what storage holds but for drops not yet written,
   * and a drop is never needed in storage before the caller goes on.
   */
  private mutate<T>(change: (entries: JournalEntry[]) => { entries: JournalEntry[]; entry: T }): Promise<T> {
    return this.chain.run(async () => {
      const { entries, entry } = change(this.entries);
      if (entries === this.entries) return entry;
      // Persist first; memory follows only once storage holds the new state.
      await this.write(entries);
      this.entries = entries;
      return entry;
    });
  }
}
