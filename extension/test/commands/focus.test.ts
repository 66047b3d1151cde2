import { describe, expect, it } from "vitest";

import type { FakeSocket } from "../fakes/fakeSocket";
import { LEASE_A, connectDevice, enroll, makeHarness, provision } from "../fakes/harness";
import { EMAIL_NODE, installLoginPage, refOf, write } from "../fakes/page";

async function ready(): Promise<{ h: ReturnType<typeof makeHarness>; session: FakeSocket }> {
  const h = makeHarness();
  enroll(h.store);
  installLoginPage(h.chrome);
  const device = await connectDevice(h);
  const { session } = await provision(h, device, LEASE_A, ["https://example.com"]);
  return { h, session };
}

describe("focus", () => {
  it("focuses the element through DOM.focus and dispatches no input", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "textbox", "Email");
    const result = await write(session, { name: "focus", ref });
    expect(result).toMatchObject({ outcome: "succeeded", result: { name: "focus" } });
    expect(h.chrome.callsOf("DOM.focus").map((c) => c.params)).toEqual([{ backendNodeId: EMAIL_NODE }]);
    expect(h.chrome.callsOf("Input.dispatchMouseEvent")).toEqual([]);
    expect(h.chrome.callsOf("Input.dispatchKeyEvent")).toEqual([]);
  });

  it("previews the element in a dry run and focuses nothing", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "textbox", "Email");
    const result = await write(session, { name: "focus", ref }, { dryRun: true });
    expect(result).toMatchObject({ outcome: "succeeded", result: { preview: { targetRole: "textbox", targetName: "Email", allowed: true } } });
    expect(h.chrome.callsOf("DOM.focus")).toEqual([]);
  });

  it("fails element_not_interactable when the element cannot take focus", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    h.chrome.handlers.set("DOM.focus", () => {
      throw new Error("Element is not focusable");
    });
    const result = await write(session, { name: "focus", ref });
    expect(result).toMatchObject({ outcome: "failed", error: { code: "element_not_interactable" } });
    expect(String((result?.error as { message: string }).message)).toContain("cannot take keyboard focus");
  });
});
