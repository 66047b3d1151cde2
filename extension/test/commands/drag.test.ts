import { describe, expect, it } from "vitest";

import type { FakeSocket } from "../fakes/fakeSocket";
import { LEASE_A, connectDevice, enroll, makeHarness, nextUuid, provision, settle } from "../fakes/harness";
import { BUTTON_NODE, EMAIL_NODE, installLoginPage, pageFunctionAnswer, refOf, write } from "../fakes/page";

const OVERLAY_NODE = 99;

async function ready(): Promise<{ h: ReturnType<typeof makeHarness>; session: FakeSocket }> {
  const h = makeHarness();
  enroll(h.store);
  installLoginPage(h.chrome);
  // The Email field at (60, 40), the button at (60, 140), in an 800×600 viewport.
  h.chrome.handlers.set("DOM.getBoxModel", (params) => {
    const top = params.backendNodeId === BUTTON_NODE ? 120 : 20;
    return { model: { content: [10, top, 110, top, 110, top + 40, 10, top + 40] } };
  });
  h.chrome.handlers.set("DOM.getNodeForLocation", (params) => ({ backendNodeId: Number(params.y) > 100 ? BUTTON_NODE : EMAIL_NODE, frameId: "main" }));
  h.chrome.handlers.set("Page.getLayoutMetrics", () => ({ cssLayoutViewport: { clientWidth: 800, clientHeight: 600 } }));
  const device = await connectDevice(h);
  const { session } = await provision(h, device, LEASE_A, ["https://example.com"]);
  return { h, session };
}

/** A drag paces its moves with real timers: wait for its result frame. */
async function drag(session: FakeSocket, command: Record<string, unknown>, dryRun = false): Promise<Record<string, unknown>> {
  const commandId = nextUuid();
  const first = await write(session, command, { dryRun, commandId });
  if (first !== undefined) return first;
  for (let i = 0; i < 200; i += 1) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    await settle(1);
    const frame = session.framesOf("result").find((f) => f.commandId === commandId);
    if (frame !== undefined) return frame;
  }
  throw new Error("no result for the drag");
}

function mouse(h: ReturnType<typeof makeHarness>): Record<string, unknown>[] {
  return h.chrome.callsOf("Input.dispatchMouseEvent").map((c) => c.params);
}

describe("drag", () => {
  it("presses on the source, moves in steps with the button held, and releases on the target", async () => {
    const { h, session } = await ready();
    const source = await refOf(session, "textbox", "Email");
    const target = await refOf(session, "button", "Sign in");
    const result = await drag(session, { name: "drag", ref: source, targetRef: target, steps: 4 });
    expect(result).toMatchObject({ outcome: "succeeded", result: { name: "drag" } });
    const events = mouse(h);
    expect(events.map((e) => e.type)).toEqual(["mouseMoved", "mousePressed", "mouseMoved", "mouseMoved", "mouseMoved", "mouseMoved", "mouseReleased"]);
    expect(events[1]).toMatchObject({ x: 60, y: 40, button: "left", buttons: 1 });
    expect(events.slice(2, 6).map((e) => [e.y, e.buttons])).toEqual([
      [65, 1],
      [90, 1],
      [115, 1],
      [140, 1],
    ]);
    expect(events[6]).toMatchObject({ x: 60, y: 140, button: "left", buttons: 0 });
    // Both ends were hit-tested before the press.
    expect(h.chrome.callsOf("DOM.getNodeForLocation").map((c) => [c.params.x, c.params.y])).toEqual([
      [60, 40],
      [60, 140],
    ]);
  });

  it("drags by an offset from the source's centre", async () => {
    const { h, session } = await ready();
    const source = await refOf(session, "textbox", "Email");
    const result = await drag(session, { name: "drag", ref: source, dx: 100, dy: -10, steps: 2 });
    expect(result).toMatchObject({ outcome: "succeeded" });
    expect(mouse(h).at(-1)).toMatchObject({ type: "mouseReleased", x: 160, y: 30 });
  });

  it("previews both ends in a dry run and presses nothing", async () => {
    const { h, session } = await ready();
    const source = await refOf(session, "textbox", "Email");
    const target = await refOf(session, "button", "Sign in");
    const result = await drag(session, { name: "drag", ref: source, targetRef: target }, true);
    expect(result).toMatchObject({
      outcome: "succeeded",
      result: {
        preview: { targetRole: "textbox", targetName: "Email", allowed: true, drag: { fromX: 60, fromY: 40, toX: 60, toY: 140, steps: 10, dropRole: "button", dropName: "Sign in" } },
      },
    });
    expect(mouse(h)).toEqual([]);
    expect(h.chrome.callsOf("DOM.scrollIntoViewIfNeeded")).toEqual([]);
  });

  it("fails element_obscured naming what covers the source, in a dry run and for real, pressing nothing", async () => {
    const { h, session } = await ready();
    const source = await refOf(session, "textbox", "Email");
    h.chrome.handlers.set("DOM.getNodeForLocation", () => ({ backendNodeId: OVERLAY_NODE, frameId: "main" }));
    h.chrome.handlers.set("DOM.describeNode", (params) => ({ node: { localName: params.backendNodeId === OVERLAY_NODE ? "div" : "input", attributes: params.backendNodeId === OVERLAY_NODE ? ["id", "veil"] : [] } }));
    h.chrome.handlers.set("Runtime.callFunctionOn", (params) => ({
      result: { value: String(params.functionDeclaration).includes("label.control") ? "other" : pageFunctionAnswer(String(params.functionDeclaration)) },
    }));
    for (const dryRun of [true, false]) {
      const result = await drag(session, { name: "drag", ref: source, dx: 50 }, dryRun);
      expect(result).toMatchObject({ outcome: "failed", error: { code: "element_obscured" } });
      expect(String((result.error as { message: string }).message)).toContain('drag start (60, 40): <div id="veil">. Nothing was pressed.');
    }
    expect(mouse(h)).toEqual([]);
  });

  it("fails element_not_interactable when the drop point is outside the visible page", async () => {
    const { h, session } = await ready();
    const source = await refOf(session, "textbox", "Email");
    const result = await drag(session, { name: "drag", ref: source, dx: 0, dy: 900 });
    expect(result).toMatchObject({ outcome: "failed", error: { code: "element_not_interactable" } });
    expect(String((result.error as { message: string }).message)).toContain("drop point (60, 940) is outside the visible page (800×600)");
    expect(mouse(h)).toEqual([]);
  });

  it("refuses a drag with both ends, with neither, or onto itself as invalid_arguments", async () => {
    const { h, session } = await ready();
    const source = await refOf(session, "textbox", "Email");
    const target = await refOf(session, "button", "Sign in");
    for (const command of [
      { name: "drag", ref: source, targetRef: target, dx: 5 },
      { name: "drag", ref: source },
      { name: "drag", ref: source, dx: 0, dy: 0 },
      { name: "drag", ref: source, targetRef: source },
    ]) {
      const result = await drag(session, command);
      expect(result, JSON.stringify(command)).toMatchObject({ outcome: "failed", error: { code: "invalid_arguments" } });
    }
    expect(mouse(h)).toEqual([]);
  });

  it("releases the button when a move fails after the press", async () => {
    const { h, session } = await ready();
    const source = await refOf(session, "textbox", "Email");
    let moves = 0;
    h.chrome.handlers.set("Input.dispatchMouseEvent", (params) => {
      if (params.type === "mouseMoved" && params.buttons === 1 && ++moves === 2) throw new Error("Internal error");
      return {};
    });
    const result = await drag(session, { name: "drag", ref: source, dx: 40, steps: 5 });
    expect(result).toMatchObject({ outcome: "failed" });
    expect(mouse(h).at(-1)).toMatchObject({ type: "mouseReleased", buttons: 0 });
  });
});
