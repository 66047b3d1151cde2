import { describe, expect, it } from "vitest";

import type { FakeSocket } from "../fakes/fakeSocket";
import { LEASE_A, connectDevice, enroll, makeHarness, provision } from "../fakes/harness";
import { installLoginPage, pageFunctionAnswer, refOf, write } from "../fakes/page";

/** Whether a page function is the one that reads where a click navigates. */
const isNavigationFunction = (declaration: unknown): boolean => String(declaration).includes("framed(");

async function ready(): Promise<{ h: ReturnType<typeof makeHarness>; session: FakeSocket }> {
  const h = makeHarness();
  enroll(h.store);
  installLoginPage(h.chrome);
  const device = await connectDevice(h);
  const { session } = await provision(h, device, LEASE_A, ["https://example.com"]);
  return { h, session };
}

/** What the page function that reads a click's navigation answers, as Chromium returns it. */
function pageAnswers(h: ReturnType<typeof makeHarness>, navigation: Record<string, unknown> | null): void {
  h.chrome.handlers.set("Runtime.callFunctionOn", (params) => {
    // The click's other page functions (the box-stability wait, the hit test) answer as on an
    // unmoving, uncovered page.
    if (!isNavigationFunction(params.functionDeclaration)) return { result: { value: pageFunctionAnswer(String(params.functionDeclaration)) } };
    return { result: { value: navigation } };
  });
}

async function clickPreview(h: ReturnType<typeof makeHarness>, session: FakeSocket): Promise<Record<string, unknown>> {
  const ref = await refOf(session, "button", "Sign in");
  const result = await write(session, { name: "click", ref }, { dryRun: true });
  expect(result).toMatchObject({ outcome: "succeeded", result: { name: "click" } });
  expect(h.chrome.callsOf("Input.dispatchMouseEvent")).toEqual([]);
  return (result?.result as { preview: Record<string, unknown> }).preview;
}

describe("fill_secret dry runs", () => {
  it("checks the field is fillable without a secret value and changes nothing", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "textbox", "Password");
    const result = await write(session, { name: "fill_secret", ref, secretRef: "vault:login-password" }, { dryRun: true });
    expect(result).toMatchObject({
      outcome: "succeeded",
      result: { name: "fill_secret", preview: { targetRole: "textbox", targetName: "Password", allowed: true } },
    });
    // One page call, asked only whether it could fill (apply false), with no value to put there.
    expect(h.chrome.callsOf("Runtime.callFunctionOn").map((c) => c.params.arguments)).toEqual([[{ value: "" }, { value: false }]]);
    expect(h.chrome.callsOf("DOM.focus")).toEqual([]);
    expect(h.chrome.callsOf("Input.insertText")).toEqual([]);
  });

  it("fails a dry run on a field the page cannot fill, as the write would", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "button", "Sign in");
    h.chrome.handlers.set("Runtime.callFunctionOn", () => ({ result: { value: "not_editable" } }));
    const result = await write(session, { name: "fill_secret", ref, secretRef: "vault:login-password" }, { dryRun: true });
    expect(result).toMatchObject({ outcome: "failed", error: { code: "element_not_interactable" } });
  });

  it("never passes a secret value to the page in a dry run, even if a grant carried one", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "textbox", "Password");
    const secret = "correct-horse-battery-staple";
    const result = await write(session, { name: "fill_secret", ref, secretRef: "vault:login-password" }, { dryRun: true, secretValue: secret });
    expect(result).toMatchObject({ outcome: "succeeded" });
    expect(JSON.stringify(h.chrome.calls)).not.toContain(secret);
  });

  it("fills for real with apply true", async () => {
    const { h, session } = await ready();
    const ref = await refOf(session, "textbox", "Password");
    await write(session, { name: "fill_secret", ref, secretRef: "vault:login-password" }, { secretValue: "s3cret" });
    expect(h.chrome.callsOf("Runtime.callFunctionOn").map((c) => c.params.arguments)).toEqual([[{ value: "s3cret" }, { value: true }]]);
  });
});

describe("click dry runs", () => {
  it("previews a link: where it goes, with GET, allowed, in the same tab", async () => {
    const { h, session } = await ready();
    pageAnswers(h, { kind: "link", url: "https://example.com/reset", method: "GET", target: "", framed: false });
    expect(await clickPreview(h, session)).toEqual({
      targetRole: "button",
      targetName: "Sign in",
      navigatesTo: "https://example.com/reset",
      method: "GET",
      allowed: true,
      opensPopup: false,
    });
  });

  it("previews a link to another origin in a new window as not allowed and opening a popup", async () => {
    const { h, session } = await ready();
    pageAnswers(h, { kind: "link", url: "https://elsewhere.example.net/x", method: "GET", target: "_blank", framed: false });
    expect(await clickPreview(h, session)).toMatchObject({ navigatesTo: "https://elsewhere.example.net/x", allowed: false, opensPopup: true });
  });

  it("treats _self, _parent and _top (any case) as the same tab and a named target as a popup", async () => {
    for (const [target, opens] of [
      ["_self", false],
      ["_TOP", false],
      ["_parent", false],
      ["results", true],
    ] as const) {
      const { h, session } = await ready();
      pageAnswers(h, { kind: "link", url: "https://example.com/a", method: "GET", target, framed: false });
      expect((await clickPreview(h, session)).opensPopup, target).toBe(opens);
    }
  });

  it("previews a GET form submission without the form's fields, and a POST one with its action as is", async () => {
    const { h, session } = await ready();
    pageAnswers(h, { kind: "form", url: "https://example.com/search?stale=1", method: "GET", target: "", framed: false });
    expect(await clickPreview(h, session)).toMatchObject({ navigatesTo: "https://example.com/search", method: "GET", allowed: true, opensPopup: false });
    pageAnswers(h, { kind: "form", url: "https://example.com/login?next=%2Fhome", method: "POST", target: "_blank", framed: false });
    expect(await clickPreview(h, session)).toMatchObject({ navigatesTo: "https://example.com/login?next=%2Fhome", method: "POST", opensPopup: true });
  });

  it("leaves the navigation out where the DOM declares none: script buttons, javascript: links, frame targets", async () => {
    for (const navigation of [
      null,
      { kind: "link", url: "javascript:void(0)", method: "GET", target: "", framed: false },
      { kind: "link", url: "https://example.com/in-frame", method: "GET", target: "side", framed: true },
      { kind: "form", url: "https://example.com/x", method: "DIALOG", target: "", framed: false },
    ]) {
      const { h, session } = await ready();
      pageAnswers(h, navigation);
      expect(await clickPreview(h, session), JSON.stringify(navigation)).toEqual({ targetRole: "button", targetName: "Sign in", allowed: true });
    }
  });

  it("clicks for real without asking the page, even where a preview said not allowed", async () => {
    const { h, session } = await ready();
    pageAnswers(h, { kind: "link", url: "https://elsewhere.example.net/x", method: "GET", target: "", framed: false });
    const ref = await refOf(session, "button", "Sign in");
    const result = await write(session, { name: "click", ref });
    expect(result).toMatchObject({ outcome: "succeeded", result: { name: "click" } });
    expect(result?.result).not.toHaveProperty("preview");
    expect(h.chrome.callsOf("Runtime.callFunctionOn").filter((c) => isNavigationFunction(c.params.functionDeclaration))).toEqual([]);
    expect(h.chrome.callsOf("Input.dispatchMouseEvent")).toHaveLength(3);
  });
});
