import { describe, expect, it } from "vitest";

import { SELECT_EVENT_WAIT_MS } from "../../src/constants";
import type { FakeSocket } from "../fakes/fakeSocket";
import { LEASE_A, connectDevice, enroll, makeHarness, provision } from "../fakes/harness";
import { EMAIL_NODE, installLoginPage, pageFunctionAnswer, refOf, write } from "../fakes/page";

const DOCUMENT_NODE = 1000;

async function ready(answer: unknown): Promise<{ h: ReturnType<typeof makeHarness>; session: FakeSocket }> {
  const h = makeHarness();
  enroll(h.store);
  installLoginPage(h.chrome);
  h.chrome.handlers.set("DOM.getDocument", () => ({ root: { backendNodeId: DOCUMENT_NODE } }));
  h.chrome.handlers.set("Runtime.callFunctionOn", (params) => ({
    result: { value: isSelectFunction(params.functionDeclaration) ? answer : pageFunctionAnswer(String(params.functionDeclaration)) },
  }));
  const device = await connectDevice(h);
  const { session } = await provision(h, device, LEASE_A, ["https://example.com"]);
  return { h, session };
}

const isSelectFunction = (declaration: unknown): boolean => String(declaration).includes("setSelectionRange");

/** The plain arguments of each call of the select function: mode, start, end, text, apply, bound, wait. */
function selectCalls(h: ReturnType<typeof makeHarness>): unknown[][] {
  return h.chrome
    .callsOf("Runtime.callFunctionOn")
    .filter((c) => isSelectFunction(c.params.functionDeclaration))
    .map((c) => (c.params.arguments as { value: unknown }[]).map((a) => a.value));
}

const SELECTED = { status: "ok", text: "jane", length: 4, start: 0, end: 4 };

describe("select_text", () => {
  it("selects the first occurrence of a text in the element and reports it in the result", async () => {
    const { h, session } = await ready(SELECTED);
    const ref = await refOf(session, "textbox", "Email");
    const result = await write(session, { name: "select_text", ref, text: "jane" });
    expect(result).toMatchObject({ outcome: "succeeded", result: { name: "select_text", selection: { text: "jane", length: 4, start: 0, end: 4 } } });
    expect(selectCalls(h)).toEqual([["text", 0, 0, "jane", true, 1000, SELECT_EVENT_WAIT_MS]]);
    // The page function answers once the selection's event ran: its promise is awaited.
    const call = h.chrome.callsOf("Runtime.callFunctionOn").find((c) => isSelectFunction(c.params.functionDeclaration));
    expect(call?.params.awaitPromise).toBe(true);
    expect(h.chrome.callsOf("DOM.resolveNode").at(-1)?.params).toEqual({ backendNodeId: EMAIL_NODE });
  });

  it("previews the selection in a dry run without selecting", async () => {
    const { h, session } = await ready(SELECTED);
    const ref = await refOf(session, "textbox", "Email");
    const result = await write(session, { name: "select_text", ref, start: 0, end: 4 }, { dryRun: true });
    expect(result).toMatchObject({ outcome: "succeeded", result: { preview: { targetRole: "textbox", targetName: "Email", selection: { text: "jane" } } } });
    expect(result?.result).not.toHaveProperty("selection");
    expect(selectCalls(h)).toEqual([["range", 0, 4, "", false, 1000, SELECT_EVENT_WAIT_MS]]);
  });

  it("searches the whole document when no ref is given", async () => {
    const { h, session } = await ready({ ...SELECTED, text: "Sign in", length: 7, start: 20, end: 27 });
    const result = await write(session, { name: "select_text", text: "Sign in" });
    expect(result).toMatchObject({ outcome: "succeeded", result: { selection: { text: "Sign in", start: 20 } } });
    expect(h.chrome.callsOf("DOM.resolveNode").at(-1)?.params).toEqual({ backendNodeId: DOCUMENT_NODE });
    expect(selectCalls(h)[0]?.[0]).toBe("text");
  });

  it("fails invalid_arguments saying the text is not there", async () => {
    const { session } = await ready({ status: "not_found", length: 30 });
    const ref = await refOf(session, "textbox", "Email");
    const result = await write(session, { name: "select_text", ref, text: "refund" });
    expect(result).toMatchObject({ outcome: "failed", error: { code: "invalid_arguments" } });
    expect(String((result?.error as { message: string }).message)).toContain('"refund" is not in the element\'s visible text');
  });

  it("fails invalid_arguments for offsets past the end and element_not_interactable when the page refuses", async () => {
    for (const [answer, code, words] of [
      [{ status: "out_of_range", length: 16 }, "invalid_arguments", "which has 16 characters"],
      [{ status: "refused" }, "element_not_interactable", "does not let this text be selected"],
      [{ status: "empty", length: 0 }, "element_not_interactable", "no visible text"],
    ] as const) {
      const { session } = await ready(answer);
      const ref = await refOf(session, "textbox", "Email");
      const result = await write(session, { name: "select_text", ref, start: 2, end: 40 });
      expect(result, answer.status).toMatchObject({ outcome: "failed", error: { code } });
      expect(String((result?.error as { message: string }).message)).toContain(words);
    }
  });

  it("refuses contradictory or incomplete arguments before calling the page", async () => {
    const { h, session } = await ready(SELECTED);
    const ref = await refOf(session, "textbox", "Email");
    for (const command of [
      { name: "select_text" },
      { name: "select_text", ref, text: "a", start: 0, end: 1 },
      { name: "select_text", start: 0, end: 4 },
      { name: "select_text", ref, start: 3 },
      { name: "select_text", ref, start: 4, end: 4 },
    ]) {
      const result = await write(session, command);
      expect(result, JSON.stringify(command)).toMatchObject({ outcome: "failed", error: { code: "invalid_arguments" } });
    }
    expect(selectCalls(h)).toEqual([]);
  });
});
