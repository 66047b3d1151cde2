import { describe, expect, it } from "vitest";

import { TYPE_CHUNK_CHARACTERS } from "../../src/commands/input";

import type { FakeSocket } from "../fakes/fakeSocket";
import { FUTURE, LEASE_A, connectDevice, enroll, makeHarness, provision, settle } from "../fakes/harness";
import { installLoginPage, read, refOf, write } from "../fakes/page";

async function ready(): Promise<{ h: ReturnType<typeof makeHarness>; tabId: number; session: FakeSocket }> {
  const h = makeHarness();
  enroll(h.store);
  installLoginPage(h.chrome);
  const device = await connectDevice(h);
  const { tabId, session } = await provision(h, device, LEASE_A, ["https://example.com"]);
  return { h, tabId, session };
}

describe("navigation commands", () => {
  it("navigates to an allowed URL and answers after the load event with the new generation", async () => {
    const { h, tabId, session } = await ready();
    h.chrome.handlers.set("Page.navigate", (params) => {
      setTimeout(() => {
        h.chrome.setTabUrl(tabId, String(params.url), "Login");
        h.chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${tabId}`, loaderId: "L1", url: params.url }, type: "Navigation" });
        h.chrome.emitCdp(tabId, "Page.lifecycleEvent", { frameId: `main-${tabId}`, loaderId: "L0", name: "load", timestamp: 1 });
        h.chrome.emitCdp(tabId, "Page.loadEventFired", { timestamp: 1 });
        setTimeout(() => {
          h.chrome.emitCdp(tabId, "Page.lifecycleEvent", { frameId: `main-${tabId}`, loaderId: "L1", name: "load", timestamp: 2 });
        }, 20);
      }, 5);
      return { frameId: `main-${tabId}`, loaderId: "L1" };
    });
    const before = await read(session, { name: "snapshot" });
    const result = await write(session, { name: "navigate", url: "https://example.com/login" });
    expect(result).toBeUndefined(); // still waiting for the load event
    await new Promise((resolve) => setTimeout(resolve, 10));
    await settle();
    // A load event of another document (an earlier error page) does not end the wait.
    expect(session.framesOf("result").at(-1)?.result).not.toMatchObject({ name: "navigate" });
    await new Promise((resolve) => setTimeout(resolve, 30));
    await settle();
    const final = session.framesOf("result").at(-1);
    expect(final).toMatchObject({ outcome: "succeeded", result: { name: "navigate", url: "https://example.com/login", title: "Login" } });
    expect((final?.result as { generation: number }).generation).toBe((before.result as { generation: number }).generation + 1);
  });

  it("reports a redirect stopped by the origin guard as origin_not_allowed", async () => {
    const { h, session } = await ready();
    h.chrome.handlers.set("Page.navigate", () => ({ frameId: "f", loaderId: "L", errorText: "net::ERR_BLOCKED_BY_CLIENT" }));
    const result = await write(session, { name: "navigate", url: "https://example.com/redirect-out" });
    expect(result).toMatchObject({ outcome: "failed", error: { code: "origin_not_allowed" } });
  });

  it("refuses to go back to a history entry outside the allowed origins, and says when there is none", async () => {
    const { h, session } = await ready();
    h.chrome.handlers.set("Page.getNavigationHistory", () => ({
      currentIndex: 1,
      entries: [
        { id: 1, url: "https://elsewhere.example.net/", title: "" },
        { id: 2, url: "https://example.com/", title: "" },
      ],
    }));
    const back = await write(session, { name: "go_back" });
    expect(back).toMatchObject({ outcome: "failed", error: { code: "origin_not_allowed" } });
    expect(h.chrome.callsOf("Page.navigateToHistoryEntry")).toEqual([]);
    const forward = await write(session, { name: "go_forward" });
    expect(forward).toMatchObject({ outcome: "failed", error: { code: "no_history" } });
  });
});

describe("input commands", () => {
  it("types a key press per character into the focused element and presses Enter when asked", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "textbox", "Email");
    const result = await write(session, { name: "type", ref, text: "jA 1", submit: true });
    expect(result).toMatchObject({ outcome: "succeeded" });
    expect(h.chrome.callsOf("DOM.focus")[0]?.params).toEqual({ backendNodeId: 43 });
    expect(h.chrome.callsOf("Input.insertText")).toEqual([]);
    expect(h.chrome.callsOf("Input.dispatchKeyEvent").map((c) => [c.params.type, c.params.key, c.params.code, c.params.text])).toEqual([
      ["keyDown", "j", "KeyJ", "j"],
      ["keyUp", "j", "KeyJ", undefined],
      ["keyDown", "A", "KeyA", "A"],
      ["keyUp", "A", "KeyA", undefined],
      ["keyDown", " ", "Space", " "],
      ["keyUp", " ", "Space", undefined],
      ["keyDown", "1", "Digit1", "1"],
      ["keyUp", "1", "Digit1", undefined],
      ["keyDown", "Enter", "Enter", "\r"],
      ["keyUp", "Enter", "Enter", undefined],
    ]);
    // Focus first, then the keys in order.
    const methods = h.chrome.calls.map((c) => c.method);
    expect(methods.indexOf("DOM.focus")).toBeLessThan(methods.indexOf("Input.dispatchKeyEvent"));
  });

  it("delivers characters no key produces as text insertions, in order between the keyed ones", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "textbox", "Email");
    await write(session, { name: "type", ref, text: "a中文😀b\nc" });
    const sequence = h.chrome.calls
      .filter((c) => c.method === "Input.insertText" || (c.method === "Input.dispatchKeyEvent" && c.params.type === "keyDown"))
      .map((c) => (c.method === "Input.insertText" ? `insert:${String(c.params.text)}` : `key:${String(c.params.text)}`));
    expect(sequence).toEqual(["key:a", "insert:中文😀", "key:b", "insert:\n", "key:c"]);
  });

  it("inserts the whole text at once with delivery insert, sending no key events", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "textbox", "Email");
    const result = await write(session, { name: "type", ref, text: "jane", delivery: "insert" });
    expect(result).toMatchObject({ outcome: "succeeded" });
    expect(h.chrome.callsOf("Input.insertText").map((c) => c.params)).toEqual([{ text: "jane" }]);
    expect(h.chrome.callsOf("Input.dispatchKeyEvent")).toEqual([]);
  });

  it("sends a chunk's key events in order without waiting for each answer", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "textbox", "Email");
    const answers: (() => void)[] = [];
    h.chrome.handlers.set("Input.dispatchKeyEvent", () => new Promise((resolve) => answers.push(() => resolve({}))));
    const pending = write(session, { name: "type", ref, text: "abc" });
    await settle();
    // Every event is out before the browser answered the first one.
    expect(h.chrome.callsOf("Input.dispatchKeyEvent").map((c) => `${String(c.params.type)}:${String(c.params.key)}`)).toEqual([
      "keyDown:a",
      "keyUp:a",
      "keyDown:b",
      "keyUp:b",
      "keyDown:c",
      "keyUp:c",
    ]);
    expect(session.framesOf("result")).toEqual([]);
    for (const answer of answers) answer();
    await pending;
    await settle();
    expect(session.framesOf("result")).toEqual([expect.objectContaining({ outcome: "succeeded" })]);
  });

  it("stops typing in time to fail deadline_exceeded, saying how far it got", async () => {
    // The clock stands 3.5 s before the grant's deadline, and every key press takes 100 ms: the
    // first chunk of 16 characters leaves 2 s, the second 0.4 s, less than the reserve.
    let clock = Date.parse(FUTURE) - 3_500;
    const h = makeHarness({ now: () => clock });
    enroll(h.store);
    installLoginPage(h.chrome);
    const device = await connectDevice(h);
    const { session } = await provision(h, device, LEASE_A, ["https://example.com"]);
    h.chrome.handlers.set("Input.dispatchKeyEvent", (params) => {
      if (params.type === "keyDown") clock += 100;
      return {};
    });
    const ref = await refOf(session, "textbox", "Email");
    const text = `ab中${"d".repeat(37)}`;
    const result = await write(session, { name: "type", ref, text });
    expect(result).toMatchObject({ outcome: "failed", error: { code: "deadline_exceeded" } });
    expect(String((result?.error as { message: string }).message)).toContain(`Typed ${2 * TYPE_CHUNK_CHARACTERS} of 40 characters`);
    const keyDowns = h.chrome.callsOf("Input.dispatchKeyEvent").filter((c) => c.params.type === "keyDown");
    expect(keyDowns.map((c) => c.params.text).join("")).toBe(`ab${"d".repeat(2 * TYPE_CHUNK_CHARACTERS - 3)}`);
    expect(h.chrome.callsOf("Input.insertText").map((c) => c.params.text)).toEqual(["中"]);
    expect(h.chrome.callsOf("Input.dispatchKeyEvent").filter((c) => c.params.type === "keyUp")).toHaveLength(keyDowns.length);
  });

  it("refuses an unknown delivery before focusing or typing anything", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "textbox", "Email");
    const result = await write(session, { name: "type", ref, text: "jane", delivery: "teleport" });
    expect(result).toMatchObject({ outcome: "failed", error: { code: "invalid_arguments" } });
    expect(h.chrome.callsOf("DOM.focus")).toEqual([]);
    expect(h.chrome.callsOf("Input.dispatchKeyEvent")).toEqual([]);
    expect(h.chrome.callsOf("Input.insertText")).toEqual([]);
  });

  it("presses keys with modifiers and refuses unknown key names", async () => {
    const { h, session } = await ready();
    await write(session, { name: "press_key", key: "a", modifiers: ["Control"] });
    expect(h.chrome.callsOf("Input.dispatchKeyEvent")[0]?.params).toMatchObject({ type: "rawKeyDown", key: "a", code: "KeyA", modifiers: 2 });
    const refused = await write(session, { name: "press_key", key: "Hyperdrive" });
    expect(refused).toMatchObject({ outcome: "failed", error: { code: "invalid_arguments" } });
  });

  it("reports a field the page refuses to fill as not interactable", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    h.chrome.handlers.set("Runtime.callFunctionOn", () => ({ result: { value: "not_editable" } }));
    const result = await write(session, { name: "fill", ref, value: "x" });
    expect(result).toMatchObject({ outcome: "failed", error: { code: "element_not_interactable" } });
  });

  it("fails fill_secret without a secret value in the grant", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "textbox", "Password");
    const result = await write(session, { name: "fill_secret", ref, secretRef: "vault:pw" });
    expect(result).toMatchObject({ outcome: "failed", error: { code: "secret_not_found" } });
    expect(h.chrome.callsOf("Runtime.callFunctionOn")).toEqual([]);
  });
});

describe("read commands", () => {
  it("waits for text to appear", async () => {
    const { h, session } = await ready();
    let polls = 0;
    h.chrome.handlers.set("Runtime.evaluate", () => {
      polls += 1;
      return { result: { value: polls >= 3 } };
    });
    session.receive({ type: "read", commandId: "c3a1e0f2-94d1-4b5e-8d5c-0e6f1a2b3c4d", command: { name: "wait_for", condition: { kind: "text_appears", text: "Welcome" }, timeoutMs: 3000 }, deadlineAt: "2099-01-01T00:00:00Z" });
    await new Promise((resolve) => setTimeout(resolve, 400));
    await settle();
    expect(session.framesOf("read_result")[0]).toMatchObject({ outcome: "succeeded", result: { name: "wait_for", matched: true } });
    expect(String(h.chrome.callsOf("Runtime.evaluate")[0]?.params.expression)).toContain('"Welcome"');
  });

  it("bounds a screenshot to maxWidth", async () => {
    const { h, session } = await ready();
    h.chrome.handlers.set("Page.getLayoutMetrics", () => ({ cssVisualViewport: { pageX: 0, pageY: 0, clientWidth: 2000, clientHeight: 1000 } }));
    h.chrome.handlers.set("Page.captureScreenshot", () => ({ data: "iVBORw0KGgo=" }));
    const result = await read(session, { name: "screenshot", maxWidth: 1000 });
    expect(result.result).toEqual({ name: "screenshot", mimeType: "image/png", data: "iVBORw0KGgo=", width: 1000, height: 500 });
    expect(h.chrome.callsOf("Page.captureScreenshot")[0]?.params).toMatchObject({ clip: { width: 2000, height: 1000, scale: 0.5 } });
  });

  it("refuses a write sent as a read", async () => {
    const { h, session } = await ready();
    const result = await read(session, { name: "click", ref: "g1e1" });
    expect(result).toMatchObject({ outcome: "failed", error: { code: "invalid_arguments" } });
    expect(h.chrome.callsOf("Input.dispatchMouseEvent")).toEqual([]);
  });
});
