import { describe, expect, it } from "vitest";

import { RECONNECT_MAX_DELAY_MS } from "../../src/constants";
import { reconnectDelayMs } from "../../src/profile/backoff";

describe("reconnectDelayMs", () => {
  it("stays between half and all of the nominal exponential delay", () => {
    for (let attempt = 0; attempt < 12; attempt += 1) {
      const nominal = Math.min(RECONNECT_MAX_DELAY_MS, 1000 * 2 ** attempt);
      expect(reconnectDelayMs(attempt, { random: () => 0 })).toBe(nominal / 2);
      expect(reconnectDelayMs(attempt, { random: () => 0.9999999 })).toBeLessThanOrEqual(nominal);
      expect(reconnectDelayMs(attempt, { random: () => 0.9999999 })).toBeGreaterThan(nominal * 0.99);
    }
  });

  it("never exceeds the cap, however many attempts failed", () => {
    expect(reconnectDelayMs(1_000, { random: () => 0.9999999 })).toBeLessThanOrEqual(RECONNECT_MAX_DELAY_MS);
  });

  it("spreads a fleet out", () => {
    const delays = new Set(Array.from({ length: 50 }, () => reconnectDelayMs(4)));
    expect(delays.size).toBeGreaterThan(10);
  });
});
