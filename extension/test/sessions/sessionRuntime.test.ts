import { afterEach, describe, expect, it, vi } from "vitest";

import { GENERATION_RESERVE } from "../../src/sessions/sessionRuntime";
import { JOURNAL_DROP_FLUSH_MS, journalKey } from "../../src/sessions/writeJournal";

/** Past the time a drop waits to ride on another journal write (see writeJournal.ts). */
const dropsWritten = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, JOURNAL_DROP_FLUSH_MS + 20));
import type { FakeSocket } from "../fakes/fakeSocket";
import { FUTURE, LEASE_A, LEASE_B, connectDevice, enroll, makeHarness, nextUuid, openSession, provision, settle } from "../fakes/harness";
import { BUTTON_NODE, LOGIN_TREE, installLoginPage, read, refOf, write } from "../fakes/page";

function journalStates(h: ReturnType<typeof makeHarness>, sessionId: string): Record<string, string> {
  const entries = (h.store.session.data.get(journalKey(sessionId)) ?? []) as { commandId: string; state: string }[];
  return Object.fromEntries(entries.map((e) => [e.commandId, e.state]));
}

async function ready(): Promise<{ h: ReturnType<typeof makeHarness>; device: FakeSocket; tabId: number; session: FakeSocket }> {
  const h = makeHarness();
  enroll(h.store);
  installLoginPage(h.chrome);
  const device = await connectDevice(h);
  const { tabId, session } = await provision(h, device, LEASE_A);
  return { h, device, tabId, session };
}

describe("SessionRuntime write protocol", () => {
  it("answers write_ready only once prepared is in storage", async () => {
    const { h, session } = await ready();
    const commandId = nextUuid();
    let stateWhenReady: string | undefined;
    let open: () => void = () => undefined;
    h.store.session.gate = new Promise((resolve) => (open = resolve));
    const send = session.send.bind(session);
    session.send = (data: string) => {
      if (data.includes('"write_ready"')) stateWhenReady = journalStates(h, LEASE_A.sessionId)[commandId];
      send(data);
    };
    session.receive({ type: "write_prepare", commandId, name: "click", leaseEpoch: 1, dryRun: false, readyBy: FUTURE });
    await settle();
    expect(session.framesOf("write_ready")).toEqual([]);
    h.store.session.gate = undefined;
    open();
    await settle();
    expect(session.framesOf("write_ready")).toEqual([{ type: "write_ready", commandId, leaseEpoch: 1 }]);
    expect(stateWhenReady).toBe("prepared");
  });

  it("persists started before the CDP action and completed_unacked before the result, and drops on result_ack", async () => {
    const { h, tabId, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    const commandId = nextUuid();
    const statesAtAction: (string | undefined)[] = [];
    let open: () => void = () => undefined;
    h.chrome.handlers.set("Input.dispatchMouseEvent", (params) => {
      statesAtAction.push(journalStates(h, LEASE_A.sessionId)[commandId]);
      // Hold back the journal's next write (completed_unacked): the result must wait for it.
      if (params.type === "mouseReleased") h.store.session.gate = new Promise((resolve) => (open = resolve));
      return {};
    });
    let stateAtResult: string | undefined;
    const send = session.send.bind(session);
    session.send = (data: string) => {
      if (data.includes('"type":"result"')) stateAtResult = journalStates(h, LEASE_A.sessionId)[commandId];
      send(data);
    };
    expect(await write(session, { name: "click", ref }, { commandId })).toBeUndefined();
    expect(statesAtAction).toEqual(["started", "started", "started"]);
    h.store.session.gate = undefined;
    open();
    await settle();
    expect(session.framesOf("result").find((f) => f.commandId === commandId)).toMatchObject({ type: "result", commandId, outcome: "succeeded", result: { name: "click" } });
    expect(stateAtResult).toBe("completed_unacked");
    expect(h.chrome.callsOf("Input.dispatchMouseEvent", tabId).map((c) => c.params.type)).toEqual(["mouseMoved", "mousePressed", "mouseReleased"]);
    session.receive({ type: "result_ack", commandId });
    await settle();
    await dropsWritten();
    expect(journalStates(h, LEASE_A.sessionId)).toEqual({});
  });

  it("refuses a grant that was never prepared and never acts on it", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    const commandId = nextUuid();
    session.receive({ type: "write_grant", commandId, leaseEpoch: 1, command: { name: "click", ref }, dryRun: false, deadlineAt: FUTURE });
    await settle();
    expect(session.framesOf("error")).toEqual([expect.objectContaining({ code: "write_refused", commandId })]);
    expect(h.chrome.callsOf("Input.dispatchMouseEvent")).toEqual([]);
  });

  it("refuses write_prepare for another lease epoch", async () => {
    const { session } = await ready();
    session.receive({ type: "write_prepare", commandId: nextUuid(), name: "click", leaseEpoch: 7, dryRun: false, readyBy: FUTURE });
    await settle();
    expect(session.framesOf("error").at(-1)).toMatchObject({ code: "write_refused" });
    expect(session.framesOf("write_ready")).toEqual([]);
  });

  it("refuses write_prepare while the backend says writes are blocked, and still serves reads", async () => {
    const h = makeHarness();
    enroll(h.store);
    installLoginPage(h.chrome);
    const device = await connectDevice(h);
    device.receive({ type: "provision", ...LEASE_A, leaseEpoch: 1, allowedOrigins: ["https://example.com"], deadlineAt: FUTURE });
    await settle();
    const session = await openSession(h, device, LEASE_A, { writesBlocked: true });
    session.receive({ type: "write_prepare", commandId: nextUuid(), name: "click", leaseEpoch: 1, dryRun: false, readyBy: FUTURE });
    await settle();
    expect(session.framesOf("write_ready")).toEqual([]);
    expect(session.framesOf("error").at(-1)).toMatchObject({ code: "write_refused" });
    expect(await read(session, { name: "get_tabs" })).toMatchObject({ outcome: "succeeded" });
  });

  it("resolves a dry run without acting", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    const result = await write(session, { name: "click", ref }, { dryRun: true });
    expect(result).toMatchObject({ outcome: "succeeded", result: { name: "click", preview: { targetRole: "button", targetName: "Sign in", allowed: true } } });
    expect(h.chrome.callsOf("Input.dispatchMouseEvent")).toEqual([]);
  });

  it("refuses navigation to an origin outside allowedOrigins without calling Page.navigate", async () => {
    const { h, session } = await ready();
    const result = await write(session, { name: "navigate", url: "https://evil.example.net/phish" });
    expect(result).toMatchObject({ outcome: "failed", error: { code: "origin_not_allowed" } });
    expect(h.chrome.callsOf("Page.navigate")).toEqual([]);
    const preview = await write(session, { name: "navigate", url: "https://evil.example.net/" }, { dryRun: true });
    expect(preview).toMatchObject({ outcome: "succeeded", result: { preview: { allowed: false, navigatesTo: "https://evil.example.net/" } } });
  });

  it("refuses a ref from an earlier document as stale and never clicks", async () => {
    const { h, tabId, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    h.chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${tabId}`, url: "https://example.com/next" }, type: "Navigation" });
    await settle();
    const result = await write(session, { name: "click", ref });
    expect(result).toMatchObject({ outcome: "failed", error: { code: "stale_ref" } });
    expect(h.chrome.callsOf("Input.dispatchMouseEvent")).toEqual([]);
    const fresh = await refOf(session, "button", "Sign in");
    expect(fresh).not.toBe(ref);
  });

  it("replays completed_unacked results after a service-worker restart and applies the backend's verdict", async () => {
    const { h, tabId, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    const completed = nextUuid();
    const prepared = nextUuid();
    const started = nextUuid();
    await write(session, { name: "click", ref }, { commandId: completed });
    session.receive({ type: "write_prepare", commandId: prepared, name: "click", leaseEpoch: 1, dryRun: false, readyBy: FUTURE });
    await settle();
    h.chrome.handlers.set("Input.dispatchMouseEvent", () => new Promise(() => undefined)); // the worker dies mid-click
    await write(session, { name: "click", ref }, { commandId: started });
    expect(journalStates(h, LEASE_A.sessionId)).toEqual({ [completed]: "completed_unacked", [prepared]: "prepared", [started]: "started" });

    // A new service worker over the same chrome.storage.session: same epoch, same tab.
    const h2 = makeHarness({ store: h.store });
    installLoginPage(h2.chrome);
    h2.chrome.tabsById.set(tabId, { id: tabId, windowId: 1, url: "https://example.com/login", title: "Sign in", active: false });
    h2.chrome.attached.add(tabId); // Chrome may still hold the previous worker's attachment
    const device2 = await connectDevice(h2);
    expect(device2.framesOf("hello")[0]).toMatchObject({ leases: [{ leaseId: LEASE_A.leaseId, sessionId: LEASE_A.sessionId, leaseEpoch: 1, tabId }] });
    expect(device2.framesOf("recovery_report")).toEqual([]);
    const session2 = await openSession(h2, device2, LEASE_A, { cancel: [prepared], unknown: [started] });
    const hello = session2.framesOf("hello")[0];
    expect(hello?.journal).toEqual([
      { commandId: completed, state: "completed_unacked" },
      { commandId: prepared, state: "prepared" },
      { commandId: started, state: "started" },
    ]);
    expect(session2.framesOf("result")).toEqual([
      expect.objectContaining({ commandId: completed, outcome: "succeeded", replayed: true }),
    ]);
    expect(session2.framesOf("hello")).toHaveLength(1);
    await dropsWritten();
    expect(journalStates(h2, LEASE_A.sessionId)).toEqual({ [completed]: "completed_unacked" });
    session2.receive({ type: "result_ack", commandId: completed });
    await settle();
    await dropsWritten();
    expect(journalStates(h2, LEASE_A.sessionId)).toEqual({});

    // Refs of the previous worker are stale: the restarted runtime starts a new generation.
    const afterRestart = await write(session2, { name: "click", ref });
    expect(afterRestart).toMatchObject({ outcome: "failed", error: { code: "stale_ref" } });
  });
});

describe("SessionRuntime ref generations", () => {
  it("counts a first tab's documents from 1, so its refs stay short", async () => {
    const { h, tabId, session } = await ready();
    expect(await refOf(session, "button", "Sign in")).toBe("g1e3");
    h.chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${tabId}`, url: "https://example.com/next" } });
    await settle();
    expect(await refOf(session, "button", "Sign in")).toBe("g2e3");
  });

  it("hands out a new document's refs only once its generation is in the lease record", async () => {
    const { h, tabId, session } = await ready();
    const navigate = (): void => {
      h.chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${tabId}`, url: "https://example.com/next" } });
    };
    // The provision recorded a ceiling GENERATION_RESERVE generations ahead: these need no write.
    const setsBefore = h.store.session.setKeys.length;
    for (let i = 1; i < GENERATION_RESERVE; i += 1) navigate();
    await settle();
    expect(h.store.session.setKeys.slice(setsBefore)).toEqual([]);
    const within = await read(session, { name: "snapshot" });
    expect(within.result).toMatchObject({ generation: GENERATION_RESERVE });
    // The next one passes the ceiling: its refs wait for the lease write.
    let release: () => void = () => undefined;
    h.store.session.gate = new Promise((resolve) => {
      release = resolve;
    });
    navigate();
    const commandId = nextUuid();
    session.receive({ type: "read", commandId, command: { name: "snapshot" }, deadlineAt: FUTURE });
    await settle();
    expect(session.framesOf("read_result").filter((f) => f.commandId === commandId)).toEqual([]);
    h.store.session.gate = undefined;
    release();
    await settle();
    const answered = session.framesOf("read_result").find((f) => f.commandId === commandId);
    expect(answered).toMatchObject({ outcome: "succeeded", result: { generation: GENERATION_RESERVE + 1 } });
  });

  it("starts a tab provisioned again after a browser restart (lease epoch 2) from the clock", async () => {
    const h = makeHarness();
    enroll(h.store);
    installLoginPage(h.chrome);
    const device = await connectDevice(h);
    device.receive({ type: "provision", ...LEASE_A, leaseEpoch: 2, allowedOrigins: ["https://example.com"], deadlineAt: FUTURE });
    await settle();
    const session = await openSession(h, device, LEASE_A, { leaseEpoch: 2 });
    const ref = await refOf(session, "button", "Sign in");
    expect(Number(/^g(\d+)e/.exec(ref)?.[1])).toBeGreaterThanOrEqual(1_000_000);
  });
});

describe("SessionRuntime queueing", () => {
  it("runs two commands of one runtime first-in first-out, one at a time", async () => {
    const { h, session } = await ready();
    let release: () => void = () => undefined;
    h.chrome.handlers.set(
      "Accessibility.getFullAXTree",
      () =>
        new Promise((resolve) => {
          release = () => {
            resolve({ nodes: [] });
          };
        }),
    );
    const first = nextUuid();
    const second = nextUuid();
    session.receive({ type: "read", commandId: first, command: { name: "snapshot" }, deadlineAt: FUTURE });
    session.receive({ type: "read", commandId: second, command: { name: "get_tabs" }, deadlineAt: FUTURE });
    await settle();
    expect(session.framesOf("read_result")).toEqual([]);
    release();
    await settle();
    expect(session.framesOf("read_result").map((f) => f.commandId)).toEqual([first, second]);
  });

  it("runs two runtimes concurrently", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const a = await provision(h, device, LEASE_A);
    const b = await provision(h, device, LEASE_B, ["https://shop.example.org"]);
    h.chrome.handlers.set("Accessibility.getFullAXTree", (_params, target) =>
      target.tabId === a.tabId ? new Promise(() => undefined) : { nodes: [] },
    );
    a.session.receive({ type: "read", commandId: nextUuid(), command: { name: "snapshot" }, deadlineAt: FUTURE });
    await settle();
    const resultB = await read(b.session, { name: "snapshot" });
    expect(resultB).toMatchObject({ outcome: "succeeded" });
    expect(a.session.framesOf("read_result")).toEqual([]);
  });
});

describe("SessionRuntime secrets and tabs", () => {
  it("passes fill_secret plaintext only to the page call: never to storage, frames or logs", async () => {
    const { h, session, device } = await ready();
    const ref = await refOf(session, "textbox", "Password");
    const secret = "correct-horse-battery-staple";
    const result = await write(session, { name: "fill_secret", ref, secretRef: "vault:login-password" }, { secretValue: secret });
    expect(result).toMatchObject({ outcome: "succeeded" });
    const call = h.chrome.callsOf("Runtime.callFunctionOn")[0];
    expect(call?.params.arguments).toEqual([{ value: secret }, { value: true }]);
    const everything = [
      ...h.store.session.writes,
      ...h.store.local.writes,
      ...session.sent.map((f) => JSON.stringify(f)),
      ...device.sent.map((f) => JSON.stringify(f)),
      ...h.logs,
    ].join("\n");
    expect(everything).not.toContain(secret);
  });

  it("never reports the value of a password field in a snapshot", async () => {
    const { session } = await ready();
    const result = await read(session, { name: "snapshot" });
    const nodes = (result.result as { nodes: { name: string; value?: string }[] }).nodes;
    expect(nodes.find((n) => n.name === "Email")?.value).toBe("jane@example.com");
    expect(nodes.find((n) => n.name === "Password")).not.toHaveProperty("value");
    expect(JSON.stringify(result)).not.toContain("hunter2");
  });

  it("exposes only the session's own tab through hello, get_tabs and switch_tab", async () => {
    const { h, tabId, session } = await ready();
    const userTab = h.chrome.openTab("https://mail.example.com/inbox", { title: "Inbox", active: true });
    const hello = await read(session, { name: "hello" });
    expect(hello.result).toMatchObject({ name: "hello", protocolVersion: 2, tab: { tabId } });
    const tabs = await read(session, { name: "get_tabs" });
    expect((tabs.result as { tabs: { tabId: number }[] }).tabs.map((t) => t.tabId)).toEqual([tabId]);
    expect(JSON.stringify(tabs)).not.toContain("Inbox");
    const refused = await write(session, { name: "switch_tab", tabId: userTab.id });
    expect(refused).toMatchObject({ outcome: "failed", error: { code: "tab_not_owned" } });
    expect(h.chrome.activatedTabs).toEqual([]);
    const switched = await write(session, { name: "switch_tab", tabId });
    expect(switched).toMatchObject({ outcome: "succeeded" });
    expect(h.chrome.activatedTabs).toEqual([tabId]);
    expect(h.chrome.callsOf("Runtime.callFunctionOn").some((c) => c.tabId === userTab.id)).toBe(false);
    expect(h.chrome.attached.has(userTab.id)).toBe(false);
  });

  it("clicks at the centre of the element's box", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    await write(session, { name: "click", ref });
    const pressed = h.chrome.callsOf("Input.dispatchMouseEvent").find((c) => c.params.type === "mousePressed");
    expect(pressed?.params).toMatchObject({ x: 60, y: 40, button: "left", clickCount: 1 });
    expect(h.chrome.callsOf("DOM.getBoxModel")[0]?.params).toEqual({ backendNodeId: BUTTON_NODE });
  });
});

describe("SessionRuntime session socket recovery", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  async function readyWithFakeClock(): Promise<{ h: ReturnType<typeof makeHarness>; device: FakeSocket; session: FakeSocket }> {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
    const h = makeHarness({ random: () => 0 });
    enroll(h.store);
    const device = await connectDevice(h);
    const { session } = await provision(h, device, LEASE_A);
    return { h, device, session };
  }

  it("asks for a fresh session ticket on the device socket when only the session socket dropped", async () => {
    const { h, device, session } = await readyWithFakeClock();
    session.drop(1006);
    await settle();
    expect(device.framesOf("ticket_request")).toEqual([]); // not before the backoff
    await vi.advanceTimersByTimeAsync(1_000);
    expect(device.framesOf("ticket_request")).toEqual([{ type: "ticket_request", sessionId: LEASE_A.sessionId, leaseId: LEASE_A.leaseId, leaseEpoch: 1 }]);
    // The backend answers with a session_ticket: the runtime opens a new session socket with it.
    const reopened = await openSession(h, device, LEASE_A);
    expect(reopened).not.toBe(session);
    expect(reopened.framesOf("hello")).toEqual([expect.objectContaining({ sessionId: LEASE_A.sessionId, leaseEpoch: 1 })]);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(device.framesOf("ticket_request")).toHaveLength(1);
  });

  it("backs off and stops asking after a bounded number of refused tickets", async () => {
    const { h, device, session } = await readyWithFakeClock();
    session.drop(1006);
    for (let attempt = 0; attempt < 12; attempt += 1) {
      await vi.advanceTimersByTimeAsync(31_000);
      const ticket = { type: "session_ticket", ...LEASE_A, leaseEpoch: 1, ticket: `ust1.t${attempt}.sig`, expiresAt: FUTURE };
      device.receive({ ...ticket, socketUrl: `ws://127.0.0.1:8787/v1/sessions/${LEASE_A.sessionId}/socket` });
      await settle();
      h.sockets.at(-1)?.drop(4401); // the backend refused the ticket
      await settle();
    }
    expect(device.framesOf("ticket_request")).toHaveLength(6);
  });

  it("does not ask for a ticket when the backend said the session's authority moved", async () => {
    const { device, session } = await readyWithFakeClock();
    session.drop(4403);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(device.framesOf("ticket_request")).toEqual([]);
  });

  it("does not ask for a ticket for a lease it closed", async () => {
    const { device, session } = await readyWithFakeClock();
    session.drop(1006);
    device.receive({ type: "close", ...LEASE_A, leaseEpoch: 1, reason: "deleted" });
    await settle();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(device.framesOf("close_ack")).toHaveLength(1);
    expect(device.framesOf("ticket_request")).toEqual([]);
  });

  it("leaves the ticket to the device socket's reconnect when that socket is down too", async () => {
    const { h, device, session } = await readyWithFakeClock();
    device.drop(1006);
    session.drop(1006);
    await vi.advanceTimersByTimeAsync(1_000);
    await settle();
    const second = h.sockets.at(-1);
    expect(second?.url).toContain("/v1/device/socket");
    second?.open();
    second?.receive({ type: "welcome", deviceId: "laptop-1", protocolVersion: 2, connectionEpoch: 2, heartbeatIntervalMs: 22000, serverTime: "2026-11-30T09:00:00Z" });
    await vi.advanceTimersByTimeAsync(60_000);
    // The reconnected device's hello lists the lease, and the backend answers it with a ticket.
    expect(second?.framesOf("hello")[0]).toMatchObject({ leases: [{ leaseId: LEASE_A.leaseId }] });
    expect(h.sockets.flatMap((s) => s.framesOf("ticket_request"))).toEqual([]);
  });
});

describe("SessionRuntime hello after a session-socket reconnect", () => {
  /** Reopens the session socket with a fresh ticket; the hello leaves, no `hello_ack` yet. */
  async function reconnect(h: ReturnType<typeof makeHarness>, device: FakeSocket): Promise<FakeSocket> {
    device.receive({
      type: "session_ticket",
      ...LEASE_A,
      leaseEpoch: 1,
      ticket: "ust1.session-again.sig",
      socketUrl: `ws://127.0.0.1:8787/v1/sessions/${LEASE_A.sessionId}/socket`,
      expiresAt: FUTURE,
    });
    await settle();
    const socket = h.sockets.at(-1);
    if (socket === undefined) throw new Error("no session socket reopened");
    socket.open();
    await settle();
    return socket;
  }

  function helloAck(socket: FakeSocket, verdict: { cancel?: string[]; unknown?: string[] }): void {
    socket.receive({ type: "hello_ack", sessionId: LEASE_A.sessionId, leaseEpoch: 1, cancel: verdict.cancel ?? [], unknown: verdict.unknown ?? [], writesBlocked: false });
  }

  function inputs(h: ReturnType<typeof makeHarness>, tabId: number): number {
    return h.chrome.callsOf("Input.dispatchMouseEvent", tabId).length;
  }

  it("never runs a granted write the hello reported prepared, even when the queue reaches it before hello_ack", async () => {
    const { h, device, tabId, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    // A read holds the queue; the granted write waits behind it.
    let release: () => void = () => undefined;
    h.chrome.handlers.set("Accessibility.getFullAXTree", () => new Promise((resolve) => (release = () => resolve(structuredClone(LOGIN_TREE)))));
    session.receive({ type: "read", commandId: nextUuid(), command: { name: "snapshot" }, deadlineAt: FUTURE });
    await settle();
    const queued = nextUuid();
    expect(await write(session, { name: "click", ref }, { commandId: queued })).toBeUndefined();
    expect(journalStates(h, LEASE_A.sessionId)).toEqual({ [queued]: "prepared" });

    session.drop(1006);
    await settle();
    const reopened = await reconnect(h, device);
    // The backend settles it not_started (its caller may retry) and answers with a cancel.
    expect(reopened.framesOf("hello")[0]?.journal).toEqual([{ commandId: queued, state: "prepared" }]);
    release(); // the queue moves on before hello_ack arrives
    await settle();
    helloAck(reopened, { cancel: [queued] });
    await settle();
    await dropsWritten();

    expect(inputs(h, tabId)).toBe(0);
    expect(journalStates(h, LEASE_A.sessionId)).toEqual({});
    expect(reopened.framesOf("result")).toEqual([]);
    expect(h.store.session.writes.some((w) => w.includes('"started"'))).toBe(false);
  });

  it("reports a write whose started is still being written as started, never prepared, and it acts once", async () => {
    const { h, device, tabId, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    const commandId = nextUuid();
    session.receive({ type: "write_prepare", commandId, name: "click", leaseEpoch: 1, dryRun: false, readyBy: FUTURE });
    await settle();
    expect(journalStates(h, LEASE_A.sessionId)).toEqual({ [commandId]: "prepared" });
    // Storage holds back the next write: the grant's `started`, written while the plan reads.
    let open: () => void = () => undefined;
    h.store.session.gate = new Promise((resolve) => (open = resolve));
    session.receive({ type: "write_grant", commandId, leaseEpoch: 1, command: { name: "click", ref }, dryRun: false, deadlineAt: FUTURE });
    await settle();

    session.drop(1006);
    await settle();
    const reopened = await reconnect(h, device);
    // The hello waits for `started` to land rather than report the entry prepared.
    expect(reopened.framesOf("hello")).toEqual([]);
    expect(inputs(h, tabId)).toBe(0);
    h.store.session.gate = undefined;
    open();
    await settle();
    expect(reopened.framesOf("hello")[0]?.journal).toEqual([{ commandId, state: "started" }]);
    // The backend answers unknown for a started entry; the write acted exactly once.
    helloAck(reopened, { unknown: [commandId] });
    await settle();
    expect(h.chrome.callsOf("Input.dispatchMouseEvent", tabId).map((c) => c.params.type)).toEqual(["mouseMoved", "mousePressed", "mouseReleased"]);
  });

  it("still cancels an ungranted preparation, replays a completed result, and runs a write granted after hello_ack", async () => {
    const { h, device, tabId, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    const completed = nextUuid();
    await write(session, { name: "click", ref }, { commandId: completed });
    const prepared = nextUuid();
    session.receive({ type: "write_prepare", commandId: prepared, name: "click", leaseEpoch: 1, dryRun: false, readyBy: FUTURE });
    await settle();
    const clicks = inputs(h, tabId);

    session.drop(1006);
    await settle();
    const reopened = await reconnect(h, device);
    expect(reopened.framesOf("hello")[0]?.journal).toEqual([
      { commandId: completed, state: "completed_unacked" },
      { commandId: prepared, state: "prepared" },
    ]);
    helloAck(reopened, { cancel: [prepared] });
    await settle();
    expect(reopened.framesOf("result")).toEqual([expect.objectContaining({ commandId: completed, outcome: "succeeded", replayed: true })]);
    reopened.receive({ type: "result_ack", commandId: completed });
    await settle();
    await dropsWritten();
    expect(journalStates(h, LEASE_A.sessionId)).toEqual({});
    // A grant the cancelled preparation might still have had in flight finds nothing to run.
    reopened.receive({ type: "write_grant", commandId: prepared, leaseEpoch: 1, command: { name: "click", ref }, dryRun: false, deadlineAt: FUTURE });
    await settle();
    expect(inputs(h, tabId)).toBe(clicks);

    const fresh = nextUuid();
    expect(await write(reopened, { name: "click", ref }, { commandId: fresh })).toMatchObject({ commandId: fresh, outcome: "succeeded" });
    expect(inputs(h, tabId)).toBe(clicks + 3);
    expect(journalStates(h, LEASE_A.sessionId)).toEqual({ [fresh]: "completed_unacked" });
  });
});
