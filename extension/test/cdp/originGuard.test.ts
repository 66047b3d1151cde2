import { describe, expect, it } from "vitest";

import { ORIGIN_GUARD_PATTERNS, decide } from "../../src/cdp/originGuard";
import { OriginPolicy } from "../../src/config/origins";
import { LEASE_A, connectDevice, enroll, makeHarness, provision, settle } from "../fakes/harness";

async function guardedTab(): Promise<{ h: ReturnType<typeof makeHarness>; tabId: number; device: Awaited<ReturnType<typeof connectDevice>> }> {
  const h = makeHarness();
  enroll(h.store);
  const device = await connectDevice(h);
  const { tabId } = await provision(h, device, LEASE_A, ["https://example.com"]);
  return { h, tabId, device };
}

function paused(tabId: number, requestId: string, url: string, frameId = `main-${tabId}`): Record<string, unknown> {
  return { requestId, request: { url, method: "GET" }, frameId, resourceType: "Document" };
}

describe("origin guard on a controlled tab", () => {
  it("enables Fetch interception of documents before anything else on attach", async () => {
    const { h, tabId } = await guardedTab();
    const calls = h.chrome.calls.filter((c) => c.tabId === tabId).map((c) => c.method);
    expect(calls[0]).toBe("Fetch.enable");
    expect(h.chrome.callsOf("Fetch.enable", tabId)[0]?.params).toEqual({ patterns: ORIGIN_GUARD_PATTERNS });
    expect(calls).toContain("Emulation.setFocusEmulationEnabled");
    expect(h.chrome.callsOf("Target.setAutoAttach", tabId)[0]?.params).toEqual({ autoAttach: true, waitForDebuggerOnStart: true, flatten: true });
  });

  it("fails a disallowed main-frame request with BlockedByClient and counts it", async () => {
    const { h, tabId, device } = await guardedTab();
    h.chrome.emitCdp(tabId, "Fetch.requestPaused", paused(tabId, "r1", "https://evil.example.net/landing"));
    await settle();
    expect(h.chrome.callsOf("Fetch.failRequest", tabId)).toEqual([expect.objectContaining({ params: { requestId: "r1", errorReason: "BlockedByClient" } })]);
    expect(h.chrome.callsOf("Fetch.continueRequest", tabId)).toEqual([]);
    expect(device.framesOf("health")).toEqual([{ type: "health", status: "ok", counters: { navigationsBlocked: 1 } }]);
    expect(JSON.stringify(device.sent)).not.toContain("evil.example.net");
  });

  it("continues an allowed main-frame request, about:blank, and a cross-origin iframe document", async () => {
    const { h, tabId } = await guardedTab();
    h.chrome.emitCdp(tabId, "Fetch.requestPaused", paused(tabId, "r2", "https://example.com/login"));
    h.chrome.emitCdp(tabId, "Fetch.requestPaused", paused(tabId, "r3", "about:blank"));
    h.chrome.emitCdp(tabId, "Fetch.requestPaused", paused(tabId, "r4", "https://ads.example.net/frame", "child-frame"));
    await settle();
    expect(h.chrome.callsOf("Fetch.continueRequest", tabId).map((c) => c.params.requestId)).toEqual(["r2", "r3", "r4"]);
    expect(h.chrome.callsOf("Fetch.failRequest", tabId)).toEqual([]);
  });
});

describe("decide", () => {
  const policy = new OriginPolicy(["https://example.com"], { mode: "any" });

  it("blocks a redirect hop to another origin", () => {
    expect(decide({ requestId: "1", request: { url: "https://evil.example.net/" }, frameId: "main", resourceType: "Document" }, policy, "main")).toBe("block");
  });

  it("fails closed while the main frame is not known yet", () => {
    expect(decide({ requestId: "1", request: { url: "https://evil.example.net/" }, frameId: "x", resourceType: "Document" }, policy, undefined)).toBe("block");
  });

  it("applies the device's local policy on top of the session's origins", () => {
    const local = new OriginPolicy(["https://example.com"], { mode: "allowlist", origins: ["https://other.example.org"] });
    expect(decide({ requestId: "1", request: { url: "https://example.com/" }, frameId: "m", resourceType: "Document" }, local, "m")).toBe("block");
  });
});
