import { describe, expect, it } from "vitest";

import { DIALOG_OUTBOX_MAX_BYTES, DIALOG_OUTBOX_MAX_RECORDS } from "../../src/constants";
import type { DialogRecord } from "@understudy/protocol";
import { DialogOutbox, outboxKey } from "../../src/sessions/dialogOutbox";
import { FakeStorageArea } from "../fakes/fakeChrome";
import { LEASE_A, connectDevice, enroll, makeHarness, openSession, provision, settle } from "../fakes/harness";

const SESSION = LEASE_A.sessionId;

function record(i: number, message = "Saved"): DialogRecord {
  return {
    dialogId: `1e2d3c4b-5a69-4788-9a0b-${i.toString().padStart(12, "0")}`,
    dialogType: "alert",
    message,
    accepted: true,
    openedAt: "2026-11-30T09:00:00Z",
    delivery: "delivered",
  };
}

describe("DialogOutbox limits", () => {
  it("accepts 256 records and overflows on the 257th", async () => {
    const area = new FakeStorageArea();
    const outbox = new DialogOutbox(area, SESSION);
    for (let i = 0; i < DIALOG_OUTBOX_MAX_RECORDS; i += 1) expect(await outbox.add(record(i))).toBe("persisted");
    expect(await outbox.add(record(999))).toBe("overflow");
    expect(outbox.overflowed).toBe(true);
    expect((area.data.get(outboxKey(SESSION)) as unknown[]).length).toBe(DIALOG_OUTBOX_MAX_RECORDS);
  });

  it("overflows once the records would exceed 256 KiB", async () => {
    const outbox = new DialogOutbox(new FakeStorageArea(), SESSION);
    const big = "x".repeat(4000);
    let persisted = 0;
    for (let i = 0; i < 100; i += 1) if ((await outbox.add(record(i, big))) === "persisted") persisted += 1;
    expect(persisted).toBeGreaterThan(50);
    expect(persisted).toBeLessThan(100);
    expect(new TextEncoder().encode(JSON.stringify(outbox.pending())).length).toBeLessThanOrEqual(DIALOG_OUTBOX_MAX_BYTES);
  });

  it("reports overflow instead of throwing when storage fails", async () => {
    const area = new FakeStorageArea();
    area.failSet = true;
    const outbox = new DialogOutbox(area, SESSION);
    expect(await outbox.add(record(1))).toBe("overflow");
    expect(outbox.pending()).toEqual([]);
  });
});

describe("dialogs on a controlled tab", () => {
  it("persists the record, then answers the dialog, then sends it; removes it on dialog_ack", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const { tabId, session } = await provision(h, device, LEASE_A);
    let storedWhenAnswered: unknown;
    h.chrome.handlers.set("Page.handleJavaScriptDialog", () => {
      storedWhenAnswered = h.store.session.data.get(outboxKey(SESSION));
      return {};
    });
    h.chrome.emitCdp(tabId, "Page.javascriptDialogOpening", { url: "https://example.com/", message: "Leave this page?", type: "confirm", hasBrowserHandler: true });
    await settle();
    expect(storedWhenAnswered).toEqual([expect.objectContaining({ dialogType: "confirm", message: "Leave this page?", accepted: false })]);
    expect(h.chrome.callsOf("Page.handleJavaScriptDialog", tabId)[0]?.params).toEqual({ accept: false });
    const sent = session.framesOf("dialog");
    expect(sent).toHaveLength(1);
    const dialogId = (sent[0]?.dialog as DialogRecord).dialogId;
    session.receive({ type: "dialog_ack", dialogId });
    await settle();
    expect(h.store.session.data.get(outboxKey(SESSION))).toEqual([]);
  });

  it("accepts alerts and dismisses prompts", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const { tabId } = await provision(h, device, LEASE_A);
    h.chrome.emitCdp(tabId, "Page.javascriptDialogOpening", { url: "", message: "Saved", type: "alert", hasBrowserHandler: true });
    h.chrome.emitCdp(tabId, "Page.javascriptDialogOpening", { url: "", message: "Name?", type: "prompt", defaultPrompt: "x", hasBrowserHandler: true });
    await settle();
    expect(h.chrome.callsOf("Page.handleJavaScriptDialog", tabId).map((c) => c.params.accept)).toEqual([true, false]);
  });

  it("still answers a dialog the outbox cannot hold, marks overflow and emits content-free health", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const { tabId, session } = await provision(h, device, LEASE_A);
    h.store.session.failSet = true;
    h.chrome.emitCdp(tabId, "Page.javascriptDialogOpening", { url: "", message: "Top secret account 4242", type: "alert", hasBrowserHandler: true });
    await settle();
    expect(h.chrome.callsOf("Page.handleJavaScriptDialog", tabId)).toHaveLength(1);
    expect(session.framesOf("dialog")).toEqual([]);
    const health = device.framesOf("health");
    expect(health).toEqual([{ type: "health", status: "degraded", counters: { dialogOverflow: 1 } }]);
    expect(JSON.stringify(device.sent)).not.toContain("4242");
    expect(h.profile.manager.views()[0]?.dialogOverflow).toBe(true);
  });

  it("re-sends undelivered dialogs after the session socket reconnects", async () => {
    const h = makeHarness();
    enroll(h.store);
    const device = await connectDevice(h);
    const { tabId, session } = await provision(h, device, LEASE_A);
    session.drop();
    await settle();
    h.chrome.emitCdp(tabId, "Page.javascriptDialogOpening", { url: "", message: "Saved", type: "alert", hasBrowserHandler: true });
    await settle();
    const again = await openSession(h, device, LEASE_A);
    const frames = again.framesOf("dialog");
    expect(frames).toHaveLength(1);
    expect((frames[0]?.dialog as DialogRecord).message).toBe("Saved");
  });
});
