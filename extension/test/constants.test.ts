import { describe, expect, it } from "vitest";

import { HEARTBEAT_ACK_TIMEOUT_MS, HEARTBEAT_INTERVAL_MS, RECONNECT_MAX_DELAY_MS, SERVICE_WORKER_IDLE_TIMEOUT_MS } from "../src/constants";
import { DEVICE_OFFLINE_AFTER_MS, RECOVERY_GRACE_MS } from "@understudy/protocol";

describe("timing constants", () => {
  it("beats often enough that Chrome never stops the idle service worker", () => {
    expect(HEARTBEAT_INTERVAL_MS).toBe(22_000);
    expect(HEARTBEAT_INTERVAL_MS).toBeLessThan(SERVICE_WORKER_IDLE_TIMEOUT_MS);
  });

  it("gives up on a silent backend before the backend's 75 s offline mark plus one beat", () => {
    expect(DEVICE_OFFLINE_AFTER_MS).toBe(75_000);
    expect(HEARTBEAT_ACK_TIMEOUT_MS).toBeLessThanOrEqual(DEVICE_OFFLINE_AFTER_MS);
  });

  it("reconnects well inside the 90 s liveness and recovery grace", () => {
    expect(RECOVERY_GRACE_MS).toBe(90_000);
    expect(RECONNECT_MAX_DELAY_MS).toBeLessThan(RECOVERY_GRACE_MS / 2);
  });
});
