import { describe, expect, it } from "vitest";

import { LOADED_TASK_EXPRESSION } from "../../src/cdp/navigationWatch";
import { PAGE_TASK_EXPRESSION } from "../../src/sessions/sessionRuntime";
import type { FakeChrome } from "../fakes/fakeChrome";
import type { FakeSocket } from "../fakes/fakeSocket";
import { LEASE_A, connectDevice, enroll, makeHarness, provision, settle } from "../fakes/harness";
import { installLoginPage, refOf, write } from "../fakes/page";

/** The settle window's own round trip through the page's task queue (SessionRuntime). */
const OWN_ROUND_TRIP = PAGE_TASK_EXPRESSION;
const URL = "https://example.com/login";

async function ready(): Promise<{ h: ReturnType<typeof makeHarness>; tabId: number; session: FakeSocket }> {
  // A settle window, so the runtime would make its page round trip.
  const h = makeHarness({ settleMs: 15 });
  enroll(h.store);
  installLoginPage(h.chrome);
  const device = await connectDevice(h);
  const { tabId, session } = await provision(h, device, LEASE_A, ["https://example.com"]);
  return { h, tabId, session };
}

type Answer = "in_new_document" | "old_document" | "before_load" | "throws";

/**
 * `Page.navigate` commits L1 at once and loads it 5 ms later; the page answers the watch's
 * evaluation as `answer` says. Returns the expressions of every Runtime.evaluate sent.
 */
function loadsAfterCommit(
  chrome: FakeChrome,
  tabId: number,
  answer: Answer,
  /** What the page says in its answer (default: the navigated URL, title "Login") and Chrome's title. */
  page: { href?: string; title?: string; chromeTitle?: string; errorPage?: boolean } = {},
): string[] {
  const expressions: string[] = [];
  let loaded: (() => void) | undefined;
  const load = new Promise<void>((resolve) => {
    loaded = resolve;
  });
  chrome.handlers.set("Page.navigate", (params) => {
    chrome.setTabUrl(tabId, String(params.url), page.chromeTitle ?? "Login");
    const frame = { id: `main-${tabId}`, loaderId: "L1", url: params.url, ...(page.errorPage === true ? { unreachableUrl: params.url } : {}) };
    chrome.emitCdp(tabId, "Page.frameNavigated", { frame, type: "Navigation" });
    setTimeout(() => {
      chrome.emitCdp(tabId, "Page.lifecycleEvent", { frameId: `main-${tabId}`, loaderId: "L1", name: "load", timestamp: 2 });
      loaded?.();
    }, 5);
    return { frameId: `main-${tabId}`, loaderId: "L1" };
  });
  chrome.handlers.set("Runtime.evaluate", async (params) => {
    const expression = String(params.expression);
    expressions.push(expression);
    if (expression !== LOADED_TASK_EXPRESSION) return { result: { type: "undefined" } };
    if (answer === "throws") throw new Error("Execution context was destroyed.");
    const seen = { href: page.href ?? URL, title: page.title ?? "Login" };
    if (answer === "before_load") return { result: { type: "object", value: { timeOrigin: Date.now(), ...seen } } };
    await load;
    const origin = answer === "old_document" ? Date.now() - 60_000 : Date.now();
    return { result: { type: "object", value: { timeOrigin: origin, ...seen } } };
  });
  return expressions;
}

describe("navigate's settle round trip in the new document", () => {
  it("is made once, in the new document while it loads, when that document answers after its load", async () => {
    const { h, tabId, session } = await ready();
    const expressions = loadsAfterCommit(h.chrome, tabId, "in_new_document");
    await write(session, { name: "navigate", url: URL });
    await new Promise((resolve) => setTimeout(resolve, 20));
    await settle();
    expect(session.framesOf("result").at(-1)).toMatchObject({ outcome: "succeeded", result: { name: "navigate", url: URL } });
    expect(expressions).toEqual([LOADED_TASK_EXPRESSION]);
  });

  it.each<[Answer, string]>([
    ["old_document", "with the time origin of a document older than the navigation"],
    ["before_load", "before Chromium reported the new document's load"],
    ["throws", "with an error"],
  ])("is left to the runtime when the evaluation answers %s (%s)", async (answer) => {
    const { h, tabId, session } = await ready();
    const expressions = loadsAfterCommit(h.chrome, tabId, answer);
    await write(session, { name: "navigate", url: URL });
    await new Promise((resolve) => setTimeout(resolve, 20));
    await settle();
    expect(session.framesOf("result").at(-1)).toMatchObject({ outcome: "succeeded", result: { name: "navigate" } });
    expect(expressions).toEqual([LOADED_TASK_EXPRESSION, OWN_ROUND_TRIP]);
  });
});

describe("the settle window's wait for a navigation in flight", () => {
  it("ends on the event that decides the navigation, not on a later poll", async () => {
    const h = makeHarness();
    enroll(h.store);
    installLoginPage(h.chrome);
    const device = await connectDevice(h);
    const { tabId, session } = await provision(h, device, LEASE_A, ["https://example.com"]);
    h.chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${tabId}`, url: URL, loaderId: "L0" } });
    const ref = await refOf(session, "button", "Sign in");
    h.chrome.handlers.set("Input.dispatchMouseEvent", (params) => {
      if (params.type === "mouseReleased") {
        h.chrome.emitCdp(tabId, "Page.frameRequestedNavigation", { frameId: `main-${tabId}`, reason: "anchorClick", url: "https://example.com/next", disposition: "currentTab" });
      }
      return {};
    });
    const result = await write(session, { name: "click", ref });
    expect(result).toBeUndefined(); // the link's navigation is undecided
    h.chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${tabId}`, url: "https://example.com/next", loaderId: "L2" } });
    await settle();
    expect(session.framesOf("result").at(-1)).toMatchObject({ outcome: "succeeded", result: { name: "click" } });
  });
});

describe("a write's result: the tab as its settle round trip saw it, or Chrome's word", () => {
  it("takes a navigate's URL and title from the new document's round trip, without tabs.get", async () => {
    const { h, tabId, session } = await ready();
    loadsAfterCommit(h.chrome, tabId, "in_new_document", { title: "Sign in here", chromeTitle: "stale" });
    const before = h.chrome.tabsGets;
    await write(session, { name: "navigate", url: URL });
    await new Promise((resolve) => setTimeout(resolve, 20));
    await settle();
    expect(session.framesOf("result").at(-1)).toMatchObject({ outcome: "succeeded", result: { name: "navigate", url: URL, title: "Sign in here" } });
    expect(h.chrome.tabsGets).toBe(before);
  });

  it.each<[string, { href?: string; title?: string; errorPage?: boolean }]>([
    ["a URL other than the one CDP reported", { href: "https://elsewhere.example/" }],
    ["an empty title (Chrome shows one of its own)", { title: "  " }],
    ["an error page", { errorPage: true }],
  ])("asks Chrome when the page answers %s", async (_case, page) => {
    const { h, tabId, session } = await ready();
    loadsAfterCommit(h.chrome, tabId, "in_new_document", { ...page, chromeTitle: "From Chrome" });
    const before = h.chrome.tabsGets;
    await write(session, { name: "navigate", url: URL });
    await new Promise((resolve) => setTimeout(resolve, 20));
    await settle();
    expect(session.framesOf("result").at(-1)).toMatchObject({ result: { name: "navigate", url: URL, title: "From Chrome" } });
    expect(h.chrome.tabsGets).toBe(before + 1);
  });

  it("asks Chrome when a document committed after the round trip answered, even at the same URL", async () => {
    const { h, tabId, session } = await ready();
    loadsAfterCommit(h.chrome, tabId, "in_new_document");
    const answerOf = h.chrome.handlers.get("Runtime.evaluate");
    h.chrome.handlers.set("Runtime.evaluate", async (params, target) => {
      const answer = await answerOf?.(params, target);
      // A reload the page asks for on load, after the round trip read the page.
      h.chrome.emitCdp(tabId, "Page.frameRequestedNavigation", { frameId: `main-${tabId}`, reason: "scriptInitiated", url: URL, disposition: "currentTab" });
      setTimeout(() => {
        h.chrome.setTabUrl(tabId, URL, "Reloaded");
        h.chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${tabId}`, loaderId: "L2", url: URL }, type: "Navigation" });
      }, 5);
      return answer;
    });
    await write(session, { name: "navigate", url: URL });
    await new Promise((resolve) => setTimeout(resolve, 30));
    await settle();
    expect(session.framesOf("result").at(-1)).toMatchObject({ result: { name: "navigate", url: URL, title: "Reloaded" } });
  });

  it("takes a click's from its own round trip when the page gave no sign of reacting, and asks Chrome after a settle wait", async () => {
    const { h, tabId, session } = await ready();
    h.chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${tabId}`, url: URL, loaderId: "L0" } });
    h.chrome.setTabUrl(tabId, URL, "Chrome's title");
    const ref = await refOf(session, "button", "Sign in");
    h.chrome.handlers.set("Runtime.evaluate", (params) =>
      params.expression === OWN_ROUND_TRIP ? { result: { type: "object", value: { href: URL, title: "Page's title" } } } : { result: { type: "undefined" } },
    );
    let react = false;
    h.chrome.handlers.set("Input.dispatchMouseEvent", (params) => {
      if (react && params.type === "mouseReleased") h.chrome.emitCdp(tabId, "Page.windowOpen", { url: "https://example.com/popup" });
      return {};
    });
    const quiet = h.chrome.tabsGets;
    await write(session, { name: "click", ref });
    expect(session.framesOf("result").at(-1)).toMatchObject({ result: { name: "click", url: URL, title: "Page's title" } });
    expect(h.chrome.tabsGets).toBe(quiet);
    react = true;
    await write(session, { name: "click", ref });
    await new Promise((resolve) => setTimeout(resolve, 30));
    await settle();
    expect(session.framesOf("result").at(-1)).toMatchObject({ result: { name: "click", url: URL, title: "Chrome's title" } });
    expect(h.chrome.tabsGets).toBe(quiet + 1);
  });

  it("asks Chrome for a write with no settle round trip (type)", async () => {
    const { h, tabId, session } = await ready();
    h.chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${tabId}`, url: URL, loaderId: "L0" } });
    const ref = await refOf(session, "textbox", "Email");
    const before = h.chrome.tabsGets;
    await write(session, { name: "type", ref, text: "a" });
    expect(h.chrome.tabsGets).toBe(before + 1);
  });
});
