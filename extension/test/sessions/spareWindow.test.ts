import { describe, expect, it } from "vitest";

import type { TabSnapshot } from "../../src/chrome/facade";
import { PanelService } from "../../src/panel/panelService";
import { CLOSE_REVOKED } from "@understudy/protocol";
import { SPARE_KEY, SPARE_URL, type SpareRecord, UNMARK_EXPRESSION } from "../../src/sessions/spareWindow";
import type { FakeSocket } from "../fakes/fakeSocket";
import { FUTURE, LEASE_A, LEASE_B, connectDevice, enroll, makeHarness, provision, settle } from "../fakes/harness";

type H = ReturnType<typeof makeHarness>;

async function online(store?: H["store"]): Promise<{ h: H; device: FakeSocket }> {
  const h = makeHarness({ spareWindow: true, ...(store === undefined ? {} : { store }) });
  if (store === undefined) enroll(h.store);
  const device = await connectDevice(h);
  return { h, device };
}

function blankTabs(h: H): TabSnapshot[] {
  return [...h.chrome.tabsById.values()].filter((t) => t.url === "about:blank" || t.url === SPARE_URL);
}

function spareRecord(h: H): SpareRecord | undefined {
  return h.store.session.data.get(SPARE_KEY) as SpareRecord | undefined;
}

function onlySpare(h: H): TabSnapshot {
  const record = spareRecord(h);
  const tab = record === undefined ? undefined : h.chrome.tabsById.get(record.tabId);
  if (tab === undefined || !h.profile.manager.spare.isSpareTab(tab.id)) throw new Error("no spare window ready");
  return tab;
}

/** A new service worker in the same browser: same storage, same tabs. */
function restarted(previous: H): H {
  const next = makeHarness({ spareWindow: true, store: previous.store });
  for (const tab of previous.chrome.tabsById.values()) next.chrome.tabsById.set(tab.id, tab);
  next.chrome.nextTabId = previous.chrome.nextTabId;
  return next;
}

describe("SpareWindow", () => {
  it("opens one unattached about:blank window once the device is online, outside the device's capacity", async () => {
    const { h, device } = await online();
    expect(h.chrome.windowsCreated).toBe(1);
    const spare = onlySpare(h);
    expect(blankTabs(h).map((t) => t.id)).toEqual([spare.id]);
    expect(spare.url).toBe(SPARE_URL);
    expect(h.chrome.attached.has(spare.id)).toBe(false);
    expect(h.chrome.calls.filter((c) => c.tabId === spare.id)).toEqual([]);
    expect(h.profile.manager.isControlledTab(spare.id)).toBe(false);
    expect(h.profile.manager.freeCapacity()).toBe(2);
    expect(h.profile.manager.views()).toEqual([]);
    // Capacity was announced before the spare existed and is still all free with it.
    expect(device.framesOf("hello")[0]).toMatchObject({ capacity: { total: 2, free: 2 }, leases: [] });
  });

  it("provisions a session in the spare's tab without opening a window, then opens the next spare", async () => {
    const { h, device } = await online();
    const spare = onlySpare(h);
    let windowsWhenAcked = -1;
    const send = device.send.bind(device);
    device.send = (data: string) => {
      if (data.includes('"provision_ack"')) windowsWhenAcked = h.chrome.windowsCreated;
      send(data);
    };
    let unmarkedWhenAcked = false;
    const sendAck = device.send.bind(device);
    device.send = (data: string) => {
      if (data.includes('"provision_ack"')) {
        unmarkedWhenAcked = h.chrome.callsOf("Runtime.evaluate", spare.id).some((c) => c.params.expression === UNMARK_EXPRESSION);
      }
      sendAck(data);
    };
    const { tabId, session } = await provision(h, device, LEASE_A);
    expect(tabId).toBe(spare.id);
    expect(windowsWhenAcked).toBe(1);
    // The spare's mark is gone before the session is told its tab.
    expect(unmarkedWhenAcked).toBe(true);
    expect(session.framesOf("hello")).toHaveLength(1);
    expect(h.profile.manager.isControlledTab(spare.id)).toBe(true);
    expect(h.profile.manager.spare.isSpareTab(spare.id)).toBe(false);
    // Replenished: a second window, a new spare, and still one lease.
    expect(h.chrome.windowsCreated).toBe(2);
    const next = onlySpare(h);
    expect(next.id).not.toBe(spare.id);
    expect(h.chrome.attached.has(next.id)).toBe(false);
    expect(h.profile.manager.freeCapacity()).toBe(1);
  });

  it("never counts the spare as capacity: two sessions fill the device, a third is refused, the spare stays", async () => {
    const { h, device } = await online();
    await provision(h, device, LEASE_A);
    await provision(h, device, LEASE_B);
    const spare = onlySpare(h);
    expect(h.profile.manager.freeCapacity()).toBe(0);
    device.receive({ type: "provision", leaseId: "2d0a4c66-8f21-4f5b-8a2e-7c1f3e9a5b43", sessionId: "9f2e6b70-5d9c-4b20-9c73-4b9b4c8dbe32", leaseEpoch: 1, allowedOrigins: ["https://example.com"], deadlineAt: FUTURE });
    await settle();
    expect(device.framesOf("provision_ack").at(-1)).toMatchObject({ outcome: "refused", error: { code: "capacity_exhausted" } });
    expect(onlySpare(h).id).toBe(spare.id);
    expect(h.chrome.attached.has(spare.id)).toBe(false);
  });

  it("a provision that arrives while the spare is still opening waits for it instead of opening a second window", async () => {
    const h = makeHarness({ spareWindow: true });
    enroll(h.store);
    const open = h.chrome.windows.createUnfocused;
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    h.chrome.windows.createUnfocused = async (url: string) => {
      await gate;
      return open(url);
    };
    const device = await connectDevice(h);
    device.receive({ type: "provision", ...LEASE_A, leaseEpoch: 1, allowedOrigins: ["https://example.com"], deadlineAt: FUTURE });
    await settle();
    expect(h.chrome.windowsCreated).toBe(0);
    release();
    await settle();
    // No session socket here: the next spare opens after the reopen delay (0 in the harness).
    await new Promise((resolve) => setTimeout(resolve, 5));
    await settle();
    const ack = device.framesOf("provision_ack")[0];
    expect(ack).toMatchObject({ outcome: "provisioned" });
    // One window for the session (the spare it waited for), one for the next spare.
    expect(h.chrome.windowsCreated).toBe(2);
    expect(onlySpare(h).id).not.toBe(ack?.tabId);
  });

  it("closes the spare when the device is disabled and opens none while it stays disabled", async () => {
    const { h, device } = await online();
    const { tabId } = await provision(h, device, LEASE_A);
    const spare = onlySpare(h);
    const panel = new PanelService(h.chrome, h.profile);
    expect((await panel.handle({ type: "set_enabled", enabled: false })).ok).toBe(true);
    await settle();
    expect(h.chrome.removedTabs.sort()).toEqual([tabId, spare.id].sort());
    expect(blankTabs(h)).toEqual([]);
    expect(spareRecord(h)).toBeUndefined();
    expect(h.profile.manager.spare.isSpareTab(spare.id)).toBe(false);
    expect(h.chrome.windowsCreated).toBe(2);
  });

  it("closes the spare when the enrollment is removed", async () => {
    const { h } = await online();
    const spare = onlySpare(h);
    h.store.local.data.clear();
    await h.profile.reloadConfig();
    await settle();
    expect(h.chrome.removedTabs).toEqual([spare.id]);
    expect(spareRecord(h)).toBeUndefined();
  });

  it("closes the spare when the service revokes the device", async () => {
    const { h, device } = await online();
    const spare = onlySpare(h);
    device.drop(CLOSE_REVOKED);
    await settle();
    expect(h.profile.connectionState).toBe("unauthorized");
    expect(h.chrome.removedTabs).toEqual([spare.id]);
    expect(spareRecord(h)).toBeUndefined();
  });

  it("closes a spare that was still opening when the device was disabled", async () => {
    const h = makeHarness({ spareWindow: true });
    enroll(h.store);
    const open = h.chrome.windows.createUnfocused;
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    h.chrome.windows.createUnfocused = async (url: string) => {
      await gate;
      return open(url);
    };
    await connectDevice(h);
    await new PanelService(h.chrome, h.profile).handle({ type: "set_enabled", enabled: false });
    release();
    await settle();
    expect(h.chrome.windowsCreated).toBe(1);
    expect(blankTabs(h)).toEqual([]);
    expect(spareRecord(h)).toBeUndefined();
  });

  it("a person closing the spare is not fought: no new window until the next provision, which opens its own", async () => {
    const { h, device } = await online();
    const spare = onlySpare(h);
    h.chrome.closeTabByUser(spare.id);
    await settle();
    expect(spareRecord(h)).toBeUndefined();
    expect(h.chrome.windowsCreated).toBe(1);
    const { tabId } = await provision(h, device, LEASE_A);
    expect(tabId).not.toBe(spare.id);
    // The provision's own window, then the spare again.
    expect(h.chrome.windowsCreated).toBe(3);
    expect(onlySpare(h).id).not.toBe(tabId);
  });

  it("a spare a person navigated becomes theirs: never handed to a session, never closed", async () => {
    const { h, device } = await online();
    const spare = onlySpare(h);
    h.chrome.navigateByUser(spare.id, "https://news.example.org/");
    await settle();
    expect(h.profile.manager.spare.isSpareTab(spare.id)).toBe(false);
    const { tabId } = await provision(h, device, LEASE_A);
    expect(tabId).not.toBe(spare.id);
    await new PanelService(h.chrome, h.profile).handle({ type: "set_enabled", enabled: false });
    await settle();
    expect(h.chrome.removedTabs).not.toContain(spare.id);
    expect(h.chrome.tabsById.get(spare.id)?.url).toBe("https://news.example.org/");
  });

  it("hands out a fresh window when the spare is no longer blank at the moment it is taken", async () => {
    const { h, device } = await online();
    const spare = onlySpare(h);
    // Changed without an event having arrived yet (a navigation under way).
    h.chrome.tabsById.set(spare.id, { ...spare, pendingUrl: "https://news.example.org/" });
    const { tabId } = await provision(h, device, LEASE_A);
    expect(tabId).not.toBe(spare.id);
    expect(h.chrome.removedTabs).not.toContain(spare.id);
    expect(h.chrome.attached.has(spare.id)).toBe(false);
  });

  it("a person cannot attach the spare from the panel", async () => {
    const { h } = await online();
    const spare = onlySpare(h);
    const outcome = await h.profile.attachRequests.attach(LEASE_A.sessionId, spare.id);
    expect(outcome).toMatchObject({ ok: false, message: expect.stringContaining("spare window") as unknown });
    expect(h.chrome.attached.has(spare.id)).toBe(false);
  });

  it("a restarted service worker adopts the spare of its browser epoch instead of leaving it behind", async () => {
    const first = await online();
    const spare = onlySpare(first.h);
    const second = restarted(first.h);
    await connectDevice(second);
    expect(second.profile.manager.spare.isSpareTab(spare.id)).toBe(true);
    expect(second.chrome.windowsCreated).toBe(0);
  });

  it("after a browser restart closes the spare Chrome restored, leaves a person's blank window alone, and opens a new spare", async () => {
    const first = await online();
    const spare = onlySpare(first.h);
    first.h.store.session.data.clear(); // chrome.storage.session clears with the browser epoch
    const second = makeHarness({ spareWindow: true, store: first.h.store });
    second.chrome.nextTabId = 500; // tab ids of a new browser start elsewhere
    // As Chrome's session restore brings them back: the old spare, with its URL, and a person's blank tab.
    const restoredSpare = { ...spare, id: 400 };
    second.chrome.tabsById.set(restoredSpare.id, restoredSpare);
    const persons = { ...spare, id: 401, url: "about:blank" };
    second.chrome.tabsById.set(persons.id, persons);
    await connectDevice(second);
    await settle();
    expect(second.profile.manager.spare.isSpareTab(restoredSpare.id)).toBe(false);
    expect(second.chrome.removedTabs).toEqual([restoredSpare.id]);
    expect(second.chrome.tabsById.has(persons.id)).toBe(true);
    expect(second.chrome.windowsCreated).toBe(1);
    expect(onlySpare(second).id).not.toBe(restoredSpare.id);
  });

  it("closes a spare Chrome restores after start-up, but never a session's tab or the spare of its own", async () => {
    const { h, device } = await online();
    const { tabId } = await provision(h, device, LEASE_A);
    await new Promise((resolve) => setTimeout(resolve, 5));
    await settle();
    const own = onlySpare(h);
    const late = h.chrome.openTab("");
    h.chrome.navigateByUser(late.id, SPARE_URL);
    // The session's tab still reading the spare's URL (its mark dropped in the page, the event late).
    h.chrome.navigateByUser(tabId, SPARE_URL);
    await settle();
    expect(h.chrome.removedTabs).toEqual([late.id]);
    expect(h.profile.manager.spare.isSpareTab(own.id)).toBe(true);
    expect(h.profile.manager.isControlledTab(tabId)).toBe(true);
  });

  it("a spare record naming a tab a restored lease holds is dropped, not adopted", async () => {
    const first = await online();
    const spare = onlySpare(first.h);
    // The worker stopped right after a provision took the spare, before the record was removed.
    const { tabId } = await provision(first.h, first.device, LEASE_A);
    first.h.store.session.data.set(SPARE_KEY, { tabId, windowId: spare.windowId, browserEpoch: first.h.profile.browserEpoch });
    const second = restarted(first.h);
    await connectDevice(second);
    expect(second.profile.manager.isControlledTab(tabId)).toBe(true);
    expect(second.profile.manager.spare.isSpareTab(tabId)).toBe(false);
  });
});
