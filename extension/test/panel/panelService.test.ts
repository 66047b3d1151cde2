import { describe, expect, it } from "vitest";

import { PanelService } from "../../src/panel/panelService";
import type { PanelResponse } from "../../src/panel/messages";
import { CREDENTIAL, FUTURE, LEASE_A, connectDevice, enroll, makeHarness, provision, settle } from "../fakes/harness";

const ATTENDED = { sessionId: "3b4c5d6e-7f80-4912-a3b4-c5d6e7f80912", leaseId: "4c5d6e7f-8091-4a23-b4c5-d6e7f8091a23" };

async function attached(): Promise<{ h: ReturnType<typeof makeHarness>; device: Awaited<ReturnType<typeof connectDevice>>; panel: PanelService; tabId: number }> {
  const h = makeHarness();
  enroll(h.store);
  const device = await connectDevice(h);
  const panel = new PanelService(h.chrome, h.profile);
  const tab = h.chrome.openTab("https://example.com/account", { title: "Account", active: true });
  const pending = panel.handle({ type: "attach_tab", sessionId: ATTENDED.sessionId, tabId: tab.id });
  await settle();
  const request = device.framesOf("attach_request")[0];
  expect(request).toMatchObject({ sessionId: ATTENDED.sessionId, tabId: tab.id, browserEpoch: h.profile.browserEpoch });
  device.receive({ type: "attach_result", requestId: request?.requestId, sessionId: ATTENDED.sessionId, outcome: "attached", leaseId: ATTENDED.leaseId, leaseEpoch: 1, allowedOrigins: ["https://example.com"] });
  const response = await pending;
  expect(response.ok).toBe(true);
  return { h, device, panel, tabId: tab.id };
}

describe("PanelService", () => {
  it("attaches the tab a person picked, and a close detaches without closing it", async () => {
    const { h, device, tabId } = await attached();
    expect(h.chrome.attached.has(tabId)).toBe(true);
    device.receive({ type: "close", ...ATTENDED, leaseEpoch: 1, reason: "deleted" });
    await settle();
    expect(device.framesOf("close_ack")).toEqual([{ type: "close_ack", leaseId: ATTENDED.leaseId, leaseEpoch: 1 }]);
    expect(h.chrome.attached.has(tabId)).toBe(false);
    expect(h.chrome.removedTabs).toEqual([]);
    expect(h.chrome.tabsById.has(tabId)).toBe(true);
  });

  it("opens the session socket with the ticket the backend sends right behind attach_result", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const panel = new PanelService(h.chrome, h.profile);
    const tab = h.chrome.openTab("https://example.com/account", { title: "Account", active: true });
    const pending = panel.handle({ type: "attach_tab", sessionId: ATTENDED.sessionId, tabId: tab.id });
    await settle();
    const request = device.framesOf("attach_request")[0];
    // The backend sends both frames in one turn, before the extension has attached CDP.
    device.receive({ type: "attach_result", requestId: request?.requestId, sessionId: ATTENDED.sessionId, outcome: "attached", leaseId: ATTENDED.leaseId, leaseEpoch: 1, allowedOrigins: [] });
    device.receive({
      type: "session_ticket",
      ...ATTENDED,
      leaseEpoch: 1,
      ticket: "ust1.attended-session.sig",
      socketUrl: `ws://127.0.0.1:8787/v1/sessions/${ATTENDED.sessionId}/socket`,
      expiresAt: FUTURE,
    });
    expect((await pending).ok).toBe(true);
    await settle();
    const session = h.sockets.at(-1);
    expect(session?.url).toBe(`ws://127.0.0.1:8787/v1/sessions/${ATTENDED.sessionId}/socket?ticket=ust1.attended-session.sig`);
    session?.open();
    await settle();
    const hellos = session?.framesOf("hello") ?? [];
    expect(hellos).toHaveLength(1);
    expect(hellos[0]).toMatchObject({ sessionId: ATTENDED.sessionId, leaseId: ATTENDED.leaseId, tab: { tabId: tab.id } });
  });

  it("drops a session ticket for a lease it neither holds nor is attaching", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const sockets = h.sockets.length;
    device.receive({
      type: "session_ticket",
      ...ATTENDED,
      leaseEpoch: 1,
      ticket: "ust1.stray.sig",
      socketUrl: `ws://127.0.0.1:8787/v1/sessions/${ATTENDED.sessionId}/socket`,
      expiresAt: FUTURE,
    });
    await settle();
    expect(h.sockets.length).toBe(sockets);
    expect(h.logs.some((line) => line.includes("session_ticket_for_unknown_lease"))).toBe(true);
  });

  it("lets a person detach an attended session, leaving the tab open", async () => {
    const { h, device, panel, tabId } = await attached();
    const response = await panel.handle({ type: "detach_session", sessionId: ATTENDED.sessionId });
    await settle();
    expect(response.ok).toBe(true);
    expect(device.framesOf("lease_released")).toEqual([{ type: "lease_released", leaseId: ATTENDED.leaseId, leaseEpoch: 1, reason: "detached_by_user" }]);
    expect(h.chrome.removedTabs).toEqual([]);
    expect(h.chrome.attached.has(tabId)).toBe(false);
  });

  it("refuses to attach a tab showing an origin the session does not allow, and releases the lease", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const panel = new PanelService(h.chrome, h.profile);
    const tab = h.chrome.openTab("https://mail.example.net/inbox");
    const pending = panel.handle({ type: "attach_tab", sessionId: ATTENDED.sessionId, tabId: tab.id });
    await settle();
    const request = device.framesOf("attach_request")[0];
    device.receive({ type: "attach_result", requestId: request?.requestId, sessionId: ATTENDED.sessionId, outcome: "attached", leaseId: ATTENDED.leaseId, leaseEpoch: 1, allowedOrigins: ["https://example.com"] });
    const response = await pending;
    await settle();
    expect(response.ok).toBe(false);
    expect(h.chrome.attached.has(tab.id)).toBe(false);
    expect(device.framesOf("lease_released")).toEqual([expect.objectContaining({ leaseId: ATTENDED.leaseId, reason: "detached_by_user" })]);
  });

  it("attaches a tab when the backend sends an attended session's empty origin list, leaving the local policy in force", async () => {
    const h = makeHarness();
    enroll(h.store, { mode: "allowlist", origins: ["https://example.com"] });
    const device = await connectDevice(h);
    const panel = new PanelService(h.chrome, h.profile);
    const tab = h.chrome.openTab("https://example.com/account", { title: "Account", active: true });
    const pending = panel.handle({ type: "attach_tab", sessionId: ATTENDED.sessionId, tabId: tab.id });
    await settle();
    const request = device.framesOf("attach_request")[0];
    // What the backend sends for an attended session (its status shows `allowedOrigins: []` too).
    device.receive({ type: "attach_result", requestId: request?.requestId, sessionId: ATTENDED.sessionId, outcome: "attached", leaseId: ATTENDED.leaseId, leaseEpoch: 1, allowedOrigins: [] });
    const response = await pending;
    await settle();
    expect(response).toMatchObject({ ok: true });
    expect(h.chrome.attached.has(tab.id)).toBe(true);
    expect(device.framesOf("lease_released")).toEqual([]);
    const policy = h.profile.manager.bySessionId(ATTENDED.sessionId)?.policy();
    expect(policy?.allowsUrl("https://example.com/settings")).toBe(true);
    expect(policy?.allowsUrl("https://mail.example.net/inbox")).toBe(false);
  });

  it("reports status without the credential, URLs or titles", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const { tabId } = await provision(h, device, LEASE_A);
    h.chrome.setTabUrl(tabId, "https://example.com/private", "Private page");
    const panel = new PanelService(h.chrome, h.profile);
    const response = (await panel.handle({ type: "get_status" })) as Extract<PanelResponse, { ok: true }>;
    expect(response.status).toMatchObject({
      connection: "online",
      browserEpoch: h.profile.browserEpoch,
      enrollment: { source: "local", deviceId: "laptop-1", credentialSet: true },
      capacity: { total: 2, free: 1 },
      sessions: [{ sessionId: LEASE_A.sessionId, mode: "unattended", tabId }],
    });
    const text = JSON.stringify(response);
    expect(text).not.toContain(CREDENTIAL);
    expect(text).not.toContain("private");
    expect(text).not.toContain("Private page");
  });

  it("disabling the device closes its extension-owned tabs and stops connecting", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const { tabId } = await provision(h, device, LEASE_A);
    const panel = new PanelService(h.chrome, h.profile);
    const response = await panel.handle({ type: "set_enabled", enabled: false });
    await settle();
    expect(response.ok).toBe(true);
    expect(h.profile.connectionState).toBe("disabled");
    expect(h.chrome.removedTabs).toEqual([tabId]);
    expect(device.closedByClient).toBeDefined();
  });

  it("refuses local changes while enterprise policy is in force", async () => {
    const h = makeHarness();
    h.store.managed.data.set("serviceOrigin", "https://fleet.example.com");
    h.store.managed.data.set("deviceId", "fleet-7");
    h.store.managed.data.set("deviceCredential", "udc_fleet_credential_value");
    const panel = new PanelService(h.chrome, h.profile);
    const response = await panel.handle({
      type: "save_enrollment",
      form: { serviceOrigin: "https://other.example.com", deviceId: "x", credential: "udc_x_credential", enabled: true, policyMode: "any", policyOrigins: [] },
    });
    expect(response.ok).toBe(false);
    expect(response.status?.enrollment.source).toBe("managed");
    expect(h.store.local.data.size).toBe(0);
  });
});
