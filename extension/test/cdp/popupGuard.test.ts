import { describe, expect, it } from "vitest";

import { LEASE_A, connectDevice, enroll, makeHarness, provision, settle } from "../fakes/harness";

describe("popup guard", () => {
  it("closes a tab opened by a controlled tab and reports it as content-free health", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const { tabId } = await provision(h, device, LEASE_A);
    const popup = h.chrome.openTab("", { openerTabId: tabId });
    await settle();
    expect(h.chrome.removedTabs).toEqual([popup.id]);
    expect(device.framesOf("health")).toEqual([{ type: "health", status: "ok", counters: { popupsClosed: 1 } }]);
  });

  it("leaves alone a tab whose opener is not controlled, and tabs without an opener", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    await provision(h, device, LEASE_A);
    const userTab = h.chrome.openTab("https://mail.example.com/");
    h.chrome.openTab("https://mail.example.com/compose", { openerTabId: userTab.id });
    h.chrome.openTab("https://news.example.com/");
    await settle();
    expect(h.chrome.removedTabs).toEqual([]);
  });

  it("resumes auto-attached frames and workers, and closes an auto-attached popup page", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const { tabId } = await provision(h, device, LEASE_A);
    h.chrome.emitCdp(tabId, "Target.attachedToTarget", { sessionId: "s-frame", targetInfo: { targetId: "t-frame", type: "iframe" }, waitingForDebugger: true });
    h.chrome.emitCdp(tabId, "Target.attachedToTarget", { sessionId: "s-popup", targetInfo: { targetId: "t-popup", type: "page", openerId: "t-main" }, waitingForDebugger: true });
    await settle();
    expect(h.chrome.callsOf("Runtime.runIfWaitingForDebugger", tabId)).toEqual([expect.objectContaining({ sessionId: "s-frame" })]);
    expect(h.chrome.callsOf("Target.closeTarget", tabId)).toEqual([expect.objectContaining({ params: { targetId: "t-popup" } })]);
  });
});
