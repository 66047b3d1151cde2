/**
 * Content-free health counters, sent in `health` frames. Counts only: never ids, URLs or text.
 */
import type { DeviceClientHealth } from "@understudy/protocol";

export type HealthCounterName = keyof DeviceClientHealth["counters"];

/** Counters that mean the device is degraded when non-zero in a report. */
const DEGRADING: ReadonlySet<HealthCounterName> = new Set<HealthCounterName>(["dialogOverflow", "dialogInterrupted", "debuggerDetached"]);

export class HealthCounters {
  private pending: Partial<Record<HealthCounterName, number>> = {};
  private readonly totals: Partial<Record<HealthCounterName, number>> = {};

  bump(name: HealthCounterName): void {
    this.pending[name] = (this.pending[name] ?? 0) + 1;
    this.totals[name] = (this.totals[name] ?? 0) + 1;
  }

  /** Takes the counters accumulated since the last frame, or undefined when there are none. */
  takeFrame(): DeviceClientHealth | undefined {
    const counters = this.pending;
    const names = Object.keys(counters) as HealthCounterName[];
    if (names.length === 0) return undefined;
    this.pending = {};
    const degraded = names.some((name) => DEGRADING.has(name));
    return { type: "health", status: degraded ? "degraded" : "ok", counters };
  }

  /** Puts a frame's counters back when it could not be sent. */
  restore(frame: DeviceClientHealth): void {
    for (const [name, value] of Object.entries(frame.counters) as [HealthCounterName, number][]) {
      this.pending[name] = (this.pending[name] ?? 0) + value;
    }
  }

  /** Totals since the service worker started, for the panel. */
  snapshot(): Partial<Record<HealthCounterName, number>> {
    return { ...this.totals };
  }
}
