import { describe, expect, it } from "vitest";

import type { AuthorityCheck } from "../../src/cdp/cdpSession";
import type { CommandContext } from "../../src/commands/context";
import { CommandError, StaleAuthorityError } from "../../src/errors";
import type { BlockedNavigation, SessionClientFrame } from "@understudy/protocol";
import { CommandFlow, type CommandHost, type CommandRunners } from "../../src/sessions/commandFlow";
import { JOURNAL_DROP_FLUSH_MS, journalKey } from "../../src/sessions/writeJournal";
import { FakeStorageArea } from "../fakes/fakeChrome";

const SESSION = "7d0c4f5e-3b7a-4f0e-9a51-2f7f2a6b9c10";
const FUTURE = "2099-01-01T00:00:00Z";
const TAB = { tabId: 7, url: "https://example.com/", title: "Example", active: true };
let ids = 0;
const nextId = (): string => `00000000-0000-4000-8000-${String(++ids).padStart(12, "0")}`;

/** A runtime as the flow sees it: a socket that records frames and an authority a test can move. */
class FakeHost implements CommandHost {
  readonly sent: SessionClientFrame[] = [];
  leaseEpoch = 1;
  moved = false;
  /** Called as each frame leaves. */
  onSend: (frame: SessionClientFrame) => void = () => undefined;

  send(frame: SessionClientFrame): boolean {
    this.sent.push(frame);
    this.onSend(frame);
    return true;
  }

  authority(leaseEpoch: number = this.leaseEpoch): AuthorityCheck {
    return () => {
      if (this.moved || this.leaseEpoch !== leaseEpoch) throw new StaleAuthorityError("The session's authority changed.");
    };
  }

  context(_deadlineMs: number, check: AuthorityCheck): CommandContext {
    const tab = (): Promise<typeof TAB> => {
      check();
      return Promise.resolve(TAB);
    };
    return { tab, writtenTab: tab, refs: { generation: 3 } } as unknown as CommandContext;
  }

  async attributing<T>(_commandId: string, task: () => Promise<T>): Promise<{ value: T; blocked: BlockedNavigation[] }> {
    return { value: await task(), blocked: [] };
  }

  settleWindow(): Promise<void> {
    return Promise.resolve();
  }

  now(): number {
    return Date.parse("2026-12-01T00:00:00Z");
  }

  framesOf<T extends SessionClientFrame["type"]>(type: T): Extract<SessionClientFrame, { type: T }>[] {
    return this.sent.filter((f): f is Extract<SessionClientFrame, { type: T }> => f.type === type);
  }
}

interface Fixture {
  host: FakeHost;
  area: FakeStorageArea;
  flow: CommandFlow;
  /** What the journal held in storage each time a write acted. */
  acted: string[][];
  warnings: string[];
  /** Lets held-back storage writes land (see `FakeStorageArea.gate`). */
  open: () => void;
  /** What storage held as each frame left: what a worker stop right after that frame leaves. */
  storedAtSend: { type: SessionClientFrame["type"]; data: Map<string, unknown> }[];
}

function fixture(act?: (f: Fixture) => Promise<void>, area = new FakeStorageArea(), plan?: (f: Fixture) => Promise<void>): Fixture {
  const host = new FakeHost();
  const warnings: string[] = [];
  const log = { info: () => undefined, warn: (event: string) => warnings.push(event) };
  const f = { host, area, acted: [], warnings, open: () => undefined, storedAtSend: [] } as unknown as Fixture;
  host.onSend = (frame) => f.storedAtSend.push({ type: frame.type, data: structuredClone(area.data) });
  const runners: CommandRunners = {
    planWrite: async () => {
      await plan?.(f);
      return {
        preview: { allowed: true },
        act: async () => {
          f.acted.push(states(f));
          await act?.(f);
        },
      };
    },
    runRead: () => Promise.resolve({ name: "get_tabs", tabs: [TAB] }),
  };
  f.flow = new CommandFlow(host, area, SESSION, log, runners);
  return f;
}

/**
 * A worker that stopped and started again: a new flow that loads what storage holds now. Writes
 * still held back by the old storage gate never land (the worker died with them in flight). Acts
 * of the new flow are counted with the old one's.
 */
async function restarted(f: Fixture, data: ReadonlyMap<string, unknown> = f.area.data): Promise<Fixture> {
  const area = new FakeStorageArea();
  for (const [key, value] of data) area.data.set(key, structuredClone(value));
  const next = fixture(undefined, area);
  next.acted = f.acted;
  await next.flow.load();
  return next;
}

/** A worker that stopped right after its first frame of `type` left, restarted from what storage held then. */
function restartedAfter(f: Fixture, type: SessionClientFrame["type"]): Promise<Fixture> {
  const at = f.storedAtSend.find((s) => s.type === type);
  if (at === undefined) throw new Error(`No ${type} frame was sent.`);
  return restarted(f, at.data);
}

/** Lets every pending storage write and frame handler run that can (a gated write stays held). */
const ticks = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 5));

function states(f: Pick<Fixture, "area">): string[] {
  return statesIn(f.area.data);
}

function statesIn(data: ReadonlyMap<string, unknown>): string[] {
  const entries = (data.get(journalKey(SESSION)) ?? []) as { state: string }[];
  return entries.map((e) => e.state);
}

async function prepared(f: Fixture, commandId = nextId()): Promise<string> {
  await f.flow.prepare({ type: "write_prepare", commandId, name: "click", leaseEpoch: 1, dryRun: false, readyBy: FUTURE });
  return commandId;
}

async function granted(f: Fixture, commandId: string, leaseEpoch = 1): Promise<void> {
  await f.flow.grant({ type: "write_grant", commandId, leaseEpoch, command: { name: "click", ref: "g1e1" }, dryRun: false, deadlineAt: FUTURE });
  await f.flow.idle();
}

describe("CommandFlow", () => {
  it("answers write_ready, also to a repeated write_prepare, only once prepared is in storage", async () => {
    const f = fixture();
    let open: () => void = () => undefined;
    f.area.gate = new Promise((resolve) => (open = resolve));
    const commandId = nextId();
    const frame = { type: "write_prepare", commandId, name: "click", leaseEpoch: 1, dryRun: false, readyBy: FUTURE } as const;
    const first = f.flow.prepare(frame);
    await ticks();
    const again = f.flow.prepare(frame);
    await ticks();
    expect(f.host.sent).toEqual([]);
    expect(f.flow.journalEntries()).toEqual([]);
    f.area.gate = undefined;
    open();
    await Promise.all([first, again]);
    expect(f.host.framesOf("write_ready")).toEqual([
      { type: "write_ready", commandId, leaseEpoch: 1 },
      { type: "write_ready", commandId, leaseEpoch: 1 },
    ]);
    expect(f.storedAtSend.map((at) => statesIn(at.data))).toEqual([["prepared"], ["prepared"]]);
  });

  it("acts once, with started persisted before the act, and sends the result only once completed_unacked is in storage", async () => {
    const f = fixture(async (fx) => {
      fx.area.gate = new Promise((resolve) => (fx.open = resolve));
      return Promise.resolve();
    });
    const commandId = await prepared(f);
    const grant = granted(f, commandId);
    await ticks();
    expect(f.acted).toEqual([["started"]]);
    expect(f.host.framesOf("result")).toEqual([]);
    expect(states(f)).toEqual(["started"]);
    f.area.gate = undefined;
    f.open();
    await grant;
    expect(f.host.framesOf("result")).toEqual([
      { type: "result", commandId, outcome: "succeeded", result: { name: "click", url: TAB.url, title: TAB.title, generation: 3 } },
    ]);
    expect(f.storedAtSend.filter((at) => at.type === "result").map((at) => statesIn(at.data))).toEqual([["completed_unacked"]]);
  });

  it("answers a repeated grant of a completed write with the stored result, never acting again", async () => {
    const f = fixture();
    const commandId = await prepared(f);
    await granted(f, commandId);
    await granted(f, commandId);
    expect(f.acted).toHaveLength(1);
    expect(f.host.framesOf("result").map((r) => r.replayed)).toEqual([undefined, true]);
  });

  it("refuses a grant that was never prepared, or for another lease epoch, without acting", async () => {
    const f = fixture();
    await granted(f, nextId());
    const commandId = await prepared(f);
    await granted(f, commandId, 2);
    expect(f.acted).toEqual([]);
    expect(f.host.framesOf("error").map((e) => e.code)).toEqual(["write_refused", "write_refused"]);
    expect(states(f)).toEqual(["prepared"]);
  });

  it("refuses a prepare for another lease epoch, and any prepare once writes are blocked", async () => {
    const f = fixture();
    await f.flow.prepare({ type: "write_prepare", commandId: nextId(), name: "click", leaseEpoch: 2, dryRun: false, readyBy: FUTURE });
    await f.flow.applyVerdict({ cancel: [], unknown: [], writesBlocked: true });
    expect(f.flow.writesBlocked).toBe(true);
    await prepared(f);
    expect(f.host.framesOf("write_ready")).toEqual([]);
    expect(f.host.framesOf("error").map((e) => e.code)).toEqual(["write_refused", "write_refused"]);
    expect(states(f)).toEqual([]);
  });

  it("keeps a write started and says nothing when authority moves during the act", async () => {
    const f = fixture((fx) => {
      fx.host.moved = true;
      return Promise.reject(new StaleAuthorityError("moved"));
    });
    const commandId = await prepared(f);
    await granted(f, commandId);
    expect(states(f)).toEqual(["started"]);
    expect(f.host.framesOf("result")).toEqual([]);
    expect(f.flow.journalEntries()).toEqual([{ commandId, state: "started" }]);
  });

  it("reports a write that failed as it acted, with its error", async () => {
    const f = fixture(() => Promise.reject(new CommandError("element_obscured", "Something covers the element.")));
    const commandId = await prepared(f);
    await granted(f, commandId);
    expect(f.host.framesOf("result")).toEqual([{ type: "result", commandId, outcome: "failed", error: { code: "element_obscured", message: "Something covers the element." } }]);
  });

  it("drops the entry once the backend acknowledges the result", async () => {
    const f = fixture();
    const commandId = await prepared(f);
    await f.flow.acknowledge(commandId); // not completed yet: kept
    expect(states(f)).toEqual(["prepared"]);
    await granted(f, commandId);
    await f.flow.acknowledge(commandId);
    expect(f.flow.journalEntries()).toEqual([]);
    expect(f.flow.journaled).toBe(0);
    // Storage follows without a write of its own when none comes.
    await new Promise((resolve) => setTimeout(resolve, JOURNAL_DROP_FLUSH_MS + 20));
    expect(states(f)).toEqual([]);
  });

  it("drops a cancelled preparation, and a queued write before it runs", async () => {
    const f = fixture();
    const first = await prepared(f);
    await f.flow.cancel(first);
    expect(f.flow.journalEntries()).toEqual([]);

    let release: () => void = () => undefined;
    const blocking = fixture(() => new Promise<void>((resolve) => (release = resolve)));
    const running = await prepared(blocking);
    const queued = await prepared(blocking);
    await blocking.flow.grant({ type: "write_grant", commandId: running, leaseEpoch: 1, command: { name: "click", ref: "g1e1" }, dryRun: false, deadlineAt: FUTURE });
    await blocking.flow.grant({ type: "write_grant", commandId: queued, leaseEpoch: 1, command: { name: "click", ref: "g1e1" }, dryRun: false, deadlineAt: FUTURE });
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(blocking.flow.queued).toBe(2);
    await blocking.flow.cancel(running); // already acting: it runs to its end
    await blocking.flow.cancel(queued);
    expect(blocking.flow.queued).toBe(1);
    release();
    await blocking.flow.idle();
    expect(blocking.acted).toHaveLength(1);
    expect(blocking.flow.journalEntries()).toEqual([{ commandId: running, state: "completed_unacked" }]);
  });

  it("withdraws the granted writes a hello reports prepared: queued ones never act, a dry run mid-plan sends no result", async () => {
    let release: () => void = () => undefined;
    const f = fixture(undefined, new FakeStorageArea(), () => new Promise<void>((resolve) => (release = resolve)));
    const dry = await prepared(f);
    const queued = await prepared(f);
    await f.flow.grant({ type: "write_grant", commandId: dry, leaseEpoch: 1, command: { name: "click", ref: "g1e1" }, dryRun: true, deadlineAt: FUTURE });
    await f.flow.grant({ type: "write_grant", commandId: queued, leaseEpoch: 1, command: { name: "click", ref: "g1e1" }, dryRun: false, deadlineAt: FUTURE });
    await ticks();
    expect(f.flow.queued).toBe(2);
    expect(await f.flow.helloJournal()).toEqual([
      { commandId: dry, state: "prepared" },
      { commandId: queued, state: "prepared" },
    ]);
    expect(f.flow.queued).toBe(1); // only the dry run still planning
    release();
    await f.flow.idle();
    expect(f.acted).toEqual([]);
    expect(f.host.framesOf("result")).toEqual([]);
    expect(states(f)).toEqual(["prepared", "prepared"]);
    await f.flow.applyVerdict({ cancel: [dry, queued], unknown: [], writesBlocked: false });
    expect(f.flow.journalEntries()).toEqual([]);
    // A new write after hello_ack runs as before.
    const fresh = await prepared(f);
    release = () => undefined;
    const grantedFresh = f.flow.grant({ type: "write_grant", commandId: fresh, leaseEpoch: 1, command: { name: "click", ref: "g1e1" }, dryRun: false, deadlineAt: FUTURE });
    await grantedFresh;
    await ticks();
    release();
    await f.flow.idle();
    expect(f.acted).toHaveLength(1);
    expect(f.host.framesOf("result")).toEqual([expect.objectContaining({ commandId: fresh, outcome: "succeeded" })]);
    expect(f.warnings).toEqual([]);
  });

  it("applies the hello verdict: cancelled preparations and unknown writes go, results are replayed", async () => {
    const f = fixture((fx) => {
      if (fx.acted.length === 2) {
        fx.host.moved = true; // the second write is left started
        return Promise.reject(new StaleAuthorityError("moved"));
      }
      return Promise.resolve();
    });
    const done = await prepared(f);
    await granted(f, done);
    const started = await prepared(f);
    await granted(f, started);
    f.host.moved = false;
    const pending = await prepared(f);
    expect(f.flow.journalEntries().map((e) => e.state)).toEqual(["completed_unacked", "started", "prepared"]);
    f.host.sent.length = 0;

    await f.flow.applyVerdict({ cancel: [pending, done], unknown: [started, done], writesBlocked: true });
    f.flow.replayCompleted();
    expect(f.flow.journalEntries()).toEqual([{ commandId: done, state: "completed_unacked" }]);
    expect(f.flow.writesBlocked).toBe(true);
    expect(f.host.sent).toEqual([expect.objectContaining({ type: "result", commandId: done, replayed: true })]);
  });

  it("answers a read through the queue, and refuses a write sent as a read", async () => {
    const f = fixture();
    const commandId = nextId();
    f.flow.read({ type: "read", commandId, command: { name: "get_tabs" }, deadlineAt: FUTURE });
    await f.flow.idle();
    f.flow.read({ type: "read", commandId: nextId(), command: { name: "click", ref: "g1e1" }, deadlineAt: FUTURE });
    const [answered, refused] = f.host.framesOf("read_result");
    expect(answered).toEqual({ type: "read_result", commandId, outcome: "succeeded", result: { name: "get_tabs", tabs: [TAB] } });
    expect([refused?.outcome, refused?.error?.code]).toEqual(["failed", "invalid_arguments"]);
    expect(states(f)).toEqual([]);
  });

  it("loads the journal it persisted, and forgets it on clear", async () => {
    const f = fixture();
    const commandId = await prepared(f);
    const again = new CommandFlow(new FakeHost(), f.area, SESSION, { info: () => undefined, warn: () => undefined });
    await again.load();
    expect(again.journalEntries()).toEqual([{ commandId, state: "prepared" }]);
    await again.clear();
    expect(states(f)).toEqual([]);
  });

  describe("after a worker stop at each journal write, the restarted journal gives the protocol's answer", () => {
    it("stopped with prepared in flight: write_ready never left, and the restarted journal holds nothing", async () => {
      const f = fixture();
      f.area.gate = new Promise(() => undefined); // never lands
      const commandId = nextId();
      f.flow.prepare({ type: "write_prepare", commandId, name: "click", leaseEpoch: 1, dryRun: false, readyBy: FUTURE }).catch(() => undefined);
      await ticks();
      // The backend never saw write_ready, so it never granted: its ready deadline says not_started.
      expect(f.host.sent).toEqual([]);
      const g = await restarted(f);
      expect(g.flow.journalEntries()).toEqual([]);
      expect(g.acted).toEqual([]);
    });

    it("stopped right after write_ready left, the grant not received: the hello reports it prepared, the backend's cancel drops it, nothing runs", async () => {
      const f = fixture();
      const commandId = await prepared(f);
      const g = await restartedAfter(f, "write_ready");
      // Backend granted or not, a prepared entry in the hello settles it not_started with a cancel.
      expect(g.flow.journalEntries()).toEqual([{ commandId, state: "prepared" }]);
      await g.flow.applyVerdict({ cancel: [commandId], unknown: [], writesBlocked: false });
      expect(g.flow.journalEntries()).toEqual([]);
      // A grant still in flight from before the hello finds nothing to run.
      await granted(g, commandId);
      expect(g.host.framesOf("error").map((e) => e.code)).toEqual(["write_refused"]);
      expect(g.acted).toEqual([]);
    });

    it("stopped with started in flight: it never acted, and the entry is prepared", async () => {
      const f = fixture();
      const commandId = await prepared(f);
      f.area.gate = new Promise(() => undefined);
      f.flow.grant({ type: "write_grant", commandId, leaseEpoch: 1, command: { name: "click", ref: "g1e1" }, dryRun: false, deadlineAt: FUTURE }).catch(() => undefined);
      await ticks();
      expect(f.acted).toEqual([]);
      const g = await restarted(f);
      expect(g.flow.journalEntries()).toEqual([{ commandId, state: "prepared" }]);
    });

    it("stopped with completed_unacked in flight: the result never left; started, never run again, dropped on the backend's unknown", async () => {
      const f = fixture(async (fx) => {
        fx.area.gate = new Promise(() => undefined);
        return Promise.resolve();
      });
      const commandId = await prepared(f);
      f.flow.grant({ type: "write_grant", commandId, leaseEpoch: 1, command: { name: "click", ref: "g1e1" }, dryRun: false, deadlineAt: FUTURE }).catch(() => undefined);
      await ticks();
      expect(f.acted).toHaveLength(1);
      expect(f.host.framesOf("result")).toEqual([]);
      const g = await restarted(f);
      expect(g.flow.journalEntries()).toEqual([{ commandId, state: "started" }]);
      // Neither a grant nor a prepare of the id runs it again.
      await granted(g, commandId);
      await g.flow.prepare({ type: "write_prepare", commandId, name: "click", leaseEpoch: 1, dryRun: false, readyBy: FUTURE });
      expect(g.host.framesOf("error").map((e) => e.code)).toEqual(["write_refused", "write_refused"]);
      expect(f.acted).toHaveLength(1);
      // The backend, which got no result, declares it unknown, which drops the entry.
      await g.flow.applyVerdict({ cancel: [], unknown: [commandId], writesBlocked: true });
      expect(g.flow.journalEntries()).toEqual([]);
    });

    it("stopped right after the result left: the restarted journal replays that result, never recomputed", async () => {
      const f = fixture();
      const commandId = await prepared(f);
      await granted(f, commandId);
      const [sent] = f.host.framesOf("result");
      const g = await restartedAfter(f, "result");
      expect(g.flow.journalEntries()).toEqual([{ commandId, state: "completed_unacked" }]);
      g.flow.replayCompleted();
      await granted(g, commandId);
      expect(g.host.framesOf("result")).toEqual([
        { ...sent, replayed: true },
        { ...sent, replayed: true },
      ]);
      expect(f.acted).toHaveLength(1);
    });
  });

  describe("started goes to storage while the plan runs", () => {
    it("writes started while the plan runs, and acts only once storage holds it", async () => {
      const atPlan: string[][] = [];
      const f = fixture(undefined, new FakeStorageArea(), async (fx) => {
        await new Promise((resolve) => setTimeout(resolve, 0));
        atPlan.push(states(fx));
      });
      const first = await prepared(f);
      await granted(f, first);
      // Storage held started before the plan's reads were over.
      expect(atPlan).toEqual([["started"]]);
      // With the started write held back, the plan finishes and the act waits.
      const second = await prepared(f);
      let open: () => void = () => undefined;
      f.area.gate = new Promise((resolve) => (open = resolve));
      const grant = granted(f, second);
      await new Promise((resolve) => setTimeout(resolve, 5));
      expect(atPlan).toHaveLength(2);
      expect(f.acted).toHaveLength(1);
      f.area.gate = undefined;
      open();
      await grant;
      expect(f.acted).toHaveLength(2);
      expect(f.acted[1]).toEqual(["completed_unacked", "started"]);
    });

    it("never starts a dry run", async () => {
      const f = fixture();
      const commandId = nextId();
      await f.flow.prepare({ type: "write_prepare", commandId, name: "click", leaseEpoch: 1, dryRun: true, readyBy: FUTURE });
      await f.flow.grant({ type: "write_grant", commandId, leaseEpoch: 1, command: { name: "click", ref: "g1e1" }, dryRun: true, deadlineAt: FUTURE });
      await f.flow.idle();
      expect(f.acted).toEqual([]);
      expect(f.area.writes.map((w) => (JSON.parse(w) as { state: string }[]).map((e) => e.state))).toEqual([["prepared"], ["completed_unacked"]]);
    });

    it("reports a plan that failed after started was written as failed, without acting", async () => {
      const f = fixture(undefined, new FakeStorageArea(), () => Promise.reject(new CommandError("ref_not_found", "gone")));
      const commandId = await prepared(f);
      await granted(f, commandId);
      expect(f.acted).toEqual([]);
      expect(f.host.framesOf("result")).toEqual([{ type: "result", commandId, outcome: "failed", error: { code: "ref_not_found", message: "gone" } }]);
      expect(states(f)).toEqual(["completed_unacked"]);
    });

    it("stopped while planning after started landed: started, never acted, dropped on the backend's unknown", async () => {
      const f = fixture(undefined, new FakeStorageArea(), () => new Promise<void>(() => undefined)); // the worker stops mid-plan
      const commandId = await prepared(f);
      f.flow.grant({ type: "write_grant", commandId, leaseEpoch: 1, command: { name: "click", ref: "g1e1" }, dryRun: false, deadlineAt: FUTURE }).catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 0));
      await new Promise((resolve) => setTimeout(resolve, 0));
      const g = await restarted(f);
      expect(g.flow.journalEntries()).toEqual([{ commandId, state: "started" }]);
      await granted(g, commandId);
      expect(f.acted).toEqual([]);
      await g.flow.applyVerdict({ cancel: [], unknown: [commandId], writesBlocked: true });
      expect(g.flow.journalEntries()).toEqual([]);
    });
  });
});
