import { describe, expect, it } from "vitest";

import type { FakeSocket } from "../fakes/fakeSocket";
import { FUTURE, LEASE_A, connectDevice, enroll, makeHarness, nextUuid, provision, settle } from "../fakes/harness";
import { BUTTON_NODE, installLoginPage, pageFunctionAnswer, refOf } from "../fakes/page";

async function ready(): Promise<{ h: ReturnType<typeof makeHarness>; session: FakeSocket }> {
  const h = makeHarness();
  enroll(h.store);
  installLoginPage(h.chrome);
  const device = await connectDevice(h);
  const { session } = await provision(h, device, LEASE_A, ["https://example.com"]);
  return { h, session };
}

const isStateFunction = (declaration: unknown): boolean => String(declaration).includes("checkVisibility");
const isStabilityFunction = (declaration: unknown): boolean => String(declaration).includes("requestAnimationFrame");

/** Answers the element-state page function from `answer`, counting the calls. */
function answerStates(h: ReturnType<typeof makeHarness>, answer: (call: number, state: unknown) => unknown): () => number {
  let calls = 0;
  h.chrome.handlers.set("Runtime.callFunctionOn", (params) => {
    if (!isStateFunction(params.functionDeclaration)) return { result: { value: pageFunctionAnswer(String(params.functionDeclaration)) } };
    calls += 1;
    const args = params.arguments as { value: unknown }[];
    return { result: { value: answer(calls, args[0]?.value) } };
  });
  return () => calls;
}

/** Sends a wait_for on an element state, lets `waitMs` of real time pass and returns its read_result. */
async function waitForState(session: FakeSocket, ref: string, state: string, timeoutMs: number, waitMs: number): Promise<Record<string, unknown> | undefined> {
  const commandId = nextUuid();
  session.receive({ type: "read", commandId, command: { name: "wait_for", condition: { kind: "element_state", ref, state }, timeoutMs }, deadlineAt: FUTURE });
  await new Promise((resolve) => setTimeout(resolve, waitMs));
  await settle();
  return session.framesOf("read_result").find((f) => f.commandId === commandId);
}

describe("wait_for element states", () => {
  it("polls until the element is visible and passes the state to the page", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    const calls = answerStates(h, (call) => call >= 3);
    const result = await waitForState(session, ref, "visible", 3000, 400);
        expect(result).toMatchObject({ outcome: "succeeded", result: { name: "wait_for", matched: true } });
    expect(calls()).toBe(3);
    const stateCall = h.chrome.callsOf("Runtime.callFunctionOn").find((c) => isStateFunction(c.params.functionDeclaration));
    expect(stateCall?.params).toMatchObject({ objectId: `obj-${BUTTON_NODE}`, arguments: [{ value: "visible" }] });
  });

  it("answers matched false when the state never comes before timeoutMs", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    answerStates(h, () => false);
    const result = await waitForState(session, ref, "enabled", 200, 400);
    expect(result).toMatchObject({ outcome: "succeeded", result: { name: "wait_for", matched: false } });
  });

  it("counts an element whose node is gone as hidden, and waits on it for attached", async () => {
    for (const [state, matched] of [
      ["hidden", true],
      ["attached", false],
    ] as const) {
      const { h, session } = await ready();
      const ref = await refOf(session, "button", "Sign in");
      h.chrome.handlers.set("DOM.resolveNode", () => {
        throw new Error("No node with given id found");
      });
      const result = await waitForState(session, ref, state, 200, 400);
      expect(result).toMatchObject({ outcome: "succeeded", result: { name: "wait_for", matched } });
    }
  });

  it("samples stability over animation frames", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    let samples = 0;
    h.chrome.handlers.set("Runtime.callFunctionOn", (params) => {
      if (!isStabilityFunction(params.functionDeclaration)) return { result: { value: "ok" } };
      samples += 1;
      return { result: { value: samples >= 2 ? "stable" : "moving" } };
    });
    const result = await waitForState(session, ref, "stable", 3000, 300);
    expect(result).toMatchObject({ outcome: "succeeded", result: { name: "wait_for", matched: true } });
    expect(samples).toBe(2);
    const call = h.chrome.callsOf("Runtime.callFunctionOn").find((c) => isStabilityFunction(c.params.functionDeclaration));
    expect(call?.params).toMatchObject({ awaitPromise: true, arguments: [{ value: 1000 }, { value: 1 }] });
  });

  it("fails stale_ref at once for a ref of another document", async () => {
    const { session } = await ready();
    const result = await waitForState(session, "g9e1", "visible", 3000, 50);
    expect(result).toMatchObject({ outcome: "failed", error: { code: "stale_ref" } });
  });

  it("refuses a condition kind it does not know instead of answering matched", async () => {
    const { session } = await ready();
    const commandId = nextUuid();
    session.receive({ type: "read", commandId, command: { name: "wait_for", condition: { kind: "element_gone", ref: "g1e1" }, timeoutMs: 200 }, deadlineAt: FUTURE });
    await settle();
    expect(session.framesOf("read_result").find((f) => f.commandId === commandId)).toMatchObject({
      outcome: "failed",
      error: { code: "invalid_arguments" },
    });
  });
});
