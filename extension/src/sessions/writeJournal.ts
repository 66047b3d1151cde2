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
 * Only one move must be in storage before the caller goes on: `started`, before the first input.
 * It is what makes a write run at most once: a crash after the action leaves an entry that the
 * next hello reports as started, which the backend declares unknown and which no later grant or
 * prepare of that id can move back to running. The other moves take effect in memory at once and
 * reach storage in the order they were made, while the caller already sends its frame:
 *
 * - `prepared`, while `write_ready` goes out. A crash before the write lands leaves no entry: a
 *   grant that reaches a restarted worker finds nothing prepared and is refused without acting,
 *   and the backend's table settles the command from the hello's silence (`not_started` when it
 *   had not granted yet, `unknown` when it had: "lost from the journal: it may have run"). Such a
 *   crash can only turn a write that did not run into an unknown one, never run it.
 * - `completed_unacked`, while the `result` goes out. A crash before the write lands leaves the
 *   entry `started`: the next hello reports it, and the backend keeps the result it received (or
 *   declares the write unknown if it did not), and nothing runs again, because a started entry
 *   refuses every grant and prepare. A backend that holds the result says nothing about such an
 *   entry, so it stays in the journal until the lease ends (one of its 64 places).
 * - drops (acknowledged results, cancelled preparations, writes declared unknown): storage follows
 *   with the journal's next write, or `JOURNAL_DROP_FLUSH_MS` later when none comes, so an
 *   acknowledgement costs no storage write of its own on a busy session. A drop lost to a worker
 *   stop only keeps an entry longer: the next hello reports it, the backend answers a replayed
 *   result with another `result_ack`, a preparation with `cancel`, a started entry with `unknown`
 *   again (see `_write_protocol.py`).
 *
 * Writes reach storage in order (one chain), and each writes the whole journal as memory holds it,
 * so storage never holds a later state without the earlier ones of the same entry, and a write
 * that failed is carried by the next one. A `started` write follows the `prepared` one that memory
 * already holds, so a grant that arrives before `prepared` reached storage still acts only once
 * `started` did.
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
   * Records `prepared`; resolves once memory holds it, with its storage write under way (see the
   * module comment). Idempotent for a repeated prepare of the same command.
   */
  prepare(entry: Omit<JournalEntry, "state" | "outcome">): Promise<JournalEntry> {
    return this.stage((entries) => {
      const existing = entries.find((e) => e.commandId === entry.commandId);
      if (existing !== undefined) return { entries, entry: existing };
      if (entries.length >= WRITE_JOURNAL_MAX_ENTRIES) {
        throw new JournalFullError(`The write journal holds ${WRITE_JOURNAL_MAX_ENTRIES} unacknowledged writes.`);
      }
      const prepared: JournalEntry = { ...entry, state: "prepared" };
      return { entries: [...entries, prepared], entry: prepared };
    });
  }

  /**
   * Persists `started`, and resolves only once storage holds it: from here on a crash makes the
   * outcome unknown. The one move the caller must wait for before it acts.
   */
  markStarted(commandId: string): Promise<JournalEntry> {
    return this.mutate(transitionTo(commandId, "started"));
  }

  /**
   * Records `completed_unacked` with the outcome; resolves once memory holds it, with its storage
   * write under way, so the result can be sent at once (see the module comment).
   */
  complete(commandId: string, outcome: StoredOutcome): Promise<JournalEntry> {
    return this.stage(transitionTo(commandId, "completed_unacked", outcome));
  }

  /** Resolves once every journal write asked for so far has settled (landed or failed). */
  written(): Promise<void> {
    return this.chain.run(() => Promise.resolve());
  }

  /**
   * Drops entries (acknowledged results, cancelled preparations, writes declared unknown) from
   * memory; storage follows later (see the module comment). Resolves once memory dropped them.
   */
  drop(commandIds: readonly string[]): Promise<void> {
    const ids = new Set(commandIds);
    return this.chain.run(() => {
      const kept = this.entries.filter((e) => !ids.has(e.commandId));
      if (kept.length === this.entries.length) return Promise.resolve();
      this.entries = kept;
      this.dirty = true;
      this.flushLater();
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
      this.dirty = false;
      await this.area.remove([journalKey(this.sessionId)]);
    });
  }

  /** Writes what memory holds that storage does not, `JOURNAL_DROP_FLUSH_MS` from now. */
  private flushLater(): void {
    this.flushTimer ??= setTimeout(() => {
      this.flushTimer = undefined;
      this.flush().catch(() => undefined); // kept dirty: the next write or flush carries it
    }, JOURNAL_DROP_FLUSH_MS);
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

  /**
   * Applies `change` to the entries. A change that returns the same array (a repeated prepare)
   * writes nothing: once loaded, memory holds what storage holds but for staged moves and drops
   * not yet written, and neither is needed in storage before the caller goes on.
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

  /**
   * Applies `change` to memory and queues its storage write behind the writes already asked for;
   * resolves once memory holds the change, not waiting for storage (see the module comment). A
   * write that fails leaves the journal dirty: the next write carries it, or a flush a little later.
   */
  private stage<T>(change: (entries: JournalEntry[]) => { entries: JournalEntry[]; entry: T }): Promise<T> {
    const applied = this.chain.run(() => {
      const { entries, entry } = change(this.entries);
      if (entries !== this.entries) {
        this.entries = entries;
        this.dirty = true;
      }
      return Promise.resolve(entry);
    });
    this.chain
      .run(async () => {
        if (this.dirty) await this.write(this.entries);
      })
      .catch(() => {
        this.flushLater();
      });
    return applied;
  }
}

/** The change that moves `commandId` to `to`, refusing moves the state machine does not allow. */
function transitionTo(
  commandId: string,
  to: JournalState,
  outcome?: StoredOutcome,
): (entries: JournalEntry[]) => { entries: JournalEntry[]; entry: JournalEntry } {
  return (entries) => {
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
  };
}
