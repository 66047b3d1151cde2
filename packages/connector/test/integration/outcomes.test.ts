/**
 * Every row of the outcome table, driven through the TypeScript connector against the running
 * backend with a simulated device (the Python twin: tests/connector/integration/test_outcomes.py).
 */
import { describe, expect, it } from "vitest";

import {
  Aborted,
  CommandFailed,
  CommandIdConflict,
  CommandNotStarted,
  OutcomeTimeout,
  SessionBusy,
  CommandOutcomeUnknown,
  ProtocolUpgradeRequired,
  SessionClosedError,
  SessionTerminal,
  SessionUnavailable,
  WritesBlocked,
  isTombstone,
} from "../../src/index.js";
import { Live, ORIGINS, control, deviceState, granted, socketUp } from "./stack.js";

const SESSION = { allowedOrigins: ORIGINS, profileStateKey: "p" };

describe("the outcome rules against the running backend", () => {
  it("202: a write pending past the sync wait is polled (same command) until it succeeds", async () => {
    const live = await Live.start();
    await live.device({ behaviour: { execute: "hold_result" } });
    await using s = await live.client().openSession(SESSION);
    await socketUp(s.id);
    const pending = live.when(202);
    const click = s.click("g1e1");
    const commandId = await granted();
    await control("/advance", { seconds: 20 }); // the backend's synchronous wait ends: 202
    await pending;
    await control("/release", { commandId });
    const result = await click;
    expect([result.name, result.url]).toEqual(["click", "https://example.com/"]);
    expect((await deviceState()).executions).toEqual({ [commandId]: 1 });
    expect(live.commands().map((e) => e.status)).toEqual([202]);
    const polls = live.polls(commandId);
    expect(polls.at(-1)?.status).toBe(200);
    expect(new Set(polls.slice(0, -1).map((e) => e.status))).toEqual(new Set(polls.length > 1 ? [202] : []));
    expect(new Set(live.delays)).toEqual(new Set([1]));
  });

  it("409 command_outcome_unknown: a write held past its deadline throws at once, never retried", async () => {
    const live = await Live.start();
    await live.device({ behaviour: { execute: "hold_result" } });
    const client = live.client();
    await using s = await client.openSession(SESSION);
    await socketUp(s.id);
    const pending = live.when(202);
    const click = s.click("g1e1").catch((e: unknown) => e);
    const commandId = await granted();
    await control("/advance", { seconds: 20 });
    await pending;
    await control("/advance", { seconds: 5 }); // the 25 s aggregate deadline of granted work
    const error = await click;
    expect(error).toBeInstanceOf(CommandOutcomeUnknown);
    expect((error as CommandOutcomeUnknown).commandId).toBe(commandId);
    expect(live.commands()).toHaveLength(1);
    expect(live.polls(commandId).at(-1)?.status).toBe(409);
    // A result arriving after the deadline is acknowledged, but unknown stays unknown.
    await control("/release", { commandId });
    await expect(client.pollCommand(s.id, commandId)).rejects.toBeInstanceOf(CommandOutcomeUnknown);
    expect((await deviceState()).executions).toEqual({ [commandId]: 1 });
  });

  it("409 command_outcome_unknown after a crash: never retried, writes blocked, reads still work", async () => {
    const live = await Live.start();
    await live.device({ behaviour: { execute: "crash_after_start" } });
    await using s = await live.client().openSession(SESSION);
    await socketUp(s.id);
    const click = s.click("g1e1").catch((e: unknown) => e);
    const commandId = await granted();
    await control("/restart-extension"); // the journal says "started", with no result
    const error = await click;
    expect(error).toBeInstanceOf(CommandOutcomeUnknown);
    expect((error as CommandOutcomeUnknown).commandId).toBe(commandId);
    expect(live.commands().map((e) => e.status)).toEqual([409]);
    expect(live.polls(commandId)).toEqual([]);
    await control("/behaviour", { set: { execute: "complete" } });
    const blocked = await s.fill("g1e2", "jane").catch((e: unknown) => e);
    expect(blocked).toBeInstanceOf(WritesBlocked);
    expect((await s.snapshot()).nodes[1]?.ref).toBe("g1e1");
    const info = await s.refresh();
    expect(isTombstone(info)).toBe(false);
    if (!isTombstone(info)) {
      expect([info.writesBlocked, info.writesBlockedReason, info.writesBlockedCommandId]).toEqual([true, "unknown_outcome", commandId]);
    }
    expect((await deviceState()).executions).toEqual({ [commandId]: 1 });
  });

  it("504 command_not_started: the write is resubmitted with the same id and body", async () => {
    const live = await Live.start();
    await live.device({ behaviour: { ready: "silent" } });
    await using s = await live.client().openSession(SESSION);
    await socketUp(s.id);
    const notStarted = live.when(504, "command_not_started", () => control("/behaviour", { set: { ready: "ack" } }));
    const click = s.click("g1e1");
    await control("/wait-frame", { sessionId: s.id, frame: "write_prepare" });
    await control("/advance", { seconds: 5 }); // the extension never said write_ready
    await notStarted;
    expect((await click).name).toBe("click");
    const submitted = live.commands();
    expect(submitted.map((e) => e.status)).toEqual([504, 200]);
    expect(submitted[1]?.body).toEqual(submitted[0]?.body);
    const commandId = String(submitted[0]?.body?.commandId);
    const prepares = (await deviceState()).frames.filter((f) => f.type === "write_prepare");
    expect(prepares.map((f) => f.commandId)).toEqual([commandId, commandId]);
    expect((await deviceState()).executions).toEqual({ [commandId]: 1 });
    expect(live.delays).toEqual([0.5]);
  });

  it("504 command_timed_out: a read is resubmitted with the same id", async () => {
    const live = await Live.start();
    await live.device({ behaviour: { read: "silent" } });
    await using s = await live.client().openSession(SESSION);
    await socketUp(s.id);
    const timedOut = live.when(504, "command_timed_out", () => control("/behaviour", { set: { read: "answer" } }));
    const snapshot = s.snapshot({ interactiveOnly: true });
    await control("/wait-frame", { sessionId: s.id, frame: "read" });
    await control("/advance", { seconds: 20 }); // the read deadline
    await timedOut;
    const page = await snapshot;
    expect(page.nodes.filter((n) => n.ref).map((n) => n.name)).toEqual(["Sign in", "Username", "Password"]);
    const submitted = live.commands();
    expect(submitted.map((e) => e.status)).toEqual([504, 200]);
    expect(submitted[1]?.body).toEqual(submitted[0]?.body);
    const reads = (await deviceState()).frames.filter((f) => f.type === "read");
    expect(reads.map((f) => f.commandId)).toEqual([submitted[0]?.body?.commandId, submitted[0]?.body?.commandId]);
  });

  it("429 session_busy: a second command waits for the slot with the same id, then succeeds", async () => {
    const live = await Live.start();
    await live.device({ behaviour: { execute: "hold_result" } });
    await using s = await live.client().openSession(SESSION);
    await socketUp(s.id);
    const busy = live.when(429, "session_busy");
    const click = s.click("g1e1");
    const clickId = await granted();
    const snapshot = s.snapshot();
    await busy;
    await control("/release", { commandId: clickId });
    await click;
    expect((await snapshot).nodes[1]?.name).toBe("Sign in");
    const reads = live.commands().filter((e) => (e.body?.command as { name: string }).name === "snapshot");
    expect(new Set(reads.map((e) => e.body?.commandId)).size).toBe(1);
    expect(reads[0]?.status).toBe(429);
    expect(reads.at(-1)?.status).toBe(200);
    expect(new Set(live.delays)).toEqual(new Set([1]));
    expect((await deviceState()).executions).toEqual({ [clickId]: 1 });
  });

  it("409 command_id_conflict: a reused id replays its outcome, or conflicts with another body", async () => {
    const live = await Live.start();
    await live.device();
    const client = live.client();
    await using s = await client.openSession(SESSION);
    await socketUp(s.id);
    const commandId = crypto.randomUUID();
    const first = await client.submitCommand(s.id, { name: "click", ref: "g1e1" }, { commandId });
    const again = await client.submitCommand(s.id, { name: "click", ref: "g1e1" }, { commandId });
    expect(again).toEqual(first);
    for (const [command, dryRun] of [
      [{ name: "snapshot" as const }, false],
      [{ name: "click" as const, ref: "g1e1" }, true],
    ] as const) {
      const error = await client.submitCommand(s.id, command, { commandId, dryRun }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CommandIdConflict);
      expect((error as CommandIdConflict).commandId).toBe(commandId);
    }
    expect((await deviceState()).executions).toEqual({ [commandId]: 1 });
    expect(live.commands(commandId).map((e) => e.status)).toEqual([200, 200, 409, 409]);
  });

  it("410 session_terminal ends the session object: nothing more is sent", async () => {
    const live = await Live.start();
    await live.device();
    const client = live.client();
    const s = await client.openSession(SESSION);
    try {
      await socketUp(s.id);
      await client.deleteSession(s.id); // another part of the consumer ends it
      await expect(s.snapshot()).rejects.toBeInstanceOf(SessionTerminal);
      expect(s.state).toBe("ended");
      const sent = live.exchanges.length;
      await expect(s.click("g1e1")).rejects.toBeInstanceOf(SessionClosedError);
      expect(live.exchanges).toHaveLength(sent);
    } finally {
      await s.close();
    }
    expect(s.state).toBe("closed");
    const tombstone = await client.getSession(s.id);
    expect(isTombstone(tombstone) && tombstone.reason).toBe("deleted");
    expect((await deviceState()).executions).toEqual({});
  });

  it("426 protocol_upgrade_required: an extension without safe writes refuses writes only", async () => {
    const live = await Live.start();
    await live.device({ withoutCapabilities: ["safe_write_v2"] });
    await using s = await live.client().openSession({ mode: "attended" });
    expect(s.info.status).toBe("awaiting_attach");
    expect((await control<{ outcome: string }>("/attach", { sessionId: s.id })).outcome).toBe("attached");
    await socketUp(s.id);
    const error = await s.click("g1e1").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProtocolUpgradeRequired);
    expect((error as ProtocolUpgradeRequired).status).toBe(426);
    expect((await s.hello()).tab.tabId).toBe(7);
    expect((await deviceState()).executions).toEqual({});
  });

  it("503 session_unavailable: the command waits for the tab, then runs; past the timeout it throws", async () => {
    const live = await Live.start();
    await live.device();
    await using s = await live.client().openSession(SESSION);
    await socketUp(s.id);
    await control("/disconnect"); // the service worker was evicted: every socket drops
    const unavailable = live.when(503, "session_unavailable");
    const snapshot = s.snapshot();
    await unavailable;
    await control("/connect");
    expect((await snapshot).title).toBe("Example");
    const submitted = live.commands();
    expect(new Set(submitted.map((e) => e.body?.commandId)).size).toBe(1);
    expect(new Set(submitted.slice(0, -1).map((e) => e.status))).toEqual(new Set([503]));
    expect(submitted.at(-1)?.status).toBe(200);
    expect(new Set(live.delays)).toEqual(new Set([2]));
    await control("/disconnect");
    await expect(s.snapshot({}, { timeout: 0.5 })).rejects.toBeInstanceOf(SessionUnavailable);
  });

  it("AbortSignal: an aborted wait for a pending write names the command, which a poll then settles", async () => {
    const live = await Live.start();
    await live.device({ behaviour: { execute: "hold_result" } });
    const client = live.client();
    await using s = await client.openSession(SESSION);
    await socketUp(s.id);
    const controller = new AbortController();
    const pending = live.when(202, undefined, () => Promise.resolve(controller.abort(new Error("the user cancelled"))));
    const click = s.click("g1e1", { signal: controller.signal }).catch((e: unknown) => e);
    const commandId = await granted();
    await control("/advance", { seconds: 20 });
    await pending;
    const error = await click;
    expect(error).toBeInstanceOf(Aborted);
    expect((error as Aborted).commandId).toBe(commandId);
    expect(live.polls(commandId)).toEqual([]);
    await control("/release", { commandId });
    const outcome = await client.pollCommand(s.id, commandId);
    expect(outcome.status).toBe("succeeded");
    expect((await deviceState()).executions).toEqual({ [commandId]: 1 });
  });

  it("202 past the caller's timeout: OutcomeTimeout names the command, which still completes", async () => {
    const live = await Live.start();
    await live.device({ behaviour: { execute: "hold_result" } });
    const client = live.client();
    await using s = await client.openSession(SESSION);
    await socketUp(s.id);
    const pending = live.when(202);
    // Retry-After is 1 s: a 0.5 s budget cannot wait for the first poll.
    const click = s.click("g1e1", { timeout: 0.5 }).catch((e: unknown) => e);
    const commandId = await granted();
    await control("/advance", { seconds: 20 });
    await pending;
    const error = await click;
    expect(error).toBeInstanceOf(OutcomeTimeout);
    expect((error as OutcomeTimeout).commandId).toBe(commandId);
    expect(live.polls(commandId)).toEqual([]);
    await control("/release", { commandId });
    expect((await client.pollCommand(s.id, commandId)).status).toBe("succeeded");
    expect(live.commands()).toHaveLength(1);
  });

  it("429 session_busy past the caller's timeout throws SessionBusy; nothing ran", async () => {
    const live = await Live.start();
    await live.device({ behaviour: { execute: "hold_result" } });
    await using s = await live.client().openSession(SESSION);
    await socketUp(s.id);
    const click = s.click("g1e1");
    const clickId = await granted();
    const error = await s.snapshot({}, { timeout: 0.5 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SessionBusy);
    const reads = live.commands().filter((e) => (e.body?.command as { name: string }).name === "snapshot");
    expect(reads.map((e) => e.status)).toEqual([429]);
    expect((await deviceState()).frames.filter((f) => f.type === "read")).toEqual([]);
    await control("/release", { commandId: clickId });
    await click;
  });

  it("504 command_not_started past the bounded resubmissions is thrown; the write never ran", async () => {
    const live = await Live.start();
    await live.device({ behaviour: { ready: "silent" } });
    await using s = await live.client({ retry: { resubmitAttempts: 0 } }).openSession(SESSION);
    await socketUp(s.id);
    const click = s.click("g1e1").catch((e: unknown) => e);
    await control("/wait-frame", { sessionId: s.id, frame: "write_prepare" });
    await control("/advance", { seconds: 5 });
    const error = await click;
    expect(error).toBeInstanceOf(CommandNotStarted);
    expect(live.commands().map((e) => e.status)).toEqual([504]);
    expect((await deviceState()).executions).toEqual({});
  });

  it("200 failed: the durable failure is returned once, never retried; the Session throws CommandFailed", async () => {
    const live = await Live.start();
    await live.device({ behaviour: { fail_with: "stale_ref" } });
    const client = live.client();
    await using s = await client.openSession(SESSION);
    await socketUp(s.id);
    const outcome = await client.submitCommand(s.id, { name: "click", ref: "g1e1" });
    expect([outcome.status, outcome.error?.code]).toEqual(["failed", "stale_ref"]);
    const error = await s.click("g1e1").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommandFailed);
    expect((error as CommandFailed).code).toBe("stale_ref");
    expect(live.commands().map((e) => e.status)).toEqual([200, 200]);
    expect(new Set(live.commands().map((e) => e.body?.commandId)).size).toBe(2);
  });
});
