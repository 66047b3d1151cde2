import { describe, expect, it } from "vitest";

import { CONTAINMENT_WITHOUT_FENCE, CONTAINMENT_WITH_FENCE, POPUP_FENCE_RULE_ID, ruleHostOf } from "../../src/sessions/popupFence";
import type { FakeSocket } from "../fakes/fakeSocket";
import { LEASE_A, LEASE_B, connectDevice, enroll, makeHarness, provision, settle } from "../fakes/harness";

async function online(): Promise<{ h: ReturnType<typeof makeHarness>; device: FakeSocket }> {
  const h = makeHarness();
  enroll(h.store);
  const device = await connectDevice(h);
  return { h, device };
}

describe("popup fence", () => {
  it("is down while no tab is controlled, so no tab of the profile is ever held back", async () => {
    const { h } = await online();
    h.chrome.openTab("https://mail.example.com/");
    await settle();
    expect(h.chrome.sessionRules.size).toBe(0);
  });

  it("refuses the first request of a popup of a controlled tab, before Chrome reports the tab", async () => {
    const { h, device } = await online();
    const person = h.chrome.openTab("https://mail.example.com/");
    const { tabId } = await provision(h, device, LEASE_A, ["https://example.com"]);
    // The id the next tab will get: the rule must already stop it, whatever it is.
    const popupId = Math.max(...h.chrome.tabsById.keys()) + 1;
    expect(h.chrome.blocksMainFrameIn(popupId, "example.com")).toBe(true);
    expect(h.chrome.blocksMainFrameIn(tabId, "example.com")).toBe(false);
    expect(h.chrome.blocksMainFrameIn(person.id, "example.com")).toBe(false);
    const popup = h.chrome.openPopup(tabId, "https://elsewhere.example/landing");
    await settle();
    expect(popup.id).toBe(popupId);
    expect(h.chrome.removedTabs).toEqual([popupId]);
    expect(h.chrome.sessionRules.get(POPUP_FENCE_RULE_ID)?.excludedTabIds).not.toContain(popupId);
  });

  it("never matches a request without an initiator (a typed URL, a bookmark, chrome.tabs.create)", async () => {
    const { h, device } = await online();
    await provision(h, device, LEASE_A, ["https://example.com"]);
    const nextId = Math.max(...h.chrome.tabsById.keys()) + 1;
    expect(h.chrome.blocksMainFrameIn(nextId, undefined)).toBe(false);
    expect(h.chrome.blocksMainFrameIn(nextId, "news.example.org")).toBe(false);
  });

  it("spares a tab someone else opens while a session runs, and leaves it open", async () => {
    const { h, device } = await online();
    await provision(h, device, LEASE_A, ["https://example.com"]);
    const person = h.chrome.openTab("https://example.com/inbox");
    const fromPersonsTab = h.chrome.openTab("https://example.com/compose", { openerTabId: person.id });
    await settle();
    expect(h.chrome.blocksMainFrameIn(person.id, "example.com")).toBe(false);
    expect(h.chrome.blocksMainFrameIn(fromPersonsTab.id, "example.com")).toBe(false);
    expect(h.chrome.removedTabs).toEqual([]);
  });

  it("reloads, once, a tab someone opened whose first request lost the race to the fence", async () => {
    const { h, device } = await online();
    const person = h.chrome.openTab("https://example.com/inbox");
    const { tabId } = await provision(h, device, LEASE_A, ["https://example.com"]);
    const opened = h.chrome.openTab("", { openerTabId: person.id, pendingUrl: "https://example.com/read-later" });
    h.chrome.emitMainFrameBlocked(opened.id);
    await settle();
    expect(h.chrome.reloadedTabs).toEqual([opened.id]);
    expect(h.chrome.sessionRules.get(POPUP_FENCE_RULE_ID)?.excludedTabIds).toContain(opened.id);
    h.chrome.emitMainFrameBlocked(opened.id); // blocked again (another extension): no loop
    // Neither the controlled tab (the origin guard's blocks) nor a tab that existed before.
    h.chrome.emitMainFrameBlocked(tabId);
    h.chrome.emitMainFrameBlocked(person.id);
    await settle();
    expect(h.chrome.reloadedTabs).toEqual([opened.id]);
  });

  it("admits a frame's host before its document request continues", async () => {
    const { h, device } = await online();
    const { tabId } = await provision(h, device, LEASE_A, ["https://example.com"]);
    h.chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${tabId}`, url: "https://example.com/", loaderId: "L1" } });
    h.chrome.emitCdp(tabId, "Fetch.requestPaused", {
      requestId: "r-frame",
      request: { url: "https://widgets.example.net/embed" },
      frameId: "child-1",
      resourceType: "Document",
    });
    await settle();
    expect(h.chrome.sessionRules.get(POPUP_FENCE_RULE_ID)?.initiatorDomains).toEqual(["example.com", "widgets.example.net"]);
    expect(h.chrome.callsOf("Fetch.continueRequest", tabId)).toEqual([expect.objectContaining({ params: { requestId: "r-frame" } })]);
    const popupId = Math.max(...h.chrome.tabsById.keys()) + 1;
    expect(h.chrome.blocksMainFrameIn(popupId, "widgets.example.net")).toBe(true);
  });

  it("holds a document request until the fence admitted its host", async () => {
    const { h, device } = await online();
    const { tabId } = await provision(h, device, LEASE_A, ["https://example.com"]);
    const put = h.chrome.netRules.putMainFrameBlock;
    let release: () => void = () => undefined;
    h.chrome.netRules.putMainFrameBlock = (rule) =>
      new Promise<void>((resolve) => {
        release = () => {
          put(rule).then(resolve, resolve);
        };
      });
    h.chrome.emitCdp(tabId, "Fetch.requestPaused", { requestId: "r-1", request: { url: "https://cdn.example.org/frame" }, frameId: "child-2", resourceType: "Document" });
    await settle();
    expect(h.chrome.callsOf("Fetch.continueRequest", tabId)).toEqual([]);
    release();
    await settle();
    expect(h.chrome.callsOf("Fetch.continueRequest", tabId)).toHaveLength(1);
  });

  it("comes down when the last controlled tab is released, and stays up while one remains", async () => {
    const { h, device } = await online();
    await provision(h, device, LEASE_A, ["https://example.com"]);
    await provision(h, device, LEASE_B, ["https://example.org"]);
    expect(h.chrome.sessionRules.get(POPUP_FENCE_RULE_ID)?.initiatorDomains).toEqual(["example.com", "example.org"]);
    device.receive({ type: "close", ...LEASE_A, leaseEpoch: 1, reason: "deleted" });
    await settle();
    expect(h.chrome.sessionRules.size).toBe(1);
    device.receive({ type: "close", ...LEASE_B, leaseEpoch: 1, reason: "deleted" });
    await settle();
    expect(h.chrome.sessionRules.size).toBe(0);
  });

  it("removes a rule an earlier service worker left when nothing is controlled after a restart", async () => {
    const h = makeHarness();
    enroll(h.store);
    h.chrome.sessionRules.set(POPUP_FENCE_RULE_ID, { id: POPUP_FENCE_RULE_ID, excludedTabIds: [-1], initiatorDomains: ["example.com"] });
    await connectDevice(h);
    await settle();
    expect(h.chrome.sessionRules.size).toBe(0);
  });

  it("says in the device hello which popups it stops before their first request, and which it cannot", async () => {
    const { device } = await online();
    expect(device.framesOf("hello").at(-1)?.popupContainment).toEqual(CONTAINMENT_WITH_FENCE);

    const h = makeHarness();
    enroll(h.store);
    h.chrome.failRuleUpdates = true;
    const failing = await connectDevice(h);
    await provision(h, failing, LEASE_A, ["https://example.com"]);
    expect(h.profile.manager.popupContainment()).toEqual(CONTAINMENT_WITHOUT_FENCE);
    expect(Object.values(CONTAINMENT_WITHOUT_FENCE)).toContain("closed_after_request");
    expect(h.logs.some((line) => line.includes("popup_fence_install_failed"))).toBe(true);
  });

  it("names only hosts a rule accepts", () => {
    expect(ruleHostOf("https://Example.COM:8443/path?q")).toBe("example.com");
    expect(ruleHostOf("http://127.0.0.1:5000/")).toBe("127.0.0.1");
    expect(ruleHostOf("about:blank")).toBeUndefined();
    expect(ruleHostOf("data:text/html,hi")).toBeUndefined();
    expect(ruleHostOf("http://[::1]:8080/")).toBeUndefined();
    expect(ruleHostOf("not a url")).toBeUndefined();
  });
});
