import { describe, expect, it } from "vitest";

import { HELD, type Held, WRITE_EVENTS, type WriteAction, type WriteEvent, decideWrite } from "../../src/sessions/writeProtocol";

/** The extension's write protocol, written out: every (event, journal state) and its action. */
const TABLE = `
prepare              absent             prepare
prepare              prepared           ready
prepare              started            refuse_granted
prepare              completed_unacked  refuse_granted
prepare_other_epoch  absent             refuse_epoch
prepare_other_epoch  prepared           refuse_epoch
prepare_other_epoch  started            refuse_epoch
prepare_other_epoch  completed_unacked  refuse_epoch
prepare_blocked      absent             refuse_blocked
prepare_blocked      prepared           refuse_blocked
prepare_blocked      started            refuse_blocked
prepare_blocked      completed_unacked  refuse_blocked
grant                absent             refuse_grant
grant                prepared           run
grant                started            refuse_grant
grant                completed_unacked  replay
grant_other_epoch    absent             refuse_grant
grant_other_epoch    prepared           refuse_grant
grant_other_epoch    started            refuse_grant
grant_other_epoch    completed_unacked  replay
result_ack           absent             keep
result_ack           prepared           keep
result_ack           started            keep
result_ack           completed_unacked  drop
cancel               absent             keep
cancel               prepared           drop
cancel               started            keep
cancel               completed_unacked  keep
cancel_running       absent             keep
cancel_running       prepared           keep
cancel_running       started            keep
cancel_running       completed_unacked  keep
verdict_cancel       absent             keep
verdict_cancel       prepared           drop
verdict_cancel       started            keep
verdict_cancel       completed_unacked  keep
verdict_unknown      absent             keep
verdict_unknown      prepared           keep
verdict_unknown      started            drop
verdict_unknown      completed_unacked  keep
`;

const EXPECTED = new Map(
  TABLE.trim()
    .split("\n")
    .map((line) => {
      const [event, held, action] = line.split(/\s+/) as [WriteEvent, Held, WriteAction];
      return [`${event} ${held}`, action] as const;
    }),
);

function decide(held: Held, event: WriteEvent): WriteAction {
  return decideWrite(held === "absent" ? undefined : held, event);
}

describe("the extension's write decision table", () => {
  it("decides every (event, journal state) as written out, and nothing else", () => {
    const decided = new Map<string, WriteAction>();
    for (const event of WRITE_EVENTS) for (const held of HELD) decided.set(`${event} ${held}`, decide(held, event));
    expect(decided).toEqual(EXPECTED);
  });

  it("runs a write only from prepared, on a grant of its own lease epoch", () => {
    const running = [...EXPECTED].filter(([, action]) => action === "run").map(([key]) => key);
    expect(running).toEqual(["grant prepared"]);
  });

  it("never drops or re-runs a started write except on the backend's unknown verdict", () => {
    for (const event of WRITE_EVENTS) {
      const action = decide("started", event);
      expect(action === "drop" ? event : "kept").toBe(event === "verdict_unknown" ? "verdict_unknown" : "kept");
      expect(["run", "prepare", "ready", "replay"]).not.toContain(action);
    }
  });

  it("only replays a completed result, and drops it only once the backend acknowledged it", () => {
    for (const event of WRITE_EVENTS) {
      const action = decide("completed_unacked", event);
      expect(["run", "prepare", "ready"]).not.toContain(action);
      if (action === "drop") expect(event).toBe("result_ack");
    }
  });
});
