import { describe, expect, it } from "vitest";

import type { TabSnapshot } from "../../src/chrome/facade";
import { outboxKey } from "../../src/sessions/dialogOutbox";
import { LEASES_KEY, type LeaseRecord } from "../../src/sessions/leaseStore";
import { GENERATION_RESERVE } from "../../src/sessions/sessionRuntime";
import { journalKey } from "../../src/sessions/writeJournal";
import type { FakeSocket } from "../fakes/fakeSocket";
import { FUTURE, LEASE_A, connectDevice, enroll, makeHarness, provision, settle } from "../fakes/harness";

const SET_UP_CALLS = [
  "Fetch.enable",
  "Target.setAutoAttach",
  "Page.enable",
  "Page.setLifecycleEventsEnabled",
  "Emulation.setFocusEmulationEnabled",
  "Page.getFrameTree",
];

async function online(): Promise<{ h: ReturnType<typeof makeHarness>; device: FakeSocket }> {
  const h = makeHarness();
  enroll(h.store);
  const device = await connectDevice(h);
  return { h, device };
}

function askToProvision(device: FakeSocket): void {
  device.receive({ type: "provision", ...LEASE_A, leaseEpoch: 1, allowedOrigins: ["https://example.com"], deadlineAt: FUTURE });
}

function storedLeases(h: ReturnType<typeof makeHarness>): LeaseRecord[] {
  return (h.store.session.data.get(LEASES_KEY) ?? []) as LeaseRecord[];
}

describe("SessionManager provisioning", () => {
  it("reads the session's journal and outbox in one call while the window opens, and the lease list not at all", async () => {
    const { h, device } = await online();
    const open = h.chrome.windows.createUnfocusedBlank;
    let openWindow: () => void = () => undefined;
    h.chrome.windows.createUnfocusedBlank = () =>
      new Promise<TabSnapshot>((resolve, reject) => {
        openWindow = () => {
          open().then(resolve, reject);
        };
      });
    const readsBefore = h.store.session.reads.length;
    askToProvision(device);
    await settle();
    expect(h.store.session.reads.slice(readsBefore)).toEqual([[journalKey(LEASE_A.sessionId), outboxKey(LEASE_A.sessionId)]]);
    expect(device.framesOf("provision_ack")).toEqual([]);
    openWindow();
    await settle();
    expect(device.framesOf("provision_ack")).toEqual([expect.objectContaining({ outcome: "provisioned" })]);
    // Start-up read the lease list once; the provision wrote its record without reading it again.
    expect(h.store.session.reads.slice(readsBefore)).toHaveLength(1);
    expect(storedLeases(h).map((r) => r.leaseId)).toEqual([LEASE_A.leaseId]);
  });

  it("sends every CDP set-up call, guards first, before the first answers, and acknowledges only once all answered", async () => {
    const { h, device } = await online();
    let answerFetch: () => void = () => undefined;
    h.chrome.handlers.set(
      "Fetch.enable",
      () =>
        new Promise((resolve) => {
          answerFetch = () => {
            resolve({});
          };
        }),
    );
    askToProvision(device);
    await settle();
    const [tabId] = [...h.chrome.tabsById.keys()];
    expect(h.chrome.calls.filter((c) => c.tabId === tabId).map((c) => c.method)).toEqual(SET_UP_CALLS);
    expect(device.framesOf("provision_ack")).toEqual([]);
    expect(h.profile.manager.isControlledTab(tabId ?? -1)).toBe(false);
    answerFetch();
    await settle();
    expect(device.framesOf("provision_ack")).toEqual([expect.objectContaining({ outcome: "provisioned", tabId })]);
    expect(h.profile.manager.isControlledTab(tabId ?? -1)).toBe(true);
  });

  it("answers a document request the origin guard paused while the runtime was still starting", async () => {
    const { h, device } = await online();
    let answerFrameTree: () => void = () => undefined;
    h.chrome.handlers.set(
      "Page.getFrameTree",
      (_params, target) =>
        new Promise((resolve) => {
          answerFrameTree = () => {
            resolve({ frameTree: { frame: { id: `main-${target.tabId}` } } });
          };
        }),
    );
    askToProvision(device);
    await settle();
    const [tabId = -1] = [...h.chrome.tabsById.keys()];
    expect(h.profile.manager.isControlledTab(tabId)).toBe(false);
    const request = (requestId: string, url: string): Record<string, unknown> => ({
      requestId,
      request: { url, method: "GET" },
      frameId: `main-${tabId}`,
      resourceType: "Document",
    });
    h.chrome.emitCdp(tabId, "Fetch.requestPaused", request("early-1", "https://evil.example.net/"));
    h.chrome.emitCdp(tabId, "Fetch.requestPaused", request("early-2", "https://example.com/"));
    await settle();
    expect(h.chrome.callsOf("Fetch.failRequest", tabId)).toEqual([]);
    answerFrameTree();
    await settle();
    expect(h.profile.manager.isControlledTab(tabId)).toBe(true);
    expect(h.chrome.callsOf("Fetch.failRequest", tabId).map((c) => c.params.requestId)).toEqual(["early-1"]);
    expect(h.chrome.callsOf("Fetch.continueRequest", tabId).map((c) => c.params.requestId)).toEqual(["early-2"]);
  });

  it("refuses the provision, closes its tab and leaves no lease record when a set-up call fails", async () => {
    const { h, device } = await online();
    h.chrome.handlers.set("Target.setAutoAttach", () => {
      throw new Error("Target.setAutoAttach is not allowed");
    });
    askToProvision(device);
    await settle();
    const [tabId] = [...h.chrome.tabsById.keys(), ...h.chrome.removedTabs];
    expect(device.framesOf("provision_ack")).toHaveLength(1);
    expect(device.framesOf("provision_ack")[0]).toMatchObject({ outcome: "refused", error: { code: "provision_failed" } });
    expect(h.chrome.removedTabs).toEqual([tabId]);
    expect(storedLeases(h)).toEqual([]);
    expect(h.profile.manager.freeCapacity()).toBe(2);
  });

  it("writes no lease record when Chrome refuses to attach", async () => {
    const { h, device } = await online();
    h.chrome.debugger.attach = () => Promise.reject(new Error("Cannot access a chrome:// URL"));
    const setsBefore = h.store.session.setKeys.length;
    askToProvision(device);
    await settle();
    expect(device.framesOf("provision_ack")).toEqual([expect.objectContaining({ outcome: "refused" })]);
    expect(h.store.session.setKeys.slice(setsBefore)).toEqual([]);
  });

  it("writes the lease record once per GENERATION_RESERVE new documents, with one write and no read", async () => {
    const { h, device } = await online();
    const { tabId } = await provision(h, device, LEASE_A);
    // The session's first document is generation 1; the record covers the reserve above it.
    const ceiling = storedLeases(h)[0]?.generation ?? 0;
    expect(ceiling).toBe(GENERATION_RESERVE);
    const readsBefore = h.store.session.reads.length;
    const setsBefore = h.store.session.setKeys.length;
    for (let i = 0; i < GENERATION_RESERVE; i += 1) {
      h.chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${tabId}`, url: "https://example.com/next" }, type: "Navigation" });
      await settle();
    }
    expect(storedLeases(h)).toEqual([expect.objectContaining({ leaseId: LEASE_A.leaseId, generation: ceiling + GENERATION_RESERVE })]);
    expect(h.store.session.reads.slice(readsBefore)).toEqual([]);
    expect(h.store.session.setKeys.slice(setsBefore)).toEqual([[LEASES_KEY]]);
  });
});

describe("SessionManager lease records", () => {
  it("keeps both a new document's generation and a newer lease epoch that arrive together", async () => {
    const { h, device } = await online();
    const { tabId } = await provision(h, device, LEASE_A, ["https://example.com"]);
    const before = storedLeases(h)[0];
    let release: () => void = () => undefined;
    h.store.session.gate = new Promise((resolve) => {
      release = resolve;
    });
    // The last of these passes the generation ceiling the record holds: a lease write.
    for (let i = 0; i < GENERATION_RESERVE; i += 1) {
      h.chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${tabId}`, url: "https://example.com/" } });
    }
    device.receive({ type: "provision", ...LEASE_A, leaseEpoch: 2, allowedOrigins: ["https://example.com"], deadlineAt: FUTURE });
    await settle();
    h.store.session.gate = undefined;
    release();
    await settle();
    const [after] = storedLeases(h);
    expect(after?.leaseEpoch).toBe(2);
    expect(after?.generation).not.toBe(before?.generation);
  });
});
