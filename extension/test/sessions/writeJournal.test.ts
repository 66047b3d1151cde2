import { describe, expect, it, vi } from "vitest";

import { IllegalTransitionError, JOURNAL_DROP_FLUSH_MS, JournalFullError, WriteJournal, journalKey } from "../../src/sessions/writeJournal";
import { FakeStorageArea } from "../fakes/fakeChrome";

const SESSION = "7d0c4f5e-3b7a-4f0e-9a51-2f7f2a6b9c10";
const COMMAND = "c3a1e0f2-94d1-4b5e-8d5c-0e6f1a2b3c4d";

function stored(area: FakeStorageArea): { commandId: string; state: string }[] {
  return (area.data.get(journalKey(SESSION)) ?? []) as { commandId: string; state: string }[];
}

describe("WriteJournal", () => {
  it("resolves prepare, markStarted and complete only once storage holds the move, memory following storage", async () => {
    const area = new FakeStorageArea();
    const journal = new WriteJournal(area, SESSION);
    const moves: [string, () => Promise<unknown>][] = [
      ["prepared", () => journal.prepare({ commandId: COMMAND, name: "click", leaseEpoch: 1, dryRun: false })],
      ["started", () => journal.markStarted(COMMAND)],
      ["completed_unacked", () => journal.complete(COMMAND, { outcome: "succeeded", result: { name: "click", url: "https://example.com/", title: "", generation: 3 } })],
    ];
    let before: string | undefined;
    for (const [state, move] of moves) {
      let open: () => void = () => undefined;
      area.gate = new Promise((resolve) => (open = resolve));
      let back = false;
      const done = move().then(() => (back = true));
      await new Promise((resolve) => setTimeout(resolve, 0));
      // Held back in storage: the caller waits, and memory still says what storage holds.
      expect(back).toBe(false);
      expect(journal.get(COMMAND)?.state).toBe(before);
      expect(stored(area).map((e) => e.state)).toEqual(before === undefined ? [] : [before]);
      area.gate = undefined;
      open();
      await done;
      expect(stored(area).map((e) => e.state)).toEqual([state]);
      expect(journal.get(COMMAND)?.state).toBe(state);
      before = state;
    }
    // One set per move, each carrying the whole journal.
    expect(area.writes.map((w) => (JSON.parse(w) as { state: string }[]).map((e) => e.state))).toEqual([["prepared"], ["started"], ["completed_unacked"]]);
    await journal.drop([COMMAND]);
    expect(journal.list()).toEqual([]);
    await journal.flush();
    expect(stored(area)).toEqual([]);
  });

  it("does not take a prepare or a completion storage refused: the caller gets the error, memory keeps what storage holds", async () => {
    const area = new FakeStorageArea();
    const journal = new WriteJournal(area, SESSION);
    area.failSet = true;
    await expect(journal.prepare({ commandId: COMMAND, name: "click", leaseEpoch: 1, dryRun: false })).rejects.toThrow(/quota/);
    expect(journal.list()).toEqual([]);
    area.failSet = false;
    await journal.prepare({ commandId: COMMAND, name: "click", leaseEpoch: 1, dryRun: false });
    await journal.markStarted(COMMAND);
    area.failSet = true;
    await expect(journal.complete(COMMAND, { outcome: "failed", error: { code: "cdp_error", message: "x" } })).rejects.toThrow(/quota/);
    expect(journal.get(COMMAND)?.state).toBe("started");
    expect(stored(area).map((e) => e.state)).toEqual(["started"]);
  });

  it("forgets a dropped entry at once and writes the drop with the next write, or alone after a while", async () => {
    vi.useFakeTimers();
    try {
      const area = new FakeStorageArea();
      const journal = new WriteJournal(area, SESSION);
      const other = "0d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f6a";
      await journal.prepare({ commandId: COMMAND, name: "click", leaseEpoch: 1, dryRun: false });
      await journal.complete(COMMAND, { outcome: "failed", error: { code: "stale_ref", message: "stale" } });
      await journal.drop([COMMAND]);
      expect(journal.get(COMMAND)).toBeUndefined();
      // Storage still holds it (a lost drop only keeps an entry longer) ...
      expect(stored(area).map((e) => e.commandId)).toEqual([COMMAND]);
      // ... until the next write, which carries the drop: one write, not two.
      await journal.prepare({ commandId: other, name: "type", leaseEpoch: 1, dryRun: false });
      expect(area.writes).toHaveLength(3);
      expect(stored(area).map((e) => e.commandId)).toEqual([other]);
      await vi.advanceTimersByTimeAsync(JOURNAL_DROP_FLUSH_MS * 2);
      expect(area.writes).toHaveLength(3);
      // With no write coming, the drop is written alone.
      await journal.drop([other]);
      expect(area.writes).toHaveLength(3);
      await vi.advanceTimersByTimeAsync(JOURNAL_DROP_FLUSH_MS);
      expect(area.writes).toHaveLength(4);
      expect(stored(area)).toEqual([]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("seals the entries a hello snapshot reports prepared: they never start or complete, a drop removes them", async () => {
    const area = new FakeStorageArea();
    const journal = new WriteJournal(area, SESSION);
    const other = "d4b2f1a3-05e2-4c6f-9e6d-1f7a2b3c4d5e";
    await journal.prepare({ commandId: COMMAND, name: "click", leaseEpoch: 1, dryRun: false });
    await journal.prepare({ commandId: other, name: "click", leaseEpoch: 1, dryRun: false });
    await journal.markStarted(other);
    const snapshot = await journal.helloSnapshot();
    expect(snapshot.map((e) => [e.commandId, e.state])).toEqual([
      [COMMAND, "prepared"],
      [other, "started"],
    ]);
    expect(journal.isSealed(COMMAND)).toBe(true);
    expect(journal.isSealed(other)).toBe(false);
    await expect(journal.markStarted(COMMAND)).rejects.toBeInstanceOf(IllegalTransitionError);
    await expect(journal.complete(COMMAND, { outcome: "failed", error: { code: "stale_ref", message: "x" } })).rejects.toBeInstanceOf(IllegalTransitionError);
    expect(stored(area).map((e) => e.state)).toEqual(["prepared", "started"]);
    // A started entry still completes: the backend answers unknown or takes its result.
    expect((await journal.complete(other, { outcome: "failed", error: { code: "stale_ref", message: "x" } })).state).toBe("completed_unacked");
    await journal.drop([COMMAND]);
    expect(journal.isSealed(COMMAND)).toBe(false);
  });

  it("takes the hello snapshot after a started still being written, and refuses a started asked for after it", async () => {
    const area = new FakeStorageArea();
    const journal = new WriteJournal(area, SESSION);
    const later = "d4b2f1a3-05e2-4c6f-9e6d-1f7a2b3c4d5e";
    await journal.prepare({ commandId: COMMAND, name: "click", leaseEpoch: 1, dryRun: false });
    await journal.prepare({ commandId: later, name: "click", leaseEpoch: 1, dryRun: false });
    let open: () => void = () => undefined;
    area.gate = new Promise((resolve) => (open = resolve));
    const started = journal.markStarted(COMMAND);
    const snapshot = journal.helloSnapshot();
    const refused = journal.markStarted(later);
    refused.catch(() => undefined);
    area.gate = undefined;
    open();
    expect((await started).state).toBe("started");
    expect((await snapshot).map((e) => [e.commandId, e.state])).toEqual([
      [COMMAND, "started"],
      [later, "prepared"],
    ]);
    await expect(refused).rejects.toBeInstanceOf(IllegalTransitionError);
    expect(stored(area).map((e) => e.state)).toEqual(["started", "prepared"]);
  });

  it("refuses moves the state machine does not allow", async () => {
    const journal = new WriteJournal(new FakeStorageArea(), SESSION);
    await expect(journal.markStarted(COMMAND)).rejects.toBeInstanceOf(IllegalTransitionError);
    await journal.prepare({ commandId: COMMAND, name: "click", leaseEpoch: 1, dryRun: false });
    await journal.markStarted(COMMAND);
    await expect(journal.markStarted(COMMAND)).rejects.toBeInstanceOf(IllegalTransitionError);
    await journal.complete(COMMAND, { outcome: "failed", error: { code: "cdp_error", message: "x" } });
    await expect(journal.markStarted(COMMAND)).rejects.toBeInstanceOf(IllegalTransitionError);
    await expect(journal.complete(COMMAND, { outcome: "failed" })).rejects.toBeInstanceOf(IllegalTransitionError);
  });

  it("allows a prepared write to complete without starting when it failed before acting", async () => {
    const journal = new WriteJournal(new FakeStorageArea(), SESSION);
    await journal.prepare({ commandId: COMMAND, name: "click", leaseEpoch: 1, dryRun: false });
    const entry = await journal.complete(COMMAND, { outcome: "failed", error: { code: "stale_ref", message: "stale" } });
    expect(entry.state).toBe("completed_unacked");
  });

  it("treats a repeated prepare as the same entry", async () => {
    const area = new FakeStorageArea();
    const journal = new WriteJournal(area, SESSION);
    await journal.prepare({ commandId: COMMAND, name: "click", leaseEpoch: 1, dryRun: false });
    await journal.prepare({ commandId: COMMAND, name: "click", leaseEpoch: 1, dryRun: false });
    expect(stored(area)).toHaveLength(1);
  });

  it("writes nothing for a repeated prepare or a drop of entries it does not hold", async () => {
    const area = new FakeStorageArea();
    const journal = new WriteJournal(area, SESSION);
    await journal.prepare({ commandId: COMMAND, name: "click", leaseEpoch: 1, dryRun: false });
    const entry = await journal.prepare({ commandId: COMMAND, name: "click", leaseEpoch: 1, dryRun: false });
    await journal.drop(["0d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f6a"]);
    expect(entry.state).toBe("prepared");
    expect(area.writes).toHaveLength(1);
    await journal.drop([COMMAND]);
    await journal.flush();
    expect(area.writes).toHaveLength(2);
    expect(stored(area)).toEqual([]);
    await journal.flush();
    expect(area.writes).toHaveLength(2);
  });

  it("loads from a storage read it is handed, without reading again", async () => {
    const area = new FakeStorageArea();
    const first = new WriteJournal(area, SESSION);
    await first.prepare({ commandId: COMMAND, name: "type", leaseEpoch: 1, dryRun: false });
    const items = await area.get([journalKey(SESSION), "outbox:elsewhere"]);
    const second = new WriteJournal(area, SESSION);
    await second.load(items);
    expect(area.reads).toHaveLength(1);
    expect(second.get(COMMAND)).toMatchObject({ state: "prepared", name: "type" });
  });

  it("holds at most 64 unacknowledged writes", async () => {
    const journal = new WriteJournal(new FakeStorageArea(), SESSION);
    for (let i = 0; i < 64; i += 1) {
      await journal.prepare({ commandId: `c3a1e0f2-94d1-4b5e-8d5c-${i.toString().padStart(12, "0")}`, name: "click", leaseEpoch: 1, dryRun: false });
    }
    await expect(journal.prepare({ commandId: COMMAND, name: "click", leaseEpoch: 1, dryRun: false })).rejects.toBeInstanceOf(JournalFullError);
  });

  it("loads what an earlier worker persisted", async () => {
    const area = new FakeStorageArea();
    const first = new WriteJournal(area, SESSION);
    await first.prepare({ commandId: COMMAND, name: "fill", leaseEpoch: 2, dryRun: false });
    await first.markStarted(COMMAND);
    const second = new WriteJournal(area, SESSION);
    await second.load();
    expect(second.get(COMMAND)).toMatchObject({ state: "started", name: "fill", leaseEpoch: 2 });
  });

  it("keeps memory unchanged when storage refuses the write", async () => {
    const area = new FakeStorageArea();
    const journal = new WriteJournal(area, SESSION);
    await journal.prepare({ commandId: COMMAND, name: "click", leaseEpoch: 1, dryRun: false });
    area.failSet = true;
    await expect(journal.markStarted(COMMAND)).rejects.toThrow(/quota/);
    expect(journal.get(COMMAND)?.state).toBe("prepared");
  });
});
