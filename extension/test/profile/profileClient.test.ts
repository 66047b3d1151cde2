import { afterEach, describe, expect, it, vi } from "vitest";

import { CONTAINMENT_WITH_FENCE } from "../../src/sessions/popupFence";
import { BROWSER_EPOCH_KEY } from "../../src/profile/browserEpoch";
import { CLOSE_REVOKED } from "@understudy/protocol";
import { CAPABILITIES, CONNECT_TICKET_PATH } from "../../src/profile/profileClient";
import { CREDENTIAL, DEVICE_TICKET, LEASE_A, LEASE_B, SERVICE_ORIGIN, connectDevice, enroll, makeHarness, provision, settle } from "../fakes/harness";

const EPOCH = "5f1d2c3b-4a59-4e8f-a7b6-c5d4e3f2a1b0";

afterEach(() => {
  vi.useRealTimers();
});

function useFakeClock(): void {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "Date"] });
}

describe("ProfileClient connection", () => {
  it("asks for a ticket with the credential only in Authorization, then opens the socket with the ticket only", async () => {
    const h = makeHarness();
    enroll(h.store);
    await connectDevice(h);
    expect(h.fetches).toHaveLength(1);
    const call = h.fetches[0];
    expect(call?.url).toBe(`${SERVICE_ORIGIN}${CONNECT_TICKET_PATH}`);
    expect(call?.init.method).toBe("POST");
    expect((call?.init.headers as Record<string, string>).Authorization).toBe(`Bearer ${CREDENTIAL}`);
    expect(call?.init.redirect).toBe("error");
    expect(JSON.parse(call?.init.body as string)).toEqual({ browserEpoch: h.profile.browserEpoch });
    expect(h.sockets[0]?.url).toBe(`ws://127.0.0.1:8787/v1/device/socket?ticket=${DEVICE_TICKET}`);
  });

  it("never puts the credential in a URL, a frame or a log line", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const { session } = await provision(h, device, LEASE_A);
    device.drop(1011);
    await settle();
    const urls = [...h.fetches.map((f) => f.url), ...h.sockets.map((s) => s.url)];
    const frames = [...device.sent, ...session.sent].map((f) => JSON.stringify(f));
    for (const text of [...urls, ...frames, ...h.logs]) expect(text).not.toContain(CREDENTIAL);
    expect(h.logs.length).toBeGreaterThan(0);
  });

  it("redacts the credential and live tickets even when a log line would carry them", async () => {
    const h = makeHarness();
    enroll(h.store);
    await connectDevice(h);
    // The logger is the one the client registered its secrets with.
    h.log.info("oops", { leaked: CREDENTIAL, ticket: DEVICE_TICKET });
    expect(h.logs.at(-1)).toBe("understudy: oops leaked=[redacted] ticket=[redacted]");
  });

  it("says hello with both protocol versions, capabilities, epoch, local policy, capacity and leases", async () => {
    const h = makeHarness();
    h.store.session.data.set(BROWSER_EPOCH_KEY, EPOCH);
    enroll(h.store, { mode: "allowlist", origins: ["https://example.com"] });
    const device = await connectDevice(h);
    expect(device.framesOf("hello")).toEqual([
      {
        type: "hello",
        protocolVersions: [1, 2],
        capabilities: [...CAPABILITIES],
        browserEpoch: EPOCH,
        extensionVersion: "0.1.0",
        localOriginPolicy: { mode: "allowlist", origins: ["https://example.com"] },
        capacity: { total: 2, free: 2 },
        leases: [],
        popupContainment: CONTAINMENT_WITH_FENCE,
      },
    ]);
  });

  it("refuses to open a socket URL that is not on the service origin", async () => {
    const h = makeHarness({ socketUrl: "wss://elsewhere.example.net/s" });
    enroll(h.store);
    await h.profile.start();
    await settle();
    expect(h.sockets).toEqual([]);
    expect(h.profile.lastErrorCode).toBe("socket_url_not_on_service_origin");
  });
});

describe("ProfileClient browser epoch", () => {
  it("draws a new epoch when chrome.storage.session has none, persists it and sends an empty recovery report", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const epoch = h.store.session.data.get(BROWSER_EPOCH_KEY);
    expect(typeof epoch).toBe("string");
    expect(device.framesOf("hello")[0]?.browserEpoch).toBe(epoch);
    expect(device.framesOf("recovery_report")).toEqual([{ type: "recovery_report", browserEpoch: epoch, leases: [] }]);
  });

  it("keeps the epoch across a service-worker restart and sends no recovery report", async () => {
    const h = makeHarness();
    h.store.session.data.set(BROWSER_EPOCH_KEY, EPOCH);
    enroll(h.store);
    const device = await connectDevice(h);
    expect(h.profile.browserEpoch).toBe(EPOCH);
    expect(device.framesOf("recovery_report")).toEqual([]);
  });

  it("never controls or closes tabs that exist when a new epoch starts (restored tabs)", async () => {
    const h = makeHarness();
    enroll(h.store);
    const restored = h.chrome.openTab("https://example.com/account", { title: "Account" });
    const device = await connectDevice(h);
    await provision(h, device, LEASE_A);
    expect(h.chrome.attached.has(restored.id)).toBe(false);
    expect(h.chrome.removedTabs).toEqual([]);
    expect(h.chrome.calls.some((c) => c.tabId === restored.id)).toBe(false);
  });
});

describe("ProfileClient heartbeats and reconnects", () => {
  it("sends a heartbeat application frame every 22 s after welcome", async () => {
    useFakeClock();
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    await vi.advanceTimersByTimeAsync(21_999);
    expect(device.framesOf("heartbeat")).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(device.framesOf("heartbeat")).toEqual([{ type: "heartbeat", seq: 0, freeCapacity: 2 }]);
    device.receive({ type: "heartbeat_ack", seq: 0, serverTime: "2026-11-30T09:00:22Z" });
    await vi.advanceTimersByTimeAsync(22_000);
    expect(device.framesOf("heartbeat").map((f) => f.seq)).toEqual([0, 1]);
  });

  it("reconnects when heartbeats go unacknowledged", async () => {
    useFakeClock();
    const h = makeHarness({ random: () => 0 });
    enroll(h.store);
    const device = await connectDevice(h);
    await vi.advanceTimersByTimeAsync(4 * 22_000);
    expect(device.closedByClient).toBeDefined();
    expect(h.profile.lastErrorCode).toBe("heartbeat_timeout");
    await vi.advanceTimersByTimeAsync(1_000);
    await settle();
    expect(h.fetches.length).toBe(2);
  });

  it("backs off exponentially with jitter between failed attempts, capped at 30 s", async () => {
    useFakeClock();
    const h = makeHarness({ fetchStatus: () => 503, random: () => 0.999 });
    enroll(h.store);
    await h.profile.start();
    await settle();
    const delays: number[] = [];
    for (let attempt = 0; attempt < 7; attempt += 1) {
      const before = h.fetches.length;
      const started = Date.now();
      while (h.fetches.length === before) {
        await vi.advanceTimersByTimeAsync(100);
        await settle(1);
      }
      delays.push(Date.now() - started);
    }
    // Nominal 1, 2, 4, 8, 16, 30, 30 s; equal jitter with random≈1 lands just under each.
    expect(delays.map((d) => Math.round(d / 1000))).toEqual([1, 2, 4, 8, 16, 30, 30]);
  });

  it("reconnects after the device socket drops and says hello with the leases it holds", async () => {
    useFakeClock();
    const h = makeHarness({ random: () => 0 });
    enroll(h.store);
    const device = await connectDevice(h);
    const { tabId } = await provision(h, device, LEASE_A);
    device.drop(1006);
    await settle();
    await vi.advanceTimersByTimeAsync(500);
    await settle();
    const again = h.sockets.at(-1);
    expect(again).not.toBe(device);
    again?.open();
    await settle();
    expect(again?.framesOf("hello")[0]).toMatchObject({ capacity: { total: 2, free: 1 }, leases: [{ leaseId: LEASE_A.leaseId, tabId }] });
  });
});

describe("ProfileClient revocation", () => {
  it("stops reconnecting when the service closes the device socket as revoked", async () => {
    useFakeClock();
    const h = makeHarness({ random: () => 0 });
    enroll(h.store);
    const device = await connectDevice(h);
    const opened = h.sockets.length;
    device.drop(CLOSE_REVOKED);
    await settle();
    await vi.advanceTimersByTimeAsync(60_000);
    await settle();
    expect(h.sockets.length).toBe(opened);
    expect(h.profile.connectionState).toBe("unauthorized");
  });

  it("reconnects after any other close", async () => {
    useFakeClock();
    const h = makeHarness({ random: () => 0 });
    enroll(h.store);
    const device = await connectDevice(h);
    const opened = h.sockets.length;
    device.drop(4408);
    await settle();
    await vi.advanceTimersByTimeAsync(60_000);
    await settle();
    expect(h.sockets.length).toBeGreaterThan(opened);
  });
});

describe("ProfileClient leases", () => {
  it("provisions at most two tabs and refuses the third", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    await provision(h, device, LEASE_A);
    await provision(h, device, LEASE_B, ["https://shop.example.org"]);
    device.receive({ type: "provision", leaseId: "2d0a4c66-8f21-4f5b-a02e-7c1f3e9a5b43", sessionId: "9f2e6b70-5d9c-4b20-9c73-4b9b4c8dbe32", leaseEpoch: 1, allowedOrigins: ["https://third.example.org"], deadlineAt: "2026-11-30T09:00:30Z" });
    await settle();
    expect(device.framesOf("provision_ack").at(-1)).toMatchObject({ outcome: "refused", error: { code: "capacity_exhausted" } });
    expect(h.chrome.attached.size).toBe(2);
  });

  it("refuses a lease whose origins the local policy does not admit, before opening any tab", async () => {
    const h = makeHarness();
    enroll(h.store, { mode: "allowlist", origins: ["https://example.com"] });
    const device = await connectDevice(h);
    device.receive({ type: "provision", ...LEASE_A, leaseEpoch: 1, allowedOrigins: ["https://shop.example.org"], deadlineAt: "2026-11-30T09:00:30Z" });
    await settle();
    expect(device.framesOf("provision_ack")[0]).toMatchObject({ outcome: "refused", error: { code: "origin_not_allowed_locally" } });
    expect(h.chrome.tabsById.size).toBe(0);
  });

  it("opens an unattended tab in an unfocused window, and closes it on close", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const { tabId } = await provision(h, device, LEASE_A);
    expect(h.chrome.tabsById.get(tabId)?.url).toBe("about:blank");
    device.receive({ type: "close", ...LEASE_A, leaseEpoch: 1, reason: "deleted" });
    await settle();
    expect(device.framesOf("close_ack")).toEqual([{ type: "close_ack", leaseId: LEASE_A.leaseId, leaseEpoch: 1 }]);
    expect(h.chrome.removedTabs).toEqual([tabId]);
    expect(h.chrome.attached.has(tabId)).toBe(false);
  });

  it("closes an unattended tab before detaching CDP, so no request the origin guard holds is resumed", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const { tabId } = await provision(h, device, LEASE_A);
    const order: string[] = [];
    const { detach } = h.chrome.debugger;
    const { remove } = h.chrome.tabs;
    h.chrome.debugger.detach = (id) => {
      order.push(`detach ${id}`);
      return detach(id);
    };
    h.chrome.tabs.remove = (id) => {
      order.push(`remove ${id}`);
      return remove(id);
    };
    device.receive({ type: "close", ...LEASE_A, leaseEpoch: 1, reason: "deleted" });
    await settle();
    expect(order).toEqual([`remove ${tabId}`, `detach ${tabId}`]);
    expect(device.framesOf("close_ack")).toEqual([{ type: "close_ack", leaseId: LEASE_A.leaseId, leaseEpoch: 1 }]);
  });

  it("reports a lease whose tab the person closed", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const { tabId } = await provision(h, device, LEASE_A);
    h.chrome.closeTabByUser(tabId);
    await settle();
    expect(device.framesOf("lease_released")).toEqual([{ type: "lease_released", leaseId: LEASE_A.leaseId, leaseEpoch: 1, reason: "tab_closed" }]);
    expect(h.profile.manager.freeCapacity()).toBe(2);
  });
});

describe("ProfileClient configuration changes", () => {
  it("reconnects once when the enrollment changes, and not at all when it did not", async () => {
    const h = makeHarness();
    enroll(h.store);
    await connectDevice(h);
    await h.profile.reloadConfig();
    await settle();
    expect(h.fetches).toHaveLength(1);
    enroll(h.store, { mode: "allowlist", origins: ["https://example.com"] });
    await h.profile.reloadConfig();
    await settle();
    expect(h.fetches).toHaveLength(2);
  });
});
