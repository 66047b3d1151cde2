import { describe, expect, it } from "vitest";

import type { FakeSocket } from "../fakes/fakeSocket";
import { LEASE_A, connectDevice, enroll, makeHarness, provision, settle } from "../fakes/harness";
import { BUTTON_NODE, installLoginPage, pageFunctionAnswer, refOf, write } from "../fakes/page";

const OVERLAY_NODE = 99;

async function ready(): Promise<{ h: ReturnType<typeof makeHarness>; session: FakeSocket }> {
  const h = makeHarness();
  enroll(h.store);
  installLoginPage(h.chrome);
  const device = await connectDevice(h);
  const { session } = await provision(h, device, LEASE_A, ["https://example.com"]);
  return { h, session };
}

const isHitFunction = (declaration: unknown): boolean => String(declaration).includes("label.control");
const isStabilityFunction = (declaration: unknown): boolean => String(declaration).includes("requestAnimationFrame");

/** A page where the hit test at the button's centre finds `hitNode`, which the page judges `verdict`. */
function coverButton(h: ReturnType<typeof makeHarness>, hitNode: number, verdict: string): void {
  h.chrome.handlers.set("DOM.getNodeForLocation", () => ({ backendNodeId: hitNode, frameId: "main" }));
  h.chrome.handlers.set("DOM.describeNode", (params) =>
    params.backendNodeId === OVERLAY_NODE
      ? { node: { localName: "div", attributes: ["id", "cookie-wall", "class", "overlay modal open extra", "role", "dialog", "aria-label", "We use cookies"] } }
      : { node: { localName: "button", attributes: [] } },
  );
  h.chrome.handlers.set("Runtime.callFunctionOn", (params) => ({
    result: { value: isHitFunction(params.functionDeclaration) ? verdict : pageFunctionAnswer(String(params.functionDeclaration)) },
  }));
}

describe("click input", () => {
  it("sends move, press and release in order without waiting for each answer", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    const answers: (() => void)[] = [];
    h.chrome.handlers.set("Input.dispatchMouseEvent", () => new Promise((resolve) => answers.push(() => resolve({}))));
    const pending = write(session, { name: "click", ref });
    for (let i = 0; i < 5; i += 1) await settle();
    expect(h.chrome.callsOf("Input.dispatchMouseEvent").map((c) => c.params.type)).toEqual(["mouseMoved", "mousePressed", "mouseReleased"]);
    expect(session.framesOf("result")).toEqual([]);
    for (const answer of answers) answer();
    await pending;
    for (let i = 0; i < 5; i += 1) await settle();
    expect(session.framesOf("result")).toEqual([expect.objectContaining({ outcome: "succeeded" })]);
  });
});

describe("click hit test", () => {
  it("fails element_obscured naming the covering element, and presses nothing", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    coverButton(h, OVERLAY_NODE, "other");
    const result = await write(session, { name: "click", ref });
    expect(result).toMatchObject({ outcome: "failed", error: { code: "element_obscured" } });
    const message = String((result?.error as { message: string }).message);
    expect(message).toContain('<div id="cookie-wall" class="overlay modal open" role="dialog" aria-label="We use cookies">');
    expect(message).toContain("Close or dismiss the covering element");
    expect(h.chrome.callsOf("Input.dispatchMouseEvent")).toEqual([]);
    // The hit test asked at the centre of the button's box, looking into user-agent shadow DOM.
    expect(h.chrome.callsOf("DOM.getNodeForLocation")[0]?.params).toEqual({ x: 60, y: 40, includeUserAgentShadowDOM: true, ignorePointerEventsNone: false });
    // The page compared the hit node (as an object of its world) against the button.
    const hitCall = h.chrome.callsOf("Runtime.callFunctionOn").find((c) => isHitFunction(c.params.functionDeclaration));
    expect(hitCall?.params).toMatchObject({ objectId: `obj-${BUTTON_NODE}`, arguments: [{ objectId: `obj-${OVERLAY_NODE}` }] });
  });

  it("clicks when the hit is the target, inside it, or a label of it", async () => {
    for (const [hitNode, verdict] of [
      [BUTTON_NODE, "unused"],
      [OVERLAY_NODE, "target"],
      [OVERLAY_NODE, "label"],
    ] as const) {
      const { h, session } = await ready();
      const ref = await refOf(session, "button", "Sign in");
      coverButton(h, hitNode, verdict);
      const result = await write(session, { name: "click", ref });
      expect(result, `${hitNode} ${verdict}`).toMatchObject({ outcome: "succeeded" });
      expect(h.chrome.callsOf("Input.dispatchMouseEvent").map((c) => c.params.type)).toEqual(["mouseMoved", "mousePressed", "mouseReleased"]);
    }
  });

  it("climbs from a hit in a child frame to its iframe owner", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    coverButton(h, OVERLAY_NODE, "other");
    h.chrome.handlers.set("DOM.getNodeForLocation", () => ({ backendNodeId: 500, frameId: "child" }));
    h.chrome.handlers.set("Runtime.callFunctionOn", (params) => {
      if (!isHitFunction(params.functionDeclaration)) return { result: { value: pageFunctionAnswer(String(params.functionDeclaration)) } };
      const hit = (params.arguments as { objectId?: string }[])[0]?.objectId;
      if (hit === "obj-500") throw new Error("Argument should belong to the same JavaScript world as target object");
      return { result: { value: "target" } };
    });
    h.chrome.handlers.set("DOM.getFrameOwner", () => ({ backendNodeId: 77 }));
    const result = await write(session, { name: "click", ref });
    expect(result).toMatchObject({ outcome: "succeeded" });
    expect(h.chrome.callsOf("DOM.getFrameOwner")[0]?.params).toEqual({ frameId: "child" });
  });

  it("fails element_not_interactable when the click point is off the page", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    h.chrome.handlers.set("DOM.getNodeForLocation", () => {
      throw new Error("No node found at given location");
    });
    const result = await write(session, { name: "click", ref });
    expect(result).toMatchObject({ outcome: "failed", error: { code: "element_not_interactable" } });
    expect(h.chrome.callsOf("Input.dispatchMouseEvent")).toEqual([]);
  });
});

describe("waiting for a moving element", () => {
  it("waits for the box to hold still across frames before reading it and pressing", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    const result = await write(session, { name: "click", ref });
    expect(result).toMatchObject({ outcome: "succeeded" });
    const methods = h.chrome.calls.map((c) => (c.method === "Runtime.callFunctionOn" && isStabilityFunction(c.params.functionDeclaration) ? "stability" : c.method));
    const stability = methods.indexOf("stability");
    expect(stability).toBeGreaterThan(methods.indexOf("DOM.scrollIntoViewIfNeeded"));
    expect(stability).toBeLessThan(methods.indexOf("DOM.getBoxModel"));
    const call = h.chrome.callsOf("Runtime.callFunctionOn").find((c) => isStabilityFunction(c.params.functionDeclaration));
    // Bounded by one second (the deadline is far away), stable over one frame from a first
    // sample (Playwright's rule on Chromium), awaited.
    expect(call?.params).toMatchObject({ arguments: [{ value: 1000 }, { value: 1 }], awaitPromise: true });
  });

  it("sends the stability check right behind the scroll, without waiting for the scroll's answer", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    let answerScroll: (() => void) | undefined;
    let checkSentBeforeScrollAnswered = false;
    h.chrome.handlers.set(
      "DOM.scrollIntoViewIfNeeded",
      () =>
        new Promise((resolve) => {
          answerScroll = () => resolve({});
        }),
    );
    h.chrome.handlers.set("Runtime.callFunctionOn", (params) => {
      if (isStabilityFunction(params.functionDeclaration) && answerScroll !== undefined) checkSentBeforeScrollAnswered = true;
      return { result: { value: pageFunctionAnswer(String(params.functionDeclaration)) } };
    });
    const pending = write(session, { name: "click", ref });
    await settle();
    expect(checkSentBeforeScrollAnswered).toBe(true);
    // Nothing is pressed before the scroll answered.
    expect(h.chrome.callsOf("DOM.getBoxModel")).toEqual([]);
    expect(h.chrome.callsOf("Input.dispatchMouseEvent")).toEqual([]);
    answerScroll?.();
    await pending;
    await settle();
    expect(session.framesOf("result").at(-1)).toMatchObject({ outcome: "succeeded" });
    expect(h.chrome.callsOf("Input.dispatchMouseEvent")).toHaveLength(3);
  });

  it("fails with nothing pressed when the element never stops moving", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    h.chrome.handlers.set("Runtime.callFunctionOn", (params) => ({
      result: { value: isStabilityFunction(params.functionDeclaration) ? "moving" : "ok" },
    }));
    const result = await write(session, { name: "click", ref });
    expect(result).toMatchObject({ outcome: "failed", error: { code: "element_not_interactable" } });
    expect(String((result?.error as { message: string }).message)).toContain("kept moving for 1000 ms");
    expect(h.chrome.callsOf("Input.dispatchMouseEvent")).toEqual([]);
  });

  it("goes on when the page renders no frames to judge by", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    h.chrome.handlers.set("Runtime.callFunctionOn", (params) => ({
      result: { value: isStabilityFunction(params.functionDeclaration) ? "unrendered" : "ok" },
    }));
    const result = await write(session, { name: "hover", ref });
    expect(result).toMatchObject({ outcome: "succeeded" });
    expect(h.chrome.callsOf("Input.dispatchMouseEvent").map((c) => c.params.type)).toEqual(["mouseMoved"]);
  });
});
