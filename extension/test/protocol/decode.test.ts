import { describe, expect, it } from "vitest";

import { decodeCommand, decodeDeviceServerFrame, decodeSessionServerFrame } from "../../src/protocol/decode";

describe("frame decoding", () => {
  it("accepts the spec's examples", () => {
    expect(decodeDeviceServerFrame({ type: "welcome", deviceId: "laptop-1", protocolVersion: 2, connectionEpoch: 3, heartbeatIntervalMs: 22000, serverTime: "2026-11-30T09:00:00Z" }).ok).toBe(true);
    expect(decodeSessionServerFrame({ type: "write_grant", commandId: "c", leaseEpoch: 1, command: { name: "click", ref: "g2e14" }, dryRun: false, deadlineAt: "t" }).ok).toBe(true);
  });

  it("names the field that is wrong", () => {
    expect(decodeDeviceServerFrame({ type: "provision", leaseId: "l", sessionId: "s", leaseEpoch: "1", allowedOrigins: [], deadlineAt: "t" })).toEqual({
      ok: false,
      message: "provision.leaseEpoch: expected integer",
    });
    expect(decodeSessionServerFrame({ type: "result_ack" })).toEqual({ ok: false, message: "result_ack.commandId: required" });
    expect(decodeSessionServerFrame({ type: "result_ack", commandId: "c", extra: 1 })).toEqual({ ok: false, message: "result_ack.extra: unknown field" });
    expect(decodeDeviceServerFrame({ type: "launch_missiles" }).ok).toBe(false);
    expect(decodeDeviceServerFrame("not json").ok).toBe(false);
  });

  it("checks commands against the catalog, refs included", () => {
    expect(decodeCommand({ name: "click", ref: "g2e14" }).ok).toBe(true);
    expect(decodeCommand({ name: "click", ref: "#submit" })).toEqual({ ok: false, message: "click.ref: expected ref" });
    expect(decodeCommand({ name: "eval", code: "1" }).ok).toBe(false);
  });
});
