/**
 * The extension's side of the write protocol as one decision table: from what the journal holds
 * for a command (nothing, `prepared`, `started`, `completed_unacked`) and what the backend sent,
 * to what `CommandFlow` does. The table is a `Record` over every event and every journal state,
 * so a new event or state does not compile until each combination is decided.
 *
 * The rules it encodes: a write acts only from `prepared`, under the lease epoch it was prepared
 * in; once `started` it is never prepared, run or dropped again except on the backend's word
 * (`hello_ack.unknown`); a completed result is only ever replayed, never recomputed.
 */
import type { JournalState } from "./writeJournal";

/** What arrived, with the checks the flow made before asking (epochs, the writes-blocked mark). */
export type WriteEvent =
  | "prepare" // write_prepare of this lease epoch, writes not blocked
  | "prepare_other_epoch" // write_prepare for a lease epoch this runtime does not hold
  | "prepare_blocked" // write_prepare while the backend says writes are blocked
  | "grant" // write_grant of this lease epoch, matching the prepared entry's
  | "grant_other_epoch" // write_grant whose lease epoch is not the runtime's or the entry's
  | "result_ack" // the backend persisted the result
  | "cancel" // cancel for a command that is not running now
  | "cancel_running" // cancel for the command the queue is running
  | "verdict_cancel" // listed in hello_ack.cancel
  | "verdict_unknown"; // listed in hello_ack.unknown

export type WriteAction =
  | "prepare" // persist prepared, then send write_ready
  | "ready" // already prepared: send write_ready again, persist nothing
  | "refuse_epoch" // error write_refused: another lease epoch
  | "refuse_blocked" // error write_refused: writes are blocked
  | "refuse_granted" // error write_refused: this id was already granted
  | "refuse_grant" // error write_refused: no matching prepared entry; nothing runs
  | "run" // queue the write: started, one action, completed_unacked, result
  | "replay" // send the stored result again, marked replayed
  | "drop" // remove the entry
  | "keep"; // nothing to do

export type Held = JournalState | "absent";

export const WRITE_EVENTS: readonly WriteEvent[] = [
  "prepare",
  "prepare_other_epoch",
  "prepare_blocked",
  "grant",
  "grant_other_epoch",
  "result_ack",
  "cancel",
  "cancel_running",
  "verdict_cancel",
  "verdict_unknown",
];
export const HELD: readonly Held[] = ["absent", "prepared", "started", "completed_unacked"];

const TABLE: Readonly<Record<WriteEvent, Readonly<Record<Held, WriteAction>>>> = {
  prepare: { absent: "prepare", prepared: "ready", started: "refuse_granted", completed_unacked: "refuse_granted" },
  prepare_other_epoch: { absent: "refuse_epoch", prepared: "refuse_epoch", started: "refuse_epoch", completed_unacked: "refuse_epoch" },
  prepare_blocked: { absent: "refuse_blocked", prepared: "refuse_blocked", started: "refuse_blocked", completed_unacked: "refuse_blocked" },
  grant: { absent: "refuse_grant", prepared: "run", started: "refuse_grant", completed_unacked: "replay" },
  grant_other_epoch: { absent: "refuse_grant", prepared: "refuse_grant", started: "refuse_grant", completed_unacked: "replay" },
  result_ack: { absent: "keep", prepared: "keep", started: "keep", completed_unacked: "drop" },
  cancel: { absent: "keep", prepared: "drop", started: "keep", completed_unacked: "keep" },
  cancel_running: { absent: "keep", prepared: "keep", started: "keep", completed_unacked: "keep" },
  verdict_cancel: { absent: "keep", prepared: "drop", started: "keep", completed_unacked: "keep" },
  verdict_unknown: { absent: "keep", prepared: "keep", started: "drop", completed_unacked: "keep" },
};

/** What to do with `event` for a command whose journal entry is in `state` (undefined: none). */
export function decideWrite(state: JournalState | undefined, event: WriteEvent): WriteAction {
  return TABLE[event][state ?? "absent"];
}
