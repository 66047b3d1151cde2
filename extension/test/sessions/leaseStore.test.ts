import { describe, expect, it } from "vitest";

import { LEASES_KEY, type LeaseRecord, LeaseStore } from "../../src/sessions/leaseStore";
import { FakeStorageArea } from "../fakes/fakeChrome";

const RECORD: LeaseRecord = {
  leaseId: "0b8e2a44-6d0f-4d39-8f0c-5a9d1c7e3f21",
  sessionId: "7d0c4f5e-3b7a-4f0e-9a51-2f7f2a6b9c10",
  leaseEpoch: 1,
  tabId: 100,
  mode: "unattended",
  allowedOrigins: ["https://example.com"],
  generation: 7,
  browserEpoch: "epoch-1",
};

describe("LeaseStore", () => {
  it("reads storage once, then writes each change without reading it again", async () => {
    const area = new FakeStorageArea();
    const earlier = { ...RECORD, leaseId: "1c9f3b55-7e10-4e4a-9f1d-6b0e2d8f4a32", tabId: 101 };
    area.data.set(LEASES_KEY, [earlier]);
    const store = new LeaseStore(area);
    expect(await store.load()).toEqual([earlier]);
    await store.put(RECORD);
    await store.put({ ...RECORD, generation: 8 });
    await store.remove(earlier.leaseId);
    expect(area.reads).toEqual([[LEASES_KEY]]);
    expect(area.data.get(LEASES_KEY)).toEqual([{ ...RECORD, generation: 8 }]);
    expect(await store.load()).toEqual([{ ...RECORD, generation: 8 }]);
  });

  it("writes nothing when a put or a remove leaves the list as it is", async () => {
    const area = new FakeStorageArea();
    const store = new LeaseStore(area);
    await store.put(RECORD);
    await store.put({ ...RECORD });
    await store.remove("2d0a4c66-8f21-4f5b-a02e-7c1f3e9a5b43");
    expect(area.setKeys).toEqual([[LEASES_KEY]]);
  });

  it("keeps what storage holds when storage refuses a write", async () => {
    const area = new FakeStorageArea();
    const store = new LeaseStore(area);
    await store.put(RECORD);
    area.failSet = true;
    await expect(store.put({ ...RECORD, leaseEpoch: 2 })).rejects.toThrow(/quota/);
    area.failSet = false;
    expect(await store.load()).toEqual([RECORD]);
    // The refused epoch is not taken for stored: writing it again is a change, so it is written.
    await store.put({ ...RECORD, leaseEpoch: 2 });
    expect(area.data.get(LEASES_KEY)).toEqual([{ ...RECORD, leaseEpoch: 2 }]);
  });
});
