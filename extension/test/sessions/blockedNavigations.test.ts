import { describe, expect, it } from "vitest";

import { blockCause } from "../../src/cdp/controlledTab";
import { BlockedNavigations, MAX_BLOCKED_PER_COMMAND, originOf } from "../../src/sessions/blockedNavigations";
import type { FakeChrome } from "../fakes/fakeChrome";
import type { FakeSocket } from "../fakes/fakeSocket";
import { LEASE_A, connectDevice, enroll, makeHarness, provision, settle } from "../fakes/harness";
import { installLoginPage, read, refOf, write } from "../fakes/page";

const ELSEWHERE = "https://elsewhere.example";

async function ready(settleMs = 0): Promise<{ h: ReturnType<typeof makeHarness>; tabId: number; session: FakeSocket }> {
  const h = makeHarness({ settleMs });
  enroll(h.store);
  installLoginPage(h.chrome);
  const device = await connectDevice(h);
  const { tabId, session } = await provision(h, device, LEASE_A, ["https://example.com"]);
  h.chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${tabId}`, url: "https://example.com/login", loaderId: "L1" } });
  await settle();
  return { h, tabId, session };
}

/** What Chromium reports when the page follows a link to `url`, and the guard stops it. */
function pageFollowsLink(chrome: FakeChrome, tabId: number, url: string, reason = "anchorClick"): void {
  chrome.emitCdp(tabId, "Page.frameRequestedNavigation", { frameId: `main-${tabId}`, reason, url, disposition: "currentTab" });
  chrome.emitCdp(tabId, "Fetch.requestPaused", { requestId: `r-${reason}`, request: { url }, frameId: `main-${tabId}`, resourceType: "Document" });
}

function showsBlockPage(chrome: FakeChrome, tabId: number, url: string): void {
  chrome.setTabUrl(tabId, url, url);
  chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${tabId}`, url: "chrome-error://chromewebdata/", unreachableUrl: url, loaderId: "L-err" } });
}

describe("blocked navigations", () => {
  it("names what the page did from Chromium's navigation reasons, and a redirect hop as a redirect", () => {
    const url = `${ELSEWHERE}/x`;
    expect(blockCause(url, { url, reason: "anchorClick" }, false)).toBe("link");
    expect(blockCause(url, { url, reason: "formSubmissionPost" }, false)).toBe("form_post");
    expect(blockCause(url, { url, reason: "formSubmissionGet" }, false)).toBe("form_get");
    expect(blockCause(url, { url, reason: "metaTagRefresh" }, false)).toBe("meta_refresh");
    expect(blockCause(url, { url, reason: "httpHeaderRefresh" }, false)).toBe("meta_refresh");
    expect(blockCause(url, { url, reason: "scriptInitiated" }, false)).toBe("script");
    expect(blockCause(url, { url, reason: "somethingNew" }, false)).toBe("other");
    expect(blockCause(url, { url: "https://example.com/", reason: "anchorClick" }, false)).toBe("other");
    expect(blockCause(url, undefined, true)).toBe("redirect");
  });

  it("reports the stop in the click's result, on the session socket, and as the block page until a real document", async () => {
    const { h, tabId, session } = await ready();
    const target = `${ELSEWHERE}/by-link`;
    h.chrome.handlers.set("Input.dispatchMouseEvent", (params) => {
      if (params.type === "mouseReleased") pageFollowsLink(h.chrome, tabId, target);
      return {};
    });
    const ref = await refOf(session, "button", "Sign in");
    const result = await write(session, { name: "click", ref });
    expect(h.chrome.callsOf("Fetch.failRequest", tabId)).toEqual([expect.objectContaining({ params: { requestId: "r-anchorClick", errorReason: "BlockedByClient" } })]);
    const blocked = (result?.result as { blockedNavigations?: unknown[] }).blockedNavigations;
    const [record] = (blocked ?? []) as Record<string, unknown>[];
    expect(blocked).toHaveLength(1);
    expect(record).toEqual({ blockedId: record?.blockedId, kind: "navigation", origin: ELSEWHERE, cause: "link", blockedAt: record?.blockedAt, commandId: result?.commandId });
    expect(typeof record?.blockedId).toBe("string");
    expect(Number.isNaN(Date.parse(String(record?.blockedAt)))).toBe(false);
    expect(session.framesOf("navigation_blocked")).toEqual([{ type: "navigation_blocked", blocked: record }]);
    expect(JSON.stringify(session.framesOf("navigation_blocked"))).not.toContain("/by-link");

    showsBlockPage(h.chrome, tabId, target);
    await settle();
    const hello = await read(session, { name: "hello" });
    expect((hello.result as { tab: { blockedNavigation?: unknown } }).tab.blockedNavigation).toEqual(record);
    const tabs = await read(session, { name: "get_tabs" });
    expect((tabs.result as { tabs: { blockedNavigation?: unknown }[] }).tabs[0]?.blockedNavigation).toEqual(record);
    const snap = await read(session, { name: "snapshot" });
    expect(snap.result).toMatchObject({ name: "snapshot", nodes: [], blockedNavigation: record });
    expect(h.chrome.callsOf("Accessibility.getFullAXTree", tabId)).toHaveLength(1); // only refOf's

    h.chrome.setTabUrl(tabId, "https://example.com/login", "Sign in");
    h.chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${tabId}`, url: "https://example.com/login", loaderId: "L2" } });
    await settle();
    const after = await read(session, { name: "get_tabs" });
    expect((after.result as { tabs: { blockedNavigation?: unknown }[] }).tabs[0]).not.toHaveProperty("blockedNavigation");
    expect((await read(session, { name: "snapshot" })).result).not.toHaveProperty("blockedNavigation");
  });

  it("calls a stop after an allowed hop a redirect", async () => {
    const { h, tabId, session } = await ready();
    h.chrome.handlers.set("Input.dispatchMouseEvent", (params) => {
      if (params.type !== "mouseReleased") return {};
      h.chrome.emitCdp(tabId, "Page.frameRequestedNavigation", { frameId: `main-${tabId}`, reason: "anchorClick", url: "https://example.com/redirect-away" });
      h.chrome.emitCdp(tabId, "Fetch.requestPaused", { requestId: "r1", request: { url: "https://example.com/redirect-away" }, frameId: `main-${tabId}`, resourceType: "Document" });
      h.chrome.emitCdp(tabId, "Fetch.requestPaused", { requestId: "r2", request: { url: `${ELSEWHERE}/landing` }, frameId: `main-${tabId}`, resourceType: "Document", redirectedRequestId: "r1" });
      return {};
    });
    const result = await write(session, { name: "click", ref: await refOf(session, "button", "Sign in") });
    expect((result?.result as { blockedNavigations: { cause: string }[] }).blockedNavigations.map((b) => b.cause)).toEqual(["redirect"]);
  });

  it("attributes a stop to the write only within its settle window; later ones reach the session alone", async () => {
    const { h, tabId, session } = await ready(30);
    h.chrome.handlers.set("Input.dispatchMouseEvent", (params) => {
      if (params.type === "mouseReleased") {
        // Blink reports the new window while the handler runs; Chrome's tab events come later.
        h.chrome.emitCdp(tabId, "Page.windowOpen", { url: `${ELSEWHERE}/popup`, windowName: "", windowFeatures: [], userGesture: true });
        setTimeout(() => {
          h.chrome.openPopup(tabId, `${ELSEWHERE}/popup`);
        }, 5);
      }
      return {};
    });
    const commandId = "5b1e7c2a-9d3f-4e8a-b6c1-0f2e3d4c5b6a";
    await write(session, { name: "click", ref: await refOf(session, "button", "Sign in") }, { commandId });
    await new Promise((resolve) => setTimeout(resolve, 60));
    await settle();
    const result = session.framesOf("result").find((f) => f.commandId === commandId);
    expect((result?.result as { blockedNavigations: unknown[] }).blockedNavigations).toEqual([
      expect.objectContaining({ kind: "popup", cause: "popup", origin: ELSEWHERE, commandId }),
    ]);
    // A meta refresh long after the write: on the socket, attributed to no command.
    pageFollowsLink(h.chrome, tabId, `${ELSEWHERE}/late`, "metaTagRefresh");
    await settle();
    const late = session.framesOf("navigation_blocked").at(-1)?.blocked as Record<string, unknown>;
    expect(late).toMatchObject({ kind: "navigation", cause: "meta_refresh", origin: ELSEWHERE });
    expect(late).not.toHaveProperty("commandId");
  });

  it("waits the settle window only after a sign that the page reacted, or with a frame of another process", async () => {
    const { h, tabId, session } = await ready(400);
    const ref = await refOf(session, "button", "Sign in");
    let n = 0;
    const timed = async (): Promise<number> => {
      const started = Date.now();
      const commandId = `5b1e7c2a-9d3f-4e8a-b6c1-${(n++).toString().padStart(12, "0")}`;
      await write(session, { name: "click", ref }, { commandId });
      while (!session.framesOf("result").some((f) => f.commandId === commandId)) {
        if (Date.now() - started > 2_000) throw new Error("no result");
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      return Date.now() - started;
    };
    // Nothing opened, requested or started: no report can come, so nothing to wait for.
    expect(await timed()).toBeLessThan(300);
    // A window opened (the popup's tab events would follow within the window).
    h.chrome.handlers.set("Input.dispatchMouseEvent", (params) => {
      if (params.type === "mouseReleased") h.chrome.emitCdp(tabId, "Page.windowOpen", { url: `${ELSEWHERE}/p`, windowName: "", windowFeatures: [], userGesture: true });
      return {};
    });
    expect(await timed()).toBeGreaterThanOrEqual(390);
    // A cross-site frame reports its windows on its own session, which this count cannot see.
    h.chrome.handlers.set("Input.dispatchMouseEvent", () => ({}));
    h.chrome.emitCdp(tabId, "Target.attachedToTarget", { sessionId: "oopif-1", targetInfo: { targetId: "frame-1", type: "iframe" }, waitingForDebugger: true });
    await settle();
    expect(await timed()).toBeGreaterThanOrEqual(390);
    h.chrome.emitCdp(tabId, "Target.detachedFromTarget", { sessionId: "oopif-1", targetId: "frame-1" });
    await settle();
    expect(await timed()).toBeLessThan(300);
  });

  it("does not wait out the settle window for a link that opens elsewhere or a navigation that never commits", async () => {
    const { h, tabId, session } = await ready(10);
    const ref = await refOf(session, "button", "Sign in");
    h.chrome.handlers.set("Input.dispatchMouseEvent", (params) => {
      if (params.type === "mouseReleased") {
        h.chrome.emitCdp(tabId, "Page.frameRequestedNavigation", { frameId: `main-${tabId}`, reason: "anchorClick", url: "https://example.com/x", disposition: "newBackgroundTab" });
      }
      return {};
    });
    let started = Date.now();
    await write(session, { name: "click", ref });
    await new Promise((resolve) => setTimeout(resolve, 40));
    await settle();
    expect(session.framesOf("result")).toHaveLength(1);
    expect(Date.now() - started).toBeLessThan(1_000);

    h.chrome.handlers.set("Input.dispatchMouseEvent", (params) => {
      if (params.type === "mouseReleased") {
        h.chrome.emitCdp(tabId, "Page.frameRequestedNavigation", { frameId: `main-${tabId}`, reason: "anchorClick", url: "https://example.com/report.pdf", disposition: "currentTab" });
        setTimeout(() => {
          h.chrome.emitCdp(tabId, "Page.frameStoppedLoading", { frameId: `main-${tabId}` });
        }, 5);
      }
      return {};
    });
    started = Date.now();
    await write(session, { name: "click", ref });
    await new Promise((resolve) => setTimeout(resolve, 60));
    await settle();
    expect(session.framesOf("result")).toHaveLength(2);
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it("keeps at most 50 records per command and an opaque origin as null", () => {
    let n = 0;
    const reported: unknown[] = [];
    const log = new BlockedNavigations({ newId: () => `id-${n++}`, now: () => 0, report: (r) => reported.push(r) });
    log.open("c1");
    for (let i = 0; i < MAX_BLOCKED_PER_COMMAND + 5; i += 1) log.record("popup", "about:blank", "popup");
    const kept = log.close();
    expect(kept).toHaveLength(MAX_BLOCKED_PER_COMMAND);
    expect(reported).toHaveLength(MAX_BLOCKED_PER_COMMAND + 5);
    expect(kept[0]).toMatchObject({ origin: "null", commandId: "c1" });
    expect(log.showing).toBeUndefined(); // popups never leave a block page in the tab
    expect(originOf("https://a.example:8443/x?y")).toBe("https://a.example:8443");
  });
});
